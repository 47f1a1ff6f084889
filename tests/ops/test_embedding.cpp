#include <catch2/catch.hpp>

#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/ops/elementwise.h"
#include "headlab/ops/embedding.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

TEST_CASE("embedding forward gathers the rows named by the ids", "[ops][embedding]") {
  // table[v, c] = 10 v + c, so every output element names its source row and column.
  Arena arena;
  Tape<double> tape(arena);
  double table[4 * 3];
  for (int v = 0; v < 4; ++v)
    for (int c = 0; c < 3; ++c) table[v * 3 + c] = 10 * v + c;
  const int32_t ids[] = {2, 0, 3, 2};
  Var<double> out = embedding(tape, ids, {2, 2}, tape.constant(Tensor<double>(table, {4, 3})));
  REQUIRE(out.shape() == Shape({2, 2, 3}));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 2; ++t)
      for (int c = 0; c < 3; ++c) CHECK(out.value()(b, t, c) == 10 * ids[b * 2 + t] + c);
}

TEST_CASE("embedding backward adds one dout row per occurrence of an id", "[ops][embedding]") {
  // L = sum(out): d table[v, c] = number of positions holding v (counted by hand: id 1 three
  // times, 0, 2 and 3 once each, 4 never).
  Arena arena;
  Tape<double> tape(arena);
  const int32_t ids[] = {1, 3, 1, 0, 1, 2};
  Var<double> table = tape.leaf_with_grad(random_tensor<double>(arena, {5, 4}, 1));
  tape.backward(sum(embedding(tape, ids, {2, 3}, table)));
  const double expected[] = {1, 3, 1, 1, 0};
  for (int v = 0; v < 5; ++v)
    for (int c = 0; c < 4; ++c) CHECK(table.grad()(v, c) == expected[v]);
}

TEST_CASE("embedding backward matches central differences with repeated ids", "[ops][embedding][grad]") {
  const int32_t ids[] = {1, 3, 1, 0, 1, 2, 4, 4};
  const Shape ids_shape = GENERATE(Shape{8}, Shape{2, 4}, Shape{1});
  Arena arena;
  auto table = random_tensor<double>(arena, {6, 5}, 2);
  auto r = gradcheck(
      [&](Tape<double>& tape, const std::vector<Var<double>>& in) { return embedding(tape, ids, ids_shape, in[0]); },
      {table});
  INFO(ids_shape.str() << ": " << r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("embedding backward is bit-identical for any thread count", "[ops][embedding]") {
  // 4096 positions x 64 columns > kParallelGrain, over a 50-row vocabulary: many repeats.
  const int64_t n = 4096, V = 50, C = 64;
  std::vector<int32_t> ids(n);
  for (int64_t p = 0; p < n; ++p) ids[p] = static_cast<int32_t>((p * 7919) % V);
  Arena arena;
  auto table = random_tensor<float>(arena, {V, C}, 3);
  auto probe = random_tensor<float>(arena, {n, C}, 4);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Arena step_arena;
    Tape<float> tape(step_arena);
    Var<float> tv = tape.leaf_with_grad(table);
    tape.backward(sum(mul(embedding(tape, ids.data(), {n}, tv), tape.constant(probe))));
    return std::vector<float>(tv.grad().data(), tv.grad().data() + tv.grad().numel());
  };
  const int previous = num_threads();
  const auto one = run(1), three = run(3);
  set_num_threads(previous);
  CHECK(one == three);
}

TEST_CASE("embedding rejects an id outside the table, naming it and its position", "[ops][embedding]") {
  Arena arena;
  Tape<double> tape(arena);
  auto table = tape.constant(random_tensor<double>(arena, {5, 2}, 1));
  const int32_t too_big[] = {0, 4, 5}, negative[] = {-1};
  REQUIRE_THROWS_WITH(embedding(tape, too_big, {3}, table),
                      Catch::Contains("embedding: id=5 at position 2 of ids [3] is outside the table's V=5"));
  REQUIRE_THROWS_WITH(embedding(tape, negative, {1}, table), Catch::Contains("embedding: id=-1 at position 0"));
}
