// L0 gates: sampling, penalty and binarisation around the Hard Concrete op.
#include "headlab/prune/l0_gates.h"

#include <string>

#include "headlab/common/hash.h"
#include "headlab/ops/elementwise.h"
#include "headlab/ops/hard_concrete.h"

namespace headlab {

namespace {

std::vector<ParamSpec> log_alpha_specs(const ModelSpec& spec) {
  std::vector<ParamSpec> specs;
  for (int64_t l = 0; l < spec.n_layers; ++l)
    specs.push_back({block_name(l, "attn/log_alpha"),
                     {spec.heads_at_site({AttentionKind::dec, l})},
                     Init::zeros,
                     0.0,
                     ParamKind::bias});
  return specs;
}

// Plain Adam on log_alpha: decaying it towards 0 would pull every gate towards P(open) = 0.91.
AdamWOptions log_alpha_adam() {
  AdamWOptions o;
  o.weight_decay = 0;
  return o;
}

}  // namespace

L0Gates::L0Gates(const Model<float>& model, const L0Options& options)
    : model_(model),
      options_(options),
      log_alpha_(log_alpha_specs(model.spec())),
      optimizer_(log_alpha_, log_alpha_adam()) {
  for (int i = 0; i < log_alpha_.size(); ++i) log_alpha_.value(i).fill(static_cast<float>(options.init));
  log_alpha_.zero_grad();
  leaves_.reserve(static_cast<size_t>(log_alpha_.size()));
  gates_.reserve(static_cast<size_t>(log_alpha_.size()));
}

const Var<float>* L0Gates::sample(Tape<float>& tape, int64_t step, int64_t micro) {
  leaves_.clear();
  gates_.clear();
  const uint64_t step_seed = micro_batch_seed(options_.seed, step, micro);
  for (int l = 0; l < log_alpha_.size(); ++l) {
    leaves_.push_back(tape.leaf(log_alpha_.value(l), log_alpha_.grad(l)));
    const Var<float> g = hard_concrete(leaves_.back(), hash_combine(step_seed, static_cast<uint64_t>(l)));
    gates_.push_back(mul(g, tape.constant(model_.gates().value(l))));
  }
  return gates_.data();
}

Var<float> L0Gates::penalty(Tape<float>& tape) {
  HEADLAB_CHECK(!leaves_.empty() && leaves_.front().tape == &tape, "L0 gates: penalty() before sample() on this tape");
  Var<float> open = sum(hard_concrete_open_probability(leaves_.front()));
  for (size_t l = 1; l < leaves_.size(); ++l) open = add(open, sum(hard_concrete_open_probability(leaves_[l])));
  return scale(open, options_.lambda);
}

void L0Gates::binarise_into(Model<float>& model) const {
  for (int l = 0; l < log_alpha_.size(); ++l) {
    const Tensor<float> gates = model.gates().value(l), log_alpha = log_alpha_.value(l);
    for (int64_t h = 0; h < gates.numel(); ++h)
      gates(h) *= static_cast<float>(hard_concrete_eval_gate(static_cast<double>(log_alpha(h))));
  }
}

}  // namespace headlab
