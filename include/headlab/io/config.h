// Run configuration: one plain struct per TOML section ([model], [data], [train]), generated from
// the key tables below. Each row declares one key, once: the field (= the key's name after the
// section), its C++ type, default, allowed values and a one-line doc. Parsing, `--set` overrides,
// to_toml, type/range checks, unknown-key suggestions, configs/default.toml and docs/config.md all
// come from these rows or are tested against them. Everything else is validate()'s cross-key checks.
//   Config c = load_config("configs/default.toml", {"model.n_heads=8", "data.offsets=[1,2]"});
// Bad input throws one-line headlab::Error naming file, line and key (the CLI exits with code 2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

using IntList = std::vector<int64_t>;

// X(field, type, default, allowed, doc). `allowed` is evaluated only in src/io/config_schema.cpp:
// any(), positive(), non_negative(), at_least(n), closed(lo, hi) = [lo, hi], half_open(lo, hi) =
// [lo, hi), open_interval(lo, hi) = (lo, hi), one_of("a|b"); arrays are checked element by
// element. Docs must not contain '|': they become Markdown table cells in docs/config.md.
#define HEADLAB_MODEL_KEYS(X)                                                                                         \
  X(kind, std::string, "decoder", one_of(model_kind_choices()),                                                       \
    "decoder: causal LM (next-token loss); encoder: bidirectional, with a classification head; encoder_decoder: "     \
    "translation (an encoder over the source, a decoder with cross-attention to it)")                                 \
  X(vocab_size, int64_t, 256, at_least(2), "token ids are 0..vocab_size-1 (256: raw bytes)")                          \
  X(d_model, int64_t, 128, positive(), "width of the residual stream (C)")                                            \
  X(n_heads, int64_t, 4, positive(), "query heads per attention layer (H)")                                           \
  X(n_kv_heads, int64_t, 0, non_negative(), "key/value heads (Hkv): 0 = n_heads (MHA), 1 = MQA, else GQA")            \
  X(d_head, int64_t, 0, non_negative(), "width of one head (Dh): 0 = d_model / n_heads")                              \
  X(n_layers, int64_t, 2, positive(), "transformer blocks (L); an encoder_decoder's decoder blocks")                  \
  X(n_encoder_layers, int64_t, 0, non_negative(), "encoder_decoder: encoder blocks; 0 = n_layers")                    \
  X(enc_n_heads, int64_t, 0, non_negative(),                                                                          \
    "encoder_decoder: query heads of the encoder's self-attention; 0 = n_heads")                                      \
  X(enc_n_kv_heads, int64_t, 0, non_negative(),                                                                       \
    "encoder_decoder: key/value heads of the encoder's self-attention; 0 = enc_n_heads")                              \
  X(enc_d_head, int64_t, 0, non_negative(), "encoder_decoder: head width of the encoder; 0 = d_model / enc_n_heads")  \
  X(cross_n_heads, int64_t, 0, non_negative(), "encoder_decoder: query heads of the cross-attention; 0 = n_heads")    \
  X(cross_n_kv_heads, int64_t, 0, non_negative(),                                                                     \
    "encoder_decoder: key/value heads of the cross-attention; 0 = cross_n_heads")                                     \
  X(cross_d_head, int64_t, 0, non_negative(),                                                                         \
    "encoder_decoder: head width of the cross-attention; 0 = d_model / cross_n_heads")                                \
  X(layer_heads, IntList, (IntList{}), non_negative(),                                                                \
    "query heads of each layer (encoder_decoder: of each attention site, in order the encoder layers, then self and " \
    "cross per decoder layer; a physically pruned model, MHA only; 0 = the attention layer removed whole, its "       \
    "output projection's bias alone added); [] = n_heads everywhere")                                                 \
  X(active_heads, IntList, (IntList{}), non_negative(),                                                               \
    "heads switched on in each layer (encoder_decoder: each attention site), the first n (gate 1); the rest are "     \
    "gated to 0 from init on, so never trained; [] = all")                                                            \
  X(mlp_ratio, int64_t, 4, positive(), "MLP hidden width = mlp_ratio * d_model")                                      \
  X(mlp_units, IntList, (IntList{}), non_negative(),                                                                  \
    "hidden units of each MLP block (encoder_decoder: the encoder's blocks, then the decoder's; a model with FFN "    \
    "units physically removed; 0 = the block removed whole, its output projection's bias alone added); [] = "         \
    "mlp_ratio * d_model everywhere")                                                                                 \
  X(max_seq_len, int64_t, 256, positive(), "longest sequence the position table covers")                              \
  X(positions, std::string, "learned", one_of("learned|sinusoidal"), "position encoding added to embeddings")         \
  X(dropout, double, 0.0, half_open(0, 1), "dropout on the embeddings and on each residual branch")                   \
  X(tie_embeddings, bool, false, any(), "decoder: share the token embedding with the LM head")                        \
  X(activation, std::string, "gelu", one_of("gelu|relu"), "MLP nonlinearity")                                         \
  X(norm_eps, double, 1e-5, positive(), "epsilon inside LayerNorm")                                                   \
  X(bias, bool, true, any(), "bias vectors in the linear layers and LayerNorms")                                      \
  X(init_std, double, 0.02, positive(), "std of the normal init of weights and embeddings")                           \
  X(n_classes, int64_t, 2, at_least(2), "encoder: classes of the classification head")                                \
  X(pooling, std::string, "first", one_of("first|mean"), "encoder: classify the first position or the mean")

#define HEADLAB_DATA_KEYS(X)                                                                                          \
  X(task, std::string, "text", one_of(task_choices()),                                                                \
    "what to train on: text = next token of data.path (data.tokenizer); translate = sentence pairs "                  \
    "(encoder_decoder); the others are generated tasks (docs/config.md)")                                             \
  X(path, std::string, "bible", any(),                                                                                \
    "text corpus for task=text, relative to the working directory (a run stores it absolute); bible = the KJV, "      \
    "exported once per user to the cache; translate: the source file, or bible = the Bible's verse pairs")            \
  X(target_path, std::string, "", any(),                                                                              \
    "translate: the target file, line-aligned with the source file data.path; empty when data.path = bible")          \
  X(source_module, std::string, "engKJV2006eb", any(),                                                                \
    "translate, data.path = bible: the source side's SWORD module (engKJV2006eb, engWEB2015eb or spaRV1909eb)")       \
  X(target_module, std::string, "spaRV1909eb", any(), "translate, data.path = bible: the target side's SWORD module") \
  X(val_book, std::string, "Ruth", any(), "translate, data.path = bible: the book held out as the val split")         \
  X(test_book, std::string, "Mark", any(), "translate, data.path = bible: the book held out as the test split")       \
  X(seq_len, int64_t, 128, positive(),                                                                                \
    "tokens per training sequence (T); at most model.max_seq_len; translate: the most target tokens + 1")             \
  X(source_len, int64_t, 0, non_negative(),                                                                           \
    "translate: the most source tokens + 1 (S, the encoder's length); 0 = data.seq_len")                              \
  X(batch_tokens, int64_t, 3000, positive(),                                                                          \
    "translate: token budget of a batch, rows x its longest row (S or T); replaces train.batch_size")                 \
  X(seed, int64_t, 0, non_negative(),                                                                                 \
    "seed for generated examples and for sampling training windows; translate: the train batches and their order")    \
  X(train_fraction, double, 0.9, open_interval(0, 1),                                                                 \
    "text: leading fraction of the corpus trained on; translate files: of the line pairs")                            \
  X(val_fraction, double, 0.05, open_interval(0, 1),                                                                  \
    "text and translate files: next fraction, evaluated on; the rest is test")                                        \
  X(require_utf8, bool, false, any(),                                                                                 \
    "text: refuse a file that is not valid UTF-8 without NUL bytes (the whole file is checked); off = any bytes")     \
  X(tokenizer, std::string, "bytes", one_of("bytes|sentencepiece"),                                                   \
    "text and translate: bytes = one token per byte (vocab 256; translate adds <pad> <s> </s>: 259); "                \
    "sentencepiece = subwords trained on the train split's lines, vocab data.vocab_size (a run stores its "           \
    "tokenizer and reuses it)")                                                                                       \
  X(tokenizer_model, std::string, "unigram", one_of("unigram|bpe"), "sentencepiece: the subword model")               \
  X(vocab_size, int64_t, 0, non_negative(),                                                                           \
    "generated tasks: alphabet size, 0 = model.vocab_size; sentencepiece: its vocabulary, specials included (>= 8)")  \
  X(k, int64_t, 2, positive(), "induction: length of the repeated pattern that predicts the next token")              \
  X(offsets, IntList, (IntList{1, 3}), positive(), "k_relation: the target at t depends on the tokens at t - offset") \
  X(min_len, int64_t, 0, non_negative(), "generated tasks: shortest item sequence; 0 = max_len")                      \
  X(max_len, int64_t, 0, non_negative(), "generated tasks: longest item sequence; 0 = as long as seq_len allows")     \
  X(train_examples, int64_t, 0, non_negative(), "generated tasks: fixed training set size; 0 = fresh every step")

#define HEADLAB_TRAIN_KEYS(X)                                                                                    \
  X(steps, int64_t, 1000, positive(), "optimizer steps")                                                         \
  X(batch_size, int64_t, 16, positive(), "sequences per micro-batch (B)")                                        \
  X(grad_accum, int64_t, 1, positive(), "micro-batches summed per step (tokens/step = B * T * grad_accum)")      \
  X(prefetch, bool, true, any(),                                                                                 \
    "fill the next batch on a background thread while a step runs (results are identical either way)")           \
  X(seed, int64_t, 0, non_negative(), "seed for initialization and dropout")                                     \
  X(optimizer, std::string, "adamw", one_of("adamw|sgd"), "adamw (decoupled weight decay) or sgd with momentum") \
  X(lr, double, 2e-3, positive(), "peak learning rate, reached after warmup")                                    \
  X(min_lr_ratio, double, 0.1, closed(0, 1), "final learning rate = lr * min_lr_ratio (cosine and linear)")      \
  X(warmup_steps, int64_t, -1, at_least(-1),                                                                     \
    "linear warmup from 0 to lr; at most train.steps; -1 = a tenth of train.steps, at most 100")                 \
  X(schedule, std::string, "cosine", one_of("cosine|linear|constant"), "learning-rate decay after warmup")       \
  X(weight_decay, double, 0.1, non_negative(), "decoupled weight decay (adamw) or L2 (sgd)")                     \
  X(beta1, double, 0.9, half_open(0, 1), "adamw first-moment decay")                                             \
  X(beta2, double, 0.95, half_open(0, 1), "adamw second-moment decay")                                           \
  X(adam_eps, double, 1e-8, positive(), "adamw denominator epsilon")                                             \
  X(momentum, double, 0.9, half_open(0, 1), "sgd momentum (0 = plain sgd)")                                      \
  X(grad_clip, double, 1.0, non_negative(), "clip the global gradient norm to this; 0 = off")                    \
  X(label_smoothing, double, 0.0, half_open(0, 1), "eps of the training loss's targets; val_loss is the NLL")    \
  X(teacher, std::string, "", any(),                                                                             \
    "a checkpoint to distil from: the loss mixes the teacher's soft targets in (Hinton et al.); \"\" = none")    \
  X(distill_alpha, double, 0.5, closed(0, 1), "with train.teacher: weight of the soft loss, 1 - it the hard's")  \
  X(distill_temperature, double, 2.0, positive(), "with train.teacher: temperature of both softmaxes")           \
  X(decay_biases, bool, false, any(), "apply weight decay to bias vectors")                                      \
  X(decay_norms, bool, false, any(), "apply weight decay to LayerNorm gains and biases")                         \
  X(decay_embeddings, bool, true, any(), "apply weight decay to token and position embeddings")                  \
  X(eval_every, int64_t, 100, non_negative(), "steps between evaluations; 0 = only after the last step")         \
  X(eval_batches, int64_t, 8, positive(), "batches per evaluation")                                              \
  X(eval_bleu_sentences, int64_t, 200, non_negative(),                                                           \
    "translate: val sentences translated (greedy) for val_bleu at each evaluation; 0 = none")                    \
  X(log_every, int64_t, 10, positive(), "steps between training-loss log lines")                                 \
  X(checkpoint_every, int64_t, 500, non_negative(), "steps between checkpoints; 0 = only after the last step")   \
  X(keep_checkpoints, int64_t, 3, non_negative(), "newest checkpoints kept on disk; 0 = keep all")               \
  X(threads, int64_t, 0, non_negative(), "worker threads; 0 = all cores (OMP_NUM_THREADS if set)")

#define HEADLAB_CONFIG_FIELD(field, type, default_value, allowed, doc) type field = default_value;

struct ModelConfig {
  HEADLAB_MODEL_KEYS(HEADLAB_CONFIG_FIELD)
  bool operator==(const ModelConfig&) const = default;
};
struct DataConfig {
  HEADLAB_DATA_KEYS(HEADLAB_CONFIG_FIELD)
  bool operator==(const DataConfig&) const = default;
};
struct TrainConfig {
  HEADLAB_TRAIN_KEYS(HEADLAB_CONFIG_FIELD)
  bool operator==(const TrainConfig&) const = default;
};
struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  bool operator==(const Config&) const = default;
};

#undef HEADLAB_CONFIG_FIELD

// Reads a TOML file, applies "key=value" overrides in order (values are TOML: 8, [1, 2], "x"; a
// string key also takes a bare word), then validate()s. Keys not given keep their defaults.
// `override_origins`, when given, names where each override was written ("grid.toml:5 [set]") in
// error messages; otherwise they are "--set key=value".
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   const std::vector<std::string>& override_origins = {});
// The same on text; `origin` names the text in error messages (a path, or "<string>").
Config parse_config_text(const std::string& toml_text, const std::string& origin,
                         const std::vector<std::string>& overrides = {},
                         const std::vector<std::string>& override_origins = {});

// The key of a "key=value" override ("model.n_heads" of "model.n_heads = 8"); throws on text that
// is not key=value.
std::string override_key(const std::string& text);

// Throws on a value outside its key's allowed set or an impossible combination
// (d_model vs n_heads, data.seq_len vs model.max_seq_len, ...). The model's own rules (n_heads vs
// n_kv_heads, layer_heads, active_heads, ...) are nn's (nn/model.h: spec_problem), checked on
// model_spec(config) and reported naming the keys.
void validate(const Config& config);

// The model section as the spec nn builds: the one translation of the model keys (n_kv_heads = 0
// and d_head = 0 resolved, d_mlp = mlp_ratio * d_model, names to enums); every other model key is
// the spec field of the same name. For a config whose keys are each in their allowed set.
ModelSpec model_spec(const Config& config);

// Every key, grouped by section, in table order; parse_config_text(to_toml(c), ...) == c.
std::string to_toml(const Config& config);

// One value as `--set` accepts it (8, 3e-4, true, sinusoidal, [1, 3]), for sweep logs and run names.
std::string config_value(const Config& config, const std::string& key);

// Dotted key names in table order ("model.kind", ..., "train.threads").
std::vector<std::string> config_keys();

// A TOML document that is not a config (a sweep file): its top-level keys in the document's order
// (toml++'s, by name), each with its line. A table's values come flattened to dotted keys ([grid.model]
// n_heads, model.n_heads and "model.n_heads" alike) in the order they were written. Values are TOML
// text (4, "x", [1, 3]), which `--set key=value` reads back. A syntax error is one line:
// "TOML syntax error in <origin>:<line>:<column>: <why>".
struct TomlEntry {
  enum class Kind { string, array, table, other };
  std::string key;
  int64_t line = 0;
  Kind kind = Kind::other;
  std::string text;                // the value as TOML text; empty for a table
  std::string string_value;        // kind == string: the string itself
  std::vector<std::string> items;  // kind == array: each element as TOML text
  std::vector<TomlEntry> entries;  // kind == table: its values, flattened
};
std::vector<TomlEntry> read_toml_entries(const std::string& toml_text, const std::string& origin);

// One row of the key table, rendered for docs and --help.
struct ConfigKeyInfo {
  std::string key;            // "model.n_heads"
  std::string type;           // integer | float | boolean | string | array of integers
  std::string default_value;  // as TOML: 4, "decoder", [1, 3]
  std::string allowed;        // "> 0", "[0, 1)", "decoder, encoder", or "" for anything
  std::string doc;
};
const std::vector<ConfigKeyInfo>& config_schema();

}  // namespace headlab
