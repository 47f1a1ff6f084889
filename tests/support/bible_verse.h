// A Bible verse's attention dump without diatheke, for the gold-alignment tests:
//   auto data = bible_fixture_data(scratch);              // tests/fixtures/bible_pairs_small, bytes
//   const VerseDump v = verse_dump(*data, 0, 3);          // val example 0 under a random model
//   write_attention_dump(dir, "0", v.attention, *data, -1, "ckpt.h5", "val", v.gold);
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "headlab/analysis/heads.h"
#include "headlab/data/translation.h"
#include "support/scratch.h"

namespace headlab::test {

// data.path = "bible" on tests/fixtures/bible_pairs_small (85 short verse pairs with Strong's
// tags), copied to where the export of the default modules and books goes in `scratch`/cache;
// byte tokens, T and S at most 48, 4 rows of 48 per batch (val's three verses in one).
std::unique_ptr<TranslationDataset> bible_fixture_data(const ScratchDir& scratch);

// Val example `example` under a tiny encoder_decoder (2 + 2 layers, 2 heads of each kind)
// randomized with `seed`: its attention, and its gold alignment (example_gold_alignment).
struct VerseDump {
  AttentionExample attention;
  std::vector<uint8_t> gold;
};
VerseDump verse_dump(const TranslationDataset& data, int64_t example, uint64_t seed);

}  // namespace headlab::test
