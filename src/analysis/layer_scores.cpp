#include "headlab/analysis/layer_scores.h"

#include <cmath>

#include "headlab/analysis/gate_gradients.h"
#include "headlab/common/error.h"
#include "headlab/data/model_input.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace {

// The mean loss over the scored targets of the batches, grad off, the gates as they are.
template <typename T>
double mean_loss(Model<T>& model, const Dataset& dataset, Split split, int64_t batches, Batch& batch, Tape<T>& tape) {
  NoGradGuard<T> no_grad(tape);
  double sum = 0;
  int64_t targets = 0;
  for (int64_t i = 0; i < batches; ++i) {
    dataset.fill_batch(split, i, batch);
    int64_t n = 0;
    for (const int32_t t : scored_targets(model.spec(), batch)) n += t >= 0;
    if (n == 0) continue;
    const ModelOutput<T> out = model.forward(tape, model_input(model.spec(), batch), {});
    sum += static_cast<double>(out.loss.value().data()[0]) * static_cast<double>(n);
    targets += n;
    tape.reset();
  }
  HEADLAB_CHECK(targets > 0, "layer scores: " << batches << " batches of the " << split_name(split)
                                              << " split hold no scored target");
  return sum / static_cast<double>(targets);
}

}  // namespace

template <typename T>
LayerScores layer_scores(Model<T>& model, const Dataset& dataset, Split split, int64_t batches, int64_t batch_size,
                         GateKind kind, bool ablation, int64_t ig_steps) {
  const ModelSpec& spec = model.spec();
  batches = dataset.batches_to_score(split, batches, batch_size, "layer scores");
  Parameters<T>& gates = gates_of(model, kind);
  const auto tables = static_cast<size_t>(gates.size());
  LayerScores s;
  s.kind = kind;
  s.batches = batches;
  for (size_t t = 0; t < tables; ++t) {
    const Tensor<T> g = gates.value(static_cast<int>(t));
    int64_t on = 0;
    for (int64_t k = 0; k < g.numel(); ++k) on += g.data()[k] != T(0);
    s.labels.push_back(gate_table_label(spec, kind, static_cast<int64_t>(t)));
    s.active.push_back(on);
  }

  // |sum_k g_k dL/dg_k| per batch and table, averaged over the batches that score a target.
  s.importance.assign(tables, 0.0);
  const GateGradientPass pass =
      for_each_gate_gradient(model, dataset, split, batches, batch_size, kind, [&](const Parameters<T>& g) {
        for (size_t t = 0; t < tables; ++t) {
          const Tensor<T> value = g.value(static_cast<int>(t)), grad = g.grad(static_cast<int>(t));
          double d_xi = 0;
          for (int64_t k = 0; k < value.numel(); ++k)
            d_xi += static_cast<double>(value.data()[k]) * static_cast<double>(grad.data()[k]);
          s.importance[t] += std::abs(d_xi);
        }
      });
  s.loss = pass.loss;
  for (double& x : s.importance) x /= static_cast<double>(pass.scored_batches);

  if (ablation) {
    Arena arena;
    Tape<T> tape(arena);
    Batch batch = dataset.make_batch(batch_size);
    // The unablated loss by the same forward as the ablated ones (no gate leaves), so a table that
    // changes nothing scores exactly 0.
    const double base = mean_loss(model, dataset, split, batches, batch, tape);
    for (size_t t = 0; t < tables; ++t) {
      if (s.active[t] == 0) {
        s.ablation.push_back(0);
        continue;
      }
      const auto n = static_cast<size_t>(gates.value(static_cast<int>(t)).numel());
      const ScopedSiteGates<T> off(gates, t, std::vector<T>(n, T(0)));
      s.ablation.push_back(mean_loss(model, dataset, split, batches, batch, tape) - base);
    }
  }
  if (ig_steps > 0) {
    s.ig = integrated_gradients(model, dataset, split, batches, batch_size, ig_steps, 0.0, kind);
    size_t k = 0;
    for (size_t t = 0; t < tables; ++t) {
      double share = 0;
      for (int64_t j = 0; j < gates.value(static_cast<int>(t)).numel(); ++j) share += s.ig.attribution[k++];
      s.integrated_gradients.push_back(share);
    }
  }
  return s;
}

std::string layers_csv(const LayerScores& s) {
  std::vector<std::string> header = {"table", "label", "kind", "active", "importance"};
  if (!s.ablation.empty()) header.push_back("ablation_loss_delta");
  if (!s.integrated_gradients.empty()) header.push_back("integrated_gradients");
  CsvWriter csv(header);
  for (size_t t = 0; t < s.labels.size(); ++t) {
    std::vector<std::string> row = {std::to_string(t), s.labels[t],
                                    s.kind == GateKind::heads ? "attention_layer" : "ffn_block",
                                    std::to_string(s.active[t]), csv_number("%.9g", s.importance[t])};
    if (!s.ablation.empty()) row.push_back(csv_number("%.9g", s.ablation[t]));
    if (!s.integrated_gradients.empty()) row.push_back(csv_number("%.9g", s.integrated_gradients[t]));
    csv.row(row);
  }
  return csv.text();
}

template LayerScores layer_scores<float>(Model<float>&, const Dataset&, Split, int64_t, int64_t, GateKind, bool,
                                         int64_t);
template LayerScores layer_scores<double>(Model<double>&, const Dataset&, Split, int64_t, int64_t, GateKind, bool,
                                          int64_t);

}  // namespace headlab
