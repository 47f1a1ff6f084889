// Head importance by integrated gradients over the gates (Sundararajan et al. 2017). Head h's
// attribution to L, the mean loss over a split's scored targets, is
//   IG_h = (g_h - b) * integral over a in [0, 1] of dL/dxi_h at xi = b + a (g - b),
// along the straight path from the baseline b (every gate at b; 0 = every head off) to the model's
// gates g, every head moving together. Completeness: the attributions add up to L(g) - L(b), the
// change of the loss from the baseline to the model (to the integral's accuracy). The integral
// is a midpoint Riemann sum over `steps` points a_k = (k + 1/2) / steps (its error falls as
// 1/steps^2); the sum's distance from L(g) - L(b), both measured, is reported. A head already
// gated off (a pruned head: gate 0) is not on the path: it stays off at every point, the baseline
// included, and gets 0.
// Michel et al.'s importance is the path's end only, E|dL/dxi_h| at xi = g, a first-order Taylor
// term of the loss in one gate, which misleads where the loss is far from linear in the gates.
// IG_h < 0: turning the heads on lowers the loss along the path, and this is h's share of it.
// The same for FFN hidden units (GateKind::ffn_units): the path runs over the FFN gates, the
// head gates staying as they are.
//   IntegratedGradients ig = integrated_gradients(model, *dataset, Split::val, 8, 32, 20);
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

struct IntegratedGradients {
  std::vector<double> attribution;  // [N], heads numbered site by site (HeadScores::index), or
                                    // units block by block; nats
  double loss = 0;                  // L(g): the model as it is
  double baseline_loss = 0;         // L(b): every gate at the baseline (gated-off ones at 0)
  double completeness_error = 0;    // |sum over heads of IG_h - (L(g) - L(b))|
  int64_t steps = 0, batches = 0, targets = 0;
};

// Over `batches` batches of `split` (0: the split's default, as analyze) of `batch_size` rows;
// `steps` >= 1 points on the path; baseline in [0, 1]. The model's gates are restored and its
// gradient slabs left zeroed. Deterministic: one forward and backward per batch and step, in order.
template <typename T>
IntegratedGradients integrated_gradients(Model<T>& model, const Dataset& dataset, Split split, int64_t batches,
                                         int64_t batch_size, int64_t steps, double baseline = 0,
                                         GateKind kind = GateKind::heads);

}  // namespace headlab
