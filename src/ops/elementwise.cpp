// Elementwise ops and their backwards. Loops split elements into static slices across threads;
// each output element is computed by exactly one thread, so results do not depend on the
// thread count. Reductions over rows split columns across threads for the same reason.
#include "headlab/ops/elementwise.h"

#include "headlab/ops/fast_exp.h"

#include <cmath>
#include <cstdint>

#include "headlab/common/parallel.h"

namespace headlab {

template <typename T>
void broadcast_rows(const Tensor<T>& row, const Tensor<T>& out) {
  const int64_t n = row.numel(), rows = out.numel() / n;
  const T* r = row.data();
  T* o = out.data();
#pragma omp parallel for schedule(static) if (rows * n > kParallelGrain)
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) o[i * n + j] = r[j];
}

template <typename T>
void sum_rows_accumulate(const Tensor<T>& m, const Tensor<T>& acc) {
  const int64_t n = acc.numel(), rows = m.numel() / n;
  const T* src = m.data();
  T* dst = acc.data();
  constexpr int64_t kColumnBlock = 64;
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * n > kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kColumnBlock, j1 = std::min(n, j0 + kColumnBlock);
    T partial[kColumnBlock] = {};
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = j0; j < j1; ++j) partial[j - j0] += src[i * n + j];
    for (int64_t j = j0; j < j1; ++j) dst[j] += partial[j - j0];
  }
}

template <typename T>
void write_or_accumulate(const Tensor<T>& src, const Tensor<T>& dst, bool overwrite) {
  const int64_t n = src.numel();
  const T* s = src.data();
  T* d = dst.data();
  if (overwrite) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  }
}

namespace {

// Applies out[i] = fn(i) in parallel static slices.
template <typename Fn>
void parallel_for(int64_t n, Fn fn) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// d[i] = value(i) when the gradient target is to be overwritten, else d[i] += value(i). The
// branch is outside the loop, so each loop stays as simple as before.
template <typename T, typename Fn>
void write_or_accumulate_each(const typename Tape<T>::GradTarget& target, Fn value) {
  T* d = target.grad.data();
  if (target.overwrite)
    parallel_for(target.grad.numel(), [&](int64_t i) { d[i] = value(i); });
  else
    parallel_for(target.grad.numel(), [&](int64_t i) { d[i] += value(i); });
}

template <typename T>
void check_broadcast(const char* op, const Tensor<T>& a, const Tensor<T>& b) {
  const Shape &as = a.shape(), &bs = b.shape();
  bool ok = bs.rank <= as.rank && a.is_contiguous() && b.is_contiguous();
  for (int d = 0; ok && d < bs.rank; ++d) ok = bs.dims[bs.rank - 1 - d] == as.dims[as.rank - 1 - d];
  HEADLAB_CHECK(ok, op << ": cannot broadcast " << bs.str() << " over " << as.str()
                       << " (b must match a's trailing dims; both contiguous)");
}

// a + b: da += dout;  db += dout summed over broadcast rows (a bias-like b stays on input_grad:
// its gradient is a reduction, and small).
template <typename T>
void add_backward(Tape<T>& tape, const Node<T>& node) {
  if (auto [da, overwrite] = tape.input_grad_target(node, 0); !da.empty())
    write_or_accumulate(node.grad, da, overwrite);
  if (tape.node(node.inputs[1]).value.numel() == node.grad.numel()) {
    if (auto [db, overwrite] = tape.input_grad_target(node, 1); !db.empty())
      write_or_accumulate(node.grad, db, overwrite);
  } else if (Tensor<T> db = tape.input_grad(node, 1); !db.empty()) {
    sum_rows_accumulate(node.grad, db);
  }
}

// a * b: da += dout * b (b broadcast);  db += sum over rows of dout * a.
template <typename T>
void mul_backward(Tape<T>& tape, const Node<T>& node) {
  const Tensor<T>& a = tape.node(node.inputs[0]).value;
  const Tensor<T>& b = tape.node(node.inputs[1]).value;
  const int64_t n = a.numel(), nb = b.numel(), rows = n / nb;
  const T *g = node.grad.data(), *av = a.data(), *bv = b.data();
  if (const auto da = tape.input_grad_target(node, 0); !da.grad.empty())
    write_or_accumulate_each<T>(da, [&](int64_t i) { return g[i] * bv[i % nb]; });
  if (const auto db = tape.input_grad_target(node, 1); !db.grad.empty())
    write_or_accumulate_each<T>(db, [&](int64_t j) {
      T s = T(0);
      for (int64_t r = 0; r < rows; ++r) s += g[r * nb + j] * av[r * nb + j];
      return s;
    });
}

template <typename T>
void scale_backward(Tape<T>& tape, const Node<T>& node) {
  if (const auto dx = tape.input_grad_target(node, 0); !dx.grad.empty()) {
    const T s = static_cast<T>(node.scalars[0]);
    const T* g = node.grad.data();
    write_or_accumulate_each<T>(dx, [&](int64_t i) { return s * g[i]; });
  }
}

// GELU, tanh form: y = x/2 (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2/pi).
//   dy/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2).
// In float the same function is computed as y = x s with s = (1 + tanh u)/2 = sigmoid(2u), through
// fast_exp (ops/fast_exp.h), because a libm tanhf call per element kept the loop scalar and made GELU 40%
// of a training step. Double keeps std::tanh: it is the reference the gradient checks use.
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluA = 0.044715;

// (1 + tanh u) / 2 for the GELU argument u(x).
inline float gelu_gate(float x) {
  const float u = float(kGeluC) * (x + float(kGeluA) * x * x * x);
  return 1.0f / (1.0f + fast_exp(-2.0f * u));
}
inline double gelu_gate(double x) {
  return 0.5 * (1.0 + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
}

// dy/dx = s + x ds/dx with s = (1 + tanh u)/2, ds/du = 2 s (1 - s).
template <typename T>
inline T gelu_derivative(T x) {
  const T s = gelu_gate(x);
  const T du_dx = T(kGeluC) * (T(1) + T(3 * kGeluA) * x * x);
  return s + T(2) * x * s * (T(1) - s) * du_dx;
}

}  // namespace

template <typename T>
void gelu_forward(const Tensor<T>& x, const Tensor<T>& out) {
  const T* xv = x.data();
  T* o = out.data();
  parallel_for(out.numel(), [&](int64_t i) { o[i] = xv[i] * gelu_gate(xv[i]); });
}

template <typename T>
void gelu_backward_kernel(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<T>& dx, bool overwrite) {
  const T *g = dy.data(), *xv = x.data();
  write_or_accumulate_each<T>({dx, overwrite}, [&](int64_t i) { return g[i] * gelu_derivative(xv[i]); });
}

namespace {

template <typename T>
void gelu_backward(Tape<T>& tape, const Node<T>& node) {
  if (const auto dx = tape.input_grad_target(node, 0); !dx.grad.empty())
    gelu_backward_kernel(node.grad, tape.node(node.inputs[0]).value, dx.grad, dx.overwrite);
}

template <typename T>
void relu_backward(Tape<T>& tape, const Node<T>& node) {
  if (const auto dx = tape.input_grad_target(node, 0); !dx.grad.empty()) {
    const T* x = tape.node(node.inputs[0]).value.data();
    const T* g = node.grad.data();
    write_or_accumulate_each<T>(dx, [&](int64_t i) { return x[i] > T(0) ? g[i] : T(0); });
  }
}

// sum and mean: dx += dout * (1 or 1/n), scalars[0] holds the factor.
template <typename T>
void reduce_backward(Tape<T>& tape, const Node<T>& node) {
  if (const auto dx = tape.input_grad_target(node, 0); !dx.grad.empty()) {
    const T g = node.grad.data()[0] * static_cast<T>(node.scalars[0]);
    write_or_accumulate_each<T>(dx, [&](int64_t) { return g; });
  }
}

template <typename T>
Var<T> reduce(Var<T> x, double factor, const char* op) {
  const Tensor<T>& xv = x.value();
  HEADLAB_CHECK(xv.is_contiguous(), op << ": input " << xv.shape().str() << " must be contiguous");
  // Accumulate in double, serially: one order, whatever the thread count.
  double total = 0;
  for (int64_t i = 0, n = xv.numel(); i < n; ++i) total += xv.data()[i];
  Tensor<T> out = x.tape->arena().template empty<T>({1});
  out.data()[0] = static_cast<T>(total * factor);
  x.tape->record(out, reduce_backward<T>, {x}).scalars[0] = factor;
  return x.tape->last();
}

}  // namespace

template <typename T>
Var<T> add(Var<T> a, Var<T> b) {
  check_broadcast("add", a.value(), b.value());
  Tensor<T> out = a.tape->arena().template empty<T>(a.shape());
  const T *av = a.value().data(), *bv = b.value().data();
  const int64_t nb = b.value().numel();
  T* o = out.data();
  if (nb == out.numel())
    parallel_for(out.numel(), [&](int64_t i) { o[i] = av[i] + bv[i]; });
  else
    parallel_for(out.numel(), [&](int64_t i) { o[i] = av[i] + bv[i % nb]; });
  a.tape->record(out, add_backward<T>, {a, b});
  return a.tape->last();
}

template <typename T>
Var<T> mul(Var<T> a, Var<T> b) {
  check_broadcast("mul", a.value(), b.value());
  Tensor<T> out = a.tape->arena().template empty<T>(a.shape());
  const T *av = a.value().data(), *bv = b.value().data();
  const int64_t nb = b.value().numel();
  T* o = out.data();
  parallel_for(out.numel(), [&](int64_t i) { o[i] = av[i] * bv[i % nb]; });
  a.tape->record(out, mul_backward<T>, {a, b});
  return a.tape->last();
}

template <typename T>
Var<T> scale(Var<T> x, double s) {
  HEADLAB_CHECK(x.value().is_contiguous(), "scale: input " << x.shape().str() << " must be contiguous");
  Tensor<T> out = x.tape->arena().template empty<T>(x.shape());
  const T* xv = x.value().data();
  T* o = out.data();
  const T factor = static_cast<T>(s);
  parallel_for(out.numel(), [&](int64_t i) { o[i] = factor * xv[i]; });
  x.tape->record(out, scale_backward<T>, {x}).scalars[0] = s;
  return x.tape->last();
}

template <typename T>
Var<T> gelu(Var<T> x) {
  HEADLAB_CHECK(x.value().is_contiguous(), "gelu: input " << x.shape().str() << " must be contiguous");
  Tensor<T> out = x.tape->arena().template empty<T>(x.shape());
  gelu_forward(x.value(), out);
  x.tape->record(out, gelu_backward<T>, {x});
  return x.tape->last();
}

template <typename T>
Var<T> relu(Var<T> x) {
  HEADLAB_CHECK(x.value().is_contiguous(), "relu: input " << x.shape().str() << " must be contiguous");
  Tensor<T> out = x.tape->arena().template empty<T>(x.shape());
  const T* xv = x.value().data();
  T* o = out.data();
  parallel_for(out.numel(), [&](int64_t i) { o[i] = xv[i] > T(0) ? xv[i] : T(0); });
  x.tape->record(out, relu_backward<T>, {x});
  return x.tape->last();
}

template <typename T>
Var<T> sum(Var<T> x) {
  return reduce(x, 1.0, "sum");
}

template <typename T>
Var<T> mean(Var<T> x) {
  HEADLAB_CHECK(x.value().numel() > 0, "mean: empty input");
  return reduce(x, 1.0 / static_cast<double>(x.value().numel()), "mean");
}

#define HEADLAB_INSTANTIATE(T)                                                                       \
  template Var<T> add<T>(Var<T>, Var<T>);                                                            \
  template Var<T> mul<T>(Var<T>, Var<T>);                                                            \
  template Var<T> scale<T>(Var<T>, double);                                                          \
  template Var<T> gelu<T>(Var<T>);                                                                   \
  template void gelu_forward<T>(const Tensor<T>&, const Tensor<T>&);                                 \
  template void gelu_backward_kernel<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, bool); \
  template Var<T> relu<T>(Var<T>);                                                                   \
  template Var<T> sum<T>(Var<T>);                                                                    \
  template Var<T> mean<T>(Var<T>);                                                                   \
  template void broadcast_rows<T>(const Tensor<T>&, const Tensor<T>&);                               \
  template void sum_rows_accumulate<T>(const Tensor<T>&, const Tensor<T>&);                          \
  template void write_or_accumulate<T>(const Tensor<T>&, const Tensor<T>&, bool);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
