// The transformer: a decoder-only causal LM, a bidirectional encoder with a classification head,
// or an encoder-decoder (translation), built from tape ops (no gradient code here: every op
// brings its own backward).
//   x = tok_emb[tokens] + pos;  per block: x += Attn(LN1(x));  x += MLP(LN2(x));  x = LN_f(x)
//   decoder: logits [B,T,V] = x W_lm^T (or tok_emb^T when tied), loss = mean next-token CE
//   encoder: pooled [B,C] (first token or mean over real tokens), logits [B,n_classes]
//   encoder_decoder: m = LN_enc(encoder blocks over the source, bidirectional, source padding
//     masked); decoder blocks add between the two: x += Cross(LN_c(x), m), queries from the
//     target, keys/values from m; logits and loss as the decoder's. One embedding table serves
//     source and target (a joint vocabulary).
// Attention runs n_heads query heads of width d_head over n_kv_heads K/V heads (GQA/MQA), with
// one gate per head (1 = on, 0 = pruned) held in `gates()`, saved in checkpoints; the gates'
// gradient is Michel et al.'s head importance. A physically pruned model (nn/prune.h) has fewer
// heads at some attention sites: spec.layer_heads, read through heads_at_site(site). What a valid spec is
// lives in spec_problem() alone (validate() throws it; the config reports it naming its keys).
// Every parameter is declared once, in parameter_layout(), which also records where each sits
// (ParamIndex), so nothing looks a parameter up by a name typed again; names are module paths
// such as "blocks/0/attn/qkv/weight".
//   Model<float> model(spec); model.params().init(seed);
//   ModelOutput<float> out = model.forward(tape, input, {.training = true, .dropout_seed = s});
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "headlab/autograd/tape.h"
#include "headlab/common/error.h"
#include "headlab/nn/model_kinds.h"
#include "headlab/nn/parameters.h"

namespace headlab {

enum class Positions { learned, sinusoidal };

// The shape of one kind of attention: query heads, key/value heads (GQA/MQA) and head width.
struct AttentionShape {
  int64_t heads = 0, kv_heads = 0, d_head = 0;
  bool operator==(const AttentionShape&) const = default;
};

// Which attention a head belongs to: an encoder's self-attention (the encoder_decoder's encoder),
// a decoder's self-attention (a decoder-only model's, an encoder classifier's blocks, and the
// encoder_decoder's decoder), or the encoder_decoder's cross-attention.
enum class AttentionKind { enc, dec, cross };
const char* attention_kind_name(AttentionKind kind);  // "enc", "dec", "cross"

// One attention layer of a model: its kind and its layer within its stack.
struct AttentionSite {
  AttentionKind kind;
  int64_t layer;
};
// A head's name wherever headlab writes or reads one (heads.csv, --mask, messages): in an
// encoder_decoder "<kind>.L<layer>H<head>" ("enc.L0H3", "cross.L2H5", layer within its stack);
// in a model with one stack (decoder, encoder: every site is `dec`) "L<layer>H<head>", as heads.csv
// has always named them, since the kind tells nothing there.
std::string head_label(AttentionSite site, int64_t head, bool one_stack);
enum class Activation { gelu, relu };
enum class Pooling { first, mean };

struct ModelSpec {
  ModelKind kind = ModelKind::decoder;
  int64_t vocab_size = 256;
  int64_t d_model = 128;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 4;
  int64_t d_head = 32;
  int64_t n_layers = 2;
  int64_t d_mlp = 512;
  int64_t max_seq_len = 256;
  Positions positions = Positions::learned;
  Activation activation = Activation::gelu;
  double dropout = 0.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = false;
  bool bias = true;
  double init_std = 0.02;  // GPT-2: N(0, 0.02); residual projections / sqrt(2 n_layers)
  int64_t n_classes = 2;   // encoder
  Pooling pooling = Pooling::first;
  // Query heads of each attention site (attention_sites() order: a decoder's or encoder's layers;
  // an encoder_decoder's encoder layers, then self and cross per decoder layer), a physically
  // pruned model; empty = each kind's n_heads everywhere. Only with MHA (n_kv_heads == n_heads,
  // per kind): each site then has as many K/V heads as query heads.
  std::vector<int64_t> layer_heads;
  // Heads switched on per site, in the same order (the first active_heads[i]); the others start
  // with gate 0 and, gated, get no gradient: a layout trained from scratch, emptied sites
  // included, which layer_heads cannot express. Empty = all on. Only the initial gates depend on it.
  std::vector<int64_t> active_heads;
  // FFN hidden units of each MLP block (mlp_block() order: an encoder_decoder's encoder blocks,
  // then its decoder's; otherwise the stack's blocks), a model with units physically removed
  // (nn/prune.h); empty = d_mlp in every block.
  std::vector<int64_t> mlp_units;
  // encoder_decoder only: the encoder's blocks (n_layers counts the decoder's), and the shapes of
  // the encoder's self-attention (enc_) and of the cross-attention (cross_); the decoder's
  // self-attention is n_heads, n_kv_heads, d_head. Other kinds ignore them.
  int64_t n_encoder_layers = 0;
  int64_t enc_n_heads = 0, enc_n_kv_heads = 0, enc_d_head = 0;
  int64_t cross_n_heads = 0, cross_n_kv_heads = 0, cross_d_head = 0;

  // The one answer to "how many query heads": layer_heads at the site's index, else its kind's.
  int64_t heads_at_site(AttentionSite site) const;
  int64_t total_heads() const;  // over every attention site
  // The attention layers in gate order (Model::gates() holds one [heads] table per site): the
  // blocks' self-attention, layer by layer; an encoder_decoder has the encoder's first, then
  // each decoder layer's self- and cross-attention.
  std::vector<AttentionSite> attention_sites() const;
  // A site's position in attention_sites() (and in layer_heads, active_heads, Model::gates()).
  int64_t site_index(AttentionSite site) const;
  // Its inverse: the site at position i of attention_sites() (throws outside the range), without
  // building the list (forward_from and patching ask it once per rerun).
  AttentionSite site_at(int64_t i) const;
  // A kind's shape before any head was removed: n_heads, n_kv_heads, d_head; enc_..., cross_...
  AttentionShape kind_shape(AttentionKind kind) const;
  // The shape of a site's attention: its kind's, with heads_at_site query and K/V heads.
  AttentionShape attention_shape(AttentionSite site) const;
  // Blocks with an MLP: n_layers, and an encoder_decoder's n_encoder_layers before them. A block's
  // index among them (in mlp_units and Model::ffn_gates()): encoder block l of an
  // encoder_decoder, else block l of the (decoder) stack. And its hidden units: mlp_units or d_mlp.
  int64_t mlp_blocks() const;
  int64_t mlp_block(bool encoder, int64_t layer) const;
  int64_t units_at_block(int64_t block) const;
};

// What is wrong with a spec, or nullopt: the model's rules, in one place. Fields are spelled
// `prefix` + the ModelSpec field, so that the config, whose model keys are these fields
// (io/config.h: model_spec), passes "model." and gets messages naming its keys.
struct SpecProblem {
  std::string message;              // one line: "n_kv_heads=3 does not divide n_heads=4"
  std::vector<std::string> fields;  // the fields involved, prefixed, the one to blame first
};
std::optional<SpecProblem> spec_problem(const ModelSpec& spec, const std::string& prefix = "");
void validate(const ModelSpec& spec);  // throws headlab::Error "model: <spec_problem's message>"

// Where each parameter sits in the model's table (Parameters indices), recorded as
// parameter_layout() declares it. -1 only where the spec has no such tensor: no biases
// (bias = false), no pos_emb (sinusoidal positions), no lm_head (tied: head.weight is tok_emb).
struct LinearParams {
  int weight = -1, bias = -1;
};
struct NormParams {
  int weight = -1, bias = -1;
};
// A decoder block's cross-attention: LN_c, the query projection of the target stream, the fused
// key/value projection of the encoder's output, and the output projection.
struct CrossParams {
  NormParams ln;
  LinearParams q, kv, proj;
};
struct BlockParams {
  NormParams ln1, ln2;
  LinearParams qkv, proj, fc, mlp_proj;
  CrossParams cross;  // encoder_decoder decoder blocks; -1 elsewhere
};
struct ParamIndex {
  int tok_emb = -1, pos_emb = -1;
  std::vector<BlockParams> blocks;  // the decoder's (or the only stack's)
  NormParams ln_f;
  LinearParams head;  // lm_head (weight only, or tok_emb when tied) or cls_head
  // encoder_decoder: the encoder's positions (learned), blocks and final LayerNorm.
  int encoder_pos_emb = -1;
  std::vector<BlockParams> encoder_blocks;
  NormParams encoder_ln_f;
};
struct ParamLayout {
  std::vector<ParamSpec> specs;  // what Model allocates, in order
  ParamIndex index;              // positions in `specs`
};
// Throws what validate() throws for an invalid spec.
ParamLayout parameter_layout(const ModelSpec& spec);

// One batch as the model sees it. Pointers stay valid for the step (the backward reads them).
struct ModelInput {
  int64_t batch_size = 0, seq_len = 0;
  const int32_t* tokens = nullptr;       // [B,T]
  const int32_t* targets = nullptr;      // decoder: [B,T], -1 = ignore; encoder: labels [B]
  const uint8_t* key_padding = nullptr;  // [B,T], 1 = real token; may be null
  // encoder_decoder: the source side (tokens/targets are the target side).
  int64_t source_len = 0;
  const int32_t* source_tokens = nullptr;   // [B,S]
  const uint8_t* source_padding = nullptr;  // [B,S], 1 = real token; may be null
};

struct ForwardOptions {
  bool training = false;        // dropout on
  uint64_t dropout_seed = 0;    // distinct per step and micro-batch for reproducible dropout
  bool gate_grads = false;      // record the gates as leaves so d loss / d gate is computed
  bool ffn_gate_grads = false;  // the same for the FFN units' gates
  bool keep_probs = false;      // keep attention probabilities for attention_probs()
  double label_smoothing = 0;   // of the loss (cross_entropy's); the logits do not change
};

template <typename T>
struct ModelOutput {
  Var<T> logits;  // decoder [B*T, V]; encoder [B, n_classes]
  Var<T> loss;    // [1], mean cross-entropy over non-ignored targets
};

template <typename T>
class KvCache;  // nn/kv_cache.h

template <typename T>
class Model {
 public:
  explicit Model(const ModelSpec& spec);

  const ModelSpec& spec() const { return spec_; }
  Parameters<T>& params() { return params_; }
  const Parameters<T>& params() const { return params_; }
  // Head gates, one [heads] table per attention site (spec().attention_sites(); for decoder and
  // encoder kinds site l is layer l, "blocks/<l>/attn/gates"); not trained by the optimizer.
  Parameters<T>& gates() { return gates_; }
  const Parameters<T>& gates() const { return gates_; }
  // FFN unit gates, one [units] table per MLP block (spec().mlp_block() order;
  // "blocks/<l>/mlp/gates", "enc/<l>/mlp/gates"): hidden unit f of a block is multiplied by its
  // gate before the output projection (0 = pruned). All ones unless a unit was switched off;
  // not trained by the optimizer.
  Parameters<T>& ffn_gates() { return ffn_gates_; }
  const Parameters<T>& ffn_gates() const { return ffn_gates_; }
  // Where each parameter sits in params() (parameter_layout's index).
  const ParamIndex& param_index() const { return index_; }

  // gate_vars: null = the gates in gates() (leaves with options.gate_grads, else constants);
  // otherwise one Var per attention site (spec().attention_sites(), shape [heads]) on `tape` used
  // as the gates of this forward (L0 pruning's sampled gates). ffn_gate_vars likewise: one Var
  // per MLP block ([units]) in place of ffn_gates(). Arguments rather than ForwardOptions fields:
  // Vars are typed by T and the options are not.
  ModelOutput<T> forward(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options,
                         const Var<T>* gate_vars = nullptr, const Var<T>* ffn_gate_vars = nullptr);
  // The rest of a forward from attention site `site` on (spec().attention_sites() order: a
  // decoder's or encoder's layer; an encoder_decoder's encoder layers, then self and cross per
  // decoder layer), given the residual stream x entering the site's attention [B,T,C] (an
  // encoder site's is the source side's [B,S,C]; a cross site's is its block's stream after the
  // self-attention), and optionally the site's attention output a [B,T,H,Dh] instead of
  // computing it: head ablation passes the unmasked forward's with the masked heads' rows
  // zeroed, patching a patched one. An encoder_decoder's decoder sites read the encoder's output
  // `memory` [B,S,C] (site_inputs(), memory() and SavedForward keep a forward's); from an encoder
  // site the encoder runs on, then the whole decoder. Gates are the model's; no dropout.
  // Bit-identical to forward() when x, a and memory are what forward() computed with these
  // parameters and gates.
  ModelOutput<T> forward_from(Tape<T>& tape, const ModelInput& input, int64_t site, const Var<T>& x,
                              const Var<T>& a = {}, const Var<T>& memory = {});

  // An attention site's queries [B,T,H,Dh], keys and values [B,S,Hkv,Dh] for the stream x
  // entering it (LN1(x) W_qkv^T + b, cut head by head as forward() feeds the attention op; at a
  // cross site the queries from LN_c(x) and the keys and values from `memory`, the encoder's
  // output), and the attention of given ones with the site's masks (causal; `input`'s padding)
  // and the model's gates: for patching one head's queries, keys or values (analysis/patching.h).
  struct AttentionInputs {
    Var<T> q, k, v;
  };
  AttentionInputs attention_inputs(Tape<T>& tape, int64_t site, const Var<T>& x, const Var<T>& memory = {});
  Var<T> site_attention(Tape<T>& tape, int64_t site, const ModelInput& input, const AttentionInputs& qkv);
  // An encoder_decoder's memory from the stream leaving its last encoder block: LN_enc(x) [B,S,C].
  Var<T> encoder_output(Tape<T>& tape, const Var<T>& x);

  // Incremental decoding with a KV cache (nn/kv_cache.h), grad off. start_decoding runs an
  // encoder_decoder's encoder on `source` (source_tokens, source_padding, source_len; batch_size
  // source rows, each decoded by cache.rows() / batch_size cache rows) and caches every decoder
  // layer's cross-attention K/V; it forgets what the cache held. decode_step feeds input.seq_len
  // new tokens per cache row at positions cache.length() onwards (input.tokens [rows, n]) and
  // returns their logits [rows*n, V], as forward() computes them for those positions of the whole
  // sequence (to float precision; the tests hold both to it).
  void start_decoding(Tape<T>& tape, const ModelInput& source, KvCache<T>& cache);
  ModelOutput<T> decode_step(Tape<T>& tape, const ModelInput& input, KvCache<T>& cache);

  // Of the last forward: each attention site's output (for attention_probs()), and the residual
  // stream entering each block of the (decoder) stack; undefined Vars below `layer` after
  // forward_from.
  const std::vector<Var<T>>& attention_outputs() const { return attention_outputs_; }
  const std::vector<Var<T>>& block_inputs() const { return block_inputs_; }
  // Of the last forward, per attention site: the residual stream entering its attention (what
  // forward_from takes); an encoder_decoder's memory and the encoder's stream before LN_enc.
  const std::vector<Var<T>>& site_inputs() const { return site_inputs_; }
  const Var<T>& memory() const { return memory_; }
  const Var<T>& encoder_final_residual() const { return encoder_final_residual_; }
  // Of the last forward, for circuit analysis (analysis/logit_attribution.h): the residual stream
  // of each (decoder) block after its attention, before its MLP (an encoder_decoder's: after the
  // cross-attention), and the stream entering the final LayerNorm.
  const std::vector<Var<T>>& block_mids() const { return block_mids_; }
  const Var<T>& final_residual() const { return final_residual_; }

  // Flops per token of one forward pass at sequence length T: 2 per multiply-add.
  double forward_flops_per_token(int64_t seq_len) const;

 private:
  Model(const ModelSpec& spec, ParamLayout layout);

  Var<T> param(Tape<T>& tape, int index);
  Var<T> project(Tape<T>& tape, const Var<T>& x, LinearParams p);
  Var<T> norm(Tape<T>& tape, const Var<T>& x, NormParams p);
  Var<T> bias(Tape<T>& tape, LinearParams p);  // undefined when the layer has none
  Var<T> norm_project(Tape<T>& tape, const Var<T>& x, NormParams n, LinearParams p);
  Var<T> site_gates(Tape<T>& tape, int64_t site, const ForwardOptions& options, const Var<T>* gate_vars);
  // The stages of forward(), in order: embeddings; per layer LN1 -> q/k/v -> attention, then
  // x + proj(a) and the MLP; the final LN and the head. `stream` numbers the dropout streams of
  // a block (its layer; the encoder's blocks come after the decoder's).
  // Positions start at t0 (a cached decoding step's first new position).
  Var<T> embed(Tape<T>& tape, const int32_t* tokens, int64_t B, int64_t T_, int pos_emb, int64_t stream,
               const ForwardOptions& options, int64_t t0);
  // LN1(x) through the fused qkv projection, [B,T,H + 2 Hkv,Dh] (attend's first step, attention_qkv).
  Var<T> self_attention_qkv(Tape<T>& tape, const Var<T>& x, const BlockParams& block, AttentionShape shape);
  // With a cache (decoding), layer l's cached keys and values take part.
  Var<T> attend(Tape<T>& tape, const Var<T>& x, const BlockParams& block, AttentionShape shape, bool causal,
                const uint8_t* key_padding, const ForwardOptions& options, const Var<T>& gates, KvCache<T>* cache,
                int64_t l);
  Var<T> cross_attend(Tape<T>& tape, const Var<T>& x, const Var<T>& memory, const BlockParams& block,
                      AttentionShape shape, const ModelInput& input, const ForwardOptions& options, const Var<T>& gates,
                      KvCache<T>* cache, int64_t l);
  // x + dropout(proj(a)) for an attention output a [B,T,H,Dh].
  Var<T> add_attention(Tape<T>& tape, const Var<T>& x, const Var<T>& a, LinearParams proj, int64_t stream, int site,
                       const ForwardOptions& options);
  // x + b of a projection whose input was removed whole (a site without heads, a block without
  // units): what the masked model adds there.
  Var<T> add_bias_only(Tape<T>& tape, const Var<T>& x, LinearParams proj, int64_t stream, int site,
                       const ForwardOptions& opt);
  // x + MLP(LN2(x)) of MLP block `mlp_block` (spec().mlp_block()), its FFN gates applied.
  Var<T> add_mlp(Tape<T>& tape, const Var<T>& x, const BlockParams& block, int64_t mlp_block, int64_t stream,
                 const ForwardOptions& options);
  // The output projection's weight [C, F] with the block's FFN gates folded in, W diag(g): a leaf
  // times the gates when they are leaves (ffn_gate_grads) or not all 1, else the weight itself.
  Var<T> gated_mlp_weight(Tape<T>& tape, const BlockParams& block, int64_t mlp_block, const ForwardOptions& options);
  ModelOutput<T> output(Tape<T>& tape, const Var<T>& x, const ModelInput& input, double label_smoothing);
  // Where a (decoder) block starts: at its self-attention or, in an encoder_decoder, at its
  // cross-attention (x then the stream after the self-attention), with the attention output there
  // given or (undefined) computed.
  struct BlockStart {
    bool at_cross = false;
    Var<T> attention;
  };
  // Blocks `first` .. n_layers-1 on x, block first starting at `start`, then the output; `memory`
  // is an encoder_decoder's encoder output (or the cache holds its cross K/V).
  ModelOutput<T> forward_blocks(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options,
                                const Var<T>* gate_vars, int64_t first, Var<T> x, const BlockStart& start,
                                const Var<T>& memory, KvCache<T>* cache);
  Var<T> decoder_block(Tape<T>& tape, Var<T> x, int64_t layer, const ModelInput& input, const ForwardOptions& options,
                       const Var<T>* gate_vars, const BlockStart& start, const Var<T>& memory, KvCache<T>* cache);
  // encoder_decoder: the encoder over the source, m = LN_enc(blocks(embed(source))) [B,S,C];
  // encode_from runs blocks first .. on the stream x entering block first (whose attention
  // output is `first_attention` when defined).
  Var<T> encode(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options, const Var<T>* gate_vars);
  Var<T> encode_from(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options, const Var<T>* gate_vars,
                     int64_t first, Var<T> x, const Var<T>& first_attention);
  // The target side from the embeddings through the decoder, given the memory (forward's second half).
  ModelOutput<T> decode_all(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options,
                            const Var<T>* gate_vars, const Var<T>& memory);

  ModelSpec spec_;
  const Var<T>* ffn_gate_vars_ = nullptr;  // forward()'s ffn_gate_vars while it runs; else null
  Parameters<T> params_;
  Parameters<T> gates_;
  Parameters<T> ffn_gates_;
  ParamIndex index_;  // parameter positions, so forward() does no name lookups (and no allocation)
  Buffer sinusoid_;   // [max_seq_len, d_model] when positions = sinusoidal
  std::vector<Var<T>> attention_outputs_, block_inputs_, block_mids_,
      site_inputs_;  // capacity kept across steps: no per-step allocation
  Var<T> final_residual_, memory_, encoder_final_residual_;
};

// A model's two kinds of gates: one per attention head (Model::gates(), a table per attention
// site) and one per FFN hidden unit (Model::ffn_gates(), a table per MLP block). Pruning and the
// gate-based analyses (integrated gradients) take either.
enum class GateKind { heads, ffn_units };
template <typename T>
Parameters<T>& gates_of(Model<T>& model, GateKind kind) {
  return kind == GateKind::heads ? model.gates() : model.ffn_gates();
}
template <typename T>
const Parameters<T>& gates_of(const Model<T>& model, GateKind kind) {
  return kind == GateKind::heads ? model.gates() : model.ffn_gates();
}
// A gate table's name: an attention site's ("L1" in a one-stack model, "enc.L0", "dec.L1",
// "cross.L1" in an encoder_decoder) or an MLP block's ("L1"; "enc.L0", "dec.L1"), as heads.csv,
// units.csv and layers.csv name them.
std::string gate_table_label(const ModelSpec& spec, GateKind kind, int64_t table);
// Forward options that record the kind's gates as leaves, so the backward gives d loss / d gate.
inline ForwardOptions recording_gate_grads(GateKind kind) {
  ForwardOptions o;
  (kind == GateKind::heads ? o.gate_grads : o.ffn_gate_grads) = true;
  return o;
}

// One gate table (an attention site's head gates, or an MLP block's unit gates) set to `gates`
// for a scope (a masked forward, decoding, a point of a path); the model's own are put back at
// its end, also when the forward throws.
template <typename T>
class ScopedSiteGates {
 public:
  ScopedSiteGates(Model<T>& model, size_t site, const std::vector<T>& gates)
      : ScopedSiteGates(model.gates(), site, gates) {}
  ScopedSiteGates(Parameters<T>& tables, size_t site, const std::vector<T>& gates)
      : table_(tables.value(static_cast<int>(site))), kept_(table_.data(), table_.data() + table_.numel()) {
    HEADLAB_CHECK(static_cast<int64_t>(gates.size()) == table_.numel(),
                  "gate table " << site << " has " << table_.numel() << " entries, got " << gates.size() << " gates");
    std::copy(gates.begin(), gates.end(), table_.data());
  }
  ~ScopedSiteGates() { std::copy(kept_.begin(), kept_.end(), table_.data()); }
  ScopedSiteGates(const ScopedSiteGates&) = delete;
  ScopedSiteGates& operator=(const ScopedSiteGates&) = delete;

 private:
  Tensor<T> table_;
  std::vector<T> kept_;
};

// A block parameter's name: block_name(1, "attn/gates") = "blocks/1/attn/gates".
std::string block_name(int64_t layer, const char* rest);

// The parameter table of a spec (parameter_layout's specs), for `headlab info` and tests.
std::vector<ParamSpec> parameter_specs(const ModelSpec& spec);
// The head gates' table, one per attention site ("blocks/<l>/attn/gates", "enc/<l>/attn/gates",
// "blocks/<l>/cross/gates"; [heads]), what Model::gates() holds.
std::vector<ParamSpec> gate_specs(const ModelSpec& spec);
// The FFN unit gates' table, one per MLP block ("blocks/<l>/mlp/gates", "enc/<l>/mlp/gates";
// [units]), what Model::ffn_gates() holds.
std::vector<ParamSpec> ffn_gate_specs(const ModelSpec& spec);

extern template class Model<float>;
extern template class Model<double>;

}  // namespace headlab
