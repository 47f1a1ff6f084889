// Hard Concrete gates (Louizos et al. 2018), as Voita et al. 2019 use them to prune heads: one
// stochastic gate per head from a learned log_alpha, with Voita's code's constants.
//   log_alpha [H]  ->  g [H] in [0, 1]:
//     s = sigmoid((log u - log(1 - u) + log_alpha) / beta),  u ~ U(0, 1) per head,
//     g = clamp(s (r - l) + l, 0, 1),                        beta = 0.33, (l, r) = (-0.1, 1.1)
//   the L0 penalty's summand P(g != 0) = sigmoid(log_alpha - beta log(-l / r))  [H].
// u is counter-based (common/hash.h): u_h is a pure function of (seed, h), so a step's gates
// are reproducible and the backward recomputes nothing random. Backwards accumulate (+=).
//   Var<float> g = hard_concrete(tape.leaf(log_alpha, dlog_alpha), hash_combine(seed, step));
//   Var<float> penalty = scale(sum(hard_concrete_open_probability(log_alpha_var)), lambda);
#pragma once

#include <cstdint>

#include "headlab/autograd/tape.h"

namespace headlab {

struct HardConcrete {
  static constexpr double beta = 0.33;  // temperature
  static constexpr double l = -0.1;     // stretch interval (l, r) around [0, 1]
  static constexpr double r = 1.1;
};

// The uniform draw u in (0, 1) (never 0 or 1, so log u and log(1 - u) are finite) of head h.
double hard_concrete_noise(uint64_t seed, int64_t h);
// P(g = 0) = P(s (r - l) + l <= 0) = sigmoid(beta log(-l / r) - log_alpha).
double hard_concrete_closed_probability(double log_alpha);
// The evaluation gate: whichever of g = 0 and g != 0 is more probable, i.e. 1 when
// P(g = 0) < 1/2 (log_alpha > beta log(-l / r) = -0.791), else 0 (a tie closes the gate).
double hard_concrete_eval_gate(double log_alpha);

// Kernels (no tape), out/log_alpha/dlog_alpha/dout contiguous [H].
template <typename T>
void hard_concrete_forward(const Tensor<T>& out, const Tensor<T>& log_alpha, uint64_t seed);
// dlog_alpha += dout * (r - l) s (1 - s) / beta where 0 < g < 1, nothing where g is clamped;
// s = (g - l) / (r - l) is read back from the output.
template <typename T>
void hard_concrete_backward(const Tensor<T>& dlog_alpha, const Tensor<T>& dout, const Tensor<T>& out);

// The tape ops.
template <typename T>
Var<T> hard_concrete(Var<T> log_alpha, uint64_t seed);
template <typename T>
Var<T> hard_concrete_open_probability(Var<T> log_alpha);

}  // namespace headlab
