#include "headlab/train/step.h"

#include <chrono>
#include <cmath>

#include "headlab/common/hash.h"
#include "headlab/dist/dist.h"
#include "headlab/ops/distillation.h"
#include "headlab/ops/elementwise.h"
#include "headlab/optim/clip.h"

namespace headlab {

MicroBatchRange micro_batches_of_rank(int64_t grad_accum, int rank, int ranks) {
  HEADLAB_CHECK(grad_accum % ranks == 0, "train.grad_accum = " << grad_accum << " does not split over " << ranks
                                                               << " ranks; set it to a multiple of " << ranks
                                                               << " (e.g. --set train.grad_accum=" << ranks << ")");
  const int64_t per_rank = grad_accum / ranks;
  HEADLAB_CHECK(ranks == 1 || (per_rank & (per_rank - 1)) == 0,
                "train.grad_accum = " << grad_accum << " over " << ranks << " ranks gives " << per_rank
                                      << " micro-batches per rank; results match one process only with a power of two"
                                         " per rank (docs/distributed.md)");
  return {rank * per_rank, (rank + 1) * per_rank};
}

namespace {
// Adds the time since the last lap to a phase; does nothing (reads no clock) without phases.
class PhaseClock {
 public:
  explicit PhaseClock(StepPhases* phases) : phases_(phases) {
    if (!phases_) return;
    *phases_ = StepPhases{};
    start_ = last_ = std::chrono::steady_clock::now();
  }
  void lap(double StepPhases::*phase) {
    if (!phases_) return;
    const auto now = std::chrono::steady_clock::now();
    phases_->*phase += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  ~PhaseClock() {
    if (phases_) phases_->total = std::chrono::duration<double>(last_ - start_).count();
  }

 private:
  StepPhases* phases_;
  std::chrono::steady_clock::time_point start_, last_;
};
// The teacher's logits of a micro-batch into d.logits (its own tape: nothing of it is recorded
// on the student's).
void teacher_logits(Distillation& d, const ModelInput& input) {
  Tape<float> tape(d.arena);
  NoGradGuard<float> no_grad(tape);
  const Tensor<float> logits = d.teacher.forward(tape, input, {}).logits.value();
  d.logits.assign(logits.data(), logits.data() + logits.numel());
  tape.reset();
}

// (1 - alpha) hard + alpha soft, over the rows the hard loss scores.
Var<float> distilled(Distillation& d, const ModelOutput<float>& out, const ModelInput& input) {
  Tape<float>& tape = *out.logits.tape;
  const Var<float> teacher = tape.constant(Tensor<float>(d.logits.data(), out.logits.shape()));
  const Var<float> soft = distillation_loss(out.logits, teacher, input.targets, -1, d.temperature);
  return add(scale(out.loss, 1 - d.alpha), scale(soft, d.alpha));
}

}  // namespace

StepStats train_step(TrainingContext& ctx, int64_t step) {
  PhaseClock clock(ctx.phases);
  StepStats stats;
  stats.lr = learning_rate(ctx.schedule, step);
  const MicroBatchRange mine = micro_batches_of_rank(ctx.grad_accum, dist::rank(), dist::size());
  const int64_t n_mine = mine.end - mine.begin;
  HEADLAB_CHECK(ctx.gate_sampler == nullptr || dist::size() == 1,
                "L0 gate training runs on one process, not under mpirun");
  Parameters<float>& params = ctx.model.params();
  ctx.rank_losses.resize(static_cast<size_t>(n_mine));
  ctx.step_losses.resize(static_cast<size_t>(ctx.grad_accum));
  ctx.gradient_sum.begin(params.slab_size());
  int64_t tokens = 0;
  dist::together([&] {
    for (int64_t micro = mine.begin; micro < mine.end; ++micro) {
      const int64_t index = step * ctx.grad_accum + micro;
      // The batch this rank asks for next: its next micro-batch, or its first one of the next step.
      const int64_t next = micro + 1 < mine.end ? index + 1 : (step + 1) * ctx.grad_accum + mine.begin;
      const Batch& batch = ctx.batches.get(index, next);
      clock.lap(&StepPhases::data);
      ForwardOptions options;
      options.training = true;
      options.dropout_seed = micro_batch_seed(ctx.seed, step, micro);
      options.label_smoothing = ctx.label_smoothing;
      const ModelInput input = model_input(ctx.model.spec(), batch);
      if (ctx.distillation) teacher_logits(*ctx.distillation, input);
      const Var<float>* gates = ctx.gate_sampler ? ctx.gate_sampler->sample(ctx.tape, step, micro) : nullptr;
      const bool ffn = ctx.gate_sampler && ctx.gate_sampler->kind() == GateKind::ffn_units;
      ModelOutput<float> out =
          ctx.model.forward(ctx.tape, input, options, ffn ? nullptr : gates, ffn ? gates : nullptr);
      ctx.rank_losses[static_cast<size_t>(micro - mine.begin)] = out.loss.value()(0);
      clock.lap(&StepPhases::forward);
      // Each micro-batch's gradient of loss / grad_accum, on its own (zeroed) slab; the slabs are
      // then added in MicroBatchSum's tree, the order a data-parallel job reproduces.
      params.zero_grad();
      Var<float> objective = ctx.distillation ? distilled(*ctx.distillation, out, input) : out.loss;
      if (ctx.gate_sampler) objective = add(objective, ctx.gate_sampler->penalty(ctx.tape));
      ctx.tape.backward(scale(objective, 1.0 / static_cast<double>(ctx.grad_accum)));
      clock.lap(&StepPhases::backward);
      ctx.tape.reset();
      clock.lap(&StepPhases::tape_reset);
      if (n_mine > 1) ctx.gradient_sum.add(params.grads());
      clock.lap(&StepPhases::gradient_sum);
      for (int32_t target : scored_targets(ctx.model.spec(), batch)) tokens += target >= 0;
    }
  });
  if (n_mine > 1) ctx.gradient_sum.finish(params.grads());
  clock.lap(&StepPhases::gradient_sum);

  // Every rank sees every micro-batch's loss, in order: the finiteness check and the mean are
  // the same everywhere, and the same as one process's.
  dist::all_gather(ctx.rank_losses.data(), n_mine, ctx.step_losses.data());
  for (const double loss : ctx.step_losses) {
    HEADLAB_CHECK(std::isfinite(loss),
                  "training diverged: loss is " << loss << " at step " << step << " (try a lower train.lr)");
    stats.loss += loss / static_cast<double>(ctx.grad_accum);
  }
  stats.tokens = dist::sum_over_ranks(tokens);
  // The data-parallel all-reduce: every rank then clips and steps on identical gradients.
  dist::sum_over_ranks(params.grads(), params.slab_size());
  clock.lap(&StepPhases::gradient_sum);
  stats.grad_norm = clip_grad_norm(params, ctx.grad_clip);
  HEADLAB_CHECK(std::isfinite(stats.grad_norm),
                "training diverged: gradient norm is " << stats.grad_norm << " at step " << step);
  clock.lap(&StepPhases::clip);
  if (ctx.update_parameters) ctx.optimizer.step(stats.lr);
  clock.lap(&StepPhases::optimizer);
  return stats;
}

}  // namespace headlab
