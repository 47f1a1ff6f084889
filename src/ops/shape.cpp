// Shape ops and their backwards. The forwards are views (reshape, slice) or copies through
// Tensor::copy_from (transpose, concat); every backward adds the contiguous dy into the region
// of dx it came from, through write_or_accumulate_strided below (or writes it there, when it is
// the first contribution to the whole of dx: Tape::input_grad_target).
#include "headlab/ops/shape.h"

#include "headlab/common/parallel.h"
#include "headlab/ops/elementwise.h"

namespace headlab {

namespace {

// dst[idx] = src[idx] (overwrite) or dst[idx] += src[idx] for every index of their common
// shape, any strides on either side. Threads split the rows (all dims but the last); each element
// is written by one thread.
template <typename T>
void write_or_accumulate_strided(const Tensor<T>& src, const Tensor<T>& dst, bool overwrite) {
  if (src.is_contiguous() && dst.is_contiguous()) {
    write_or_accumulate(src, dst, overwrite);
    return;
  }
  const Shape& shape = dst.shape();
  const int last = shape.rank - 1;  // rank >= 1 here: a rank-0 tensor is contiguous
  const int64_t inner = shape.dims[last], outer = inner ? shape.numel() / inner : 0;
  const int64_t src_step = src.stride(last), dst_step = dst.stride(last);
  const T* s = src.data();
  T* d = dst.data();
#pragma omp parallel for schedule(static) if (shape.numel() > kParallelGrain)
  for (int64_t row = 0; row < outer; ++row) {
    int64_t rest = row, src_offset = 0, dst_offset = 0;
    for (int dim = last - 1; dim >= 0; --dim) {
      const int64_t index = rest % shape.dims[dim];
      rest /= shape.dims[dim];
      src_offset += index * src.stride(dim);
      dst_offset += index * dst.stride(dim);
    }
    if (overwrite)
      for (int64_t j = 0; j < inner; ++j) d[dst_offset + j * dst_step] = s[src_offset + j * src_step];
    else
      for (int64_t j = 0; j < inner; ++j) d[dst_offset + j * dst_step] += s[src_offset + j * src_step];
  }
}

// reshape: dx += dy (same elements, same order), a copy when dy is dx's first contribution.
template <typename T>
void reshape_backward(Tape<T>& tape, const Node<T>& node) {
  if (auto [dx, overwrite] = tape.input_grad_target(node, 0); !dx.empty())
    write_or_accumulate(node.grad, dx, overwrite);
}

// transpose: ints[0], ints[1] = the swapped dims. The forward copied x.transpose(d0, d1) into
// y, so dy lands in dx seen through the same transposed view.
template <typename T>
void transpose_backward(Tape<T>& tape, const Node<T>& node) {
  if (auto [dx, overwrite] = tape.input_grad_target(node, 0); !dx.empty())
    write_or_accumulate_strided(node.grad, dx.transpose(static_cast<int>(node.ints[0]), static_cast<int>(node.ints[1])),
                                overwrite);
}

// slice: ints[0] = dim, ints[1] = start. dy goes into dx's [start, start + length) along dim;
// the rest of dx is not written, so dx comes zeroed (input_grad).
template <typename T>
void slice_backward(Tape<T>& tape, const Node<T>& node) {
  if (Tensor<T> dx = tape.input_grad(node, 0); !dx.empty()) {
    const int dim = static_cast<int>(node.ints[0]);
    write_or_accumulate_strided(node.grad, dx.narrow(dim, node.ints[1], node.grad.size(dim)), false);
  }
}

// concat: ints[0] = dim. Input i's gradient is dy's slice at that input's offset along dim.
template <typename T>
void concat_backward(Tape<T>& tape, const Node<T>& node) {
  const int dim = static_cast<int>(node.ints[0]);
  int64_t offset = 0;
  for (int i = 0; i < node.n_inputs; ++i) {
    const int64_t length = tape.node(node.inputs[i]).value.size(dim);
    if (auto [dx, overwrite] = tape.input_grad_target(node, i); !dx.empty())
      write_or_accumulate_strided(node.grad.narrow(dim, offset, length), dx, overwrite);
    offset += length;
  }
}

}  // namespace

template <typename T>
Var<T> reshape(Var<T> x, const Shape& shape) {
  const Tensor<T>& xv = x.value();
  HEADLAB_CHECK(xv.is_contiguous(), "reshape: input "
                                        << xv.shape().str()
                                        << " is a strided view; transpose or concat it into a copy first");
  HEADLAB_CHECK(shape.numel() == xv.numel(), "reshape: cannot view " << xv.shape().str() << " as " << shape.str());
  x.tape->record(xv.reshape(shape), reshape_backward<T>, {x});
  return x.tape->last();
}

template <typename T>
Var<T> transpose(Var<T> x, int dim0, int dim1) {
  const Tensor<T>& xv = x.value();
  HEADLAB_CHECK(dim0 >= 0 && dim0 < xv.rank() && dim1 >= 0 && dim1 < xv.rank(),
                "transpose: dims " << dim0 << ", " << dim1 << " out of range for " << xv.shape().str());
  const Tensor<T> view = xv.transpose(dim0, dim1);
  Tensor<T> out = x.tape->arena().template empty<T>(view.shape());
  out.copy_from(view);
  Node<T>& node = x.tape->record(out, transpose_backward<T>, {x});
  node.ints[0] = dim0;
  node.ints[1] = dim1;
  return x.tape->last();
}

template <typename T>
Var<T> slice(Var<T> x, int dim, int64_t start, int64_t length) {
  const Tensor<T>& xv = x.value();
  HEADLAB_CHECK(dim >= 0 && dim < xv.rank(), "slice: dim=" << dim << " out of range for " << xv.shape().str());
  HEADLAB_CHECK(
      start >= 0 && length >= 0 && start + length <= xv.size(dim),
      "slice: [" << start << ", " << start + length << ") is outside dim " << dim << " of " << xv.shape().str());
  Node<T>& node = x.tape->record(xv.narrow(dim, start, length), slice_backward<T>, {x});
  node.ints[0] = dim;
  node.ints[1] = start;
  return x.tape->last();
}

template <typename T>
Var<T> concat(std::initializer_list<Var<T>> inputs, int dim) {
  HEADLAB_CHECK(inputs.size() >= 1 && inputs.size() <= static_cast<size_t>(kMaxOpInputs),
                "concat: " << inputs.size() << " inputs, want 1 to " << kMaxOpInputs);
  const Var<T> first = *inputs.begin();
  Shape out_shape = first.shape();
  HEADLAB_CHECK(dim >= 0 && dim < out_shape.rank, "concat: dim=" << dim << " out of range for " << out_shape.str());
  out_shape.dims[dim] = 0;
  for (const Var<T>& v : inputs) {
    Shape expected = first.shape();
    expected.dims[dim] = v.shape().dims[dim];
    HEADLAB_CHECK(v.shape() == expected, "concat: input " << v.shape().str() << " does not match "
                                                          << first.shape().str() << " outside dim " << dim);
    out_shape.dims[dim] += v.shape().dims[dim];
  }
  Tensor<T> out = first.tape->arena().template empty<T>(out_shape);
  int64_t offset = 0;
  for (const Var<T>& v : inputs) {
    out.narrow(dim, offset, v.shape().dims[dim]).copy_from(v.value());
    offset += v.shape().dims[dim];
  }
  first.tape->record(out, concat_backward<T>, inputs).ints[0] = dim;
  return first.tape->last();
}

#define HEADLAB_INSTANTIATE(T)                             \
  template Var<T> reshape<T>(Var<T>, const Shape&);        \
  template Var<T> transpose<T>(Var<T>, int, int);          \
  template Var<T> slice<T>(Var<T>, int, int64_t, int64_t); \
  template Var<T> concat<T>(std::initializer_list<Var<T>>, int);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
