// LayerNorm over the last dimension, fused:  y = (x - mean) * rstd * weight + bias,  per row,
// with rstd = 1 / sqrt(var + eps) (biased variance, as PyTorch and GPT-2).
//   layer_norm(x [..., C], weight [C], bias [C] or an undefined Var (no bias), eps) -> [..., C]
// Saves mean [rows] and rstd [rows] in the step arena. The backward reads only those, x and
// weight: xhat is recomputed rather than stored, so nothing of size [rows, C] is kept.
// The kernels are public so tests and bench/ can run them without a tape.
//   Var<float> h = layer_norm(x, ln_weight, ln_bias);
#pragma once

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> layer_norm(Var<T> x, Var<T> weight, Var<T> bias, double eps = 1e-5);

// Kernels on contiguous tensors viewed as [rows, C]. bias may be empty (no bias); mean and
// rstd [rows] may be empty (not stored).
template <typename T>
void layer_norm_forward(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias, double eps,
                        const Tensor<T>& y, const Tensor<T>& mean, const Tensor<T>& rstd);
// Accumulates into dx [rows, C] (or writes it, if overwrite_dx), dweight [C], dbias [C]; an
// empty gradient is skipped. dx is written before dweight and dbias are read.
template <typename T>
void layer_norm_backward(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& mean,
                         const Tensor<T>& rstd, const Tensor<T>& dx, const Tensor<T>& dweight, const Tensor<T>& dbias,
                         bool overwrite_dx = false);

}  // namespace headlab
