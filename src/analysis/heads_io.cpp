// The per-head column table and the files `headlab analyze` writes (docs/analysis.md):
//   heads.csv             layer,head,<one column per head_columns() entry>,role,attention,label;
//                         NaN = empty cell
//   heads_similarity.csv  head,L0H0,L0H1,...  one row per head: the JS distance matrix
//   heads.h5              heads/<column> float64 [sites,H], similarity/js_distance [N, N],
//                         examples/... per-example arrays (losses, and accuracies where the
//                         task has one, unmasked and per masked head), site_layer [sites] and the
//                         site_kinds attribute, provenance and the positional baselines
//                         (baseline_<relation>_agreement, _offset, chance_<relation>_agreement),
//                         as root attributes; heads/role the roles' bits
// N heads in all, numbered by attention site (for decoder and encoder models a site is a layer,
// so [sites, H] is the [L, H] it always was); when sites differ in heads (a pruned model, an
// encoder_decoder's kinds) H is the widest site's, the [.., sites, H, ..] arrays hold NaN for the
// heads a site lacks and heads.h5 adds layer_heads [sites].
#include <cmath>
#include <string>
#include <utility>

#include "headlab/analysis/head_roles.h"
#include "headlab/analysis/heads.h"
#include "headlab/common/files.h"
#include "headlab/common/error.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"

namespace headlab {

const std::vector<HeadColumn>& head_columns() {
  static const std::vector<HeadColumn> columns = {
      {"gate", &HeadScores::gate, "the head's gate in the checkpoint (0 = pruned)"},
      {"importance", &HeadScores::importance, "E_x |dL(x)/dgate| (Michel et al.), nats"},
      {"importance_normalized", &HeadScores::importance_normalized, "importance / l2 norm of its layer's importances"},
      {"ablation_loss_delta", &HeadScores::ablation_loss_delta, "loss with this head alone masked - loss, nats"},
      {"ablation_accuracy_delta", &HeadScores::ablation_accuracy_delta, "accuracy masked - accuracy (tasks with one)"},
      {"layer_only_loss_delta", &HeadScores::layer_only_loss_delta,
       "loss with every other head of the layer masked - loss, nats (--layer-only)"},
      {"layer_only_accuracy_delta", &HeadScores::layer_only_accuracy_delta,
       "accuracy with every other head of the layer masked - accuracy (--layer-only)"},
      {"entropy", &HeadScores::entropy, "mean entropy of the attention rows, nats"},
      {"distance", &HeadScores::distance, "mean sum_s A[t,s] |t-s|, tokens"},
      {"confidence", &HeadScores::confidence, "mean max_s A[t,s] (Voita et al.)"},
      {"delimiter_mass", &HeadScores::delimiter_mass, "mean attention on delimiter tokens (tasks with delimiters)"},
      {"previous_token_agreement", &HeadScores::previous_token_agreement, "fraction of rows whose argmax is t-1"},
      {"positional_offset", &HeadScores::positional_offset,
       "the most frequent t - argmax over rows (Voita et al.'s positional heads; < 0: a later key)"},
      {"positional_share", &HeadScores::positional_share, "fraction of rows whose argmax is at positional_offset"},
      {"syntactic_head_agreement", &HeadScores::syntactic_head_agreement, "argmax is the gold syntactic head"},
      {"dependent_agreement", &HeadScores::dependent_agreement, "argmax is a gold dependent of t"},
      {"antecedent_agreement", &HeadScores::antecedent_agreement, "argmax is gold_antecedent (pronouns)"},
      {"delimiter_agreement", &HeadScores::delimiter_agreement, "argmax is a delimiter"},
      {"rare_token_agreement", &HeadScores::rare_token_agreement,
       "argmax holds the visible token rarest in the training split (Voita et al.)"},
      {"js_nearest", &HeadScores::js_nearest, "smallest JS distance to another head, in [0, 1]"},
      // Last, so that the columns before keep their places in older readers.
      {"ablation_bleu_delta", &HeadScores::ablation_bleu_delta,
       "corpus BLEU with this head alone masked - BLEU (translation, --bleu), points"},
      {"ablation_chrf_delta", &HeadScores::ablation_chrf_delta, "the same in chrF (--bleu), points"},
      {"ablation_bleu_p", &HeadScores::ablation_bleu_p,
       "paired bootstrap p of ablation_bleu_delta over sentences (Koehn 2004; --bleu)"},
      {"layer_only_bleu_delta", &HeadScores::layer_only_bleu_delta,
       "BLEU with every other head of the site masked - BLEU (--bleu --layer-only), points"},
      {"layer_only_chrf_delta", &HeadScores::layer_only_chrf_delta, "the same in chrF (--bleu --layer-only)"},
      {"layer_only_bleu_p", &HeadScores::layer_only_bleu_p, "paired bootstrap p of layer_only_bleu_delta"},
      {"syntactic_head_rows", &HeadScores::syntactic_head_rows, "rows syntactic_head_agreement counts"},
      {"dependent_rows", &HeadScores::dependent_rows, "rows dependent_agreement counts"},
      {"rare_token_rows", &HeadScores::rare_token_rows, "rows rare_token_agreement counts"},
      {"alignment_aer", &HeadScores::alignment_aer,
       "cross heads: alignment error rate against the Strong's gold (--alignment)"},
      {"alignment_precision", &HeadScores::alignment_precision, "cross heads: alignment precision (--alignment)"},
      {"alignment_recall", &HeadScores::alignment_recall, "cross heads: alignment recall (--alignment)"},
      {"integrated_gradients", &HeadScores::integrated_gradients,
       "integrated gradients of the loss along the gates' path from 0 (Sundararajan et al.; --ig-steps), nats; "
       "< 0: the head lowers the loss"},
  };
  return columns;
}

const std::vector<BaselineField>& positional_baselines() {
  static const std::vector<BaselineField> baselines = {
      {"syntactic_head", &HeadScores::syntactic_head_baseline},
      {"dependent", &HeadScores::dependent_baseline},
      {"antecedent", &HeadScores::antecedent_baseline},
      {"rare_token", &HeadScores::rare_token_baseline},
  };
  return baselines;
}

namespace {

std::string format_value(double v) {  // NaN (not measured) is an empty cell; counts in full
  if (std::isnan(v)) return "";
  return std::abs(v) < 1e15 && v == std::round(v) ? csv_number("%.0f", v) : csv_number("%.6g", v);
}

std::string role_of(const HeadScores& s, int64_t k) {
  return k < static_cast<int64_t>(s.role.size()) ? role_name(s.role[static_cast<size_t>(k)]) : "";
}

// Values laid out [outer, N, inner] in head order as [outer, sites, H, inner], NaN where site l
// has fewer than H heads (the same values when every site has H).
std::vector<double> by_site(const HeadScores& s, const std::vector<double>& values, int64_t outer, int64_t inner) {
  const int64_t L = s.n_sites, H = s.n_heads, N = s.n_total();
  std::vector<double> out(static_cast<size_t>(outer * L * H * inner), std::nan(""));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < s.heads_at(l); ++h)
        for (int64_t i = 0; i < inner; ++i)
          out[((o * L + l) * H + h) * inner + i] = values[(o * N + s.index(l, h)) * inner + i];
  return out;
}

}  // namespace

std::string head_label(const HeadScores& s, int64_t k) {
  const int64_t site = s.site_of(k);
  return head_label(s.site(site), k - s.first_head(site), s.one_stack());
}

void write_heads_csv(const std::string& path, const HeadScores& s) {
  // The label columns go last, so that readers of the older layer,head,<columns> keep their places.
  std::vector<std::string> header = {"layer", "head"};
  for (const HeadColumn& c : head_columns()) header.push_back(c.name);
  header.insert(header.end(), {"role", "attention", "label"});
  CsvWriter csv(header);
  for (int64_t l = 0; l < s.n_sites; ++l)
    for (int64_t h = 0; h < s.heads_at(l); ++h) {
      const AttentionSite site = s.site(l);
      std::vector<std::string> fields = {std::to_string(site.layer), std::to_string(h)};
      for (const HeadColumn& c : head_columns()) fields.push_back(format_value((s.*c.values)[s.index(l, h)]));
      fields.insert(fields.end(),
                    {role_of(s, s.index(l, h)), attention_kind_name(site.kind), head_label(s, s.index(l, h))});
      csv.row(fields);
    }
  write_file_atomically(path, csv.text());
}

void write_similarity_csv(const std::string& path, const HeadScores& s) {
  const int64_t N = s.n_total();
  HEADLAB_CHECK(static_cast<int64_t>(s.js_distance.size()) == N * N,
                "analyze: no similarity matrix to write (" << s.js_distance.size() << " values for " << N << " heads)");
  std::vector<std::string> header = {"head"};
  for (int64_t j = 0; j < N; ++j) header.push_back(head_label(s, j));
  CsvWriter csv(header);
  for (int64_t i = 0; i < N; ++i) {
    std::vector<std::string> fields = {head_label(s, i)};
    for (int64_t j = 0; j < N; ++j) fields.push_back(format_value(s.js_distance[i * N + j]));
    csv.row(fields);
  }
  write_file_atomically(path, csv.text());
}

void write_heads_h5(const std::string& path, const HeadScores& s, const HeadsFileInfo& info) {
  const int64_t L = s.n_sites, H = s.n_heads, N = s.n_total(), E = s.n_examples;
  CheckpointWriter w(FileKind::heads);
  for (const HeadColumn& c : head_columns())
    w.add_array("heads/" + std::string(c.name), by_site(s, s.*c.values, 1, 1).data(), {L, H});
  if (static_cast<int64_t>(s.role.size()) == N) {  // role bits as a float64 column: NaN = no role assessed
    std::vector<double> role;
    for (int r : s.role) role.push_back(r < 0 ? std::nan("") : static_cast<double>(r));
    w.add_array("heads/role", by_site(s, role, 1, 1).data(), {L, H});
  }
  if (!s.site_heads.empty()) w.add_array("layer_heads", s.site_heads);  // the name readers know
  std::vector<int64_t> site_layer;
  std::string site_kinds;  // "enc,enc,dec,cross,..." (HDF5 attributes hold no list of strings here)
  for (int64_t l = 0; l < L; ++l) {
    site_layer.push_back(s.site(l).layer);
    if (l > 0) site_kinds += ',';
    site_kinds += attention_kind_name(s.site(l).kind);
  }
  w.add_array("site_layer", site_layer);
  if (static_cast<int64_t>(s.js_distance.size()) == N * N)
    w.add_array("similarity/js_distance", s.js_distance.data(), {N, N});
  if (E > 0) {
    w.add_array("examples/loss", s.example_loss.data(), {E});
    if (static_cast<int64_t>(s.example_n_targets.size()) == E) w.add_array("examples/n_targets", s.example_n_targets);
    if (static_cast<int64_t>(s.example_accuracy.size()) == E)
      w.add_array("examples/accuracy", s.example_accuracy.data(), {E});
    if (static_cast<int64_t>(s.example_gate_grad.size()) == E * N)
      w.add_array("examples/gate_grad", by_site(s, s.example_gate_grad, E, 1).data(), {E, L, H});
    // [L, H, E] per head; the accuracies only for tasks with one (as examples/accuracy).
    const std::pair<const char*, const std::vector<double>*> per_head[] = {
        {"examples/ablation_loss", &s.example_ablation_loss},
        {"examples/ablation_accuracy", &s.example_ablation_accuracy},
        {"examples/layer_only_loss", &s.example_layer_only_loss},
        {"examples/layer_only_accuracy", &s.example_layer_only_accuracy}};
    for (const auto& [name, values] : per_head)
      if (static_cast<int64_t>(values->size()) == N * E) w.add_array(name, by_site(s, *values, 1, E).data(), {L, H, E});
  }
  w.set_string_attr("contents", "head analysis (headlab analyze)");
  w.set_string_attr("checkpoint", info.checkpoint);
  w.set_string_attr("split", info.split);
  w.set_string_attr("config", info.config_toml);
  w.set_int_attr("step", info.step);
  w.set_int_attr("batch_size", info.batch_size);
  w.set_int_attr("n_layers", L);  // sites: layers in a one-stack model
  w.set_int_attr("n_heads", H);
  w.set_string_attr("site_kinds", site_kinds);
  w.set_int_attr("n_batches", s.n_batches);
  w.set_int_attr("n_examples", E);
  w.set_int_attr("n_targets", s.n_targets);
  w.set_int_attr("n_query_rows", s.n_query_rows);
  w.set_double_attr("loss", s.loss);
  if (s.ig_steps > 0) {
    w.set_int_attr("ig_steps", s.ig_steps);
    w.set_double_attr("ig_loss_change", s.ig_loss_change);
    w.set_double_attr("ig_completeness_error", s.ig_completeness_error);
  }
  if (info.ffn_ig_steps > 0) {
    w.set_int_attr("ffn_ig_steps", info.ffn_ig_steps);
    w.set_double_attr("ffn_ig_loss_change", info.ffn_ig_loss_change);
    w.set_double_attr("ffn_ig_completeness_error", info.ffn_ig_completeness_error);
  }
  w.set_double_attr("accuracy", s.accuracy);
  for (const BaselineField& f : positional_baselines()) {
    const std::string prefix = std::string("baseline_") + f.relation;
    w.set_double_attr(prefix + "_agreement", (s.*f.baseline).agreement);
    w.set_double_attr(prefix + "_offset", (s.*f.baseline).offset);
    w.set_double_attr(std::string("chance_") + f.relation + "_agreement", (s.*f.baseline).chance);
  }
  w.set_string_attr("baseline_attention", attention_kind_name(s.baseline_kind));
  w.set_string_attr("role_bits", role_bits());
  w.commit(path);
}

}  // namespace headlab
