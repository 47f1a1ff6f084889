// The forward of one query head of the fused attention (see include/headlab/ops/attention.h for
// the op, src/ops/attention.cpp for the parallel driver over heads). A head is processed in blocks
// of kRows = 8 query rows:
//   scores   S = (scale Q) K^T over the keys the block can see: a kRows x keys tile in L1;
//   softmax  in place, the 8 rows side by side (causal and padding masks fused, exp only on
//            visible keys), leaving e = exp(S - max) and the row stats (max, 1/sum);
//   output   O = gate / sum * (e V).
// Causal blocks skip the masked triangle: block [r0, r0+8) computes keys [0, r0+8+offset) only
// (offset = keys - queries, 0 in training). A single query without stats to keep (a cached
// decoding step) skips the packing instead: forward_one_query.
// Compiled once per instruction set: as itself into namespace `base`, and through avx512.cpp into
// `avx512` (kernels.h).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels.h"
#include "softmax.h"
#include "tiles.h"

#ifndef HEADLAB_KERNEL_ISA
#define HEADLAB_KERNEL_ISA base
#endif

namespace headlab::attention_kernels::HEADLAB_KERNEL_ISA {

namespace {

// One query and no stats kept (a cached decoding step, which no backward follows): K and V are
// read where they lie instead of packed, since each row is used once. The same math as the blocks
// summed in another order, so not bit-identical to them; a backward never sees it (it needs the
// stats, and with them the blocks run). Causal is no mask here: the one query is the last key.
template <typename T>
void forward_one_query(const Problem& p, const Workspace<T>& w, HeadView<const T> q, HeadView<const T> k,
                       HeadView<const T> v, HeadView<T> out, T gate, const uint8_t* pad, T* probs) {
  const int64_t D = p.d_head;
  T* qs = w.qr;  // scale * q, contiguous
  T* e = w.s;    // scores, then exp(score - max); 0 for padding
  T* acc = w.acc;
  for (int64_t d = 0; d < D; ++d) qs[d] = static_cast<T>(p.scale) * q.data[d * q.col_stride];
  // q . k_j in kLanes partial sums (so the loop vectorises without reassociating), folded.
  constexpr int L = kLanes<T>;
  const int64_t D0 = k.col_stride == 1 ? D / L * L : 0;
  T max = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < p.keys; ++j) {
    if (pad && !pad[j]) continue;
    const T* __restrict kj = k.row(j);
    T part[L] = {};
    for (int64_t d0 = 0; d0 < D0; d0 += L) {
#pragma omp simd
      for (int c = 0; c < L; ++c) part[c] += qs[d0 + c] * kj[d0 + c];
    }
    T dot = fold_sum(part);
    for (int64_t d = D0; d < D; ++d) dot += qs[d] * kj[d * k.col_stride];
    e[j] = dot;
    max = std::max(max, dot);
  }
  T sum = 0;
  for (int64_t j = 0; j < p.keys; ++j) {
    e[j] = pad && !pad[j] ? T(0) : softmax_exp(e[j] - max);
    sum += e[j];
  }
  const T inv = sum > T(0) ? T(1) / sum : T(0);  // no visible key: A = 0 and O = 0, as the blocks
  if (probs)
    for (int64_t j = 0; j < p.keys; ++j) probs[j] = e[j] * inv;
  std::fill(acc, acc + D, T(0));
  if (gate != T(0))
    for (int64_t j = 0; j < p.keys; ++j) {
      if (e[j] == T(0)) continue;
      const T* vj = v.row(j);
      if (v.col_stride == 1) {
        for (int64_t d = 0; d < D; ++d) acc[d] += e[j] * vj[d];
      } else {
        for (int64_t d = 0; d < D; ++d) acc[d] += e[j] * vj[d * v.col_stride];
      }
    }
  const T alpha = gate * inv;
  for (int64_t d = 0; d < D; ++d) out.data[d * out.col_stride] = alpha * acc[d];
}

}  // namespace

// Per block of rows [r0, r0 + rows):  S = (scale Q) K^T;  A = softmax_rows(mask(S)) in place;
// O = gate * A V.  A pruned head (gate 0) still computes A and its stats: the backward needs them
// for its gate's gradient.
template <typename T, Softmax S>
void forward_head(const Problem& p, const Workspace<T>& w, bool pack_kv, HeadView<const T> q, HeadView<const T> k,
                  HeadView<const T> v, HeadView<T> out, T gate, const uint8_t* pad, T* probs, T* stats) {
  if (p.queries == 1 && !stats) return forward_one_query(p, w, q, k, v, out, gate, pad, probs);
  if (pack_kv) {
    pack_transposed(w.kt, p, k);
    pack_rows(w.vr, p, p.keys, v, 0, p.keys, T(1));
  }
  // All of Q at once: its rows are far apart in memory, and loading them together lets the
  // misses overlap instead of stalling each block.
  pack_rows(w.qr, p, padded_rows(p), q, 0, p.queries, static_cast<T>(p.scale));
  fill_keymask(w.keymask, p, pad);
  int64_t nv[kRows];
  T row_stats[kRows][2], alpha[kRows];
  for (int64_t r0 = 0; r0 < p.queries; r0 += kRows) {
    const int64_t rows = std::min(kRows, p.queries - r0), n = block_keys(p, r0, rows);
    block_visible(p, r0, rows, nv);
    product(w.qr + r0 * p.dp, p.dp, w.kt, p.tp, p.dp, n, w.s, p.tp);
    block_softmax<T, LanesFor<T, S>>(w.s, p.tp, n, nv, w.keymask, row_stats);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t t = r0 + i;
      alpha[i] = gate * row_stats[i][1];  // O = gate * (e V) / sum
      if (stats) std::copy(row_stats[i], row_stats[i] + 2, stats + 2 * t);
      if (probs) {
        const T* e = w.s + i * p.tp;
        T* a = probs + t * p.keys;
        for (int64_t j = 0; j < n; ++j) a[j] = e[j] * row_stats[i][1];
        std::fill(a + n, a + p.keys, T(0));
      }
    }
    if (gate == T(0)) {
      std::fill(w.acc, w.acc + kRows * p.dp, T(0));
    } else {
      product(w.s, p.tp, w.vr, p.dp, n, p.dp, w.acc, p.dp);
    }
    store_block(out, p, r0, rows, w.acc, alpha, false);
  }
}

#define HEADLAB_INSTANTIATE(T, S)                                                                                   \
  template void forward_head<T, S>(const Problem&, const Workspace<T>&, bool, HeadView<const T>, HeadView<const T>, \
                                   HeadView<const T>, HeadView<T>, T, const uint8_t*, T*, T*);
HEADLAB_ATTENTION_INSTANCES(HEADLAB_INSTANTIATE)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab::attention_kernels::HEADLAB_KERNEL_ISA
