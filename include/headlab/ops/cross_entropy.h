// Cross-entropy over the last dimension: fused, stable log-softmax + negative log-likelihood.
//   cross_entropy(logits [..., V], targets [rows], ignore_index) -> [1]
//     = mean over the rows whose target != ignore_index of  logsumexp(row) - row[target].
//   If every target is ignored the loss is 0 and the gradient is zero.
//   label_smoothing eps in [0, 1): the target of each row is (1 - eps) onehot + eps / V, as in
//   PyTorch's CrossEntropyLoss(label_smoothing=eps); the loss is then not the NLL of the target
//   (cross_entropy_stats, for evaluation, always is).
// Saves the per-row logsumexp [rows], not the probabilities [rows, V]: the backward rebuilds
// softmax = exp(logit - lse) from the logits, which the tape keeps alive anyway, so the op
// stores rows values instead of rows * V (the largest activation of a small model) for the
// price of one exp per logit in the backward.
// targets are not copied: node.context points at the caller's array, which must stay alive and
// unchanged until the backward has run. A target outside [0, V) that is not ignore_index throws.
//   Var<float> loss = cross_entropy(logits, batch.targets, -1);
#pragma once

#include <cstdint>

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> cross_entropy(Var<T> logits, const int32_t* targets, int32_t ignore_index, double label_smoothing = 0);

// Evaluation without a tape: the same per-row kernel as the op, summed in a fixed order.
struct CrossEntropyStats {
  double loss_sum = 0;    // sum over valid rows of -log softmax(row)[target]
  int64_t n_valid = 0;    // rows whose target != ignore_index
  int64_t n_correct = 0;  // valid rows whose argmax (first maximum) == target
  double mean_loss() const { return n_valid ? loss_sum / static_cast<double>(n_valid) : 0.0; }
};

template <typename T>
CrossEntropyStats cross_entropy_stats(const Tensor<T>& logits, const int32_t* targets, int32_t ignore_index);

}  // namespace headlab
