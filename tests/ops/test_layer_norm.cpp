#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/ops/elementwise.h"
#include "headlab/ops/layer_norm.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::convert;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

// y, dx, dweight, dbias of layer_norm under L = sum(y * probe), copied out of the tape.
template <typename T>
struct LayerNormRun {
  std::vector<T> y, dx, dweight, dbias;
};

template <typename T>
LayerNormRun<T> run_layer_norm(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b, const Tensor<T>& probe) {
  Arena arena;
  Tape<T> tape(arena);
  Var<T> xv = tape.leaf_with_grad(x), wv = tape.leaf_with_grad(w), bv = tape.leaf_with_grad(b);
  Var<T> y = layer_norm(xv, wv, bv);
  tape.backward(sum(mul(y, tape.constant(probe))));
  auto copy = [](const Tensor<T>& t) { return std::vector<T>(t.data(), t.data() + t.numel()); };
  return {copy(y.value()), copy(xv.grad()), copy(wv.grad()), copy(bv.grad())};
}

// max |a - b| / max(1, |b|) over two equally long vectors.
template <typename A, typename B>
double max_scaled_difference(const std::vector<A>& a, const std::vector<B>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])) / std::max(1.0, std::abs(double(b[i]))));
  return worst;
}

}  // namespace

TEST_CASE("layer_norm forward normalises a hand-worked row and keeps mean and rstd", "[ops][layer_norm]") {
  // Row [1, 2, 3, 4]: mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, so
  // xhat = [-1.5, -0.5, 0.5, 1.5] / sqrt(1.25 + eps), then y = xhat * w + b (worked by hand).
  // Row [2, 2, 2, 2] has variance 0: xhat = 0 and y = b exactly.
  Arena arena;
  Tape<double> tape(arena);
  double x[] = {1, 2, 3, 4, 2, 2, 2, 2}, w[] = {1, 2, 0.5, -1}, b[] = {0, 1, 0, 0.5};
  Var<double> y = layer_norm(tape.constant(Tensor<double>(x, {2, 4})), tape.constant(Tensor<double>(w, {4})),
                             tape.constant(Tensor<double>(b, {4})), 1e-5);
  const double rstd = 1 / std::sqrt(1.25 + 1e-5);
  CHECK(y.value()(0, 0) == Approx(-1.5 * rstd * 1 + 0).epsilon(1e-14));
  CHECK(y.value()(0, 1) == Approx(-0.5 * rstd * 2 + 1).epsilon(1e-14));
  CHECK(y.value()(0, 2) == Approx(0.5 * rstd * 0.5 + 0).epsilon(1e-14));
  CHECK(y.value()(0, 3) == Approx(1.5 * rstd * -1 + 0.5).epsilon(1e-14));
  for (int j = 0; j < 4; ++j) CHECK(y.value()(1, j) == b[j]);
  const Node<double>& node = tape.node(y.id);
  CHECK(node.saved[0].data()[0] == 2.5);
  CHECK(node.saved[1].data()[0] == Approx(rstd).epsilon(1e-14));
  CHECK(node.saved[0].data()[1] == 2.0);
  CHECK(node.saved[1].data()[1] == Approx(1 / std::sqrt(1e-5)).epsilon(1e-12));
}

TEST_CASE("layer_norm backward matches central differences with and without bias", "[ops][layer_norm][grad]") {
  Arena arena;
  // Rows with a non-zero mean and a spread above 1, so the mean and rstd paths both matter.
  auto x = random_tensor<double>(arena, {2, 3, 5}, 11, -2.0, 3.0);
  auto w = random_tensor<double>(arena, {5}, 12, 0.5, 1.5);
  auto b = random_tensor<double>(arena, {5}, 13);
  auto with_bias = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  INFO(with_bias.str());
  REQUIRE(with_bias.max_rel_error <= 1e-6);

  auto x2 = random_tensor<double>(arena, {4, 7}, 14, -1.0, 2.0);
  auto w2 = random_tensor<double>(arena, {7}, 15, -1.5, 1.5);
  auto without_bias = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) { return layer_norm(in[0], in[1], Var<double>{}); },
      {x2, w2});
  INFO(without_bias.str());
  REQUIRE(without_bias.max_rel_error <= 1e-6);
}

TEST_CASE("layer_norm backward holds on edge shapes: one row, C = 2, C = 3", "[ops][layer_norm][grad]") {
  // C = 1 is degenerate (xhat is always 0), so the smallest checked width is 2.
  const int64_t C = GENERATE(2, 3, 16);
  const int64_t rows = GENERATE(1, 3);
  Arena arena;
  auto x = random_tensor<double>(arena, {rows, C}, 20 + C, -1.0, 1.0);
  auto w = random_tensor<double>(arena, {C}, 21, 0.5, 1.5);
  auto b = random_tensor<double>(arena, {C}, 22);
  auto r = gradcheck([](Tape<double>&, const std::vector<Var<double>>& in) { return layer_norm(in[0], in[1], in[2]); },
                     {x, w, b});
  INFO("rows " << rows << " C " << C << ": " << r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("layer_norm in float agrees with double", "[ops][layer_norm]") {
  Arena arena;
  auto x = random_tensor<double>(arena, {24, 48}, 31, -2.0, 3.0);
  auto w = random_tensor<double>(arena, {48}, 32, 0.5, 1.5);
  auto b = random_tensor<double>(arena, {48}, 33);
  auto probe = random_tensor<double>(arena, {24, 48}, 34);
  const auto ref = run_layer_norm(x, w, b, probe);
  const auto got = run_layer_norm(convert<float>(arena, x), convert<float>(arena, w), convert<float>(arena, b),
                                  convert<float>(arena, probe));
  CHECK(max_scaled_difference(got.y, ref.y) <= 1e-5);
  CHECK(max_scaled_difference(got.dx, ref.dx) <= 1e-5);
  CHECK(max_scaled_difference(got.dweight, ref.dweight) <= 1e-5);
  CHECK(max_scaled_difference(got.dbias, ref.dbias) <= 1e-5);
}

TEST_CASE("layer_norm forward and backward are bit-identical for any thread count", "[ops][layer_norm]") {
  // Large enough (512 x 64 > kParallelGrain) that the parallel branches run.
  Arena arena;
  auto x = random_tensor<float>(arena, {512, 64}, 41, -2.0, 2.0);
  auto w = random_tensor<float>(arena, {64}, 42);
  auto b = random_tensor<float>(arena, {64}, 43);
  auto probe = random_tensor<float>(arena, {512, 64}, 44);
  const int previous = num_threads();
  set_num_threads(1);
  const auto one = run_layer_norm(x, w, b, probe);
  set_num_threads(3);
  const auto three = run_layer_norm(x, w, b, probe);
  set_num_threads(previous);
  CHECK(one.y == three.y);
  CHECK(one.dx == three.dx);
  CHECK(one.dweight == three.dweight);
  CHECK(one.dbias == three.dbias);
}

TEST_CASE("layer_norm rejects a weight of the wrong width", "[ops][layer_norm]") {
  Arena arena;
  Tape<double> tape(arena);
  auto x = tape.constant(random_tensor<double>(arena, {2, 5}, 1));
  auto w = tape.constant(random_tensor<double>(arena, {4}, 2));
  REQUIRE_THROWS_WITH(layer_norm(x, w, Var<double>{}),
                      Catch::Contains("layer_norm: weight [4] does not match input [2, 5]"));
}
