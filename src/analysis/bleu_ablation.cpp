// Head ablation in BLEU. See include/headlab/analysis/bleu_ablation.h; the files are described in
// docs/analysis.md ("BLEU ablation (translation)").
#include "headlab/analysis/bleu_ablation.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace {

std::vector<float> gates_of(const Model<float>& model, size_t site) {
  const Tensor<float> g = model.gates().value(static_cast<int>(site));
  return std::vector<float>(g.data(), g.data() + g.numel());
}

// Translates the split under gate settings of one site at a time, each distinct table once: the
// model's own is the unmasked translation, and a table met again (layer-only of two heads gated
// 0) is reused. Decoder and cross sites decode from the encoder's output of the unmasked run.
class Ablator {
 public:
  Ablator(Model<float>& model, const TranslationDataset& data, Split split, const BleuAblationOptions& options)
      : model_(model), data_(data), split_(split), options_(options), sites_(model.spec().attention_sites()) {
    unmasked_ = decode(options.reuse_encoder ? &encoded_ : nullptr);
  }

  const SplitTranslation& unmasked() const { return unmasked_; }
  int64_t decodings() const { return decodings_; }

  AblatedBleu score(size_t site, const std::vector<float>& gates) {
    if (site != seen_site_) {
      seen_.clear();
      decoded_.clear();  // what score() returned holds copies
      seen_.push_back({gates_of(model_, site), &unmasked_});
      seen_site_ = site;
    }
    for (const auto& [table, translation] : seen_)
      if (table == gates) return compare(*translation, false);
    const ScopedSiteGates<float> set(model_, site, gates);
    const bool reuse = options_.reuse_encoder && sites_[site].kind != AttentionKind::enc;
    decoded_.push_back(std::make_unique<SplitTranslation>(decode(reuse ? &encoded_ : nullptr)));
    seen_.push_back({gates, decoded_.back().get()});
    return compare(*decoded_.back(), true);
  }

 private:
  SplitTranslation decode(EncodedSources* encoded) {
    ++decodings_;
    return translate_split(model_, data_, split_, options_.search, options_.max_sentences, encoded);
  }

  AblatedBleu compare(const SplitTranslation& t, bool decoded) const {
    AblatedBleu a;
    a.hypotheses = t.hypotheses;
    a.bleu_stats = t.bleu_stats;
    a.chrf_stats = t.chrf_stats;
    a.bleu = t.bleu;
    a.chrf = t.chrf;
    a.bleu_delta = t.bleu.score - unmasked_.bleu.score;
    a.chrf_delta = t.chrf.score - unmasked_.chrf.score;
    a.bootstrap =
        paired_bootstrap_bleu(unmasked_.bleu_stats, t.bleu_stats, options_.bootstrap_samples, options_.bootstrap_seed);
    a.decoded = decoded;
    return a;
  }

  Model<float>& model_;
  const TranslationDataset& data_;
  Split split_;
  const BleuAblationOptions& options_;
  std::vector<AttentionSite> sites_;
  EncodedSources encoded_;  // the unmasked run's cross K/V, per chunk
  SplitTranslation unmasked_;
  int64_t decodings_ = 0;
  // The current site's tables decoded so far and their translations (owned by decoded_).
  size_t seen_site_ = static_cast<size_t>(-1);
  std::vector<std::pair<std::vector<float>, const SplitTranslation*>> seen_;
  std::vector<std::unique_ptr<SplitTranslation>> decoded_;
};

}  // namespace

BleuAblation bleu_ablation(Model<float>& model, const TranslationDataset& data, Split split,
                           const BleuAblationOptions& options) {
  const ModelSpec& spec = model.spec();
  HEADLAB_CHECK(model_kind_info(spec.kind).source,
                "bleu ablation: the model is a " << model_kind_info(spec.kind).name << ", not an encoder_decoder");
  const int64_t V = spec.vocab_size, data_V = data.vocab_size();
  HEADLAB_CHECK(V == data_V, "bleu ablation: the model's vocab_size=" << V << " is not the data's " << data_V);
  HEADLAB_CHECK(options.search.beam >= 1,
                "bleu ablation: the beam size must be at least 1, got " << options.search.beam);
  HEADLAB_CHECK(options.bootstrap_samples >= 1,
                "bleu ablation: bootstrap_samples must be at least 1, got " << options.bootstrap_samples);
  HEADLAB_CHECK(options.max_sentences >= 0,
                "bleu ablation: max_sentences must be at least 0, got " << options.max_sentences);
  HEADLAB_CHECK(!data.sentences(split).empty(),
                "bleu ablation: the " << split_name(split) << " split has no sentences");

  BleuAblation out;
  out.split = split;
  out.options = options;
  Ablator ablator(model, data, split, options);
  const std::vector<AttentionSite> sites = spec.attention_sites();
  for (size_t s = 0; s < sites.size(); ++s) {
    const std::vector<float> own = gates_of(model, s);
    for (size_t h = 0; h < own.size(); ++h) {
      HeadBleu head;
      head.site = sites[s];
      head.head = static_cast<int64_t>(h);
      head.gate = static_cast<double>(own[h]);
      std::vector<float> masked = own;
      masked[h] = 0;
      head.masked = ablator.score(s, masked);
      if (options.layer_only) {
        std::vector<float> alone(own.size(), 0.0f);
        alone[h] = own[h];
        head.layer_only = ablator.score(s, alone);
      }
      out.heads.push_back(std::move(head));
    }
  }
  out.unmasked = ablator.unmasked();
  out.decodings = ablator.decodings();
  return out;
}

void add_bleu_columns(const BleuAblation& result, HeadScores& scores) {
  const auto n = static_cast<int64_t>(result.heads.size());
  HEADLAB_CHECK(n == scores.n_total(), "BLEU ablation: " << n << " heads scored in BLEU, " << scores.n_total()
                                                         << " in the head analysis: not the same model");
  for (const HeadBleu& h : result.heads) {
    const int64_t k = scores.index_of(h.site, h.head, "BLEU ablation");
    scores.ablation_bleu_delta[k] = h.masked.bleu_delta;
    scores.ablation_chrf_delta[k] = h.masked.chrf_delta;
    scores.ablation_bleu_p[k] = h.masked.bootstrap.p_value;
    if (h.layer_only) {
      scores.layer_only_bleu_delta[k] = h.layer_only->bleu_delta;
      scores.layer_only_chrf_delta[k] = h.layer_only->chrf_delta;
      scores.layer_only_bleu_p[k] = h.layer_only->bootstrap.p_value;
    }
  }
}

void write_bleu_ablation_csv(const std::string& path, const BleuAblation& result) {
  const bool layer_only = result.options.layer_only;
  const std::vector<std::string> scores = {"bleu",     "bleu_delta", "chrf",       "chrf_delta", "bleu_p",
                                           "bleu_low", "bleu_high",  "bleu_low99", "bleu_high99"};
  std::vector<std::string> header = {"label", "attention", "layer", "head", "gate"};
  for (const std::string& s : scores) header.push_back(s);
  if (layer_only)
    for (const std::string& s : scores) header.push_back("layer_only_" + s);
  CsvWriter w(header);
  auto add = [](std::vector<std::string>& row, const AblatedBleu& a) {
    for (const double v : {a.bleu.score, a.bleu_delta, a.chrf.score, a.chrf_delta, a.bootstrap.p_value, a.bootstrap.low,
                           a.bootstrap.high, a.bootstrap.low99, a.bootstrap.high99})
      row.push_back(csv_number("%.6g", v));
  };
  for (const HeadBleu& h : result.heads) {
    std::vector<std::string> row = {head_label(h.site, h.head, false), attention_kind_name(h.site.kind),
                                    std::to_string(h.site.layer), std::to_string(h.head), csv_number("%.6g", h.gate)};
    add(row, h.masked);
    if (layer_only) add(row, h.layer_only.value());
    w.row(row);
  }
  write_file_atomically(path, w.text());
}

namespace {

constexpr int64_t kBleuColumns = 2 * kBleuMaxOrder + 2, kChrfColumns = 3 * kChrfCharOrder;

// A sentence's BLEU statistics as one row: matches 1..4, totals 1..4, hyp_len, ref_len.
void append_row(std::vector<int64_t>& out, const BleuStats& s) {
  out.insert(out.end(), s.matches.begin(), s.matches.end());
  out.insert(out.end(), s.totals.begin(), s.totals.end());
  out.push_back(s.hyp_len);
  out.push_back(s.ref_len);
}

// chrF's: hypothesis n-grams 1..6, reference n-grams 1..6, matches 1..6.
void append_row(std::vector<int64_t>& out, const ChrfStats& s) {
  out.insert(out.end(), s.hyp.begin(), s.hyp.end());
  out.insert(out.end(), s.ref.begin(), s.ref.end());
  out.insert(out.end(), s.match.begin(), s.match.end());
}

BleuStats bleu_row(const int64_t* row) {
  BleuStats s;
  std::copy(row, row + kBleuMaxOrder, s.matches.begin());
  std::copy(row + kBleuMaxOrder, row + 2 * kBleuMaxOrder, s.totals.begin());
  s.hyp_len = row[2 * kBleuMaxOrder];
  s.ref_len = row[2 * kBleuMaxOrder + 1];
  return s;
}

// [settings, sentences, columns] of one kind of statistics, for each setting's `stats` member.
template <typename Stats, typename Get>
void add_stats(CheckpointWriter& w, const std::string& name, const std::vector<const AblatedBleu*>& settings,
               int64_t sentences, int64_t columns, Get get) {
  std::vector<int64_t> values;
  for (const AblatedBleu* a : settings)
    for (const Stats& s : get(*a)) append_row(values, s);
  w.add_array(name, values.data(), Shape{static_cast<int64_t>(settings.size()), sentences, columns});
}

}  // namespace

void write_bleu_ablation_h5(const std::string& path, const BleuAblation& result) {
  const int64_t n = static_cast<int64_t>(result.unmasked.bleu_stats.size());
  CheckpointWriter w(FileKind::bleu_ablation);
  std::vector<int64_t> values;
  for (const BleuStats& s : result.unmasked.bleu_stats) append_row(values, s);
  w.add_array("unmasked/bleu", values.data(), Shape{n, kBleuColumns});
  values.clear();
  for (const ChrfStats& s : result.unmasked.chrf_stats) append_row(values, s);
  w.add_array("unmasked/chrf", values.data(), Shape{n, kChrfColumns});

  std::vector<const AblatedBleu*> masked, layer_only;
  std::vector<int64_t> attention, layer, head;
  std::vector<double> gate;
  for (const HeadBleu& h : result.heads) {
    masked.push_back(&h.masked);
    if (h.layer_only) layer_only.push_back(&*h.layer_only);
    attention.push_back(static_cast<int64_t>(h.site.kind));
    layer.push_back(h.site.layer);
    head.push_back(h.head);
    gate.push_back(h.gate);
  }
  w.add_array("heads/attention", attention);
  w.add_array("heads/layer", layer);
  w.add_array("heads/head", head);
  w.add_array("heads/gate", gate);
  auto bleu = [](const AblatedBleu& a) -> const std::vector<BleuStats>& { return a.bleu_stats; };
  auto chrf = [](const AblatedBleu& a) -> const std::vector<ChrfStats>& { return a.chrf_stats; };
  add_stats<BleuStats>(w, "masked/bleu", masked, n, kBleuColumns, bleu);
  add_stats<ChrfStats>(w, "masked/chrf", masked, n, kChrfColumns, chrf);
  if (!layer_only.empty()) {
    add_stats<BleuStats>(w, "layer_only/bleu", layer_only, n, kBleuColumns, bleu);
    add_stats<ChrfStats>(w, "layer_only/chrf", layer_only, n, kChrfColumns, chrf);
  }
  const BleuAblationOptions& o = result.options;
  w.set_string_attr("split", split_name(result.split));
  w.set_int_attr("sentences", n);
  w.set_int_attr("beam", o.search.beam);
  w.set_double_attr("length_penalty", o.search.length_penalty);
  w.set_double_attr("max_len_a", o.search.max_len_a);
  w.set_int_attr("max_len_b", o.search.max_len_b);
  w.set_int_attr("bootstrap_samples", o.bootstrap_samples);
  w.set_int_attr("bootstrap_seed", static_cast<int64_t>(o.bootstrap_seed));
  w.set_double_attr("unmasked_bleu", result.unmasked.bleu.score);
  w.set_double_attr("unmasked_chrf", result.unmasked.chrf.score);
  w.commit(path);
}

BleuAblationStats read_bleu_ablation_stats(const std::string& path) {
  CheckpointReader r(path);
  r.require_kind(FileKind::bleu_ablation);
  // [sentences, columns] or [settings, sentences, columns] of BLEU statistics, by setting.
  auto read = [&](const std::string& name) {
    const std::vector<int64_t> values = r.read_array<int64_t>(name);
    const Shape shape = r.shape(name);
    HEADLAB_CHECK(shape.rank >= 2 && shape.last() == kBleuColumns,
                  path << ": " << name << " is " << shape.str() << ", not [..., " << kBleuColumns << "]");
    const int64_t per_group = shape[shape.rank - 2];
    std::vector<std::vector<BleuStats>> out(values.size() / static_cast<size_t>(per_group * kBleuColumns));
    for (size_t g = 0; g < out.size(); ++g)
      for (int64_t i = 0; i < per_group; ++i)
        out[g].push_back(bleu_row(values.data() + (static_cast<int64_t>(g) * per_group + i) * kBleuColumns));
    return out;
  };
  BleuAblationStats out;
  out.unmasked = read("unmasked/bleu").at(0);
  out.masked = read("masked/bleu");
  if (r.has("layer_only/bleu")) out.layer_only = read("layer_only/bleu");
  return out;
}

}  // namespace headlab
