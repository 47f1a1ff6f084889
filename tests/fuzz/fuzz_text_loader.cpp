// libFuzzer target: the text dataset loader (src/data/text.cpp): the file's NUL / UTF-8 checks
// (data.require_utf8), the split into train/val/test blocks and the window sampler. Input: one
// byte choosing data.seq_len (1..16, its low 4 bits) and require_utf8 (bit 4), then the file's bytes. A file that loads
// is sampled: a few training batches and every evaluation batch of val and test, each window checked to lie in its
// block.
#include <algorithm>
#include <cstdlib>

#include "fuzz_support.h"
#include "headlab/data/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  if (size < 1) return 0;
  const int64_t seq_len = 1 + data[0] % 16;
  const fuzz::fs::path path = fuzz::scratch_dir() / "corpus.txt";
  fuzz::write_bytes(path, {reinterpret_cast<const char*>(data) + 1, size - 1});
  fuzz::expect_only_headlab_errors([&] {
    const TextDataset text({.path = path.string(),
                            .seq_len = seq_len,
                            .seed = data[0],
                            .bible_cache = "",
                            .require_utf8 = (data[0] & 16) != 0});
    const int64_t B = 3;
    Batch batch(B, seq_len);
    for (Split split : {Split::train, Split::val, Split::test}) {
      const ByteRange r = text.split_range(split);
      const int64_t batches = split == Split::train ? 4 : text.eval_batches(split, B);
      for (int64_t i = 0; i < std::min<int64_t>(batches, 64); ++i) {
        text.fill_batch(split, i, batch);
        for (int64_t row = 0; row < B; ++row) {
          const int64_t start = text.window_start(split, i, row, B);
          if (start >= 0 && (start < r.begin || start + seq_len + 1 > r.end)) {
            std::fprintf(stderr, "fuzz: window [%lld, +%lld] outside its block [%lld, %lld)\n", (long long)start,
                         (long long)seq_len + 1, (long long)r.begin, (long long)r.end);
            std::abort();
          }
        }
      }
    }
  });
  return 0;
}
