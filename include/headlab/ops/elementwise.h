// Elementwise and reduction ops on the tape, and the small kernels other ops reuse.
//   add(a, b), mul(a, b): b's shape is a suffix of a's (same shape, or a bias [C] over [..., C]);
//     the backward reduces over the broadcast rows for b.
//   scale(x, s) = s * x;  gelu(x) (tanh form, as GPT-2);  relu(x);  sum(x), mean(x) -> [1].
// Inputs must be contiguous. Every backward accumulates into its inputs' gradients.
#pragma once

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> add(Var<T> a, Var<T> b);
template <typename T>
Var<T> mul(Var<T> a, Var<T> b);
template <typename T>
Var<T> scale(Var<T> x, double s);
template <typename T>
Var<T> gelu(Var<T> x);
template <typename T>
Var<T> relu(Var<T> x);
template <typename T>
Var<T> sum(Var<T> x);
template <typename T>
Var<T> mean(Var<T> x);

// Kernels shared with other ops. m is viewed as rows x row.numel().
// out[r, :] = row for every r.
template <typename T>
void broadcast_rows(const Tensor<T>& row, const Tensor<T>& out);
// acc[:] += sum over r of m[r, :], summed in row order for every column (deterministic for any
// thread count: threads split columns, never rows).
template <typename T>
void sum_rows_accumulate(const Tensor<T>& m, const Tensor<T>& acc);
// out = gelu(x);  dx = or += dy * gelu'(x) (overwrite or not): gelu()'s kernels, for ops that
// recompute it.
template <typename T>
void gelu_forward(const Tensor<T>& x, const Tensor<T>& out);
template <typename T>
void gelu_backward_kernel(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<T>& dx, bool overwrite);
// dst[i] = src[i] (overwrite) or dst[i] += src[i], over contiguous tensors of the same size:
// a gradient's first contribution or a later one (Tape::input_grad_target).
template <typename T>
void write_or_accumulate(const Tensor<T>& src, const Tensor<T>& dst, bool overwrite);

}  // namespace headlab
