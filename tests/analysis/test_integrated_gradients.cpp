// Integrated gradients over the head gates (analysis/integrated_gradients.h) on a random double
// model with non-trivial gates: completeness (the attributions add up to L(g) - L(0), more closely
// as the points grow, as a midpoint sum's O(1/N^2) error does), one point is the gradient at the
// path's middle times the gate (central differences of the split's mean loss), a gated-off head
// gets 0 and stays off from any baseline, the model's gates come back, and bad steps or baselines
// are one line.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "headlab/analysis/integrated_gradients.h"
#include "headlab/data/model_input.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

// The split's mean loss over batches 0..n-1 (what the attributions are of), at the model's gates.
double split_loss(Model<double>& model, const Dataset& data, int64_t batches, int64_t batch_size) {
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  Batch batch = data.make_batch(batch_size);
  double sum = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < batches; ++i) {
    data.fill_batch(Split::val, i, batch);
    int64_t targets = 0;
    for (const int32_t t : scored_targets(model.spec(), batch)) targets += t >= 0;
    sum += model.forward(tape, model_input(model.spec(), batch), {}).loss.value()(0) * static_cast<double>(targets);
    n += targets;
    tape.reset();
  }
  return sum / static_cast<double>(n);
}

std::vector<double> all_gates(Model<double>& model) {
  std::vector<double> g;
  for (int i = 0; i < model.gates().size(); ++i)
    for (int64_t h = 0; h < model.gates().value(i).numel(); ++h) g.push_back(model.gates().value(i).data()[h]);
  return g;
}

void set_all_gates(Model<double>& model, const std::vector<double>& g) {
  size_t k = 0;
  for (int i = 0; i < model.gates().size(); ++i)
    for (int64_t h = 0; h < model.gates().value(i).numel(); ++h) model.gates().value(i).data()[h] = g[k++];
}

}  // namespace

TEST_CASE("integrated gradients add up to the loss change from every head off, closer with more points",
          "[analysis][ig]") {
  const int64_t kv = GENERATE(2, 1);
  Model<double> model(test::tiny_spec(ModelKind::decoder, 11, 2, kv, 8));
  test::randomize(model, 21);            // gates in [0.5, 1.5)
  model.gates().value(1).data()[0] = 0;  // a head pruned: its path stays at 0
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  const std::vector<double> gates = all_gates(model);

  const IntegratedGradients coarse = integrated_gradients(model, *data, Split::val, 2, 4, 4);
  const IntegratedGradients fine = integrated_gradients(model, *data, Split::val, 2, 4, 32);
  CHECK(all_gates(model) == gates);  // restored, bit for bit
  REQUIRE(fine.attribution.size() == 4u);
  CHECK(fine.attribution[2] == 0);
  // L(g) and L(0) are the split's losses at the model's gates and with every head off.
  CHECK(fine.loss == Approx(split_loss(model, *data, 2, 4)).epsilon(1e-12));
  set_all_gates(model, std::vector<double>(gates.size(), 0.0));
  CHECK(fine.baseline_loss == Approx(split_loss(model, *data, 2, 4)).epsilon(1e-12));
  set_all_gates(model, gates);
  const double change = fine.loss - fine.baseline_loss;
  REQUIRE(std::abs(change) > 1e-3);  // the heads matter, so completeness says something
  double sum = 0;
  for (double a : fine.attribution) sum += a;
  CHECK(fine.completeness_error == Approx(std::abs(sum - change)).margin(1e-15));
  CHECK(fine.completeness_error < 1e-2 * std::abs(change));
  // The midpoint sum's error falls as 1/N^2: 8 times the points, about 64 times closer.
  CHECK(fine.completeness_error < coarse.completeness_error / 16);
}

TEST_CASE("integrated gradients with one point: the gradient at the path's middle times the gate", "[analysis][ig]") {
  Model<double> model(test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8));
  test::randomize(model, 4);
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  const std::vector<double> gates = all_gates(model);
  const IntegratedGradients one = integrated_gradients(model, *data, Split::val, 2, 4, 1);
  // By hand: with one point a_0 = 1/2, IG_h = g_h * dL/dxi_h at xi = g / 2; the derivative by
  // central differences of the split's mean loss.
  std::vector<double> half = gates;
  for (double& g : half) g /= 2;
  const double eps = 1e-5;
  for (size_t k = 0; k < gates.size(); ++k) {
    std::vector<double> up = half, down = half;
    up[k] += eps;
    down[k] -= eps;
    set_all_gates(model, up);
    const double l_up = split_loss(model, *data, 2, 4);
    set_all_gates(model, down);
    const double l_down = split_loss(model, *data, 2, 4);
    const double want = gates[k] * (l_up - l_down) / (2 * eps);
    CHECK(one.attribution[k] == Approx(want).epsilon(1e-6).margin(1e-9));
  }
}

TEST_CASE("from a baseline above 0, a pruned head stays off on the whole path and the sum still adds up",
          "[analysis][ig]") {
  Model<double> model(test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8));
  test::randomize(model, 21);            // gates in [0.5, 1.5)
  model.gates().value(1).data()[0] = 0;  // a head pruned
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  const std::vector<double> gates = all_gates(model);
  const IntegratedGradients ig = integrated_gradients(model, *data, Split::val, 2, 4, 32, 0.25);
  CHECK(all_gates(model) == gates);
  CHECK(ig.attribution[2] == 0);
  std::vector<double> baseline(gates.size(), 0.25);
  baseline[2] = 0;  // not switched half on by the baseline
  set_all_gates(model, baseline);
  CHECK(ig.baseline_loss == Approx(split_loss(model, *data, 2, 4)).epsilon(1e-12));
  set_all_gates(model, gates);
  const double change = ig.loss - ig.baseline_loss;
  REQUIRE(std::abs(change) > 1e-4);
  double sum = 0;
  for (double a : ig.attribution) sum += a;
  CHECK(ig.completeness_error == Approx(std::abs(sum - change)).margin(1e-15));
  CHECK(ig.completeness_error < 1e-2 * std::abs(change));
}

TEST_CASE("integrated gradients refuse no points and a baseline outside [0, 1]", "[analysis][ig]") {
  Model<double> model(test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8));
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  CHECK_THROWS_WITH(integrated_gradients(model, *data, Split::val, 1, 4, 0), Catch::Contains("at least 1"));
  CHECK_THROWS_WITH(integrated_gradients(model, *data, Split::val, 1, 4, 4, 1.5), Catch::Contains("outside [0, 1]"));
}
