// libFuzzer target: a stored sentencepiece model (src/data/sentencepiece_tokenizer.cpp,
// load_tokenizer), as a run folder's tokenizer.model or a checkpoint's tokenizer/model holds it,
// which a user or a full disk may have damaged. Input: the model's bytes. A model that loads
// encodes and decodes a fixed text, and every id it gives is in its vocabulary.
#include <cstdlib>

#include "fuzz_support.h"
#include "headlab/data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  fuzz::expect_only_headlab_errors([&] {
    const auto tokenizer =
        load_tokenizer("sentencepiece", std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    std::vector<int32_t> ids;
    tokenizer->encode("In the beginning God created the heaven and the earth.\n  And \xc3\xa9 7\n", ids);
    for (int32_t id : ids)
      if (id < 0 || id >= tokenizer->vocab_size()) {
        std::fprintf(stderr, "fuzz: encode gave id %d outside the vocabulary of %lld\n", id,
                     static_cast<long long>(tokenizer->vocab_size()));
        std::abort();
      }
    tokenizer->decode(ids);
    for (int32_t id = 0; id < tokenizer->vocab_size() && id < 64; ++id) tokenizer->token_label(id);
  });
  return 0;
}
