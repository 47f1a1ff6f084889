// The backward of the fused attention for one kv head and its query heads (the parallel driver
// over (b, kv head) is in src/ops/attention.cpp), with the derivation it implements.
//
// Per (b, h) with g = h / (H/Hkv), gate x = gates[h] (1 without gates), dO = dout_bh. The forward
// (forward.cpp) was:
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
// A comes back from the forward's row stats as A = exp(S - max) / sum, with the forward's own
// arithmetic (block_probs in softmax.h), or is read from a kept A.
// Why neither saving nor recomputing Y for the gate: r is the row sum softmax's backward needs
// anyway, and it is taken on the ungated G, so dx stays right for a pruned head (x = 0).
//
// Compiled once per instruction set, as forward.cpp is.
#include <algorithm>
#include <cstdint>

#include "kernels.h"
#include "softmax.h"
#include "tiles.h"

#ifndef HEADLAB_KERNEL_ISA
#define HEADLAB_KERNEL_ISA base
#endif

namespace headlab::attention_kernels::HEADLAB_KERNEL_ISA {

// Packs the kv head and zeroes its dK/dV sums.
template <typename T>
void backward_begin(const Problem& p, const Workspace<T>& w, HeadView<const T> k, HeadView<const T> v) {
  pack_transposed(w.kt, p, k);
  pack_transposed(w.vt, p, v);
  pack_rows(w.kr, p, p.keys, k, 0, p.keys, T(1));
  std::fill(w.dk, w.dk + p.keys * p.dp, T(0));
  std::fill(w.dv, w.dv + p.keys * p.dp, T(0));
}

// One query head, per block of rows, with x = gate and G = dO V^T, the steps above:
//   A  recomputed as the forward made it (or read from probs);            (2)
//   r = rowsum(G * A);  dx += sum_t r[t];  dS = x A * (G - r), 0 where A is masked;   (4), (2)
//   dQ += scale dS K;  dK += dS^T (scale Q);  dV += (x A)^T dO.            (1), (3)
// dK and dV take two blocks at a time (kPair rows): each key's accumulator row is read and written
// once per pair, which halves their traffic.
template <typename T, Softmax S>
T backward_head(const Problem& p, const Workspace<T>& w, HeadView<const T> q, HeadView<const T> dout, HeadView<T> dq,
                T gate, const uint8_t* pad, const T* probs, const T* stats, bool need_dk, bool need_dv) {
  constexpr int L = kLanes<T>;
  const T scale = static_cast<T>(p.scale);
  pack_rows(w.qr, p, padded_rows(p), q, 0, p.queries, scale);  // bit-identical to the forward's
  pack_rows(w.orows, p, padded_rows(p), dout, 0, p.queries, T(1));
  fill_keymask(w.keymask, p, pad);
  T gate_sum = T(0), r[kRows];
  int64_t nv[kRows], n[2];
  for (int64_t r0 = 0; r0 < p.queries; r0 += kPair) {
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t b0 = r0 + half * kRows, rows = std::clamp<int64_t>(p.queries - b0, 0, kRows);
      T* s = w.s + half * kRows * p.tp;  // this block's rows of A, then x A
      T* g = w.g + half * kRows * p.tp;  // and of G, then dS
      if (rows == 0) {                   // no second block: its rows stay out of the pair's dK/dV
        n[1] = n[0];
        for (int64_t i = 0; i < kRows; ++i)
          std::fill(s + i * p.tp, s + i * p.tp + n[0], T(0)), std::fill(g + i * p.tp, g + i * p.tp + n[0], T(0));
        break;
      }
      n[half] = block_keys(p, b0, rows);
      const int64_t nb = n[half];
      const T* qb = w.qr + b0 * p.dp;
      const T* ob = w.orows + b0 * p.dp;
      block_visible(p, b0, rows, nv);
      product(ob, p.dp, w.vt, p.tp, p.dp, nb, g, p.tp);  // G; rows past the end are 0 (dO is)
      if (probs) {                                       // masked keys already hold 0
        for (int64_t i = 0; i < kRows; ++i) {
          T* a = s + i * p.tp;
          if (i < rows) std::copy(probs + (b0 + i) * p.keys, probs + (b0 + i) * p.keys + nb, a);
          std::fill(a + (i < rows ? nb : 0), a + round_up(nb, L), T(0));
        }
        block_rowsum(s, g, p.tp, nb, r);
      } else {
        product(qb, p.dp, w.kt, p.tp, p.dp, nb, s, p.tp);
        block_probs<T, LanesFor<T, S>>(s, g, p.tp, nb, nv, w.keymask, stats + 2 * b0, r);
      }
      for (int64_t i = 0; i < rows; ++i) gate_sum += r[i];
      // dS = x A (G - r) and x A, in place; 0 wherever A is (masked keys, rows past the end).
      for (int64_t j0 = 0; j0 < nb; j0 += L)
        for (int64_t i = 0; i < kRows; ++i) {
          T* __restrict a = s + i * p.tp + j0;
          T* __restrict gi = g + i * p.tp + j0;
#pragma omp simd
          for (int c = 0; c < L; ++c) {
            const T xa = gate * a[c];
            gi[c] = xa * (gi[c] - r[i]);
            a[c] = xa;  // A is needed only as x A from here on, for dV
          }
        }
      if (gate != T(0) && dq.data) {
        product(g, p.tp, w.kr, p.dp, nb, p.dp, w.acc, p.dp);
        const T alpha[kRows] = {scale, scale, scale, scale, scale, scale, scale, scale};
        store_block(dq, p, b0, rows, w.acc, alpha, true);
      }
    }
    if (gate == T(0)) continue;  // pruned head: dS = 0 and dV = 0
    // The first block computed keys [0, n[0]) (to a whole vector); the pair reads [0, n[1]).
    for (int64_t i = 0; i < kRows; ++i)
      for (T* x : {w.s + i * p.tp, w.g + i * p.tp})
        if (round_up(n[0], L) < n[1]) std::fill(x + round_up(n[0], L), x + n[1], T(0));
    if (need_dk) product_atb(w.g, p.tp, w.qr + r0 * p.dp, p.dp, n[1], p.dp, w.dk, p.dp);
    if (need_dv) product_atb(w.s, p.tp, w.orows + r0 * p.dp, p.dp, n[1], p.dp, w.dv, p.dp);
  }
  return gate_sum;
}

// Adds the kv head's dK/dV sums into the caller's gradients.
template <typename T>
void backward_end(const Problem& p, const Workspace<T>& w, HeadView<T> dk, HeadView<T> dv) {
  add_rows(dk, p, w.dk);
  add_rows(dv, p, w.dv);
}

template void backward_begin<float>(const Problem&, const Workspace<float>&, HeadView<const float>,
                                    HeadView<const float>);
template void backward_begin<double>(const Problem&, const Workspace<double>&, HeadView<const double>,
                                     HeadView<const double>);
template void backward_end<float>(const Problem&, const Workspace<float>&, HeadView<float>, HeadView<float>);
template void backward_end<double>(const Problem&, const Workspace<double>&, HeadView<double>, HeadView<double>);
#define HEADLAB_INSTANTIATE(T, S)                                                                           \
  template T backward_head<T, S>(const Problem&, const Workspace<T>&, HeadView<const T>, HeadView<const T>, \
                                 HeadView<T>, T, const uint8_t*, const T*, const T*, bool, bool);
HEADLAB_ATTENTION_INSTANCES(HEADLAB_INSTANTIATE)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab::attention_kernels::HEADLAB_KERNEL_ISA
