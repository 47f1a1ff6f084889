// Head pruning by masks: a pruned head's gate is set to 0 (no head is removed from the tensors).
// The same loop prunes FFN hidden units (unit ffn_units), and whole attention layers or whole FFN
// blocks (whole: every gate of a table at once, scored by analysis/layer_scores.h).
// Heads are numbered site by site (spec.attention_sites(): a layer of a decoder or encoder; an
// encoder_decoder's encoder layers, then each decoder layer's self- and cross-attention), as in
// heads.csv. `only` restricts pruning to some kinds of attention (Michel et al.'s Fig. 4: enc,
// dec or cross alone); the other kinds keep every head.
//   iterative (importance, integrated_gradients, random, entropy, confidence, ablation): round 0 is the model as
//     loaded; each round prunes the max(1, round(F * prunable heads)) active heads with the
//     lowest score (never a site's last active head), fine-tunes K steps with the gates fixed,
//     evaluates, and optionally recomputes the scores, until every prunable site has one head left;
//   l0 (Voita et al. 2019): round 0, then round 1 after fine-tuning with Hard Concrete gates on the
//     prunable sites and an L0 penalty (prune/l0_gates.h; l0_penalty says how the heads' terms
//     add up), gates binarised; the model's parameters train with the gates, or stay frozen
//     (l0_freeze);
//   none (the control): the same rounds of fine-tuning with no head pruned, so a pruned curve can
//     be compared with the unpruned model trained for the same extra steps at the same rate.
// Fine-tuning continues the optimizer it is given (the checkpoint's moments, when it has them)
// at a constant rate: by default the rate the checkpoint's own schedule had reached at its step.
// Every round is evaluated on the same fixed batches 0..n-1 of one split, so curves compare; a
// translation model is also decoded and scored in BLEU and chrF on the split's first sentences.
// Deterministic: same checkpoint, options, seed and thread count give bit-identical rounds.
//   std::vector<PruneRound> rounds = iterative_prune(model, *optimizer, config, *dataset, options, step);
//   write_file_atomically(dir / "prune.csv", prune_csv(rounds, options));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/decode/search.h"
#include "headlab/io/config.h"
#include "headlab/nn/model.h"
#include "headlab/optim/optimizer.h"
#include "headlab/prune/l0_gates.h"
#include "headlab/train/evaluate.h"

namespace headlab {

enum class PruneStrategy {
  importance,
  importance_raw,
  integrated_gradients,
  magnitude,
  random,
  entropy,
  confidence,
  ablation,
  l0,
  none
};
// Throws one line with the nearest name ("unknown strategy 'importnce'; did you mean
// 'importance'?") or the choices.
PruneStrategy parse_prune_strategy(const std::string& name);
const char* prune_strategy_name(PruneStrategy strategy);

// What --unit names: the gates pruned, and whether a table of them (an attention layer's heads,
// an MLP block's units) goes whole. heads, ffn, attention_layers, ffn_blocks.
struct PruneUnit {
  GateKind gates = GateKind::heads;
  bool whole = false;
};
PruneUnit parse_prune_unit(const std::string& name);  // throws one line naming the choices
const char* prune_unit_name(PruneUnit unit);

struct PruneOptions {
  PruneStrategy strategy = PruneStrategy::importance;
  // What is pruned: attention heads (their gates), or FFN hidden units (analysis/ffn_units.h
  // scores them: importance, importance_raw, magnitude, integrated_gradients, random; l0 and
  // the attention-based strategies are for heads).
  GateKind unit = GateKind::heads;
  // Whole tables of `unit` at a time: attention layers (every head of a site) or FFN blocks
  // (every unit of a block), scored by importance, ablation, integrated_gradients or random
  // (analysis/layer_scores.h); every table may go, so the last round has none of them left.
  bool whole = false;
  double step_frac = 0.1;      // F, in (0, 1): fraction of all heads (units, tables) pruned per round
  int64_t finetune_steps = 0;  // K: training steps after each round's pruning
  // How those steps train: on the hard targets (fine-tuning), or distilled from the model as
  // loaded, the unpruned teacher (train/step.h's Distillation: (1 - alpha) hard + alpha soft).
  bool distill = false;
  double distill_alpha = 0.5, distill_temperature = 2.0;
  double finetune_lr = 0;     // constant fine-tuning rate; 0 = the checkpoint's schedule at its step
  bool recompute = false;     // scores again after every round (after fine-tuning)
  int64_t rounds = 0;         // none only: rounds of fine-tuning; 0 = as many as pruning takes
  uint64_t seed = 0;          // random order, fine-tuning dropout, L0 noise
  Split split = Split::val;   // the metric's split
  int64_t eval_batches = 0;   // batches 0..n-1 of `split`; 0 = default_eval_batches()
  int64_t score_batches = 0;  // batches 0..n-1 of the train split for scores; 0 = train.eval_batches
  int64_t ig_steps = 20;      // integrated_gradients: points of the path (analysis/integrated_gradients.h)
  // l0 only.
  double lambda = 0;                           // penalty weight, >= 0
  int64_t l0_steps = 200;                      // fine-tuning steps with the stochastic gates
  double l0_lr = 0.1;                          // Adam learning rate of log_alpha
  double l0_init = 3.0;                        // initial log_alpha: P(g != 0) = 0.98, the gates start open
  bool l0_freeze = false;                      // train only the gates, the model's parameters fixed (else both train)
  L0Penalty l0_penalty = L0Options{}.penalty;  // by default Voita et al.'s code's (prune/l0_gates.h)
  // The kinds of attention whose heads may be pruned; empty = every kind. Only an
  // encoder_decoder has more than one kind.
  std::vector<AttentionKind> only;
  // Translation: each round's BLEU and chrF, decoded with `search` from the split's first
  // bleu_sentences sentences (0 = all). bleu = false skips the decoding.
  bool bleu = true;
  SearchOptions search{};
  int64_t bleu_sentences = 0;
};

// "enc,cross" -> {enc, cross}: --only's kinds; throws one line on a name that is none of enc,
// dec, cross, or on one given twice.
std::vector<AttentionKind> parse_attention_kinds(const std::vector<std::string>& names);

// Throws headlab::Error (one line naming the option) on options outside their range.
void validate(const PruneOptions& options);
// ... or that do not fit a model of `spec` (--only on a one-stack model; a physically pruned spec).
void validate(const PruneOptions& options, const ModelSpec& spec);

// A head by its attention site (the gates' table; a layer of a one-stack model) and index there;
// or an FFN unit by its MLP block (the FFN gates' table) and index there.
struct SiteHead {
  int64_t site = 0, head = 0;
  bool operator==(const SiteHead&) const = default;
};

struct PruneRound {
  int64_t round = 0;
  int64_t step = 0;                      // the model's training step after the round (fine-tuning counts)
  std::vector<int64_t> heads_per_site;   // active (gate != 0) heads per attention site
  std::vector<int64_t> units_per_block;  // active FFN units per MLP block
  std::vector<SiteHead> pruned;          // every head (or unit, options.unit) with gate 0 so far, in pruning order
  EvalStats metric;                      // on options.split
  double bleu = -1, chrf = -1;           // translation with options.bleu; else -1
  int64_t heads_total() const;
  int64_t units_total() const;
};

// Runs the strategy's schedule on `model` (left with the last round's gates and fine-tuned
// parameters). Fine-tuning steps `optimizer` (over model.params(), e.g. continued from the
// checkpoint by continue_optimizer_state) with config.train's batch size, accumulation and
// clipping at finetune_rate(); its steps are numbered from `start_step` (the checkpoint's step:
// the data continues where training stopped). on_round gets the rounds so far after each one.
std::vector<PruneRound> iterative_prune(Model<float>& model, Optimizer<float>& optimizer, const Config& config,
                                        const Dataset& dataset, const PruneOptions& options, int64_t start_step,
                                        const std::function<void(const std::vector<PruneRound>&)>& on_round = {});

// The constant rate of fine-tuning: options.finetune_lr, or else the rate config's schedule gives
// at `start_step` (after the last step: train.lr * min_lr_ratio), where training left the model.
double finetune_rate(const Config& config, const PruneOptions& options, int64_t start_step);

// One score per head (numbered site by site, as heads.csv), FFN unit (block by block, as
// units.csv) or, options.whole, gate table (as layers.csv) of the model as it is, as options.unit
// says; the lowest is pruned first (the sign conventions are in prune_loop.cpp). Not for l0.
std::vector<double> unit_scores(Model<float>& model, const Config& config, const Dataset& dataset,
                                const PruneOptions& options);

// The `count` heads to prune next: heads that are active and prunable, in ascending (score,
// index) order, skipping any whose site (site_of[k]) would be left with fewer than keep_per_site
// active heads (whole tables: 0, each its own site). Fewer when fewer can go. prunable empty =
// every head.
std::vector<int64_t> heads_to_prune(const std::vector<double>& scores, const std::vector<uint8_t>& active,
                                    const std::vector<int64_t>& site_of, int64_t count,
                                    const std::vector<uint8_t>& prunable = {}, int64_t keep_per_site = 1);

// prune.csv: kPruneCsvHeader, then one row per round (docs/pruning-verb.md).
extern const char* const kPruneCsvHeader;
std::string prune_csv(const std::vector<PruneRound>& rounds, const PruneOptions& options);
// "<strategy>[_ffn|_attention_layers|_ffn_blocks][_<kind>...][_ft<K>][_distill][_recompute][_seed<N>][_lambda<X>][_penalty_<P>][_frozen]":
// the default output folder's name (kinds of --only, e.g. importance_enc_cross). The seed appears where it changes the
// result (random order, fine-tuning, L0), the L0 penalty where it is not the default (PruneOptions{}.l0_penalty), so
// the folders of runs before it existed keep their names.
std::string prune_run_name(const PruneOptions& options);

}  // namespace headlab
