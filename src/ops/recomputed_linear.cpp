// Linear layers fused with what feeds or follows them, so that one activation is not kept
// (see include/headlab/ops/recomputed_linear.h). Each forward runs the unfused ops' kernels in
// the unfused order; each backward recomputes the dropped input in the tape's scratch and then
// runs the unfused backwards in tape order (the linear's, then the op before it).
#include "headlab/ops/recomputed_linear.h"

#include "headlab/common/parallel.h"
#include "headlab/ops/elementwise.h"
#include "headlab/ops/layer_norm.h"
#include "headlab/ops/matmul.h"

namespace headlab {

namespace {

// [..., n] as [rows, n].
template <typename T>
Tensor<T> as_matrix(const Tensor<T>& t) {
  return t.reshape({t.shape().rows(), t.shape().last()});
}

template <typename T>
void check_linear(const char* op, const Tensor<T>& in, const Var<T>& weight, const Var<T>& bias) {
  const Tensor<T>& w = weight.value();
  HEADLAB_CHECK(in.is_contiguous() && w.rank() == 2 && in.shape().rank >= 1 && in.shape().last() == w.size(1),
                op << ": input " << in.shape().str() << " does not match weight " << w.shape().str()
                   << " ([out, in]; input contiguous)");
  HEADLAB_CHECK(!bias.defined() || (bias.value().rank() == 1 && bias.value().size(0) == w.size(0)),
                op << ": bias " << bias.value().shape().str() << " does not match weight " << w.shape().str());
}

template <typename T>
Shape output_shape(const Tensor<T>& in, const Var<T>& weight) {
  Shape s = in.shape();
  s.dims[s.rank - 1] = weight.value().size(0);
  return s;
}

// Element counts rounded up to a multiple of 16 (64 bytes of float), so every matrix in the
// scratch starts 64-byte aligned.
inline int64_t padded(int64_t count) {
  return (count + 15) / 16 * 16;
}

// A [rows, n] matrix in the tape's scratch, at `offset` elements.
template <typename T>
Tensor<T> scratch_matrix(T* scratch, int64_t offset, int64_t rows, int64_t n) {
  return Tensor<T>(scratch + offset, {rows, n});
}

// The linear's backward given its input `in` [rows, in] (kept or recomputed): dW, dbias into
// the parameters' gradients and d in into `d_in` when it is not empty.
template <typename T>
void linear_part_backward(Tape<T>& tape, const Node<T>& node, int weight_input, const Tensor<T>& in,
                          const typename Tape<T>::GradTarget& d_in) {
  const bool has_bias = node.n_inputs > weight_input + 1;
  linear_backward_kernel(as_matrix(node.grad), in, tape.node(node.inputs[weight_input]).value, d_in,
                         tape.input_grad_target(node, weight_input),
                         has_bias ? tape.input_grad(node, weight_input + 1) : Tensor<T>());
}

// inputs: x, norm_weight, norm_bias, weight[, bias];  saved[0] mean, saved[1] rstd;  scalars[0] eps.
template <typename T>
void layer_norm_linear_backward(Tape<T>& tape, const Node<T>& node) {
  const Tensor<T> x = as_matrix(tape.node(node.inputs[0]).value);
  const Tensor<T>& norm_weight = tape.node(node.inputs[1]).value;
  const Tensor<T>& norm_bias = tape.node(node.inputs[2]).value;
  const int64_t rows = x.size(0), C = x.size(1);
  const bool need_d_normed = tape.node(node.inputs[0]).requires_grad || tape.node(node.inputs[1]).requires_grad ||
                             tape.node(node.inputs[2]).requires_grad;
  T* scratch = tape.scratch(2 * padded(rows * C));
  const Tensor<T> normed = scratch_matrix(scratch, 0, rows, C);
  const Tensor<T> d_normed = need_d_normed ? scratch_matrix(scratch, padded(rows * C), rows, C) : Tensor<T>();
  layer_norm_forward(x, norm_weight, norm_bias, node.scalars[0], normed, Tensor<T>(), Tensor<T>());
  linear_part_backward(tape, node, 3, normed, {d_normed, true});
  if (!need_d_normed) return;
  const auto dx = tape.input_grad_target(node, 0);
  layer_norm_backward(d_normed, x, norm_weight, node.saved[0], node.saved[1],
                      dx.grad.empty() ? dx.grad : as_matrix(dx.grad), tape.input_grad(node, 1),
                      tape.input_grad(node, 2), dx.overwrite);
}

// inputs: x, a, weight[, bias];  ints[0] = LinearInput.  out = x + (in W^T + bias) with in = a
// or gelu(a):  dx (+)= dout, then the linear's backward, then gelu's.
template <typename T>
void residual_linear_backward(Tape<T>& tape, const Node<T>& node) {
  if (const auto dx = tape.input_grad_target(node, 0); !dx.grad.empty())
    write_or_accumulate(node.grad, dx.grad, dx.overwrite);
  const Tensor<T> a = as_matrix(tape.node(node.inputs[1]).value);
  const auto da_target = tape.input_grad_target(node, 1);
  const typename Tape<T>::GradTarget da{da_target.grad.empty() ? da_target.grad : as_matrix(da_target.grad),
                                        da_target.overwrite};
  if (static_cast<LinearInput>(node.ints[0]) == LinearInput::plain) {
    linear_part_backward(tape, node, 2, a, da);
    return;
  }
  const int64_t rows = a.size(0), F = a.size(1);
  // gelu(a) is recomputed; d gelu(a) goes straight into da when da is written fresh (then
  // scaled by gelu'(a) in place), else through the scratch.
  const bool via_scratch = !da.grad.empty() && !da.overwrite;
  T* scratch = tape.scratch((via_scratch ? 2 : 1) * padded(rows * F));
  const Tensor<T> activated = scratch_matrix(scratch, 0, rows, F);
  gelu_forward(a, activated);
  const Tensor<T> d_activated = via_scratch ? scratch_matrix(scratch, padded(rows * F), rows, F) : da.grad;
  linear_part_backward(tape, node, 2, activated, {d_activated, true});
  if (!da.grad.empty()) gelu_backward_kernel(d_activated, a, da.grad, da.overwrite);
}

}  // namespace

template <typename T>
Var<T> layer_norm_linear(Var<T> x, Var<T> norm_weight, Var<T> norm_bias, double eps, Var<T> weight, Var<T> bias) {
  Tape<T>& tape = *x.tape;
  HEADLAB_CHECK(norm_bias.defined(), "layer_norm_linear: needs the LayerNorm's bias");
  check_linear("layer_norm_linear", x.value(), weight, bias);
  const Tensor<T> xm = as_matrix(x.value());
  const int64_t rows = xm.size(0), C = xm.size(1);
  HEADLAB_CHECK(norm_weight.value().numel() == C && norm_bias.value().numel() == C,
                "layer_norm_linear: LayerNorm parameters " << norm_weight.shape().str() << ", "
                                                           << norm_bias.shape().str() << " for rows of " << C);
  const Tensor<T> mean = tape.arena().template empty<T>({rows}), rstd = tape.arena().template empty<T>({rows});
  const Tensor<T> normed = scratch_matrix(tape.scratch(rows * C), 0, rows, C);
  layer_norm_forward(xm, norm_weight.value(), norm_bias.value(), eps, normed, mean, rstd);
  Tensor<T> out = tape.arena().template empty<T>(output_shape(x.value(), weight));
  linear_forward(normed, weight.value(), bias.defined() ? bias.value() : Tensor<T>(), as_matrix(out));
  Node<T>& node = bias.defined()
                      ? tape.record(out, layer_norm_linear_backward<T>, {x, norm_weight, norm_bias, weight, bias})
                      : tape.record(out, layer_norm_linear_backward<T>, {x, norm_weight, norm_bias, weight});
  node.saved[0] = mean;
  node.saved[1] = rstd;
  node.scalars[0] = eps;
  return tape.last();
}

template <typename T>
Var<T> residual_linear(Var<T> x, Var<T> a, Var<T> weight, Var<T> bias, LinearInput input) {
  Tape<T>& tape = *x.tape;
  check_linear("residual_linear", a.value(), weight, bias);
  const Shape ys = output_shape(a.value(), weight);
  HEADLAB_CHECK(x.value().is_contiguous() && x.shape().numel() == ys.numel() && x.shape().last() == ys.last(),
                "residual_linear: residual " << x.shape().str() << " does not match the projection's " << ys.str());
  const Tensor<T> am = as_matrix(a.value());
  const int64_t rows = am.size(0), in = am.size(1), out_n = ys.last();
  T* scratch = tape.scratch(padded(rows * out_n) + (input == LinearInput::gelu ? padded(rows * in) : 0));
  const Tensor<T> projected = scratch_matrix(scratch, 0, rows, out_n);
  Tensor<T> linear_in = am;
  if (input == LinearInput::gelu) {
    linear_in = scratch_matrix(scratch, padded(rows * out_n), rows, in);
    gelu_forward(am, linear_in);
  }
  linear_forward(linear_in, weight.value(), bias.defined() ? bias.value() : Tensor<T>(), projected);
  Tensor<T> out = tape.arena().template empty<T>(x.shape());
  const T *xv = x.value().data(), *pv = projected.data();
  T* o = out.data();
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) o[i] = xv[i] + pv[i];  // add(x, linear(...))'s arithmetic
  Node<T>& node = bias.defined() ? tape.record(out, residual_linear_backward<T>, {x, a, weight, bias})
                                 : tape.record(out, residual_linear_backward<T>, {x, a, weight});
  node.ints[0] = static_cast<int64_t>(input);
  return tape.last();
}

#define HEADLAB_INSTANTIATE(T)                                                          \
  template Var<T> layer_norm_linear<T>(Var<T>, Var<T>, Var<T>, double, Var<T>, Var<T>); \
  template Var<T> residual_linear<T>(Var<T>, Var<T>, Var<T>, Var<T>, LinearInput);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
