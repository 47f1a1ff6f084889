// The pruning schedules: scores per strategy, the choice of heads, fine-tuning between rounds,
// and the L0 run. Scores come from analyze_heads() on batches 0..n-1 of the *training* split:
// choosing heads by their effect on the split the curve is then measured on would let the
// selection fit that split (ablation most of all, which is exactly a greedy search on it).
#include "headlab/prune/prune_loop.h"

#include "headlab/nn/prune.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "headlab/analysis/ffn_units.h"
#include "headlab/analysis/heads.h"
#include "headlab/analysis/layer_scores.h"
#include "headlab/decode/translate_split.h"
#include "headlab/common/hash.h"
#include "headlab/optim/schedule.h"
#include "headlab/prune/l0_gates.h"
#include "headlab/train/distillation.h"
#include "headlab/train/setup.h"
#include "headlab/train/step.h"

namespace headlab {

namespace {

// Sign conventions, so that "lowest score is pruned first" holds for every strategy:
//   importance  Michel et al.'s normalised importance (l2 per layer, their default for ranking
//               across layers): the head whose gate the loss is least sensitive to goes first.
//   importance_raw  the same without the per-layer normalisation (a global normalisation
//               divides every head by one number and gives this order too).
//   integrated_gradients  the head's integrated gradients along the gates' path from 0, negated:
//               the head whose switching on lowers the loss least (or raises it) goes first.
//   ablation    loss(head alone masked) - loss: the head whose removal raises the loss least
//               (or lowers it) goes first.
//   entropy     minus the mean attention entropy: the most spread-out (unfocused) head goes
//               first. Voita et al. find the heads that matter (positional, syntactic, rare
//               words) attend sharply; a near-uniform head is a bag-of-words average that the
//               residual stream and the other heads can stand in for.
//   confidence  Voita et al.'s confidence (mean max attention weight): the least confident head
//               goes first, by the same finding.
//   random      a uniform draw per head from the seed: a seeded permutation, the same in every
//               round (with --recompute there is nothing to recompute).
// FFN units (--unit ffn) by analysis/ffn_units.h's scores: importance (normalised per block),
// importance_raw, integrated_gradients (negated) as for heads, and magnitude, |g| ||W_fc row||
// ||W_proj column||: the unit that can move the residual stream least goes first; random alike.
// Whole attention layers and FFN blocks (options.whole) by analysis/layer_scores.h's: importance
// |dL/dxi| of the table's common gate, the ablation loss change, integrated gradients (the
// table's share, negated), random.
std::vector<double> strategy_scores(const HeadScores& s, PruneStrategy strategy) {
  std::vector<double> scores;
  switch (strategy) {
    case PruneStrategy::importance:
      return s.importance_normalized;
    case PruneStrategy::importance_raw:
      return s.importance;
    case PruneStrategy::integrated_gradients:
      for (double ig : s.integrated_gradients) scores.push_back(-ig);
      return scores;
    case PruneStrategy::ablation:
      return s.ablation_loss_delta;
    case PruneStrategy::confidence:
      return s.confidence;
    case PruneStrategy::entropy:
      for (double e : s.entropy) scores.push_back(-e);
      return scores;
    default:
      break;
  }
  HEADLAB_CHECK(false, "prune: strategy " << prune_strategy_name(strategy) << " has no analysis scores");
  return scores;
}

// What the loop prunes, numbered: the model's heads site by site (heads.csv's order), its FFN
// units block by block (units.csv's order), or, whole, its tables (sites or blocks, layers.csv's
// order): the table of each (a whole table is its own), and whether `only` lets it be pruned
// (empty = every kind; an FFN block's kind is its stack's, enc or dec).
struct GateNumbering {
  std::vector<int64_t> site_of;
  std::vector<uint8_t> prunable;
  int64_t n_sites = 0;
  bool whole = false;

  GateNumbering(const Model<float>& model, GateKind unit, const std::vector<AttentionKind>& only, bool whole_tables)
      : whole(whole_tables) {
    const ModelSpec& spec = model.spec();
    const Parameters<float>& gates = gates_of(model, unit);
    const std::vector<AttentionSite> sites = spec.attention_sites();
    n_sites = gates.size();
    for (int64_t l = 0; l < n_sites; ++l) {
      const bool encoder_block = model_kind_info(spec.kind).source && l < spec.n_encoder_layers;
      const AttentionKind kind = unit == GateKind::heads ? sites[l].kind
                                 : encoder_block         ? AttentionKind::enc
                                                         : AttentionKind::dec;
      const bool kind_ok = only.empty() || std::find(only.begin(), only.end(), kind) != only.end();
      for (int64_t h = 0; h < (whole ? 1 : gates.value(static_cast<int>(l)).numel()); ++h) {
        site_of.push_back(l);
        prunable.push_back(kind_ok);
      }
    }
  }
  int64_t total() const { return static_cast<int64_t>(site_of.size()); }
  int64_t prunable_count() const { return std::count(prunable.begin(), prunable.end(), 1); }
  SiteHead site_head(int64_t k) const {
    return {site_of[k], k - (std::find(site_of.begin(), site_of.end(), site_of[k]) - site_of.begin())};
  }
  int64_t keep_per_site() const { return whole ? 0 : 1; }  // a site's last head stays; a table may go
};

// The gates of `unit` that are not 0, flattened table by table; per_table: whether any gate of
// each table is.
std::vector<uint8_t> active_gates(const Model<float>& model, GateKind unit, bool per_table = false) {
  std::vector<uint8_t> active;
  const Parameters<float>& gates = gates_of(model, unit);
  for (int i = 0; i < gates.size(); ++i) {
    const Tensor<float> g = gates.value(i);
    const float *begin = g.data(), *end = g.data() + g.numel();
    if (per_table)
      active.push_back(std::any_of(begin, end, [](float x) { return x != 0.0f; }));
    else
      for (const float* x = begin; x != end; ++x) active.push_back(*x != 0.0f);
  }
  return active;
}

// Active gates per table.
std::vector<int64_t> active_per_table(const Parameters<float>& gates) {
  std::vector<int64_t> counts;
  for (int i = 0; i < gates.size(); ++i) {
    const Tensor<float> g = gates.value(i);
    int64_t n = 0;
    for (int64_t k = 0; k < g.numel(); ++k) n += g(k) != 0.0f;
    counts.push_back(n);
  }
  return counts;
}

// A round's record from the model's gates (the pruned list keeps the order heads went in).
PruneRound record_round(Model<float>& model, int64_t round, int64_t step, const std::vector<SiteHead>& pruned,
                        PruningEvaluation& curve, Tape<float>& tape, const Dataset& dataset,
                        const PruneOptions& options) {
  PruneRound r;
  r.round = round;
  r.step = step;
  r.pruned = pruned;
  r.heads_per_site = active_per_table(model.gates());
  r.units_per_block = active_per_table(model.ffn_gates());
  r.metric = curve.evaluate(model, tape);
  if (options.bleu && dataset.translation() != nullptr) {
    const SplitTranslation t =
        translate_split(model, *dataset.translation(), options.split, options.search, options.bleu_sentences);
    r.bleu = t.bleu.score;
    r.chrf = t.chrf.score;
  }
  return r;
}

// The constant-rate schedule of all fine-tuning: finetune_rate() from the first step, no warmup.
ScheduleOptions finetune_schedule(double lr) {
  ScheduleOptions s;
  s.lr = lr;
  s.decay = LrDecay::constant;
  return s;
}

// Rounds an iterative strategy takes from `active`: the none control fine-tunes as often.
int64_t pruning_round_count(std::vector<uint8_t> active, const GateNumbering& heads, int64_t per_round) {
  const std::vector<double> any_order(active.size(), 0.0);
  int64_t rounds = 0;
  for (std::vector<int64_t> chosen;
       !(chosen = heads_to_prune(any_order, active, heads.site_of, per_round, heads.prunable, heads.keep_per_site()))
            .empty();
       ++rounds)
    for (int64_t k : chosen) active[k] = 0;
  return rounds;
}

}  // namespace

double finetune_rate(const Config& config, const PruneOptions& options, int64_t start_step) {
  return options.finetune_lr > 0 ? options.finetune_lr : learning_rate(schedule_options(config), start_step);
}

int64_t PruneRound::heads_total() const {
  return std::accumulate(heads_per_site.begin(), heads_per_site.end(), int64_t{0});
}

int64_t PruneRound::units_total() const {
  return std::accumulate(units_per_block.begin(), units_per_block.end(), int64_t{0});
}

void validate(const PruneOptions& o) {
  HEADLAB_CHECK(o.step_frac > 0 && o.step_frac < 1, "--step-frac must be in (0, 1), got " << o.step_frac);
  HEADLAB_CHECK(o.finetune_steps >= 0, "--finetune-steps must be >= 0, got " << o.finetune_steps);
  HEADLAB_CHECK(o.finetune_lr >= 0 && std::isfinite(o.finetune_lr),
                "--finetune-lr must be positive, got " << o.finetune_lr);
  HEADLAB_CHECK(o.rounds >= 0, "--rounds must be positive, got " << o.rounds);
  HEADLAB_CHECK(o.rounds == 0 || o.strategy == PruneStrategy::none, "--rounds applies only to --strategy none");
  HEADLAB_CHECK(o.strategy != PruneStrategy::none || o.finetune_steps > 0,
                "--strategy none prunes nothing: it is the control of fine-tuning, so it needs --finetune-steps K");
  HEADLAB_CHECK(o.eval_batches >= 0, "--batches must be positive, got " << o.eval_batches);
  HEADLAB_CHECK(o.score_batches >= 0, "--score-batches must be positive, got " << o.score_batches);
  HEADLAB_CHECK(o.ig_steps >= 1, "--ig-steps must be positive, got " << o.ig_steps);
  HEADLAB_CHECK(o.lambda >= 0 && std::isfinite(o.lambda), "--lambda must be >= 0, got " << o.lambda);
  HEADLAB_CHECK(o.l0_steps > 0, "--l0-steps must be positive, got " << o.l0_steps);
  HEADLAB_CHECK(o.l0_lr > 0 && std::isfinite(o.l0_lr), "--l0-lr must be positive, got " << o.l0_lr);
  HEADLAB_CHECK(std::isfinite(o.l0_init), "--l0-init must be finite, got " << o.l0_init);
  HEADLAB_CHECK(!o.l0_freeze || o.strategy == PruneStrategy::l0, "--l0-freeze applies only to --strategy l0");
  HEADLAB_CHECK(o.bleu_sentences >= 0, "--sentences must be positive, got " << o.bleu_sentences);
  HEADLAB_CHECK(o.search.beam >= 1, "--beam must be positive, got " << o.search.beam);
  const bool ffn = o.unit == GateKind::ffn_units && !o.whole;  // single units (whole tables: below)
  const PruneStrategy s = o.strategy;
  HEADLAB_CHECK(!ffn || s == PruneStrategy::importance || s == PruneStrategy::importance_raw ||
                    s == PruneStrategy::integrated_gradients || s == PruneStrategy::magnitude ||
                    s == PruneStrategy::random || s == PruneStrategy::l0 || s == PruneStrategy::none,
                "--unit ffn: --strategy " << prune_strategy_name(s)
                                          << " scores heads; FFN units take importance, importance_raw, "
                                             "integrated_gradients, magnitude, random, l0 or none");
  HEADLAB_CHECK(ffn || s != PruneStrategy::magnitude, "--strategy magnitude scores FFN units (--unit ffn)");
  const char* unit = prune_unit_name({o.unit, o.whole});
  HEADLAB_CHECK(!o.whole || s == PruneStrategy::importance || s == PruneStrategy::ablation ||
                    s == PruneStrategy::integrated_gradients || s == PruneStrategy::random || s == PruneStrategy::none,
                "--unit " << unit << ": --strategy " << prune_strategy_name(s)
                          << " does not score whole tables; they take importance, ablation, integrated_gradients, "
                             "random or none");
  HEADLAB_CHECK(!o.distill || o.finetune_steps > 0 || s == PruneStrategy::l0,
                "--recover distill trains the pruned model: it needs --finetune-steps K (or --strategy l0)");
  HEADLAB_CHECK(o.distill_alpha >= 0 && o.distill_alpha <= 1,
                "--distill-alpha must be in [0, 1], got " << o.distill_alpha);
  HEADLAB_CHECK(o.distill_temperature > 0 && std::isfinite(o.distill_temperature),
                "--distill-temperature must be positive, got " << o.distill_temperature);
}

std::vector<AttentionKind> parse_attention_kinds(const std::vector<std::string>& names) {
  std::vector<std::string> split;  // "enc,cross" as well as --only enc --only cross
  for (const std::string& list : names)
    for (size_t start = 0; start <= list.size();) {
      const size_t end = std::min(list.find(',', start), list.size());
      split.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  std::vector<AttentionKind> kinds;
  for (const std::string& name : split) {
    const AttentionKind all[] = {AttentionKind::enc, AttentionKind::dec, AttentionKind::cross};
    const AttentionKind* k =
        std::find_if(std::begin(all), std::end(all), [&](AttentionKind x) { return name == attention_kind_name(x); });
    HEADLAB_CHECK(k != std::end(all), "--only: '" << name << "' is not a kind of attention (enc, dec or cross)");
    HEADLAB_CHECK(std::find(kinds.begin(), kinds.end(), *k) == kinds.end(), "--only: '" << name << "' is given twice");
    kinds.push_back(*k);
  }
  return kinds;
}

void validate(const PruneOptions& options, const ModelSpec& spec) {
  const bool ffn = options.unit == GateKind::ffn_units;
  HEADLAB_CHECK(ffn || spec.layer_heads.empty(),
                "prune: the checkpoint was already physically pruned (model.layer_heads is set); prune the unpruned "
                "checkpoint it came from, whose gates mask heads instead");
  HEADLAB_CHECK(!ffn || spec.mlp_units.empty(),
                "prune --unit ffn: the checkpoint's FFN units were already physically removed (model.mlp_units is "
                "set); prune the checkpoint it came from, whose gates mask units instead");
  HEADLAB_CHECK(options.only.empty() || model_kind_info(spec.kind).source,
                "--only: a " << model_kind_info(spec.kind).name
                             << " model has one kind of attention; --only picks among an encoder_decoder's enc, dec "
                                "and cross heads");
  HEADLAB_CHECK(!ffn || std::find(options.only.begin(), options.only.end(), AttentionKind::cross) == options.only.end(),
                "--only cross: cross-attention has no FFN units; --unit ffn prunes the enc or dec blocks' MLPs");
}

std::vector<double> unit_scores(Model<float>& model, const Config& config, const Dataset& dataset,
                                const PruneOptions& options) {
  const GateNumbering numbering(model, options.unit, {}, options.whole);
  const int64_t n = numbering.total();
  std::vector<double> scores;
  if (options.strategy == PruneStrategy::random) {
    for (int64_t k = 0; k < n; ++k)
      scores.push_back(static_cast<double>(splitmix64(hash_combine(options.seed, static_cast<uint64_t>(k))) >> 11) *
                       0x1.0p-53);
    return scores;
  }
  const int64_t batches = options.score_batches > 0 ? options.score_batches : config.train.eval_batches;
  if (options.whole) {
    const bool ig = options.strategy == PruneStrategy::integrated_gradients;
    const LayerScores l = layer_scores(model, dataset, Split::train, batches, config.train.batch_size, options.unit,
                                       options.strategy == PruneStrategy::ablation, ig ? options.ig_steps : 0);
    switch (options.strategy) {
      case PruneStrategy::importance:
        return l.importance;
      case PruneStrategy::ablation:
        return l.ablation;
      case PruneStrategy::integrated_gradients:
        for (double x : l.integrated_gradients) scores.push_back(-x);
        return scores;
      default:
        break;
    }
    HEADLAB_CHECK(false, "prune: strategy " << prune_strategy_name(options.strategy) << " has no layer scores");
  }
  if (options.unit == GateKind::ffn_units) {
    const bool ig = options.strategy == PruneStrategy::integrated_gradients;
    const FfnUnitScores u =
        ffn_unit_scores(model, dataset, Split::train, batches, config.train.batch_size, ig ? options.ig_steps : 0);
    switch (options.strategy) {
      case PruneStrategy::importance:
        return u.importance_normalized;
      case PruneStrategy::importance_raw:
        return u.importance;
      case PruneStrategy::magnitude:
        return u.magnitude;
      case PruneStrategy::integrated_gradients:
        for (double x : u.integrated_gradients) scores.push_back(-x);
        return scores;
      default:
        break;
    }
    HEADLAB_CHECK(false, "prune: strategy " << prune_strategy_name(options.strategy) << " has no FFN unit scores");
  }
  AnalysisOptions a;
  a.batch_size = config.train.batch_size;
  a.importance = options.strategy == PruneStrategy::importance || options.strategy == PruneStrategy::importance_raw;
  a.ablation = options.strategy == PruneStrategy::ablation;
  a.ig_steps = options.strategy == PruneStrategy::integrated_gradients ? options.ig_steps : 0;
  a.attention = options.strategy == PruneStrategy::entropy || options.strategy == PruneStrategy::confidence;
  a.similarity = false;
  a.pad_token = dataset.unkeyed_pad_token();
  const HeadScores s = analyze_heads(model, dataset, Split::train, batches, a);
  scores = strategy_scores(s, options.strategy);
  const std::vector<uint8_t> active = active_gates(model, GateKind::heads);
  for (int64_t k = 0; k < n; ++k)
    HEADLAB_CHECK(!active[k] || std::isfinite(scores[k]), "prune: " << prune_strategy_name(options.strategy)
                                                                    << " has no score for head " << head_label(s, k)
                                                                    << " (no attention rows counted?)");
  return scores;
}

std::vector<int64_t> heads_to_prune(const std::vector<double>& scores, const std::vector<uint8_t>& active,
                                    const std::vector<int64_t>& site_of, int64_t count,
                                    const std::vector<uint8_t>& prunable, int64_t keep_per_site) {
  const int64_t n = static_cast<int64_t>(active.size());
  const int64_t n_sites = site_of.empty() ? 0 : *std::max_element(site_of.begin(), site_of.end()) + 1;
  std::vector<int64_t> order, per_site(static_cast<size_t>(n_sites)), chosen;
  for (int64_t k = 0; k < n; ++k)
    if (active[k]) {
      ++per_site[site_of[k]];
      if (prunable.empty() || prunable[k]) order.push_back(k);
    }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  for (int64_t k : order) {
    if (static_cast<int64_t>(chosen.size()) == count) break;
    if (per_site[site_of[k]] <= keep_per_site) continue;  // the site's last head stays (whole tables may go)
    --per_site[site_of[k]];
    chosen.push_back(k);
  }
  return chosen;
}

std::vector<PruneRound> iterative_prune(Model<float>& model, Optimizer<float>& optimizer, const Config& config,
                                        const Dataset& dataset, const PruneOptions& options, int64_t start_step,
                                        const std::function<void(const std::vector<PruneRound>&)>& on_round) {
  validate(options);
  validate(options, model.spec());
  const GateNumbering heads(model, options.unit, options.only, options.whole);
  Parameters<float>& gates = gates_of(model, options.unit);
  const int64_t n = heads.total();
  Arena arena;
  Tape<float> tape(arena);
  const int64_t eval_batches = options.eval_batches > 0
                                   ? options.eval_batches
                                   : default_eval_batches(config, dataset, options.split, config.train.batch_size);
  // Rounds only switch heads off, so each round's evaluation reruns only the layers from the
  // lowest one pruned in it up, unless fine-tuning changed the parameters since the last.
  PruningEvaluation curve(dataset, options.split, eval_batches, config.train.batch_size);
  std::vector<PruneRound> rounds;
  int64_t step = start_step;  // fine-tuning steps continue the checkpoint's numbering
  int64_t evaluated_at = start_step;
  auto finish_round = [&](int64_t round, const std::vector<SiteHead>& pruned) {
    if (step != evaluated_at) curve.forget();  // training steps changed the parameters
    evaluated_at = step;
    rounds.push_back(record_round(model, round, step, pruned, curve, tape, dataset, options));
    if (on_round) on_round(rounds);
  };
  // `pruned` lists gates (heads or units) whole tables included; `active` is per numbered item.
  std::vector<SiteHead> pruned;
  {
    const GateNumbering gate_numbering(model, options.unit, {}, false);
    const std::vector<uint8_t> open = active_gates(model, options.unit);
    for (int64_t k = 0; k < gate_numbering.total(); ++k)
      if (!open[k]) pruned.push_back(gate_numbering.site_head(k));  // already masked in the checkpoint
  }
  std::vector<uint8_t> active = active_gates(model, options.unit, options.whole);
  finish_round(0, pruned);

  // Fine-tuning: the optimizer holds model.params() only; the gates are a separate Parameters
  // that no optimizer holds, so pruned heads stay at exactly 0. Dropout draws mix train.seed
  // with the prune seed.
  BatchPrefetcher batches(dataset, Split::train, config.train.batch_size, config.train.prefetch);
  TrainingContext ctx{model,
                      optimizer,
                      batches,
                      tape,
                      finetune_schedule(finetune_rate(config, options, start_step)),
                      config.train.grad_accum,
                      config.train.grad_clip,
                      hash_combine(static_cast<uint64_t>(config.train.seed), options.seed)};
  ctx.label_smoothing = config.train.label_smoothing;
  // Distillation: the model as loaded teaches its pruned self through every fine-tuning step.
  std::unique_ptr<Model<float>> teacher;
  std::unique_ptr<Distillation> distillation;
  if (options.distill) {
    teacher = copy_of(model);
    distillation.reset(new Distillation{*teacher, options.distill_alpha, options.distill_temperature});
    ctx.distillation = distillation.get();
  }

  if (options.strategy == PruneStrategy::l0) {
    L0Options l0_options;
    l0_options.lambda = options.lambda;
    l0_options.lr = options.l0_lr;
    l0_options.init = options.l0_init;
    l0_options.seed = options.seed;
    l0_options.penalty = options.l0_penalty;
    l0_options.kind = options.unit;
    const GateNumbering tables(model, options.unit, options.only, true);
    for (const uint8_t ok : tables.prunable) l0_options.sites.push_back(ok != 0);
    L0Gates l0(model, l0_options);
    ctx.gate_sampler = &l0;
    ctx.update_parameters = !options.l0_freeze;
    for (int64_t i = 0; i < options.l0_steps; ++i, ++step) {
      l0.zero_grad();
      train_step(ctx, step);
      l0.step();
    }
    l0.binarise_into(model);
    const std::vector<uint8_t> open = active_gates(model, options.unit);
    for (int64_t k = 0; k < n; ++k)
      if (active[k] && !open[k]) pruned.push_back(heads.site_head(k));
    finish_round(1, pruned);
    return rounds;
  }

  const int64_t per_round =
      std::max<int64_t>(1, std::llround(options.step_frac * static_cast<double>(heads.prunable_count())));
  if (options.strategy == PruneStrategy::none) {
    const int64_t rounds_total = options.rounds > 0 ? options.rounds : pruning_round_count(active, heads, per_round);
    for (int64_t round = 1; round <= rounds_total; ++round) {
      for (int64_t i = 0; i < options.finetune_steps; ++i, ++step) train_step(ctx, step);
      finish_round(round, pruned);
    }
    return rounds;
  }
  std::vector<double> scores = unit_scores(model, config, dataset, options);
  // Until every prunable site (block) is down to one head (unit), or every prunable table is gone;
  // which can go does not depend on scores.
  const int64_t keep = heads.keep_per_site();
  for (int64_t round = 1; !heads_to_prune(scores, active, heads.site_of, 1, heads.prunable, keep).empty(); ++round) {
    if (options.recompute && round > 1) scores = unit_scores(model, config, dataset, options);
    const std::vector<int64_t> chosen = heads_to_prune(scores, active, heads.site_of, per_round, heads.prunable, keep);
    for (int64_t k : chosen) {
      active[k] = 0;
      if (options.whole) {  // every gate of the table, in order
        Tensor<float> g = gates.value(static_cast<int>(k));
        for (int64_t j = 0; j < g.numel(); ++j)
          if (g(j) != 0.0f) {
            g(j) = 0.0f;
            pruned.push_back({k, j});
          }
        continue;
      }
      const SiteHead x = heads.site_head(k);
      gates.value(static_cast<int>(x.site))(x.head) = 0.0f;
      pruned.push_back(x);
    }
    for (int64_t i = 0; i < options.finetune_steps; ++i, ++step) train_step(ctx, step);
    finish_round(round, pruned);
  }
  return rounds;
}

}  // namespace headlab
