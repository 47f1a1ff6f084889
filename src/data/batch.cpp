// Batch allocation and shape checks, and the Dataset defaults. See include/headlab/data/batch.h.
#include "headlab/data/batch.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headlab/common/edit_distance.h"
#include "headlab/common/error.h"

namespace headlab {

const char* split_name(Split split) {
  switch (split) {
    case Split::train:
      return "train";
    case Split::val:
      return "val";
    case Split::test:
      return "test";
  }
  return "unknown";
}

Split parse_split(const std::string& name, bool allow_train) {
  if (name == "val") return Split::val;
  if (name == "test") return Split::test;
  if (allow_train && name == "train") return Split::train;
  throw Error(unknown_choice(
      "split", name,
      allow_train ? std::vector<std::string>{"val", "test", "train"} : std::vector<std::string>{"val", "test"}));
}

Batch::Batch(int64_t B, int64_t T, const BatchLayout& layout) : Batch(BatchShape{B, T, 0}, layout) {}

Batch::Batch(const BatchShape& shape, const BatchLayout& fields)
    : batch_size(shape.batch_size),
      seq_len(shape.seq_len),
      source_len(shape.source_len),
      layout(fields),
      capacity(shape) {
  HEADLAB_CHECK(batch_size > 0 && seq_len > 0,
                "batch: batch_size=" << batch_size << " and seq_len=" << seq_len << " must both be positive");
  HEADLAB_CHECK(layout.source ? source_len > 0 : source_len == 0,
                "batch: source_len=" << source_len << (layout.source ? " must be positive" : " without a source side"));
  const size_t n = static_cast<size_t>(batch_size * seq_len);
  tokens.assign(n, 0);
  targets.assign(n, -1);
  if (layout.labels) labels.assign(static_cast<size_t>(batch_size), -1);
  if (layout.key_padding) key_padding.assign(n, 0);
  if (layout.gold_head) gold_head.assign(n, -1);
  if (layout.gold_antecedent) gold_antecedent.assign(n, -1);
  if (layout.is_delimiter) is_delimiter.assign(n, 0);
  if (layout.source) {
    source_tokens.assign(static_cast<size_t>(batch_size * source_len), 0);
    source_padding.assign(static_cast<size_t>(batch_size * source_len), 0);
  }
}

void Batch::check_shape(const std::string& who, int64_t expected_seq_len) const {
  HEADLAB_CHECK(!layout.variable_shape, who << ": a variable-shape batch has no fixed seq_len (fill it by reshape)");
  HEADLAB_CHECK(seq_len == expected_seq_len, who << ": batch has seq_len=" << seq_len << " but the dataset has seq_len="
                                                 << expected_seq_len << " (make it with dataset.make_batch)");
  const size_t n = static_cast<size_t>(batch_size * seq_len), ns = static_cast<size_t>(batch_size * source_len);
  auto sized = [n](size_t size) { return size == 0 || size == n; };
  HEADLAB_CHECK(batch_size > 0 && tokens.size() == n && targets.size() == n && sized(key_padding.size()) &&
                    sized(gold_head.size()) && sized(gold_antecedent.size()) && sized(is_delimiter.size()) &&
                    (labels.empty() || labels.size() == static_cast<size_t>(batch_size)) &&
                    source_tokens.size() == ns && source_padding.size() == ns,
                who << ": batch buffers do not hold batch_size=" << batch_size << " x seq_len=" << seq_len
                    << " values (tokens has " << tokens.size() << "; make it with dataset.make_batch)");
}

void Batch::reshape(const std::string& who, const BatchShape& shape, const BatchLayout& expected) {
  HEADLAB_CHECK(layout == expected && layout.variable_shape,
                who << ": the batch lacks the fields or the variable shape this dataset writes (make it with "
                       "dataset.make_batch)");
  HEADLAB_CHECK(shape.batch_size > 0 && shape.seq_len > 0 && (shape.source_len > 0) == layout.source &&
                    shape.batch_size <= capacity.batch_size && shape.seq_len <= capacity.seq_len &&
                    shape.source_len <= capacity.source_len,
                who << ": a batch of shape B=" << shape.batch_size << ", T=" << shape.seq_len
                    << ", S=" << shape.source_len << " does not fit the capacity B=" << capacity.batch_size
                    << ", T=" << capacity.seq_len << ", S=" << capacity.source_len
                    << " it was made with (make it with dataset.make_batch)");
  batch_size = shape.batch_size;
  seq_len = shape.seq_len;
  source_len = shape.source_len;
  const size_t n = static_cast<size_t>(batch_size * seq_len), ns = static_cast<size_t>(batch_size * source_len);
  tokens.resize(n);
  targets.resize(n);
  if (layout.labels) labels.resize(static_cast<size_t>(batch_size));
  if (layout.key_padding) key_padding.resize(n);
  if (layout.gold_head) gold_head.resize(n);
  if (layout.gold_antecedent) gold_antecedent.resize(n);
  if (layout.is_delimiter) is_delimiter.resize(n);
  if (layout.source) {
    source_tokens.resize(ns);
    source_padding.resize(ns);
  }
}

double bits_per_byte(double mean_loss_nats, double bytes_per_token) {
  HEADLAB_CHECK(bytes_per_token > 0, "bits_per_byte: bytes_per_token=" << bytes_per_token << " must be positive");
  return mean_loss_nats / std::log(2.0) / bytes_per_token;
}

int64_t Dataset::eval_batches(Split, int64_t) const {
  return 0;
}

Dataset::ExamplePosition Dataset::example_position(Split split, int64_t example, int64_t batch_size) const {
  HEADLAB_CHECK(batch_size > 0, "batch size " << batch_size << " must be positive");
  const int64_t covering = eval_batches(split, batch_size);
  HEADLAB_CHECK(example >= 0 && (covering == 0 || example < covering * batch_size),
                "example " << example << " is outside the " << split_name(split) << " split (0 .. "
                           << covering * batch_size - 1 << ")");
  return {example / batch_size, example % batch_size};
}

int64_t Dataset::batches_to_score(Split split, int64_t requested, int64_t batch_size, const char* caller) const {
  const int64_t covering = eval_batches(split, batch_size);
  if (covering > 0 && (requested <= 0 || requested > covering)) requested = covering;
  HEADLAB_CHECK(requested > 0, caller << ": the " << split_name(split) << " split of " << name()
                                      << " has no natural size; give a number of batches");
  return requested;
}

std::vector<int64_t> Dataset::train_token_counts() const {
  constexpr int64_t kSampleBatches = 64, kSampleRows = 64;  // fixed, so the counts are too
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size()));
  Batch batch = make_batch(kSampleRows);
  for (int64_t i = 0; i < kSampleBatches; ++i) {
    fill_batch(Split::train, i, batch);
    for (size_t j = 0; j < batch.tokens.size(); ++j) {
      if (!batch.key_padding.empty() && !batch.key_padding[j]) continue;
      const int32_t token = batch.tokens[j];
      HEADLAB_CHECK(token >= 0 && token < vocab_size(),
                    name() << ": train token " << token << " outside the vocabulary of " << vocab_size());
      counts[static_cast<size_t>(token)]++;
    }
  }
  return counts;
}

void copy_row(const Batch& from, int64_t from_row, Batch& to, int64_t to_row) {
  HEADLAB_CHECK(from.seq_len == to.seq_len && from.source_len == to.source_len && from_row >= 0 &&
                    from_row < from.batch_size && to_row >= 0 && to_row < to.batch_size,
                "copy_row: row " << from_row << " of a [" << from.batch_size << ", " << from.seq_len << "] (S "
                                 << from.source_len << ") batch to row " << to_row << " of a [" << to.batch_size << ", "
                                 << to.seq_len << "] (S " << to.source_len << ") batch");
  auto copy = [&](const auto& src, auto& dst, int64_t width) {
    HEADLAB_CHECK(src.empty() == dst.empty(), "copy_row: the two batches have different layouts");
    if (!src.empty()) std::copy_n(src.begin() + from_row * width, width, dst.begin() + to_row * width);
  };
  const int64_t T = from.seq_len, S = from.source_len;
  copy(from.tokens, to.tokens, T);
  copy(from.targets, to.targets, T);
  copy(from.labels, to.labels, 1);
  copy(from.key_padding, to.key_padding, T);
  copy(from.gold_head, to.gold_head, T);
  copy(from.gold_antecedent, to.gold_antecedent, T);
  copy(from.is_delimiter, to.is_delimiter, T);
  copy(from.source_tokens, to.source_tokens, S);
  copy(from.source_padding, to.source_padding, S);
}

}  // namespace headlab
