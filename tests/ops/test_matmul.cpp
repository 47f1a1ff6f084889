#include <catch2/catch.hpp>

#include "headlab/ops/matmul.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

TEST_CASE("matmul forward gives the textbook 2x2 product", "[ops][matmul]") {
  // [[1,2],[3,4]] * [[5,6],[7,8]] = [[19,22],[43,50]] (worked by hand).
  Arena arena;
  Tape<double> tape(arena);
  double a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  Var<double> c = matmul(tape.constant(Tensor<double>(a, {2, 2})), tape.constant(Tensor<double>(b, {2, 2})));
  CHECK(c.value()(0, 0) == 19);
  CHECK(c.value()(0, 1) == 22);
  CHECK(c.value()(1, 0) == 43);
  CHECK(c.value()(1, 1) == 50);
  // a^T b = [[1,3],[2,4]] * b = [[26,30],[38,44]].
  Var<double> ct = matmul(tape.constant(Tensor<double>(a, {2, 2})), tape.constant(Tensor<double>(b, {2, 2})), true);
  CHECK(ct.value()(0, 0) == 26);
  CHECK(ct.value()(1, 1) == 44);
}

TEST_CASE("matmul backward matches central differences for every transpose", "[ops][matmul][grad]") {
  const bool ta = GENERATE(false, true), tb = GENERATE(false, true);
  Arena arena;
  const int64_t m = 3, k = 5, n = 4;
  auto a = random_tensor<double>(arena, ta ? Shape{k, m} : Shape{m, k}, 1);
  auto b = random_tensor<double>(arena, tb ? Shape{n, k} : Shape{k, n}, 2);
  auto r = gradcheck([&](Tape<double>&, const std::vector<Var<double>>& in) { return matmul(in[0], in[1], ta, tb); },
                     {a, b});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("linear backward matches central differences with and without bias", "[ops][matmul][grad]") {
  Arena arena;
  auto x = random_tensor<double>(arena, {2, 3, 5}, 3);
  auto w = random_tensor<double>(arena, {4, 5}, 4);
  auto b = random_tensor<double>(arena, {4}, 5);
  auto with_bias = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
  INFO(with_bias.str());
  REQUIRE(with_bias.max_rel_error <= 1e-6);
  auto without_bias =
      gradcheck([](Tape<double>&, const std::vector<Var<double>>& in) { return linear(in[0], in[1]); }, {x, w});
  INFO(without_bias.str());
  REQUIRE(without_bias.max_rel_error <= 1e-6);
}

TEST_CASE("linear rejects a weight whose input size does not match", "[ops][matmul]") {
  Arena arena;
  Tape<double> tape(arena);
  auto x = tape.constant(random_tensor<double>(arena, {2, 5}, 1));
  auto w = tape.constant(random_tensor<double>(arena, {4, 6}, 2));
  REQUIRE_THROWS_WITH(linear(x, w), Catch::Contains("linear: input [2, 5] does not match weight [4, 6]"));
}
