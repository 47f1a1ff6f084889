#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headlab/ops/elementwise.h"
#include "headlab/ops/hard_concrete.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

double logistic(double x) {
  return 1 / (1 + std::exp(-x));
}

// The gate before the clamp, s (r - l) + l, written out from the definition.
double stretched(double log_alpha, double u) {
  const double s = logistic((std::log(u) - std::log(1 - u) + log_alpha) / 0.33);
  return s * 1.2 - 0.1;
}

}  // namespace

TEST_CASE("hard concrete gates follow the definition and clamp to [0, 1]", "[ops][hard_concrete]") {
  Arena arena;
  Tape<double> tape(arena);
  const int64_t H = 64;
  Tensor<double> log_alpha = random_tensor<double>(arena, {H}, 5, -3, 3);
  log_alpha(0) = 40;   // always open: g = 1 for any u
  log_alpha(1) = -40;  // always closed
  const uint64_t seed = 17;
  const Var<double> g = hard_concrete(tape.leaf_with_grad(log_alpha), seed);
  int64_t zeros = 0, ones = 0;
  for (int64_t h = 0; h < H; ++h) {
    const double u = hard_concrete_noise(seed, h);
    REQUIRE(u > 0);
    REQUIRE(u < 1);
    const double expected = std::min(1.0, std::max(0.0, stretched(log_alpha(h), u)));
    CHECK(g.value()(h) == Approx(expected).epsilon(1e-14).margin(1e-15));
    zeros += g.value()(h) == 0.0;
    ones += g.value()(h) == 1.0;
  }
  CHECK(g.value()(0) == 1.0);
  CHECK(g.value()(1) == 0.0);
  CHECK(zeros > 1);  // the stretch makes exact 0 and 1 reachable for ordinary log_alpha too
  CHECK(ones > 1);
  CHECK(zeros + ones < H);
  // Another seed, other noise; the same seed, the same noise.
  CHECK(hard_concrete_noise(seed, 3) == hard_concrete_noise(seed, 3));
  CHECK(hard_concrete_noise(seed, 3) != hard_concrete_noise(seed + 1, 3));
}

TEST_CASE("hard concrete backward matches central differences with fixed noise", "[ops][hard_concrete][grad]") {
  Arena arena;
  const int64_t H = 64;
  const uint64_t seed = 3;
  Tensor<double> log_alpha = random_tensor<double>(arena, {H}, 9, -1, 1);
  // Keep every element away from the clamp's kinks (a finite difference across one is wrong by
  // construction), and make sure both clamped and unclamped elements are in the check.
  int64_t inside = 0;
  for (int64_t h = 0; h < H; ++h) {
    const double z = stretched(log_alpha(h), hard_concrete_noise(seed, h));
    REQUIRE(std::abs(z) > 1e-3);
    REQUIRE(std::abs(z - 1) > 1e-3);
    inside += z > 0 && z < 1;
  }
  REQUIRE(inside >= 8);
  REQUIRE(inside <= H - 4);
  const auto r = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& in) { return hard_concrete(in[0], seed); }, {log_alpha});
  INFO(r.str());
  CHECK(r.max_rel_error <= 1e-6);
}

TEST_CASE("the L0 penalty's open probability matches sampled gates and central differences",
          "[ops][hard_concrete][grad]") {
  Arena arena;
  Tape<double> tape(arena);
  const int64_t H = 5;
  Tensor<double> log_alpha = arena.empty<double>({H});
  const double values[H] = {-3, -0.791, 0, 1, 3};
  for (int64_t h = 0; h < H; ++h) log_alpha(h) = values[h];
  const Var<double> p = hard_concrete_open_probability(tape.leaf_with_grad(log_alpha));
  // P(g != 0) by sampling: 20000 noise draws per head (binomial std <= 0.0036).
  const int n = 20000;
  for (int64_t h = 0; h < H; ++h) {
    int open = 0;
    for (int i = 0; i < n; ++i) open += stretched(log_alpha(h), hard_concrete_noise(static_cast<uint64_t>(i), h)) > 0;
    INFO("log_alpha " << log_alpha(h));
    CHECK(p.value()(h) == Approx(static_cast<double>(open) / n).margin(0.015));
    CHECK(p.value()(h) == Approx(1 - hard_concrete_closed_probability(log_alpha(h))).epsilon(1e-15));
  }
  CHECK(p.value()(2) == Approx(logistic(-0.33 * std::log(0.1 / 1.1))).epsilon(1e-14));
  const auto r = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) {
        return scale(sum(hard_concrete_open_probability(in[0])), 0.7);
      },
      {log_alpha});
  INFO(r.str());
  CHECK(r.max_rel_error <= 1e-6);
}

TEST_CASE("the evaluation gate opens exactly when g != 0 is more probable than g = 0", "[ops][hard_concrete]") {
  const double threshold = 0.33 * std::log(0.1 / 1.1);  // -0.7913: P(g = 0) = 1/2
  CHECK(hard_concrete_closed_probability(threshold) == Approx(0.5).epsilon(1e-14));
  CHECK(hard_concrete_eval_gate(threshold + 1e-9) == 1.0);
  CHECK(hard_concrete_eval_gate(threshold - 1e-9) == 0.0);
  CHECK(hard_concrete_eval_gate(3.0) == 1.0);
  CHECK(hard_concrete_eval_gate(-0.5) == 1.0);  // Voita's code's threshold (log_alpha > 0) would close it
  CHECK(hard_concrete_eval_gate(-3.0) == 0.0);
}
