// Per-head analysis: what each attention head does and how much the model needs it, measured
// over N batches of a data split (deterministic: batch i of the split, in order).
//   importance   Michel et al. 2019: I_h = E_x |dL(x)/dxi_h|, one gradient per example x
//                (L(x) = the example's mean loss over its scored targets), raw and l2-normalised
//                per site (their default: per layer); and (ig_steps > 0) integrated gradients
//                along the gates' path from 0 (analysis/integrated_gradients.h);
//   ablation     change of the loss (and accuracy) when head h alone is gated to 0;
//   layer_only   (off by default) the same when h is the only head left on in its site (every
//                other head of the site gated to 0): Michel et al.'s Table 2, a layer reduced
//                to its best head;
//   attention    mean entropy, distance and confidence (Voita et al.) of each head's rows, mass
//                on delimiters, how often the most-attended token is a gold relation or the
//                rarest token, and the relative position it sits at most often (Voita et al.'s
//                positional heads); per relation, the best positional baseline and chance (a
//                data property); and from these each head's role (analysis/head_roles.h);
//   similarity   Jensen-Shannon distance between heads' rows on the same queries and keys, [N, N].
// The statistics underneath, on probability tensors, are in analysis/attention_stats.h.
// Heads are numbered by attention site (ModelSpec::attention_sites(), the gates' order: for
// decoder and encoder models site l is layer l; an encoder_decoder has its encoder's sites, then
// each decoder layer's self- and cross-attention): index(site, head) = (heads of the sites
// before) + head everywhere, which is site * n_heads + head unless sites differ in heads (a
// physically pruned model, nn/prune.h, or an encoder_decoder's three kinds); N = n_total() heads
// in all, head_label() names them. An encoder_decoder's three kinds get what applies to them
// (docs/analysis.md): encoder sites read the source, cross sites only entropy and confidence.
// The model's gates are restored and its gradient slabs left zeroed. A pruning loop calls
// analyze_heads() directly; `headlab analyze` writes the result with write_heads_csv/write_heads_h5.
//   HeadScores s = analyze_heads(model, *dataset, Split::val, 8, {.batch_size = 32});
//   double i = s.importance_normalized[s.index(site, head)];
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

struct AnalysisOptions {
  int64_t batch_size = 32;
  bool importance = true;
  bool ablation = true;     // one extra forward per head and batch: usually the costliest part
  bool layer_only = false;  // one more forward per head and batch: each head alone in its site
  bool attention = true;    // attention statistics and gold agreement
  bool similarity = true;   // JS matrix: N^2/2 pairs per query row
  // Per-example gate gradients come from one backward per batch (dL/dout . out / gate, split by
  // example); a head whose gate is 0 has out = 0, so any zero gate switches to one backward per
  // example. Set to force that slower path.
  bool importance_by_rows = false;
  // Points of the integrated-gradients path (analysis/integrated_gradients.h): one forward and
  // backward per batch and point; 0 = not measured.
  int64_t ig_steps = 0;
  // A token that marks padding in data without key_padding (Dataset::unkeyed_pad_token: grammar's
  // <pad>, sort's and reverse's PAD): query rows
  // holding it are left out of the attention statistics. -1 = none.
  int32_t pad_token = -1;
};

// Voita et al.'s positional baseline of a relation (a gold one, or the rare token): over the
// query rows the relation's agreement counts, the relative offset t - s at which its key sits
// most often (ties: smaller |offset|, then negative), and the share of those rows with a key
// there, i.e. the agreement of a head that always attends to that offset; and chance, the
// agreement of a head attending uniformly over each row's visible keys (the mean over rows of
// the share of visible keys that are the relation's). NaN when the data has no such relation.
struct PositionalBaseline {
  double agreement = std::numeric_limits<double>::quiet_NaN();
  double offset = std::numeric_limits<double>::quiet_NaN();
  double chance = std::numeric_limits<double>::quiet_NaN();
};

struct HeadScores {
  int64_t n_sites = 0, n_heads = 0;  // n_heads: of the widest site
  std::vector<int64_t>
      site_heads;  // heads of each site (when they differ, or layer_heads is set); empty = n_heads each
  // Each site's kind and layer within its stack (spec.attention_sites()); empty = `dec` sites
  // numbered as layers (scores built by hand).
  std::vector<AttentionSite> sites;
  int64_t n_batches = 0;
  int64_t n_examples = 0;    // examples with at least one scored target (the others are skipped)
  int64_t n_targets = 0;     // scored targets (tokens, or labels for the encoder)
  int64_t n_query_rows = 0;  // query rows the `dec` sites' attention statistics average over
  double loss = 0;           // unmasked model: mean loss over scored targets, as evaluate()
  double accuracy = -1;      // -1 when the task has no accuracy

  // One value per head (size N, in index() order); NaN where not measured or not applicable to the data.
  std::vector<double> gate;
  std::vector<double> importance, importance_normalized;
  // Integrated gradients of the loss from every head off to the model's gates (ig_steps > 0): the
  // attributions add up to ig_loss_change = L(gates) - L(all off) within ig_completeness_error.
  std::vector<double> integrated_gradients;
  int64_t ig_steps = 0;
  double ig_loss_change = std::numeric_limits<double>::quiet_NaN();
  double ig_completeness_error = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> ablation_loss_delta, ablation_accuracy_delta;      // masked - unmasked
  std::vector<double> layer_only_loss_delta, layer_only_accuracy_delta;  // h alone in its site - unmasked
  // Translation, in BLEU and chrF points (analysis/bleu_ablation.h: add_bleu_columns), and the
  // paired bootstrap's p of the BLEU change; NaN unless measured.
  std::vector<double> ablation_bleu_delta, ablation_chrf_delta, ablation_bleu_p;
  std::vector<double> layer_only_bleu_delta, layer_only_chrf_delta, layer_only_bleu_p;
  std::vector<double> entropy, distance, confidence, delimiter_mass;
  std::vector<double> previous_token_agreement, syntactic_head_agreement, dependent_agreement, antecedent_agreement,
      delimiter_agreement, rare_token_agreement;
  std::vector<double> positional_offset, positional_share;  // most frequent t - argmax, its share of rows
  std::vector<double> js_nearest;                           // smallest JS distance to another head of its kind
  // Rows each agreement was counted over (the binomial test of assign_roles needs n).
  std::vector<double> syntactic_head_rows, dependent_rows, rare_token_rows;
  // Cross heads as word aligners against the Strong's gold (analysis/alignment_heads.h:
  // add_alignment_columns); NaN unless measured and for other kinds.
  std::vector<double> alignment_aer, alignment_precision, alignment_recall;
  // Voita et al.'s roles (analysis/head_roles.h: assign_roles), bits; -1 = not assessed; empty =
  // never assigned (scores built by hand).
  std::vector<int> role;

  // Properties of the analysed data, not of a head (heads.h5 root attributes), counted on the
  // rows of baseline_kind's heads: dec in a one-stack model, the source (enc) in an encoder_decoder.
  PositionalBaseline syntactic_head_baseline, dependent_baseline, antecedent_baseline, rare_token_baseline;
  AttentionKind baseline_kind = AttentionKind::dec;

  // [N, N], symmetric, zero diagonal, NaN between heads whose maps do not share queries and keys
  // (different kinds); empty if not measured.
  std::vector<double> js_distance;

  // Per example, in split order (e = 0 .. n_examples-1), for paired tests over examples. The
  // accuracies are fractions of e's scored targets predicted right (tasks with an accuracy, else
  // empty), from the same forwards as the losses; weighted by example_n_targets they average
  // to `accuracy` (+ the head's delta), as the losses do to `loss`.
  std::vector<int64_t> example_n_targets;           // [E] scored targets of e
  std::vector<double> example_loss;                 // [E] mean loss of the unmasked model
  std::vector<double> example_accuracy;             // [E] fraction correct, or empty
  std::vector<double> example_gate_grad;            // [E, N] dL(x_e)/dxi_h, signed
  std::vector<double> example_ablation_loss;        // [N, E] loss of e with head h masked
  std::vector<double> example_ablation_accuracy;    // [N, E] fraction correct of e with head h masked
  std::vector<double> example_layer_only_loss;      // [N, E] loss of e with h alone on in its site
  std::vector<double> example_layer_only_accuracy;  // [N, E] fraction correct of e with h alone on

  int64_t heads_at(int64_t site) const { return site_heads.empty() ? n_heads : site_heads[site]; }
  int64_t first_head(int64_t site) const;  // index(site, 0)
  int64_t n_total() const { return first_head(n_sites); }
  int64_t index(int64_t site, int64_t head) const { return first_head(site) + head; }
  int64_t site_of(int64_t k) const;  // the site of head index k
  // The index of `head` of the site of that kind and layer; throws headlab::Error (`who`: the
  // caller, for the message) when the scores have no such head.
  int64_t index_of(AttentionSite site, int64_t head, const char* who) const;
  AttentionSite site(int64_t l) const { return sites.empty() ? AttentionSite{AttentionKind::dec, l} : sites[l]; }
  bool one_stack() const;  // every site is `dec` (a decoder or encoder model): short labels
};

// The per-head columns of heads.csv and heads.h5, in order, declared once.
struct HeadColumn {
  const char* name;
  std::vector<double> HeadScores::*values;
  const char* doc;
};
const std::vector<HeadColumn>& head_columns();
// The positional baselines and chances, written as heads.h5 attributes baseline_<relation>_agreement,
// baseline_<relation>_offset and chance_<relation>_agreement, in order, declared once.
struct BaselineField {
  const char* relation;  // "syntactic_head": the baseline of syntactic_head_agreement
  PositionalBaseline HeadScores::*baseline;
};
const std::vector<BaselineField>& positional_baselines();

// Head k's name (nn/model.h: head_label): "L1H0" in a one-stack model, "cross.L1H0" otherwise.
std::string head_label(const HeadScores& scores, int64_t k);

template <typename T>
HeadScores analyze_heads(Model<T>& model, const Dataset& dataset, Split split, int64_t n_batches,
                         const AnalysisOptions& options);

// Files of a run folder: heads.csv (layer,head,<head_columns()>,role,attention,label; attention =
// the site's kind, layer = within its stack, role = role_name, label = head_label; empty cell =
// NaN; one row per head of each site), heads_similarity.csv (the JS matrix, rows and columns named by head_label) and
// heads.h5 (per-head arrays [sites, n_heads], NaN where a site has fewer heads, with each site's
// kind and layer).
void write_heads_csv(const std::string& path, const HeadScores& scores);
void write_similarity_csv(const std::string& path, const HeadScores& scores);
struct HeadsFileInfo {  // provenance, stored as heads.h5 root attributes
  std::string checkpoint, split, config_toml;
  int64_t step = 0, batch_size = 0;
  // analyze --ffn with IG (units.csv has the attributions): how they add up, as the heads' ig_*
  // attributes; ffn_ig_steps 0 = not computed, no attributes.
  int64_t ffn_ig_steps = 0;
  double ffn_ig_loss_change = 0, ffn_ig_completeness_error = 0;
};
void write_heads_h5(const std::string& path, const HeadScores& scores, const HeadsFileInfo& info);

// One kind of attention's maps on one example: probs [L, H, Tq, Tk] row-major (H = the widest
// layer's heads; NaN rows for heads a layer lacks).
struct AttentionMaps {
  int64_t n_layers = 0, n_heads = 0, n_queries = 0, n_keys = 0;
  std::vector<int64_t> layer_heads;  // heads of each layer
  std::vector<double> probs;
  bool empty() const { return n_layers == 0; }
};

// The attention of every head on example `example` of the split, i.e. row example % batch_size
// of batch example / batch_size: the (decoder's) self-attention probs [L,H,T,T] row-major (H =
// n_heads, the widest layer's; NaN rows for heads a layer lacks), and that row as a batch of one.
// An encoder_decoder adds its encoder's self-attention [Le, He, S, S] and the cross-attention
// [L, Hc, T, S] (target queries, source keys); other kinds leave both empty.
struct AttentionExample {
  int64_t n_layers = 0, n_heads = 0, seq_len = 0;
  std::vector<int64_t> layer_heads;  // heads of each layer
  std::vector<double> probs;
  AttentionMaps encoder, cross;
  Batch row;
  // The self-attention fields as maps, for code that handles the three kinds alike (a copy).
  AttentionMaps self_attention() const { return {n_layers, n_heads, seq_len, seq_len, layer_heads, probs}; }
};
template <typename T>
AttentionExample attention_example(Model<T>& model, const Dataset& dataset, Split split, int64_t example,
                                   int64_t batch_size);
// The same for a sequence of the caller's (a prompt, TransformerLens' run_with_cache habit): row
// holds the tokens, targets = the next tokens (-1 at the end), no labels or gold fields; for an
// encoder_decoder, `source` is the source row (all real tokens) and tokens the target side.
template <typename T>
AttentionExample attention_on_tokens(Model<T>& model, const std::vector<int32_t>& tokens,
                                     const std::vector<int32_t>& source = {});

}  // namespace headlab
