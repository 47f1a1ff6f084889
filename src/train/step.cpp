#include "headlab/train/step.h"

#include <cmath>

#include "headlab/common/hash.h"
#include "headlab/dist/dist.h"
#include "headlab/ops/elementwise.h"
#include "headlab/optim/clip.h"

namespace headlab {

ModelInput model_input(const Model<float>& model, const Batch& batch) {
  ModelInput in;
  in.batch_size = batch.batch_size;
  in.seq_len = batch.seq_len;
  in.tokens = batch.tokens.data();
  in.targets = model.spec().kind == ModelKind::encoder ? batch.labels.data() : batch.targets.data();
  in.key_padding = batch.key_padding.empty() ? nullptr : batch.key_padding.data();
  return in;
}

MicroBatchRange micro_batches_of_rank(int64_t grad_accum, int rank, int ranks) {
  HEADLAB_CHECK(grad_accum % ranks == 0,
                "train.grad_accum = " << grad_accum << " does not split over " << ranks << " ranks; set it to a multiple"
                                      << " of " << ranks << " (e.g. --set train.grad_accum=" << ranks << ")");
  const int64_t per_rank = grad_accum / ranks;
  HEADLAB_CHECK(ranks == 1 || (per_rank & (per_rank - 1)) == 0,
                "train.grad_accum = " << grad_accum << " over " << ranks << " ranks gives " << per_rank
                                      << " micro-batches per rank; results match one process only with a power of two"
                                         " per rank (docs/distributed.md)");
  return {rank * per_rank, (rank + 1) * per_rank};
}

StepStats train_step(TrainingContext& ctx, int64_t step) {
  StepStats stats;
  stats.lr = learning_rate(ctx.schedule, step);
  const MicroBatchRange mine = micro_batches_of_rank(ctx.grad_accum, dist::rank(), dist::size());
  const int64_t n_mine = mine.end - mine.begin;
  HEADLAB_CHECK(ctx.gate_sampler == nullptr || dist::size() == 1, "L0 gate training runs on one process, not under mpirun");
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
      ForwardOptions options;
      options.training = true;
      options.dropout_seed = hash_combine(hash_combine(ctx.seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(micro));
      const Var<float>* gates = ctx.gate_sampler ? ctx.gate_sampler->sample(ctx.tape, step, micro) : nullptr;
      ModelOutput<float> out = ctx.model.forward(ctx.tape, model_input(ctx.model, batch), options, gates);
      ctx.rank_losses[static_cast<size_t>(micro - mine.begin)] = out.loss.value()(0);
      // Each micro-batch's gradient of loss / grad_accum, on its own (zeroed) slab; the slabs are
      // then added in MicroBatchSum's tree, the order a data-parallel job reproduces.
      params.zero_grad();
      const Var<float> objective = ctx.gate_sampler ? add(out.loss, ctx.gate_sampler->penalty(ctx.tape)) : out.loss;
      ctx.tape.backward(scale(objective, 1.0 / static_cast<double>(ctx.grad_accum)));
      ctx.tape.reset();
      if (n_mine > 1) ctx.gradient_sum.add(params.grads());
      for (int32_t target : ctx.model.spec().kind == ModelKind::encoder ? batch.labels : batch.targets)
        tokens += target >= 0;
    }
  });
  if (n_mine > 1) ctx.gradient_sum.finish(params.grads());

  // Every rank sees every micro-batch's loss, in order: the finiteness check and the mean are
  // the same everywhere, and the same as one process's.
  dist::all_gather(ctx.rank_losses.data(), n_mine, ctx.step_losses.data());
  for (const double loss : ctx.step_losses) {
    HEADLAB_CHECK(std::isfinite(loss), "training diverged: loss is " << loss << " at step " << step
                                                                     << " (try a lower train.lr)");
    stats.loss += loss / static_cast<double>(ctx.grad_accum);
  }
  stats.tokens = dist::sum_over_ranks(tokens);
  // The data-parallel all-reduce: every rank then clips and steps on identical gradients.
  dist::sum_over_ranks(params.grads(), params.slab_size());
  stats.grad_norm = clip_grad_norm(params, ctx.grad_clip);
  HEADLAB_CHECK(std::isfinite(stats.grad_norm),
                "training diverged: gradient norm is " << stats.grad_norm << " at step " << step);
  ctx.optimizer.step(stats.lr);
  return stats;
}

}  // namespace headlab
