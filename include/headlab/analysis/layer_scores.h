// Scores of whole gate tables, for pruning whole attention layers (every head of an attention
// site) or whole FFN blocks (every unit of an MLP block) as heads are pruned (issue 32). A table t
// has one virtual gate xi_t scaling all its gates g_k together; the scores are Michel et al.'s,
// the ablation's and integrated gradients' carried from one gate to xi_t:
//   importance   |dL/dxi_t| at xi_t = 1, with dL/dxi_t = sum over k in t of g_k dL/dg_k (the chain
//                rule through g_k xi_t), averaged over batches as heads' importance averages
//                |dL/dg| per batch (L: a batch's mean loss).
//   ablation     L(every gate of t at 0) - L: the loss change when the layer (block) is removed
//                whole, the others as they are.
//   integrated_gradients  the sum of t's gates' integrated gradients from the all-off baseline
//                (analysis/integrated_gradients.h): t's share of L(g) - L(0), the shares adding
//                up to it by completeness.
// A table whose gates are all 0 scores 0 on each.
//   LayerScores s = layer_scores(model, *dataset, Split::train, 8, 32, GateKind::heads, true, 20);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/analysis/integrated_gradients.h"
#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

struct LayerScores {
  GateKind kind = GateKind::heads;
  std::vector<std::string> labels;           // gate_table_label: "L0"; "enc.L1", "cross.L0", "dec.L1"
  std::vector<int64_t> active;               // gates not 0 per table
  std::vector<double> importance;            // [tables]
  std::vector<double> ablation;              // [tables], or empty when not asked
  std::vector<double> integrated_gradients;  // [tables], or empty without ig_steps
  IntegratedGradients ig;                    // the per-gate run behind it: losses and completeness error
  double loss = 0;                           // L: the mean loss over the scored targets
  int64_t batches = 0;
};

// Over `batches` batches of `split` (0: the split's default) of `batch_size` rows; ablation and
// ig_steps > 0 add those scores. The model's gates are restored and its gradients left zeroed.
template <typename T>
LayerScores layer_scores(Model<T>& model, const Dataset& dataset, Split split, int64_t batches, int64_t batch_size,
                         GateKind kind, bool ablation, int64_t ig_steps = 0);

// layers.csv: table,label,kind,active,importance[,ablation_loss_delta][,integrated_gradients].
std::string layers_csv(const LayerScores& s);

}  // namespace headlab
