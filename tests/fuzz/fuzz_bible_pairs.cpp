// libFuzzer target: the parallel Bible split files (src/data/bible_pairs.cpp, read_bible_pairs):
// "Book C:V\tsource\ttarget\tsource tags\ttarget tags" lines from the user cache, which a user
// or a full disk may have damaged. Input: the file's bytes. A file that reads gives pairs whose
// references and word indices are counts.
#include <cstdlib>

#include "fuzz_support.h"
#include "headlab/data/bible_pairs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  const fuzz::fs::path path = fuzz::scratch_dir() / "train.tsv";
  fuzz::write_bytes(path, {reinterpret_cast<const char*>(data), size});
  fuzz::expect_only_headlab_errors([&] {
    for (const BiblePair& pair : read_bible_pairs(path.string())) {
      bool counts = pair.chapter >= 0 && pair.verse >= 0;
      for (const auto& tags : {pair.source_tags, pair.target_tags})
        for (const auto& [word, lemma] : tags) counts = counts && word >= 0;
      if (!counts) {
        std::fprintf(stderr, "fuzz: a negative chapter, verse or word index was read\n");
        std::abort();
      }
    }
  });
  return 0;
}
