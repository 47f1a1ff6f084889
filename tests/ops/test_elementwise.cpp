#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/ops/elementwise.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

using Inputs = std::vector<Var<double>>;

// Values in +-[0.1, 1]: no element within 0.1 of ReLU's kink at 0.
Tensor<double> away_from_zero(Arena& arena, const Shape& shape, uint64_t seed) {
  Tensor<double> t = random_tensor<double>(arena, shape, seed, 0.1, 1.0);
  for (int64_t i = 0; i < t.numel(); i += 2) t.data()[i] = -t.data()[i];
  return t;
}

}  // namespace

TEST_CASE("add sums equal shapes and broadcasts a bias over rows", "[ops][elementwise]") {
  // By hand: [[1, 2, 3], [4, 5, 6]] + [[10, 20, 30], [40, 50, 60]] and + bias [10, 20, 30].
  Arena arena;
  Tape<double> tape(arena);
  double a[] = {1, 2, 3, 4, 5, 6}, b[] = {10, 20, 30, 40, 50, 60}, bias[] = {10, 20, 30};
  Var<double> av = tape.constant(Tensor<double>(a, {2, 3}));
  Var<double> same = add(av, tape.constant(Tensor<double>(b, {2, 3})));
  Var<double> broadcast = add(av, tape.constant(Tensor<double>(bias, {3})));
  const double expected_same[] = {11, 22, 33, 44, 55, 66}, expected_broadcast[] = {11, 22, 33, 14, 25, 36};
  for (int i = 0; i < 6; ++i) {
    CHECK(same.value().data()[i] == expected_same[i]);
    CHECK(broadcast.value().data()[i] == expected_broadcast[i]);
  }
}

TEST_CASE("add backward matches central differences, same shape and bias broadcast", "[ops][elementwise][grad]") {
  Arena arena;
  auto a = random_tensor<double>(arena, {2, 3, 4}, 1);
  auto same = gradcheck([](Tape<double>&, const Inputs& in) { return add(in[0], in[1]); },
                        {a, random_tensor<double>(arena, {2, 3, 4}, 2)});
  INFO(same.str());
  REQUIRE(same.max_rel_error <= 1e-6);
  auto bias = gradcheck([](Tape<double>&, const Inputs& in) { return add(in[0], in[1]); },
                        {a, random_tensor<double>(arena, {4}, 3)});
  INFO(bias.str());
  REQUIRE(bias.max_rel_error <= 1e-6);
  auto inner = gradcheck([](Tape<double>&, const Inputs& in) { return add(in[0], in[1]); },
                         {a, random_tensor<double>(arena, {3, 4}, 4)});
  INFO(inner.str());
  REQUIRE(inner.max_rel_error <= 1e-6);
}

TEST_CASE("mul multiplies elementwise and broadcasts over rows", "[ops][elementwise]") {
  // By hand: [[1, 2, 3], [4, 5, 6]] * [2, -1, 0.5] = [[2, -2, 1.5], [8, -5, 3]].
  Arena arena;
  Tape<double> tape(arena);
  double a[] = {1, 2, 3, 4, 5, 6}, b[] = {2, -1, 0.5};
  Var<double> y = mul(tape.constant(Tensor<double>(a, {2, 3})), tape.constant(Tensor<double>(b, {3})));
  const double expected[] = {2, -2, 1.5, 8, -5, 3};
  for (int i = 0; i < 6; ++i) CHECK(y.value().data()[i] == expected[i]);
}

TEST_CASE("mul backward matches central differences, same shape, broadcast and squared", "[ops][elementwise][grad]") {
  Arena arena;
  auto a = random_tensor<double>(arena, {3, 5}, 5);
  auto same = gradcheck([](Tape<double>&, const Inputs& in) { return mul(in[0], in[1]); },
                        {a, random_tensor<double>(arena, {3, 5}, 6)});
  INFO(same.str());
  REQUIRE(same.max_rel_error <= 1e-6);
  auto broadcast = gradcheck([](Tape<double>&, const Inputs& in) { return mul(in[0], in[1]); },
                             {a, random_tensor<double>(arena, {5}, 7)});
  INFO(broadcast.str());
  REQUIRE(broadcast.max_rel_error <= 1e-6);
  auto squared = gradcheck([](Tape<double>&, const Inputs& in) { return mul(in[0], in[0]); }, {a});
  INFO(squared.str());
  REQUIRE(squared.max_rel_error <= 1e-6);
}

TEST_CASE("scale multiplies by a constant", "[ops][elementwise][grad]") {
  Arena arena;
  Tape<double> tape(arena);
  double x[] = {1, -2, 0.5};
  Var<double> y = scale(tape.constant(Tensor<double>(x, {3})), -3.0);
  CHECK(y.value()(0) == -3);
  CHECK(y.value()(1) == 6);
  CHECK(y.value()(2) == -1.5);
  auto r = gradcheck([](Tape<double>&, const Inputs& in) { return scale(in[0], 0.37); },
                     {random_tensor<double>(arena, {4, 3}, 8)});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("gelu matches the tanh-form reference values", "[ops][elementwise][grad]") {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated in Python's math module;
  // gelu(1) = 0.8411919906082768 also matches torch.nn.functional.gelu(approximate="tanh").
  Arena arena;
  Tape<double> tape(arena);
  double x[] = {1.0, -1.0, 2.0, -0.5, 0.0};
  Var<double> y = gelu(tape.constant(Tensor<double>(x, {5})));
  CHECK(y.value()(0) == Approx(0.8411919906082768).epsilon(1e-14));
  CHECK(y.value()(1) == Approx(-0.15880800939172324).epsilon(1e-14));
  CHECK(y.value()(2) == Approx(1.954597694087775).epsilon(1e-14));
  CHECK(y.value()(3) == Approx(-0.15428599017485606).epsilon(1e-14));
  CHECK(y.value()(4) == 0);
  auto r = gradcheck([](Tape<double>&, const Inputs& in) { return gelu(in[0]); },
                     {random_tensor<double>(arena, {3, 7}, 9, -3.0, 3.0)});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("float gelu (inlined exp) agrees with the double tanh form, values and derivatives", "[ops][elementwise]") {
  // Dense over [-12, 12] (both tails and the bend), enough elements for the threaded path.
  const int64_t n = 3 * kParallelGrain;
  Arena arena;
  Tensor<double> xd = arena.empty<double>({n});
  for (int64_t i = 0; i < n; ++i) xd.data()[i] = -12.0 + 24.0 * static_cast<double>(i) / static_cast<double>(n - 1);
  Tensor<float> xf = test::convert<float>(arena, xd);
  Tape<double> td(arena);
  Tape<float> tf(arena);
  Var<double> vd = td.leaf_with_grad(xd);
  Var<float> vf = tf.leaf_with_grad(xf);
  Var<double> yd = gelu(vd);
  Var<float> yf = gelu(vf);
  td.backward(sum(yd));
  tf.backward(sum(yf));
  double worst_value = 0, worst_derivative = 0;
  for (int64_t i = 0; i < n; ++i) {
    // Compare against the double function at the float input, so only the float evaluation differs.
    const double x = static_cast<double>(xf.data()[i]);
    const double y = x * 0.5 * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    worst_value = std::max(worst_value, std::abs(yf.value().data()[i] - y) / (1e-6 + std::abs(y)));
    worst_derivative = std::max(
        worst_derivative, std::abs(vf.grad().data()[i] - vd.grad().data()[i]) / (1 + std::abs(vd.grad().data()[i])));
  }
  INFO("max relative error: value " << worst_value << ", derivative " << worst_derivative);
  // In the negative tail y ~ x e^{-2u} with |2u| up to ~20: the float rounding of u alone costs
  // ~20 ulp relative there (observed 1.3e-6); a wrong term would be off by O(1).
  CHECK(worst_value <= 4e-6);
  CHECK(worst_derivative <= 2e-6);
}

TEST_CASE("relu keeps positives, zeroes negatives, and passes gradient only where x > 0", "[ops][elementwise][grad]") {
  Arena arena;
  Tape<double> tape(arena);
  double x[] = {-2, -0.5, 0.5, 3};
  Var<double> y = relu(tape.constant(Tensor<double>(x, {4})));
  CHECK(y.value()(0) == 0);
  CHECK(y.value()(1) == 0);
  CHECK(y.value()(2) == 0.5);
  CHECK(y.value()(3) == 3);
  auto r = gradcheck([](Tape<double>&, const Inputs& in) { return relu(in[0]); }, {away_from_zero(arena, {4, 6}, 10)});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("sum and mean reduce to one element", "[ops][elementwise][grad]") {
  // 1 + 2 + ... + 6 = 21, mean 3.5.
  Arena arena;
  Tape<double> tape(arena);
  double x[] = {1, 2, 3, 4, 5, 6};
  Var<double> xv = tape.constant(Tensor<double>(x, {2, 3}));
  CHECK(sum(xv).value()(0) == 21);
  CHECK(mean(xv).value()(0) == 3.5);
  CHECK(sum(xv).shape() == Shape({1}));
  auto s =
      gradcheck([](Tape<double>&, const Inputs& in) { return sum(in[0]); }, {random_tensor<double>(arena, {3, 4}, 11)});
  INFO(s.str());
  REQUIRE(s.max_rel_error <= 1e-6);
  auto m = gradcheck([](Tape<double>&, const Inputs& in) { return mean(in[0]); },
                     {random_tensor<double>(arena, {3, 4}, 12)});
  INFO(m.str());
  REQUIRE(m.max_rel_error <= 1e-6);
}

TEST_CASE("bias and broadcast-mul gradients are bit-identical for any thread count", "[ops][elementwise]") {
  // [512, 64] > kParallelGrain, so the column-split reductions run in parallel.
  Arena arena;
  auto a = random_tensor<float>(arena, {512, 64}, 13);
  auto b = random_tensor<float>(arena, {64}, 14);
  auto c = random_tensor<float>(arena, {64}, 15);
  auto probe = random_tensor<float>(arena, {512, 64}, 16);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Arena step_arena;
    Tape<float> tape(step_arena);
    Var<float> av = tape.leaf_with_grad(a), bv = tape.leaf_with_grad(b), cv = tape.leaf_with_grad(c);
    tape.backward(sum(mul(mul(add(av, bv), cv), tape.constant(probe))));
    std::vector<float> grads(bv.grad().data(), bv.grad().data() + 64);
    grads.insert(grads.end(), cv.grad().data(), cv.grad().data() + 64);
    grads.insert(grads.end(), av.grad().data(), av.grad().data() + av.grad().numel());
    return grads;
  };
  const int previous = num_threads();
  const auto one = run(1), three = run(3);
  set_num_threads(previous);
  CHECK(one == three);
}

TEST_CASE("add rejects a second operand that is not a trailing suffix", "[ops][elementwise]") {
  Arena arena;
  Tape<double> tape(arena);
  auto a = tape.constant(random_tensor<double>(arena, {2, 3}, 1));
  auto b = tape.constant(random_tensor<double>(arena, {2}, 2));
  REQUIRE_THROWS_WITH(add(a, b), Catch::Contains("add: cannot broadcast [2] over [2, 3]"));
}
