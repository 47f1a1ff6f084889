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

// Distinct dropout streams per call site (layer -1 is the embedding).
uint64_t dropout_site(uint64_t seed, int64_t layer, int site) {
  return hash_combine(seed, static_cast<uint64_t>((layer + 1) * 4 + site));
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
  if (!s.layer_heads.empty()) {
    if (static_cast<int64_t>(s.layer_heads.size()) != s.n_layers)
      return problem(concat(f("layer_heads"), " has ", s.layer_heads.size(), " entries but ", f("n_layers"), "=",
                            s.n_layers, ": one per layer, or [] for ", f("n_heads"), " in every layer"),
                     {"layer_heads", "n_layers"});
    for (size_t l = 0; l < s.layer_heads.size(); ++l) {
      if (s.layer_heads[l] < 1)
        return problem(concat(f("layer_heads"), "[", l, "] must be > 0, got ", s.layer_heads[l]), {"layer_heads"});
      if (s.layer_heads[l] > s.n_heads)
        return problem(
            concat(f("layer_heads"), "[", l, "]=", s.layer_heads[l], " exceeds ", f("n_heads"), "=", s.n_heads),
            {"layer_heads", "n_heads"});
    }
    // With GQA/MQA several query heads read one K/V head, so a layer cannot drop a head's K/V rows.
    if (s.n_kv_heads != s.n_heads)
      return problem(concat(f("layer_heads"), " needs multi-head attention (", f("n_kv_heads"), " = ", f("n_heads"),
                            "), got ", f("n_kv_heads"), "=", s.n_kv_heads, ", ", f("n_heads"), "=", s.n_heads,
                            "; mask GQA/MQA heads with gates instead"),
                     {"layer_heads", "n_kv_heads"});
  }
  if (!s.active_heads.empty()) {
    if (static_cast<int64_t>(s.active_heads.size()) != s.n_layers)
      return problem(concat(f("active_heads"), " has ", s.active_heads.size(), " entries but ", f("n_layers"), "=",
                            s.n_layers, ": one per layer, or [] for every head"),
                     {"active_heads", "n_layers"});
    for (int64_t l = 0; l < s.n_layers; ++l) {
      if (s.active_heads[l] < 0)
        return problem(concat(f("active_heads"), "[", l, "] must be >= 0, got ", s.active_heads[l]), {"active_heads"});
      if (s.active_heads[l] > s.heads_in_layer(l))
        return problem(concat(f("active_heads"), "[", l, "]=", s.active_heads[l], " exceeds the layer's ",
                              s.heads_in_layer(l), " heads"),
                       {"active_heads", "n_heads", "layer_heads"});
    }
  }
  return std::nullopt;
}

void validate(const ModelSpec& spec) {
  if (const std::optional<SpecProblem> p = spec_problem(spec)) throw Error("model: " + p->message);
}

// The one declaration of every parameter: its name, shape, init and kind, and where it sits.
ParamLayout parameter_layout(const ModelSpec& s) {
  validate(s);
  const int64_t C = s.d_model, Dh = s.d_head;
  // GPT-2 init: N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layers).
  const double std = s.init_std, residual_std = s.init_std / std::sqrt(2.0 * static_cast<double>(s.n_layers));
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
  index.tok_emb = add({"tok_emb/weight", {s.vocab_size, C}, Init::normal, std, ParamKind::embedding});
  if (s.positions == Positions::learned)
    index.pos_emb = add({"pos_emb/weight", {s.max_seq_len, C}, Init::normal, std, ParamKind::embedding});
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const int64_t H = s.heads_in_layer(l), Hkv = s.kv_heads_in_layer(l);
    BlockParams b;
    b.ln1 = norm_layer(block_name(l, "ln1"));
    b.qkv = linear_layer(block_name(l, "attn/qkv"), (H + 2 * Hkv) * Dh, C, std);
    b.proj = linear_layer(block_name(l, "attn/proj"), C, H * Dh, residual_std);
    b.ln2 = norm_layer(block_name(l, "ln2"));
    b.fc = linear_layer(block_name(l, "mlp/fc"), s.d_mlp, C, std);
    b.mlp_proj = linear_layer(block_name(l, "mlp/proj"), C, s.d_mlp, residual_std);
    index.blocks.push_back(b);
  }
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
  for (int64_t l = 0; l < s.n_layers; ++l)
    g.push_back({block_name(l, "attn/gates"), {s.heads_in_layer(l)}, Init::ones, 0.0, ParamKind::weight});
  return g;
}

template <typename T>
Model<T>::Model(const ModelSpec& spec) : Model(spec, parameter_layout(spec)) {}

template <typename T>
Model<T>::Model(const ModelSpec& spec, ParamLayout layout)
    : spec_(spec), params_(std::move(layout.specs)), gates_(gate_specs(spec)), index_(std::move(layout.index)) {
  gates_.init(0);  // all ones, then the switched-off heads' zeros
  for (int64_t l = 0; l < static_cast<int64_t>(spec.active_heads.size()); ++l) {
    Tensor<T> g = gates_.value(static_cast<int>(l));
    for (int64_t h = spec.active_heads[l]; h < g.numel(); ++h) g(h) = T(0);
  }
  attention_outputs_.reserve(spec.n_layers);
  block_inputs_.reserve(spec.n_layers);
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
                                 const Var<T>* gate_vars) {
  return forward_blocks(tape, in, opt, gate_vars, 0, embed(tape, in, opt), Var<T>{});
}

template <typename T>
ModelOutput<T> Model<T>::forward_from(Tape<T>& tape, const ModelInput& in, int64_t layer, const Var<T>& x,
                                      const Var<T>& a) {
  HEADLAB_CHECK(layer >= 0 && layer < spec_.n_layers,
                "model: layer " << layer << " is outside [0, n_layers=" << spec_.n_layers << ")");
  const Shape x_shape{in.batch_size, in.seq_len, spec_.d_model};
  const Shape a_shape{in.batch_size, in.seq_len, spec_.heads_in_layer(layer), spec_.d_head};
  HEADLAB_CHECK(x.shape() == x_shape,
                "model: forward_from layer " << layer << " needs x " << x_shape.str() << ", got " << x.shape().str());
  HEADLAB_CHECK(!a.defined() || a.shape() == a_shape,
                "model: forward_from layer " << layer << " needs a " << a_shape.str() << ", got " << a.shape().str());
  return forward_blocks(tape, in, {}, nullptr, layer, x, a);
}

// Reads top to bottom as the whole model: forward() is embed, then this.
template <typename T>
ModelOutput<T> Model<T>::forward_blocks(Tape<T>& tape, const ModelInput& in, const ForwardOptions& opt,
                                        const Var<T>* gate_vars, int64_t first, Var<T> x,
                                        const Var<T>& first_attention) {
  attention_outputs_.assign(static_cast<size_t>(first), Var<T>{});
  block_inputs_.assign(static_cast<size_t>(first), Var<T>{});
  for (int64_t l = first; l < spec_.n_layers; ++l) {
    block_inputs_.push_back(x);
    Var<T> a = first_attention;
    if (l != first || !a.defined()) {
      const int gi = static_cast<int>(l);
      Var<T> gates = gate_vars != nullptr ? gate_vars[l]
                     : opt.gate_grads     ? tape.leaf(gates_.value(gi), gates_.grad(gi))
                                          : tape.constant(gates_.value(gi));
      a = attend(tape, x, l, in, opt, gates);
    }
    attention_outputs_.push_back(a);
    x = finish_block(tape, x, a, l, opt);
  }
  return output(tape, x, in);
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

// Embeddings: x [B,T,C] = tok_emb[tokens] + pos[0:T] (broadcast over the batch).
template <typename T>
Var<T> Model<T>::embed(Tape<T>& tape, const ModelInput& in, const ForwardOptions& opt) {
  const ModelSpec& s = spec_;
  const int64_t B = in.batch_size, T_ = in.seq_len, C = s.d_model;
  HEADLAB_CHECK(T_ >= 1 && T_ <= s.max_seq_len,
                "model: sequence length " << T_ << " is outside [1, max_seq_len=" << s.max_seq_len << "]");
  Var<T> x = embedding(tape, in.tokens, Shape{B, T_}, param(tape, index_.tok_emb));
  if (s.positions == Positions::learned) {
    x = add(x, slice(param(tape, index_.pos_emb), 0, 0, T_));
  } else {
    x = add(x, tape.constant(Tensor<T>(static_cast<T*>(sinusoid_.data()), {T_, C})));
  }
  return opt.training && s.dropout > 0 ? dropout(x, s.dropout, dropout_site(opt.dropout_seed, -1, 0)) : x;
}

// attention(q, k, v) of LN1(x), q/k/v cut from one fused projection without copies.
template <typename T>
Var<T> Model<T>::attend(Tape<T>& tape, const Var<T>& x, int64_t l, const ModelInput& in, const ForwardOptions& opt,
                        const Var<T>& gates) {
  const int64_t B = in.batch_size, T_ = in.seq_len, H = spec_.heads_in_layer(l), Hkv = spec_.kv_heads_in_layer(l);
  const BlockParams& blk = index_.blocks[l];
  Var<T> qkv = reshape(norm_project(tape, x, blk.ln1, blk.qkv), {B, T_, H + 2 * Hkv, spec_.d_head});
  Var<T> q = slice(qkv, 2, 0, H), k = slice(qkv, 2, H, Hkv), v = slice(qkv, 2, H + Hkv, Hkv);
  AttentionOptions attn_opt;
  attn_opt.causal = model_kind_info(spec_.kind).causal;
  attn_opt.key_padding = in.key_padding;
  attn_opt.keep_probs = opt.keep_probs;
  return attention(q, k, v, attn_opt, gates);
}

// x += proj(a);  x += mlp(x): fc -> activation -> proj. Without dropout, the projections add
// into the residual stream as one op each, which keeps neither the projection nor gelu(fc).
template <typename T>
Var<T> Model<T>::finish_block(Tape<T>& tape, const Var<T>& x_in, const Var<T>& a, int64_t l,
                              const ForwardOptions& opt) {
  const ModelSpec& s = spec_;
  const BlockParams& blk = index_.blocks[l];
  const bool dropout_on = opt.training && s.dropout > 0;
  auto residual = [&](const Var<T>& x, const Var<T>& in, LinearParams p, int site) {
    if (!dropout_on) return residual_linear(x, in, param(tape, p.weight), bias(tape, p), LinearInput::plain);
    return add(x, dropout(project(tape, in, p), s.dropout, dropout_site(opt.dropout_seed, l, site)));
  };
  const Shape& as = a.shape();  // [B,T,H,Dh]
  Var<T> x = residual(x_in, reshape(a, {as[0], as[1], as[2] * as[3]}), blk.proj, 1);
  Var<T> h = norm_project(tape, x, blk.ln2, blk.fc);
  if (s.activation == Activation::gelu && !dropout_on)
    return residual_linear(x, h, param(tape, blk.mlp_proj.weight), bias(tape, blk.mlp_proj), LinearInput::gelu);
  return residual(x, s.activation == Activation::gelu ? gelu(h) : relu(h), blk.mlp_proj, 2);
}

// Decoder: logits of every token; encoder: of the pooled sequence. The loss when there are targets.
template <typename T>
ModelOutput<T> Model<T>::output(Tape<T>& tape, const Var<T>& x_in, const ModelInput& in) {
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
  if (in.targets != nullptr) out.loss = cross_entropy(out.logits, in.targets, -1);
  return out;
}

template <typename T>
double Model<T>::forward_flops_per_token(int64_t seq_len) const {
  const ModelSpec& s = spec_;
  const double C = s.d_model, Dh = s.d_head, F = s.d_mlp;
  // 2 flops per multiply-add: projections, MLP, attention scores and A*V (full T x T, as the
  // PyTorch reference counts), LM head. Layers may differ in heads (a pruned model).
  double flops = model_kind_info(s.kind).lm_head ? 2 * C * s.vocab_size : 0;
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const double H = s.heads_in_layer(l), Hkv = s.kv_heads_in_layer(l);
    flops += 2 * C * (H + 2 * Hkv) * Dh + 2 * H * Dh * C + 2 * 2 * C * F + 2 * 2 * H * Dh * seq_len;
  }
  return flops;
}

template class Model<float>;
template class Model<double>;

}  // namespace headlab
