#include "headlab/train/step.h"

#include <cmath>

#include "headlab/common/hash.h"
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

StepStats train_step(TrainingContext& ctx, int64_t step) {
  StepStats stats;
  stats.lr = learning_rate(ctx.schedule, step);
  ctx.model.params().zero_grad();
  for (int64_t micro = 0; micro < ctx.grad_accum; ++micro) {
    const Batch& batch = ctx.batches.get(step * ctx.grad_accum + micro);
    ForwardOptions options;
    options.training = true;
    options.dropout_seed = hash_combine(hash_combine(ctx.seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(micro));
    const Var<float>* gates = ctx.gate_sampler ? ctx.gate_sampler->sample(ctx.tape, step, micro) : nullptr;
    ModelOutput<float> out = ctx.model.forward(ctx.tape, model_input(ctx.model, batch), options, gates);
    const double loss = out.loss.value()(0);
    HEADLAB_CHECK(std::isfinite(loss), "training diverged: loss is " << loss << " at step " << step
                                                                     << " (try a lower train.lr)");
    stats.loss += loss / static_cast<double>(ctx.grad_accum);
    // Gradients of the mean over micro-batches: each backward is scaled by 1/grad_accum.
    const Var<float> objective = ctx.gate_sampler ? add(out.loss, ctx.gate_sampler->penalty(ctx.tape)) : out.loss;
    ctx.tape.backward(scale(objective, 1.0 / static_cast<double>(ctx.grad_accum)));
    ctx.tape.reset();
    for (int32_t target : ctx.model.spec().kind == ModelKind::encoder ? batch.labels : batch.targets)
      stats.tokens += target >= 0;
  }
  // A data-parallel all-reduce of the gradient slab would go here: every replica then clips and
  // steps on identical gradients.
  stats.grad_norm = clip_grad_norm(ctx.model.params(), ctx.grad_clip);
  HEADLAB_CHECK(std::isfinite(stats.grad_norm),
                "training diverged: gradient norm is " << stats.grad_norm << " at step " << step);
  ctx.optimizer.step(stats.lr);
  return stats;
}

}  // namespace headlab
