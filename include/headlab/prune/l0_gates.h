// L0 head gates (Voita et al. 2019): one input-independent Hard Concrete gate per head (or, kind
// ffn_units, per FFN hidden unit: every "head" and "site" below reads "unit" and "MLP block")
// (ops/hard_concrete.h), resampled for every micro-batch, trained with the model so that
//   loss = cross-entropy + lambda * penalty,  penalty = P(g_h != 0) aggregated over the gated
//   heads as L0Penalty says (by default as Voita et al.'s code: each site's sum, averaged over sites)
// and then binarised: gate = 1 where g_h != 0 is more probable than g_h = 0, else 0.
// log_alpha lives in its own Parameters, one [heads] table per attention site named as the
// gates' ("blocks/<l>/attn/log_alpha", "enc/<l>/attn/log_alpha", "blocks/<l>/cross/log_alpha";
// "blocks/<l>/mlp/log_alpha", "enc/<l>/mlp/log_alpha"),
// updated by its own Adam (no weight decay); the model's optimizer never sees it. The sampled
// gates multiply the model's fixed gates, so a head already pruned in the checkpoint stays
// pruned. Sites left out (L0Options::sites) keep the model's gates and add no penalty.
//   L0Gates l0(model, {.lambda = 0.01, .lr = 0.1, .init = 3.0, .seed = 1, .penalty = L0Penalty::layer_mean});
//   ctx.gate_sampler = &l0;  for (...) { l0.zero_grad(); train_step(ctx, step); l0.step(); }
//   l0.binarise_into(model);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/nn/model.h"
#include "headlab/optim/optimizer.h"
#include "headlab/train/step.h"

namespace headlab {

// How the gated heads' P(g != 0) add up to the penalty that lambda multiplies:
//   layer_mean  each gated site's sum over its heads, averaged over the gated sites: what Voita
//               et al.'s code does (the-story-of-heads, lib/layers/concrete_gate.py:84 sums one
//               attention layer's gates, lib/task/seq2seq/problems/concrete.py:61 averages the
//               layers' terms, :106 adds concrete_coef times that to the loss);
//   mean        averaged over every gated head (= layer_mean / H when every site has H heads);
//   sum         summed over every gated head (headlab's L0 before issue 29).
// Sites count as layers do in Voita's code: an encoder_decoder's enc, dec and cross layers apart.
enum class L0Penalty { layer_mean, mean, sum };
// Throws one line with the nearest name or the choices, as parse_prune_strategy.
L0Penalty parse_l0_penalty(const std::string& name);
const char* l0_penalty_name(L0Penalty penalty);

// lambda * the `penalty` aggregate of P(g != 0) [1]; log_alpha holds one [H_site] per gated site
// (at least one). The three aggregates differ only in the factor on the one sum.
template <typename T>
Var<T> l0_penalty(const std::vector<Var<T>>& log_alpha, L0Penalty penalty, double lambda);

struct L0Options {
  double lambda = 0;  // penalty weight
  double lr = 0.1;    // Adam learning rate of log_alpha
  double init = 3.0;  // initial log_alpha of every head
  uint64_t seed = 0;  // noise: u of (step, micro-batch, layer, head) is a hash of this seed
  // Per attention site (spec.attention_sites()), or MLP block, whether its heads get L0 gates;
  // empty = all. The penalty counts the gated sites' heads only (a head masked in the checkpoint
  // included).
  std::vector<bool> sites;
  L0Penalty penalty = L0Penalty::layer_mean;
  GateKind kind = GateKind::heads;  // the model's head gates, or its FFN unit gates
};

class L0Gates final : public GateSampler {
 public:
  L0Gates(const Model<float>& model, const L0Options& options);

  GateKind kind() const override { return options_.kind; }
  const Var<float>* sample(Tape<float>& tape, int64_t step, int64_t micro) override;
  Var<float> penalty(Tape<float>& tape) override;

  void zero_grad() { log_alpha_.zero_grad(); }
  void step() { optimizer_.step(options_.lr); }
  // The model's gates of kind() *= the binarised gates (hard_concrete_eval_gate of each log_alpha).
  void binarise_into(Model<float>& model) const;

  Parameters<float>& log_alpha() { return log_alpha_; }
  const Parameters<float>& log_alpha() const { return log_alpha_; }

 private:
  bool gated(int site) const { return options_.sites.empty() || options_.sites[static_cast<size_t>(site)]; }

  const Model<float>& model_;
  L0Options options_;
  Parameters<float> log_alpha_;
  AdamW<float> optimizer_;
  std::vector<Var<float>> leaves_, gates_;  // of the last sample(); capacity kept (no allocation)
};

}  // namespace headlab
