// Names and files of a pruning run: strategy names, prune.csv, the default folder name.
#include <algorithm>
#include <string>
#include <vector>

#include "headlab/common/edit_distance.h"
#include "headlab/common/error.h"
#include "headlab/io/csv.h"
#include "headlab/prune/prune_loop.h"

namespace headlab {

namespace {

constexpr PruneStrategy kStrategies[] = {
    PruneStrategy::importance, PruneStrategy::importance_raw, PruneStrategy::integrated_gradients,
    PruneStrategy::magnitude,  PruneStrategy::random,         PruneStrategy::entropy,
    PruneStrategy::confidence, PruneStrategy::ablation,       PruneStrategy::l0,
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
    case PruneStrategy::magnitude:
      return "magnitude";
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

const char* prune_unit_name(PruneUnit unit) {
  if (unit.gates == GateKind::heads) return unit.whole ? "attention_layers" : "heads";
  return unit.whole ? "ffn_blocks" : "ffn";
}

PruneUnit parse_prune_unit(const std::string& name) {
  std::vector<std::string> choices;
  for (const PruneUnit u : {PruneUnit{GateKind::heads, false}, PruneUnit{GateKind::ffn_units, false},
                            PruneUnit{GateKind::heads, true}, PruneUnit{GateKind::ffn_units, true}}) {
    if (name == prune_unit_name(u)) return u;
    choices.push_back(prune_unit_name(u));
  }
  throw Error(unknown_choice("unit", name, choices));
}

const char* const kPruneCsvHeader =
    "strategy,seed,finetune_steps,recompute,lambda,round,heads_pruned,fraction_pruned,heads_kept,heads_per_layer,"
    "val_loss,val_accuracy,val_bpb,pruned_heads,only,val_bleu,val_chrf,l0_penalty,unit,units_pruned,units_kept,"
    "units_per_block,pruned_units,recover,distill_alpha,distill_temperature";

// The heads_* columns describe a heads run (pruned heads in pruning order), the units_* columns a
// --unit ffn run; fraction_pruned is of whichever was pruned. The other unit's columns are empty,
// but for its count kept per table (heads_per_layer, units_per_block), which every round reports.
// A whole-table run (attention_layers, ffn_blocks) fills its gates' columns (the heads or units
// of the tables removed) and its fraction_pruned is of the tables: emptied ones over all.
std::string prune_csv(const std::vector<PruneRound>& rounds, const PruneOptions& options) {
  const bool l0 = options.strategy == PruneStrategy::l0, ffn = options.unit == GateKind::ffn_units;
  const std::string only = joined(options.only, [](AttentionKind k) { return std::string(attention_kind_name(k)); });
  auto counts = [](const std::vector<int64_t>& c) { return joined(c, [](int64_t n) { return std::to_string(n); }); };
  auto listed = [](const std::vector<SiteHead>& p) {
    return joined(p, [](const SiteHead& x) { return std::to_string(x.site) + ":" + std::to_string(x.head); });
  };
  CsvWriter csv(split_csv_line(kPruneCsvHeader));
  const std::string unit = prune_unit_name({options.unit, options.whole});
  for (const PruneRound& r : rounds) {
    const int64_t kept = ffn ? r.units_total() : r.heads_total(), pruned = static_cast<int64_t>(r.pruned.size());
    const std::vector<int64_t>& per_table = ffn ? r.units_per_block : r.heads_per_site;
    const auto tables = static_cast<double>(per_table.size()),
               emptied = static_cast<double>(std::count(per_table.begin(), per_table.end(), 0));
    const double fraction =
        options.whole ? emptied / tables : static_cast<double>(pruned) / static_cast<double>(pruned + kept);
    const std::string n_pruned = std::to_string(pruned), n_kept = std::to_string(kept);
    const EvalStats& m = r.metric;
    csv.row({prune_strategy_name(options.strategy), std::to_string(options.seed),
             // For l0 the fine-tuning is the L0 run itself: finetune_steps reports its steps.
             std::to_string(l0 ? options.l0_steps : options.finetune_steps), options.recompute ? "1" : "0",
             l0 ? csv_number("%g", options.lambda) : "", std::to_string(r.round), ffn ? "" : n_pruned,
             csv_number("%.6g", fraction), ffn ? "" : n_kept, counts(r.heads_per_site), csv_number("%.9g", m.loss),
             m.accuracy >= 0 ? csv_number("%.9g", m.accuracy) : "",
             m.bits_per_byte >= 0 ? csv_number("%.9g", m.bits_per_byte) : "", ffn ? "" : listed(r.pruned), only,
             r.bleu >= 0 ? csv_number("%.4f", r.bleu) : "", r.chrf >= 0 ? csv_number("%.4f", r.chrf) : "",
             l0 ? l0_penalty_name(options.l0_penalty) : "", unit, ffn ? n_pruned : "", ffn ? n_kept : "",
             counts(r.units_per_block), ffn ? listed(r.pruned) : "", options.distill ? "distill" : "finetune",
             options.distill ? csv_number("%g", options.distill_alpha) : "",
             options.distill ? csv_number("%g", options.distill_temperature) : ""});
  }
  return csv.text();
}

std::string prune_run_name(const PruneOptions& options) {
  const bool l0 = options.strategy == PruneStrategy::l0;
  std::string name = prune_strategy_name(options.strategy);
  if (options.whole || options.unit == GateKind::ffn_units)
    name.append("_").append(options.whole ? prune_unit_name({options.unit, true}) : "ffn");
  for (AttentionKind k : options.only) name.append("_").append(attention_kind_name(k));
  if (!l0 && options.finetune_steps > 0) name += "_ft" + std::to_string(options.finetune_steps);
  if (options.distill) name += "_distill";
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
