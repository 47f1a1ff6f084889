// The one Batch -> ModelInput adapter: what a model reads of a batch. The model kind decides
// which targets it scores (an LM head: targets [B, T]; a classifier: labels [B]).
//   ModelOutput<float> out = model.forward(tape, model_input(model.spec(), batch), options);
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

// Rows [row, row + rows) of `batch` (rows < 0: to the end).
ModelInput model_input(const ModelSpec& spec, const Batch& batch, int64_t row = 0, int64_t rows = -1);

// The targets `spec` scores in `batch`, one entry per scored place (-1 = ignored).
const std::vector<int32_t>& scored_targets(const ModelSpec& spec, const Batch& batch);

}  // namespace headlab
