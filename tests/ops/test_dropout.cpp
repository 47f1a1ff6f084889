#include <catch2/catch.hpp>

#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/ops/dropout.h"
#include "headlab/ops/elementwise.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

// dropout(ones) copied out: each element is 0 (dropped) or 1/(1-p) (kept).
std::vector<float> dropout_of_ones(int64_t n, double p, uint64_t seed) {
  Arena arena;
  Tape<float> tape(arena);
  Tensor<float> ones = arena.empty<float>({n});
  ones.fill(1.0f);
  Var<float> y = dropout(tape.leaf_with_grad(ones), p, seed);
  return std::vector<float>(y.value().data(), y.value().data() + n);
}

double dropped_fraction(const std::vector<float>& y) {
  int64_t dropped = 0;
  for (float v : y) dropped += v == 0.0f;
  return static_cast<double>(dropped) / static_cast<double>(y.size());
}

}  // namespace

TEST_CASE("dropout with p = 0 or without grad mode is the identity and records nothing", "[ops][dropout]") {
  Arena arena;
  Tape<double> tape(arena);
  Var<double> x = tape.leaf_with_grad(random_tensor<double>(arena, {4, 5}, 1));
  CHECK(dropout(x, 0.0, 7).id == x.id);
  NoGradGuard<double> eval(tape);
  CHECK(dropout(x, 0.5, 7).id == x.id);
  CHECK(tape.size() == 1);
}

TEST_CASE("dropout zeroes or scales by 1/(1-p), and the backward uses the same mask", "[ops][dropout][grad]") {
  // With L = sum(y * probe), y = mask * x / (1 - p) gives dL/dx = mask * probe / (1 - p): the
  // exact Jacobian of this op, checked element by element.
  Arena arena;
  Tape<double> tape(arena);
  const double p = 0.25;
  auto x = random_tensor<double>(arena, {64, 16}, 2, 0.5, 1.5);  // never 0, so y == 0 means dropped
  auto probe = random_tensor<double>(arena, {64, 16}, 3);
  Var<double> xv = tape.leaf_with_grad(x);
  Var<double> y = dropout(xv, p, 99);
  tape.backward(sum(mul(y, tape.constant(probe))));
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = y.value().data()[i] != 0;
    kept += keep;
    CHECK(y.value().data()[i] == (keep ? x.data()[i] * (1 / (1 - p)) : 0.0));
    CHECK(xv.grad().data()[i] == (keep ? probe.data()[i] * (1 / (1 - p)) : 0.0));
  }
  CHECK(kept > 0);
  CHECK(kept < x.numel());
}

TEST_CASE("dropout backward matches central differences under a fixed seed", "[ops][dropout][grad]") {
  // gradcheck evaluates its finite differences with grad mode off, where dropout is the
  // identity; the graph switches grad mode back on so both passes see the same mask.
  Arena arena;
  const Shape shape = GENERATE(Shape{3, 7}, Shape{1});
  auto x = random_tensor<double>(arena, shape, 4);
  auto r = gradcheck(
      [](Tape<double>& tape, const std::vector<Var<double>>& in) {
        tape.set_grad_enabled(true);
        return dropout(in[0], 0.4, 1234);
      },
      {x});
  INFO(shape.str() << ": " << r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("dropout masks repeat for a seed and differ across seeds", "[ops][dropout]") {
  const auto a = dropout_of_ones(4096, 0.5, 42), b = dropout_of_ones(4096, 0.5, 42);
  const auto c = dropout_of_ones(4096, 0.5, 43);
  CHECK(a == b);
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != c[i];
  // Independent masks at p = 0.5 differ in about half the places.
  CHECK(differing > 1800);
  CHECK(differing < 2300);
}

TEST_CASE("dropout drops about a fraction p of a large tensor", "[ops][dropout]") {
  // 200k Bernoulli(p) draws: the standard deviation of the fraction is at most 0.0012, so 0.006
  // is five of them.
  const double p = GENERATE(0.1, 0.3, 0.9);
  const auto y = dropout_of_ones(200000, p, 2024);
  CHECK(dropped_fraction(y) == Approx(p).margin(0.006));
  const float kept_value = static_cast<float>(1.0 / (1.0 - p));
  for (float v : y) REQUIRE((v == 0.0f || v == kept_value));
}

TEST_CASE("dropout mask is bit-identical for any thread count", "[ops][dropout]") {
  const int previous = num_threads();
  set_num_threads(1);
  const auto one = dropout_of_ones(100000, 0.2, 5);
  set_num_threads(3);
  const auto three = dropout_of_ones(100000, 0.2, 5);
  set_num_threads(previous);
  CHECK(one == three);
}

TEST_CASE("dropout rejects p outside [0, 1)", "[ops][dropout]") {
  Arena arena;
  Tape<double> tape(arena);
  Var<double> x = tape.leaf_with_grad(random_tensor<double>(arena, {3}, 1));
  REQUIRE_THROWS_WITH(dropout(x, 1.0, 1), Catch::Contains("dropout: p=1 must be in [0, 1)"));
  REQUIRE_THROWS_WITH(dropout(x, -0.1, 1), Catch::Contains("dropout: p=-0.1 must be in [0, 1)"));
}
