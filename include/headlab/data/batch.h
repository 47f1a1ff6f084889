// Batch and Dataset: the unit every dataset hands the trainer, and the interface that makes it.
//   tokens, targets  [B, T] int32   inputs and next-token targets; target -1 = ignore
//   labels           [B]    int32   per-sequence class (classification tasks)      | empty when
//   key_padding      [B, T] uint8   1 = real token, 0 = padding                    | the dataset's
//   gold_head, gold_antecedent [B, T] int32; is_delimiter [B, T] uint8              | BatchLayout
//                                   per-token gold annotations of synthetic tasks  | omits them
//   source_tokens    [B, S] int32   encoder input (translation)                    |
//   source_padding   [B, S] uint8   1 = real source token, 0 = padding             |
// The Batch owns its buffers: Dataset::make_batch(B) sizes them once, and fill_batch rewrites
// them in place every step, so after the first batch the data layer never allocates.
// Variable shapes (BatchLayout::variable_shape, token-budget batches): B, T and S change from
// batch to batch. make_batch then sizes every buffer for the dataset's batch_capacity() (the
// largest B, T and S of any of its batches) and fill_batch calls reshape(), which resizes the
// buffers within that capacity: still no allocation after make_batch.
// Determinism: a batch is a pure function of (data seed, split, batch_index). Randomness comes
// from RowRng, a splitmix64 stream keyed by (seed, split, batch_index, row), so resuming at step
// s is just fill_batch(train, s, ...): there is no RNG state to checkpoint.
//   Batch batch = dataset.make_batch(32);
//   for (int64_t step = start; step < steps; ++step) dataset.fill_batch(Split::train, step, batch);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/common/hash.h"
#include "headlab/data/tokenizer.h"

namespace headlab {

class TranslationDataset;  // data/translation.h

enum class Split { train, val, test };
const char* split_name(Split split);  // "train", "val", "test"
// The split named `name` ("val", "test", and "train" when allow_train); otherwise a one-line
// error with the nearest split ("unknown split 'tset'; did you mean 'test'?") or the choices.
// For command-line options.
Split parse_split(const std::string& name, bool allow_train);

// Which optional Batch fields a dataset writes; make_batch sizes exactly these.
struct BatchLayout {
  bool labels = false;
  bool key_padding = false;
  bool gold_head = false;
  bool gold_antecedent = false;
  bool is_delimiter = false;
  bool source = false;          // source_tokens and source_padding [B, S]
  bool variable_shape = false;  // B, T, S set per batch by fill_batch (Batch::reshape)
  bool operator==(const BatchLayout&) const = default;
};

// B, T and S of a batch; source_len = 0 when it has no source side.
struct BatchShape {
  int64_t batch_size = 0, seq_len = 0, source_len = 0;
  bool operator==(const BatchShape&) const = default;
};

struct Batch {
  int64_t batch_size = 0, seq_len = 0, source_len = 0;  // B, T, S of the batch as filled
  std::vector<int32_t> tokens;                          // [B, T]
  std::vector<int32_t> targets;                         // [B, T], -1 = ignore
  std::vector<int32_t> labels;                          // [B] or empty
  std::vector<uint8_t> key_padding;                     // [B, T] or empty; 1 = real token
  std::vector<int32_t> gold_head;                       // [B, T] or empty
  std::vector<int32_t> gold_antecedent;                 // [B, T] or empty
  std::vector<uint8_t> is_delimiter;                    // [B, T] or empty
  std::vector<int32_t> source_tokens;                   // [B, S] or empty
  std::vector<uint8_t> source_padding;                  // [B, S] or empty; 1 = real token
  BatchLayout layout;                                   // the fields the constructor sized
  BatchShape capacity;                                  // the constructor's shape: the most reshape() accepts

  Batch() = default;
  Batch(int64_t batch_size, int64_t seq_len, const BatchLayout& layout = {});
  Batch(const BatchShape& shape, const BatchLayout& layout);

  // Fixed shapes: throws unless tokens/targets (and any present optional field) hold B x T
  // values (B x S for the source side) for this seq_len: fill_batch calls it first, so a
  // mis-sized batch is one error line, never a resize. Throws on a variable-shape batch.
  void check_shape(const std::string& who, int64_t expected_seq_len) const;
  // Variable shapes: sets B, T, S and resizes every field to them. Throws (naming `who`) unless
  // the batch was made with `expected` as its layout and `shape` fits within `capacity`, so a
  // reshape never allocates. New places hold stale values: the caller writes every one.
  void reshape(const std::string& who, const BatchShape& shape, const BatchLayout& expected);
};

// Copies row `from_row` of `from` into row `to_row` of `to`: every field, for batches of one
// layout, sequence length and source length (reshape a variable-shape `to` first).
void copy_row(const Batch& from, int64_t from_row, Batch& to, int64_t to_row);

// Bits per byte from a mean cross-entropy in nats per token: nats / ln 2 / bytes per token.
double bits_per_byte(double mean_loss_nats, double bytes_per_token);

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::string name() const = 0;  // "text:corpus.txt"
  virtual int64_t vocab_size() const = 0;
  virtual int64_t seq_len() const = 0;
  virtual BatchLayout batch_layout() const { return {}; }
  // true when the task has a right answer per example (labels or gold fields) to score.
  virtual bool has_accuracy() const { return false; }
  // A readable label for a token, for attention dumps and reports: the byte for text, the word
  // for grammar, CLS/SEP/PAD for classify; the id by default.
  virtual std::string token_label(int32_t token) const { return std::to_string(token); }
  // Text bytes per token of `split`, for bits-per-byte: 1 for byte-level text, the split's
  // bytes over its tokens for subwords; 0 when the tokens are not text (synthetic tasks), meaning
  // "do not report bits-per-byte".
  virtual double bytes_per_token(Split /*split*/) const { return 0.0; }
  // The tokenizer that makes the tokens from text, which checkpoints store; nullptr for
  // generated tasks, whose tokens are not text.
  virtual const Tokenizer* tokenizer() const { return nullptr; }
  // The dataset as sentence pairs to translate and score by BLEU (data.task = translate: itself);
  // nullptr for every task without a source side.
  virtual const TranslationDataset* translation() const { return nullptr; }
  // The token that fills a row past its example when the task gives no key_padding (grammar's
  // <pad>, sort's and reverse's PAD): the analysis counts no query there. -1 = none.
  virtual int32_t unkeyed_pad_token() const { return -1; }
  // Batches of batch_size that cover a val/test split exactly once (later indices give rows
  // whose targets are all -1); 0 when the split is unbounded and the trainer picks the count.
  // A variable-shape dataset ignores batch_size (its batches are cut by a token budget).
  virtual int64_t eval_batches(Split split, int64_t batch_size) const;
  // Where example `example` of a val/test split sits when the split is read in batches of
  // batch_size: row e mod B of batch e div B. A variable-shape dataset numbers its examples in
  // corpus order (translation: sentence e of the split) and finds the token-budget batch holding
  // it. Throws one line past the split's end.
  struct ExamplePosition {
    int64_t batch = 0, row = 0;
  };
  virtual ExamplePosition example_position(Split split, int64_t example, int64_t batch_size) const;
  // How many batches evaluation and analysis score: `requested`, clamped to eval_batches() (and
  // all of them when requested <= 0); for an unbounded split a positive `requested` is needed,
  // else a headlab::Error naming `caller` ("evaluate", "analyze").
  int64_t batches_to_score(Split split, int64_t requested, int64_t batch_size, const char* caller) const;
  // How often each token id 0 .. vocab_size-1 occurs in the training split: what makes a token
  // rare for the analysis (Voita et al.'s rare-words heads). The default counts the real tokens
  // (key_padding) of a fixed sample, train batches 0..63 of 64 rows; text counts its train block.
  virtual std::vector<int64_t> train_token_counts() const;

  // Writes batch `batch_index` of `split` into `out`, in place. Pure: the same (seed, split,
  // batch_index) gives the same batch on every call, thread and run.
  virtual void fill_batch(Split split, int64_t batch_index, Batch& out) const = 0;

  // The largest shape any batch of this dataset has: {batch_size, seq_len(), 0} for fixed
  // shapes; a variable-shape dataset returns its own (and ignores batch_size).
  virtual BatchShape batch_capacity(int64_t batch_size) const { return {batch_size, seq_len(), 0}; }
  Batch make_batch(int64_t batch_size) const { return Batch(batch_capacity(batch_size), batch_layout()); }
};

// A counter-based random stream for one batch row: the key (seed, split, batch_index, row) is
// hashed into a state, and each draw is splitmix64 of the next counter value.
class RowRng {
 public:
  RowRng(uint64_t seed, Split split, int64_t batch_index, int64_t row) {
    uint64_t h = splitmix64(seed);
    h = splitmix64(h ^ static_cast<uint64_t>(split));
    h = splitmix64(h ^ static_cast<uint64_t>(batch_index));
    state_ = splitmix64(h ^ static_cast<uint64_t>(row));
  }
  uint64_t next() { return splitmix64(state_++); }
  // Uniform in [0, n), n > 0, by the multiply-high method (bias below n / 2^64).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

}  // namespace headlab
