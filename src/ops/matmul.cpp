// Matrix products: matmul (any transposes) and linear (x w^T + b). Both hand their work to
// gemm(), so transposes are stride views and BLIS sees the original memory.
#include "headlab/ops/matmul.h"

#include "headlab/common/parallel.h"
#include "headlab/linalg/gemm.h"
#include "headlab/ops/elementwise.h"

namespace headlab {

namespace {

// GEMM's beta for a gradient target: 0 writes C without reading it (a fresh, unzeroed buffer),
// 1 accumulates. Bit-identical to beta 1 on zeros: BLIS applies beta once, with the first k-block.
template <typename T>
constexpr T beta_for(bool overwrite) {
  return overwrite ? T(0) : T(1);
}

}  // namespace

template <typename T>
void linear_forward(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& bias, const Tensor<T>& y) {
  T beta = T(0);
  if (!bias.empty()) {  // the bias rides on the GEMM: y = bias rows, then y = 1 * y + x w^T
    broadcast_rows(bias, y);
    beta = T(1);
  }
  gemm(x, w.transpose(0, 1), y, T(1), beta);
}

template <typename T>
void linear_backward_kernel(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<T>& w,
                            const typename Tape<T>::GradTarget& dx, const typename Tape<T>::GradTarget& dw,
                            const Tensor<T>& dbias) {
  if (!dx.grad.empty()) gemm(dy, w, dx.grad, T(1), beta_for<T>(dx.overwrite));
  if (!dw.grad.empty()) gemm(dy.transpose(0, 1), x, dw.grad, T(1), beta_for<T>(dw.overwrite));
  if (!dbias.empty()) sum_rows_accumulate(dy, dbias);
}

namespace {

template <typename T>
Tensor<T> maybe_transpose(const Tensor<T>& m, bool transpose) {
  return transpose ? m.transpose(0, 1) : m;
}

// ints[0] = transpose_a, ints[1] = transpose_b.
// Forward was: C = op(A) op(B). With op(A) = A' and op(B) = B':
//   dA' = dC B'^T  -> if A was transposed, dA = (dC B'^T)^T = B' dC^T, written into dA^T's view.
//   dB' = A'^T dC  -> likewise into dB^T's view when B was transposed.
template <typename T>
void matmul_backward(Tape<T>& tape, const Node<T>& node) {
  const bool transpose_a = node.ints[0], transpose_b = node.ints[1];
  const Tensor<T> a = maybe_transpose(tape.node(node.inputs[0]).value, transpose_a);
  const Tensor<T> b = maybe_transpose(tape.node(node.inputs[1]).value, transpose_b);
  if (auto [da, overwrite] = tape.input_grad_target(node, 0); !da.empty())
    gemm(node.grad, b.transpose(0, 1), maybe_transpose(da, transpose_a), T(1), beta_for<T>(overwrite));
  if (auto [db, overwrite] = tape.input_grad_target(node, 1); !db.empty())
    gemm(a.transpose(0, 1), node.grad, maybe_transpose(db, transpose_b), T(1), beta_for<T>(overwrite));
}

// x [N,in] (rows flattened), w [out,in], bias [out]:  y = x w^T + bias.
//   dx += dy w,  dw += dy^T x,  dbias += sum over rows of dy.
template <typename T>
void linear_backward(Tape<T>& tape, const Node<T>& node) {
  const Tensor<T>& x = tape.node(node.inputs[0]).value;
  const Tensor<T> dy = node.grad.reshape({node.grad.shape().rows(), node.grad.shape().last()});
  const auto dx = tape.input_grad_target(node, 0);
  linear_backward_kernel(
      dy, x.reshape({x.shape().rows(), x.shape().last()}), tape.node(node.inputs[1]).value,
      {dx.grad.empty() ? dx.grad : dx.grad.reshape({x.shape().rows(), x.shape().last()}), dx.overwrite},
      tape.input_grad_target(node, 1), node.n_inputs == 3 ? tape.input_grad(node, 2) : Tensor<T>());
}

template <typename T>
Var<T> linear_impl(Var<T> x, Var<T> weight, const Var<T>* bias) {
  const Shape& xs = x.shape();
  const Tensor<T>& w = weight.value();
  HEADLAB_CHECK(w.rank() == 2 && xs.rank >= 1 && xs.last() == w.size(1),
                "linear: input " << xs.str() << " does not match weight " << w.shape().str() << " ([out, in])");
  HEADLAB_CHECK(x.value().is_contiguous(), "linear: input " << xs.str() << " must be contiguous");
  Shape ys = xs;
  ys.dims[ys.rank - 1] = w.size(0);
  Tensor<T> y = x.tape->arena().template empty<T>(ys);
  if (bias != nullptr)
    HEADLAB_CHECK(bias->value().rank() == 1 && bias->value().size(0) == w.size(0),
                  "linear: bias " << bias->value().shape().str() << " does not match weight " << w.shape().str());
  linear_forward(x.value().reshape({xs.rows(), xs.last()}), w, bias != nullptr ? bias->value() : Tensor<T>(),
                 y.reshape({ys.rows(), ys.last()}));
  if (bias != nullptr)
    x.tape->record(y, linear_backward<T>, {x, weight, *bias});
  else
    x.tape->record(y, linear_backward<T>, {x, weight});
  return x.tape->last();
}

}  // namespace

template <typename T>
Var<T> matmul(Var<T> a, Var<T> b, bool transpose_a, bool transpose_b) {
  const Tensor<T> av = maybe_transpose(a.value(), transpose_a);
  const Tensor<T> bv = maybe_transpose(b.value(), transpose_b);
  HEADLAB_CHECK(av.rank() == 2 && bv.rank() == 2 && av.size(1) == bv.size(0),
                "matmul: cannot multiply " << av.shape().str() << " by " << bv.shape().str());
  Tensor<T> c = a.tape->arena().template empty<T>({av.size(0), bv.size(1)});
  gemm(av, bv, c, T(1), T(0));
  Node<T>& node = a.tape->record(c, matmul_backward<T>, {a, b});
  node.ints[0] = transpose_a;
  node.ints[1] = transpose_b;
  return a.tape->last();
}

template <typename T>
Var<T> linear(Var<T> x, Var<T> weight, Var<T> bias) {
  return linear_impl(x, weight, &bias);
}

template <typename T>
Var<T> linear(Var<T> x, Var<T> weight) {
  return linear_impl<T>(x, weight, nullptr);
}

#define HEADLAB_INSTANTIATE(T)                                                                             \
  template Var<T> matmul<T>(Var<T>, Var<T>, bool, bool);                                                   \
  template Var<T> linear<T>(Var<T>, Var<T>, Var<T>);                                                       \
  template Var<T> linear<T>(Var<T>, Var<T>);                                                               \
  template void linear_forward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&); \
  template void linear_backward_kernel<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,            \
                                          const Tape<T>::GradTarget&, const Tape<T>::GradTarget&, const Tensor<T>&);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
