// Fused multi-head attention with grouped K/V heads and per-head gates: the project's core op.
//   q [B,T,H,Dh], k and v [B,T,Hkv,Dh], gates [H] (optional)  ->  out [B,T,H,Dh] (contiguous)
//   S = q_bh k_bg^T / sqrt(Dh),  A = softmax(mask(S)) per query row,  out_bh = gates[h] * A v_bg
// B batch, T tokens, H query heads (n_heads), Hkv key/value heads (n_kv_heads, divides H),
// Dh = d_head. Query head h reads kv head g = h / (H/Hkv): Hkv=H multi-head, Hkv=1 MQA, else GQA.
// q/k/v may be strided views (slices of a fused qkv projection): kernels follow the strides and
// hand 2-D views to gemm(), never copying. Masks: `causal` (key s <= query t) and `key_padding`
// ([B,T], 1 = real token; a padded key is masked for every query). A query row with every key
// masked gets probabilities 0 and output 0 (and no gradient), never NaN.
// Saved for the backward: the probabilities A [B,H,T,T], not the scores (softmax's backward
// reads only its output). Under NoGradGuard A is kept only with keep_probs (for analysis).
// Gates: gates[h] = 0 prunes head h; d gates[h] = sum_{b,t,d} dout * (A v) is Michel et al.'s
// head importance, so it flows to the gates' Var. Backwards accumulate (+=) into gradients.
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

// Query rows per causal block (see attention.cpp); public so tests can span several blocks.
inline constexpr int64_t kAttentionBlock = 128;

// The tape op. `gates` is a [H] Var or a default Var{} (no gates).
template <typename T>
Var<T> attention(Var<T> q, Var<T> k, Var<T> v, const AttentionOptions& options = {}, Var<T> gates = {});

// The probabilities A [B,H,T,T] an attention output was computed with. Throws headlab::Error if
// `out` is not an attention output or they were not kept (grad off and keep_probs unset).
template <typename T>
Tensor<T> attention_probs(Var<T> out);

// Kernels on Tensors (no tape, no allocation), for tests and bench/. An empty gates tensor
// means no gates. Parallel over (b, h) forward and over (b, kv head) backward.
//   probs: [B,H,T,T] contiguous to keep A (the backward needs it), or [P,T,T] contiguous with
//          P >= num_threads() as per-thread scratch when A is not needed afterwards.
template <typename T>
void attention_forward(const Tensor<T>& out, const Tensor<T>& probs, const Tensor<T>& q, const Tensor<T>& k,
                       const Tensor<T>& v, const Tensor<T>& gates, const AttentionOptions& options);

// Accumulates into dq, dk, dv, dgates (any of them may be empty = not needed).
//   probs: the forward's A [B,H,T,T];  scratch: [P,T,T] contiguous, P >= num_threads();
//   gate_partials: [B,H] contiguous (only read when dgates is non-empty).
template <typename T>
void attention_backward(const Tensor<T>& dq, const Tensor<T>& dk, const Tensor<T>& dv, const Tensor<T>& dgates,
                        const Tensor<T>& dout, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                        const Tensor<T>& gates, const Tensor<T>& probs, const AttentionOptions& options,
                        const Tensor<T>& scratch, const Tensor<T>& gate_partials);

#define HEADLAB_ATTENTION_EXTERN(T)                                                                         \
  extern template Var<T> attention<T>(Var<T>, Var<T>, Var<T>, const AttentionOptions&, Var<T>);             \
  extern template Tensor<T> attention_probs<T>(Var<T>);                                                     \
  extern template void attention_forward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,           \
                                            const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,           \
                                            const AttentionOptions&);                                       \
  extern template void attention_backward<T>(                                                               \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,             \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,             \
      const AttentionOptions&, const Tensor<T>&, const Tensor<T>&);
HEADLAB_ATTENTION_EXTERN(float)
HEADLAB_ATTENTION_EXTERN(double)
#undef HEADLAB_ATTENTION_EXTERN

}  // namespace headlab
