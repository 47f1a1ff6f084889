// Cross-entropy forward and backward, and the evaluation helper, all on one per-row kernel.
//   logits x [rows, V], targets t [rows]:  lse_r = m_r + log sum_j exp(x[r, j] - m_r),
//   m_r = max_j x[r, j] (so every exp is <= 1);  loss = (1/n_valid) sum over valid r of (lse_r - x[r, t_r]).
// Backward, since d lse_r / d x[r, j] = softmax(x[r])_j = exp(x[r, j] - lse_r):
//   dx[r, j] += dloss / n_valid * (exp(x[r, j] - lse_r) - [j == t_r])  for valid rows, nothing for
//   ignored ones.
// Label smoothing eps (PyTorch's CrossEntropyLoss(label_smoothing=eps), Szegedy et al. 2016):
// the target is the distribution q = (1 - eps) onehot(t) + eps / V, so the row's loss is
//   -sum_j q_j log softmax_j = lse_r - (1 - eps) x[r, t_r] - (eps / V) sum_j x[r, j],
// and since sum_j q_j = 1 its gradient is  softmax - q:
//   dx[r, j] += dloss / n_valid * (exp(x[r, j] - lse_r) - (1 - eps) [j == t_r] - eps / V).
// eps = 0 is the plain loss above, computed the same way (no extra pass over the row).
// Determinism: rows are split into kRowChunks fixed chunks (a function of rows only); each chunk
// sums its rows in order, and the chunk sums are added in chunk order, so the loss does not
// depend on the thread count. The backward writes each row from one thread.
#include "headlab/ops/cross_entropy.h"

#include "headlab/ops/fast_exp.h"

#include <algorithm>
#include <cmath>

#include "headlab/common/parallel.h"

namespace headlab {

namespace {

template <typename T>
struct RowLogSoftmax {
  T lse;           // log sum_j exp(row[j])
  int64_t argmax;  // first index of the maximum
};

// exp(x) of a shifted logit x <= 0 in the forward's log-sum-exp: float uses fast_exp (inlined,
// so the sum vectorises; glibc's scalar expf was 7% of a translation training step at V = 4000),
// double std::exp.
inline float logit_exp(float x) {
  return fast_exp(x);
}
inline double logit_exp(double x) {
  return std::exp(x);
}

// The per-row kernel: one pass for the max (and argmax), one for the shifted exponentials, summed
// in SIMD lanes (a fixed order for a given build, so results stay reproducible).
template <typename T>
RowLogSoftmax<T> row_log_softmax(const T* row, int64_t V) {
  T row_max = row[0];
  int64_t argmax = 0;
  for (int64_t j = 1; j < V; ++j)
    if (row[j] > row_max) {
      row_max = row[j];
      argmax = j;
    }
  T sum_exp = T(0);
#pragma omp simd reduction(+ : sum_exp)
  for (int64_t j = 0; j < V; ++j) sum_exp += logit_exp(row[j] - row_max);
  return {row_max + std::log(sum_exp), argmax};
}

constexpr int64_t kRowChunks = 64;

template <typename T>
void check_logits(const Tensor<T>& logits, const char* op) {
  const Shape& shape = logits.shape();
  HEADLAB_CHECK(shape.rank >= 1 && shape.last() >= 1 && logits.is_contiguous(),
                op << ": logits " << shape.str() << " must be contiguous [..., V] with V >= 1");
}

// Every row of logits [..., V]: checks the targets, writes lse[r] (0 for ignored rows) when lse
// is not null, and returns the summed statistics. Shared by the op and cross_entropy_stats.
template <typename T>
CrossEntropyStats cross_entropy_rows(const Tensor<T>& logits, const int32_t* targets, int32_t ignore_index,
                                     double smoothing, T* lse, const char* op) {
  check_logits(logits, op);
  const Shape& shape = logits.shape();
  const int64_t V = shape.last(), rows = shape.rows();
  HEADLAB_CHECK(rows == 0 || targets != nullptr, op << ": targets is null for logits " << shape.str());
  // Validated here, serially, so the kernels (forward and backward) can trust every target.
  for (int64_t r = 0; r < rows; ++r)
    HEADLAB_CHECK(targets[r] == ignore_index || (targets[r] >= 0 && targets[r] < V),
                  op << ": target=" << targets[r] << " at row " << r << " is outside [0, V=" << V
                     << ") and is not ignore_index=" << ignore_index);
  const T* x = logits.data();
  double loss_parts[kRowChunks] = {};
  int64_t valid_parts[kRowChunks] = {}, correct_parts[kRowChunks] = {};
#pragma omp parallel for schedule(static) if (rows * V > kParallelGrain)
  for (int64_t c = 0; c < kRowChunks; ++c) {
    double loss = 0;
    int64_t valid = 0, correct = 0;
    for (int64_t r = rows * c / kRowChunks, r1 = rows * (c + 1) / kRowChunks; r < r1; ++r) {
      const int32_t t = targets[r];
      if (t == ignore_index) {
        if (lse != nullptr) lse[r] = T(0);
        continue;
      }
      const RowLogSoftmax<T> row = row_log_softmax(x + r * V, V);
      if (lse != nullptr) lse[r] = row.lse;
      if (smoothing == 0) {
        loss += static_cast<double>(row.lse - x[r * V + t]);
      } else {
        double row_sum = 0;
#pragma omp simd reduction(+ : row_sum)
        for (int64_t j = 0; j < V; ++j) row_sum += static_cast<double>(x[r * V + j]);
        loss += static_cast<double>(row.lse) - (1 - smoothing) * static_cast<double>(x[r * V + t]) -
                smoothing / static_cast<double>(V) * row_sum;
      }
      ++valid;
      correct += row.argmax == t;
    }
    loss_parts[c] = loss;
    valid_parts[c] = valid;
    correct_parts[c] = correct;
  }
  CrossEntropyStats stats;
  for (int64_t c = 0; c < kRowChunks; ++c) {
    stats.loss_sum += loss_parts[c];
    stats.n_valid += valid_parts[c];
    stats.n_correct += correct_parts[c];
  }
  return stats;
}

// context = targets;  ints[0] = ignore_index, ints[1] = n_valid;  scalars[0] = smoothing;
// saved[0] = lse [rows].
template <typename T>
void cross_entropy_backward(Tape<T>& tape, const Node<T>& node) {
  const int64_t n_valid = node.ints[1];
  // Every row is written (ignored rows as zeros when overwriting), so dlogits may come unzeroed.
  const auto [dlogits, overwrite] = tape.input_grad_target(node, 0);
  if (dlogits.empty()) return;
  if (n_valid == 0) {  // all ignored: the loss was the constant 0
    if (overwrite) dlogits.fill(T(0));
    return;
  }
  const auto* targets = static_cast<const int32_t*>(node.context);
  const auto ignore_index = static_cast<int32_t>(node.ints[0]);
  const Tensor<T>& logits = tape.node(node.inputs[0]).value;
  const int64_t V = logits.shape().last(), rows = logits.shape().rows();
  const T* x = logits.data();
  const T* lse = node.saved[0].data();
  const T g = node.grad.data()[0] / static_cast<T>(n_valid);
  const double smoothing = node.scalars[0];
  const T g_target = g * static_cast<T>(1 - smoothing), g_uniform = g * static_cast<T>(smoothing / V);
  T* d = dlogits.data();
  const bool overwrite_rows =
      overwrite;  // clang 14 (the fuzz build) cannot capture a structured binding in the OpenMP region
#pragma omp parallel for schedule(static) if (rows * V > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets[r];
    T* dr = d + r * V;
    if (t == ignore_index) {
      if (overwrite_rows) std::fill(dr, dr + V, T(0));
      continue;
    }
    const T *xr = x + r * V, row_lse = lse[r];
    // std::exp, not fast_exp: softmax_t - 1 at a confident target cancels, and fast_exp's 2 ulp
    // there moved a 2-class encoder's gate gradients by 2e-4 relative in the portable build.
    if (overwrite_rows)
      for (int64_t j = 0; j < V; ++j) dr[j] = g * std::exp(xr[j] - row_lse) - g_uniform;
    else
      for (int64_t j = 0; j < V; ++j) dr[j] += g * std::exp(xr[j] - row_lse) - g_uniform;
    dr[t] -= g_target;
  }
}

}  // namespace

template <typename T>
Var<T> cross_entropy(Var<T> logits, const int32_t* targets, int32_t ignore_index, double label_smoothing) {
  check_logits(logits.value(), "cross_entropy");
  HEADLAB_CHECK(label_smoothing >= 0 && label_smoothing < 1,
                "cross_entropy: label_smoothing=" << label_smoothing << " is outside [0, 1)");
  Tape<T>& tape = *logits.tape;
  Tensor<T> lse = tape.arena().template empty<T>({logits.shape().rows()});
  const CrossEntropyStats stats =
      cross_entropy_rows(logits.value(), targets, ignore_index, label_smoothing, lse.data(), "cross_entropy");
  Tensor<T> loss = tape.arena().template empty<T>({1});
  loss.data()[0] = static_cast<T>(stats.mean_loss());
  Node<T>& node = tape.record(loss, cross_entropy_backward<T>, {logits});
  node.context = targets;
  node.saved[0] = lse;
  node.ints[0] = ignore_index;
  node.ints[1] = stats.n_valid;
  node.scalars[0] = label_smoothing;
  return tape.last();
}

template <typename T>
CrossEntropyStats cross_entropy_stats(const Tensor<T>& logits, const int32_t* targets, int32_t ignore_index) {
  return cross_entropy_rows<T>(logits, targets, ignore_index, 0.0, nullptr, "cross_entropy_stats");
}

#define HEADLAB_INSTANTIATE(T)                                               \
  template Var<T> cross_entropy<T>(Var<T>, const int32_t*, int32_t, double); \
  template CrossEntropyStats cross_entropy_stats<T>(const Tensor<T>&, const int32_t*, int32_t);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
