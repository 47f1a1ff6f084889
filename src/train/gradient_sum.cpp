#include "headlab/train/gradient_sum.h"

#include <cstring>

#include "headlab/common/error.h"

namespace headlab {

namespace {
void add_into(float* left, const float* right, int64_t n) {
  for (int64_t i = 0; i < n; ++i) left[i] = left[i] + right[i];
}
}  // namespace

float* MicroBatchSum::level_buffer(size_t depth) {
  if (buffers_.size() <= depth) buffers_.resize(depth + 1);
  if (buffers_[depth].bytes() != static_cast<size_t>(n_) * sizeof(float))
    buffers_[depth] = Buffer(static_cast<size_t>(n_) * sizeof(float));
  return static_cast<float*>(buffers_[depth].data());
}

void MicroBatchSum::begin(int64_t n) {
  n_ = n;
  levels_.clear();
}

// A binary counter: equal levels on top of the stack merge (left + right) into the next level,
// which builds the complete subtrees of the tree in index order.
void MicroBatchSum::add(const float* values) {
  const size_t depth = levels_.size();
  std::memcpy(level_buffer(depth), values, static_cast<size_t>(n_) * sizeof(float));
  levels_.push_back(0);
  while (levels_.size() >= 2 && levels_[levels_.size() - 1] == levels_[levels_.size() - 2]) {
    const size_t top = levels_.size() - 1;
    add_into(static_cast<float*>(buffers_[top - 1].data()), static_cast<float*>(buffers_[top].data()), n_);
    levels_.pop_back();
    ++levels_.back();
  }
}

// What is left is a run of strictly smaller subtrees; the tree joins them right to left (the
// last, incomplete subtree first joins its left neighbour's sibling level, and so on).
void MicroBatchSum::finish(float* out) {
  HEADLAB_CHECK(!levels_.empty(), "MicroBatchSum::finish: nothing was added");
  while (levels_.size() >= 2) {
    const size_t top = levels_.size() - 1;
    add_into(static_cast<float*>(buffers_[top - 1].data()), static_cast<float*>(buffers_[top].data()), n_);
    levels_.pop_back();
  }
  std::memcpy(out, buffers_[0].data(), static_cast<size_t>(n_) * sizeof(float));
  levels_.clear();
}

}  // namespace headlab
