// The numeric kernels of fused attention (see attention.h for the op, attention.cpp for the
// drivers and the backward's derivation). A head is processed in blocks of kRows = 8 query rows:
//   scores   S = (scale Q) K^T over the keys the block can see: a kRows x keys tile in L1;
//   softmax  in place, the 8 rows side by side (causal and padding masks fused, exp only on
//            visible keys), leaving e = exp(S - max) and the row stats (max, 1/sum);
//   output   O = gate / sum * (e V).
// The backward recomputes A = e / sum from the stats, block by block, with the forward's own
// arithmetic, then G = dO V^T, dS, dQ = dS K, and dK, dV for two blocks at once.
// Causal blocks skip the masked triangle: block [r0, r0+8) computes keys [0, r0+8) only.
// Why hand-written instead of per-head BLIS calls: at d_head 16-64 a per-head product is
// 128x128x16, where BLIS spends more time on its per-call overhead and packing than on flops
// (2.6 us of 10.5 us per call), and the T x T scores make a round trip through memory between
// calls. Here K and V are packed once per kv head (reused by its grouped query heads), Q and dO
// once per head, and the rest stays in registers or L1. The products are plain loops over
// compile-time widths that GCC turns into AVX-512 FMA micro-kernels (8 rows x 32 lanes, as in
// BLIS) and that double runs with 8-lane vectors. Intrinsics only where plain loops measured
// much slower: the 16 x 16 transpose of the packing, the lane folds, and the float softmax.
// Determinism: every sum has a fixed order (a tile's lanes are independent, its FMAs run in index
// order, lane folds are a fixed tree), and no value depends on the thread.
#include "attention_kernels.h"
#include "headlab/ops/fast_exp.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#if defined(__AVX512F__)
// GCC 12 warns inside its own AVX-512 headers (their _mm512_undefined_* placeholders look
// uninitialised once inlined); the warnings carry the header's locations, so silence them there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

// Portable builds (HEADLAB_NATIVE=OFF on x86-64) compile this file twice: as itself for the
// baseline ISA, its entry points in namespace `base`, and through attention_kernels_avx512.cpp
// with -march=x86-64-v4, in namespace `avx512`; attention_kernels.h picks one at run time. The
// shared pieces (Problem, Workspace, the dispatch test) are compiled once, in the base file.
#ifndef HEADLAB_KERNEL_ISA
#define HEADLAB_KERNEL_ISA base
#endif

namespace headlab::attention_kernels {

namespace {

template <typename T>
inline constexpr int kLanes = 64 / sizeof(T);  // one 512-bit vector
inline constexpr int64_t kPad = 32;            // tokens and d_head pad to multiples of this / of 16

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// ---- tiles: fixed-width register blocks, the only places that do flops ------------------------

// C[r][0:W] = sum_{d<k} A[r][d] B[d][0:W] for the kRows rows, W a compile-time width: every
// product of the forward and backward but the two transposed ones below. The kRows x W
// accumulators live in registers (8 x 32 floats = 16 zmm), each step loads W/L vectors of B and
// broadcasts kRows values of A: the BLIS micro-kernel shape.
template <typename T, int W>
inline void tile_ab(const T* __restrict a, int64_t lda, const T* __restrict b, int64_t ldb, int64_t k,
                    T* __restrict c, int64_t ldc) {
  T acc[kRows][W] = {};
  for (int64_t d = 0; d < k; ++d) {
    const T* __restrict brow = b + d * ldb;
    for (int r = 0; r < kRows; ++r) {
      const T x = a[r * lda + d];
#pragma omp simd
      for (int j = 0; j < W; ++j) acc[r][j] = std::fma(x, brow[j], acc[r][j]);
    }
  }
  for (int r = 0; r < kRows; ++r)
#pragma omp simd
    for (int j = 0; j < W; ++j) c[r * ldc + j] = acc[r][j];
}

// Acc[j][0:DC] += sum_r P[r][j] B[r][0:DC] for j < n, B's kPair rows held in registers:
// dS^T Q and A^T dO for two blocks, accumulated into the kv head's dK and dV. Each key's sum runs
// as two FMA chains (even and odd rows, added at the end) to halve the dependent latency
// (measured 6-10% faster); out-of-order execution overlaps the keys (unrolling them gained nothing).
template <typename T, int DC>
inline void tile_atb(const T* __restrict p, int64_t ldp, const T* __restrict b, int64_t ldb, int64_t n,
                     T* __restrict out, int64_t ldo) {
  T brows[kPair][DC];
  for (int r = 0; r < kPair; ++r)
#pragma omp simd
    for (int c = 0; c < DC; ++c) brows[r][c] = b[r * ldb + c];
  for (int64_t j = 0; j < n; ++j) {
    T* __restrict orow = out + j * ldo;
    T sum[2][DC];
#pragma omp simd
    for (int c = 0; c < DC; ++c) sum[0][c] = orow[c], sum[1][c] = T(0);
    for (int r = 0; r < kPair; ++r) {
      const T x = p[r * ldp + j];
#pragma omp simd
      for (int c = 0; c < DC; ++c) sum[r & 1][c] = std::fma(x, brows[r][c], sum[r & 1][c]);
    }
#pragma omp simd
    for (int c = 0; c < DC; ++c) orow[c] = sum[0][c] + sum[1][c];
  }
}

// ---- products over a block: tiles across keys or across d_head --------------------------------

// C[kRows][0:m'] = A[kRows][0:k] B[0:k][0:m'], m' = m rounded up to a vector (B is padded):
// S = (scale Q) K^T and G = dO V^T over the keys (B = K^T, V^T packed), A V and dS K over d_head.
template <typename T>
void product(const T* a, int64_t lda, const T* b, int64_t ldb, int64_t k, int64_t m, T* c, int64_t ldc) {
  constexpr int L = kLanes<T>;
  int64_t j = 0;
  for (; j + 2 * L <= m; j += 2 * L) tile_ab<T, 2 * L>(a, lda, b + j, ldb, k, c + j, ldc);
  if (m - j > L) tile_ab<T, 2 * L>(a, lda, b + j, ldb, k, c + j, ldc);
  else if (m > j) tile_ab<T, L>(a, lda, b + j, ldb, k, c + j, ldc);
}

// Out[0:n][0:dp] += P[kPair][0:n]^T B[kPair][0:dp], one vector of columns at a time (a tile two
// vectors wide measured 35-45% slower: its B rows and sums do not fit the 32 registers). Keys go
// in chunks of 32 so that at a large d_head the chunk's accumulator rows stay in L1 across the
// column passes (all keys at once streamed dK from L2 once per column vector: 2.5x slower at
// d_head 256, T = 512).
template <typename T>
void product_atb(const T* p, int64_t ldp, const T* b, int64_t ldb, int64_t n, int64_t dp, T* out, int64_t ldo) {
  constexpr int L = kLanes<T>;
  constexpr int64_t kKeys = 32;
  for (int64_t j0 = 0; j0 < n; j0 += kKeys)
    for (int64_t c0 = 0; c0 < dp; c0 += L)
      tile_atb<T, L>(p + j0, ldp, b + c0, ldb, std::min(kKeys, n - j0), out + j0 * ldo + c0, ldo);
}

// ---- packing ---------------------------------------------------------------------------------

// dst[c][i] = src[i][c] for a 16 x 16 block of floats: 16 row loads, 64 shuffles, 16 stores.
// The one place with intrinsics: GCC turns the plain loop into scalar loads and scattered
// stores, 5x slower, and at d_head 16 the transposed packing then cost a quarter of the op.
#if defined(__AVX512F__)
inline void transpose_16x16(const float* __restrict src, int64_t src_stride, float* __restrict dst,
                            int64_t dst_stride) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
  for (int i = 0; i < 16; i += 2) {  // interleave pairs of rows
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 4 x 4 blocks within each 128-bit lane
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 16; i += 8)  // then the 128-bit lanes
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
  for (int c = 0; c < 16; ++c) _mm512_storeu_ps(dst + c * dst_stride, r[c]);
}
#endif

// dst[d][t] = x[t][d] for t < tokens, d < d_head; 0 in the padding up to [dp][tp]. Reads x row by
// row: a head's rows sit a whole token apart in a fused qkv tensor (3 KB at d_model 256), and
// walking down a column at that stride maps every row to the same few L1 sets.
template <typename T>
void pack_transposed(T* __restrict dst, const Problem& p, HeadView<const T> x) {
  int64_t t = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (x.col_stride == 1 && p.d_head % 16 == 0)
      for (; t + 16 <= p.tokens; t += 16)
        for (int64_t d = 0; d < p.d_head; d += 16) transpose_16x16(x.row(t) + d, x.row_stride, dst + d * p.tp + t, p.tp);
  }
#endif
  for (; t < p.tokens; ++t) {
    const T* __restrict src = x.row(t);
    for (int64_t d = 0; d < p.d_head; ++d) dst[d * p.tp + t] = src[d * x.col_stride];
  }
  for (int64_t d = 0; d < p.dp; ++d) {
    T* row = dst + d * p.tp;
    std::fill(row + (d < p.d_head ? p.tokens : 0), row + p.tp, T(0));
  }
}

// dst[i][d] = alpha * x[t0 + i][d] for i < rows, d < d_head; 0 elsewhere in [dst_rows][dp].
template <typename T>
void pack_rows(T* __restrict dst, const Problem& p, int64_t dst_rows, HeadView<const T> x, int64_t t0, int64_t rows,
               T alpha) {
  for (int64_t i = 0; i < dst_rows; ++i) {
    T* __restrict row = dst + i * p.dp;
    int64_t d = 0;
    if (i < rows) {
      const T* __restrict src = x.row(t0 + i);
      if (x.col_stride == 1) {
#pragma omp simd
        for (d = 0; d < p.d_head; ++d) row[d] = alpha * src[d];
      } else {
        for (d = 0; d < p.d_head; ++d) row[d] = alpha * src[d * x.col_stride];
      }
    }
    std::fill(row + d, row + p.dp, T(0));
  }
}

// x[t][d] += src[t][d] for t < tokens, d < d_head (x may be null: not wanted).
template <typename T>
void add_rows(HeadView<T> x, const Problem& p, const T* __restrict src) {
  if (!x.data) return;
  for (int64_t t = 0; t < p.tokens; ++t) {
    T* __restrict row = x.row(t);
    const T* __restrict from = src + t * p.dp;
    if (x.col_stride == 1) {
#pragma omp simd
      for (int64_t d = 0; d < p.d_head; ++d) row[d] += from[d];
    } else {
      for (int64_t d = 0; d < p.d_head; ++d) row[d * x.col_stride] += from[d];
    }
  }
}

// ---- softmax ---------------------------------------------------------------------------------

// exp(x) for the softmax, where x = score - row max <= 0. Double (tests) uses std::exp; float uses
// fast_exp (ops/fast_exp.h), since glibc's scalar expf would cost more than the products at
// d_head 16.
inline double softmax_exp(double x) { return std::exp(x); }
inline float softmax_exp(float x) { return fast_exp(x); }

// Row loops run over whole vectors: lanes past the last visible key hold finite scores (the tiles
// computed them) and are masked by select, so there is no scalar tail. Partial sums and maxima
// stay in L lanes and fold once per row, in a fixed tree of shuffles (GCC's omp simd reductions
// and plain loops fold lane by lane through the stack, which cost more than the exps of a 64-key
// row). The fold order is fixed, so results stay bit-identical run to run.
template <typename T>
inline T fold_max(const T* part) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) return _mm512_reduce_max_ps(_mm512_loadu_ps(part));
  if constexpr (std::is_same_v<T, double>) return _mm512_reduce_max_pd(_mm512_loadu_pd(part));
#endif
  T m = part[0];
  for (int c = 1; c < kLanes<T>; ++c) m = part[c] > m ? part[c] : m;
  return m;
}
template <typename T>
inline T fold_sum(const T* part) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) return _mm512_reduce_add_ps(_mm512_loadu_ps(part));
  if constexpr (std::is_same_v<T, double>) return _mm512_reduce_add_pd(_mm512_loadu_pd(part));
#endif
  T sum = part[0];
  for (int c = 1; c < kLanes<T>; ++c) sum += part[c];
  return sum;
}

// Keys row t may see before padding, and the keys a block [r0, r0 + rows) computes.
inline int64_t visible_keys(const Problem& p, int64_t t) { return p.causal ? t + 1 : p.tokens; }
inline int64_t block_keys(const Problem& p, int64_t r0, int64_t rows) { return p.causal ? r0 + rows : p.tokens; }

// How many of the L lanes from j0 lie before `end`, as an int (a 32-bit lane compare).
template <typename T>
inline int lanes_before(int64_t end, int64_t j0) {
  return static_cast<int>(std::clamp<int64_t>(end - j0, 0, kLanes<T>));
}

// Row i of a block may use key j iff j < nv[i] and keymask[j] = 1; nv = 0 for rows past the end.
inline void block_visible(const Problem& p, int64_t r0, int64_t rows, int64_t* nv) {
  for (int64_t i = 0; i < kRows; ++i) nv[i] = i < rows ? visible_keys(p, r0 + i) : 0;
}

// The block's softmax, in place over its kRows rows of scores s [kRows][ld], keys [0, n) rounded
// up to a vector: e = exp(s - max) on usable keys, 0 elsewhere (the tiles read e). Saves each
// row's (max, 1/sum) in stats[i]; A = e * inv, exactly as block_probs recomputes it. A row with
// no usable key gets e = 0 and stats (0, 0): no 0/0. The rows run side by side, each pass over
// all of them, so their independent exp chains overlap (row by row, a 64-key row is one long
// dependency chain through max, exp, sum and 1/sum, and the core waits on it).
template <typename T>
void block_softmax(T* __restrict s, int64_t ld, int64_t n, const int64_t* nv, const T* __restrict keymask,
                   T (*stats)[2]) {
  constexpr int L = kLanes<T>;
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  T part[kRows][L], max[kRows];
  for (int i = 0; i < kRows; ++i) std::fill(part[i], part[i] + L, lowest);
  for (int64_t j0 = 0; j0 < n; j0 += L)
    for (int i = 0; i < kRows; ++i) {
      const T* __restrict row = s + i * ld + j0;
      const T* __restrict mask = keymask + j0;
      T* __restrict m = part[i];
      const int end = lanes_before<T>(nv[i], j0);
#pragma omp simd
      for (int c = 0; c < L; ++c) {
        const T x = (c < end) & (mask[c] != T(0)) ? row[c] : lowest;
        m[c] = x > m[c] ? x : m[c];
      }
    }
  for (int i = 0; i < kRows; ++i) {
    max[i] = fold_max(part[i]);
    std::fill(part[i], part[i] + L, T(0));
  }
  for (int64_t j0 = 0; j0 < n; j0 += L)
    for (int i = 0; i < kRows; ++i) {
      T* __restrict row = s + i * ld + j0;
      const T* __restrict mask = keymask + j0;
      T* __restrict sum = part[i];
      const int end = lanes_before<T>(nv[i], j0);
      const T mi = max[i];
#pragma omp simd
      for (int c = 0; c < L; ++c) {
        const bool use = (c < end) & (mask[c] != T(0));
        const T e = use ? softmax_exp(row[c] - mi) : T(0);
        row[c] = e;
        sum[c] += e;
      }
    }
  for (int i = 0; i < kRows; ++i) {
    const T sum = fold_sum(part[i]);
    stats[i][0] = sum > T(0) ? max[i] : T(0);
    stats[i][1] = sum > T(0) ? T(1) / sum : T(0);
  }
}

// The backward's twin of block_softmax: scores -> A = exp(s - max) * inv from the saved stats,
// bit-identical to the forward's A, fused with r[i] = rowsum(G * A), returned in r.
template <typename T>
void block_probs(T* __restrict s, const T* __restrict g, int64_t ld, int64_t n, const int64_t* nv,
                 const T* __restrict keymask, const T* __restrict stats, T* r) {
  constexpr int L = kLanes<T>;
  T part[kRows][L] = {}, max[kRows], inv[kRows];
  int64_t usable[kRows];  // nv, or 0 for a fully masked row (inv = 0)
  for (int i = 0; i < kRows; ++i) {
    max[i] = nv[i] ? stats[2 * i] : T(0);
    inv[i] = nv[i] ? stats[2 * i + 1] : T(0);
    usable[i] = inv[i] != T(0) ? nv[i] : 0;
  }
  for (int64_t j0 = 0; j0 < n; j0 += L)
    for (int i = 0; i < kRows; ++i) {
      T* __restrict row = s + i * ld + j0;
      const T* __restrict grow = g + i * ld + j0;
      const T* __restrict mask = keymask + j0;
      T* __restrict sum = part[i];
      const int end = lanes_before<T>(usable[i], j0);
      const T mi = max[i], vi = inv[i];
#pragma omp simd
      for (int c = 0; c < L; ++c) {
        const bool use = (c < end) & (mask[c] != T(0));
        const T a = use ? softmax_exp(row[c] - mi) * vi : T(0);
        row[c] = a;
        sum[c] = std::fma(grow[c], a, sum[c]);  // as block_rowsum sums it
      }
    }
  for (int i = 0; i < kRows; ++i) r[i] = fold_sum(part[i]);
}

// r[i] = rowsum(G * A) over the block, A already in s (read from a kept probs).
template <typename T>
void block_rowsum(const T* __restrict s, const T* __restrict g, int64_t ld, int64_t n, T* r) {
  constexpr int L = kLanes<T>;
  T part[kRows][L] = {};
  for (int64_t j0 = 0; j0 < n; j0 += L)
    for (int i = 0; i < kRows; ++i) {
      const T* __restrict row = s + i * ld + j0;
      const T* __restrict grow = g + i * ld + j0;
      T* __restrict sum = part[i];
#pragma omp simd
      for (int c = 0; c < L; ++c) sum[c] = std::fma(grow[c], row[c], sum[c]);
    }
  for (int i = 0; i < kRows; ++i) r[i] = fold_sum(part[i]);
}

#if defined(__AVX512F__)
// ---- the same two block functions for float on AVX-512 -----------------------------------------
// Written with intrinsics because the exps are half the op at d_head 16: GCC's vectorisation of
// the loops above keeps 8 rows of state plus the exp's constants in 32 registers only by
// spilling, and turns the lane bounds into 64-bit compares. Same arithmetic per lane as the
// templates (one exp, one 1/sum product, lane-ordered sums, the same fixed fold), except that
// e^x scales by 2^k with vscalefps, which needs no clamp and flushes x < -103 to 0.

inline __m512 exp16(__m512 x) {  // e^x for x <= 0: fast_exp's reduction and polynomial (ops/fast_exp.h)
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

// Lanes j0 .. j0+15 that lie before `end` (a row's visible keys) and hold a real key.
inline __mmask16 usable_lanes(int64_t end, int64_t j0, __mmask16 keys) {
  const int64_t k = end - j0;
  return k >= 16 ? keys : k <= 0 ? __mmask16(0) : __mmask16(keys & ((1u << k) - 1));
}
inline __mmask16 real_keys(const float* keymask) {
  return _mm512_cmp_ps_mask(_mm512_loadu_ps(keymask), _mm512_setzero_ps(), _CMP_NEQ_OQ);
}

inline void block_softmax(float* __restrict s, int64_t ld, int64_t n, const int64_t* nv,
                          const float* __restrict keymask, float (*stats)[2]) {
  __m512 part[kRows];
  for (int i = 0; i < kRows; ++i) part[i] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 keys = real_keys(keymask + j0);
    for (int i = 0; i < kRows; ++i)
      part[i] = _mm512_mask_max_ps(part[i], usable_lanes(nv[i], j0, keys), part[i], _mm512_loadu_ps(s + i * ld + j0));
  }
  float max[kRows];
  for (int i = 0; i < kRows; ++i) {
    max[i] = _mm512_reduce_max_ps(part[i]);
    part[i] = _mm512_setzero_ps();
  }
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 keys = real_keys(keymask + j0);
    for (int i = 0; i < kRows; ++i) {
      float* row = s + i * ld + j0;
      const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(row), _mm512_set1_ps(max[i]));
      const __m512 e = _mm512_maskz_mov_ps(usable_lanes(nv[i], j0, keys), exp16(x));
      _mm512_storeu_ps(row, e);
      part[i] = _mm512_add_ps(part[i], e);
    }
  }
  for (int i = 0; i < kRows; ++i) {
    const float sum = _mm512_reduce_add_ps(part[i]);
    stats[i][0] = sum > 0.0f ? max[i] : 0.0f;
    stats[i][1] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
}

inline void block_probs(float* __restrict s, const float* __restrict g, int64_t ld, int64_t n, const int64_t* nv,
                        const float* __restrict keymask, const float* __restrict stats, float* r) {
  float max[kRows], inv[kRows];
  int64_t usable[kRows];  // nv, or 0 for a fully masked row (inv = 0)
  __m512 part[kRows];
  for (int i = 0; i < kRows; ++i) {
    max[i] = nv[i] ? stats[2 * i] : 0.0f;
    inv[i] = nv[i] ? stats[2 * i + 1] : 0.0f;
    usable[i] = inv[i] != 0.0f ? nv[i] : 0;
    part[i] = _mm512_setzero_ps();
  }
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 keys = real_keys(keymask + j0);
    for (int i = 0; i < kRows; ++i) {
      float* row = s + i * ld + j0;
      const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(row), _mm512_set1_ps(max[i]));
      const __m512 a = _mm512_maskz_mul_ps(usable_lanes(usable[i], j0, keys), exp16(x), _mm512_set1_ps(inv[i]));
      _mm512_storeu_ps(row, a);
      part[i] = _mm512_fmadd_ps(_mm512_loadu_ps(g + i * ld + j0), a, part[i]);
    }
  }
  for (int i = 0; i < kRows; ++i) r[i] = _mm512_reduce_add_ps(part[i]);
}
#endif

// keymask[j] = 1 for a real key j < tokens, else 0 (padding, and the tail up to tp).
template <typename T>
void fill_keymask(T* keymask, const Problem& p, const uint8_t* pad) {
  for (int64_t j = 0; j < p.tp; ++j) keymask[j] = j < p.tokens && (!pad || pad[j]) ? T(1) : T(0);
}

}  // namespace

#if !defined(HEADLAB_KERNEL_SECOND_COPY)
Problem::Problem(int64_t tokens_, int64_t d_head_, bool causal_)
    : tokens(tokens_), d_head(d_head_), tp(round_up(std::max<int64_t>(tokens_, 1), kPad)),
      dp(round_up(d_head_, 16)), causal(causal_), scale(1.0 / std::sqrt(static_cast<double>(d_head_))) {}

int64_t workspace_size(int64_t tokens, int64_t d_head, bool backward) {
  const Problem p(tokens, d_head, true);
  return (backward ? 7 : 3) * p.tp * p.dp + kRows * p.dp + (2 * kPair + 1) * p.tp;
}

template <typename T>
Workspace<T>::Workspace(T* block, const Problem& p, bool backward) {
  T* next = block;
  auto take = [&](int64_t n) {
    T* at = next;
    next += n;
    return at;
  };
  kt = take(p.dp * p.tp), vt = take(p.dp * p.tp), qr = take(p.tp * p.dp);
  vr = vt;  // V rows (forward) and V^T (backward) are never needed in the same call
  acc = take(kRows * p.dp), s = take(kPair * p.tp), g = take(kPair * p.tp), keymask = take(p.tp);
  if (!backward) return;
  kr = take(p.tp * p.dp), dk = take(p.tp * p.dp), dv = take(p.tp * p.dp), orows = take(p.tp * p.dp);
}
template struct Workspace<float>;
template struct Workspace<double>;

#if defined(HEADLAB_PORTABLE_KERNELS)
bool use_avx512() {
  static const bool yes = [] {
    const char* off = std::getenv("HEADLAB_NO_AVX512");
    if (off != nullptr && *off != '\0' && std::string(off) != "0") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512cd");
  }();
  return yes;
}
#endif
#endif  // !HEADLAB_KERNEL_SECOND_COPY

namespace {

// out[r0 + i][d] = alpha[i] * acc[i][d] (accumulate: +=) for the block's valid rows.
template <typename T>
void store_block(HeadView<T> out, const Problem& p, int64_t r0, int64_t rows, const T* __restrict acc,
                 const T* alpha, bool accumulate) {
  for (int64_t i = 0; i < rows; ++i) {
    T* __restrict o = out.row(r0 + i);
    const T* __restrict a = acc + i * p.dp;
    const T x = alpha[i];
    const int64_t cs = out.col_stride;
    if (cs == 1 && accumulate) {
#pragma omp simd
      for (int64_t d = 0; d < p.d_head; ++d) o[d] += x * a[d];
    } else if (cs == 1) {
#pragma omp simd
      for (int64_t d = 0; d < p.d_head; ++d) o[d] = x * a[d];
    } else {
      for (int64_t d = 0; d < p.d_head; ++d) o[d * cs] = (accumulate ? o[d * cs] : T(0)) + x * a[d];
    }
  }
}

// Rows of a head in the workspace run to a whole number of blocks; the ones past the last token
// are zero, so a partial block's tiles read zeros.
inline int64_t padded_rows(const Problem& p) { return round_up(p.tokens, kPair); }

}  // namespace

namespace HEADLAB_KERNEL_ISA {

// Forward, per block of rows [r0, r0 + rows):  S = (scale Q) K^T;  A = softmax_rows(mask(S)) in
// place;  O = gate * A V.  A pruned head (gate 0) still computes A and its stats.
template <typename T>
void forward_head(const Problem& p, const Workspace<T>& w, bool pack_kv, HeadView<const T> q, HeadView<const T> k,
                  HeadView<const T> v, HeadView<T> out, T gate, const uint8_t* pad, T* probs, T* stats) {
  if (pack_kv) {
    pack_transposed(w.kt, p, k);
    pack_rows(w.vr, p, p.tokens, v, 0, p.tokens, T(1));
  }
  // All of Q at once: its rows are far apart in memory, and loading them together lets the
  // misses overlap instead of stalling each block.
  pack_rows(w.qr, p, padded_rows(p), q, 0, p.tokens, static_cast<T>(p.scale));
  fill_keymask(w.keymask, p, pad);
  int64_t nv[kRows];
  T row_stats[kRows][2], alpha[kRows];
  for (int64_t r0 = 0; r0 < p.tokens; r0 += kRows) {
    const int64_t rows = std::min(kRows, p.tokens - r0), n = block_keys(p, r0, rows);
    block_visible(p, r0, rows, nv);
    product(w.qr + r0 * p.dp, p.dp, w.kt, p.tp, p.dp, n, w.s, p.tp);
    block_softmax(w.s, p.tp, n, nv, w.keymask, row_stats);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t t = r0 + i;
      alpha[i] = gate * row_stats[i][1];  // O = gate * (e V) / sum
      if (stats) std::copy(row_stats[i], row_stats[i] + 2, stats + 2 * t);
      if (probs) {
        const T* e = w.s + i * p.tp;
        T* a = probs + t * p.tokens;
        for (int64_t j = 0; j < n; ++j) a[j] = e[j] * row_stats[i][1];
        std::fill(a + n, a + p.tokens, T(0));
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

template <typename T>
void backward_begin(const Problem& p, const Workspace<T>& w, HeadView<const T> k, HeadView<const T> v) {
  pack_transposed(w.kt, p, k);
  pack_transposed(w.vt, p, v);
  pack_rows(w.kr, p, p.tokens, k, 0, p.tokens, T(1));
  std::fill(w.dk, w.dk + p.tokens * p.dp, T(0));
  std::fill(w.dv, w.dv + p.tokens * p.dp, T(0));
}

// Backward of one query head, per block of rows, with x = gate, G = dO V^T (the ungated dA):
//   A  recomputed as the forward made it (or read from probs);
//   r = rowsum(G * A);  dx += sum_t r[t];  dS = x A * (G - r), 0 where A is masked;
//   dQ += scale dS K;  dK += dS^T (scale Q);  dV += (x A)^T dO.
// See attention.cpp for the derivation. dK and dV take two blocks at a time (kPair rows): each
// key's accumulator row is read and written once per pair, which halves their traffic.
template <typename T>
T backward_head(const Problem& p, const Workspace<T>& w, HeadView<const T> q, HeadView<const T> dout,
                HeadView<T> dq, T gate, const uint8_t* pad, const T* probs, const T* stats, bool need_dk,
                bool need_dv) {
  constexpr int L = kLanes<T>;
  const T scale = static_cast<T>(p.scale);
  pack_rows(w.qr, p, padded_rows(p), q, 0, p.tokens, scale);  // bit-identical to the forward's
  pack_rows(w.orows, p, padded_rows(p), dout, 0, p.tokens, T(1));
  fill_keymask(w.keymask, p, pad);
  T gate_sum = T(0), r[kRows];
  int64_t nv[kRows], n[2];
  for (int64_t r0 = 0; r0 < p.tokens; r0 += kPair) {
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t b0 = r0 + half * kRows, rows = std::clamp<int64_t>(p.tokens - b0, 0, kRows);
      T* s = w.s + half * kRows * p.tp;  // this block's rows of A, then x A
      T* g = w.g + half * kRows * p.tp;  // and of G, then dS
      if (rows == 0) {  // no second block: its rows stay out of the pair's dK/dV
        n[1] = n[0];
        for (int64_t i = 0; i < kRows; ++i) std::fill(s + i * p.tp, s + i * p.tp + n[0], T(0)), std::fill(g + i * p.tp, g + i * p.tp + n[0], T(0));
        break;
      }
      n[half] = block_keys(p, b0, rows);
      const int64_t nb = n[half];
      const T* qb = w.qr + b0 * p.dp;
      const T* ob = w.orows + b0 * p.dp;
      block_visible(p, b0, rows, nv);
      product(ob, p.dp, w.vt, p.tp, p.dp, nb, g, p.tp);  // G; rows past the end are 0 (dO is)
      if (probs) {  // masked keys already hold 0
        for (int64_t i = 0; i < kRows; ++i) {
          T* a = s + i * p.tp;
          if (i < rows) std::copy(probs + (b0 + i) * p.tokens, probs + (b0 + i) * p.tokens + nb, a);
          std::fill(a + (i < rows ? nb : 0), a + round_up(nb, L), T(0));
        }
        block_rowsum(s, g, p.tp, nb, r);
      } else {
        product(qb, p.dp, w.kt, p.tp, p.dp, nb, s, p.tp);
        block_probs(s, g, p.tp, nb, nv, w.keymask, stats + 2 * b0, r);
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

template <typename T>
void backward_end(const Problem& p, const Workspace<T>& w, HeadView<T> dk, HeadView<T> dv) {
  add_rows(dk, p, w.dk);
  add_rows(dv, p, w.dv);
}

#define HEADLAB_INSTANTIATE(T)                                                                                   \
  template void forward_head<T>(const Problem&, const Workspace<T>&, bool, HeadView<const T>, HeadView<const T>, \
                                HeadView<const T>, HeadView<T>, T, const uint8_t*, T*, T*);                      \
  template void backward_begin<T>(const Problem&, const Workspace<T>&, HeadView<const T>, HeadView<const T>);    \
  template T backward_head<T>(const Problem&, const Workspace<T>&, HeadView<const T>, HeadView<const T>,         \
                              HeadView<T>, T, const uint8_t*, const T*, const T*, bool, bool);                   \
  template void backward_end<T>(const Problem&, const Workspace<T>&, HeadView<T>, HeadView<T>);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace HEADLAB_KERNEL_ISA

}  // namespace headlab::attention_kernels
