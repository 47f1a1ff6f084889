#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "headlab/ops/elementwise.h"
#include "headlab/ops/layer_norm.h"
#include "headlab/ops/matmul.h"
#include "headlab/ops/recomputed_linear.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

using Graph = std::function<Var<float>(Tape<float>&, const std::vector<Var<float>>&)>;

// The value of graph(inputs) and every input's gradient of L = sum(y * r) for a fixed random r,
// in float. Each input is an intermediate node (1 * a leaf), so the op's backward may write its
// gradient fresh; input `shared` also feeds a second consumer recorded after the op, whose
// backward runs first, so there the op must add to what is already there.
struct Run {
  std::vector<float> value;
  std::vector<std::vector<float>> grads;
};

Run run(const Graph& graph, const std::vector<Tensor<float>>& inputs, size_t shared) {
  Arena arena;
  Tape<float> tape(arena);
  std::vector<Tensor<float>> grads;
  std::vector<Var<float>> vars;
  for (const Tensor<float>& x : inputs) {
    grads.push_back(arena.zeros<float>(x.shape()));
    vars.push_back(scale(tape.leaf(x, grads.back()), 1.0));
  }
  Var<float> y = graph(tape, vars);
  Var<float> r = tape.constant(random_tensor<float>(arena, y.shape(), 77));
  Var<float> loss = add(sum(mul(y, r)), sum(mul(vars[shared], vars[shared])));
  tape.backward(loss);
  Run out;
  out.value.assign(y.value().data(), y.value().data() + y.value().numel());
  for (const Tensor<float>& g : grads) out.grads.emplace_back(g.data(), g.data() + g.numel());
  return out;
}

void require_bit_identical(const Run& fused, const Run& unfused) {
  REQUIRE(fused.value.size() == unfused.value.size());
  CHECK(std::memcmp(fused.value.data(), unfused.value.data(), fused.value.size() * sizeof(float)) == 0);
  REQUIRE(fused.grads.size() == unfused.grads.size());
  for (size_t i = 0; i < fused.grads.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(std::memcmp(fused.grads[i].data(), unfused.grads[i].data(), fused.grads[i].size() * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("layer_norm_linear backward matches central differences, with and without bias",
          "[ops][recomputed_linear][grad]") {
  Arena arena;
  auto x = random_tensor<double>(arena, {2, 3, 5}, 1);
  auto nw = random_tensor<double>(arena, {5}, 2, 0.5, 1.5), nb = random_tensor<double>(arena, {5}, 3);
  auto w = random_tensor<double>(arena, {4, 5}, 4), b = random_tensor<double>(arena, {4}, 5);
  auto with_bias = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) {
        return layer_norm_linear(in[0], in[1], in[2], 1e-5, in[3], in[4]);
      },
      {x, nw, nb, w, b});
  INFO(with_bias.str());
  REQUIRE(with_bias.max_rel_error <= 1e-6);
  auto without_bias = gradcheck(
      [](Tape<double>&, const std::vector<Var<double>>& in) {
        return layer_norm_linear(in[0], in[1], in[2], 1e-5, in[3], Var<double>{});
      },
      {x, nw, nb, w});
  INFO(without_bias.str());
  REQUIRE(without_bias.max_rel_error <= 1e-6);
}

TEST_CASE("residual_linear backward matches central differences, plain and through gelu",
          "[ops][recomputed_linear][grad]") {
  const LinearInput input = GENERATE(LinearInput::plain, LinearInput::gelu);
  Arena arena;
  auto x = random_tensor<double>(arena, {2, 3, 4}, 6);
  auto a = random_tensor<double>(arena, {2, 3, 6}, 7, -2.0, 2.0);
  auto w = random_tensor<double>(arena, {4, 6}, 8), b = random_tensor<double>(arena, {4}, 9);
  auto with_bias =
      gradcheck([&](Tape<double>&,
                    const std::vector<Var<double>>& in) { return residual_linear(in[0], in[1], in[2], in[3], input); },
                {x, a, w, b});
  INFO(with_bias.str());
  REQUIRE(with_bias.max_rel_error <= 1e-6);
  auto without_bias = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& in) {
        return residual_linear(in[0], in[1], in[2], Var<double>{}, input);
      },
      {x, a, w});
  INFO(without_bias.str());
  REQUIRE(without_bias.max_rel_error <= 1e-6);
}

TEST_CASE("the recomputing linear ops give the unfused ops' values and gradients bit for bit",
          "[ops][recomputed_linear]") {
  // Sizes past BLIS's small-matrix paths and the parallel grain, in float as training runs.
  Arena arena;
  const int64_t rows = 300, C = 96, F = 160;
  auto x = random_tensor<float>(arena, {rows, C}, 11, -3.0, 3.0);
  auto nw = random_tensor<float>(arena, {C}, 12, 0.5, 1.5), nb = random_tensor<float>(arena, {C}, 13);
  auto w_in = random_tensor<float>(arena, {F, C}, 14), b_in = random_tensor<float>(arena, {F}, 15);
  auto u = random_tensor<float>(arena, {rows, F}, 16, -4.0, 4.0);
  auto w_out = random_tensor<float>(arena, {C, F}, 17), b_out = random_tensor<float>(arena, {C}, 18);
  const size_t shared = GENERATE(0, 1);  // which input a second consumer also reads
  INFO("input " << shared << " has a second consumer");
  SECTION("layer_norm_linear = linear(layer_norm)") {
    require_bit_identical(run(
                              [](Tape<float>&, const std::vector<Var<float>>& in) {
                                return layer_norm_linear(in[0], in[1], in[2], 1e-5, in[3], in[4]);
                              },
                              {x, nw, nb, w_in, b_in}, shared),
                          run(
                              [](Tape<float>&, const std::vector<Var<float>>& in) {
                                return linear(layer_norm(in[0], in[1], in[2], 1e-5), in[3], in[4]);
                              },
                              {x, nw, nb, w_in, b_in}, shared));
  }
  SECTION("residual_linear = add(x, linear(a))") {
    require_bit_identical(
        run([](Tape<float>&, const std::vector<Var<float>>& in) { return residual_linear(in[0], in[1], in[2], in[3]); },
            {x, u, w_out, b_out}, shared),
        run([](Tape<float>&, const std::vector<Var<float>>& in) { return add(in[0], linear(in[1], in[2], in[3])); },
            {x, u, w_out, b_out}, shared));
  }
  SECTION("residual_linear through gelu = add(x, linear(gelu(a)))") {
    require_bit_identical(
        run(
            [](Tape<float>&, const std::vector<Var<float>>& in) {
              return residual_linear(in[0], in[1], in[2], in[3], LinearInput::gelu);
            },
            {x, u, w_out, b_out}, shared),
        run([](Tape<float>&,
               const std::vector<Var<float>>& in) { return add(in[0], linear(gelu(in[1]), in[2], in[3])); },
            {x, u, w_out, b_out}, shared));
  }
}

TEST_CASE("the recomputing linear ops reject mismatched shapes in one line", "[ops][recomputed_linear]") {
  Arena arena;
  Tape<double> tape(arena);
  auto x = tape.constant(random_tensor<double>(arena, {2, 5}, 1));
  auto n = tape.constant(random_tensor<double>(arena, {5}, 2));
  auto w = tape.constant(random_tensor<double>(arena, {4, 6}, 3));
  REQUIRE_THROWS_WITH(layer_norm_linear(x, n, n, 1e-5, w, Var<double>{}),
                      Catch::Contains("layer_norm_linear: input [2, 5] does not match weight [4, 6]"));
  auto a = tape.constant(random_tensor<double>(arena, {2, 6}, 4));
  REQUIRE_THROWS_WITH(residual_linear(a, a, w, Var<double>{}),
                      Catch::Contains("residual_linear: residual [2, 6] does not match the projection's [2, 4]"));
}
