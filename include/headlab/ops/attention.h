// Fused multi-head attention with grouped K/V heads and per-head gates: the project's core op.
//   q [B,Tq,H,Dh], k and v [B,Tk,Hkv,Dh], gates [H] (optional)  ->  out [B,Tq,H,Dh] (contiguous)
//   S = q_bh k_bg^T / sqrt(Dh),  A = softmax(mask(S)) per query row,  out_bh = gates[h] * A v_bg
// B batch, Tq queries and Tk keys (equal in self-attention; the source length in cross-attention;
// the cache length in a cached decoding step), H query heads (n_heads), Hkv key/value heads
// (n_kv_heads, divides H), Dh = d_head. Query head h reads kv head g = h / (H/Hkv): Hkv=H
// multi-head, Hkv=1 MQA, else GQA. q/k/v may be strided views (slices of a fused qkv projection,
// the filled rows of a KV cache); kernels follow the strides.
// Masks: `causal` (query t sees keys s <= t + Tk - Tq: the queries are the last Tq positions, so
// Tk >= Tq) and `key_padding` ([B,Tk], 1 = real token; a padded key is masked for every query).
// A query row with every key masked gets probabilities 0 and output 0 (and no gradient), never NaN.
// Saved for the backward: per-row softmax stats [B,H,Tq,2] (row max, 1/sum), not A: the backward
// recomputes A from them bit-identically, which costs one product but saves the [B,H,Tq,Tk]
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

// Which kernels run. On x86-64 every build has both: `generic` (compiled with the build's own
// flags; the float softmax in plain loops) and `avx512` (compiled for AVX-512; the float softmax
// with intrinsics, double's in plain loops). They agree to a few ulp, not bit for bit.
// `automatic` is what the build is for: a native build for an AVX-512 machine runs avx512; a
// portable build (HEADLAB_NATIVE=OFF) runs the generic kernels compiled for AVX-512 where the CPU
// has it and HEADLAB_NO_AVX512 is unset or 0, else for baseline x86-64; other builds run generic.
enum class AttentionKernels { automatic, generic, avx512 };

// Whether `kernels` can run here (avx512: an x86-64 build on a CPU with AVX-512 F/BW/CD/DQ/VL).
bool attention_kernels_available(AttentionKernels kernels);

// The code `kernels` runs in this build on this CPU: "baseline" (the generic kernels for baseline
// x86-64, or the build's own flags), "avx512-generic" (the AVX-512 copy with the generic float
// softmax: a portable build's automatic choice on an AVX-512 CPU) or "avx512" (that copy with the
// intrinsic softmax). Throws, as a call would, for avx512 where it is not available.
const char* attention_kernels_in_use(AttentionKernels kernels = AttentionKernels::automatic);

struct AttentionOptions {
  bool causal = true;
  // [B,Tk] contiguous, 1 = real token, 0 = padding (masked as a key). Must outlive the step:
  // the backward reads it.
  const uint8_t* key_padding = nullptr;
  // Keep A [B,H,Tq,Tk] even without a backward, for attention_probs().
  bool keep_probs = false;
  AttentionKernels kernels = AttentionKernels::automatic;
};

// The tape op. `gates` is a [H] Var or a default Var{} (no gates).
template <typename T>
Var<T> attention(Var<T> q, Var<T> k, Var<T> v, const AttentionOptions& options = {}, Var<T> gates = {});

// The probabilities A [B,H,Tq,Tk] an attention output was computed with: the kept A, or (grad on)
// recomputed bit-identically into the tape's arena on first call. Throws headlab::Error if `out`
// is not an attention output or A can be neither (grad off and keep_probs unset).
template <typename T>
Tensor<T> attention_probs(Var<T> out);

// Kernels on Tensors (no tape, no allocation), for the tape op, tests and bench/. Their tensors
// come in named bundles, built with designated initializers ({.q = q, .k = k, .v = v}), so that
// a swapped pair is visible at the call. An empty tensor means "none" / "not needed".
template <typename T>
struct AttentionInputs {
  Tensor<T> q{}, k{}, v{};  // [B,Tq,H,Dh], [B,Tk,Hkv,Dh], [B,Tk,Hkv,Dh]; any strides
  Tensor<T> gates{};        // [H], or empty: no gates
};
// What the forward keeps for the backward: A, or the row stats A is recomputed from.
template <typename T>
struct AttentionSaved {
  Tensor<T> probs{};  // [B,H,Tq,Tk] contiguous, or empty
  Tensor<T> stats{};  // [B,H,Tq,2] contiguous (row max, 1/sum), or empty
};
// Gradients the backward accumulates into, each shaped as its input; any may be empty.
template <typename T>
struct AttentionGrads {
  Tensor<T> dq{}, dk{}, dv{}, dgates{};
};
// Caller-provided memory. workspace: [P, W] contiguous, P >= num_threads(), W >=
// attention_workspace_size(Tq, Tk, Dh[, false for the forward]). gate_partials: [B,H] contiguous, only
// for the backward with dgates.
template <typename T>
struct AttentionScratch {
  Tensor<T> workspace{}, gate_partials{};
};

// Parallel over (b, h). Writes out [B,Tq,H,Dh] and whichever of saved's tensors are non-empty.
template <typename T>
void attention_forward(const Tensor<T>& out, const AttentionSaved<T>& saved, const AttentionInputs<T>& inputs,
                       const AttentionOptions& options, const AttentionScratch<T>& scratch);

// Parallel over (b, kv head). Accumulates into grads. A is read from saved.probs if non-empty,
// else recomputed from saved.stats.
template <typename T>
void attention_backward(const AttentionGrads<T>& grads, const Tensor<T>& dout, const AttentionInputs<T>& inputs,
                        const AttentionSaved<T>& saved, const AttentionOptions& options,
                        const AttentionScratch<T>& scratch);

// Elements of T per thread the kernels above need as workspace; the forward alone needs less
// (less than half at any d_head), which is what backward = false gives.
int64_t attention_workspace_size(int64_t queries, int64_t keys, int64_t d_head, bool backward = true);

#define HEADLAB_ATTENTION_EXTERN(T)                                                                                 \
  extern template Var<T> attention<T>(Var<T>, Var<T>, Var<T>, const AttentionOptions&, Var<T>);                     \
  extern template Tensor<T> attention_probs<T>(Var<T>);                                                             \
  extern template void attention_forward<T>(const Tensor<T>&, const AttentionSaved<T>&, const AttentionInputs<T>&,  \
                                            const AttentionOptions&, const AttentionScratch<T>&);                   \
  extern template void attention_backward<T>(const AttentionGrads<T>&, const Tensor<T>&, const AttentionInputs<T>&, \
                                             const AttentionSaved<T>&, const AttentionOptions&,                     \
                                             const AttentionScratch<T>&);
HEADLAB_ATTENTION_EXTERN(float)
HEADLAB_ATTENTION_EXTERN(double)
#undef HEADLAB_ATTENTION_EXTERN

}  // namespace headlab
