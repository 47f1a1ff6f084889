// Knowledge distillation's soft-target loss (Hinton et al. 2015; Sanh et al. 2019, DistilBERT):
//   distillation_loss(student [rows, V], teacher [rows, V], targets [rows], ignore_index, tau) -> [1]
//     = tau^2 * mean over the rows whose target != ignore_index of KL(p_t || p_s),
//   p_t = softmax(teacher / tau), p_s = softmax(student / tau). The teacher is data (no gradient
//   flows into it). tau^2 keeps the gradient's size comparable with the hard loss's as tau
//   changes (Hinton et al., Section 2), and the rows are the ones the hard loss scores, so
//   (1 - alpha) cross_entropy + alpha distillation_loss averages both over the same rows. KL
//   rather than the soft cross-entropy: the same gradient, and 0 when the student matches.
// targets are not copied (as cross_entropy's): they must stay alive until the backward has run.
//   Var<float> kd = distillation_loss(out.logits, tape.constant(teacher_logits), batch.targets, -1, 2.0);
#pragma once

#include <cstdint>

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> distillation_loss(Var<T> student, Var<T> teacher, const int32_t* targets, int32_t ignore_index,
                         double temperature);

}  // namespace headlab
