// The transformer: a decoder-only causal LM or a bidirectional encoder with a classification
// head, built from tape ops (no gradient code here: every op brings its own backward).
//   x = tok_emb[tokens] + pos;  per block: x += Attn(LN1(x));  x += MLP(LN2(x));  x = LN_f(x)
//   decoder: logits [B,T,V] = x W_lm^T (or tok_emb^T when tied), loss = mean next-token CE
//   encoder: pooled [B,C] (first token or mean over real tokens), logits [B,n_classes]
// Attention runs n_heads query heads of width d_head over n_kv_heads K/V heads (GQA/MQA), with
// one gate per head (1 = on, 0 = pruned) held in `gates()`, saved in checkpoints; the gates'
// gradient is Michel et al.'s head importance. A physically pruned model (nn/prune.h) has fewer
// heads in some layers: spec.layer_heads, read through heads_in_layer(l). What a valid spec is
// lives in spec_problem() alone (validate() throws it; the config reports it naming its keys).
// Every parameter is declared once, in parameter_layout(), which also records where each sits
// (ParamIndex), so nothing looks a parameter up by a name typed again; names are module paths
// such as "blocks/0/attn/qkv/weight".
//   Model<float> model(spec); model.params().init(seed);
//   ModelOutput<float> out = model.forward(tape, input, {.training = true, .dropout_seed = s});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "headlab/autograd/tape.h"
#include "headlab/nn/model_kinds.h"
#include "headlab/nn/parameters.h"

namespace headlab {

enum class Positions { learned, sinusoidal };
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
  // Query heads of each layer (a pruned model); empty = n_heads in every layer. Only with MHA
  // (n_kv_heads == n_heads): each layer then has as many K/V heads as query heads.
  std::vector<int64_t> layer_heads;
  // Heads switched on per layer (the first active_heads[l]); the others start with gate 0 and,
  // gated, get no gradient: a layout trained from scratch, emptied layers included, which
  // layer_heads cannot express. Empty = all on. Only the initial gates depend on it.
  std::vector<int64_t> active_heads;

  int64_t heads_in_layer(int64_t layer) const { return layer_heads.empty() ? n_heads : layer_heads[layer]; }
  int64_t kv_heads_in_layer(int64_t layer) const { return layer_heads.empty() ? n_kv_heads : layer_heads[layer]; }
  int64_t total_heads() const {
    int64_t n = 0;
    for (int64_t l = 0; l < n_layers; ++l) n += heads_in_layer(l);
    return n;
  }
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
struct BlockParams {
  NormParams ln1, ln2;
  LinearParams qkv, proj, fc, mlp_proj;
};
struct ParamIndex {
  int tok_emb = -1, pos_emb = -1;
  std::vector<BlockParams> blocks;
  NormParams ln_f;
  LinearParams head;  // lm_head (weight only, or tok_emb when tied) or cls_head
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
};

struct ForwardOptions {
  bool training = false;      // dropout on
  uint64_t dropout_seed = 0;  // distinct per step and micro-batch for reproducible dropout
  bool gate_grads = false;    // record the gates as leaves so d loss / d gate is computed
  bool keep_probs = false;    // keep attention probabilities for attention_probs()
};

template <typename T>
struct ModelOutput {
  Var<T> logits;  // decoder [B*T, V]; encoder [B, n_classes]
  Var<T> loss;    // [1], mean cross-entropy over non-ignored targets
};

template <typename T>
class Model {
 public:
  explicit Model(const ModelSpec& spec);

  const ModelSpec& spec() const { return spec_; }
  Parameters<T>& params() { return params_; }
  const Parameters<T>& params() const { return params_; }
  // Per-layer head gates, "blocks/<l>/attn/gates" [heads_in_layer(l)]; not trained by the optimizer.
  Parameters<T>& gates() { return gates_; }
  const Parameters<T>& gates() const { return gates_; }
  // Where each parameter sits in params() (parameter_layout's index).
  const ParamIndex& param_index() const { return index_; }

  // gate_vars: null = the gates in gates() (leaves with options.gate_grads, else constants);
  // otherwise n_layers Vars of shape [n_heads] on `tape` used as the gates of this forward (L0
  // pruning's sampled gates). An argument rather than a ForwardOptions field: Vars are typed by
  // T and the options are not.
  ModelOutput<T> forward(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options,
                         const Var<T>* gate_vars = nullptr);
  // The rest of a forward from block `layer` on, given the residual stream x entering that block
  // [B,T,C] (nn/saved_forward.h keeps a forward's), and optionally its attention output a
  // [B,T,H,Dh] instead of computing it: head ablation passes the unmasked forward's with the
  // masked heads' rows zeroed. Blocks use the model's gates; no dropout. Bit-identical to
  // forward() when x (and a) are what forward() computed with these parameters and gates.
  ModelOutput<T> forward_from(Tape<T>& tape, const ModelInput& input, int64_t layer, const Var<T>& x,
                              const Var<T>& a = {});

  // Of the last forward, one per layer (undefined Vars below `layer` after forward_from):
  // each layer's attention output (for attention_probs()) and the residual stream entering it.
  const std::vector<Var<T>>& attention_outputs() const { return attention_outputs_; }
  const std::vector<Var<T>>& block_inputs() const { return block_inputs_; }

  // Flops per token of one forward pass at sequence length T: 2 per multiply-add.
  double forward_flops_per_token(int64_t seq_len) const;

 private:
  Model(const ModelSpec& spec, ParamLayout layout);

  Var<T> param(Tape<T>& tape, int index);
  Var<T> project(Tape<T>& tape, const Var<T>& x, LinearParams p);
  Var<T> norm(Tape<T>& tape, const Var<T>& x, NormParams p);
  Var<T> bias(Tape<T>& tape, LinearParams p);  // undefined when the layer has none
  Var<T> norm_project(Tape<T>& tape, const Var<T>& x, NormParams n, LinearParams p);
  // The stages of forward(), in order: embeddings; per layer LN1 -> q/k/v -> attention, then
  // x + proj(a) and the MLP; the final LN and the head.
  Var<T> embed(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options);
  Var<T> attend(Tape<T>& tape, const Var<T>& x, int64_t layer, const ModelInput& input, const ForwardOptions& options,
                const Var<T>& gates);
  Var<T> finish_block(Tape<T>& tape, const Var<T>& x, const Var<T>& a, int64_t layer, const ForwardOptions& options);
  ModelOutput<T> output(Tape<T>& tape, const Var<T>& x, const ModelInput& input);
  // Blocks `first` .. n_layers-1 on x, then the output; `first_attention`, when defined, is block
  // first's attention output.
  ModelOutput<T> forward_blocks(Tape<T>& tape, const ModelInput& input, const ForwardOptions& options,
                                const Var<T>* gate_vars, int64_t first, Var<T> x, const Var<T>& first_attention);

  ModelSpec spec_;
  Parameters<T> params_;
  Parameters<T> gates_;
  ParamIndex index_;  // parameter positions, so forward() does no name lookups (and no allocation)
  Buffer sinusoid_;   // [max_seq_len, d_model] when positions = sinusoidal
  std::vector<Var<T>> attention_outputs_, block_inputs_;  // capacity kept across steps: no per-step allocation
};

// A block parameter's name: block_name(1, "attn/gates") = "blocks/1/attn/gates".
std::string block_name(int64_t layer, const char* rest);

// The parameter table of a spec (parameter_layout's specs), for `headlab info` and tests.
std::vector<ParamSpec> parameter_specs(const ModelSpec& spec);
// The head gates' table ("blocks/<l>/attn/gates", [heads in layer l]), what Model::gates() holds.
std::vector<ParamSpec> gate_specs(const ModelSpec& spec);

extern template class Model<float>;
extern template class Model<double>;

}  // namespace headlab
