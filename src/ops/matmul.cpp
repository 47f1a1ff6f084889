// Matrix products: matmul (any transposes) and linear (x w^T + b). Both hand their work to
// gemm(), so transposes are stride views and BLIS sees the original memory.
#include "headlab/ops/matmul.h"

#include "headlab/common/parallel.h"
#include "headlab/linalg/gemm.h"
#include "headlab/ops/elementwise.h"

namespace headlab {

namespace {

template <typename T>
Tensor<T> maybe_transpose(const Tensor<T>& m, bool transpose) {
  return transpose ? m.transpose(0, 1) : m;
}

// GEMM's beta for a gradient target: 0 writes C without reading it (a fresh, unzeroed buffer),
// 1 accumulates. Bit-identical to beta 1 on zeros: BLIS applies beta once, with the first k-block.
template <typename T>
constexpr T beta_for(bool overwrite) {
  return overwrite ? T(0) : T(1);
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
  const Tensor<T>& x_value = tape.node(node.inputs[0]).value;
  const Tensor<T> x = x_value.reshape({x_value.shape().rows(), x_value.shape().last()});
  const Tensor<T>& w = tape.node(node.inputs[1]).value;
  const Tensor<T> dy = node.grad.reshape({node.grad.shape().rows(), node.grad.shape().last()});
  if (auto [dx, overwrite] = tape.input_grad_target(node, 0); !dx.empty())
    gemm(dy, w, dx.reshape(x.shape()), T(1), beta_for<T>(overwrite));
  if (auto [dw, overwrite] = tape.input_grad_target(node, 1); !dw.empty())
    gemm(dy.transpose(0, 1), x, dw, T(1), beta_for<T>(overwrite));
  if (node.n_inputs == 3)
    if (Tensor<T> dbias = tape.input_grad(node, 2); !dbias.empty()) sum_rows_accumulate(dy, dbias);
}

template <typename T>
Var<T> linear_impl(Var<T> x, Var<T> weight, const Var<T>* bias) {
  const Shape& xs = x.shape();
  const Tensor<T>& w = weight.value();
  HEADLAB_CHECK(w.rank() == 2 && xs.rank >= 1 && xs.last() == w.size(1),
                "linear: input " << xs.str() << " does not match weight " << w.shape().str()
                                 << " ([out, in])");
  HEADLAB_CHECK(x.value().is_contiguous(), "linear: input " << xs.str() << " must be contiguous");
  Shape ys = xs;
  ys.dims[ys.rank - 1] = w.size(0);
  Tensor<T> y = x.tape->arena().template empty<T>(ys);
  const Tensor<T> y2 = y.reshape({ys.rows(), ys.last()});
  T beta = T(0);
  if (bias != nullptr) {
    const Tensor<T>& b = bias->value();
    HEADLAB_CHECK(b.rank() == 1 && b.size(0) == w.size(0),
                  "linear: bias " << b.shape().str() << " does not match weight " << w.shape().str());
    broadcast_rows(b, y2);
    beta = T(1);
  }
  gemm(x.value().reshape({xs.rows(), xs.last()}), w.transpose(0, 1), y2, T(1), beta);
  if (bias != nullptr) x.tape->record(y, linear_backward<T>, {x, weight, *bias});
  else x.tape->record(y, linear_backward<T>, {x, weight});
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

#define HEADLAB_INSTANTIATE(T)                                  \
  template Var<T> matmul<T>(Var<T>, Var<T>, bool, bool);        \
  template Var<T> linear<T>(Var<T>, Var<T>, Var<T>);            \
  template Var<T> linear<T>(Var<T>, Var<T>);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
