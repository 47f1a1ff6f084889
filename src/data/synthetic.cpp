// The machinery every synthetic task shares: example ids, split assignment by content hash,
// fixed eval sets, and the make_task factory. See include/headlab/data/tasks.h.
#include <algorithm>

#include "headlab/common/error.h"
#include "headlab/data/tasks.h"
#include "headlab/data/task_registry.h"

namespace headlab {

namespace {

// A redraw happens only when an example lands in another split: 1/8 of train draws, 15/16 of
// val/test draws. 2^16 failed draws in a row means the split is empty, not unlucky.
constexpr int kMaxDraws = 1 << 16;
// Salts the stream that picks a training example from a fixed set, so it never coincides with
// an example's own stream RowRng(seed, train, id, 0).
constexpr uint64_t kPickSalt = 0x7f4a7c159e3779b9ULL;

uint64_t content_hash(const ExampleView& row) {
  uint64_t h = splitmix64(0x68656164'6c616273ULL);
  for (int64_t t = 0; t < row.seq_len; ++t) h = splitmix64(h ^ static_cast<uint32_t>(row.tokens[t]));
  for (int64_t t = 0; t < row.seq_len; ++t) h = splitmix64(h ^ static_cast<uint32_t>(row.targets[t]));
  if (row.label) h = splitmix64(h ^ static_cast<uint32_t>(*row.label));
  return h;
}

ExampleView row_view(Batch& out, int64_t row) {
  const int64_t T = out.seq_len, at = row * T;
  ExampleView v;
  v.seq_len = T;
  v.tokens = out.tokens.data() + at;
  v.targets = out.targets.data() + at;
  if (!out.labels.empty()) v.label = out.labels.data() + row;
  if (!out.key_padding.empty()) v.key_padding = out.key_padding.data() + at;
  if (!out.gold_head.empty()) v.gold_head = out.gold_head.data() + at;
  if (!out.gold_antecedent.empty()) v.gold_antecedent = out.gold_antecedent.data() + at;
  if (!out.is_delimiter.empty()) v.is_delimiter = out.is_delimiter.data() + at;
  return v;
}

void reset_row(const ExampleView& v, int32_t pad) {
  const int64_t T = v.seq_len;
  std::fill_n(v.tokens, T, pad);
  std::fill_n(v.targets, T, -1);
  if (v.label) *v.label = -1;
  if (v.key_padding) std::fill_n(v.key_padding, T, uint8_t(0));
  if (v.gold_head) std::fill_n(v.gold_head, T, -1);
  if (v.gold_antecedent) std::fill_n(v.gold_antecedent, T, -1);
  if (v.is_delimiter) std::fill_n(v.is_delimiter, T, uint8_t(0));
}

}  // namespace

Split split_of_example(uint64_t content_hash) {
  switch (content_hash % 16) {
    case 0:
      return Split::val;
    case 1:
      return Split::test;
    default:
      return Split::train;
  }
}

SyntheticTask::SyntheticTask(const TaskOptions& o)
    : task_(o.task),
      seq_len_(o.seq_len),
      seed_(o.seed),
      train_examples_(o.train_examples),
      eval_examples_(o.eval_examples) {
  HEADLAB_CHECK(seq_len_ > 0, o.task << ": data.seq_len=" << seq_len_ << " must be positive");
  HEADLAB_CHECK(train_examples_ >= 0, o.task << ": data.train_examples=" << train_examples_ << " must be >= 0");
  HEADLAB_CHECK(eval_examples_ > 0, o.task << ": eval_examples=" << eval_examples_ << " must be positive");
}

int64_t SyntheticTask::eval_batches(Split split, int64_t batch_size) const {
  HEADLAB_CHECK(batch_size > 0, name() << ": batch_size=" << batch_size << " must be positive");
  if (split == Split::train) return 0;
  return (eval_examples_ + batch_size - 1) / batch_size;
}

void SyntheticTask::write_example(Split split, int64_t example_id, const ExampleView& row) const {
  RowRng rng(seed_, split, example_id, 0);
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    reset_row(row, pad_token());
    generate(rng, example_id, row);
    if (split_of_example(content_hash(row)) == split) return;
  }
  HEADLAB_CHECK(false, name() << ": found no " << split_name(split) << " example in " << kMaxDraws
                              << " draws: the example space is too small to split three ways (raise "
                                 "data.vocab_size, data.max_len or data.seq_len)");
}

const Batch* SyntheticTask::eval_set(Split split) const {
  const int64_t bytes_per_row = seq_len_ * 18 + 4;  // at most: every field of batch.h
  if (eval_examples_ * bytes_per_row > kMaxCachedEvalBytes) return nullptr;
  EvalSet& set = eval_sets_[split == Split::val ? 0 : 1];
  std::call_once(set.once, [&] {
    Batch rows(eval_examples_, seq_len_, batch_layout());
    for (int64_t id = 0; id < eval_examples_; ++id) write_example(split, id, row_view(rows, id));
    set.rows = std::move(rows);
  });
  return &set.rows;
}

void SyntheticTask::fill_batch(Split split, int64_t batch_index, Batch& out) const {
  out.check_shape(task_, seq_len_);  // task_, not name(): a refill must not allocate
  HEADLAB_CHECK(batch_index >= 0, task_ << ": batch_index=" << batch_index << " must be >= 0");
  const BatchLayout layout = batch_layout();
  HEADLAB_CHECK((!layout.labels || !out.labels.empty()) && (!layout.key_padding || !out.key_padding.empty()) &&
                    (!layout.gold_head || !out.gold_head.empty()) &&
                    (!layout.gold_antecedent || !out.gold_antecedent.empty()) &&
                    (!layout.is_delimiter || !out.is_delimiter.empty()),
                task_ << ": batch lacks fields this task writes (make it with dataset.make_batch)");
  const int64_t B = out.batch_size;
  const Batch* cached = split == Split::train ? nullptr : eval_set(split);
  for (int64_t row = 0; row < B; ++row) {
    const ExampleView v = row_view(out, row);
    int64_t id = batch_index * B + row;
    if (split == Split::train && train_examples_ > 0) {
      RowRng pick(seed_ ^ kPickSalt, split, batch_index, row);
      id = static_cast<int64_t>(pick.below(static_cast<uint64_t>(train_examples_)));
    }
    if (split != Split::train && id >= eval_examples_) {
      reset_row(v, pad_token());  // past the fixed eval set: nothing scored
      continue;
    }
    if (cached)
      copy_row(*cached, id, out, row);
    else
      write_example(split, id, v);
  }
}

void SyntheticTask::check_splits() const {
  const BatchLayout layout = batch_layout();
  Batch one(1, seq_len_, layout);
  const ExampleView v = row_view(one, 0);
  write_example(Split::val, 0, v);
  write_example(Split::test, 0, v);
}

std::unique_ptr<Dataset> make_task(const TaskOptions& options) {
  const TaskInfo& info = task_named(options.task);
  HEADLAB_CHECK(info.family == TaskFamily::generated, "data.task=" << options.task << " is not a generated task");
  std::unique_ptr<SyntheticTask> task = info.make(options);
  task->check_splits();
  return task;
}

}  // namespace headlab
