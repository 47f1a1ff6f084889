// A two-layer induction circuit with weights set by hand (Elhage et al. 2021; Olsson et al. 2022),
// for the circuit tools' tests: in a decoder of 2 layers x 2 heads,
//   L0H0  previous-token head: queries at position i match the key of position i-1 (positional
//         one-hots, shifted by W_Q), and it copies that key's token into subspace B;
//   L1H0  induction head: queries read the current token (subspace A), keys read B (the token
//         before the key), so position i attends to the positions right after earlier copies of
//         its token: K-composition with L0H0 (its W_K reads what L0H0's W_OV writes); it copies
//         the tokens it attends to into subspace D, which the LM head reads (logit kLogit for
//         the token it lands on): the model predicts what followed the last copy of the token;
//   L0H1, L1H1 and both MLPs are zero (their heads attend uniformly and write nothing).
// The residual stream has mean 0 and a fixed norm at every position (each one-hot a +1/-1 pair,
// LayerNorm weights 1 and biases 0), so LayerNorm only scales it by a constant and the hand-built
// scores survive it. Position 0's previous-token head can only attend to itself and so writes its
// own token into B; a constant -kSink on that one key keeps the induction head off it.
//   Model<double> model = induction_circuit_model(4, 8);   // vocab 4, sequences of up to 8 tokens
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "headlab/nn/model.h"

namespace headlab::test {

inline Model<double> induction_circuit_model(int64_t vocab, int64_t max_len) {
  ModelSpec s;
  s.kind = ModelKind::decoder;
  s.vocab_size = vocab;
  s.max_seq_len = max_len;
  s.n_layers = 2;
  s.n_heads = s.n_kv_heads = 2;
  s.d_head = std::max(max_len, vocab + 1);
  // Subspaces: A+ A- (the token), P+ P- (the position), B+ B- (the previous token), D+ D- (the
  // induction head's output).
  const int64_t a_plus = 0, a_minus = vocab, p_plus = 2 * vocab, p_minus = 2 * vocab + max_len,
                b_plus = 2 * vocab + 2 * max_len, b_minus = 3 * vocab + 2 * max_len, d_plus = 4 * vocab + 2 * max_len,
                d_minus = 5 * vocab + 2 * max_len;
  s.d_model = 6 * vocab + 2 * max_len;
  s.d_mlp = 4;
  Model<double> model(s);
  Parameters<double>& p = model.params();
  for (int i = 0; i < p.size(); ++i) {  // LayerNorm weights 1, everything else 0
    Tensor<double> t = p.value(i);
    const bool norm_weight = p.spec(i).kind == ParamKind::norm && p.spec(i).name.ends_with("/weight");
    std::fill(t.data(), t.data() + t.numel(), norm_weight ? 1.0 : 0.0);
  }
  Tensor<double> tok = p.value("tok_emb/weight"), pos = p.value("pos_emb/weight");
  const int64_t C = s.d_model, Dh = s.d_head, H = s.n_heads;
  for (int64_t t = 0; t < vocab; ++t) {
    tok.data()[t * C + a_plus + t] = 1;
    tok.data()[t * C + a_minus + t] = -1;
  }
  for (int64_t i = 0; i < max_len; ++i) {
    pos.data()[i * C + p_plus + i] = 1;
    pos.data()[i * C + p_minus + i] = -1;
  }
  // qkv weight [(H + 2H) Dh, C]: rows of query head h at h Dh, key head h at (H + h) Dh, value head
  // h at (2H + h) Dh. Scores are about kScore apart after LayerNorm's scaling and 1/sqrt(Dh).
  constexpr double kScore = 40, kSink = 80, kLogit = 10;
  auto qkv_row = [&](Tensor<double>& w, int64_t part, int64_t d) { return w.data() + ((part * H) * Dh + d) * C; };
  {
    Tensor<double> w = p.value("blocks/0/attn/qkv/weight"), proj = p.value("blocks/0/attn/proj/weight");
    const double var = 4.0 / static_cast<double>(C);  // two +1/-1 pairs in C coordinates
    const double q_scale = kScore * std::sqrt(static_cast<double>(Dh)) * var;
    for (int64_t d = 0; d + 1 < max_len; ++d) qkv_row(w, 0, d)[p_plus + d + 1] = q_scale;  // q_i = e_{i-1}
    for (int64_t d = 0; d < max_len; ++d) qkv_row(w, 1, d)[p_plus + d] = 1;                // k_j = e_j
    for (int64_t t = 0; t < vocab; ++t) qkv_row(w, 2, t)[a_plus + t] = std::sqrt(var);     // v_j = token j
    for (int64_t t = 0; t < vocab; ++t) {  // proj [C, H Dh]: head 0's dim t -> B+_t and B-_t
      proj.data()[(b_plus + t) * H * Dh + t] = 1;
      proj.data()[(b_minus + t) * H * Dh + t] = -1;
    }
  }
  {
    Tensor<double> w = p.value("blocks/1/attn/qkv/weight");
    const double var = 6.0 / static_cast<double>(C);  // A, P and B pairs
    const double q_scale = kScore * std::sqrt(static_cast<double>(Dh)) * var;
    for (int64_t t = 0; t < vocab; ++t) {
      qkv_row(w, 0, t)[a_plus + t] = q_scale;  // q_i = the current token
      qkv_row(w, 1, t)[b_plus + t] = 1;        // k_j = the token before j
    }
    // Dimension `vocab`: every query has sum(A+) = 1 (a constant), key 0 has P+_0: score -kSink.
    for (int64_t t = 0; t < vocab; ++t) qkv_row(w, 0, vocab)[a_plus + t] = q_scale;
    qkv_row(w, 1, vocab)[p_plus + 0] = -kSink / kScore;
    for (int64_t t = 0; t < vocab; ++t) qkv_row(w, 2, t)[a_plus + t] = std::sqrt(var);  // copies the token
    Tensor<double> proj = p.value("blocks/1/attn/proj/weight");
    for (int64_t t = 0; t < vocab; ++t) {  // head 0's dim t -> D+_t and D-_t
      proj.data()[(d_plus + t) * H * Dh + t] = 1;
      proj.data()[(d_minus + t) * H * Dh + t] = -1;
    }
  }
  {  // The LM head reads D+ after ln_f (four +1/-1 pairs: A, P, B, D).
    Tensor<double> head = p.value("lm_head/weight");
    const double std_f = std::sqrt(8.0 / static_cast<double>(C));
    for (int64_t t = 0; t < vocab; ++t) head.data()[t * C + d_plus + t] = kLogit * std_f;
  }
  return model;
}

}  // namespace headlab::test
