// Names and files of a pruning run: strategy names, prune.csv, the default folder name.
#include <string>
#include <vector>

#include "headlab/common/edit_distance.h"
#include "headlab/common/error.h"
#include "headlab/io/csv.h"
#include "headlab/prune/prune_loop.h"

namespace headlab {

namespace {

constexpr PruneStrategy kStrategies[] = {PruneStrategy::importance,
                                         PruneStrategy::importance_raw,
                                         PruneStrategy::integrated_gradients,
                                         PruneStrategy::random,
                                         PruneStrategy::entropy,
                                         PruneStrategy::confidence,
                                         PruneStrategy::ablation,
                                         PruneStrategy::l0,
                                         PruneStrategy::none};

// Space-separated, so a cell never needs CSV quoting.
template <typename Seq, typename Fn>
std::string joined(const Seq& items, Fn item) {
  std::string text;
  for (const auto& x : items) {
    if (!text.empty()) text += ' ';
    text += item(x);
  }
  return text;
}

}  // namespace

const char* prune_strategy_name(PruneStrategy strategy) {
  switch (strategy) {
    case PruneStrategy::importance:
      return "importance";
    case PruneStrategy::importance_raw:
      return "importance_raw";
    case PruneStrategy::integrated_gradients:
      return "integrated_gradients";
    case PruneStrategy::random:
      return "random";
    case PruneStrategy::entropy:
      return "entropy";
    case PruneStrategy::confidence:
      return "confidence";
    case PruneStrategy::ablation:
      return "ablation";
    case PruneStrategy::l0:
      return "l0";
    case PruneStrategy::none:
      return "none";
  }
  return "unknown";
}

PruneStrategy parse_prune_strategy(const std::string& name) {
  std::vector<std::string> choices;
  for (PruneStrategy s : kStrategies) {
    if (name == prune_strategy_name(s)) return s;
    choices.push_back(prune_strategy_name(s));
  }
  throw Error(unknown_choice("strategy", name, choices));
}

const char* const kPruneCsvHeader =
    "strategy,seed,finetune_steps,recompute,lambda,round,heads_pruned,fraction_pruned,heads_kept,heads_per_layer,"
    "val_loss,val_accuracy,val_bpb,pruned_heads,only,val_bleu,val_chrf,l0_penalty";

std::string prune_csv(const std::vector<PruneRound>& rounds, const PruneOptions& options) {
  const bool l0 = options.strategy == PruneStrategy::l0;
  const std::string only = joined(options.only, [](AttentionKind k) { return std::string(attention_kind_name(k)); });
  CsvWriter csv(split_csv_line(kPruneCsvHeader));
  for (const PruneRound& r : rounds) {
    const int64_t kept = r.heads_total(), pruned = static_cast<int64_t>(r.pruned.size());
    const EvalStats& m = r.metric;
    csv.row({prune_strategy_name(options.strategy), std::to_string(options.seed),
             // For l0 the fine-tuning is the L0 run itself: finetune_steps reports its steps.
             std::to_string(l0 ? options.l0_steps : options.finetune_steps), options.recompute ? "1" : "0",
             l0 ? csv_number("%g", options.lambda) : "", std::to_string(r.round), std::to_string(pruned),
             csv_number("%.6g", static_cast<double>(pruned) / static_cast<double>(pruned + kept)), std::to_string(kept),
             joined(r.heads_per_site, [](int64_t c) { return std::to_string(c); }), csv_number("%.9g", m.loss),
             m.accuracy >= 0 ? csv_number("%.9g", m.accuracy) : "",
             m.bits_per_byte >= 0 ? csv_number("%.9g", m.bits_per_byte) : "",
             joined(r.pruned, [](const SiteHead& x) { return std::to_string(x.site) + ":" + std::to_string(x.head); }),
             only, r.bleu >= 0 ? csv_number("%.4f", r.bleu) : "", r.chrf >= 0 ? csv_number("%.4f", r.chrf) : "",
             l0 ? l0_penalty_name(options.l0_penalty) : ""});
  }
  return csv.text();
}

std::string prune_run_name(const PruneOptions& options) {
  const bool l0 = options.strategy == PruneStrategy::l0;
  std::string name = prune_strategy_name(options.strategy);
  for (AttentionKind k : options.only) name.append("_").append(attention_kind_name(k));
  if (!l0 && options.finetune_steps > 0) name += "_ft" + std::to_string(options.finetune_steps);
  if (!l0 && options.recompute) name += "_recompute";
  if (options.strategy == PruneStrategy::random || options.finetune_steps > 0 || l0)
    name += "_seed" + std::to_string(options.seed);
  if (l0) name += "_lambda" + csv_number("%g", options.lambda);
  if (l0 && options.l0_penalty != PruneOptions{}.l0_penalty)
    name.append("_penalty_").append(l0_penalty_name(options.l0_penalty));
  if (l0 && options.l0_freeze) name += "_frozen";
  return name;
}

}  // namespace headlab
