// Fused multi-head attention: forward and backward kernels on strided [B,T,H,Dh] views, then the
// tape binding. Shapes: q [B,T,H,Dh], k,v [B,T,Hkv,Dh], gates [H] -> out [B,T,H,Dh]; A [B,H,T,T].
// Every per-head product is a gemm() on 2-D views (select/narrow/transpose), so q/k/v may be
// slices of a fused qkv projection. Inside the OpenMP regions gemm() runs BLIS on one thread.
// Causal attention works in row blocks of kAttentionBlock queries: block [r0, r1) multiplies only
// against keys [0, r1), skipping the masked upper triangle beyond it; exp() runs only on visible
// keys. Blocks are 128 rows because smaller ones lose more to BLIS's fixed cost per call (about
// 2.6 us) and its low efficiency at small m than the masked flops they skip (measured at T=128).
// Determinism: each output element is written by one thread in a fixed order (forward over
// (b, h), backward over (b, kv head)); gate gradients go through per-(b, h) partials summed
// serially. Results are bit-identical for any thread count.
#include "headlab/ops/attention.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "headlab/common/parallel.h"
#include "headlab/linalg/gemm.h"

namespace headlab {

namespace {

constexpr int64_t kAttentionTag = 0x4154544e;  // "ATTN" in Node::ints[3]: marks attention outputs

struct Dims {
  int64_t B, T, H, Hkv, Dh, group;  // group = H / Hkv query heads per kv head
};

template <typename T>
Dims check_inputs(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& gates) {
  HEADLAB_CHECK(q.rank() == 4, "attention: q " << q.shape().str() << " must be [B, T, n_heads, d_head]");
  HEADLAB_CHECK(k.rank() == 4, "attention: k " << k.shape().str() << " must be [B, T, n_kv_heads, d_head]");
  HEADLAB_CHECK(k.shape() == v.shape(), "attention: v " << v.shape().str() << " differs from k " << k.shape().str());
  HEADLAB_CHECK(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3),
                "attention: k " << k.shape().str() << " does not match q " << q.shape().str()
                                << " in batch, tokens or d_head");
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), 0};
  HEADLAB_CHECK(d.Hkv >= 1 && d.H % d.Hkv == 0,
                "attention: n_kv_heads=" << d.Hkv << " does not divide n_heads=" << d.H);
  HEADLAB_CHECK(d.Dh >= 1, "attention: d_head=" << d.Dh << " must be at least 1");
  HEADLAB_CHECK(gates.empty() || (gates.rank() == 1 && gates.size(0) == d.H),
                "attention: gates " << gates.shape().str() << " must be [n_heads]=[" << d.H << "]");
  return {d.B, d.T, d.H, d.Hkv, d.Dh, d.H / d.Hkv};
}

template <typename T>
void check_shape(const char* name, const Tensor<T>& t, const Shape& expected) {
  HEADLAB_CHECK(t.shape() == expected, "attention: " << name << " " << t.shape().str() << " must be " << expected.str());
}

template <typename T>
void check_scratch(const char* name, const Tensor<T>& t, int64_t tokens) {
  HEADLAB_CHECK(t.rank() == 3 && t.is_contiguous() && t.size(0) >= num_threads() && t.size(1) == tokens &&
                    t.size(2) == tokens,
                "attention: " << name << " " << t.shape().str() << " must be contiguous [P, " << tokens << ", "
                              << tokens << "] with P >= num_threads()=" << num_threads());
}

// The [T, Dh] matrix of head h of batch item b in a [B,T,heads,Dh] view, strides kept.
template <typename T>
Tensor<T> head(const Tensor<T>& x, int64_t b, int64_t h) {
  return x.select(0, b).select(1, h);
}

// Rows [r0, r1) and columns [c0, c1) of a matrix view.
template <typename T>
Tensor<T> block(const Tensor<T>& m, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  return m.narrow(0, r0, r1 - r0).narrow(1, c0, c1 - c0);
}

// Rows per block: causal blocks skip the masked triangle; bidirectional needs no blocks.
inline int64_t rows_per_block(bool causal, int64_t tokens) {
  return causal ? kAttentionBlock : std::max<int64_t>(tokens, 1);
}

// Keys query t may see before padding: [0, t+1) causal, else all T.
inline int64_t visible_keys(bool causal, int64_t t, int64_t tokens) { return causal ? t + 1 : tokens; }
// End of the causal row block holding t: the columns a block product wrote for that row.
inline int64_t block_end(bool causal, int64_t t, int64_t tokens) {
  return causal ? std::min(tokens, (t / kAttentionBlock + 1) * kAttentionBlock) : tokens;
}

// exp(x) for the softmax, where x = score - row max <= 0. Double (tests) uses std::exp; float uses
// a vectorisable Cephes-style expf, since glibc's scalar expf would cost more than the GEMMs at
// H = 16: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split), e^r by a degree-6 polynomial, 2^n
// through the exponent bits. About 2 ulp; x below -87 clamps (e^-87 is 1e-38 beside the max's 1).
inline double softmax_exp(double x) { return std::exp(x); }
inline float softmax_exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest via 1.5 * 2^23
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// In place over one row of `width` entries: softmax over keys [0, n) that padding allows,
// every other entry 0. A row with no allowed key becomes all 0 (no 0/0). The simd reductions
// have a fixed, compile-time order, so results stay bit-identical across runs and threads.
template <typename T>
void softmax_row(T* row, int64_t n, int64_t width, const uint8_t* pad) {
  T max = -std::numeric_limits<T>::infinity(), sum = T(0);
  int64_t allowed = n;
  if (pad) {
    allowed = 0;
#pragma omp simd reduction(max : max) reduction(+ : allowed)
    for (int64_t s = 0; s < n; ++s) {
      max = pad[s] && row[s] > max ? row[s] : max;
      allowed += pad[s] != 0;
    }
#pragma omp simd reduction(+ : sum)
    for (int64_t s = 0; s < n; ++s) {
      const T e = pad[s] ? softmax_exp(row[s] - max) : T(0);
      row[s] = e;
      sum += e;
    }
  } else {
#pragma omp simd reduction(max : max)
    for (int64_t s = 0; s < n; ++s) max = row[s] > max ? row[s] : max;  // vectorises; std::max does not
#pragma omp simd reduction(+ : sum)
    for (int64_t s = 0; s < n; ++s) {
      const T e = softmax_exp(row[s] - max);
      row[s] = e;
      sum += e;
    }
  }
  if (allowed == 0) n = 0;
  const T inv = n ? T(1) / sum : T(0);
#pragma omp simd
  for (int64_t s = 0; s < n; ++s) row[s] *= inv;
  std::fill(row + n, row + width, T(0));
}

}  // namespace

// Forward, per (b, h) with g = h / (H/Hkv) and x = gates[h] (1 without gates):
//   S = Q K^T / sqrt(Dh);  A = softmax_rows(mask(S)), written over S in place;  O = x A V.
// A pruned head (x = 0) still computes A: the backward needs it for d gates[h].
template <typename T>
void attention_forward(const Tensor<T>& out, const Tensor<T>& probs, const Tensor<T>& q, const Tensor<T>& k,
                       const Tensor<T>& v, const Tensor<T>& gates, const AttentionOptions& options) {
  const Dims d = check_inputs(q, k, v, gates);
  check_shape("out", out, {d.B, d.T, d.H, d.Dh});
  const bool keep = probs.rank() == 4;
  if (keep) {
    check_shape("probs", probs, {d.B, d.H, d.T, d.T});
    HEADLAB_CHECK(probs.is_contiguous(), "attention: probs must be contiguous");
  } else {
    check_scratch("probs scratch", probs, d.T);
  }
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d.Dh)));
  const bool causal = options.causal;
  const int64_t step = rows_per_block(causal, d.T);
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    const int64_t b = bh / d.H, h = bh % d.H, g = h / d.group;
    const Tensor<T> qh = head(q, b, h), kh = head(k, b, g), vh = head(v, b, g), oh = head(out, b, h);
    T* a = probs.data() + (keep ? bh : omp_get_thread_num()) * d.T * d.T;
    const Tensor<T> A(a, {d.T, d.T});
    const uint8_t* pad = options.key_padding ? options.key_padding + b * d.T : nullptr;
    const T gate = gates.empty() ? T(1) : gates(h);
    for (int64_t r0 = 0; r0 < d.T; r0 += step) {
      const int64_t r1 = std::min(d.T, r0 + step), n = causal ? r1 : d.T;  // keys this block sees
      gemm(qh.narrow(0, r0, r1 - r0), kh.narrow(0, 0, n).transpose(0, 1), block(A, r0, r1, 0, n), scale, T(0));
      for (int64_t t = r0; t < r1; ++t) softmax_row(a + t * d.T, visible_keys(causal, t, d.T), d.T, pad);
      if (gate != T(0)) gemm(block(A, r0, r1, 0, n), vh.narrow(0, 0, n), oh.narrow(0, r0, r1 - r0), gate, T(0));
    }
    if (gate == T(0)) oh.fill(T(0));
  }
}

// Backward, per (b, h) with g = h / (H/Hkv), gate x = gates[h] (1 without gates), dO = dout_bh.
// The forward was:
//   (1) S = Q K^T / sqrt(Dh)        masked entries excluded
//   (2) A = softmax_rows(S)         masked entries 0
//   (3) Y = A V
//   (4) O = x Y
// Read in reverse, with G = dO V^T (the ungated dA):
//   (4) dx += sum(dO * Y) = sum_{t,s} A[t,s] G[t,s] = sum_t r[t],  r = rowsum(G * A);
//       dO' = x dO.
//   (3) dV += A^T dO' = x A^T dO;   dA = dO' V^T = x G.
//   (2) softmax: dS[t,s] = A[t,s] (dA[t,s] - sum_j A[t,j] dA[t,j]) = x A * (G - r).
//       A masked entry has A = 0, so it gets dS = 0; a fully masked row gets all 0.
//   (1) dQ += dS K / sqrt(Dh);   dK += dS^T Q / sqrt(Dh).
// Why neither saving nor recomputing Y for the gate: r is the row sum softmax's backward needs
// anyway, and it is taken on the ungated G, so dx stays right for a pruned head (x = 0).
// Heads h sharing kv head g run on one thread in order h = g*group, ..., so their dK/dV sums
// (GQA/MQA) have one fixed order with no atomics. dS overwrites G in the per-thread scratch.
template <typename T>
void attention_backward(const Tensor<T>& dq, const Tensor<T>& dk, const Tensor<T>& dv, const Tensor<T>& dgates,
                        const Tensor<T>& dout, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                        const Tensor<T>& gates, const Tensor<T>& probs, const AttentionOptions& options,
                        const Tensor<T>& scratch, const Tensor<T>& gate_partials) {
  const Dims d = check_inputs(q, k, v, gates);
  check_shape("dout", dout, {d.B, d.T, d.H, d.Dh});
  check_shape("probs", probs, {d.B, d.H, d.T, d.T});
  HEADLAB_CHECK(probs.is_contiguous(), "attention: probs must be contiguous");
  if (!dq.empty()) check_shape("dq", dq, q.shape());
  if (!dk.empty()) check_shape("dk", dk, k.shape());
  if (!dv.empty()) check_shape("dv", dv, v.shape());
  check_scratch("scratch", scratch, d.T);
  if (!dgates.empty()) {
    HEADLAB_CHECK(!gates.empty(), "attention: dgates given without gates");
    check_shape("dgates", dgates, {d.H});
    check_shape("gate_partials", gate_partials, {d.B, d.H});
    HEADLAB_CHECK(gate_partials.is_contiguous(), "attention: gate_partials must be contiguous");
  }
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d.Dh)));
  const bool causal = options.causal;
  const int64_t step = rows_per_block(causal, d.T);
#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < d.B * d.Hkv; ++bg) {
    const int64_t b = bg / d.Hkv, g = bg % d.Hkv;
    const Tensor<T> kh = head(k, b, g), vh = head(v, b, g);
    T* ds = scratch.data() + omp_get_thread_num() * d.T * d.T;
    const Tensor<T> dS(ds, {d.T, d.T});
    for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h) {
      const Tensor<T> qh = head(q, b, h), doh = head(dout, b, h);
      T* a = probs.data() + (b * d.H + h) * d.T * d.T;
      const Tensor<T> A(a, {d.T, d.T});
      const T gate = gates.empty() ? T(1) : gates(h);
      // G = dO V^T on the blocks the forward computed.
      for (int64_t r0 = 0; r0 < d.T; r0 += step) {
        const int64_t r1 = std::min(d.T, r0 + step), n = causal ? r1 : d.T;
        gemm(doh.narrow(0, r0, r1 - r0), vh.narrow(0, 0, n).transpose(0, 1), block(dS, r0, r1, 0, n), T(1), T(0));
      }
      // r = rowsum(G * A); dS = x A * (G - r); zero what the block products will read beyond t.
      T gate_sum = T(0);
      for (int64_t t = 0; t < d.T; ++t) {
        T* gr = ds + t * d.T;
        const T* ar = a + t * d.T;
        const int64_t n = visible_keys(causal, t, d.T);
        T r = T(0);
#pragma omp simd reduction(+ : r)
        for (int64_t s = 0; s < n; ++s) r += gr[s] * ar[s];
        gate_sum += r;
#pragma omp simd
        for (int64_t s = 0; s < n; ++s) gr[s] = gate * ar[s] * (gr[s] - r);
        std::fill(gr + n, gr + block_end(causal, t, d.T), T(0));
      }
      if (!dgates.empty()) gate_partials.data()[b * d.H + h] = gate_sum;
      if (gate == T(0)) continue;  // pruned head: dS = 0 and dV = 0
      // dQ += dS K / sqrt(Dh), by query row block: row t reads keys [0, block end).
      if (!dq.empty()) {
        const Tensor<T> dqh = head(dq, b, h);
        for (int64_t r0 = 0; r0 < d.T; r0 += step) {
          const int64_t r1 = std::min(d.T, r0 + step), n = causal ? r1 : d.T;
          gemm(block(dS, r0, r1, 0, n), kh.narrow(0, 0, n), dqh.narrow(0, r0, r1 - r0), scale, T(1));
        }
      }
      // dK += dS^T Q / sqrt(Dh) and dV += x A^T dO, by key block: key s is seen by queries t >= s.
      for (int64_t c0 = 0; c0 < d.T; c0 += step) {
        const int64_t c1 = std::min(d.T, c0 + step), m0 = causal ? c0 : 0;
        if (!dk.empty())
          gemm(block(dS, m0, d.T, c0, c1).transpose(0, 1), qh.narrow(0, m0, d.T - m0),
               head(dk, b, g).narrow(0, c0, c1 - c0), scale, T(1));
        if (!dv.empty())
          gemm(block(A, m0, d.T, c0, c1).transpose(0, 1), doh.narrow(0, m0, d.T - m0),
               head(dv, b, g).narrow(0, c0, c1 - c0), gate, T(1));
      }
    }
  }
  // Gate gradients: partials summed over b in a fixed order, whatever the thread count.
  if (!dgates.empty())
    for (int64_t h = 0; h < d.H; ++h) {
      T total = T(0);
      for (int64_t b = 0; b < d.B; ++b) total += gate_partials.data()[b * d.H + h];
      dgates(h) += total;
    }
}

namespace {

// Node layout: inputs q, k, v[, gates]; saved[0] = A; ints[0] = causal, ints[1] = has gates,
// ints[3] = kAttentionTag; context = key_padding (caller-owned, outlives the step).
template <typename T>
void attention_node_backward(Tape<T>& tape, const Node<T>& node) {
  const bool has_gates = node.n_inputs == 4;
  const Tensor<T>& q = tape.node(node.inputs[0]).value;
  const Tensor<T> gates = has_gates ? tape.node(node.inputs[3]).value : Tensor<T>();
  AttentionOptions options;
  options.causal = node.ints[0] != 0;
  options.key_padding = static_cast<const uint8_t*>(node.context);
  const Tensor<T> dq = tape.input_grad(node, 0), dk = tape.input_grad(node, 1), dv = tape.input_grad(node, 2);
  const Tensor<T> dgates = has_gates ? tape.input_grad(node, 3) : Tensor<T>();
  // Scratch from the step arena, before the parallel region: one T x T dS per thread.
  Arena& arena = tape.arena();
  const Tensor<T> scratch = arena.template empty<T>({num_threads(), q.size(1), q.size(1)});
  const Tensor<T> partials = dgates.empty() ? Tensor<T>() : arena.template empty<T>({q.size(0), q.size(2)});
  attention_backward(dq, dk, dv, dgates, node.grad, q, tape.node(node.inputs[1]).value,
                     tape.node(node.inputs[2]).value, gates, node.saved[0], options, scratch, partials);
}

}  // namespace

template <typename T>
Var<T> attention(Var<T> q, Var<T> k, Var<T> v, const AttentionOptions& options, Var<T> gates) {
  HEADLAB_CHECK(q.defined() && k.defined() && v.defined(), "attention: q, k and v must be defined Vars");
  HEADLAB_CHECK(k.tape == q.tape && v.tape == q.tape && (!gates.defined() || gates.tape == q.tape),
                "attention: q, k, v and gates belong to different tapes");
  Tape<T>& tape = *q.tape;
  const bool has_gates = gates.defined();
  const Tensor<T> gates_value = has_gates ? gates.value() : Tensor<T>();
  const Dims d = check_inputs(q.value(), k.value(), v.value(), gates_value);
  // The same rule record() applies: a backward is recorded iff grad is on and an input needs it.
  const bool backward = tape.grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                                                (has_gates && gates.requires_grad()));
  const bool keep = backward || options.keep_probs;
  Arena& arena = tape.arena();
  const Tensor<T> out = arena.template empty<T>({d.B, d.T, d.H, d.Dh});
  const Tensor<T> probs = keep ? arena.template empty<T>({d.B, d.H, d.T, d.T})
                               : arena.template empty<T>({num_threads(), d.T, d.T});
  attention_forward(out, probs, q.value(), k.value(), v.value(), gates_value, options);
  Node<T>& node = has_gates ? tape.record(out, attention_node_backward<T>, {q, k, v, gates})
                            : tape.record(out, attention_node_backward<T>, {q, k, v});
  if (keep) node.saved[0] = probs;
  node.ints[0] = options.causal;
  node.ints[1] = has_gates;
  node.ints[3] = kAttentionTag;
  node.context = options.key_padding;
  return tape.last();
}

template <typename T>
Tensor<T> attention_probs(Var<T> out) {
  HEADLAB_CHECK(out.defined(), "attention_probs: the Var is undefined");
  const Node<T>& node = out.tape->node(out.id);
  HEADLAB_CHECK(node.ints[3] == kAttentionTag,
                "attention_probs: Var " << out.id << " " << node.value.shape().str() << " is not an attention output");
  HEADLAB_CHECK(!node.saved[0].empty(),
                "attention_probs: probabilities were not kept (grad off): set AttentionOptions::keep_probs");
  return node.saved[0];
}

#define HEADLAB_INSTANTIATE(T)                                                                                   \
  template Var<T> attention<T>(Var<T>, Var<T>, Var<T>, const AttentionOptions&, Var<T>);                         \
  template Tensor<T> attention_probs<T>(Var<T>);                                                                 \
  template void attention_forward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,     \
                                     const Tensor<T>&, const Tensor<T>&, const AttentionOptions&);               \
  template void attention_backward<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,    \
                                      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,    \
                                      const Tensor<T>&, const Tensor<T>&, const AttentionOptions&,               \
                                      const Tensor<T>&, const Tensor<T>&);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
