// The transformer's parameters and forward pass. Read forward() top to bottom: it lists the
// blocks in order, as llm.c's gpt2_forward does, with named parameters instead of offsets.
#include "headlab/nn/model.h"

#include <cmath>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "headlab/common/error.h"
#include "headlab/common/hash.h"
#include "headlab/nn/kv_cache.h"
#include "headlab/ops/attention.h"
#include "headlab/ops/cross_entropy.h"
#include "headlab/ops/dropout.h"
#include "headlab/ops/elementwise.h"
#include "headlab/ops/embedding.h"
#include "headlab/ops/layer_norm.h"
#include "headlab/ops/matmul.h"
#include "headlab/ops/recomputed_linear.h"
#include "headlab/ops/shape.h"

namespace headlab {

std::string block_name(int64_t layer, const char* rest) {
  return "blocks/" + std::to_string(layer) + "/" + rest;
}

namespace {

// Distinct dropout streams per call site: `stream` is a block (-1 the embedding), `site` the
// place in it (1 attention, 2 MLP, 3 cross-attention).
uint64_t dropout_site(uint64_t seed, int64_t stream, int site) {
  return hash_combine(seed, static_cast<uint64_t>((stream + 1) * 4 + site));
}

// An encoder_decoder's encoder blocks number their streams after the decoder's, and its source
// embedding after those.
int64_t encoder_stream(const ModelSpec& s, int64_t layer) {
  return s.n_layers + layer;
}
int64_t source_embedding_stream(const ModelSpec& s) {
  return s.n_layers + s.n_encoder_layers;
}
constexpr int64_t kTargetEmbeddingStream = -1;

std::string site_name(AttentionSite site, const char* rest) {
  if (site.kind == AttentionKind::enc) return concat("enc/", site.layer, "/", rest);
  return block_name(site.layer, rest);
}

}  // namespace

const char* attention_kind_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::enc:
      return "enc";
    case AttentionKind::dec:
      return "dec";
    case AttentionKind::cross:
      return "cross";
  }
  return "unknown";
}

std::string head_label(AttentionSite site, int64_t head, bool one_stack) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "L" + std::to_string(l).
  std::string label = one_stack ? "" : attention_kind_name(site.kind);
  if (!one_stack) label += '.';
  label += 'L';
  label += std::to_string(site.layer);
  label += 'H';
  label += std::to_string(head);
  return label;
}

std::string gate_table_label(const ModelSpec& spec, GateKind kind, int64_t table) {
  const bool source = model_kind_info(spec.kind).source;
  if (kind == GateKind::heads) {
    const AttentionSite site = spec.site_at(table);
    return source ? concat(attention_kind_name(site.kind), ".L", site.layer) : concat("L", site.layer);
  }
  HEADLAB_CHECK(table >= 0 && table < spec.mlp_blocks(),
                "MLP block " << table << " is outside the model's " << spec.mlp_blocks());
  if (!source) return concat("L", table);
  return table < spec.n_encoder_layers ? concat("enc.L", table) : concat("dec.L", table - spec.n_encoder_layers);
}

std::vector<AttentionSite> ModelSpec::attention_sites() const {
  std::vector<AttentionSite> sites;
  const bool source = model_kind_info(kind).source;
  if (source)
    for (int64_t l = 0; l < n_encoder_layers; ++l) sites.push_back({AttentionKind::enc, l});
  for (int64_t l = 0; l < n_layers; ++l) {
    sites.push_back({AttentionKind::dec, l});
    if (source) sites.push_back({AttentionKind::cross, l});
  }
  return sites;
}

AttentionSite ModelSpec::site_at(int64_t i) const {
  const bool source = model_kind_info(kind).source;
  const int64_t n = source ? n_encoder_layers + 2 * n_layers : n_layers;
  HEADLAB_CHECK(i >= 0 && i < n, "model: attention site " << i << " is outside [0, " << n << ")");
  if (!source) return {AttentionKind::dec, i};
  if (i < n_encoder_layers) return {AttentionKind::enc, i};
  const int64_t j = i - n_encoder_layers;
  return {j % 2 == 0 ? AttentionKind::dec : AttentionKind::cross, j / 2};
}

int64_t ModelSpec::site_index(AttentionSite site) const {
  if (!model_kind_info(kind).source || site.kind == AttentionKind::enc) return site.layer;
  return n_encoder_layers + 2 * site.layer + (site.kind == AttentionKind::cross ? 1 : 0);
}

AttentionShape ModelSpec::kind_shape(AttentionKind k) const {
  if (k == AttentionKind::enc) return {enc_n_heads, enc_n_kv_heads, enc_d_head};
  if (k == AttentionKind::cross) return {cross_n_heads, cross_n_kv_heads, cross_d_head};
  return {n_heads, n_kv_heads, d_head};
}

int64_t ModelSpec::heads_at_site(AttentionSite site) const {
  return layer_heads.empty() ? kind_shape(site.kind).heads : layer_heads[static_cast<size_t>(site_index(site))];
}

int64_t ModelSpec::total_heads() const {
  int64_t n = 0;
  for (const AttentionSite& site : attention_sites()) n += heads_at_site(site);
  return n;
}

AttentionShape ModelSpec::attention_shape(AttentionSite site) const {
  AttentionShape a = kind_shape(site.kind);
  // A site with removed heads keeps MHA (spec_problem requires it): one K/V head per query head.
  if (!layer_heads.empty()) a.heads = a.kv_heads = heads_at_site(site);
  return a;
}

int64_t ModelSpec::mlp_blocks() const {
  return n_layers + (model_kind_info(kind).source ? n_encoder_layers : 0);
}

int64_t ModelSpec::mlp_block(bool encoder, int64_t layer) const {
  return encoder || !model_kind_info(kind).source ? layer : n_encoder_layers + layer;
}

int64_t ModelSpec::units_at_block(int64_t block) const {
  return mlp_units.empty() ? d_mlp : mlp_units[static_cast<size_t>(block)];
}

namespace {

std::optional<SpecProblem> make_problem(const std::string& prefix, std::string message,
                                        std::initializer_list<std::string> fields) {
  SpecProblem p{std::move(message), {}};
  for (const std::string& field : fields) p.fields.push_back(prefix + field);
  return p;
}

// The config keys of a kind's head counts: "n_heads", "enc_n_heads", "cross_n_heads" (and kv).
std::string kind_key(AttentionKind kind, const char* key) {
  return kind == AttentionKind::dec ? std::string(key) : concat(attention_kind_name(kind), "_", key);
}

// "" in a model with one stack, where site i is layer i; " (cross.L0)" in an encoder_decoder.
std::string site_note(const ModelSpec& s, AttentionSite site) {
  if (!model_kind_info(s.kind).source) return "";
  return concat(" (", attention_kind_name(site.kind), ".L", site.layer, ")");
}

// A per-site list (layer_heads, active_heads) of the wrong length, or nullopt.
std::optional<SpecProblem> site_count_problem(const ModelSpec& s, const std::string& prefix, const char* key,
                                              size_t entries, const std::string& empty_means) {
  const size_t sites = s.attention_sites().size();
  if (entries == sites) return std::nullopt;
  if (!model_kind_info(s.kind).source)
    return make_problem(prefix,
                        concat(prefix, key, " has ", entries, " entries but ", prefix, "n_layers=", s.n_layers,
                               ": one per layer, or [] for ", empty_means),
                        {key, "n_layers"});
  return make_problem(
      prefix,
      concat(prefix, key, " has ", entries, " entries but an encoder_decoder has ", sites, " attention sites (",
             s.n_encoder_layers, " encoder layers, then self and cross per decoder layer), or [] for all heads"),
      {key, "n_encoder_layers", "n_layers"});
}

// mlp_units: one entry per MLP block, each in [0, d_mlp] (0: the block removed whole).
std::optional<SpecProblem> mlp_units_problem(const ModelSpec& s, const std::string& prefix) {
  if (s.mlp_units.empty()) return std::nullopt;
  const std::string f = prefix + "mlp_units";
  if (static_cast<int64_t>(s.mlp_units.size()) != s.mlp_blocks())
    return model_kind_info(s.kind).source
               ? make_problem(prefix,
                              concat(f, " has ", s.mlp_units.size(), " entries but an encoder_decoder has ",
                                     s.mlp_blocks(), " MLP blocks (", s.n_encoder_layers,
                                     " encoder layers, then the decoder's), or [] for d_mlp units in each"),
                              {"mlp_units", "n_encoder_layers", "n_layers"})
               : make_problem(prefix,
                              concat(f, " has ", s.mlp_units.size(), " entries but ", prefix, "n_layers=", s.n_layers,
                                     ": one per layer, or [] for d_mlp units in each"),
                              {"mlp_units", "n_layers"});
  for (size_t i = 0; i < s.mlp_units.size(); ++i)
    if (s.mlp_units[i] < 0 || s.mlp_units[i] > s.d_mlp)
      return make_problem(prefix,
                          concat(f, "[", i, "]=", s.mlp_units[i], " is outside [0, ", prefix, "d_mlp=", s.d_mlp,
                                 "] (0 removes the block whole)"),
                          {"mlp_units", "d_mlp"});
  return std::nullopt;
}

// layer_heads: one entry per site, each in [0, its kind's n_heads] (0: the attention layer removed
// whole), and MHA in every kind (a site cannot drop the K/V rows of a head that other query heads
// read).
std::optional<SpecProblem> layer_heads_problem(const ModelSpec& s, const std::string& prefix) {
  if (s.layer_heads.empty()) return std::nullopt;
  const std::string f = prefix + "layer_heads";
  if (auto p = site_count_problem(s, prefix, "layer_heads", s.layer_heads.size(), prefix + "n_heads in every layer"))
    return p;
  const std::vector<AttentionSite> sites = s.attention_sites();
  for (size_t i = 0; i < sites.size(); ++i) {
    const int64_t heads = s.layer_heads[i], most = s.kind_shape(sites[i].kind).heads;
    const std::string n_heads = kind_key(sites[i].kind, "n_heads");
    if (heads < 0)
      return make_problem(prefix, concat(f, "[", i, "] must be >= 0, got ", heads, site_note(s, sites[i])),
                          {"layer_heads"});
    if (heads > most)
      return make_problem(
          prefix, concat(f, "[", i, "]=", heads, " exceeds ", prefix, n_heads, "=", most, site_note(s, sites[i])),
          {"layer_heads", n_heads});
  }
  for (const AttentionSite& site : sites) {
    const AttentionShape a = s.kind_shape(site.kind);
    if (a.kv_heads == a.heads) continue;
    const std::string heads = prefix + kind_key(site.kind, "n_heads"), kv = prefix + kind_key(site.kind, "n_kv_heads");
    return make_problem(prefix,
                        concat(f, " needs multi-head attention (", kv, " = ", heads, "), got ", kv, "=", a.kv_heads,
                               ", ", heads, "=", a.heads, "; mask GQA/MQA heads with gates instead"),
                        {"layer_heads", kind_key(site.kind, "n_kv_heads")});
  }
  return std::nullopt;
}

// active_heads: one entry per site, each in [0, the site's heads].
std::optional<SpecProblem> active_heads_problem(const ModelSpec& s, const std::string& prefix) {
  if (s.active_heads.empty()) return std::nullopt;
  const std::string f = prefix + "active_heads";
  if (auto p = site_count_problem(s, prefix, "active_heads", s.active_heads.size(), "every head")) return p;
  const std::vector<AttentionSite> sites = s.attention_sites();
  for (size_t i = 0; i < sites.size(); ++i) {
    const int64_t active = s.active_heads[i], heads = s.heads_at_site(sites[i]);
    if (active < 0)
      return make_problem(prefix, concat(f, "[", i, "] must be >= 0, got ", active, site_note(s, sites[i])),
                          {"active_heads"});
    const std::string note = site_note(s, sites[i]), whose = note.empty() ? "layer's" : "site's" + note;
    if (active > heads)
      return make_problem(prefix, concat(f, "[", i, "]=", active, " exceeds the ", whose, " ", heads, " heads"),
                          {"active_heads", kind_key(sites[i].kind, "n_heads"), "layer_heads"});
  }
  return std::nullopt;
}

}  // namespace

// Each rule once; the order is the one a reader checks a spec in (sizes, heads, per-layer lists).
std::optional<SpecProblem> spec_problem(const ModelSpec& s, const std::string& prefix) {
  auto f = [&](const char* field) { return prefix + field; };
  auto problem = [&](std::string message, std::initializer_list<const char*> fields) {
    SpecProblem p{std::move(message), {}};
    for (const char* field : fields) p.fields.push_back(f(field));
    return std::optional<SpecProblem>(std::move(p));
  };
  if (!(s.vocab_size > 0 && s.d_model > 0 && s.n_heads > 0 && s.n_kv_heads > 0 && s.d_head > 0 && s.n_layers > 0 &&
        s.d_mlp > 0 && s.max_seq_len > 0))
    return problem(concat("sizes must be positive (", f("vocab_size"), "=", s.vocab_size, ", ", f("d_model"), "=",
                          s.d_model, ", ", f("n_heads"), "=", s.n_heads, ", ", f("n_kv_heads"), "=", s.n_kv_heads, ", ",
                          f("d_head"), "=", s.d_head, ", ", f("n_layers"), "=", s.n_layers, ", ", f("d_mlp"), "=",
                          s.d_mlp, ", ", f("max_seq_len"), "=", s.max_seq_len, ")"),
                   {"vocab_size", "d_model", "n_heads", "n_kv_heads", "d_head", "n_layers", "d_mlp", "max_seq_len"});
  if (s.n_heads % s.n_kv_heads != 0)
    return problem(concat(f("n_kv_heads"), "=", s.n_kv_heads, " does not divide ", f("n_heads"), "=", s.n_heads),
                   {"n_kv_heads", "n_heads"});
  if (!model_kind_info(s.kind).lm_head && s.n_classes < 2)
    return problem(concat("an encoder needs ", f("n_classes"), " >= 2, got ", s.n_classes), {"n_classes", "kind"});
  if (s.positions == Positions::sinusoidal && s.d_model % 2 != 0)
    return problem(concat("sinusoidal positions need an even ", f("d_model"), ", got ", s.d_model),
                   {"d_model", "positions"});
  if (model_kind_info(s.kind).source) {
    if (s.n_encoder_layers < 1)
      return problem(concat("an encoder_decoder needs ", f("n_encoder_layers"), " >= 1, got ", s.n_encoder_layers),
                     {"n_encoder_layers"});
    for (const char* kind : {"enc", "cross"}) {
      const AttentionShape a = s.kind_shape(kind[0] == 'e' ? AttentionKind::enc : AttentionKind::cross);
      const std::string heads = concat(kind, "_n_heads"), kv = concat(kind, "_n_kv_heads"),
                        d_head = concat(kind, "_d_head");
      if (!(a.heads > 0 && a.kv_heads > 0 && a.d_head > 0))
        return problem(concat("sizes must be positive (", f(heads.c_str()), "=", a.heads, ", ", f(kv.c_str()), "=",
                              a.kv_heads, ", ", f(d_head.c_str()), "=", a.d_head, ")"),
                       {heads.c_str(), kv.c_str(), d_head.c_str()});
      if (a.heads % a.kv_heads != 0)
        return problem(concat(f(kv.c_str()), "=", a.kv_heads, " does not divide ", f(heads.c_str()), "=", a.heads),
                       {kv.c_str(), heads.c_str()});
    }
  }
  if (std::optional<SpecProblem> p = layer_heads_problem(s, prefix)) return p;
  if (std::optional<SpecProblem> p = mlp_units_problem(s, prefix)) return p;
  return active_heads_problem(s, prefix);
}

void validate(const ModelSpec& spec) {
  if (const std::optional<SpecProblem> p = spec_problem(spec)) throw Error("model: " + p->message);
}

// The one declaration of every parameter: its name, shape, init and kind, and where it sits.
ParamLayout parameter_layout(const ModelSpec& s) {
  validate(s);
  const int64_t C = s.d_model;
  const bool source = model_kind_info(s.kind).source;
  // GPT-2 init: N(0, 0.02), residual projections scaled by 1/sqrt(residual branches of the
  // stack): 2 per block, 3 in an encoder_decoder's decoder (self, cross, MLP).
  const double std = s.init_std;
  auto residual_std = [&](int64_t branches) { return s.init_std / std::sqrt(static_cast<double>(branches)); };
  ParamLayout layout;
  std::vector<ParamSpec>& p = layout.specs;
  ParamIndex& index = layout.index;
  auto add = [&](ParamSpec spec) {
    p.push_back(std::move(spec));
    return static_cast<int>(p.size()) - 1;
  };
  auto linear_layer = [&](const std::string& name, int64_t out, int64_t in, double init_std) {
    LinearParams at;
    at.weight = add({name + "/weight", {out, in}, Init::normal, init_std, ParamKind::weight});
    if (s.bias) at.bias = add({name + "/bias", {out}, Init::zeros, 0.0, ParamKind::bias});
    return at;
  };
  auto norm_layer = [&](const std::string& name) {
    return NormParams{add({name + "/weight", {C}, Init::ones, 0.0, ParamKind::norm}),
                      add({name + "/bias", {C}, Init::zeros, 0.0, ParamKind::norm})};
  };
  // A block: self-attention, then (a translation decoder's) cross-attention, then the MLP.
  auto block = [&](AttentionSite site, double out_std) {
    auto name = [&](const char* rest) { return site_name(site, rest); };
    const AttentionShape a = s.attention_shape(site);
    BlockParams b;
    b.ln1 = norm_layer(name("ln1"));
    b.qkv = linear_layer(name("attn/qkv"), (a.heads + 2 * a.kv_heads) * a.d_head, C, std);
    b.proj = linear_layer(name("attn/proj"), C, a.heads * a.d_head, out_std);
    if (source && site.kind == AttentionKind::dec) {
      const AttentionShape x = s.attention_shape({AttentionKind::cross, site.layer});
      b.cross.ln = norm_layer(name("cross/ln"));
      b.cross.q = linear_layer(name("cross/q"), x.heads * x.d_head, C, std);
      b.cross.kv = linear_layer(name("cross/kv"), 2 * x.kv_heads * x.d_head, C, std);
      b.cross.proj = linear_layer(name("cross/proj"), C, x.heads * x.d_head, out_std);
    }
    const int64_t units = s.units_at_block(s.mlp_block(source && site.kind == AttentionKind::enc, site.layer));
    b.ln2 = norm_layer(name("ln2"));
    b.fc = linear_layer(name("mlp/fc"), units, C, std);
    b.mlp_proj = linear_layer(name("mlp/proj"), C, units, out_std);
    return b;
  };
  index.tok_emb = add({"tok_emb/weight", {s.vocab_size, C}, Init::normal, std, ParamKind::embedding});
  if (s.positions == Positions::learned)
    index.pos_emb = add({"pos_emb/weight", {s.max_seq_len, C}, Init::normal, std, ParamKind::embedding});
  if (source) {
    if (s.positions == Positions::learned)
      index.encoder_pos_emb = add({"enc/pos_emb/weight", {s.max_seq_len, C}, Init::normal, std, ParamKind::embedding});
    for (int64_t l = 0; l < s.n_encoder_layers; ++l)
      index.encoder_blocks.push_back(block({AttentionKind::enc, l}, residual_std(2 * s.n_encoder_layers)));
    index.encoder_ln_f = norm_layer("enc/ln_f");
  }
  for (int64_t l = 0; l < s.n_layers; ++l)
    index.blocks.push_back(block({AttentionKind::dec, l}, residual_std((source ? 3 : 2) * s.n_layers)));
  index.ln_f = norm_layer("ln_f");
  if (model_kind_info(s.kind).lm_head) {
    index.head.weight = s.tie_embeddings
                            ? index.tok_emb
                            : add({"lm_head/weight", {s.vocab_size, C}, Init::normal, std, ParamKind::weight});
  } else {
    index.head = linear_layer("cls_head", s.n_classes, C, std);
  }
  return layout;
}

std::vector<ParamSpec> parameter_specs(const ModelSpec& spec) {
  return parameter_layout(spec).specs;
}

std::vector<ParamSpec> gate_specs(const ModelSpec& s) {
  std::vector<ParamSpec> g;
  for (const AttentionSite& site : s.attention_sites())
    g.push_back({site_name(site, site.kind == AttentionKind::cross ? "cross/gates" : "attn/gates"),
                 {s.attention_shape(site).heads},
                 Init::ones,
                 0.0,
                 ParamKind::weight});
  return g;
}

std::vector<ParamSpec> ffn_gate_specs(const ModelSpec& s) {
  std::vector<ParamSpec> g;
  const bool source = model_kind_info(s.kind).source;
  auto add = [&](AttentionSite site) {
    const int64_t block = s.mlp_block(site.kind == AttentionKind::enc, site.layer);
    g.push_back({site_name(site, "mlp/gates"), {s.units_at_block(block)}, Init::ones, 0.0, ParamKind::weight});
  };
  if (source)
    for (int64_t l = 0; l < s.n_encoder_layers; ++l) add({AttentionKind::enc, l});
  for (int64_t l = 0; l < s.n_layers; ++l) add({AttentionKind::dec, l});
  return g;
}

template <typename T>
Model<T>::Model(const ModelSpec& spec) : Model(spec, parameter_layout(spec)) {}

template <typename T>
Model<T>::Model(const ModelSpec& spec, ParamLayout layout)
    : spec_(spec),
      params_(std::move(layout.specs)),
      gates_(gate_specs(spec)),
      ffn_gates_(ffn_gate_specs(spec)),
      index_(std::move(layout.index)) {
  gates_.init(0);  // all ones, then the switched-off heads' zeros
  ffn_gates_.init(0);
  for (int64_t l = 0; l < static_cast<int64_t>(spec.active_heads.size()); ++l) {
    Tensor<T> g = gates_.value(static_cast<int>(l));
    for (int64_t h = spec.active_heads[l]; h < g.numel(); ++h) g(h) = T(0);
  }
  attention_outputs_.reserve(spec.attention_sites().size());
  site_inputs_.reserve(spec.attention_sites().size());
  block_inputs_.reserve(spec.n_layers);
  block_mids_.reserve(spec.n_layers);
  if (spec.positions == Positions::sinusoidal) {
    // Vaswani et al.: pe[t, 2i] = sin(t / 10000^(2i/C)), pe[t, 2i+1] = cos(same).
    sinusoid_ = Buffer(spec.max_seq_len * spec.d_model * sizeof(T));
    T* pe = static_cast<T*>(sinusoid_.data());
    for (int64_t t = 0; t < spec.max_seq_len; ++t)
      for (int64_t i = 0; i < spec.d_model / 2; ++i) {
        const double angle = t / std::pow(10000.0, 2.0 * i / spec.d_model);
        pe[t * spec.d_model + 2 * i] = static_cast<T>(std::sin(angle));
        pe[t * spec.d_model + 2 * i + 1] = static_cast<T>(std::cos(angle));
      }
  }
}

template <typename T>
ModelOutput<T> Model<T>::forward(Tape<T>& tape, const ModelInput& in, const ForwardOptions& opt,
                                 const Var<T>* gate_vars, const Var<T>* ffn_gate_vars) {
  attention_outputs_.clear();
  site_inputs_.clear();
  block_inputs_.clear();
  block_mids_.clear();
  // The MLP blocks read the FFN gates of this forward from here (gated_mlp_weight), so they need
  // not be threaded through every stage; put back to null on the way out, also on a throw.
  ffn_gate_vars_ = ffn_gate_vars;
  struct Reset {
    const Var<T>*& slot;
    ~Reset() { slot = nullptr; }
  } reset{ffn_gate_vars_};
  if (model_kind_info(spec_.kind).source) return decode_all(tape, in, opt, gate_vars, encode(tape, in, opt, gate_vars));
  return decode_all(tape, in, opt, gate_vars, Var<T>{});
}

template <typename T>
ModelOutput<T> Model<T>::decode_all(Tape<T>& tape, const ModelInput& in, const ForwardOptions& opt,
                                    const Var<T>* gate_vars, const Var<T>& memory) {
  Var<T> x = embed(tape, in.tokens, in.batch_size, in.seq_len, index_.pos_emb, kTargetEmbeddingStream, opt, 0);
  return forward_blocks(tape, in, opt, gate_vars, 0, x, {}, memory, nullptr);
}

template <typename T>
ModelOutput<T> Model<T>::forward_from(Tape<T>& tape, const ModelInput& in, int64_t site, const Var<T>& x,
                                      const Var<T>& a, const Var<T>& memory) {
  const AttentionSite at = spec_.site_at(site);
  const bool source = model_kind_info(spec_.kind).source;
  const int64_t rows = at.kind == AttentionKind::enc && source ? in.source_len : in.seq_len;
  const AttentionShape shape = spec_.attention_shape(at);
  const Shape x_shape{in.batch_size, rows, spec_.d_model}, a_shape{in.batch_size, rows, shape.heads, shape.d_head};
  HEADLAB_CHECK(x.shape() == x_shape,
                "model: forward_from site " << site << " needs x " << x_shape.str() << ", got " << x.shape().str());
  HEADLAB_CHECK(!a.defined() || a.shape() == a_shape,
                "model: forward_from site " << site << " needs a " << a_shape.str() << ", got " << a.shape().str());
  attention_outputs_.assign(static_cast<size_t>(site), Var<T>{});
  site_inputs_.assign(static_cast<size_t>(site), Var<T>{});
  if (source && at.kind == AttentionKind::enc) {
    block_inputs_.clear();
    block_mids_.clear();
    return decode_all(tape, in, {}, nullptr, encode_from(tape, in, {}, nullptr, at.layer, x, a));
  }
  HEADLAB_CHECK(!source || memory.defined(),
                "model: forward_from a decoder site of an encoder_decoder needs the "
                "encoder's output (memory)");
  const auto below = static_cast<size_t>(at.layer);
  block_inputs_.assign(below, Var<T>{});
  block_mids_.assign(below, Var<T>{});
  memory_ = memory;
  return forward_blocks(tape, in, {}, nullptr, at.layer, x, {at.kind == AttentionKind::cross, a}, memory, nullptr);
}

template <typename T>
void Model<T>::start_decoding(Tape<T>& tape, const ModelInput& source, KvCache<T>& cache) {
  HEADLAB_CHECK(model_kind_info(spec_.kind).source, "model: start_decoding is for an encoder_decoder");
  HEADLAB_CHECK(!tape.grad_enabled(), "model: decoding runs without grad (NoGradGuard)");
  const int64_t n_src = source.batch_size, S = source.source_len;
  HEADLAB_CHECK(n_src >= 1 && cache.rows() % n_src == 0,
                "model: " << n_src << " source rows do not divide the cache's " << cache.rows() << " rows");
  cache.clear();
  attention_outputs_.clear();
  site_inputs_.clear();
  const Var<T> memory = encode(tape, source, {}, nullptr);
  uint8_t* padding = cache.start_sources(n_src, S);
  for (int64_t i = 0; i < n_src * S; ++i) padding[i] = source.source_padding == nullptr ? 1 : source.source_padding[i];
  // Each layer's cross K/V of each source, once: the rows decoding a source share it (cross_attend).
  for (int64_t l = 0; l < spec_.n_layers; ++l) {
    const AttentionShape c = spec_.attention_shape({AttentionKind::cross, l});
    if (c.heads == 0) continue;  // a cross-attention removed whole reads no K/V
    const Tensor<T> kv =
        reshape(project(tape, memory, index_.blocks[l].cross.kv), {n_src, S, 2 * c.kv_heads, c.d_head}).value();
    cache.cross_keys(l).copy_from(kv.narrow(2, 0, c.kv_heads));
    cache.cross_values(l).copy_from(kv.narrow(2, c.kv_heads, c.kv_heads));
  }
}

template <typename T>
ModelOutput<T> Model<T>::decode_step(Tape<T>& tape, const ModelInput& in, KvCache<T>& cache) {
  HEADLAB_CHECK(model_kind_info(spec_.kind).lm_head, "model: decode_step needs a model with an LM head");
  HEADLAB_CHECK(!tape.grad_enabled(), "model: decoding runs without grad (NoGradGuard)");
  HEADLAB_CHECK(!model_kind_info(spec_.kind).source || cache.has_source(),
                "model: an encoder_decoder's decode_step needs start_decoding first");
  HEADLAB_CHECK(in.batch_size == cache.rows(),
                "model: decode_step got " << in.batch_size << " rows for a cache of " << cache.rows());
  HEADLAB_CHECK(cache.length() + in.seq_len <= cache.capacity(),
                "model: " << cache.length() << " cached + " << in.seq_len << " new tokens exceed the cache's capacity "
                          << cache.capacity());
  attention_outputs_.clear();
  site_inputs_.clear();
  block_inputs_.clear();
  block_mids_.clear();
  Var<T> x =
      embed(tape, in.tokens, in.batch_size, in.seq_len, index_.pos_emb, kTargetEmbeddingStream, {}, cache.length());
  ModelOutput<T> out = forward_blocks(tape, in, {}, nullptr, 0, x, {}, Var<T>{}, &cache);
  cache.advance(in.seq_len);
  return out;
}

// Reads top to bottom as the whole model: forward() is embed (after the encoder), then this.
template <typename T>
ModelOutput<T> Model<T>::forward_blocks(Tape<T>& tape, const ModelInput& in, const ForwardOptions& opt,
                                        const Var<T>* gate_vars, int64_t first, Var<T> x, const BlockStart& start,
                                        const Var<T>& memory, KvCache<T>* cache) {
  for (int64_t l = first; l < spec_.n_layers; ++l) {
    const bool from_cross = l == first && start.at_cross;
    block_inputs_.push_back(from_cross ? Var<T>{} : x);  // a cross start's block input is not known
    x = decoder_block(tape, x, l, in, opt, gate_vars, l == first ? start : BlockStart{}, memory, cache);
  }
  final_residual_ = x;
  return output(tape, x, in, opt.label_smoothing);
}

// Block l of the (decoder) stack: self-attention (causal unless the model is an encoder
// classifier), an encoder_decoder's cross-attention to the memory (or to the cache's cross K/V),
// the MLP. `start` may skip the self-attention (x is then the stream after it) and give the
// first attention's output (head ablation, patching).
template <typename T>
Var<T> Model<T>::decoder_block(Tape<T>& tape, Var<T> x, int64_t l, const ModelInput& in, const ForwardOptions& opt,
                               const Var<T>* gate_vars, const BlockStart& start, const Var<T>& memory,
                               KvCache<T>* cache) {
  const ModelKindInfo& kind = model_kind_info(spec_.kind);
  const BlockParams& blk = index_.blocks[l];
  // Sites: l, or in an encoder_decoder the encoder's first, then self and cross per layer.
  const int64_t self_site = kind.source ? spec_.n_encoder_layers + 2 * l : l;
  if (!start.at_cross) {
    site_inputs_.push_back(x);
    Var<T> a = start.attention;
    if (!a.defined())
      a = attend(tape, x, blk, spec_.attention_shape({AttentionKind::dec, l}), kind.causal, in.key_padding, opt,
                 site_gates(tape, self_site, opt, gate_vars), cache, l);
    attention_outputs_.push_back(a);
    x = add_attention(tape, x, a, blk.proj, l, 1, opt);
  }
  if (kind.source) {
    site_inputs_.push_back(x);
    Var<T> c = start.at_cross ? start.attention : Var<T>{};
    if (!c.defined())
      c = cross_attend(tape, x, memory, blk, spec_.attention_shape({AttentionKind::cross, l}), in, opt,
                       site_gates(tape, self_site + 1, opt, gate_vars), cache, l);
    attention_outputs_.push_back(c);
    x = add_attention(tape, x, c, blk.cross.proj, l, 3, opt);
  }
  block_mids_.push_back(x);
  return add_mlp(tape, x, blk, spec_.mlp_block(false, l), l, opt);
}

// The source through the encoder: bidirectional self-attention over real source tokens.
template <typename T>
Var<T> Model<T>::encode(Tape<T>& tape, const ModelInput& in, const ForwardOptions& opt, const Var<T>* gate_vars) {
  HEADLAB_CHECK(in.source_tokens != nullptr && in.source_len >= 1,
                "model: an encoder_decoder needs a source (source_tokens, source_len >= 1)");
  Var<T> x = embed(tape, in.source_tokens, in.batch_size, in.source_len, index_.encoder_pos_emb,
                   source_embedding_stream(spec_), opt, 0);
  return encode_from(tape, in, opt, gate_vars, 0, x, Var<T>{});
}

template <typename T>
Var<T> Model<T>::encode_from(Tape<T>& tape, const ModelInput& in, const ForwardOptions& opt, const Var<T>* gate_vars,
                             int64_t first, Var<T> x, const Var<T>& first_attention) {
  for (int64_t l = first; l < spec_.n_encoder_layers; ++l) {
    const BlockParams& blk = index_.encoder_blocks[l];
    const int64_t stream = encoder_stream(spec_, l);
    site_inputs_.push_back(x);
    Var<T> a = l == first ? first_attention : Var<T>{};
    if (!a.defined())
      a = attend(tape, x, blk, spec_.attention_shape({AttentionKind::enc, l}), false, in.source_padding, opt,
                 site_gates(tape, l, opt, gate_vars), nullptr, l);
    attention_outputs_.push_back(a);
    x = add_mlp(tape, add_attention(tape, x, a, blk.proj, stream, 1, opt), blk, spec_.mlp_block(true, l), stream, opt);
  }
  encoder_final_residual_ = x;
  memory_ = encoder_output(tape, x);
  return memory_;
}

template <typename T>
Var<T> Model<T>::encoder_output(Tape<T>& tape, const Var<T>& x) {
  HEADLAB_CHECK(model_kind_info(spec_.kind).source, "model: encoder_output is an encoder_decoder's");
  return norm(tape, x, index_.encoder_ln_f);
}

// The gates of site `site` for this forward: L0's sampled ones, leaves (importance), or constants.
template <typename T>
Var<T> Model<T>::site_gates(Tape<T>& tape, int64_t site, const ForwardOptions& opt, const Var<T>* gate_vars) {
  const int gi = static_cast<int>(site);
  if (gate_vars != nullptr) return gate_vars[site];
  return opt.gate_grads ? tape.leaf(gates_.value(gi), gates_.grad(gi)) : tape.constant(gates_.value(gi));
}

template <typename T>
Var<T> Model<T>::param(Tape<T>& tape, int index) {
  return tape.leaf(params_.value(index), params_.grad(index));
}

template <typename T>
Var<T> Model<T>::project(Tape<T>& tape, const Var<T>& x, LinearParams p) {
  return p.bias >= 0 ? linear(x, param(tape, p.weight), param(tape, p.bias)) : linear(x, param(tape, p.weight));
}

template <typename T>
Var<T> Model<T>::norm(Tape<T>& tape, const Var<T>& x, NormParams p) {
  return layer_norm(x, param(tape, p.weight), param(tape, p.bias), spec_.norm_eps);
}

template <typename T>
Var<T> Model<T>::bias(Tape<T>& tape, LinearParams p) {
  return p.bias >= 0 ? param(tape, p.bias) : Var<T>{};
}

// project(norm(x)), without keeping norm(x) (ops/recomputed_linear.h).
template <typename T>
Var<T> Model<T>::norm_project(Tape<T>& tape, const Var<T>& x, NormParams n, LinearParams p) {
  return layer_norm_linear(x, param(tape, n.weight), param(tape, n.bias), spec_.norm_eps, param(tape, p.weight),
                           bias(tape, p));
}

// Embeddings: x [B,T,C] = tok_emb[tokens] + pos[t0:t0+T] (broadcast over the batch); pos_emb is
// the learned table's index, or -1 with sinusoidal positions; t0 > 0 in a cached decoding step.
template <typename T>
Var<T> Model<T>::embed(Tape<T>& tape, const int32_t* tokens, int64_t B, int64_t T_, int pos_emb, int64_t stream,
                       const ForwardOptions& opt, int64_t t0) {
  const ModelSpec& s = spec_;
  const int64_t C = s.d_model;
  HEADLAB_CHECK(
      T_ >= 1 && t0 >= 0 && t0 + T_ <= s.max_seq_len,
      "model: positions [" << t0 << ", " << t0 + T_ << ") are outside [0, max_seq_len=" << s.max_seq_len << "]");
  Var<T> x = embedding(tape, tokens, Shape{B, T_}, param(tape, index_.tok_emb));
  if (s.positions == Positions::learned) {
    x = add(x, slice(param(tape, pos_emb), 0, t0, T_));
  } else {
    x = add(x, tape.constant(Tensor<T>(static_cast<T*>(sinusoid_.data()) + t0 * C, {T_, C})));
  }
  return opt.training && s.dropout > 0 ? dropout(x, s.dropout, dropout_site(opt.dropout_seed, stream, 0)) : x;
}

template <typename T>
Var<T> Model<T>::self_attention_qkv(Tape<T>& tape, const Var<T>& x, const BlockParams& blk, AttentionShape shape) {
  const int64_t B = x.shape()[0], T_ = x.shape()[1];
  return reshape(norm_project(tape, x, blk.ln1, blk.qkv), {B, T_, shape.heads + 2 * shape.kv_heads, shape.d_head});
}

namespace {

AttentionOptions site_attention_options(const ModelSpec& spec, AttentionSite site, const ModelInput& in) {
  const ModelKindInfo& kind = model_kind_info(spec.kind);
  AttentionOptions o;
  o.causal = site.kind == AttentionKind::dec && kind.causal;
  o.key_padding = site.kind == AttentionKind::dec || !kind.source ? in.key_padding : in.source_padding;
  return o;
}

}  // namespace

template <typename T>
typename Model<T>::AttentionInputs Model<T>::attention_inputs(Tape<T>& tape, int64_t site_index, const Var<T>& x,
                                                              const Var<T>& memory) {
  const AttentionSite site = spec_.site_at(site_index);
  const AttentionShape shape = spec_.attention_shape(site);
  const int64_t H = shape.heads, Hkv = shape.kv_heads, B = x.shape()[0];
  HEADLAB_CHECK(H > 0, "model: attention site " << site_index << " has no heads (removed whole)");
  if (site.kind == AttentionKind::cross) {
    HEADLAB_CHECK(memory.defined(), "model: a cross-attention site's keys and values need the encoder's output");
    const CrossParams& c = index_.blocks[static_cast<size_t>(site.layer)].cross;
    const Var<T> q = reshape(norm_project(tape, x, c.ln, c.q), {B, x.shape()[1], H, shape.d_head});
    const Var<T> kv = reshape(project(tape, memory, c.kv), {B, memory.shape()[1], 2 * Hkv, shape.d_head});
    return {q, slice(kv, 2, 0, Hkv), slice(kv, 2, Hkv, Hkv)};
  }
  const auto& blocks =
      site.kind == AttentionKind::enc && model_kind_info(spec_.kind).source ? index_.encoder_blocks : index_.blocks;
  const Var<T> qkv = self_attention_qkv(tape, x, blocks[static_cast<size_t>(site.layer)], shape);
  return {slice(qkv, 2, 0, H), slice(qkv, 2, H, Hkv), slice(qkv, 2, H + Hkv, Hkv)};
}

template <typename T>
Var<T> Model<T>::site_attention(Tape<T>& tape, int64_t site_index, const ModelInput& in, const AttentionInputs& qkv) {
  const AttentionSite site = spec_.site_at(site_index);
  return attention(qkv.q, qkv.k, qkv.v, site_attention_options(spec_, site, in),
                   tape.constant(gates_.value(static_cast<int>(site_index))));
}

// attention(q, k, v) of LN1(x), q/k/v cut from one fused projection without copies. With a
// cache, the new keys and values are appended to layer l's and the queries attend over all of
// them (causal: the new positions come last).
template <typename T>
Var<T> Model<T>::attend(Tape<T>& tape, const Var<T>& x, const BlockParams& blk, AttentionShape shape, bool causal,
                        const uint8_t* key_padding, const ForwardOptions& opt, const Var<T>& gates, KvCache<T>* cache,
                        int64_t l) {
  const int64_t T_ = x.shape()[1], H = shape.heads, Hkv = shape.kv_heads;
  if (H == 0) return {};  // removed whole: add_attention adds the projection's bias alone
  Var<T> qkv = self_attention_qkv(tape, x, blk, shape);
  Var<T> q = slice(qkv, 2, 0, H), k = slice(qkv, 2, H, Hkv), v = slice(qkv, 2, H + Hkv, Hkv);
  if (cache != nullptr) {
    const int64_t t0 = cache->length();
    cache->self_keys(l).narrow(1, t0, T_).copy_from(k.value());
    cache->self_values(l).narrow(1, t0, T_).copy_from(v.value());
    k = tape.constant(cache->self_keys(l).narrow(1, 0, t0 + T_));
    v = tape.constant(cache->self_values(l).narrow(1, 0, t0 + T_));
    key_padding = nullptr;  // decoded rows are all real tokens
  }
  AttentionOptions attn_opt;
  attn_opt.causal = causal;
  attn_opt.key_padding = key_padding;
  attn_opt.keep_probs = opt.keep_probs;
  return attention(q, k, v, attn_opt, gates);
}

// Cross-attention: queries from LN_c(x) [B,T,C], keys and values from the encoder's output
// memory [B,S,C] (one fused projection) or from the cache's (start_decoding made them), every
// real source token visible.
template <typename T>
Var<T> Model<T>::cross_attend(Tape<T>& tape, const Var<T>& x, const Var<T>& memory, const BlockParams& blk,
                              AttentionShape shape, const ModelInput& in, const ForwardOptions& opt,
                              const Var<T>& gates, KvCache<T>* cache, int64_t l) {
  const int64_t B = in.batch_size, T_ = in.seq_len, H = shape.heads, Hkv = shape.kv_heads;
  if (H == 0) return {};  // removed whole, as attend
  Var<T> q = reshape(norm_project(tape, x, blk.cross.ln, blk.cross.q), {B, T_, H, shape.d_head});
  AttentionOptions attn_opt;
  attn_opt.causal = false;
  attn_opt.keep_probs = opt.keep_probs;
  if (cache != nullptr) {
    // The rows of one source are consecutive and their queries independent (no causal mask), so
    // they attend as one batch item of (rows / sources) * T queries over the source's one K/V.
    const int64_t sources = cache->sources();
    attn_opt.key_padding = cache->source_padding();
    const Var<T> a =
        attention(reshape(q, {sources, B / sources * T_, H, shape.d_head}), tape.constant(cache->cross_keys(l)),
                  tape.constant(cache->cross_values(l)), attn_opt, gates);
    return reshape(a, {B, T_, H, shape.d_head});
  }
  Var<T> kv = reshape(project(tape, memory, blk.cross.kv), {B, in.source_len, 2 * Hkv, shape.d_head});
  attn_opt.key_padding = in.source_padding;
  return attention(q, slice(kv, 2, 0, Hkv), slice(kv, 2, Hkv, Hkv), attn_opt, gates);
}

// x += proj(a). Without dropout the projection adds into the residual stream as one op, which
// does not keep the projection. A site without heads (a undefined) adds the bias alone.
template <typename T>
Var<T> Model<T>::add_attention(Tape<T>& tape, const Var<T>& x, const Var<T>& a, LinearParams proj, int64_t stream,
                               int site, const ForwardOptions& opt) {
  if (!a.defined() || a.shape()[2] == 0) return add_bias_only(tape, x, proj, stream, site, opt);
  const Shape& as = a.shape();  // [B,T,H,Dh]
  Var<T> flat = reshape(a, {as[0], as[1], as[2] * as[3]});
  if (!(opt.training && spec_.dropout > 0))
    return residual_linear(x, flat, param(tape, proj.weight), bias(tape, proj), LinearInput::plain);
  return add(x, dropout(project(tape, flat, proj), spec_.dropout, dropout_site(opt.dropout_seed, stream, site)));
}

// x += mlp(x): fc -> activation -> proj; without dropout, gelu(fc) is not kept either. The FFN
// gates g scale the hidden units before the projection: W (g * act) = (W diag(g)) act, so they
// fold into the projection's weight (gated_mlp_weight) and the fused gelu-projection stays.
template <typename T>
Var<T> Model<T>::add_mlp(Tape<T>& tape, const Var<T>& x, const BlockParams& blk, int64_t mlp_block, int64_t stream,
                         const ForwardOptions& opt) {
  const ModelSpec& s = spec_;
  if (s.units_at_block(mlp_block) == 0) return add_bias_only(tape, x, blk.mlp_proj, stream, 2, opt);
  const bool dropout_on = opt.training && s.dropout > 0;
  Var<T> h = norm_project(tape, x, blk.ln2, blk.fc);
  const Var<T> w = gated_mlp_weight(tape, blk, mlp_block, opt);
  if (s.activation == Activation::gelu && !dropout_on)
    return residual_linear(x, h, w, bias(tape, blk.mlp_proj), LinearInput::gelu);
  Var<T> act = s.activation == Activation::gelu ? gelu(h) : relu(h);
  if (!dropout_on) return residual_linear(x, act, w, bias(tape, blk.mlp_proj), LinearInput::plain);
  return add(x,
             dropout(linear(act, w, bias(tape, blk.mlp_proj)), s.dropout, dropout_site(opt.dropout_seed, stream, 2)));
}

// What a projection of nothing adds: its bias, b = 0 W^T + b exactly, which is what the masked
// model's projection gives when every head (unit) feeding it is gated to 0; with dropout on, the
// same dropout stream and mask over b broadcast to [B,T,C], so a removed layer or block computes
// the masked model bit for bit in training too. No bias: x itself.
template <typename T>
Var<T> Model<T>::add_bias_only(Tape<T>& tape, const Var<T>& x, LinearParams proj, int64_t stream, int site,
                               const ForwardOptions& opt) {
  if (proj.bias < 0) return x;
  const Var<T> b = bias(tape, proj);
  if (!(opt.training && spec_.dropout > 0)) return add(x, b);
  const Var<T> zeros = tape.constant(tape.arena().template zeros<T>(x.shape()));
  return add(x, dropout(add(zeros, b), spec_.dropout, dropout_site(opt.dropout_seed, stream, site)));
}

template <typename T>
Var<T> Model<T>::gated_mlp_weight(Tape<T>& tape, const BlockParams& blk, int64_t mlp_block, const ForwardOptions& opt) {
  const Var<T> w = param(tape, blk.mlp_proj.weight);
  const int gi = static_cast<int>(mlp_block);
  if (ffn_gate_vars_ != nullptr) return mul(w, ffn_gate_vars_[mlp_block]);  // L0's sampled gates
  const Tensor<T> g = ffn_gates_.value(gi);
  if (opt.ffn_gate_grads) return mul(w, tape.leaf(g, ffn_gates_.grad(gi)));
  for (int64_t f = 0; f < g.numel(); ++f)
    if (g.data()[f] != T(1)) return mul(w, tape.constant(g));
  return w;  // every gate 1: the ungated model, bit for bit
}

// Decoder: logits of every token; encoder: of the pooled sequence. The loss when there are targets.
template <typename T>
ModelOutput<T> Model<T>::output(Tape<T>& tape, const Var<T>& x_in, const ModelInput& in, double label_smoothing) {
  const ModelSpec& s = spec_;
  const int64_t B = in.batch_size, T_ = in.seq_len, C = s.d_model;
  ModelOutput<T> out;
  if (model_kind_info(s.kind).lm_head) {
    out.logits = norm_project(tape, reshape(x_in, {B * T_, C}), index_.ln_f, index_.head);
  } else {
    Var<T> x = norm(tape, x_in, index_.ln_f);
    // pooled [B,C] = P x, with P [B, B*T] picking the first token or averaging real tokens.
    Tensor<T> pool = tape.arena().template zeros<T>({B, B * T_});
    for (int64_t b = 0; b < B; ++b) {
      if (s.pooling == Pooling::first) {
        pool(b, b * T_) = T(1);
        continue;
      }
      int64_t n_real = 0;
      for (int64_t t = 0; t < T_; ++t) n_real += in.key_padding == nullptr || in.key_padding[b * T_ + t];
      for (int64_t t = 0; t < T_; ++t)
        if (in.key_padding == nullptr || in.key_padding[b * T_ + t]) pool(b, b * T_ + t) = T(1) / T(n_real);
    }
    Var<T> pooled = matmul(tape.constant(pool), reshape(x, {B * T_, C}));
    out.logits = project(tape, pooled, index_.head);
  }
  if (in.targets != nullptr) out.loss = cross_entropy(out.logits, in.targets, -1, label_smoothing);
  return out;
}

template <typename T>
double Model<T>::forward_flops_per_token(int64_t seq_len) const {
  const ModelSpec& s = spec_;
  const double C = s.d_model, T_ = static_cast<double>(seq_len);
  // 2 flops per multiply-add: projections, MLP, attention scores and A*V (full T x T, as the
  // PyTorch reference counts), LM head. Sites may differ in heads and blocks in MLP units (a
  // pruned model). An encoder_decoder counts per target token with a source as long as the
  // target: its encoder blocks, and per decoder block the cross-attention's projections and scores.
  double flops = model_kind_info(s.kind).lm_head ? 2 * C * s.vocab_size : 0;
  for (const AttentionSite& site : s.attention_sites()) {
    const AttentionShape a = s.attention_shape(site);
    const double H = a.heads, Hkv = a.kv_heads, Dh = a.d_head;
    flops += 2 * C * (H + 2 * Hkv) * Dh + 2 * H * Dh * C + 2 * 2 * H * Dh * T_;
  }
  for (int64_t b = 0; b < s.mlp_blocks(); ++b) flops += 2 * 2 * C * static_cast<double>(s.units_at_block(b));
  return flops;
}

template class Model<float>;
template class Model<double>;

}  // namespace headlab
