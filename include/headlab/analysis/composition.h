// Weight-based circuit analysis (Elhage et al. 2021, "A Mathematical Framework for Transformer
// Circuits"): how much a later head reads what an earlier head writes, from the weights alone.
// In the residual stream's row-vector convention (as TransformerLens): a head's QK circuit is
// W_QK = W_Q W_K^T [C,C] (score = x_q W_QK x_k^T) and its OV circuit W_OV = W_V W_O [C,C]
// (output = A x W_OV). With a sender head s in an earlier layer than the receiver r:
//   Q-composition  ||W_OV^s W_QK^r||   / (||W_OV^s|| ||W_QK^r||)
//   K-composition  ||W_OV^s W_QK^r^T|| / (||W_OV^s|| ||W_QK^r||)
//   V-composition  ||W_OV^s W_OV^r||   / (||W_OV^s|| ||W_OV^r||)
// (Frobenius norms; TransformerLens's all_composition_scores, which covers one stack; an
// encoder_decoder's pairs follow compositions_between). The weights are taken as
// TransformerLens's from_pretrained defaults present them: each block's LN1 weight folded into
// the W_Q, W_K and W_V that read it (fold_ln), W_O centred over the residual dimensions
// (center_writing_weights: the next LayerNorm removes that mean anyway), biases left out. A query
// head h of a GQA/MQA site reads K/V head h / (H / Hkv), so W_K and W_V are that head's. An
// encoder_decoder's cross-attention head has its W_Q folded with its own LN_c weight and its W_K
// and W_V with the encoder's final LayerNorm weight (they read the encoder's output).
//   HeadWeights w = head_weights(model, site, h);
//   CompositionScores c = composition_scores(model);   // c.score(kind, sender, receiver)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

// One query head's weights in double: q, k, v [C, Dh] (row-major), o [Dh, C].
struct HeadWeights {
  int64_t d_model = 0, d_head = 0;
  std::vector<double> q, k, v, o;
};
template <typename T>
HeadWeights head_weights(const Model<T>& model, int64_t site, int64_t head);

enum class Composition { q, k, v };
inline constexpr int kCompositions = 3;
const char* composition_name(Composition kind);  // "q", "k", "v"

// One pair's score (sender writes, receiver reads), computed through Dh x Dh products (never
// forming a C x C matrix): ||A M B^T||^2 = tr(M^T (A^T A) M (B^T B)).
double composition_score(const HeadWeights& sender, const HeadWeights& receiver, Composition kind);

// Which compositions connect a sender head to a receiver (sites as in attention_sites(), with
// their indices there, which is the order the model computes them in): those through which the
// receiver reads the stream the sender has written into. In one stack (a decoder, an encoder
// classifier, an encoder_decoder's encoder or its decoder stream) a later self-attention reads it
// with its queries, keys and values (Q, K, V). An encoder_decoder's cross-attention reads the
// decoder stream with its queries only (Q, from an earlier decoder self- or cross-attention head,
// its own layer's self-attention included) and the encoder's output with its keys and values (K,
// V, from every encoder head); the decoder's self-attention never reads the encoder's stream.
std::array<bool, kCompositions> compositions_between(AttentionSite sender, int64_t sender_site, AttentionSite receiver,
                                                     int64_t receiver_site);

// Every connected pair of heads (compositions_between), heads in HeadScores order and named by
// head_label (an encoder_decoder's "enc.L0H1", "dec.L1H0", "cross.L1H2").
struct CompositionScores {
  std::vector<std::string> labels;
  std::vector<int64_t> layer, head;  // a head's layer within its stack
  std::vector<uint8_t> connected;    // [sender * N + receiver]: 1 when any composition applies
  std::array<std::vector<double>, kCompositions>
      scores;  // [sender * N + receiver]; NaN where that composition does not apply
  double score(Composition kind, size_t sender, size_t receiver) const {
    return scores[static_cast<size_t>(kind)][sender * labels.size() + receiver];
  }
};
template <typename T>
CompositionScores composition_scores(const Model<T>& model);

// Elhage et al.'s copying score of every head's full OV circuit W_E W_V W_O W_U [V, V] (from the
// token a head attends to, to the logits it adds): sum(l) / sum(|l|) over its eigenvalues l, in
// [-1, 1]; near 1 for a head that copies the token it reads (positive eigenvalues), negative for
// one that suppresses it. W_E is the token embedding, each row centred (center_writing_weights),
// W_U the LM head (or the tied embedding) with ln_f's weight folded; positions are left out, as in
// TransformerLens's OV circuit. The nonzero eigenvalues of W_E W_V W_O W_U are those of the d_head
// x d_head W_O W_U W_E W_V, which is what is solved (LAPACK, linalg/eigenvalues.h). Heads in
// HeadScores order; NaN for a head whose circuit is 0, and for an encoder_decoder's encoder heads
// (their output reaches the logits only through the cross-attention); a cross head's circuit reads
// the source token's embedding (the vocabulary is joint): does it copy a source token into the
// target? A model without an LM head (an encoder classifier) is one headlab::Error line.
template <typename T>
std::vector<double> ov_copying_scores(const Model<T>& model);

// composition.csv: step,sender,receiver,sender_layer,receiver_layer,q,k,v (%.6g; empty where the
// composition does not apply or a head has no weights to normalise by), one row per checkpoint
// and connected pair, in step order (`headlab circuits --composition`).
void write_composition_csv(const std::string& path, const std::vector<int64_t>& steps,
                           const std::vector<CompositionScores>& scores);
// ov_copying.csv: step,label,layer,head,copying_score, one row per checkpoint and head (the heads of
// scores[c], the copying scores of copying[c]).
void write_copying_csv(const std::string& path, const std::vector<int64_t>& steps,
                       const std::vector<CompositionScores>& scores, const std::vector<std::vector<double>>& copying);

}  // namespace headlab
