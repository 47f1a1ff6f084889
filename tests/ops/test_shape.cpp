#include <catch2/catch.hpp>

#include <vector>

#include "headlab/ops/elementwise.h"
#include "headlab/ops/shape.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

// x[i] = i: every output element names its source position.
Tensor<double> iota_tensor(Arena& arena, const Shape& shape) {
  Tensor<double> t = arena.empty<double>(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<double>(i);
  return t;
}

}  // namespace

TEST_CASE("reshape is a zero-copy view with the new shape", "[ops][shape]") {
  Arena arena;
  Tape<double> tape(arena);
  Var<double> x = tape.constant(iota_tensor(arena, {2, 3, 4}));
  Var<double> y = reshape(x, {6, 4});
  CHECK(y.shape() == Shape({6, 4}));
  CHECK(y.value().data() == x.value().data());
  CHECK(y.value()(5, 3) == 23);
}

TEST_CASE("reshape backward matches central differences", "[ops][shape][grad]") {
  Arena arena;
  auto x = random_tensor<double>(arena, {2, 3, 4}, 1);
  auto r = gradcheck([](Tape<double>&, const std::vector<Var<double>>& in) { return reshape(in[0], {4, 6}); }, {x});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("reshape rejects a strided view and a size change", "[ops][shape]") {
  Arena arena;
  Tape<double> tape(arena);
  Var<double> x = tape.constant(iota_tensor(arena, {2, 6}));
  REQUIRE_THROWS_WITH(reshape(slice(x, 1, 0, 3), {6}), Catch::Contains("reshape: input [2, 3] is a strided view"));
  REQUIRE_THROWS_WITH(reshape(x, {5, 2}), Catch::Contains("reshape: cannot view [2, 6] as [5, 2]"));
}

TEST_CASE("transpose copies into a contiguous tensor with the two dims swapped", "[ops][shape]") {
  // [[0, 1, 2], [3, 4, 5]] transposed is [[0, 3], [1, 4], [2, 5]] (by hand).
  Arena arena;
  Tape<double> tape(arena);
  Var<double> x = tape.constant(iota_tensor(arena, {2, 3}));
  Var<double> y = transpose(x, 0, 1);
  REQUIRE(y.shape() == Shape({3, 2}));
  CHECK(y.value().is_contiguous());
  const double expected[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) CHECK(y.value().data()[i] == expected[i]);
}

TEST_CASE("transpose backward matches central differences for several dim pairs", "[ops][shape][grad]") {
  const auto dims = GENERATE(std::pair{0, 1}, std::pair{1, 2}, std::pair{0, 2}, std::pair{1, 1});
  Arena arena;
  auto x = random_tensor<double>(arena, {2, 3, 4}, 2);
  auto r = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& in) { return transpose(in[0], dims.first, dims.second); },
      {x});
  INFO(dims.first << ", " << dims.second << ": " << r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("slice is a zero-copy strided view of its input", "[ops][shape]") {
  Arena arena;
  Tape<double> tape(arena);
  Var<double> qkv = tape.constant(iota_tensor(arena, {2, 3, 12}));  // [B, T, 3C], C = 4
  Var<double> k = slice(qkv, 2, 4, 4);
  REQUIRE(k.shape() == Shape({2, 3, 4}));
  CHECK(k.value().data() == qkv.value().data() + 4);
  CHECK(k.value().stride(1) == 12);
  CHECK(!k.value().is_contiguous());
  CHECK(k.value()(1, 2, 3) == 1 * 36 + 2 * 12 + 4 + 3);
}

TEST_CASE("slice backward puts dy into its region of dx and zero elsewhere", "[ops][shape][grad]") {
  // L = sum(copy of x[:, 2:5]): dx is 1 on columns 2..4 and 0 elsewhere (by hand).
  Arena arena;
  Tape<double> tape(arena);
  Var<double> x = tape.leaf_with_grad(random_tensor<double>(arena, {2, 6}, 3));
  tape.backward(sum(transpose(slice(x, 1, 2, 3), 0, 0)));  // transpose(.., 0, 0) is a plain copy
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j) CHECK(x.grad()(i, j) == (j >= 2 && j < 5 ? 1.0 : 0.0));
}

TEST_CASE("slice backward matches central differences on every dim", "[ops][shape][grad]") {
  // The checker's final product needs a contiguous output, so the strided slice is copied out
  // through transpose, the way q is cut from qkv and moved to [B, H, T, Dh].
  const int dim = GENERATE(0, 1, 2);
  Arena arena;
  auto x = random_tensor<double>(arena, {3, 4, 6}, 4);
  auto r = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& in) { return transpose(slice(in[0], dim, 1, 2), 0, 1); }, {x});
  INFO("dim " << dim << ": " << r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("slices of a fused qkv concatenated back route every gradient home", "[ops][shape][grad]") {
  // Cut q, k, v from [B, T, 3C] and rejoin them as [v, q, k]: a permutation of columns, so
  // every element of qkv gets exactly its own weight back.
  Arena arena;
  auto qkv = random_tensor<double>(arena, {2, 3, 12}, 5);
  auto r = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) {
        Var<double> q = slice(in[0], 2, 0, 4), k = slice(in[0], 2, 4, 4), v = slice(in[0], 2, 8, 4);
        return concat({v, q, k}, 2);
      },
      {qkv});
  INFO(r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("concat joins inputs along a dim in order", "[ops][shape]") {
  // [[0, 1], [2, 3]] ++ [[0], [1]] along dim 1 = [[0, 1, 0], [2, 3, 1]] (by hand).
  Arena arena;
  Tape<double> tape(arena);
  Var<double> a = tape.constant(iota_tensor(arena, {2, 2})), b = tape.constant(iota_tensor(arena, {2, 1}));
  Var<double> y = concat({a, b}, 1);
  REQUIRE(y.shape() == Shape({2, 3}));
  const double expected[] = {0, 1, 0, 2, 3, 1};
  for (int i = 0; i < 6; ++i) CHECK(y.value().data()[i] == expected[i]);
}

TEST_CASE("concat backward matches central differences for uneven inputs and repeats", "[ops][shape][grad]") {
  Arena arena;
  auto a = random_tensor<double>(arena, {2, 1, 3}, 6);
  auto b = random_tensor<double>(arena, {2, 3, 3}, 7);
  auto c = random_tensor<double>(arena, {2, 2, 3}, 8);
  auto middle = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) {
        return concat({in[0], in[1], in[2], in[0]}, 1);  // a twice: its gradient is the sum of both
      },
      {a, b, c});
  INFO(middle.str());
  REQUIRE(middle.max_rel_error <= 1e-6);
  auto d = random_tensor<double>(arena, {1, 3, 3}, 9);
  auto outer = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) {
        return concat({in[0], in[1]}, 0);
      },
      {b, d}, {.differentiable = {true, false}});
  INFO(outer.str());
  REQUIRE(outer.max_rel_error <= 1e-6);
}

TEST_CASE("shape ops reject out-of-range dims and mismatched inputs", "[ops][shape]") {
  Arena arena;
  Tape<double> tape(arena);
  Var<double> x = tape.constant(iota_tensor(arena, {2, 3}));
  Var<double> y = tape.constant(iota_tensor(arena, {3, 3}));
  REQUIRE_THROWS_WITH(transpose(x, 0, 2), Catch::Contains("transpose: dims 0, 2 out of range for [2, 3]"));
  REQUIRE_THROWS_WITH(slice(x, 1, 2, 2), Catch::Contains("slice: [2, 4) is outside dim 1 of [2, 3]"));
  REQUIRE_THROWS_WITH(concat({x, y}, 1), Catch::Contains("concat: input [3, 3] does not match [2, 3] outside dim 1"));
  static_assert(kMaxOpInputs == 5);
  REQUIRE_THROWS_WITH(concat({x, x, x, x, x, x}, 0), Catch::Contains("concat: 6 inputs, want 1 to 5"));
}
