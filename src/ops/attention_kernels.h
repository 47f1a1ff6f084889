// Private to src/ops/attention*.cpp: the per-head numeric kernels of the fused attention op
// (attention_kernels.cpp), called by the parallel drivers in attention.cpp. One thread runs one
// call at a time on its own workspace; nothing here allocates, locks or threads.
//   Workspace<T> w(block, problem);  forward_head(problem, w, pack_kv, ...);
#pragma once

#include <cstdint>

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

// Shapes shared by every head of a call. Keys are padded to `tp` and d_head to `dp` in the
// packed copies, so tiles never need a ragged edge.
struct Problem {
  int64_t tokens = 0, d_head = 0, tp = 0, dp = 0;
  bool causal = true;
  double scale = 1.0;  // 1 / sqrt(d_head)
  Problem(int64_t tokens, int64_t d_head, bool causal);
};

// Elements of T one thread's workspace holds for these shapes (a multiple of 16); the forward
// alone needs less than the backward.
int64_t workspace_size(int64_t tokens, int64_t d_head, bool backward);

// One thread's scratch, carved from a block of workspace_size() elements (a forward-only block
// leaves kr, dk, dv and orows null):
//   kt, vt [dp, tp]      K and V transposed (keys contiguous: scores and dO V^T run along keys)
//   kr, vr [tp, dp]      K and V rows (A V and dS K run along d_head); vr shares vt's memory
//   dk, dv [tp, dp]      dK, dV accumulated over the kv head's query heads
//   qr, orows [tp, dp]   the query head's scale * Q and dO rows
//   acc [kRows, dp]      a product tile
//   s, g [kPair, tp]     two blocks of scores / probabilities and of dO V^T / dS
//   keymask [tp]         1 for a real key, 0 for padding and past the last token
template <typename T>
struct Workspace {
  T *kt, *vt, *vr, *qr, *acc, *s, *g, *keymask;
  T *kr = nullptr, *dk = nullptr, *dv = nullptr, *orows = nullptr;
  Workspace(T* block, const Problem& p, bool backward);
};

// The kernels, once per instruction set: `base` (the build's own flags) and, in portable builds,
// `avx512` (attention_kernels_avx512.cpp). The unqualified functions below dispatch.
#define HEADLAB_ATTENTION_KERNELS                                                                                  \
  template <typename T>                                                                                            \
  void forward_head(const Problem& p, const Workspace<T>& w, bool pack_kv, HeadView<const T> q, HeadView<const T> k, \
                    HeadView<const T> v, HeadView<T> out, T gate, const uint8_t* pad, T* probs, T* stats);          \
  template <typename T>                                                                                            \
  void backward_begin(const Problem& p, const Workspace<T>& w, HeadView<const T> k, HeadView<const T> v);            \
  template <typename T>                                                                                            \
  T backward_head(const Problem& p, const Workspace<T>& w, HeadView<const T> q, HeadView<const T> dout,             \
                  HeadView<T> dq, T gate, const uint8_t* pad, const T* probs, const T* stats, bool need_dk,         \
                  bool need_dv);                                                                                   \
  template <typename T>                                                                                            \
  void backward_end(const Problem& p, const Workspace<T>& w, HeadView<T> dk, HeadView<T> dv);
namespace base {
HEADLAB_ATTENTION_KERNELS
}
namespace avx512 {
HEADLAB_ATTENTION_KERNELS
}
#undef HEADLAB_ATTENTION_KERNELS

#if defined(HEADLAB_PORTABLE_KERNELS)
// The CPU has AVX-512 (F, BW, CD, DQ, VL) and HEADLAB_NO_AVX512 is unset or 0; checked once.
bool use_avx512();
#define HEADLAB_KERNEL_CALL(name, ...) return use_avx512() ? avx512::name(__VA_ARGS__) : base::name(__VA_ARGS__)
#else
#define HEADLAB_KERNEL_CALL(name, ...) return base::name(__VA_ARGS__)
#endif

// Forward of one query head: out = gate * softmax(mask(q k^T * scale)) v. Packs k and v into the
// workspace when pack_kv is set (a thread keeps them while consecutive heads share a kv head).
// probs ([T,T] row-major) and stats ([T,2]: row max and 1/sum) are written when non-null.
template <typename T>
inline void forward_head(const Problem& p, const Workspace<T>& w, bool pack_kv, HeadView<const T> q,
                         HeadView<const T> k, HeadView<const T> v, HeadView<T> out, T gate, const uint8_t* pad,
                         T* probs, T* stats) {
  HEADLAB_KERNEL_CALL(forward_head<T>, p, w, pack_kv, q, k, v, out, gate, pad, probs, stats);
}

// Backward of one kv head: pack it, run each of its query heads, then add dK/dV out.
template <typename T>
inline void backward_begin(const Problem& p, const Workspace<T>& w, HeadView<const T> k, HeadView<const T> v) {
  HEADLAB_KERNEL_CALL(backward_begin<T>, p, w, k, v);
}
// One query head; accumulates dq (data may be null) and the workspace's dK/dV sums. The
// probabilities come from probs ([T,T]) if non-null, else are recomputed from stats ([T,2]).
// Returns rowsum over all t of (dO V^T * A), the ungated gate gradient of this head.
template <typename T>
inline T backward_head(const Problem& p, const Workspace<T>& w, HeadView<const T> q, HeadView<const T> dout,
                       HeadView<T> dq, T gate, const uint8_t* pad, const T* probs, const T* stats, bool need_dk,
                       bool need_dv) {
  HEADLAB_KERNEL_CALL(backward_head<T>, p, w, q, dout, dq, gate, pad, probs, stats, need_dk, need_dv);
}
template <typename T>
inline void backward_end(const Problem& p, const Workspace<T>& w, HeadView<T> dk, HeadView<T> dv) {
  HEADLAB_KERNEL_CALL(backward_end<T>, p, w, dk, dv);
}
#undef HEADLAB_KERNEL_CALL

}  // namespace headlab::attention_kernels
