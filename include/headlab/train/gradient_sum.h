// The sum of one step's micro-batch gradients, added in a fixed binary tree over micro-batch
// index instead of one after another. Float addition is not associative, so the order is part of
// the result; this order is the one a data-parallel job reproduces: when P ranks each hold an
// aligned block of 2^j micro-batches, each rank's partial is a subtree of this tree and
// dist::sum_over_ranks adds the partials along the tree's upper levels. So P ranks with
// grad_accum / P micro-batches each give the same bits as one process with grad_accum.
//
// The tree: at level k, node i (a multiple of 2^(k+1)) adds node i + 2^k, if it exists. For
// 4 micro-batches ((g0 + g1) + (g2 + g3)); for 3, (g0 + g1) + g2.
//   MicroBatchSum sum;  sum.begin(n);
//   for (micro ...) { backward into grads; sum.add(grads); }
//   sum.finish(grads);
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/tensor/arena.h"

namespace headlab {

class MicroBatchSum {
 public:
  // Starts a sum of vectors of n floats. Buffers (one per tree level in use) are kept across
  // steps, so a warmed-up step allocates nothing.
  void begin(int64_t n);
  // Adds the next micro-batch's vector (copied: the caller may overwrite it afterwards).
  void add(const float* values);
  // out <- the sum of everything added since begin(); at least one add() is needed.
  void finish(float* out);

 private:
  float* level_buffer(size_t depth);
  int64_t n_ = 0;
  std::vector<Buffer> buffers_;  // buffers_[d]: the stack entry at depth d
  std::vector<int> levels_;      // the stack: the tree level of each pending partial sum
};

}  // namespace headlab
