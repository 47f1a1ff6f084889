// Private to the attention kernels (forward.cpp, backward.cpp, each compiled once per instruction
// set): the register tiles that do every flop of the products, the block products built from them,
// and the packing of K, V, Q and dO into the workspace and back. All in an anonymous namespace, so
// each copy of the kernels gets its own, compiled for its instruction set.
// Why hand-written instead of per-head BLIS calls: at d_head 16-64 a per-head product is
// 128x128x16, where BLIS spends more time on its per-call overhead and packing than on flops
// (2.6 us of 10.5 us per call), and the T x T scores make a round trip through memory between
// calls. Here K and V are packed once per kv head (reused by its grouped query heads), Q and dO
// once per head, and the rest stays in registers or L1. The products are plain loops over
// compile-time widths that GCC turns into AVX-512 FMA micro-kernels (8 rows x 32 lanes, as in
// BLIS) and that double runs with 8-lane vectors. Intrinsics only where plain loops measured
// much slower: the 16 x 16 transpose of the packing, the lane folds and the float softmax
// (softmax.h).
// Determinism: every sum has a fixed order (a tile's lanes are independent, its FMAs run in index
// order), and no value depends on the thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels.h"

// The intrinsics: where the build targets AVX-512, and in the avx512 copy of the kernels (whose
// target pragma does not define __AVX512F__ in C++: GCC lexes the file before it applies the
// pragma, so that copy uses them only in softmax.h's Avx512Lanes).
#if defined(__AVX512F__) || defined(HEADLAB_ATTENTION_AVX512_COPY)
// GCC 12 warns inside its own AVX-512 headers (their _mm512_undefined_* placeholders look
// uninitialised once inlined); the warnings carry the header's locations, so silence them there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace headlab::attention_kernels {

namespace {

template <typename T>
inline constexpr int kLanes = 64 / sizeof(T);  // one 512-bit vector
inline constexpr int64_t kPad = 32;            // keys and queries pad to multiples of this, d_head of 16

inline int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// ---- tiles: fixed-width register blocks, the only places that do flops ------------------------

// C[r][0:W] = sum_{d<k} A[r][d] B[d][0:W] for the kRows rows, W a compile-time width: every
// product of the forward and backward but the two transposed ones below. The kRows x W
// accumulators live in registers (8 x 32 floats = 16 zmm), each step loads W/L vectors of B and
// broadcasts kRows values of A: the BLIS micro-kernel shape.
template <typename T, int W>
inline void tile_ab(const T* __restrict a, int64_t lda, const T* __restrict b, int64_t ldb, int64_t k, T* __restrict c,
                    int64_t ldc) {
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
  if (m - j > L)
    tile_ab<T, 2 * L>(a, lda, b + j, ldb, k, c + j, ldc);
  else if (m > j)
    tile_ab<T, L>(a, lda, b + j, ldb, k, c + j, ldc);
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

// dst[d][t] = x[t][d] for t < keys, d < d_head; 0 in the padding up to [dp][tp]. Reads x row by
// row: a head's rows sit a whole token apart in a fused qkv tensor (3 KB at d_model 256), and
// walking down a column at that stride maps every row to the same few L1 sets.
template <typename T>
void pack_transposed(T* __restrict dst, const Problem& p, HeadView<const T> x) {
  int64_t t = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (x.col_stride == 1 && p.d_head % 16 == 0)
      for (; t + 16 <= p.keys; t += 16)
        for (int64_t d = 0; d < p.d_head; d += 16)
          transpose_16x16(x.row(t) + d, x.row_stride, dst + d * p.tp + t, p.tp);
  }
#endif
  for (; t < p.keys; ++t) {
    const T* __restrict src = x.row(t);
    for (int64_t d = 0; d < p.d_head; ++d) dst[d * p.tp + t] = src[d * x.col_stride];
  }
  for (int64_t d = 0; d < p.dp; ++d) {
    T* row = dst + d * p.tp;
    std::fill(row + (d < p.d_head ? p.keys : 0), row + p.tp, T(0));
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

// x[t][d] += src[t][d] for t < keys, d < d_head (x may be null: not wanted): dK and dV out.
template <typename T>
void add_rows(HeadView<T> x, const Problem& p, const T* __restrict src) {
  if (!x.data) return;
  for (int64_t t = 0; t < p.keys; ++t) {
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

// keymask[j] = 1 for a real key j < keys, else 0 (padding, and the tail up to tp).
template <typename T>
void fill_keymask(T* keymask, const Problem& p, const uint8_t* pad) {
  for (int64_t j = 0; j < p.tp; ++j) keymask[j] = j < p.keys && (!pad || pad[j]) ? T(1) : T(0);
}

// out[r0 + i][d] = alpha[i] * acc[i][d] (accumulate: +=) for the block's valid rows.
template <typename T>
void store_block(HeadView<T> out, const Problem& p, int64_t r0, int64_t rows, const T* __restrict acc, const T* alpha,
                 bool accumulate) {
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

// Query rows of a head in the workspace run to a whole number of blocks; the ones past the last
// query are zero, so a partial block's tiles read zeros.
inline int64_t padded_rows(const Problem& p) {
  return round_up(p.queries, kPair);
}

}  // namespace

}  // namespace headlab::attention_kernels
