// A tiny model and batch for model-level tests (d_model 8, 2 layers, vocab 11, B=2, T=5):
//   ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 2);   // n_heads 4, n_kv_heads 2
//   Model<double> model(spec); randomize(model, 5);         // every parameter and gate non-trivial
//   TinyBatch batch(spec, 9); model.forward(tape, batch.input(), {});
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "headlab/data/tasks.h"
#include "headlab/data/translation.h"
#include "headlab/nn/model.h"
#include "support/scratch.h"

namespace headlab::test {

inline ModelSpec tiny_spec(ModelKind kind, int64_t n_heads, int64_t n_kv_heads) {
  ModelSpec s;
  s.kind = kind;
  s.vocab_size = 11;
  s.d_model = 8;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.d_head = 8 / n_heads;
  s.n_layers = 2;
  s.d_mlp = 16;
  s.max_seq_len = 8;
  s.n_classes = 3;
  return s;
}

// The same at vocabulary `vocab` and sequence length T, for two classes, with the positions each
// kind of model usually has (learned for a decoder, sinusoidal for an encoder): for head analysis.
inline ModelSpec tiny_spec(ModelKind kind, int64_t vocab, int64_t n_heads, int64_t n_kv_heads, int64_t T) {
  ModelSpec s = tiny_spec(kind, n_heads, n_kv_heads);
  s.vocab_size = vocab;
  s.max_seq_len = T;
  s.n_classes = 2;
  s.positions = kind == ModelKind::decoder ? Positions::learned : Positions::sinusoidal;
  return s;
}

// An encoder_decoder of the same size: 2 encoder and 2 decoder layers, and the encoder's and
// the cross-attention's own head counts.
inline ModelSpec tiny_seq2seq_spec(int64_t n_heads, int64_t enc_heads, int64_t cross_heads, int64_t cross_kv_heads) {
  ModelSpec s = tiny_spec(ModelKind::encoder_decoder, n_heads, n_heads);
  s.n_encoder_layers = 2;
  s.enc_n_heads = s.enc_n_kv_heads = enc_heads;
  s.enc_d_head = 8 / enc_heads;
  s.cross_n_heads = cross_heads;
  s.cross_n_kv_heads = cross_kv_heads;
  s.cross_d_head = 8 / cross_heads;
  return s;
}

// Random tokens and targets (one ignored target of an LM head; encoder rows with two trailing
// pads). An encoder_decoder also gets a source of S = 6 tokens whose second row ends in two pads.
struct TinyBatch {
  int64_t B = 2, T = 5, S = 6;
  std::vector<int32_t> tokens, targets, source;
  std::vector<uint8_t> padding, source_padding;
  explicit TinyBatch(const ModelSpec& s, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < B * T; ++i) tokens.push_back(static_cast<int32_t>(rng() % s.vocab_size));
    if (model_kind_info(s.kind).source) {
      for (int64_t i = 0; i < B * S; ++i) source.push_back(static_cast<int32_t>(rng() % s.vocab_size));
      source_padding.assign(B * S, 1);
      source_padding[B * S - 1] = source_padding[B * S - 2] = 0;
    }
    if (model_kind_info(s.kind).lm_head) {
      for (int64_t i = 0; i < B * T; ++i) targets.push_back(i == 3 ? -1 : static_cast<int32_t>(rng() % s.vocab_size));
    } else {
      for (int64_t b = 0; b < B; ++b) targets.push_back(static_cast<int32_t>(rng() % s.n_classes));
      padding.assign(B * T, 1);
      padding[B * T - 1] = padding[B * T - 2] = 0;  // the last row ends in two pad tokens
    }
  }
  ModelInput input() const {
    ModelInput in{B, T, tokens.data(), targets.data(), padding.empty() ? nullptr : padding.data()};
    if (!source.empty()) {
      in.source_len = S;
      in.source_tokens = source.data();
      in.source_padding = source_padding.data();
    }
    return in;
  }
};

// Gives every parameter (and gate) a non-trivial value, so LayerNorm gains and biases are not
// the degenerate 1/0 of the init and every path carries gradient. Gates land in [0.5, 1.5).
template <typename T>
void randomize(Model<T>& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (int64_t i = 0; i < model.params().slab_size(); ++i) model.params().values()[i] = static_cast<T>(u(rng));
  for (int i = 0; i < model.gates().size(); ++i) {
    Tensor<T> g = model.gates().value(i);
    for (int64_t h = 0; h < g.numel(); ++h) g.data()[h] = static_cast<T>(1 + u(rng));
  }
}

// The FFN unit gates in [0.5, 1.5) (randomize leaves them 1, the model's default, so that tests
// written before FFN gates keep their numbers): every unit's gate then carries gradient.
template <typename T>
void randomize_ffn_gates(Model<T>& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (int i = 0; i < model.ffn_gates().size(); ++i) {
    Tensor<T> g = model.ffn_gates().value(i);
    for (int64_t f = 0; f < g.numel(); ++f) g.data()[f] = static_cast<T>(1 + u(rng));
  }
}

// A tiny generated task for a decoder (k_relation, vocab 11) or an encoder (classify, vocab 16,
// rows of different lengths: some padding in every batch), eval_examples in val and test.
inline std::unique_ptr<Dataset> tiny_task(ModelKind kind, int64_t seq_len, int64_t eval_examples = 64) {
  TaskOptions o;
  o.seq_len = seq_len;
  o.eval_examples = eval_examples;
  if (kind == ModelKind::decoder) {
    o.task = "k_relation";
    o.vocab_size = 11;
    o.offsets = {1, 2};
  } else {
    o.task = "classify";
    o.vocab_size = 16;
    o.min_len = 1;
  }
  return make_task(o);
}

// A bytes-tokenized translate dataset over `dir`'s uneven parallel corpus (40 lines whose sources
// are longer than their targets: S != T, and source padding in most batches): seq_len 32,
// 128-token batches, half of it train and a quarter val.
inline std::unique_ptr<TranslationDataset> tiny_translation(const ScratchDir& dir) {
  TranslationOptions o;
  o.path = dir.write_uneven_parallel_corpus(40).string();
  o.target_path = (dir.dir / "tgt.txt").string();
  o.train_fraction = 0.5;
  o.val_fraction = 0.25;
  o.seq_len = 32;
  o.batch_tokens = 4 * 32;
  return std::make_unique<TranslationDataset>(o);
}

}  // namespace headlab::test
