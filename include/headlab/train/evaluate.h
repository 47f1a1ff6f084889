// Evaluation on a held-out split: mean loss over every scored target, accuracy where the task
// has one, bits per byte for text. Runs without recording a backward.
//   EvalStats e = evaluate(model, dataset, Split::val, n_batches, batch, tape);
#pragma once

#include <cstdint>

#include "headlab/autograd/tape.h"
#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

struct EvalStats {
  double loss = 0;            // mean cross-entropy (nats) over scored targets
  double accuracy = -1;       // fraction of argmax == target; -1 when the task has no accuracy
  double bits_per_byte = -1;  // -1 when the data is not text
  int64_t n_targets = 0;
};

// Scores `n_batches` batches, or, when n_batches is 0 or more than the split holds, every batch
// of the split once (for datasets with a finite split; unbounded ones need n_batches > 0).
EvalStats evaluate(Model<float>& model, const Dataset& dataset, Split split, int64_t n_batches, Batch& batch,
                   Tape<float>& tape);

}  // namespace headlab
