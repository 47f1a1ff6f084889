#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headlab/ops/elementwise.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;

TEST_CASE("gradients accumulate when a value is used twice", "[autograd]") {
  Arena arena;
  Tape<double> tape(arena);
  double x_data[] = {1.5, -2.0, 3.0};
  Var<double> x = tape.leaf_with_grad(Tensor<double>(x_data, {3}));
  // L = sum(x * x + x): dL/dx = 2x + 1.
  tape.backward(sum(add(mul(x, x), x)));
  CHECK(x.grad()(0) == 4.0);
  CHECK(x.grad()(1) == -3.0);
  CHECK(x.grad()(2) == 7.0);
}

TEST_CASE("parameter gradients accumulate across backward passes until zeroed", "[autograd]") {
  Arena arena;
  double w_data[] = {2.0, 3.0}, g_data[] = {0.0, 0.0};
  Tensor<double> w(w_data, {2}), g(g_data, {2});
  for (int pass = 0; pass < 2; ++pass) {
    Tape<double> tape(arena);
    Var<double> wv = tape.leaf(w, g);
    tape.backward(sum(scale(wv, 0.5)));
    tape.reset();
  }
  CHECK(g_data[0] == 1.0);  // two passes of d(0.5 w)/dw
  CHECK(g_data[1] == 1.0);
}

TEST_CASE("no-grad mode records no backward", "[autograd]") {
  Arena arena;
  Tape<double> tape(arena);
  double x_data[] = {1.0, 2.0};
  Var<double> x = tape.leaf_with_grad(Tensor<double>(x_data, {2}));
  Var<double> y;
  {
    NoGradGuard<double> guard(tape);
    y = sum(mul(x, x));
  }
  CHECK_FALSE(y.requires_grad());
  CHECK(y.value()(0) == 5.0);
  REQUIRE_THROWS_WITH(tape.backward(y), Catch::Contains("does not depend on anything that needs a gradient"));
  CHECK(tape.grad_enabled());
}

TEST_CASE("backward rejects a loss with more than one element", "[autograd]") {
  Arena arena;
  Tape<double> tape(arena);
  double x_data[] = {1.0, 2.0};
  Var<double> x = tape.leaf_with_grad(Tensor<double>(x_data, {2}));
  REQUIRE_THROWS_WITH(tape.backward(scale(x, 2.0)), Catch::Contains("must have one element, got shape [2]"));
}

TEST_CASE("dead intermediate gradients are recycled within a step; retain_grad keeps one", "[autograd]") {
  Arena arena;
  Tape<double> tape(arena);
  auto x0 = test::random_tensor<double>(arena, {64, 32}, 3);
  const size_t before = arena.bytes_in_use();
  Var<double> x = tape.leaf_with_grad(x0);
  // A chain of same-shaped intermediates: y_k = 0.5 y_{k-1} * x.
  Var<double> y = x, kept;
  for (int k = 0; k < 12; ++k) {
    y = mul(scale(y, 0.5), x);
    if (k == 5) kept = y;
  }
  tape.retain_grad(kept);
  const size_t forward_bytes = arena.bytes_in_use() - before;
  tape.backward(sum(y));
  // Each of the 24 intermediates' gradients is a [64, 32] buffer; recycled, a few suffice.
  const size_t grad_bytes = arena.bytes_in_use() - before - forward_bytes;
  CHECK(grad_bytes <= 6 * 64 * 32 * sizeof(double));
  // The retained intermediate kept its gradient: d sum(y_11) / d y_5 = prod over k=6..11 of 0.5 x.
  REQUIRE_FALSE(kept.grad().empty());
  for (int64_t i = 0; i < 64 * 32; i += 97) {
    const double xi = x0.data()[i];
    CHECK(kept.grad().data()[i] == Approx(std::pow(0.5 * xi, 6)).epsilon(1e-12));
  }
  CHECK(y.grad().empty());  // recycled: reads as "no gradient", never as another node's numbers
  // And x's gradient is still right: y = 0.5^12 x^13, dy/dx = 13 0.5^12 x^12.
  for (int64_t i = 0; i < 64 * 32; i += 97) {
    const double xi = x0.data()[i];
    CHECK(x.grad().data()[i] == Approx(13 * std::pow(0.5, 12) * std::pow(xi, 12)).epsilon(1e-10));
  }
}

TEST_CASE("a gradient's first contribution overwrites a recycled buffer, later ones add to it", "[autograd]") {
  // Memory the tape hands out starts as NaN (first pass) or as the first pass's numbers (second
  // pass, after reset): accumulating into a buffer nothing has written yet shows, and so does
  // overwriting a gradient that already holds a contribution. Values are multiples of 1/4, so
  // every sum below is exact.
  Arena arena;
  test::fill_arena_with_nan(arena, size_t(1) << 20);
  Tape<double> tape(arena);
  constexpr int64_t kN = 32;
  std::vector<double> x_data(kN), w_data(kN);
  for (int64_t i = 0; i < kN; ++i) {
    x_data[i] = 0.5 * static_cast<double>(i % 7 - 3);
    w_data[i] = 0.25 * static_cast<double>(i % 5 - 2) + 1.0;
  }
  const size_t grad_bytes = kN * sizeof(double);
  for (int pass = 0; pass < 2; ++pass) {
    INFO("pass " << pass);
    Var<double> x = tape.leaf_with_grad(Tensor<double>(x_data.data(), {4, 8}));
    Var<double> w = tape.constant(Tensor<double>(w_data.data(), {4, 8}));
    // h reaches the loss three ways. Backwards run in reverse order: mul(h, h) writes h's
    // gradient (input 0), then adds to it (input 1), then scale(h, 2) adds.
    Var<double> h = scale(x, 1.5);
    Var<double> p = scale(h, 2.0);
    Var<double> q = mul(h, h);
    Var<double> loss = sum(mul(add(p, q), w));
    tape.retain_grad(h);
    const size_t before_backward = arena.bytes_in_use();
    tape.backward(loss);
    // Of the six [4, 8] gradients (the last mul's, the add's, p's, q's, h's and x's) only three
    // need new memory: p's, h's and x's come off the free list, holding dead gradients.
    REQUIRE(arena.bytes_in_use() - before_backward <= 3 * grad_bytes + 64);
    for (int64_t i = 0; i < kN; ++i) {
      const double hi = 1.5 * x_data[i], dh = w_data[i] * hi + w_data[i] * hi + 2.0 * w_data[i];
      CHECK(h.grad().data()[i] == dh);
      CHECK(x.grad().data()[i] == 1.5 * dh);
    }
    tape.reset();
  }
}

// An op with a deliberately wrong backward (sign flipped), to show the checker can fail.
namespace {
void wrong_square_backward(Tape<double>& tape, const Node<double>& node) {
  const Tensor<double>& x = tape.node(node.inputs[0]).value;
  Tensor<double> dx = tape.input_grad(node, 0);
  for (int64_t i = 0; i < x.numel(); ++i) dx.data()[i] -= 2 * x.data()[i] * node.grad.data()[i];
}
Var<double> wrong_square(Var<double> x) {
  Tensor<double> out = x.tape->arena().empty<double>(x.shape());
  for (int64_t i = 0; i < out.numel(); ++i) out.data()[i] = x.value().data()[i] * x.value().data()[i];
  x.tape->record(out, wrong_square_backward, {x});
  return x.tape->last();
}
}  // namespace

TEST_CASE("gradcheck catches a backward with the wrong sign", "[autograd][grad]") {
  Arena arena;
  auto x = test::random_tensor<double>(arena, {4, 3}, 7);
  auto r = test::gradcheck([](Tape<double>&, const std::vector<Var<double>>& in) { return wrong_square(in[0]); }, {x});
  INFO(r.str());
  CHECK(r.max_rel_error > 1.0);
  // The same graph built from correct ops passes.
  auto ok = test::gradcheck([](Tape<double>&, const std::vector<Var<double>>& in) { return mul(in[0], in[0]); }, {x});
  INFO(ok.str());
  CHECK(ok.max_rel_error <= 1e-6);
}
