// Linear layers whose input (or output) is not kept for the backward. The step's memory is the
// activations the backward reads, and three of a block's are cheap to recompute or never read:
//   layer_norm_linear(x, ...)             = linear(LN(x)): the q/k/v and MLP input projections
//                                           and the LM head; LN(x) (C floats per token) is
//                                           recomputed from x and the saved mean and rstd;
//   residual_linear(x, a, ...)            = x + linear(a): the attention output projection; the
//                                           projection (C floats) is read by nothing but the add;
//   residual_linear(x, u, ..., gelu)      = x + linear(gelu(u)): the MLP output projection;
//                                           gelu(u) (4C floats) is recomputed from u.
// Together 8 of the 18 d_model-wide floats per token and layer a block kept. What is not kept
// lives in the tape's scratch (Tape::scratch) while an op runs. Values and gradients are
// bit-identical to the unfused ops' (the same kernels in the same order); the backward's extra
// work is one LayerNorm or GELU forward pass.
//   Var<float> qkv = layer_norm_linear(x, ln_w, ln_b, 1e-5, w_qkv, b_qkv);
//   x = residual_linear(x, attention_out, w_proj, b_proj);
//   x = residual_linear(x, fc_out, w_mlp, b_mlp, LinearInput::gelu);
#pragma once

#include "headlab/autograd/tape.h"

namespace headlab {

enum class LinearInput { plain, gelu };  // what the linear layer reads: its input as is, or gelu of it

// weight [out, in], bias [out] or an undefined Var (no bias).
// x [..., in] -> [..., out]; the LayerNorm is over `in` and has a bias.
template <typename T>
Var<T> layer_norm_linear(Var<T> x, Var<T> norm_weight, Var<T> norm_bias, double eps, Var<T> weight, Var<T> bias);
// x [..., out] (the residual stream), a [..., in] -> [..., out].
template <typename T>
Var<T> residual_linear(Var<T> x, Var<T> a, Var<T> weight, Var<T> bias, LinearInput input = LinearInput::plain);

}  // namespace headlab
