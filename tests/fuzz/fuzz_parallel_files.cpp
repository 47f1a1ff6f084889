// libFuzzer target: the parallel-file loader of data.task=translate (src/data/translation.cpp,
// read_parallel_files, then the whole TranslationDataset on the byte tokenizer: splits, length
// caps, token-budget batches). Input: one byte choosing data.seq_len (2..17, low 4 bits) and
// whether data.source_len is half of it (bit 4), then the source file's bytes, a NUL, and the
// target file's bytes (a second NUL is the target's own). Half the pairs train, a quarter val.
// A pair of files that loads is batched: every val and test batch and a few training batches,
// each checked against the token budget and the vocabulary.
#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "fuzz_support.h"
#include "headlab/data/translation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = bytes.find('\0');
  const fuzz::fs::path source = fuzz::scratch_dir() / "source.txt", target = fuzz::scratch_dir() / "target.txt";
  fuzz::write_bytes(source, bytes.substr(0, nul));
  fuzz::write_bytes(target, nul == std::string_view::npos ? std::string_view() : bytes.substr(nul + 1));
  fuzz::expect_only_headlab_errors([&] {
    TranslationOptions o;
    o.path = source.string();
    o.target_path = target.string();
    o.seq_len = 2 + data[0] % 16;
    o.source_len = (data[0] & 16) ? std::max<int64_t>(2, o.seq_len / 2) : 0;
    o.batch_tokens = 4 * o.seq_len;
    o.seed = data[0];
    o.train_fraction = 0.5;  // a handful of lines fill all three splits
    o.val_fraction = 0.25;
    const TranslationDataset dataset(o);
    Batch batch = dataset.make_batch(0);
    for (Split split : {Split::train, Split::val, Split::test}) {
      const int64_t batches = split == Split::train ? 4 : dataset.eval_batches(split, 1);
      for (int64_t i = 0; i < std::min<int64_t>(batches, 64); ++i) {
        dataset.fill_batch(split, i, batch);
        bool ok = batch.batch_size * std::max(batch.seq_len, batch.source_len) <= o.batch_tokens;
        for (int32_t t : batch.tokens) ok = ok && t >= 0 && t < dataset.vocab_size();
        for (int32_t t : batch.source_tokens) ok = ok && t >= 0 && t < dataset.vocab_size();
        if (!ok) {
          std::fprintf(stderr, "fuzz: a batch over the token budget or outside the vocabulary\n");
          std::abort();
        }
      }
    }
  });
  return 0;
}
