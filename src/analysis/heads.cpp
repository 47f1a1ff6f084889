// analyze_heads: one pass over N batches of a split. Per batch:
//   1. the unmasked model, attention probabilities kept: per-example losses (and accuracies),
//      attention statistics and JS distances; with a backward, the per-example gate gradients;
//   2. (a gate is 0, or importance_by_rows) one forward + backward per example instead;
//   3. (ablation) per head, the model with that head's gate set to 0;
//   4. (layer_only) per head, the model with every other head of its site set to 0;
//   3 and 4 give per-example losses and accuracies from the logits of one forward each;
//   both rerun only the sites from the masked one on (nn/saved_forward.h).
// Heads are numbered by attention site (spec.attention_sites(), one gate table each), so the
// same code covers a decoder's layers and an encoder_decoder's encoder, self and cross sites.
// Per-example gate gradients from one backward: the loss of a batch is the mean over its N
// scored targets, L = (1/N) sum_b N_b L_b, with L_b the mean over example b's N_b targets. A
// site's attention output is out[b,t,h,:] = xi_h (A v)[b,t,h,:] (t over the site's queries:
// source positions for an encoder site), and examples do not interact (no batch statistics
// anywhere in the model), so
//   dL_b/dxi_h = (N / N_b) sum_{t,d} dL/dout[b,t,h,d] * out[b,t,h,d] / xi_h.
// That needs xi_h != 0; a zero gate falls back to one backward per example, where the gates'
// own gradient is dL_b/dxi directly.
#include <algorithm>
#include <cmath>
#include <limits>

#include "headlab/analysis/heads.h"
#include "headlab/analysis/attention_stats.h"
#include "headlab/analysis/head_roles.h"
#include "headlab/analysis/integrated_gradients.h"
#include "headlab/common/error.h"
#include "headlab/data/model_input.h"
#include "headlab/nn/saved_forward.h"
#include "headlab/ops/attention.h"
#include "headlab/ops/cross_entropy.h"

namespace headlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Loss sum, scored targets and correct predictions of each example, from a forward's logits
// (decoder [B*T, V], encoder [B, n_classes]).
template <typename T>
void example_stats(const Model<T>& model, const Tensor<T>& logits, const ModelInput& in,
                   std::vector<CrossEntropyStats>& out) {
  const int64_t per_example = model_kind_info(model.spec().kind).lm_head ? in.seq_len : 1;
  out.resize(static_cast<size_t>(in.batch_size));
  for (int64_t b = 0; b < in.batch_size; ++b)
    out[static_cast<size_t>(b)] =
        cross_entropy_stats(logits.narrow(0, b * per_example, per_example), in.targets + b * per_example, -1);
}

// Query rows the attention statistics count: real tokens of scored examples that see at least
// two keys (a row with a single visible key, like a decoder's first token, says nothing about
// the head). `tokens`/`padding` are the queries' side [B, T]; `pad_token` marks padding in data
// without key_padding (-1 = none); keys are the queries' own (causal or not), or with
// `key_padding` of another sequence [B, key_len] (cross-attention: the real source tokens).
void mark_query_rows(int64_t B, int64_t T_, const int32_t* tokens, const std::vector<uint8_t>& padding, bool causal,
                     int32_t pad_token, const std::vector<CrossEntropyStats>& examples, std::vector<uint8_t>& rows,
                     const std::vector<uint8_t>* key_padding = nullptr, int64_t key_len = 0) {
  rows.assign(static_cast<size_t>(B * T_), 0);
  for (int64_t b = 0; b < B; ++b) {
    if (examples[static_cast<size_t>(b)].n_valid == 0) continue;
    auto real = [&](int64_t t) {
      return (padding.empty() || padding[b * T_ + t] != 0) && tokens[b * T_ + t] != pad_token;
    };
    int64_t total = 0;
    for (int64_t t = 0; t < T_; ++t) total += real(t);
    int64_t other_keys = 0;
    if (key_padding != nullptr)
      for (int64_t s = 0; s < key_len; ++s) other_keys += key_padding->empty() || (*key_padding)[b * key_len + s] != 0;
    int64_t seen = 0;
    for (int64_t t = 0; t < T_; ++t) {
      seen += real(t);
      const int64_t keys = key_padding != nullptr ? other_keys : causal ? seen : total;
      rows[b * T_ + t] = real(t) && keys >= 2;
    }
  }
}

// An example's fraction of scored targets predicted right (n_valid > 0).
double fraction_correct(const CrossEntropyStats& e) {
  return static_cast<double>(e.n_correct) / static_cast<double>(e.n_valid);
}

// Which heads of the site a masked forward gates to 0:
//   head_off:  head h alone (ablation);
//   head_only: every head of the site but h (Michel et al.'s Table 2: the layer reduced to one
//              head). A head already gated 0 stays 0 either way.
enum class SiteMask { head_off, head_only };

bool masked_by(SiteMask mask, int64_t g, int64_t head) {
  return (mask == SiteMask::head_off) == (g == head);
}

// Sums over batches of the per-head masked forwards of one kind (ablation or layer_only).
struct MaskedSums {
  std::vector<double> loss, correct;                                // [N] over scored targets
  std::vector<std::vector<double>> example_loss, example_accuracy;  // [N][E]; accuracy: tasks with one
  bool accuracy = false;
  MaskedSums(int64_t n_heads, bool has_accuracy)
      : loss(static_cast<size_t>(n_heads)),
        correct(static_cast<size_t>(n_heads)),
        example_loss(static_cast<size_t>(n_heads)),
        example_accuracy(static_cast<size_t>(has_accuracy ? n_heads : 0)),
        accuracy(has_accuracy) {}
};

// The gates of site `site` with the heads where off[h] set to 0.
// One masked forward per head, site_of(k)'s heads gated as `mask` says, on the batch whose
// unmasked forward gave `unmasked` and `saved`. A mask that gates no head with a nonzero gate
// changes nothing, so its forward is the unmasked one and is not run. Each restarts from the
// masked site (forward_from, bit-identical to the whole forward; an encoder_decoder's decoder
// sites keep the encoder's output).
template <typename T>
void masked_forwards(Model<T>& model, Tape<T>& tape, const ModelInput& in, const HeadScores& s, SiteMask mask,
                     const SavedForward<T>& saved, const std::vector<CrossEntropyStats>& unmasked,
                     std::vector<CrossEntropyStats>& scratch, MaskedSums& sums) {
  NoGradGuard<T> no_grad(tape);
  ModelInput logits_only = in;  // the per-example stats come from the logits: no batch loss needed
  logits_only.targets = nullptr;
  std::vector<uint8_t> off;
  for (int64_t l = 0; l < s.n_sites; ++l) {
    const int64_t H = s.heads_at(l);
    for (int64_t h = 0; h < H; ++h) {
      bool changes = false;
      off.assign(static_cast<size_t>(H), 0);
      for (int64_t g = 0; g < H; ++g) {
        off[g] = masked_by(mask, g, h);
        changes = changes || (off[g] && s.gate[s.index(l, g)] != 0);
      }
      const std::vector<CrossEntropyStats>* stats = &unmasked;
      if (changes) {
        const Var<T> memory = saved.memory().empty() ? Var<T>{} : tape.constant(saved.memory());
        const ModelOutput<T> m =
            model.forward_from(tape, logits_only, l, tape.constant(saved.site_input(l)),
                               tape.constant(saved.attention_without(tape.arena(), l, off)), memory);
        example_stats(model, m.logits.value(), in, scratch);
        tape.reset();
        stats = &scratch;
      }
      const int64_t k = s.index(l, h);
      for (const CrossEntropyStats& e : *stats) {
        if (e.n_valid == 0) continue;
        sums.loss[k] += e.loss_sum;
        sums.correct[k] += static_cast<double>(e.n_correct);
        sums.example_loss[k].push_back(e.mean_loss());
        if (sums.accuracy) sums.example_accuracy[k].push_back(fraction_correct(e));
      }
    }
  }
}

// The masked - unmasked columns and the [N, E] per-example losses and accuracies from the sums.
void finish_masked(const MaskedSums& sums, const HeadScores& s, std::vector<double>& loss_delta,
                   std::vector<double>& accuracy_delta, std::vector<double>& example_loss,
                   std::vector<double>& example_accuracy) {
  const double n_targets = static_cast<double>(s.n_targets);
  for (int64_t k = 0; k < s.n_total(); ++k) {
    loss_delta[k] = sums.loss[k] / n_targets - s.loss;
    example_loss.insert(example_loss.end(), sums.example_loss[k].begin(), sums.example_loss[k].end());
    if (!sums.accuracy) continue;
    accuracy_delta[k] = sums.correct[k] / n_targets - s.accuracy;
    example_accuracy.insert(example_accuracy.end(), sums.example_accuracy[k].begin(), sums.example_accuracy[k].end());
  }
}

// The attention statistics of one kind of site on a batch: what its maps' queries and keys are,
// which query rows count, and the sites of the kind (their maps share queries and keys, so JS
// distances are taken among them only).
struct KindGroup {
  AttentionBatchInfo info;
  std::vector<uint8_t> query_rows;
  std::vector<int64_t> sites, first_slots;
};

}  // namespace

int64_t HeadScores::first_head(int64_t site) const {
  if (site_heads.empty()) return site * n_heads;
  int64_t k = 0;
  for (int64_t l = 0; l < site; ++l) k += site_heads[l];
  return k;
}

int64_t HeadScores::site_of(int64_t k) const {
  int64_t l = 0;
  while (l + 1 < n_sites && first_head(l + 1) <= k) ++l;
  return l;
}

int64_t HeadScores::index_of(AttentionSite site, int64_t head, const char* who) const {
  for (int64_t l = 0; l < n_sites; ++l)
    if (this->site(l).kind == site.kind && this->site(l).layer == site.layer) {
      HEADLAB_CHECK(head >= 0 && head < heads_at(l), who << ": head " << head_label(site, head, false)
                                                         << " is not in the head analysis (" << heads_at(l)
                                                         << " heads at that site): not the same model");
      return index(l, head);
    }
  throw Error(std::string(who) + ": no site " + attention_kind_name(site.kind) + ".L" + std::to_string(site.layer) +
              " in the head analysis: not the same model");
}

bool HeadScores::one_stack() const {
  return std::all_of(sites.begin(), sites.end(), [](const AttentionSite& a) { return a.kind == AttentionKind::dec; });
}

template <typename T>
HeadScores analyze_heads(Model<T>& model, const Dataset& dataset, Split split, int64_t n_batches,
                         const AnalysisOptions& options) {
  const ModelSpec& spec = model.spec();
  const std::vector<AttentionSite> sites = spec.attention_sites();
  const auto L = static_cast<int64_t>(sites.size());
  const int64_t B = options.batch_size;
  HEADLAB_CHECK(B > 0, "analyze: batch_size=" << B << " must be positive");
  for (int64_t l = 0; l < L; ++l)  // its forward has no attention output there to score
    HEADLAB_CHECK(spec.heads_at_site(sites[static_cast<size_t>(l)]) > 0,
                  "analyze: attention layer " << gate_table_label(spec, GateKind::heads, l)
                                              << " was removed whole (model.layer_heads 0); analyze the masked "
                                                 "checkpoint it came from (prune's pruned.h5) instead");
  n_batches = dataset.batches_to_score(split, n_batches, B, "analyze");
  const bool causal = model_kind_info(spec.kind).causal;
  const bool has_accuracy = dataset.has_accuracy();

  HeadScores s;
  s.n_sites = L;
  s.sites = sites;
  for (const AttentionSite& site : sites) s.n_heads = std::max(s.n_heads, spec.attention_shape(site).heads);
  // A one-stack model lists its layers' heads when the spec does (a pruned model); an
  // encoder_decoder when its sites differ in heads.
  for (const AttentionSite& site : sites)
    if (!spec.layer_heads.empty() || spec.attention_shape(site).heads != s.n_heads) {
      for (const AttentionSite& each : sites) s.site_heads.push_back(spec.attention_shape(each).heads);
      break;
    }
  const int64_t N = s.n_total();
  s.n_batches = n_batches;
  // The data's baselines are counted on one kind's rows: the source's in an encoder_decoder (the
  // encoder heads Voita et al. give roles to), else the only stack's.
  s.baseline_kind = model_kind_info(spec.kind).source ? AttentionKind::enc : AttentionKind::dec;
  for (auto& column : head_columns()) (s.*column.values).assign(static_cast<size_t>(N), kNaN);
  bool zero_gate = false;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < s.heads_at(l); ++h) {
      const double g = static_cast<double>(model.gates().value(static_cast<int>(l))(h));
      s.gate[s.index(l, h)] = g;
      zero_gate = zero_gate || g == 0;
    }
  const bool by_rows = options.importance && (options.importance_by_rows || zero_gate);

  Arena arena;
  Tape<T> tape(arena);
  Batch batch = dataset.make_batch(B);
  AttentionSums sums(N);
  // One group per kind present, in AttentionKind order.
  std::vector<KindGroup> groups;
  for (const AttentionKind kind : {AttentionKind::enc, AttentionKind::dec, AttentionKind::cross}) {
    KindGroup g;
    for (int64_t l = 0; l < L; ++l)
      if (sites[l].kind == kind) g.sites.push_back(l), g.first_slots.push_back(s.index(l, 0));
    if (!g.sites.empty()) groups.push_back(std::move(g));
  }
  std::vector<CrossEntropyStats> examples, masked;
  MaskedSums ablation(options.ablation ? N : 0, has_accuracy), layer_only(options.layer_only ? N : 0, has_accuracy);
  SavedForward<T> unmasked;  // the unmasked forward of the batch, for the masked ones
  std::vector<Tensor<T>> probs;
  std::vector<double> importance_sum(static_cast<size_t>(N)), batch_grad;
  // Rare tokens are rare in the training split, whichever split is analysed.
  const std::vector<int64_t> token_counts = options.attention ? dataset.train_token_counts() : std::vector<int64_t>{};
  double loss_sum = 0;
  int64_t n_correct = 0;

  for (int64_t i = 0; i < n_batches; ++i) {
    dataset.fill_batch(split, i, batch);  // B rows, or fewer in a token-budget batch
    const ModelInput in = model_input(model.spec(), batch);

    // 1. The unmasked model (with a backward when the gradients come from this pass).
    const bool backward = options.importance && !by_rows;
    tape.set_grad_enabled(backward);
    ForwardOptions forward;
    forward.keep_probs = options.attention || options.similarity;
    ModelOutput<T> out = model.forward(tape, in, forward);
    example_stats(model, out.logits.value(), in, examples);
    if (options.ablation || options.layer_only) unmasked.save(model);
    int64_t batch_targets = 0;
    for (const CrossEntropyStats& e : examples) {
      batch_targets += e.n_valid;
      if (e.n_valid == 0) continue;
      loss_sum += e.loss_sum;
      n_correct += e.n_correct;
      s.example_n_targets.push_back(e.n_valid);
      s.example_loss.push_back(e.mean_loss());
      if (has_accuracy) s.example_accuracy.push_back(fraction_correct(e));
    }
    s.n_targets += batch_targets;
    if (options.attention || options.similarity) {
      for (KindGroup& g : groups) {
        const AttentionKind kind = sites[g.sites[0]].kind;
        AttentionBatchInfo& info = g.info;
        info = {};
        info.batch_size = batch.batch_size;
        if (kind == AttentionKind::enc) {
          // The encoder's queries and keys are the source: bidirectional over its real tokens.
          info.seq_len = batch.source_len;
          info.causal = false;
          mark_query_rows(batch.batch_size, batch.source_len, batch.source_tokens.data(), batch.source_padding, false,
                          -1, examples, g.query_rows);
          info.key_padding = batch.source_padding.empty() ? nullptr : batch.source_padding.data();
          info.tokens = batch.source_tokens.data();
        } else {
          info.seq_len = batch.seq_len;
          info.causal = causal;
          const bool cross = kind == AttentionKind::cross;
          if (cross) info.key_len = batch.source_len;
          mark_query_rows(batch.batch_size, batch.seq_len, batch.tokens.data(), batch.key_padding, causal,
                          options.pad_token, examples, g.query_rows, cross ? &batch.source_padding : nullptr,
                          batch.source_len);
          if (!cross) {  // the gold fields and tokens describe the target side, the keys' too
            info.key_padding = batch.key_padding.empty() ? nullptr : batch.key_padding.data();
            info.gold_head = batch.gold_head.empty() ? nullptr : batch.gold_head.data();
            info.gold_antecedent = batch.gold_antecedent.empty() ? nullptr : batch.gold_antecedent.data();
            info.is_delimiter = batch.is_delimiter.empty() ? nullptr : batch.is_delimiter.data();
            info.tokens = batch.tokens.data();
          }
        }
        info.query_rows = g.query_rows.data();
        if (info.tokens != nullptr && !token_counts.empty()) {
          info.token_counts = token_counts.data();
          info.vocab_size = static_cast<int64_t>(token_counts.size());
        }
        probs.clear();
        for (int64_t l : g.sites) probs.push_back(attention_probs(model.attention_outputs()[l]));
        if (options.attention) {
          for (size_t j = 0; j < g.sites.size(); ++j)
            accumulate_attention_stats(probs[j], g.first_slots[j], info, sums);
          if (kind == s.baseline_kind) accumulate_positional_baselines(info, sums);
        }
        if (options.similarity) accumulate_js_distance(probs, info, sums, g.first_slots);
        // Rows of the target's self-attention (or the only stack's): what n_query_rows counts.
        if (kind == AttentionKind::dec)
          for (uint8_t r : g.query_rows) s.n_query_rows += r;
      }
    }
    if (backward && batch_targets > 0) {
      for (const Var<T>& a : model.attention_outputs()) tape.retain_grad(a);
      tape.backward(out.loss);
      batch_grad.assign(static_cast<size_t>(batch.batch_size * N), 0.0);  // [b, head]
      for (int64_t l = 0; l < L; ++l) {
        const Tensor<T>& a = model.attention_outputs()[l].value();  // [B,Tq,H,Dh]
        const Tensor<T>& da = model.attention_outputs()[l].grad();
        if (da.empty()) continue;
        const int64_t Tq = a.size(1), rows = a.size(0) * Tq, H = a.size(2), Dh = a.size(3);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t h = 0; h < H; ++h) {
            const T* x = a.data() + (r * H + h) * Dh;
            const T* dx = da.data() + (r * H + h) * Dh;
            double dot = 0;
            for (int64_t d = 0; d < Dh; ++d) dot += static_cast<double>(dx[d]) * static_cast<double>(x[d]);
            batch_grad[(r / Tq) * N + s.index(l, h)] += dot;
          }
      }
      for (int64_t b = 0; b < batch.batch_size; ++b) {
        const int64_t n_b = examples[static_cast<size_t>(b)].n_valid;
        if (n_b == 0) continue;
        const double scale = static_cast<double>(batch_targets) / static_cast<double>(n_b);
        for (int64_t k = 0; k < N; ++k) s.example_gate_grad.push_back(batch_grad[b * N + k] * scale / s.gate[k]);
      }
    }
    tape.reset();

    // 2. One backward per example: the gates' gradient is dL_b/dxi itself.
    if (by_rows) {
      tape.set_grad_enabled(true);
      for (int64_t b = 0; b < batch.batch_size; ++b) {
        if (examples[static_cast<size_t>(b)].n_valid == 0) continue;
        model.gates().zero_grad();
        ForwardOptions row_forward;
        row_forward.gate_grads = true;
        tape.backward(model.forward(tape, model_input(model.spec(), batch, b, 1), row_forward).loss);
        tape.reset();
        for (int64_t l = 0; l < L; ++l)
          for (int64_t h = 0; h < s.heads_at(l); ++h)
            s.example_gate_grad.push_back(static_cast<double>(model.gates().grad(static_cast<int>(l))(h)));
      }
    }

    // 3. Ablation: each head alone gated to 0, on the same batch.
    if (options.ablation) masked_forwards(model, tape, in, s, SiteMask::head_off, unmasked, examples, masked, ablation);
    // 4. Each head alone in its site.
    if (options.layer_only)
      masked_forwards(model, tape, in, s, SiteMask::head_only, unmasked, examples, masked, layer_only);
  }
  model.params().zero_grad();
  model.gates().zero_grad();

  s.n_examples = static_cast<int64_t>(s.example_loss.size());
  HEADLAB_CHECK(s.n_targets > 0, "analyze: " << n_batches << " batches of the " << split_name(split) << " split of "
                                             << dataset.name() << " hold no scored target");
  const double n_targets = static_cast<double>(s.n_targets);
  s.loss = loss_sum / n_targets;
  if (has_accuracy) s.accuracy = static_cast<double>(n_correct) / n_targets;

  if (options.importance) {
    for (int64_t e = 0; e < s.n_examples; ++e)
      for (int64_t k = 0; k < N; ++k) importance_sum[k] += std::abs(s.example_gate_grad[e * N + k]);
    for (int64_t k = 0; k < N; ++k) s.importance[k] = importance_sum[k] / static_cast<double>(s.n_examples);
    // Michel et al.: divide by the l2 norm of the layer's importances (here the site's).
    for (int64_t l = 0; l < L; ++l) {
      double norm = 0;
      for (int64_t h = 0; h < s.heads_at(l); ++h) norm += s.importance[s.index(l, h)] * s.importance[s.index(l, h)];
      norm = std::sqrt(norm);
      for (int64_t h = 0; h < s.heads_at(l); ++h)
        s.importance_normalized[s.index(l, h)] = norm > 0 ? s.importance[s.index(l, h)] / norm : 0.0;
    }
  }
  if (options.ablation)
    finish_masked(ablation, s, s.ablation_loss_delta, s.ablation_accuracy_delta, s.example_ablation_loss,
                  s.example_ablation_accuracy);
  if (options.layer_only)
    finish_masked(layer_only, s, s.layer_only_loss_delta, s.layer_only_accuracy_delta, s.example_layer_only_loss,
                  s.example_layer_only_accuracy);
  // Unmeasured columns stay NaN: sums without rows divide to NaN, and no JS rows leave no matrix.
  finish_attention_stats(sums, s);
  if (options.attention) assign_roles(s);
  if (options.ig_steps > 0) {  // the same batches, the path from every head off to the model's gates
    const IntegratedGradients ig = integrated_gradients(model, dataset, split, n_batches, B, options.ig_steps);
    s.integrated_gradients = ig.attribution;
    s.ig_steps = ig.steps;
    s.ig_loss_change = ig.loss - ig.baseline_loss;
    s.ig_completeness_error = ig.completeness_error;
  }
  return s;
}

namespace {

// Every head's attention on one row (a batch of one), with one forward that keeps the
// probabilities. The model's attention outputs come in spec.attention_sites() order (an
// encoder_decoder's encoder first, then self and cross per decoder layer): each goes to its kind's maps.
template <typename T>
AttentionExample attention_of_row(Model<T>& model, Batch row) {
  const ModelSpec& spec = model.spec();
  const std::vector<AttentionSite> sites = spec.attention_sites();
  const int64_t T_ = row.seq_len, S = row.source_len;
  AttentionMaps self, encoder, cross;
  auto maps_of = [&](AttentionKind kind) -> AttentionMaps& {
    return kind == AttentionKind::enc ? encoder : kind == AttentionKind::cross ? cross : self;
  };
  for (const AttentionSite& site : sites) {
    AttentionMaps& m = maps_of(site.kind);
    m.layer_heads.push_back(spec.attention_shape(site).heads);
    m.n_layers = static_cast<int64_t>(m.layer_heads.size());
    m.n_heads = std::max(m.n_heads, m.layer_heads.back());
    m.n_queries = site.kind == AttentionKind::enc ? S : T_;
    m.n_keys = site.kind == AttentionKind::dec ? T_ : S;
  }
  for (AttentionMaps* m : {&self, &encoder, &cross})  // NaN: heads a layer lacks
    m->probs.assign(static_cast<size_t>(m->n_layers * m->n_heads * m->n_queries * m->n_keys), kNaN);

  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  ForwardOptions forward;
  forward.keep_probs = true;
  model.forward(tape, model_input(spec, row, 0, 1), forward);
  for (size_t i = 0; i < sites.size(); ++i) {
    AttentionMaps& m = maps_of(sites[i].kind);
    const Tensor<T> a = attention_probs(model.attention_outputs()[i]);  // [1,H_l,Tq,Tk]
    double* out = m.probs.data() + sites[i].layer * m.n_heads * m.n_queries * m.n_keys;
    for (int64_t j = 0; j < a.numel(); ++j) out[j] = static_cast<double>(a.data()[j]);
  }
  tape.reset();

  AttentionExample out;
  out.n_layers = self.n_layers;
  out.n_heads = self.n_heads;
  out.seq_len = T_;
  out.layer_heads = std::move(self.layer_heads);
  out.probs = std::move(self.probs);
  out.encoder = std::move(encoder);
  out.cross = std::move(cross);
  out.row = std::move(row);
  return out;
}

}  // namespace

template <typename T>
AttentionExample attention_example(Model<T>& model, const Dataset& dataset, Split split, int64_t example,
                                   int64_t batch_size) {
  const Dataset::ExamplePosition at = dataset.example_position(split, example, batch_size);
  Batch batch = dataset.make_batch(batch_size);
  dataset.fill_batch(split, at.batch, batch);
  Batch row = dataset.make_batch(1);
  if (row.layout.variable_shape) row.reshape("analyze", {1, batch.seq_len, batch.source_len}, row.layout);
  copy_row(batch, at.row, row, 0);
  return attention_of_row(model, std::move(row));
}

template <typename T>
AttentionExample attention_on_tokens(Model<T>& model, const std::vector<int32_t>& tokens,
                                     const std::vector<int32_t>& source) {
  const ModelSpec& spec = model.spec();
  const auto T_ = static_cast<int64_t>(tokens.size()), S = static_cast<int64_t>(source.size());
  const bool has_source = model_kind_info(spec.kind).source;
  HEADLAB_CHECK(has_source == (S > 0), "analyze: a " << model_kind_info(spec.kind).name << " model takes "
                                                     << (has_source ? "a source row" : "no source row"));
  for (const auto& [what, ids] : {std::pair{"prompt", &tokens}, std::pair{"source", &source}}) {
    const auto n = static_cast<int64_t>(ids->size());
    HEADLAB_CHECK(n <= spec.max_seq_len && (n >= 1 || ids == &source),
                  "analyze: the " << what << " has " << n << " tokens; the model takes 1 to " << spec.max_seq_len);
    for (int64_t t = 0; t < n; ++t)
      HEADLAB_CHECK((*ids)[t] >= 0 && (*ids)[t] < spec.vocab_size,
                    "analyze: " << what << " token " << t << " is " << (*ids)[t]
                                << ", outside the model's vocabulary [0, " << spec.vocab_size << ")");
  }
  BatchLayout layout;
  layout.labels = !model_kind_info(spec.kind).lm_head;
  layout.source = has_source;
  Batch row({1, T_, S}, layout);
  row.tokens = tokens;
  if (has_source) {
    row.source_tokens = source;
    std::fill(row.source_padding.begin(), row.source_padding.end(), uint8_t{1});
  }
  for (int64_t t = 0; t < T_; ++t) row.targets[t] = t + 1 < T_ ? tokens[t + 1] : -1;  // next tokens, as in training
  if (layout.labels) row.labels[0] = 0;  // any class: the forward's loss is not read
  return attention_of_row(model, std::move(row));
}

template HeadScores analyze_heads<float>(Model<float>&, const Dataset&, Split, int64_t, const AnalysisOptions&);
template HeadScores analyze_heads<double>(Model<double>&, const Dataset&, Split, int64_t, const AnalysisOptions&);
template AttentionExample attention_example<float>(Model<float>&, const Dataset&, Split, int64_t, int64_t);
template AttentionExample attention_example<double>(Model<double>&, const Dataset&, Split, int64_t, int64_t);
template AttentionExample attention_on_tokens<float>(Model<float>&, const std::vector<int32_t>&,
                                                     const std::vector<int32_t>&);
template AttentionExample attention_on_tokens<double>(Model<double>&, const std::vector<int32_t>&,
                                                      const std::vector<int32_t>&);

}  // namespace headlab
