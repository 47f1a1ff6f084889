// Embedding forward (gather rows) and backward (scatter-add rows).
//   ids [N] (flattened), table [V, C] -> out [N, C]
// Backward: several positions may hold the same id, so rows of dtable receive many additions.
// Instead of atomics, threads split the C columns (blocks of 16, one 64-byte line of floats) and
// each walks all positions in order: every dtable element is summed by one thread, in position
// order, whatever the thread count.
#include "headlab/ops/embedding.h"

#include <algorithm>

#include "headlab/common/parallel.h"

namespace headlab {

namespace {

// context = ids;  ints[0] = N (positions).
template <typename T>
void embedding_backward(Tape<T>& tape, const Node<T>& node) {
  const Tensor<T> dtable = tape.input_grad(node, 0);
  if (dtable.empty()) return;
  const auto* ids = static_cast<const int32_t*>(node.context);
  const int64_t n = node.ints[0], C = dtable.size(1);
  const T* g = node.grad.data();
  T* d = dtable.data();
  constexpr int64_t kColumnBlock = 16;
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (n * C > kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kColumnBlock, j1 = std::min(C, j0 + kColumnBlock);
    for (int64_t p = 0; p < n; ++p) {
      T* dr = d + static_cast<int64_t>(ids[p]) * C;
      const T* gr = g + p * C;
      for (int64_t j = j0; j < j1; ++j) dr[j] += gr[j];
    }
  }
}

}  // namespace

template <typename T>
Var<T> embedding(Tape<T>& tape, const int32_t* ids, const Shape& ids_shape, Var<T> table) {
  HEADLAB_CHECK(table.tape == &tape, "embedding: the table belongs to another tape");
  const Tensor<T>& tv = table.value();
  HEADLAB_CHECK(tv.rank() == 2 && tv.is_contiguous(),
                "embedding: table " << tv.shape().str() << " must be a contiguous [V, C]");
  HEADLAB_CHECK(ids_shape.rank < kMaxRank, "embedding: ids " << ids_shape.str() << " have rank " << ids_shape.rank
                                                             << ", at most " << kMaxRank - 1);
  const int64_t n = ids_shape.numel(), V = tv.size(0), C = tv.size(1);
  HEADLAB_CHECK(n == 0 || ids != nullptr, "embedding: ids is null for shape " << ids_shape.str());
  // Validated here, serially, so the kernels (forward and backward) can trust every id.
  for (int64_t p = 0; p < n; ++p)
    HEADLAB_CHECK(ids[p] >= 0 && ids[p] < V, "embedding: id=" << ids[p] << " at position " << p << " of ids "
                                                              << ids_shape.str() << " is outside the table's V=" << V);
  Shape out_shape = ids_shape;
  out_shape.dims[out_shape.rank++] = C;
  Tensor<T> out = tape.arena().template empty<T>(out_shape);
  const T* src = tv.data();
  T* o = out.data();
#pragma omp parallel for schedule(static) if (n * C > kParallelGrain)
  for (int64_t p = 0; p < n; ++p) {
    const T* row = src + static_cast<int64_t>(ids[p]) * C;
    std::copy(row, row + C, o + p * C);
  }
  Node<T>& node = tape.record(out, embedding_backward<T>, {table});
  node.context = ids;
  node.ints[0] = n;
  return tape.last();
}

#define HEADLAB_INSTANTIATE(T) template Var<T> embedding<T>(Tape<T>&, const int32_t*, const Shape&, Var<T>);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
