// Fused multi-head attention with grouped K/V heads and per-head gates: the project's core op.
//   q [B,T,H,Dh], k and v [B,T,Hkv,Dh], gates [H] (optional)  ->  out [B,T,H,Dh] (contiguous)
//   S = q_bh k_bg^T / sqrt(Dh),  A = softmax(mask(S)) per query row,  out_bh = gates[h] * A v_bg
// B batch, T tokens, H query heads (n_heads), Hkv key/value heads (n_kv_heads, divides H),
// Dh = d_head. Query head h reads kv head g = h / (H/Hkv): Hkv=H multi-head, Hkv=1 MQA, else GQA.
// q/k/v may be strided views (slices of a fused qkv projection); kernels follow the strides.
// Masks: `causal` (key s <= query t) and `key_padding` ([B,T], 1 = real token; a padded key is
// masked for every query). A query row with every key masked gets probabilities 0 and output 0
// (and no gradient), never NaN.
// Saved for the backward: per-row softmax stats [B,H,T,2] (row max, 1/sum), not A: the backward
// recomputes A from them bit-identically, which costs one product but saves the [B,H,T,T]
// round trip through memory (see attention.cpp); from d_head 128, where that product costs
// more, A itself. Otherwise A is kept only with keep_probs; with grad on, attention_probs()
// recomputes it on demand. Gates: gates[h] = 0 prunes head h;
// d gates[h] = sum_{b,t,d} dout * (A v) is Michel et al.'s head importance, so it flows to the
// gates' Var. Backwards accumulate (+=) into gradients.
//   Var<float> out = attention(q, k, v, {.causal = true}, gates);  // reshape to [B,T,H*Dh]
#pragma once

#include <cstdint>

#include "headlab/autograd/tape.h"

namespace headlab {

struct AttentionOptions {
  bool causal = true;
  // [B,T] contiguous, 1 = real token, 0 = padding (masked as a key). Must outlive the step:
  // the backward reads it.
  const uint8_t* key_padding = nullptr;
  // Keep A [B,H,T,T] even without a backward, for attention_probs().
  bool keep_probs = false;
};

// A "long" sequence for tests: T = 2 kAttentionBlock + 20 spans many of the kernels' 8-row blocks
// and several 32-key tiles, with ragged ends. (It was the BLIS path's causal block size.)
inline constexpr int64_t kAttentionBlock = 128;

// The tape op. `gates` is a [H] Var or a default Var{} (no gates).
template <typename T>
Var<T> attention(Var<T> q, Var<T> k, Var<T> v, const AttentionOptions& options = {}, Var<T> gates = {});

// The probabilities A [B,H,T,T] an attention output was computed with: the kept A, or (grad on)
// recomputed bit-identically into the tape's arena on first call. Throws headlab::Error if `out`
// is not an attention output or A can be neither (grad off and keep_probs unset).
template <typename T>
Tensor<T> attention_probs(Var<T> out);

// Kernels on Tensors (no tape, no allocation), for the tape op, tests and bench/. An empty
// gates tensor means no gates. Parallel over (b, h) forward and over (b, kv head) backward.
//   workspace: [P, W] contiguous, P >= num_threads(), W >= attention_workspace_size(T, Dh[, false
//              for the forward]).
//   probs: [B,H,T,T] contiguous to keep A, or empty.  stats: [B,H,T,2] contiguous, or empty.
template <typename T>
void attention_forward(const Tensor<T>& out, const Tensor<T>& probs, const Tensor<T>& stats, const Tensor<T>& q,
                       const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& gates,
                       const AttentionOptions& options, const Tensor<T>& workspace);

// Accumulates into dq, dk, dv, dgates (any of them may be empty = not needed). A is read from
// probs [B,H,T,T] if non-empty, else recomputed from the forward's stats [B,H,T,2].
//   gate_partials: [B,H] contiguous (only read when dgates is non-empty).
template <typename T>
void attention_backward(const Tensor<T>& dq, const Tensor<T>& dk, const Tensor<T>& dv, const Tensor<T>& dgates,
                        const Tensor<T>& dout, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                        const Tensor<T>& gates, const Tensor<T>& probs, const Tensor<T>& stats,
                        const AttentionOptions& options, const Tensor<T>& workspace,
                        const Tensor<T>& gate_partials);

// Elements of T per thread the kernels above need as workspace; the forward alone needs less
// (less than half at any d_head), which is what backward = false gives.
int64_t attention_workspace_size(int64_t tokens, int64_t d_head, bool backward = true);

#define HEADLAB_ATTENTION_EXTERN(T)                                                                         \
  extern template Var<T> attention<T>(Var<T>, Var<T>, Var<T>, const AttentionOptions&, Var<T>);             \
  extern template Tensor<T> attention_probs<T>(Var<T>);                                                     \
  extern template void attention_forward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,           \
                                            const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,           \
                                            const Tensor<T>&, const AttentionOptions&, const Tensor<T>&);   \
  extern template void attention_backward<T>(                                                               \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,             \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,             \
      const Tensor<T>&, const AttentionOptions&, const Tensor<T>&, const Tensor<T>&);
HEADLAB_ATTENTION_EXTERN(float)
HEADLAB_ATTENTION_EXTERN(double)
#undef HEADLAB_ATTENTION_EXTERN

}  // namespace headlab
