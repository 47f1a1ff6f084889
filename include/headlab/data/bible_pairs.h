// The verse-aligned Bible parallel corpus from Debian's SWORD modules (diatheke), exported once
// into the user cache with each side's Strong's numbers kept beside the text as a gold word
// alignment. Format, counts and the held-out books: datasets/README.md "Parallel Bible verses".
//   const BiblePairsExport corpus = ensure_bible_pairs({});   // KJV -> RV1909, Ruth val, Mark test
//   for (const BiblePair& pair : read_bible_pairs(corpus.split_path(Split::test))) ...
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headlab/data/batch.h"

namespace headlab {

// The modules headlab knows (their verse counts are checked): engKJV2006eb (apt package
// sword-text-kjv), engWEB2015eb (sword-text-web), spaRV1909eb (sword-text-sparv).
struct BiblePairsOptions {
  std::string source_module = "engKJV2006eb";
  std::string target_module = "spaRV1909eb";
  std::string val_book = "Ruth";  // whole books held out, as diatheke names them
  std::string test_book = "Mark";
  std::string cache_dir;  // the folder the export goes into; "": user_cache_dir()
};

struct BiblePairsCounts {
  int64_t source_verses = 0, target_verses = 0;        // verses each module printed
  int64_t source_empty = 0, target_empty = 0;          // of those, verses without text
  int64_t source_unmatched = 0, target_unmatched = 0;  // references the other module lacks
  int64_t empty_pairs = 0;                             // matched pairs skipped: a side is empty
  int64_t duplicates_dropped = 0;                      // val/test pairs whose source is a train source
  int64_t train = 0, val = 0, test = 0;                // pairs written per split
};

struct BiblePairsExport {
  std::string dir;  // <cache>/bible-pairs-<source>-<target>/
  BiblePairsCounts counts;
  std::string split_path(Split split) const;  // dir/<split>.tsv
};

// One line of a split file: "Book C:V\tsource\ttarget\tsource tags\ttarget tags". A tags field
// lists "WORD:LEMMA" entries separated by spaces, WORD the 0-based index of a space-separated word
// of the text and LEMMA a Strong's number ("H0430", "G2222"); a word with several lemmas has one
// entry per lemma, an untagged word none.
struct BiblePair {
  std::string book;
  int chapter = 0, verse = 0;
  std::string source, target;
  std::vector<std::pair<int, std::string>> source_tags, target_tags;
};

// The export folder for `options`, made on the first call (one `diatheke -f OSIS -o n` run per
// module over the whole Bible, 8-11 s) and afterwards only read. Pairs are aligned by
// reference; val and test are whole books; a val or test pair whose source text equals a training
// pair's source is dropped. Written in a temp folder renamed into place, so a failed or
// concurrent export leaves no half-written folder. Throws headlab::Error (one line) when diatheke
// or a module is missing (naming the apt package), diatheke fails, or a verse count differs from
// the module's known one.
BiblePairsExport ensure_bible_pairs(const BiblePairsOptions& options);

// The pairs of one split file, in Bible order. Throws headlab::Error naming the file and line.
std::vector<BiblePair> read_bible_pairs(const std::string& path);

}  // namespace headlab
