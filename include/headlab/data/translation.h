// TranslationDataset (data.task = "translate"): sentence pairs for an encoder-decoder model, in
// token-budget batches of varying shape (BatchLayout::variable_shape). For a pair whose source
// has ids x1..xm and whose target has ids y1..yn (tokenizer ids, no specials), its row holds
//   source_tokens  x1 .. xm </s>        S = m + 1    source_padding 1 there
//   tokens         <s> y1 .. yn         T = n + 1    key_padding 1 there
//   targets        y1 .. yn </s>
// and past them <pad> with padding 0 and target -1. A batch's rows x max(S, T) <= batch_tokens.
// Pairs: the Bible's verse pairs (path "bible", ensure_bible_pairs) or two line-aligned UTF-8
// files (path and target_path), split into contiguous train/val/test blocks. The tokenizer is
// trained on the training split's source and target sentences together (one joint vocabulary),
// or given (a checkpoint's). Rules, counts and keys: datasets/README.md "Translation".
//   TranslationDataset data({.path = "bible", .seq_len = 128});
//   Batch batch = data.make_batch(0);  data.fill_batch(Split::train, step, batch);
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/data/bible_pairs.h"
#include "headlab/data/text.h"
#include "headlab/data/tokenizer.h"

namespace headlab {

struct TranslationOptions {
  std::string path = kBibleAlias;  // data.path: "bible", or the source side's file
  std::string target_path;         // data.target_path: the target side, line-aligned with path
  BiblePairsOptions bible;         // data.source_module, target_module, val_book, test_book
  double train_fraction = 0.9;     // files: the leading lines trained on (data.train_fraction)
  double val_fraction = 0.05;      // files: the next lines; the rest is test
  int64_t seq_len = 128;           // data.seq_len: most T (target ids + 1)
  int64_t source_len = 0;          // data.source_len: most S (source ids + 1); 0 = seq_len
  int64_t batch_tokens = 3000;     // data.batch_tokens
  uint64_t seed = 0;               // data.seed: the train batches' composition and order
  TokenizerOptions tokenizer = {.kind = "bytes", .specials = true};  // data.tokenizer, vocab_size
  // A checkpoint's or run folder's tokenizer, used as it is instead of training one (resume,
  // eval); it must have <pad>, <s> and </s>.
  std::shared_ptr<const Tokenizer> stored_tokenizer;

  // The most tokens a source row holds, </s> counted: source_len, or seq_len when it is 0.
  int64_t max_source_tokens() const { return source_len > 0 ? source_len : seq_len; }
};

// Two line-aligned texts as pairs. Lines end at '\n' (a '\r' before it is dropped); a pair with
// an empty (or all-whitespace) side is skipped and counted. Throws one headlab::Error line when
// the line counts differ (naming both) or a line is not UTF-8 or holds a NUL byte (name:line).
struct ParallelLines {
  struct Pair {
    int64_t line = 0;  // 1-based
    std::string source, target;
  };
  std::vector<Pair> pairs;  // in file order
  int64_t lines = 0, empty_pairs = 0;
};
ParallelLines parse_parallel_lines(std::string_view source, std::string_view target, const std::string& source_name,
                                   const std::string& target_name);
// The same on two files; a missing or unreadable file is one line naming it.
ParallelLines read_parallel_files(const std::string& source_path, const std::string& target_path);

// One pair as the dataset keeps it. For Bible data `pair` is the verse with its reference and
// Strong's tags; for files its book is "" and `line` its line in both files.
struct TranslationSentence {
  BiblePair pair;
  int64_t line = 0;
  std::vector<int32_t> source_ids, target_ids;  // tokenizer ids, no specials, after truncation
};

struct TranslationCounts {
  int64_t sentences[3] = {};       // per Split, in the dataset
  int64_t empty_pairs = 0;         // skipped: a side is empty (files; the Bible export's own count)
  int64_t duplicates_dropped = 0;  // val/test pairs whose source equals a training source
  int64_t too_long_dropped = 0;    // training pairs longer than seq_len or source_len
  int64_t truncated[3] = {};       // val/test pairs cut to the caps (they keep every pair)
  int64_t batches[3] = {};         // train: batches per epoch
};

class TranslationDataset : public Dataset {
 public:
  // Trains the tokenizer on the training split, unless options.stored_tokenizer gives one.
  explicit TranslationDataset(const TranslationOptions& options);

  std::string name() const override { return name_; }  // "translate:bible-engKJV2006eb-spaRV1909eb"
  int64_t vocab_size() const override { return tokenizer_->vocab_size(); }
  int64_t seq_len() const override { return seq_len_; }
  BatchLayout batch_layout() const override;
  BatchShape batch_capacity(int64_t batch_size) const override;
  std::string token_label(int32_t token) const override { return tokenizer_->token_label(token); }
  int64_t eval_batches(Split split, int64_t batch_size) const override;  // 0 for train
  // Example e is sentence e of the split in corpus order (batch_size plays no part).
  ExamplePosition example_position(Split split, int64_t example, int64_t batch_size) const override;
  // Every token of every training row as batches hold it: source side and decoder input.
  std::vector<int64_t> train_token_counts() const override;
  void fill_batch(Split split, int64_t batch_index, Batch& out) const override;

  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }
  const TranslationDataset* translation() const override { return this; }
  const TranslationCounts& counts() const { return counts_; }
  // The pairs of a split, in corpus order (Bible order, or file order).
  const std::vector<TranslationSentence>& sentences(Split split) const { return splits_[index(split)].sentences; }
  // "Ruth 1:1", or "corpus.en:17" for files.
  std::string sentence_origin(Split split, int64_t sentence) const;
  // Which sentence each row of batch `batch_index` holds, row by row.
  std::span<const int64_t> batch_sentences(Split split, int64_t batch_index) const;

 private:
  struct Plan {  // one batch: rows order[begin, begin + rows)
    int64_t begin = 0, rows = 0, seq_len = 0, source_len = 0;
  };
  struct SplitData {
    std::vector<TranslationSentence> sentences;
    std::vector<int64_t> order;  // sentence indices, batch after batch
    std::vector<Plan> plans;
  };
  static size_t index(Split split) { return static_cast<size_t>(split); }
  void load_pairs(const TranslationOptions& options);
  void tokenize_and_cut(const TranslationOptions& options);
  const Plan& plan(Split split, int64_t batch_index) const;

  std::string name_, path_;
  int64_t seq_len_, source_len_, batch_tokens_;
  uint64_t seed_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  SpecialTokens specials_;
  SplitData splits_[3];
  TranslationCounts counts_;
  BatchShape capacity_;
};

}  // namespace headlab
