// The per-batch gate gradients that Michel et al.'s importance and its relatives average: over
// `batches` batches of `split`, each batch that scores a target runs forward with the kind's gates
// recorded as leaves and backward from its mean loss, then `each(gates)` reads gates.grad(t) =
// d(batch loss)/d gate of every table t. Returns the mean loss over the scored targets (batches
// weighed by their targets) and how many batches scored; the gradient slabs are left zeroed.
// One loop for analysis/ffn_units.h (|dL/dg| per unit) and analysis/layer_scores.h (|sum g dL/dg|
// per table).
//   const GateGradientPass p = for_each_gate_gradient(model, data, Split::val, 8, 32, kind,
//                                                     [&](const Parameters<float>& g) { ... });
#pragma once

#include <cstdint>

#include "headlab/common/error.h"
#include "headlab/data/batch.h"
#include "headlab/data/model_input.h"
#include "headlab/nn/model.h"

namespace headlab {

struct GateGradientPass {
  double loss = 0;             // mean over the scored targets
  int64_t scored_batches = 0;  // batches with at least one scored target
};

template <typename T, typename Each>
GateGradientPass for_each_gate_gradient(Model<T>& model, const Dataset& dataset, Split split, int64_t batches,
                                        int64_t batch_size, GateKind kind, Each&& each) {
  const ModelSpec& spec = model.spec();
  Parameters<T>& gates = gates_of(model, kind);
  Arena arena;
  Tape<T> tape(arena);
  Batch batch = dataset.make_batch(batch_size);
  double loss_sum = 0;
  int64_t targets = 0;
  GateGradientPass pass;
  for (int64_t i = 0; i < batches; ++i) {
    dataset.fill_batch(split, i, batch);
    int64_t n = 0;
    for (const int32_t t : scored_targets(spec, batch)) n += t >= 0;
    if (n == 0) continue;
    gates.zero_grad();
    const ModelOutput<T> out = model.forward(tape, model_input(spec, batch), recording_gate_grads(kind));
    loss_sum += static_cast<double>(out.loss.value().data()[0]) * static_cast<double>(n);
    targets += n;
    ++pass.scored_batches;
    tape.backward(out.loss);
    each(static_cast<const Parameters<T>&>(gates));
    tape.reset();
  }
  HEADLAB_CHECK(targets > 0, "gate gradients: " << batches << " batches of the " << split_name(split)
                                                << " split hold no scored target");
  model.params().zero_grad();
  gates.zero_grad();
  pass.loss = loss_sum / static_cast<double>(targets);
  return pass;
}

}  // namespace headlab
