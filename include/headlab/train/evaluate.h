// Evaluation on a held-out split: mean loss over every scored target, accuracy where the task
// has one, bits per byte for text. Runs without recording a backward.
//   EvalStats e = evaluate(model, dataset, Split::val, n_batches, batch, tape);
// A pruning curve evaluates one model on the same batches round after round while heads are
// only switched off; PruningEvaluation gives evaluate()'s numbers bit for bit and reruns only
// the layers from the lowest one whose head or FFN gates changed (nn/saved_forward.h); an
// encoder_decoder's rounds run whole.
//   PruningEvaluation curve(dataset, Split::val, n_batches, batch_size);
//   for (...) { set gates to 0; EvalStats e = curve.evaluate(model, tape); }
//   curve.forget();  // after changing the parameters (fine-tuning)
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/autograd/tape.h"
#include "headlab/data/batch.h"
#include "headlab/nn/model.h"
#include "headlab/nn/saved_forward.h"
#include "headlab/ops/cross_entropy.h"

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

class PruningEvaluation {
 public:
  // The batches as evaluate() picks them. Saved forwards take at most max_saved_bytes; batches
  // past that budget are run whole every time.
  PruningEvaluation(const Dataset& dataset, Split split, int64_t n_batches, int64_t batch_size,
                    int64_t max_saved_bytes = int64_t{512} << 20);

  // evaluate() of the model as it is now. Valid as long as, since the last call, the parameters
  // are unchanged and gates only went from nonzero to 0; anything else needs forget() first.
  EvalStats evaluate(Model<float>& model, Tape<float>& tape);
  void forget();  // the next evaluate() runs every batch whole

 private:
  struct SavedBatch {
    SavedForward<float> forward;
    std::vector<std::vector<float>> gates, ffn_gates;  // per layer, the gates `forward` was run with
    CrossEntropyStats stats;                           // of its logits
    bool valid = false;
  };
  static int64_t first_changed_layer(const Model<float>& model, const SavedBatch& saved, std::vector<uint8_t>& off);
  const Dataset& dataset_;
  Split split_;
  int64_t n_batches_;
  int64_t max_saved_bytes_;
  Batch batch_;
  std::vector<SavedBatch> saved_;  // the first batches, as many as the budget holds
};

}  // namespace headlab
