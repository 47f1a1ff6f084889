// Hard Concrete gates: forward and backward side by side, then the open probability.
// Forward, per head h (u_h from hard_concrete_noise):
//   z = (log u - log(1 - u) + log_alpha) / beta,  s = sigmoid(z),  g = clamp(s (r - l) + l, 0, 1).
// Backward, read in reverse: where the clamp is active (g = 0 or g = 1) it passes no gradient;
// elsewhere dg/ds = r - l, ds/dz = s (1 - s), dz/dlog_alpha = 1 / beta. Only g is kept: on the
// unclamped part s = (g - l) / (r - l) lies in (-l/(r-l), (1-l)/(r-l)) = (1/12, 11/12), far from
// 0 and 1, so reading s back from g loses nothing worth saving a tensor for.
// Open probability: s (r - l) + l > 0  <=>  z > logit(-l / (r - l))  <=>  logit(u) > beta log(-l/r)
// - log_alpha, and logit(u) is standard logistic, so P(g != 0) = sigmoid(log_alpha - beta log(-l/r));
// its derivative is p (1 - p).
#include "headlab/ops/hard_concrete.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "headlab/common/error.h"
#include "headlab/common/hash.h"

namespace headlab {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix64's stream increment, as dropout

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// beta log(-l / r): the log_alpha at which P(g = 0) = 1/2.
double closed_threshold() {
  return HardConcrete::beta * std::log(-HardConcrete::l / HardConcrete::r);
}

template <typename T>
void check_vector(const char* op, const char* name, const Tensor<T>& t, int64_t H) {
  HEADLAB_CHECK(t.rank() == 1 && t.is_contiguous() && (H < 0 || t.size(0) == H),
                op << ": " << name << " " << t.shape().str() << " must be a contiguous [H] vector"
                   << (H >= 0 ? " with H = " + std::to_string(H) : std::string()));
}

}  // namespace

double hard_concrete_noise(uint64_t seed, int64_t h) {
  // Top 53 bits of the h-th splitmix64 output, centred in its bin: (k + 1/2) 2^-53 is in (0, 1).
  const uint64_t bits = splitmix64(splitmix64(seed) + static_cast<uint64_t>(h) * kGolden) >> 11;
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

double hard_concrete_closed_probability(double log_alpha) {
  return sigmoid(closed_threshold() - log_alpha);
}

double hard_concrete_eval_gate(double log_alpha) {
  return hard_concrete_closed_probability(log_alpha) < 0.5 ? 1.0 : 0.0;
}

template <typename T>
void hard_concrete_forward(const Tensor<T>& out, const Tensor<T>& log_alpha, uint64_t seed) {
  check_vector("hard_concrete", "log_alpha", log_alpha, -1);
  check_vector("hard_concrete", "out", out, log_alpha.size(0));
  constexpr double l = HardConcrete::l, r = HardConcrete::r;
  for (int64_t h = 0; h < log_alpha.size(0); ++h) {
    const double u = hard_concrete_noise(seed, h);
    const double s = sigmoid((std::log(u) - std::log1p(-u) + static_cast<double>(log_alpha(h))) / HardConcrete::beta);
    out(h) = static_cast<T>(std::clamp(s * (r - l) + l, 0.0, 1.0));
  }
}

template <typename T>
void hard_concrete_backward(const Tensor<T>& dlog_alpha, const Tensor<T>& dout, const Tensor<T>& out) {
  check_vector("hard_concrete", "out", out, -1);
  check_vector("hard_concrete", "dout", dout, out.size(0));
  check_vector("hard_concrete", "dlog_alpha", dlog_alpha, out.size(0));
  constexpr double l = HardConcrete::l, r = HardConcrete::r;
  for (int64_t h = 0; h < out.size(0); ++h) {
    const double g = static_cast<double>(out(h));
    if (g <= 0.0 || g >= 1.0) continue;  // clamped: no gradient
    const double s = (g - l) / (r - l);
    dlog_alpha(h) += static_cast<T>(static_cast<double>(dout(h)) * (r - l) * s * (1 - s) / HardConcrete::beta);
  }
}

namespace {

template <typename T>
void hard_concrete_node_backward(Tape<T>& tape, const Node<T>& node) {
  if (Tensor<T> dx = tape.input_grad(node, 0); !dx.empty()) hard_concrete_backward(dx, node.grad, node.value);
}

// p = sigmoid(log_alpha - beta log(-l/r)):  dlog_alpha += dp * p (1 - p), p read from the output.
template <typename T>
void open_probability_backward(Tape<T>& tape, const Node<T>& node) {
  if (Tensor<T> dx = tape.input_grad(node, 0); !dx.empty())
    for (int64_t h = 0; h < dx.size(0); ++h) {
      const double p = static_cast<double>(node.value(h));
      dx(h) += static_cast<T>(static_cast<double>(node.grad(h)) * p * (1 - p));
    }
}

}  // namespace

template <typename T>
Var<T> hard_concrete(Var<T> log_alpha, uint64_t seed) {
  Tensor<T> out = log_alpha.tape->arena().template empty<T>(log_alpha.shape());
  hard_concrete_forward(out, log_alpha.value(), seed);
  log_alpha.tape->record(out, hard_concrete_node_backward<T>, {log_alpha});
  return log_alpha.tape->last();
}

template <typename T>
Var<T> hard_concrete_open_probability(Var<T> log_alpha) {
  const Tensor<T>& x = log_alpha.value();
  check_vector("hard_concrete_open_probability", "log_alpha", x, -1);
  Tensor<T> out = log_alpha.tape->arena().template empty<T>(x.shape());
  for (int64_t h = 0; h < x.size(0); ++h)
    out(h) = static_cast<T>(1.0 - hard_concrete_closed_probability(static_cast<double>(x(h))));
  log_alpha.tape->record(out, open_probability_backward<T>, {log_alpha});
  return log_alpha.tape->last();
}

#define HEADLAB_INSTANTIATE(T)                                                                   \
  template void hard_concrete_forward<T>(const Tensor<T>&, const Tensor<T>&, uint64_t);          \
  template void hard_concrete_backward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&); \
  template Var<T> hard_concrete<T>(Var<T>, uint64_t);                                            \
  template Var<T> hard_concrete_open_probability<T>(Var<T>);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
