// The training step, in one place. A step is a pure function of (parameters, optimizer state,
// step number): its batches are dataset batch (step * grad_accum + micro) and its dropout seed
// mixes train.seed with the step, so a resumed run replays the same steps bit for bit.
// Under mpirun each rank runs an aligned block of the step's micro-batches and the gradients
// are summed over ranks in a fixed order (dist::sum_over_ranks), so P ranks produce the bits of
// one process with the same train.grad_accum (docs/distributed.md).
//   TrainingContext ctx{model, *optimizer, batches, tape, schedule, grad_accum, clip, seed};
//   StepStats s = train_step(ctx, step);
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/autograd/tape.h"
#include "headlab/data/batch.h"
#include "headlab/data/model_input.h"
#include "headlab/data/prefetch.h"
#include "headlab/nn/model.h"
#include "headlab/optim/optimizer.h"
#include "headlab/optim/schedule.h"
#include "headlab/train/gradient_sum.h"

namespace headlab {

// Trainable gates for train_step (L0 pruning, prune/l0_gates.h): head gates, or FFN unit gates
// (kind()). For each micro-batch the forward uses sample()'s gates instead of the model's fixed
// ones of that kind, and penalty() is added to the loss before the backward; the sampler owns its
// parameters and their update.
class GateSampler {
 public:
  virtual ~GateSampler() = default;
  virtual GateKind kind() const { return GateKind::heads; }
  // One Var per gate table of kind() (attention site [heads], or MLP block [units]) on `tape`, for
  // micro-batch `micro` of step `step`.
  virtual const Var<float>* sample(Tape<float>& tape, int64_t step, int64_t micro) = 0;
  // The penalty on the gates (a [1] Var on `tape`), added to each micro-batch's loss.
  virtual Var<float> penalty(Tape<float>& tape) = 0;
};

// Where a step's time goes (headlab bench --phases), in seconds, summed over its micro-batches.
// train_step fills it when TrainingContext::phases points to one; otherwise it reads no clock.
struct StepPhases {
  double data = 0;  // the batch from the prefetcher
  double forward = 0;
  double backward = 0;  // zeroing the gradient slab included
  double tape_reset = 0;
  double gradient_sum = 0;  // the micro-batch tree and the sum over ranks
  double clip = 0;
  double optimizer = 0;
  double total = 0;
};

// Knowledge distillation (train.teacher, prune --recover distill): each micro-batch's objective is
// (1 - alpha) * the hard loss + alpha * distillation_loss(student, teacher, temperature)
// (ops/distillation.h), the teacher's logits from its own forward on the same batch (no dropout,
// no gradient). The reported loss stays the hard one. alpha = 0 is plain training, bit for bit.
struct Distillation {
  Model<float>& teacher;
  double alpha = 0.5, temperature = 2.0;
  Arena arena{};                // the teacher's forwards
  std::vector<float> logits{};  // the teacher's logits of the micro-batch, kept through the backward
};

struct TrainingContext {
  Model<float>& model;
  Optimizer<float>& optimizer;
  BatchPrefetcher& batches;  // training batch (step * grad_accum + micro)
  Tape<float>& tape;
  ScheduleOptions schedule;
  int64_t grad_accum = 1;
  double grad_clip = 0;                  // 0 = off
  uint64_t seed = 0;                     // train.seed
  double label_smoothing = 0;            // train.label_smoothing: of the training loss only
  GateSampler* gate_sampler = nullptr;   // null = the model's gates, fixed
  Distillation* distillation = nullptr;  // null = the hard loss alone
  // false: the step computes the loss and the gradients (a gate sampler's) but leaves the
  // model's parameters and optimizer as they are (L0 gates trained on a frozen model).
  bool update_parameters = true;
  StepPhases* phases = nullptr;  // non-null: train_step times its parts into it
  // Kept across steps so that a warmed-up step allocates nothing.
  MicroBatchSum gradient_sum{};
  std::vector<double> rank_losses{}, step_losses{};  // this rank's micro-batch losses; all ranks'
};

struct StepStats {
  double loss = 0;       // mean over the step's micro-batches (without a gate penalty)
  double grad_norm = 0;  // global norm before clipping
  double lr = 0;
  int64_t tokens = 0;  // tokens (or examples, for the encoder) that carried a target
};

// The micro-batches [begin, end) of a step that rank `rank` of `ranks` runs: an aligned block of
// grad_accum / ranks. Throws unless the split is exact and, with more than one rank, a power of
// two per rank (the condition for matching one process bit for bit).
struct MicroBatchRange {
  int64_t begin = 0, end = 0;
};
MicroBatchRange micro_batches_of_rank(int64_t grad_accum, int rank, int ranks);

// For each of this rank's micro-batches: forward, backward of loss / grad_accum into a zeroed
// slab, added into the micro-batch tree -> sum over ranks -> clip -> update. Throws
// headlab::Error when a loss or the gradient norm is not finite (nothing is updated); under
// mpirun every rank throws it together (dist::agree).
StepStats train_step(TrainingContext& ctx, int64_t step);

}  // namespace headlab
