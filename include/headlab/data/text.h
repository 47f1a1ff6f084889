// TextDataset: language modelling on a file, tokenized by data.tokenizer (data/tokenizer.h):
// bytes (vocab 256, token = byte: the default, and what text LMs have always used) or
// sentencepiece (trained on the train block's lines only, vocab data.vocab_size, or the stored
// tokenizer of the checkpoint or run being continued). Any bytes are read as they are for bytes;
// require_utf8, and the sentencepiece tokenizer, refuse a file that is not UTF-8 text (checked whole).
// The file is read once into memory and cut into three contiguous blocks of bytes, in file order,
// whatever the tokenizer (so every tokenizer sees the same text in each split):
//   train [0, n*train_fraction)  val [.., +n*val_fraction)  test [.., n)      (default 90/5/5)
// and each block is tokenized on its own. Every window is seq_len+1 tokens lying wholly inside one
// block; tokens = window[0..T), targets = window[1..T]. Train windows start at RowRng(seed, train,
// batch_index, row) draws; val/test windows tile their block (tile k starts at begin + k*T), so
// one pass over eval_batches() predicts every token of the block except its first and a tail
// shorter than T, exactly once. Tiles are visited in a fixed stride order that spreads the first
// few eval batches over the whole block; rows past the last tile get targets -1.
// path "bible" (or the cache path itself, or the old default datasets/cache/bible-kjv.txt) means
// the King James Bible, exported once per user by ensure_bible_corpus into bible_cache_path().
// Bad input throws headlab::Error with one line naming the path.
//   TextDataset data({.path = "bible", .seq_len = 256, .seed = 1});
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/data/tokenizer.h"

namespace headlab {

inline constexpr const char* kBibleAlias = "bible";
// Where the corpus was exported (into the working directory) before it moved to the user cache:
// old configs and run folders name it, so it stays a name of the cache file.
inline constexpr const char* kOldBibleCachePath = "datasets/cache/bible-kjv.txt";

// user_cache_dir() / "bible-kjv.txt": one export per user, whatever folder a run starts in.
std::string bible_cache_path();

// Makes sure `cache_path` holds the KJV Bible as plain text, one verse per line with the verse
// labels ("Ge1:1 ") stripped (datasets/README.md says why), and returns cache_path. If the file
// is missing it runs `bible -f "Gen1:1-Rev22:21"` (Debian's bible-kjv), writes a temp file next
// to it and renames it into place, so concurrent runs never see a half-written corpus.
std::string ensure_bible_corpus(const std::string& cache_path = bible_cache_path());

// data.path as a run folder stores it, so that the run works from any working directory: the
// Bible's names as "bible" (the user cache, wherever the run is), any other path made absolute.
std::string portable_text_path(const std::string& path);

// Offset of the first byte of `text` that breaks UTF-8 (Unicode 15, table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF), or -1. NUL is valid UTF-8; callers that refuse it say so.
int64_t first_invalid_utf8(std::string_view text);

// `text` with every byte that first_invalid_utf8 refuses replaced by U+FFFD (one per byte), the
// rest unchanged: for text a model wrote, which may stop inside a character.
std::string repair_utf8(std::string_view text);

// A text token (a byte) as people read it in tables and viewers: itself when printable ASCII,
// else \n or \xNN.
std::string text_token_label(int32_t token);

struct TextOptions {
  std::string path = kBibleAlias;  // data.path
  int64_t seq_len = 256;           // data.seq_len
  uint64_t seed = 0;               // data.seed
  double train_fraction = 0.90;    // the test block gets 1 - train - val
  double val_fraction = 0.05;
  std::string bible_cache;                  // where "bible" is exported to; "" = bible_cache_path()
  bool require_utf8 = false;                // data.require_utf8: the whole file valid UTF-8, no NUL byte
  std::string tokenizer = "bytes";          // data.tokenizer: bytes | sentencepiece
  std::string tokenizer_model = "unigram";  // data.tokenizer_model: unigram | bpe (sentencepiece)
  int64_t vocab_size = 0;                   // data.vocab_size: sentencepiece's pieces, specials included
  // A checkpoint's or run folder's tokenizer, used as it is instead of training one; its kind
  // must be `tokenizer`.
  std::shared_ptr<const Tokenizer> stored_tokenizer;
};

struct ByteRange {
  int64_t begin = 0, end = 0;  // [begin, end), of bytes or tokens
  int64_t size() const { return end - begin; }
};

class TextDataset : public Dataset {
 public:
  explicit TextDataset(const TextOptions& options);

  std::string name() const override { return "text:" + path_; }
  int64_t vocab_size() const override { return tokenizer_->vocab_size(); }
  int64_t seq_len() const override { return seq_len_; }
  bool has_accuracy() const override { return false; }
  // The split's bytes over its tokens (exactly 1 for bytes): a pass over the split scores all of
  // its tokens but the first and a tail shorter than T, so its mean loss per token over this is
  // its bits per byte, comparable between tokenizers.
  double bytes_per_token(Split split) const override;
  std::string token_label(int32_t token) const override { return tokenizer_->token_label(token); }
  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }
  int64_t eval_batches(Split split, int64_t batch_size) const override;
  std::vector<int64_t> train_token_counts() const override;  // every token of the train block
  void fill_batch(Split split, int64_t batch_index, Batch& out) const override;

  const std::string& path() const { return path_; }  // after resolving "bible"
  int64_t size_bytes() const { return size_bytes_; }
  ByteRange split_bytes(Split split) const;  // the block's bytes in the file
  ByteRange split_range(Split split) const;  // the block's tokens in the token sequence
  int64_t eval_windows(Split split) const;   // tiles in a val/test block
  // Token offset (for bytes: the file offset) of the window that fills `row` of batch
  // `batch_index` (B = batch_size), or -1 for an eval row past the last tile. fill_batch copies
  // tokens [start, start + T + 1).
  int64_t window_start(Split split, int64_t batch_index, int64_t row, int64_t batch_size) const;

 private:
  std::string path_;
  int64_t seq_len_;
  uint64_t seed_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  int64_t size_bytes_ = 0;
  std::vector<int32_t> tokens_;  // the three blocks, each tokenized on its own, in order
  ByteRange bytes_[3];           // indexed by Split
  ByteRange ranges_[3];          // indexed by Split, in tokens_
  int64_t eval_stride_[3] = {};  // tile step for val/test, coprime with the tile count
};

}  // namespace headlab
