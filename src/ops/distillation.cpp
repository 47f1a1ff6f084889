// Distillation loss forward and backward. Per scored row r, with z the student's logits, u the
// teacher's and tau the temperature:
//   ls_r = log sum_j exp(z_j / tau),  lt_r = log sum_j exp(u_j / tau)     (max-shifted, stable)
//   p_t,j = exp(u_j / tau - lt_r),   log p_s,j = z_j / tau - ls_r
//   KL_r = sum_j p_t,j (u_j / tau - lt_r - z_j / tau + ls_r),  loss = tau^2 / n * sum_r KL_r.
// Backward: d KL_r / d z_j = (1 / tau) (p_s,j - p_t,j), since d ls_r / d z_j = p_s,j / tau and
// sum_j p_t,j = 1, so
//   dz[r, j] += dloss * tau / n * (p_s,j - p_t,j)  for scored rows, nothing for ignored ones.
// Determinism: as cross_entropy, rows in fixed chunks summed in chunk order.
#include "headlab/ops/distillation.h"

#include <algorithm>
#include <cmath>

#include "headlab/common/parallel.h"

namespace headlab {

namespace {

constexpr int64_t kRowChunks = 64;

// log sum_j exp(row[j] / tau), in double.
template <typename T>
double log_sum_exp(const T* row, int64_t V, double tau) {
  double m = static_cast<double>(row[0]) / tau;
  for (int64_t j = 1; j < V; ++j) m = std::max(m, static_cast<double>(row[j]) / tau);
  double sum = 0;
  for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(row[j]) / tau - m);
  return m + std::log(sum);
}

// context = targets;  ints[0] = ignore_index, ints[1] = scored rows;  scalars[0] = tau;
// saved[0] = student lse [rows], saved[1] = teacher lse [rows] (both at tau, 0 for ignored rows).
template <typename T>
void distillation_backward(Tape<T>& tape, const Node<T>& node) {
  const auto [dlogits, overwrite] = tape.input_grad_target(node, 0);
  if (dlogits.empty()) return;
  const int64_t n = node.ints[1];
  const auto* targets = static_cast<const int32_t*>(node.context);
  const auto ignore_index = static_cast<int32_t>(node.ints[0]);
  const Tensor<T>& z = tape.node(node.inputs[0]).value;
  const Tensor<T>& u = tape.node(node.inputs[1]).value;
  const int64_t V = z.shape().last(), rows = z.shape().rows();
  const double tau = node.scalars[0];
  const double g = n > 0 ? static_cast<double>(node.grad.data()[0]) * tau / static_cast<double>(n) : 0.0;
  const T *ls = node.saved[0].data(), *lt = node.saved[1].data();
  T* d = dlogits.data();
  const bool overwrite_rows = overwrite;  // not a structured binding inside the OpenMP region (clang 14)
#pragma omp parallel for schedule(static) if (rows * V > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    T* dr = d + r * V;
    if (n == 0 || targets[r] == ignore_index) {
      if (overwrite_rows) std::fill(dr, dr + V, T(0));
      continue;
    }
    const T *zr = z.data() + r * V, *ur = u.data() + r * V;
    for (int64_t j = 0; j < V; ++j) {
      const double ps = std::exp(static_cast<double>(zr[j]) / tau - static_cast<double>(ls[r]));
      const double pt = std::exp(static_cast<double>(ur[j]) / tau - static_cast<double>(lt[r]));
      const T v = static_cast<T>(g * (ps - pt));
      dr[j] = overwrite_rows ? v : dr[j] + v;
    }
  }
}

}  // namespace

template <typename T>
Var<T> distillation_loss(Var<T> student, Var<T> teacher, const int32_t* targets, int32_t ignore_index,
                         double temperature) {
  const Shape& shape = student.shape();
  HEADLAB_CHECK(shape.rank >= 1 && shape.last() >= 1 && student.value().is_contiguous(),
                "distillation_loss: student logits " << shape.str() << " must be contiguous [..., V]");
  HEADLAB_CHECK(
      teacher.shape() == shape && teacher.value().is_contiguous(),
      "distillation_loss: teacher logits " << teacher.shape().str() << " must match the student's " << shape.str());
  HEADLAB_CHECK(temperature > 0 && std::isfinite(temperature),
                "distillation_loss: temperature " << temperature << " must be positive");
  const int64_t V = shape.last(), rows = shape.rows();
  HEADLAB_CHECK(rows == 0 || targets != nullptr, "distillation_loss: targets is null");
  Tape<T>& tape = *student.tape;
  Tensor<T> ls = tape.arena().template empty<T>({rows}), lt = tape.arena().template empty<T>({rows});
  const T *z = student.value().data(), *u = teacher.value().data();
  double parts[kRowChunks] = {};
  int64_t counts[kRowChunks] = {};
#pragma omp parallel for schedule(static) if (rows * V > kParallelGrain)
  for (int64_t c = 0; c < kRowChunks; ++c)
    for (int64_t r = rows * c / kRowChunks, r1 = rows * (c + 1) / kRowChunks; r < r1; ++r) {
      if (targets[r] == ignore_index) {
        ls.data()[r] = lt.data()[r] = T(0);
        continue;
      }
      const T *zr = z + r * V, *ur = u + r * V;
      const double s = log_sum_exp(zr, V, temperature), t = log_sum_exp(ur, V, temperature);
      ls.data()[r] = static_cast<T>(s);
      lt.data()[r] = static_cast<T>(t);
      double kl = 0;
      for (int64_t j = 0; j < V; ++j) {
        const double log_pt = static_cast<double>(ur[j]) / temperature - t;
        kl += std::exp(log_pt) * (log_pt - (static_cast<double>(zr[j]) / temperature - s));
      }
      parts[c] += kl;
      ++counts[c];
    }
  double sum = 0;
  int64_t n = 0;
  for (int64_t c = 0; c < kRowChunks; ++c) sum += parts[c], n += counts[c];
  Tensor<T> loss = tape.arena().template empty<T>({1});
  loss.data()[0] = static_cast<T>(n > 0 ? temperature * temperature * sum / static_cast<double>(n) : 0.0);
  Node<T>& node = tape.record(loss, distillation_backward<T>, {student, teacher});
  node.context = targets;
  node.saved[0] = ls;
  node.saved[1] = lt;
  node.ints[0] = ignore_index;
  node.ints[1] = n;
  node.scalars[0] = temperature;
  return tape.last();
}

template Var<float> distillation_loss<float>(Var<float>, Var<float>, const int32_t*, int32_t, double);
template Var<double> distillation_loss<double>(Var<double>, Var<double>, const int32_t*, int32_t, double);

}  // namespace headlab
