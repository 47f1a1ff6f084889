#include "support/bible_verse.h"

#include <filesystem>

#include "headlab/analysis/attention_dump.h"
#include "support/tiny_model.h"

namespace headlab::test {

namespace fs = std::filesystem;

std::unique_ptr<TranslationDataset> bible_fixture_data(const ScratchDir& scratch) {
  const fs::path cache = scratch.dir / "cache";
  fs::create_directories(cache);
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/bible_pairs_small",
           cache / "bible-pairs-engKJV2006eb-spaRV1909eb-val-Ruth-test-Mark", fs::copy_options::recursive);
  TranslationOptions o;  // path "bible", KJV -> RV1909, Ruth val, Mark test: the folder above
  o.bible.cache_dir = cache.string();
  o.seq_len = 48;
  o.batch_tokens = 4 * 48;
  return std::make_unique<TranslationDataset>(o);
}

VerseDump verse_dump(const TranslationDataset& data, int64_t example, uint64_t seed) {
  ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 2);
  spec.vocab_size = data.vocab_size();
  spec.max_seq_len = 48;
  Model<double> model(spec);
  randomize(model, seed);
  VerseDump v;
  v.attention = attention_example(model, data, Split::val, example, 4);
  v.gold = example_gold_alignment(data, Split::val, example, 4, v.attention.row);
  return v;
}

}  // namespace headlab::test
