// Whole-table scores (analysis/layer_scores.h) on a random double model: importance is |dL/dxi| of
// a common gate scaling the table, by central differences on xi; ablation is the loss change with
// the table's gates at 0; the integrated-gradients shares add up to the loss change from every
// gate off; an emptied table scores 0. For attention layers and FFN blocks alike.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "headlab/analysis/layer_scores.h"
#include "headlab/data/model_input.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

// Batch i's mean loss of the val split at the model's gates, and its scored targets.
double batch_loss(Model<double>& model, const Dataset& data, int64_t i, int64_t batch_size,
                  int64_t* targets = nullptr) {
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  Batch batch = data.make_batch(batch_size);
  data.fill_batch(Split::val, i, batch);
  if (targets != nullptr) {
    *targets = 0;
    for (const int32_t t : scored_targets(model.spec(), batch)) *targets += t >= 0;
  }
  return model.forward(tape, model_input(model.spec(), batch), {}).loss.value()(0);
}

// Table t's gates scaled by xi (its own values times xi) for a scope.
std::vector<double> scaled(const Tensor<double>& g, double xi) {
  std::vector<double> out(g.data(), g.data() + g.numel());
  for (double& x : out) x *= xi;
  return out;
}

}  // namespace

TEST_CASE("a layer's importance is |dL/dxi| of one gate scaling the whole layer; ablation and IG shares add up",
          "[analysis][layers]") {
  const GateKind kind = GENERATE(GateKind::heads, GateKind::ffn_units);
  INFO((kind == GateKind::heads ? "attention layers" : "FFN blocks"));
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8);
  spec.n_layers = 3;
  Model<double> model(spec);
  test::randomize(model, 24);
  test::randomize_ffn_gates(model, 25);
  Parameters<double>& gates = gates_of(model, kind);
  gates.value(2).fill(0.0);  // an emptied table
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  const int64_t batches = 2, rows = 4;
  const LayerScores s = layer_scores(model, *data, Split::val, batches, rows, kind, true, 32);
  REQUIRE(s.importance.size() == 3u);
  CHECK(s.labels == std::vector<std::string>{"L0", "L1", "L2"});
  CHECK(s.active[2] == 0);
  CHECK(s.importance[2] == 0);
  CHECK(s.ablation[2] == 0);
  CHECK(s.integrated_gradients[2] == 0);
  const double eps = 1e-5;
  for (int t = 0; t < 2; ++t) {
    double want_importance = 0, masked = 0, loss = 0, targets = 0;
    for (int64_t i = 0; i < batches; ++i) {
      double up, down;
      {
        const ScopedSiteGates<double> at(gates, t, scaled(gates.value(t), 1 + eps));
        up = batch_loss(model, *data, i, rows);
      }
      {
        const ScopedSiteGates<double> at(gates, t, scaled(gates.value(t), 1 - eps));
        down = batch_loss(model, *data, i, rows);
      }
      want_importance += std::abs(up - down) / (2 * eps) / static_cast<double>(batches);
      // The losses are means over scored targets, so batches weigh by their targets.
      int64_t n = 0;
      loss += batch_loss(model, *data, i, rows, &n) * static_cast<double>(n);
      targets += static_cast<double>(n);
      const ScopedSiteGates<double> off(gates, t, scaled(gates.value(t), 0));
      masked += batch_loss(model, *data, i, rows) * static_cast<double>(n);
    }
    masked /= targets;
    loss /= targets;
    CHECK(s.importance[static_cast<size_t>(t)] == Approx(want_importance).epsilon(1e-6).margin(1e-10));
    CHECK(s.ablation[static_cast<size_t>(t)] == Approx(masked - loss).epsilon(1e-9).margin(1e-12));
    CHECK(s.ablation[static_cast<size_t>(t)] != 0);
  }
  // The shares are the tables' sums of the per-gate attributions; completeness holds for them too.
  double sum = 0;
  for (double a : s.integrated_gradients) sum += a;
  const double change = s.ig.loss - s.ig.baseline_loss;
  REQUIRE(std::abs(change) > 1e-3);
  CHECK(std::abs(sum - change) == Approx(s.ig.completeness_error).margin(1e-12));
  CHECK(s.ig.completeness_error < 1e-2 * std::abs(change));
  const std::string csv = layers_csv(s);
  CHECK(csv.rfind("table,label,kind,active,importance,ablation_loss_delta,integrated_gradients\n", 0) == 0);
}

TEST_CASE("an encoder_decoder's layers are labelled by kind", "[analysis][layers]") {
  const ModelSpec spec = test::tiny_seq2seq_spec(2, 2, 2, 2);
  CHECK(gate_table_label(spec, GateKind::heads, 0) == "enc.L0");
  CHECK(gate_table_label(spec, GateKind::heads, 3) == "cross.L0");
  CHECK(gate_table_label(spec, GateKind::heads, 4) == "dec.L1");
  CHECK(gate_table_label(spec, GateKind::ffn_units, 1) == "enc.L1");
  CHECK(gate_table_label(spec, GateKind::ffn_units, 2) == "dec.L0");
  CHECK_THROWS_WITH(gate_table_label(spec, GateKind::ffn_units, 4), Catch::Contains("MLP block 4 is outside"));
}
