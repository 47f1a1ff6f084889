#include "headlab/analysis/ffn_units.h"

#include <cmath>

#include "headlab/analysis/gate_gradients.h"
#include "headlab/common/error.h"
#include "headlab/data/model_input.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace {

// Each MLP block's fc and output projection, in mlp_block() order.
template <typename T>
std::vector<const BlockParams*> blocks_with_mlp(const Model<T>& model) {
  const ParamIndex& index = model.param_index();
  std::vector<const BlockParams*> blocks;
  if (model_kind_info(model.spec().kind).source)
    for (const BlockParams& b : index.encoder_blocks) blocks.push_back(&b);
  for (const BlockParams& b : index.blocks) blocks.push_back(&b);
  return blocks;
}

}  // namespace

template <typename T>
FfnUnitScores ffn_unit_scores(Model<T>& model, const Dataset& dataset, Split split, int64_t batches, int64_t batch_size,
                              int64_t ig_steps) {
  const ModelSpec& spec = model.spec();
  batches = dataset.batches_to_score(split, batches, batch_size, "FFN unit scores");
  Parameters<T>& gates = model.ffn_gates();
  FfnUnitScores s;
  s.batches = batches;
  const std::vector<const BlockParams*> blocks = blocks_with_mlp(model);
  for (int b = 0; b < gates.size(); ++b) {
    const Tensor<T> g = gates.value(b);
    s.block_units.push_back(g.numel());
    s.block_labels.push_back(gate_table_label(spec, GateKind::ffn_units, b));
    const Tensor<T> fc = model.params().value(blocks[static_cast<size_t>(b)]->fc.weight),  // [F, C]
        proj = model.params().value(blocks[static_cast<size_t>(b)]->mlp_proj.weight);      // [C, F]
    for (int64_t f = 0; f < g.numel(); ++f) {
      double in = 0, out = 0;
      for (int64_t c = 0; c < fc.size(1); ++c) in += std::pow(static_cast<double>(fc(f, c)), 2);
      for (int64_t c = 0; c < proj.size(0); ++c) out += std::pow(static_cast<double>(proj(c, f)), 2);
      s.gate.push_back(static_cast<double>(g(f)));
      s.magnitude.push_back(std::abs(static_cast<double>(g(f))) * std::sqrt(in) * std::sqrt(out));
    }
  }

  // |dL/dg| per batch, averaged over the batches; the loss weighted by each batch's targets.
  s.importance.assign(s.gate.size(), 0.0);
  const GateGradientPass pass = for_each_gate_gradient(
      model, dataset, split, batches, batch_size, GateKind::ffn_units, [&](const Parameters<T>& g) {
        size_t k = 0;
        for (int b = 0; b < g.size(); ++b) {
          const Tensor<T> grad = g.grad(b);
          for (int64_t f = 0; f < grad.numel(); ++f) s.importance[k++] += std::abs(static_cast<double>(grad.data()[f]));
        }
      });
  s.loss = pass.loss;
  const int64_t scored_batches = pass.scored_batches;
  size_t k = 0;
  for (int64_t units : s.block_units) {
    double norm = 0;
    for (int64_t f = 0; f < units; ++f) {
      s.importance[k + static_cast<size_t>(f)] /= static_cast<double>(scored_batches);
      if (s.gate[k + static_cast<size_t>(f)] == 0) s.importance[k + static_cast<size_t>(f)] = 0;
      norm += std::pow(s.importance[k + static_cast<size_t>(f)], 2);
    }
    norm = std::sqrt(norm);
    for (int64_t f = 0; f < units; ++f, ++k) s.importance_normalized.push_back(norm > 0 ? s.importance[k] / norm : 0);
  }
  if (ig_steps > 0) {
    s.ig = integrated_gradients(model, dataset, split, batches, batch_size, ig_steps, 0.0, GateKind::ffn_units);
    s.integrated_gradients = s.ig.attribution;
  }
  return s;
}

std::string units_csv(const FfnUnitScores& s) {
  std::vector<std::string> header = {"block",    "label", "unit", "gate", "importance", "importance_normalized",
                                     "magnitude"};
  if (!s.integrated_gradients.empty()) header.push_back("integrated_gradients");
  CsvWriter csv(header);
  size_t k = 0;
  for (size_t b = 0; b < s.block_units.size(); ++b)
    for (int64_t f = 0; f < s.block_units[b]; ++f, ++k) {
      std::vector<std::string> row = {std::to_string(b),
                                      s.block_labels[b],
                                      std::to_string(f),
                                      csv_number("%.9g", s.gate[k]),
                                      csv_number("%.9g", s.importance[k]),
                                      csv_number("%.9g", s.importance_normalized[k]),
                                      csv_number("%.9g", s.magnitude[k])};
      if (!s.integrated_gradients.empty()) row.push_back(csv_number("%.9g", s.integrated_gradients[k]));
      csv.row(row);
    }
  return csv.text();
}

template FfnUnitScores ffn_unit_scores<float>(Model<float>&, const Dataset&, Split, int64_t, int64_t, int64_t);
template FfnUnitScores ffn_unit_scores<double>(Model<double>&, const Dataset&, Split, int64_t, int64_t, int64_t);

}  // namespace headlab
