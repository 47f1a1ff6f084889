// Fused multi-head attention: argument checks, the parallel drivers over heads and the tape
// binding. The per-head numeric kernels (8-row blocks, packed K/V, fused scale + mask + softmax)
// are in src/ops/attention/: tiles.h (products and packing), softmax.h, forward.cpp, and
// backward.cpp with the backward's derivation; kernels.h is their interface.
// Shapes: q [B,Tq,H,Dh], k,v [B,Tk,Hkv,Dh], gates [H] -> out [B,Tq,H,Dh]; stats [B,H,Tq,2].
// Why not per-head BLIS calls (the first version): at d_head <= 64 they cost more in per-call
// overhead and packing than in flops, so 16 heads took 3.7x the time of 1 head at d_model 256
// (bench/bench_attention.cpp has the numbers before and after).
// Why recompute A instead of saving it: A [B,H,T,T] is written by the forward and read by the
// backward, 2 x 4 bytes per score against 2 x Dh flops per score per product; at d_head 16 that
// traffic costs more than the products, and it grows with T. The backward recomputes A from the
// row stats (one more product, done while the block is in L1), bit-identical to the forward's.
// From d_head 128 the extra product costs more than the traffic, and the tape saves A instead.
// Threads: forward over (b, h), backward over (b, kv head) with the query heads sharing a kv head
// run on one thread in order, so dK/dV sums (GQA/MQA) have one fixed order with no atomics.
// Gate gradients go through per-(b, h) partials summed serially. Results are bit-identical for
// any thread count. Each thread works in its own slice of a workspace the caller provides.
#include "headlab/ops/attention.h"

#include <omp.h>

#include <algorithm>

#include "attention/kernels.h"
#include "headlab/common/parallel.h"

namespace headlab {

namespace {

namespace ak = attention_kernels;

struct Dims {
  int64_t B, Tq, Tk, H, Hkv, Dh, group;  // group = H / Hkv query heads per kv head
};

template <typename T>
Dims check_inputs(const AttentionInputs<T>& in) {
  const Tensor<T>&q = in.q, &k = in.k, &v = in.v, &gates = in.gates;
  HEADLAB_CHECK(q.rank() == 4, "attention: q " << q.shape().str() << " must be [B, Tq, n_heads, d_head]");
  HEADLAB_CHECK(k.rank() == 4, "attention: k " << k.shape().str() << " must be [B, Tk, n_kv_heads, d_head]");
  HEADLAB_CHECK(k.shape() == v.shape(), "attention: v " << v.shape().str() << " differs from k " << k.shape().str());
  HEADLAB_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(3),
                "attention: k " << k.shape().str() << " does not match q " << q.shape().str() << " in batch or d_head");
  const Dims d{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), 0};
  HEADLAB_CHECK(d.Tq >= 1 && d.Tk >= 1, "attention: q " << q.shape().str() << " and k " << k.shape().str()
                                                        << " need at least one query and one key");
  HEADLAB_CHECK(d.Hkv >= 1 && d.H % d.Hkv == 0,
                "attention: n_kv_heads=" << d.Hkv << " does not divide n_heads=" << d.H);
  HEADLAB_CHECK(d.Dh >= 1, "attention: d_head=" << d.Dh << " must be at least 1");
  HEADLAB_CHECK(gates.empty() || (gates.rank() == 1 && gates.size(0) == d.H),
                "attention: gates " << gates.shape().str() << " must be [n_heads]=[" << d.H << "]");
  return {d.B, d.Tq, d.Tk, d.H, d.Hkv, d.Dh, d.H / d.Hkv};
}

// The causal mask puts the queries last among the keys (query t is key t + Tk - Tq), so there
// must be at least as many keys as queries.
void check_causal(const Dims& d, const AttentionOptions& options) {
  HEADLAB_CHECK(!options.causal || d.Tk >= d.Tq,
                "attention: causal attention needs at least as many keys (" << d.Tk << ") as queries (" << d.Tq << ")");
}

template <typename T>
void check_shape(const char* name, const Tensor<T>& t, const Shape& expected) {
  HEADLAB_CHECK(t.shape() == expected,
                "attention: " << name << " " << t.shape().str() << " must be " << expected.str());
}

template <typename T>
void check_contiguous(const char* name, const Tensor<T>& t, const Shape& expected) {
  check_shape(name, t, expected);
  HEADLAB_CHECK(t.is_contiguous(), "attention: " << name << " must be contiguous");
}

template <typename T>
void check_workspace(const Tensor<T>& w, const Dims& d, bool backward) {
  const int64_t need = attention_workspace_size(d.Tq, d.Tk, d.Dh, backward);
  HEADLAB_CHECK(w.rank() == 2 && w.is_contiguous() && w.size(0) >= num_threads() && w.size(1) >= need,
                "attention: workspace " << w.shape().str() << " must be contiguous [P, W] with P >= num_threads()="
                                        << num_threads() << " and W >= " << need);
}

// Head h of batch item b in a [B,T,heads,Dh] view, strides kept; an empty tensor gives null data.
template <typename T>
ak::HeadView<T> head(const Tensor<T>& x, int64_t b, int64_t h) {
  if (x.empty()) return {};
  return {x.data() + b * x.stride(0) + h * x.stride(2), x.stride(1), x.stride(3)};
}
template <typename T>
ak::HeadView<const T> const_head(const Tensor<T>& x, int64_t b, int64_t h) {
  const ak::HeadView<T> v = head(x, b, h);
  return {v.data, v.row_stride, v.col_stride};
}

// A [Tq,Tk] / stats [Tq,2] slice of head (b, h), or null when not kept.
template <typename T>
T* per_head(const Tensor<T>& x, const Dims& d, int64_t b, int64_t h, int64_t per) {
  return x.empty() ? nullptr : x.data() + (b * d.H + h) * per;
}

}  // namespace

int64_t attention_workspace_size(int64_t queries, int64_t keys, int64_t d_head, bool backward) {
  return ak::workspace_size(queries, keys, d_head, backward);
}

// Forward, per (b, h) with g = h / (H/Hkv) and x = gates[h] (1 without gates):
//   S = Q K^T / sqrt(Dh);  A = softmax_rows(mask(S));  O = x A V;  stats = (row max, 1/row sum).
// A pruned head (x = 0) still computes A and stats: the backward needs them for d gates[h].
template <typename T>
void attention_forward(const Tensor<T>& out, const AttentionSaved<T>& saved, const AttentionInputs<T>& in,
                       const AttentionOptions& options, const AttentionScratch<T>& scratch) {
  const Dims d = check_inputs(in);
  check_causal(d, options);
  check_shape("out", out, {d.B, d.Tq, d.H, d.Dh});
  if (!saved.probs.empty()) check_contiguous("probs", saved.probs, {d.B, d.H, d.Tq, d.Tk});
  if (!saved.stats.empty()) check_contiguous("stats", saved.stats, {d.B, d.H, d.Tq, 2});
  check_workspace(scratch.workspace, d, false);
  const ak::KernelPath path = ak::resolve_kernels(options.kernels);
  const ak::Problem p(d.Tq, d.Tk, d.Dh, options.causal);
#pragma omp parallel
  {
    const ak::Workspace<T> w(scratch.workspace.data() + omp_get_thread_num() * scratch.workspace.size(1), p, false);
    int64_t packed = -1;  // the (b, kv head) whose K/V this thread's workspace holds
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
      const int64_t b = bh / d.H, h = bh % d.H, g = h / d.group;
      const uint8_t* pad = options.key_padding ? options.key_padding + b * d.Tk : nullptr;
      ak::forward_head(path, p, w, packed != b * d.Hkv + g, const_head(in.q, b, h), const_head(in.k, b, g),
                       const_head(in.v, b, g), head(out, b, h), in.gates.empty() ? T(1) : in.gates(h), pad,
                       per_head(saved.probs, d, b, h, d.Tq * d.Tk), per_head(saved.stats, d, b, h, 2 * d.Tq));
      packed = b * d.Hkv + g;
    }
  }
}

// Backward, per (b, kv head) and its query heads in order; the derivation is written above the
// kernels, in attention/backward.cpp.
template <typename T>
void attention_backward(const AttentionGrads<T>& grads, const Tensor<T>& dout, const AttentionInputs<T>& in,
                        const AttentionSaved<T>& saved, const AttentionOptions& options,
                        const AttentionScratch<T>& scratch) {
  const Dims d = check_inputs(in);
  check_causal(d, options);
  check_shape("dout", dout, {d.B, d.Tq, d.H, d.Dh});
  if (saved.probs.empty()) {
    HEADLAB_CHECK(!saved.stats.empty(), "attention: the backward needs probs or stats from the forward");
    check_contiguous("stats", saved.stats, {d.B, d.H, d.Tq, 2});
  } else {
    check_contiguous("probs", saved.probs, {d.B, d.H, d.Tq, d.Tk});
  }
  const Tensor<T>&dq = grads.dq, &dk = grads.dk, &dv = grads.dv, &dgates = grads.dgates;
  if (!dq.empty()) check_shape("dq", dq, in.q.shape());
  if (!dk.empty()) check_shape("dk", dk, in.k.shape());
  if (!dv.empty()) check_shape("dv", dv, in.v.shape());
  check_workspace(scratch.workspace, d, true);
  const Tensor<T>& partials = scratch.gate_partials;
  if (!dgates.empty()) {
    HEADLAB_CHECK(!in.gates.empty(), "attention: dgates given without gates");
    check_shape("dgates", dgates, {d.H});
    check_contiguous("gate_partials", partials, {d.B, d.H});
  }
  if (dq.empty() && dk.empty() && dv.empty() && dgates.empty()) return;
  const ak::KernelPath path = ak::resolve_kernels(options.kernels);
  const ak::Problem p(d.Tq, d.Tk, d.Dh, options.causal);
#pragma omp parallel
  {
    const ak::Workspace<T> w(scratch.workspace.data() + omp_get_thread_num() * scratch.workspace.size(1), p, true);
#pragma omp for schedule(static)
    for (int64_t bg = 0; bg < d.B * d.Hkv; ++bg) {
      const int64_t b = bg / d.Hkv, g = bg % d.Hkv;
      const uint8_t* pad = options.key_padding ? options.key_padding + b * d.Tk : nullptr;
      ak::backward_begin(path, p, w, const_head(in.k, b, g), const_head(in.v, b, g));
      for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h) {
        const T partial =
            ak::backward_head(path, p, w, const_head(in.q, b, h), const_head(dout, b, h), head(dq, b, h),
                              in.gates.empty() ? T(1) : in.gates(h), pad, per_head(saved.probs, d, b, h, d.Tq * d.Tk),
                              per_head(saved.stats, d, b, h, 2 * d.Tq), !dk.empty(), !dv.empty());
        if (!dgates.empty()) partials.data()[b * d.H + h] = partial;
      }
      ak::backward_end(path, p, w, head(dk, b, g), head(dv, b, g));
    }
  }
  // Gate gradients: partials summed over b in a fixed order, whatever the thread count.
  if (!dgates.empty())
    for (int64_t h = 0; h < d.H; ++h) {
      T total = T(0);
      for (int64_t b = 0; b < d.B; ++b) total += partials.data()[b * d.H + h];
      dgates(h) += total;
    }
}

namespace {

// Node layout: inputs q, k, v[, gates]; saved[0] = A if kept, saved[1] = stats if the backward
// recomputes A; ints[0] = causal, ints[1] = AttentionKernels; context = key_padding
// (caller-owned, outlives the step). Node::op = attention_node_backward marks attention outputs.
template <typename T>
AttentionOptions node_options(const Node<T>& node) {
  AttentionOptions options;
  options.causal = node.ints[0] != 0;
  options.kernels = static_cast<AttentionKernels>(node.ints[1]);
  options.key_padding = static_cast<const uint8_t*>(node.context);
  return options;
}

// q, k, v[, gates] of a node recorded with its inputs (grad on).
template <typename T>
AttentionInputs<T> node_inputs(Tape<T>& tape, const Node<T>& node) {
  return {.q = tape.node(node.inputs[0]).value,
          .k = tape.node(node.inputs[1]).value,
          .v = tape.node(node.inputs[2]).value,
          .gates = node.n_inputs == 4 ? tape.node(node.inputs[3]).value : Tensor<T>()};
}

// The kernels' per-thread workspace, in the tape's scratch (reused by every call of the step).
template <typename T>
Tensor<T> workspace_for(Tape<T>& tape, const AttentionInputs<T>& in, bool backward) {
  const int64_t per_thread = attention_workspace_size(in.q.size(1), in.k.size(1), in.q.size(3), backward);
  return Tensor<T>(tape.scratch(num_threads() * per_thread), {num_threads(), per_thread});
}

// From this d_head on, the forward saves A for the backward instead of the backward re-running
// Q K^T: that product then costs more than A's round trip through memory (bench_attention's
// `keep` rows: 4-14% faster at d_head 128 and 256, slower at 64 and below; at d_head 16 even the
// backward alone runs 17% slower reading A than recomputing it). So one or two heads at d_model
// 256 save A, more heads save only the row stats.
constexpr int64_t kSaveProbsMinDHead = 128;
inline bool backward_reads_probs(int64_t d_head) {
  return d_head >= kSaveProbsMinDHead;
}

template <typename T>
void attention_node_backward(Tape<T>& tape, const Node<T>& node) {
  const bool has_gates = node.n_inputs == 4;
  const AttentionInputs<T> in = node_inputs(tape, node);
  const AttentionGrads<T> grads{.dq = tape.input_grad(node, 0),
                                .dk = tape.input_grad(node, 1),
                                .dv = tape.input_grad(node, 2),
                                .dgates = has_gates ? tape.input_grad(node, 3) : Tensor<T>()};
  // Scratch before the parallel region.
  const AttentionScratch<T> scratch{
      .workspace = workspace_for(tape, in, true),
      .gate_partials =
          grads.dgates.empty() ? Tensor<T>() : tape.arena().template empty<T>({in.q.size(0), in.q.size(2)})};
  // The forward decided: stats saved = recompute A from them (even if attention_probs kept A since).
  const AttentionSaved<T> saved{.probs = node.saved[1].empty() ? node.saved[0] : Tensor<T>(), .stats = node.saved[1]};
  attention_backward(grads, node.grad, in, saved, node_options(node), scratch);
}

}  // namespace

template <typename T>
Var<T> attention(Var<T> q, Var<T> k, Var<T> v, const AttentionOptions& options, Var<T> gates) {
  HEADLAB_CHECK(q.defined() && k.defined() && v.defined(), "attention: q, k and v must be defined Vars");
  HEADLAB_CHECK(k.tape == q.tape && v.tape == q.tape && (!gates.defined() || gates.tape == q.tape),
                "attention: q, k, v and gates belong to different tapes");
  Tape<T>& tape = *q.tape;
  const bool has_gates = gates.defined();
  const AttentionInputs<T> in{
      .q = q.value(), .k = k.value(), .v = v.value(), .gates = has_gates ? gates.value() : Tensor<T>()};
  const Dims d = check_inputs(in);
  // The same rule record() applies: a backward is recorded iff grad is on and an input needs it.
  const bool backward = tape.grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                                                (has_gates && gates.requires_grad()));
  Arena& arena = tape.arena();
  const Tensor<T> out = arena.template empty<T>({d.B, d.Tq, d.H, d.Dh});
  const bool reads_probs = backward && backward_reads_probs(d.Dh);
  const AttentionSaved<T> saved{
      .probs = options.keep_probs || reads_probs ? arena.template empty<T>({d.B, d.H, d.Tq, d.Tk}) : Tensor<T>(),
      .stats = backward && !reads_probs ? arena.template empty<T>({d.B, d.H, d.Tq, 2}) : Tensor<T>()};
  attention_forward(out, saved, in, options, {.workspace = workspace_for(tape, in, false)});
  Node<T>& node = has_gates ? tape.record(out, attention_node_backward<T>, {q, k, v, gates})
                            : tape.record(out, attention_node_backward<T>, {q, k, v});
  node.saved[0] = saved.probs;
  node.saved[1] = saved.stats;
  node.ints[0] = options.causal;
  node.ints[1] = static_cast<int64_t>(options.kernels);
  node.context = options.key_padding;
  return tape.last();
}

template <typename T>
Tensor<T> attention_probs(Var<T> out) {
  HEADLAB_CHECK(out.defined(), "attention_probs: the Var is undefined");
  Tape<T>& tape = *out.tape;
  Node<T>& node = tape.node(out.id);
  HEADLAB_CHECK(node.op == attention_node_backward<T>,
                "attention_probs: Var " << out.id << " " << node.value.shape().str() << " is not an attention output");
  if (!node.saved[0].empty()) return node.saved[0];
  HEADLAB_CHECK(!node.saved[1].empty(),
                "attention_probs: probabilities were not kept (grad off): set AttentionOptions::keep_probs");
  // Recompute: the same forward on the same inputs writes the same A, bit for bit. Kept on the
  // node so later calls return it.
  const AttentionInputs<T> in = node_inputs(tape, node);
  Arena& arena = tape.arena();
  const Tensor<T> probs = arena.template empty<T>({in.q.size(0), in.q.size(2), in.q.size(1), in.k.size(1)});
  attention_forward(arena.template empty<T>(in.q.shape()), {.probs = probs}, in, node_options(node),
                    {.workspace = workspace_for(tape, in, false)});
  node.saved[0] = probs;
  return probs;
}

#define HEADLAB_INSTANTIATE(T)                                                                               \
  template Var<T> attention<T>(Var<T>, Var<T>, Var<T>, const AttentionOptions&, Var<T>);                     \
  template Tensor<T> attention_probs<T>(Var<T>);                                                             \
  template void attention_forward<T>(const Tensor<T>&, const AttentionSaved<T>&, const AttentionInputs<T>&,  \
                                     const AttentionOptions&, const AttentionScratch<T>&);                   \
  template void attention_backward<T>(const AttentionGrads<T>&, const Tensor<T>&, const AttentionInputs<T>&, \
                                      const AttentionSaved<T>&, const AttentionOptions&, const AttentionScratch<T>&);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
