// Private to the fused attention op: the per-head numeric kernels (forward.cpp, backward.cpp),
// called by the parallel drivers in src/ops/attention.cpp. One thread runs one call at a time on
// its own workspace; nothing here allocates, locks or threads.
//   Workspace<T> w(block, problem, false);  forward_head(resolve_kernels(options.kernels), problem, w, ...);
// The kernels exist once per instruction set (namespaces below): `base`, compiled with the build's
// own flags, and on x86-64 `avx512` (avx512.cpp: the same sources compiled for AVX-512), which
// has the float softmax twice: generic and with intrinsics (softmax.h).
#pragma once

#include <cstdint>
#include <type_traits>

#include "headlab/ops/attention.h"

namespace headlab::attention_kernels {

// Query rows per block: the scores of a block are a kRows x keys tile held in L1.
inline constexpr int64_t kRows = 8;
// The backward's dK and dV products take two blocks at once.
inline constexpr int64_t kPair = 2 * kRows;

// One head's [tokens, d_head] matrix inside a [B,T,heads,Dh] tensor, strides kept.
template <typename T>
struct HeadView {
  T* data = nullptr;
  int64_t row_stride = 0, col_stride = 0;
  T* row(int64_t t) const { return data + t * row_stride; }
};

// Shapes shared by every head of a call: `queries` rows attend over `keys` keys. Keys are padded
// to `tp`, query rows to `qp` and d_head to `dp` in the packed copies, so tiles never need a
// ragged edge. Causal: query t is the key position t + offset, offset = keys - queries (the
// queries are the last ones: training has offset 0, a cached decoding step one query at the end).
struct Problem {
  int64_t queries = 0, keys = 0, d_head = 0, tp = 0, qp = 0, dp = 0;
  int64_t offset = 0;
  bool causal = true;
  double scale = 1.0;  // 1 / sqrt(d_head)
  Problem(int64_t queries, int64_t keys, int64_t d_head, bool causal);
};

// Elements of T one thread's workspace holds for these shapes (a multiple of 16); the forward
// alone needs less than the backward.
int64_t workspace_size(int64_t queries, int64_t keys, int64_t d_head, bool backward);

// One thread's scratch, carved from a block of workspace_size() elements (a forward-only block
// leaves kr, dk, dv and orows null):
//   kt, vt [dp, tp]      K and V transposed (keys contiguous: scores and dO V^T run along keys)
//   kr, vr [tp, dp]      K and V rows (A V and dS K run along d_head); vr shares vt's memory
//   dk, dv [tp, dp]      dK, dV accumulated over the kv head's query heads
//   qr, orows [qp, dp]   the query head's scale * Q and dO rows
//   acc [kRows, dp]      a product tile
//   s, g [kPair, tp]     two blocks of scores / probabilities and of dO V^T / dS
//   keymask [tp]         1 for a real key, 0 for padding and past the last token
template <typename T>
struct Workspace {
  T *kt, *vt, *vr, *qr, *acc, *s, *g, *keymask;
  T *kr = nullptr, *dk = nullptr, *dv = nullptr, *orows = nullptr;
  Workspace(T* block, const Problem& p, bool backward);
};

// The float softmax a kernel instantiation uses (softmax.h): the generic one (plain loops, any
// instruction set) or the AVX-512 one (intrinsics; only in the avx512 copy). Double always runs
// the generic one.
enum class Softmax { generic, avx512 };

// The kernels a call runs, resolved from AttentionKernels (workspace.cpp): which copy, and in it
// which float softmax. An explicit avx512 on a CPU without it is a headlab::Error.
enum class KernelPath { base_generic, avx512_generic, avx512_intrinsic };
KernelPath resolve_kernels(AttentionKernels kernels);

// The per-head kernels, declared once per copy.
//   forward_head: out = gate * softmax(mask(q k^T * scale)) v for one query head. Packs k and v
//     into the workspace when pack_kv is set (a thread keeps them while consecutive heads share a
//     kv head). probs ([Tq,Tk] row-major) and stats ([Tq,2]: row max and 1/sum) are written when
//     non-null.
//   backward_begin / backward_head / backward_end: the backward of one kv head: pack it, run each
//     of its query heads, then add dK/dV out. backward_head accumulates dq (data may be null) and
//     the workspace's dK/dV sums; A comes from probs ([Tq,Tk]) if non-null, else is recomputed from
//     stats ([Tq,2]). It returns sum over t of rowsum(dO V^T * A), the head's ungated gate gradient.
#define HEADLAB_ATTENTION_KERNELS                                                                                    \
  template <typename T, Softmax S>                                                                                   \
  void forward_head(const Problem& p, const Workspace<T>& w, bool pack_kv, HeadView<const T> q, HeadView<const T> k, \
                    HeadView<const T> v, HeadView<T> out, T gate, const uint8_t* pad, T* probs, T* stats);           \
  template <typename T>                                                                                              \
  void backward_begin(const Problem& p, const Workspace<T>& w, HeadView<const T> k, HeadView<const T> v);            \
  template <typename T, Softmax S>                                                                                   \
  T backward_head(const Problem& p, const Workspace<T>& w, HeadView<const T> q, HeadView<const T> dout,              \
                  HeadView<T> dq, T gate, const uint8_t* pad, const T* probs, const T* stats, bool need_dk,          \
                  bool need_dv);                                                                                     \
  template <typename T>                                                                                              \
  void backward_end(const Problem& p, const Workspace<T>& w, HeadView<T> dk, HeadView<T> dv);
namespace base {
HEADLAB_ATTENTION_KERNELS
}
namespace avx512 {
HEADLAB_ATTENTION_KERNELS
}
#undef HEADLAB_ATTENTION_KERNELS

// Runs the kernel `name` of the copy and softmax `path` selects (only the base copy off x86-64,
// and with clang, whose target attributes avx512.cpp's GCC pragma does not set: the fuzz build).
#if defined(__x86_64__) && !defined(__clang__)
#define HEADLAB_KERNEL_CALL(path, name, ...)                                                        \
  if constexpr (std::is_same_v<T, float>)                                                           \
    if (path == KernelPath::avx512_intrinsic) return avx512::name<T, Softmax::avx512>(__VA_ARGS__); \
  if (path != KernelPath::base_generic) return avx512::name<T, Softmax::generic>(__VA_ARGS__);      \
  return base::name<T, Softmax::generic>(__VA_ARGS__)
#define HEADLAB_KERNEL_CALL_ANY_SOFTMAX(path, name, ...) \
  return path == KernelPath::base_generic ? base::name<T>(__VA_ARGS__) : avx512::name<T>(__VA_ARGS__)
#else
#define HEADLAB_KERNEL_CALL(path, name, ...) \
  (void)path;                                \
  return base::name<T, Softmax::generic>(__VA_ARGS__)
#define HEADLAB_KERNEL_CALL_ANY_SOFTMAX(path, name, ...) \
  (void)path;                                            \
  return base::name<T>(__VA_ARGS__)
#endif

template <typename T>
inline void forward_head(KernelPath path, const Problem& p, const Workspace<T>& w, bool pack_kv, HeadView<const T> q,
                         HeadView<const T> k, HeadView<const T> v, HeadView<T> out, T gate, const uint8_t* pad,
                         T* probs, T* stats) {
  HEADLAB_KERNEL_CALL(path, forward_head, p, w, pack_kv, q, k, v, out, gate, pad, probs, stats);
}
template <typename T>
inline void backward_begin(KernelPath path, const Problem& p, const Workspace<T>& w, HeadView<const T> k,
                           HeadView<const T> v) {
  HEADLAB_KERNEL_CALL_ANY_SOFTMAX(path, backward_begin, p, w, k, v);
}
template <typename T>
inline T backward_head(KernelPath path, const Problem& p, const Workspace<T>& w, HeadView<const T> q,
                       HeadView<const T> dout, HeadView<T> dq, T gate, const uint8_t* pad, const T* probs,
                       const T* stats, bool need_dk, bool need_dv) {
  HEADLAB_KERNEL_CALL(path, backward_head, p, w, q, dout, dq, gate, pad, probs, stats, need_dk, need_dv);
}
template <typename T>
inline void backward_end(KernelPath path, const Problem& p, const Workspace<T>& w, HeadView<T> dk, HeadView<T> dv) {
  HEADLAB_KERNEL_CALL_ANY_SOFTMAX(path, backward_end, p, w, dk, dv);
}
#undef HEADLAB_KERNEL_CALL
#undef HEADLAB_KERNEL_CALL_ANY_SOFTMAX

}  // namespace headlab::attention_kernels
