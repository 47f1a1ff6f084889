#include "headlab/train/evaluate.h"

#include "headlab/ops/cross_entropy.h"
#include "headlab/train/step.h"

namespace headlab {

EvalStats evaluate(Model<float>& model, const Dataset& dataset, Split split, int64_t n_batches, Batch& batch,
                   Tape<float>& tape) {
  const int64_t covering = dataset.eval_batches(split, batch.batch_size);
  if (covering > 0 && (n_batches <= 0 || n_batches > covering)) n_batches = covering;
  HEADLAB_CHECK(n_batches > 0, "evaluate: " << dataset.name() << " has no natural split size; give a number of batches");
  double loss_sum = 0;
  int64_t n_valid = 0, n_correct = 0;
  NoGradGuard<float> no_grad(tape);
  for (int64_t i = 0; i < n_batches; ++i) {
    dataset.fill_batch(split, i, batch);
    const ModelInput input = model_input(model, batch);
    ModelOutput<float> out = model.forward(tape, input, {});
    // Sum losses over targets (not means over batches): the last batch may be partly empty.
    const CrossEntropyStats s = cross_entropy_stats(out.logits.value(), input.targets, -1);
    loss_sum += s.loss_sum;
    n_valid += s.n_valid;
    n_correct += s.n_correct;
    tape.reset();
  }
  EvalStats stats;
  stats.n_targets = n_valid;
  stats.loss = n_valid ? loss_sum / static_cast<double>(n_valid) : 0.0;
  if (dataset.has_accuracy()) stats.accuracy = n_valid ? static_cast<double>(n_correct) / n_valid : 0.0;
  if (dataset.bytes_per_token() > 0) stats.bits_per_byte = bits_per_byte(stats.loss, dataset.bytes_per_token());
  return stats;
}

}  // namespace headlab
