// LayerNorm forward and backward (llm.c's layernorm, on the tape).
//   x [rows, C]:  mean = sum(x)/C,  var = sum((x - mean)^2)/C,  rstd = 1/sqrt(var + eps),
//                 xhat = (x - mean) * rstd,  y = xhat * w + b.
// Backward, per row, with g = dy * w (the gradient reaching xhat):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dw += sum over rows of dy * xhat,   db += sum over rows of dy.
// dx is written (=) instead when it is the first contribution to x's gradient (overwrite_dx).
// Determinism: dx splits rows across threads (each row is one thread's); dw and db split columns
// across threads and sum each column over the rows in row order, so no result depends on the
// thread count.
#include "headlab/ops/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "headlab/common/parallel.h"
#include "headlab/ops/elementwise.h"

namespace headlab {

namespace {

// Mean and 1/std of N rows of x (row stride C). Each row's sums run over j in order, exactly as
// one row at a time would (no reassociation: results are bit-identical), but N rows side by
// side: one row's adds each wait for the one before, so independent rows keep the adder busy.
template <int N, typename T>
void row_stats(const T* x, int64_t C, T inv_c, T eps, T* mean, T* rstd) {
  T sum[N] = {};
  for (int64_t j = 0; j < C; ++j)
    for (int r = 0; r < N; ++r) sum[r] += x[r * C + j];
  T m[N], squares[N] = {};
  for (int r = 0; r < N; ++r) m[r] = sum[r] * inv_c;
  // Two passes (mean, then centred squares): no cancellation when |mean| >> std.
  for (int64_t j = 0; j < C; ++j)
    for (int r = 0; r < N; ++r) squares[r] += (x[r * C + j] - m[r]) * (x[r * C + j] - m[r]);
  for (int r = 0; r < N; ++r) {
    mean[r] = m[r];
    rstd[r] = T(1) / std::sqrt(squares[r] * inv_c + eps);
  }
}

// The forward's y = xhat * w + b sends g = dy * w to xhat; xhat = (x - mean) * rstd then spreads
// it back through x, mean and rstd, which gives two row means: of g and of g * xhat. N rows side
// by side, each summed in order, as row_stats.
template <int N, typename T>
void gradient_means(const T* dy, const T* x, const T* w, const T* mean, const T* rstd, int64_t C, T inv_c, T* mean_g,
                    T* mean_g_xhat) {
  T sum_g[N] = {}, sum_g_xhat[N] = {};
  for (int64_t j = 0; j < C; ++j)
    for (int r = 0; r < N; ++r) {
      const T g = dy[r * C + j] * w[j];
      sum_g[r] += g;
      sum_g_xhat[r] += g * (x[r * C + j] - mean[r]) * rstd[r];
    }
  for (int r = 0; r < N; ++r) {
    mean_g[r] = sum_g[r] * inv_c;
    mean_g_xhat[r] = sum_g_xhat[r] * inv_c;
  }
}

constexpr int kStatRows = 8;

}  // namespace

template <typename T>
void layer_norm_forward(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias, double eps,
                        const Tensor<T>& y, const Tensor<T>& mean, const Tensor<T>& rstd) {
  const int64_t C = weight.numel(), rows = C ? x.numel() / C : 0;
  const T *xp = x.data(), *w = weight.data(), *b = bias.data();
  T *yp = y.data(), *mean_out = mean.data(), *rstd_out = rstd.data();
  const T inv_c = T(1) / static_cast<T>(C), eps_t = static_cast<T>(eps);
  const int64_t groups = (rows + kStatRows - 1) / kStatRows;
#pragma omp parallel for schedule(static) if (rows * C > kParallelGrain)
  for (int64_t group = 0; group < groups; ++group) {
    const int64_t r0 = group * kStatRows, n = std::min<int64_t>(kStatRows, rows - r0);
    T m[kStatRows], rs[kStatRows];
    if (n == kStatRows) {
      row_stats<kStatRows>(xp + r0 * C, C, inv_c, eps_t, m, rs);
    } else {
      for (int64_t i = 0; i < n; ++i) row_stats<1>(xp + (r0 + i) * C, C, inv_c, eps_t, m + i, rs + i);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = r0 + i;
      const T* xr = xp + r * C;
      T* yr = yp + r * C;
      if (b != nullptr)
        for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - m[i]) * rs[i] * w[j] + b[j];
      else
        for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - m[i]) * rs[i] * w[j];
      if (mean_out != nullptr) mean_out[r] = m[i];
      if (rstd_out != nullptr) rstd_out[r] = rs[i];
    }
  }
}

template <typename T>
void layer_norm_backward(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& mean,
                         const Tensor<T>& rstd, const Tensor<T>& dx, const Tensor<T>& dweight, const Tensor<T>& dbias,
                         bool overwrite_dx) {
  const int64_t C = weight.numel(), rows = C ? x.numel() / C : 0;
  const T *g_out = dy.data(), *xp = x.data(), *w = weight.data(), *mp = mean.data(), *rp = rstd.data();
  const T inv_c = T(1) / static_cast<T>(C);
  if (!dx.empty()) {
    T* d = dx.data();
    const int64_t groups = (rows + kStatRows - 1) / kStatRows;
#pragma omp parallel for schedule(static) if (rows * C > kParallelGrain)
    for (int64_t group = 0; group < groups; ++group) {
      const int64_t r0 = group * kStatRows, n = std::min<int64_t>(kStatRows, rows - r0);
      T mean_g[kStatRows], mean_g_xhat[kStatRows];
      if (n == kStatRows) {
        gradient_means<kStatRows>(g_out + r0 * C, xp + r0 * C, w, mp + r0, rp + r0, C, inv_c, mean_g, mean_g_xhat);
      } else {
        for (int64_t i = 0; i < n; ++i)
          gradient_means<1>(g_out + (r0 + i) * C, xp + (r0 + i) * C, w, mp + r0 + i, rp + r0 + i, C, inv_c, mean_g + i,
                            mean_g_xhat + i);
      }
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = r0 + i;
        const T *xr = xp + r * C, *gr = g_out + r * C;
        const T m = mp[r], rs = rp[r];
        T* dr = d + r * C;
        if (overwrite_dx) {
          for (int64_t j = 0; j < C; ++j) {
            const T xhat = (xr[j] - m) * rs;
            dr[j] = rs * (gr[j] * w[j] - mean_g[i] - xhat * mean_g_xhat[i]);
          }
        } else {
          for (int64_t j = 0; j < C; ++j) {
            const T xhat = (xr[j] - m) * rs;
            dr[j] += rs * (gr[j] * w[j] - mean_g[i] - xhat * mean_g_xhat[i]);
          }
        }
      }
    }
  }
  if (!dweight.empty()) {
    // Columns in blocks of 16 (one 64-byte line of floats): each block is one thread's, and
    // each column is summed over the rows in order.
    constexpr int64_t kColumnBlock = 16;
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
    T* dw = dweight.data();
#pragma omp parallel for schedule(static) if (rows * C > kParallelGrain)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * kColumnBlock, j1 = std::min(C, j0 + kColumnBlock);
      T partial[kColumnBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const T *xr = xp + r * C, *gr = g_out + r * C;
        const T m = mp[r], rs = rp[r];
        for (int64_t j = j0; j < j1; ++j) partial[j - j0] += gr[j] * ((xr[j] - m) * rs);
      }
      for (int64_t j = j0; j < j1; ++j) dw[j] += partial[j - j0];
    }
  }
  if (!dbias.empty()) sum_rows_accumulate(dy, dbias);
}

namespace {

// inputs: x, weight[, bias];  saved[0] = mean [rows], saved[1] = rstd [rows];  scalars[0] = eps.
template <typename T>
void layer_norm_tape_backward(Tape<T>& tape, const Node<T>& node) {
  // dx is written whole (input_grad_target); the kernel writes it before touching dweight and
  // dbias, which stay accumulated (parameters).
  const auto [dx, overwrite_dx] = tape.input_grad_target(node, 0);
  const Tensor<T> dweight = tape.input_grad(node, 1);
  const Tensor<T> dbias = node.n_inputs == 3 ? tape.input_grad(node, 2) : Tensor<T>();
  layer_norm_backward(node.grad, tape.node(node.inputs[0]).value, tape.node(node.inputs[1]).value, node.saved[0],
                      node.saved[1], dx, dweight, dbias, overwrite_dx);
}

}  // namespace

template <typename T>
Var<T> layer_norm(Var<T> x, Var<T> weight, Var<T> bias, double eps) {
  HEADLAB_CHECK(weight.defined(), "layer_norm: weight is required (bias may be left undefined)");
  const Shape& xs = x.shape();
  const Tensor<T>& w = weight.value();
  HEADLAB_CHECK(xs.rank >= 1 && xs.last() >= 1 && x.value().is_contiguous(),
                "layer_norm: input " << xs.str() << " must have rank >= 1, C >= 1 and be contiguous");
  HEADLAB_CHECK(w.rank() == 1 && w.size(0) == xs.last() && w.is_contiguous(),
                "layer_norm: weight " << w.shape().str() << " does not match input " << xs.str() << " (want ["
                                      << xs.last() << "])");
  if (bias.defined()) {
    const Tensor<T>& b = bias.value();
    HEADLAB_CHECK(b.rank() == 1 && b.size(0) == xs.last() && b.is_contiguous(),
                  "layer_norm: bias " << b.shape().str() << " does not match input " << xs.str() << " (want ["
                                      << xs.last() << "])");
  }
  HEADLAB_CHECK(eps > 0, "layer_norm: eps=" << eps << " must be positive");
  Tape<T>& tape = *x.tape;
  Tensor<T> y = tape.arena().template empty<T>(xs);
  // mean and rstd are 2/C of the output's size, so they are kept even when nothing will read them.
  Tensor<T> mean = tape.arena().template empty<T>({xs.rows()});
  Tensor<T> rstd = tape.arena().template empty<T>({xs.rows()});
  layer_norm_forward(x.value(), w, bias.defined() ? bias.value() : Tensor<T>(), eps, y, mean, rstd);
  Node<T>& node = bias.defined() ? tape.record(y, layer_norm_tape_backward<T>, {x, weight, bias})
                                 : tape.record(y, layer_norm_tape_backward<T>, {x, weight});
  node.saved[0] = mean;
  node.saved[1] = rstd;
  node.scalars[0] = eps;
  return tape.last();
}

#define HEADLAB_INSTANTIATE(T)                                                                                        \
  template Var<T> layer_norm<T>(Var<T>, Var<T>, Var<T>, double);                                                      \
  template void layer_norm_forward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, double, const Tensor<T>&, \
                                      const Tensor<T>&, const Tensor<T>&);                                            \
  template void layer_norm_backward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,        \
                                       const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, bool);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
