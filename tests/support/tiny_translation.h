// A tiny random translation model and its data, for decoding and analysis tests: byte-level
// parallel files of 200 lines (ScratchDir::write_parallel_corpus, tiny_translate_config's data),
// and an encoder_decoder of `spec`'s heads fitted to them (their vocabulary, max_seq_len 64),
// randomized so that its logits vary from sentence to sentence.
//   test::TinyTranslation t("translate_split", test::tiny_seq2seq_spec(2, 2, 2, 1), 7);
//   translate_split(t.model, t.data, Split::val, {});
#pragma once

#include <cstdint>
#include <string>

#include "headlab/data/translation.h"
#include "headlab/nn/model.h"
#include "headlab/train/setup.h"
#include "support/scratch.h"
#include "support/tiny_config.h"
#include "support/tiny_model.h"

namespace headlab::test {

struct TinyTranslation {
  ScratchDir scratch;
  TranslationDataset data;
  Model<float> model;
  TinyTranslation(const std::string& prefix, const ModelSpec& spec, uint64_t seed)
      : scratch(prefix),
        data(translation_options(tiny_translate_config(scratch.write_parallel_corpus(200)))),
        model(fitted(spec, data)) {
    randomize(model, seed);
  }
  static ModelSpec fitted(ModelSpec spec, const TranslationDataset& data) {
    spec.vocab_size = data.vocab_size();
    spec.max_seq_len = 64;
    return spec;
  }
};

}  // namespace headlab::test
