// Matrix products on the tape.
//   matmul(a [M,K], b [K,N]) -> [M,N], with either operand transposed by a flag (a stride view,
//     never a copy): matmul(a, b, false, true) is a * b^T.
//   linear(x [..., in], w [out, in], bias [out] or empty Var) -> [..., out] = x w^T + bias:
//     the projection every layer uses, fused so the bias rides on the GEMM's beta.
// Weights follow PyTorch's orientation, [out_features, in_features].
// Backward (accumulating):  dA += dC B^T,  dB += A^T dC,  dbias += column sums of dC.
#pragma once

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> matmul(Var<T> a, Var<T> b, bool transpose_a = false, bool transpose_b = false);

template <typename T>
Var<T> linear(Var<T> x, Var<T> weight, Var<T> bias);
template <typename T>
Var<T> linear(Var<T> x, Var<T> weight);  // no bias

// linear's kernels on matrices, for ops that fuse a linear layer (ops/recomputed_linear.h):
// y [N,out] = x [N,in] w^T + bias (bias may be empty);  dx (+)= dy w,  dw (+)= dy^T x (written
// when the target says overwrite, else added), dbias += column sums of dy; an empty gradient is
// skipped.
template <typename T>
void linear_forward(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& bias, const Tensor<T>& y);
template <typename T>
void linear_backward_kernel(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<T>& w,
                            const typename Tape<T>::GradTarget& dx, const typename Tape<T>::GradTarget& dw,
                            const Tensor<T>& dbias);

}  // namespace headlab
