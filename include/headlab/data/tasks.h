// Synthetic tasks: generated datasets whose attention structure is known (datasets/README.md
// states each task's exact rule). All are pure functions of (seed, split, batch_index):
//   example i of split s is drawn from RowRng(seed, s, i, 0); train row r of batch b is example
//   b*B + r (or, with train_examples = N > 0, a seeded pick from examples 0..N-1).
// Disjoint splits by content: an example's hash (tokens, targets, label) puts it in val (1/16),
// test (1/16) or train (14/16), and a generator redraws until its example lands in the split
// it is filling, so no example ever occurs in two splits, however small the example space.
// val/test hold eval_examples examples each (rows past the end have every target -1).
//   auto data = make_task({.task = "sort", .seq_len = 16, .vocab_size = 12});
//   Batch batch = data->make_batch(32);  data->fill_batch(Split::train, step, batch);
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "headlab/data/batch.h"

namespace headlab {

struct TaskOptions {
  std::string task = "k_relation";     // k_relation | induction | reverse | sort | grammar | classify
  int64_t seq_len = 64;                // data.seq_len (T)
  uint64_t seed = 0;                   // data.seed
  int64_t vocab_size = 0;              // data.vocab_size; 0 = the task's default (datasets/README.md)
  int64_t k = 1;                       // data.k: induction's match length (other tasks ignore it)
  std::vector<int64_t> offsets{1, 3};  // data.offsets: k_relation's relative offsets
  int64_t min_len = 0;                 // data.min_len: reverse, sort, classify; 0 = max_len
  int64_t max_len = 0;                 // data.max_len; 0 = as long as seq_len allows
  int64_t train_examples = 0;          // data.train_examples; 0 = a fresh example every row
  int64_t eval_examples = 2048;        // examples in val and in test
  int64_t n_classes = 2;               // model.n_classes: classify has 2 and checks it
};

// Builds the task named by options.task; throws headlab::Error with one line on bad options.
std::unique_ptr<Dataset> make_task(const TaskOptions& options);

// The split an example with this content hash belongs to (h mod 16: 0 val, 1 test, else train).
Split split_of_example(uint64_t content_hash);

// The grammar task's lexicon: one entry per token id (datasets/README.md lists it).
enum class WordClass { pad, delimiter, determiner, complementizer, preposition, pronoun, noun, verb };
enum class Gender { none, masculine, feminine, neuter };
struct GrammarWord {
  std::string text;  // "dogs"
  WordClass word_class;
  int number = 0;                // 1 singular, 2 plural, 0 unmarked ("the", "it" is 1, "they" is 2)
  Gender gender = Gender::none;  // nouns and singular pronouns
  bool transitive = false;       // verbs
  int32_t other_number = -1;     // nouns and verbs: the id of the same word in the other number
};
// The lexicon for a vocabulary size (0 = the default 51 words; at least 25).
std::vector<GrammarWord> grammar_lexicon(int64_t vocab_size);

// ---- for task implementations ----------------------------------------------------------------

// One example's slice of a Batch (row r): T tokens and targets, and the optional fields the
// task's BatchLayout asks for (null otherwise).
struct ExampleView {
  int64_t seq_len = 0;
  int32_t* tokens = nullptr;
  int32_t* targets = nullptr;
  int32_t* label = nullptr;
  uint8_t* key_padding = nullptr;
  int32_t* gold_head = nullptr;
  int32_t* gold_antecedent = nullptr;
  uint8_t* is_delimiter = nullptr;
};

// The shared machinery: example ids, split assignment by content hash, fixed eval sets.
class SyntheticTask : public Dataset {
 public:
  explicit SyntheticTask(const TaskOptions& options);

  int64_t seq_len() const override { return seq_len_; }
  bool has_accuracy() const override { return true; }
  int64_t eval_batches(Split split, int64_t batch_size) const override;
  void fill_batch(Split split, int64_t batch_index, Batch& out) const final;

  // Writes example `example_id` of `split` into `row` (what fill_batch does for each row).
  void write_example(Split split, int64_t example_id, const ExampleView& row) const;
  // Throws when val or test cannot be populated (the example space is too small to split).
  void check_splits() const;

 protected:
  // Draws one example from rng into `row`. The row arrives reset (tokens = pad_token(),
  // targets/label/gold = -1, flags 0); write what the example sets. Must not allocate.
  // example_id stays the same across redraws (classify derives its label from it).
  virtual void generate(RowRng& rng, int64_t example_id, const ExampleView& row) const = 0;
  virtual int32_t pad_token() const { return 0; }

  std::string task_;  // options.task, for error messages
  int64_t seq_len_;
  uint64_t seed_;
  int64_t train_examples_, eval_examples_;

 private:
  // The val and test sets, drawn on first use and kept for the life of the task: every
  // evaluation reads the same examples, and drawing them (15 of 16 draws land in another split)
  // costs more than the model's forward on them. Sets larger than kMaxCachedEvalBytes are drawn
  // on every fill instead.
  static constexpr int64_t kMaxCachedEvalBytes = int64_t{256} << 20;
  struct EvalSet {
    std::once_flag once;
    Batch rows;  // [eval_examples, seq_len]
  };
  const Batch* eval_set(Split split) const;  // null when too large to cache
  mutable EvalSet eval_sets_[2];             // val, test
};

// One constructor per task family (src/data/<family>.cpp); make_task dispatches on the name.
std::unique_ptr<SyntheticTask> make_k_relation_task(const TaskOptions& options);
std::unique_ptr<SyntheticTask> make_induction_task(const TaskOptions& options);
std::unique_ptr<SyntheticTask> make_algorithmic_task(const TaskOptions& options);  // reverse, sort
std::unique_ptr<SyntheticTask> make_grammar_task(const TaskOptions& options);
std::unique_ptr<SyntheticTask> make_classify_task(const TaskOptions& options);

}  // namespace headlab
