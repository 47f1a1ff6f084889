// Private to the attention kernels: the softmax of a block of kRows query rows, in place over its
// scores, with the causal and padding masks fused (exp only on visible keys). Written once, over a
// lane policy that says how a vector of lanes is masked, exponentiated, accumulated and folded:
//   GenericLanes<T>  plain loops over 64 bytes of lanes that GCC vectorises; exp is std::exp for
//                    double and fast_exp for float (ops/fast_exp.h). Softmax::generic, in both
//                    copies of the kernels (kernels.h).
//   Avx512Lanes      float with AVX-512 intrinsics: Softmax::avx512, in the `avx512` copy of the
//                    kernels (avx512.cpp) on every x86-64 build. The exps are half the op at
//                    d_head 16: GCC's vectorisation of the generic loops keeps 8 rows of state
//                    plus the exp's constants in 32 registers only by spilling, and turns the
//                    lane bounds into 64-bit compares. Its exp is fast_exp's reduction and
//                    polynomial (fast_exp_reduced) scaled by 2^n with vscalefps, which needs no
//                    clamp and flushes x < -103 to 0, where fast_exp clamps at -87.
// The two agree to a few ulp, not bit for bit (tests/ops/test_attention_kernels.cpp); each is
// bit-identical run to run. Sums and maxima stay in L lanes and fold once per row in a fixed
// order: a tree of shuffles where intrinsics are available (GCC's omp simd reductions and plain
// loops fold lane by lane through the stack, which cost more than the exps of a 64-key row).
// Lanes past the last visible key hold finite scores (the tiles computed them) and are masked by
// select, so there is no scalar tail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "headlab/ops/fast_exp.h"
#include "tiles.h"

namespace headlab::attention_kernels {

namespace {

// exp(x) for the softmax, where x = score - row max <= 0. Double (tests) uses std::exp; float uses
// fast_exp, since glibc's scalar expf would cost more than the products at d_head 16.
inline double softmax_exp(double x) {
  return std::exp(x);
}
inline float softmax_exp(float x) {
  return fast_exp(x);
}

// The fixed fold of L lanes: a tree of shuffles on AVX-512, else in lane order.
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

// Keys query row t may see before padding, and the keys a block [r0, r0 + rows) computes.
inline int64_t visible_keys(const Problem& p, int64_t t) {
  return p.causal ? t + p.offset + 1 : p.keys;
}
inline int64_t block_keys(const Problem& p, int64_t r0, int64_t rows) {
  return p.causal ? r0 + rows + p.offset : p.keys;
}

// How many of the L lanes from j0 lie before `end`, as an int (a 32-bit lane compare).
template <typename T>
inline int lanes_before(int64_t end, int64_t j0) {
  return static_cast<int>(std::clamp<int64_t>(end - j0, 0, kLanes<T>));
}

// Row i of a block may use key j iff j < nv[i] and keymask[j] = 1; nv = 0 for rows past the end.
inline void block_visible(const Problem& p, int64_t r0, int64_t rows, int64_t* nv) {
  for (int64_t i = 0; i < kRows; ++i) nv[i] = i < rows ? visible_keys(p, r0 + i) : 0;
}

// ---- lane policies: one vector of L lanes from key j0 on ---------------------------------------
//   Acc          a row's lane accumulators (max, sum)
//   keys(m)      the real keys among keymask m[0:L]; usable(keys, end, j0): those before `end` too
//   max_step     acc = max(acc, row) on usable lanes
//   exp_step     row = e = exp(row - max) on usable lanes, else 0; acc += e
//   probs_step   row = a = exp(row - max) * inv on usable lanes, else 0; acc += g * a (one FMA)

template <typename T>
struct GenericLanes {
  static constexpr int L = kLanes<T>;
  struct Acc {
    T v[L];
  };
  using Keys = const T*;
  struct Usable {
    const T* mask;
    int end;
  };
  static void fill(Acc& a, T x) { std::fill(a.v, a.v + L, x); }
  static Keys keys(const T* keymask) { return keymask; }
  static Usable usable(Keys keys, int64_t end, int64_t j0) { return {keys, lanes_before<T>(end, j0)}; }
  static void max_step(Acc& acc, const T* __restrict row, Usable u) {
    constexpr T lowest = -std::numeric_limits<T>::infinity();
    const T* __restrict mask = u.mask;
    T* __restrict m = acc.v;
#pragma omp simd
    for (int c = 0; c < L; ++c) {
      const T x = ((c < u.end) & (mask[c] != T(0))) ? row[c] : lowest;
      m[c] = x > m[c] ? x : m[c];
    }
  }
  static void exp_step(Acc& acc, T* __restrict row, T max, Usable u) {
    const T* __restrict mask = u.mask;
    T* __restrict sum = acc.v;
#pragma omp simd
    for (int c = 0; c < L; ++c) {
      const bool use = (c < u.end) & (mask[c] != T(0));
      const T e = use ? softmax_exp(row[c] - max) : T(0);
      row[c] = e;
      sum[c] += e;
    }
  }
  static void probs_step(Acc& acc, T* __restrict row, const T* __restrict g, T max, T inv, Usable u) {
    const T* __restrict mask = u.mask;
    T* __restrict sum = acc.v;
#pragma omp simd
    for (int c = 0; c < L; ++c) {
      const bool use = (c < u.end) & (mask[c] != T(0));
      const T a = use ? softmax_exp(row[c] - max) * inv : T(0);
      row[c] = a;
      sum[c] = std::fma(g[c], a, sum[c]);  // as block_rowsum sums it
    }
  }
  static T fold_max(const Acc& a) {
    return attention_kernels::fold_max(a.v);
  }
  static T fold_sum(const Acc& a) {
    return attention_kernels::fold_sum(a.v);
  }
};

#if defined(HEADLAB_ATTENTION_AVX512_COPY)
inline __m512 exp16(__m512 x) {  // e^x for x <= 0
  const __m512 n = _mm512_roundscale_ps(x * kFastExpLog2e, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 y;
  fast_exp_reduced(y, x, n);  // GCC vector arithmetic: contracted to the FMAs of the polynomial
  return _mm512_scalef_ps(y, n);
}

struct Avx512Lanes {
  using Acc = __m512;
  using Keys = __mmask16;
  using Usable = __mmask16;
  static void fill(Acc& a, float x) { a = _mm512_set1_ps(x); }
  static Keys keys(const float* keymask) {
    return _mm512_cmp_ps_mask(_mm512_loadu_ps(keymask), _mm512_setzero_ps(), _CMP_NEQ_OQ);
  }
  static Usable usable(Keys keys, int64_t end, int64_t j0) {
    const int64_t k = end - j0;
    return k >= 16 ? keys : k <= 0 ? __mmask16(0) : __mmask16(keys & ((1u << k) - 1));
  }
  static void max_step(Acc& acc, const float* row, Usable u) {
    acc = _mm512_mask_max_ps(acc, u, acc, _mm512_loadu_ps(row));
  }
  static void exp_step(Acc& acc, float* row, float max, Usable u) {
    const __m512 e = _mm512_maskz_mov_ps(u, exp16(_mm512_sub_ps(_mm512_loadu_ps(row), _mm512_set1_ps(max))));
    _mm512_storeu_ps(row, e);
    acc = _mm512_add_ps(acc, e);
  }
  static void probs_step(Acc& acc, float* row, const float* g, float max, float inv, Usable u) {
    const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(row), _mm512_set1_ps(max));
    const __m512 a = _mm512_maskz_mul_ps(u, exp16(x), _mm512_set1_ps(inv));
    _mm512_storeu_ps(row, a);
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(g), a, acc);
  }
  static float fold_max(Acc a) { return _mm512_reduce_max_ps(a); }
  static float fold_sum(Acc a) { return _mm512_reduce_add_ps(a); }
};

#endif

// The lanes of Softmax S for T: Avx512Lanes for float and Softmax::avx512, which exists only in
// the avx512 copy; GenericLanes otherwise.
template <typename T, Softmax S>
struct LanesOf {
  static_assert(S == Softmax::generic, "the AVX-512 softmax exists for float, in the avx512 copy only");
  using type = GenericLanes<T>;
};
#if defined(HEADLAB_ATTENTION_AVX512_COPY)
template <>
struct LanesOf<float, Softmax::avx512> {
  using type = Avx512Lanes;
};
#endif
template <typename T, Softmax S>
using LanesFor = typename LanesOf<T, S>::type;

// M(T, S) for every type and softmax this copy of the kernels is instantiated for.
#if defined(HEADLAB_ATTENTION_AVX512_COPY)
#define HEADLAB_ATTENTION_INSTANCES(M) M(float, Softmax::generic) M(double, Softmax::generic) M(float, Softmax::avx512)
#else
#define HEADLAB_ATTENTION_INSTANCES(M) M(float, Softmax::generic) M(double, Softmax::generic)
#endif

// ---- the block softmax, once -------------------------------------------------------------------

// The block's softmax, in place over its kRows rows of scores s [kRows][ld], keys [0, n) rounded
// up to a vector: e = exp(s - max) on usable keys, 0 elsewhere (the tiles read e). Saves each
// row's (max, 1/sum) in stats[i]; A = e * inv, exactly as block_probs recomputes it. A row with
// no usable key gets e = 0 and stats (0, 0): no 0/0. The rows run side by side, each pass over
// all of them, so their independent exp chains overlap (row by row, a 64-key row is one long
// dependency chain through max, exp, sum and 1/sum, and the core waits on it).
template <typename T, typename V>
void block_softmax(T* __restrict s, int64_t ld, int64_t n, const int64_t* nv, const T* __restrict keymask,
                   T (*stats)[2]) {
  constexpr int L = kLanes<T>;
  typename V::Acc part[kRows];
  T max[kRows];
  for (int i = 0; i < kRows; ++i) V::fill(part[i], -std::numeric_limits<T>::infinity());
  for (int64_t j0 = 0; j0 < n; j0 += L) {
    const typename V::Keys keys = V::keys(keymask + j0);
    for (int i = 0; i < kRows; ++i) V::max_step(part[i], s + i * ld + j0, V::usable(keys, nv[i], j0));
  }
  for (int i = 0; i < kRows; ++i) {
    max[i] = V::fold_max(part[i]);
    V::fill(part[i], T(0));
  }
  for (int64_t j0 = 0; j0 < n; j0 += L) {
    const typename V::Keys keys = V::keys(keymask + j0);
    for (int i = 0; i < kRows; ++i) V::exp_step(part[i], s + i * ld + j0, max[i], V::usable(keys, nv[i], j0));
  }
  for (int i = 0; i < kRows; ++i) {
    const T sum = V::fold_sum(part[i]);
    stats[i][0] = sum > T(0) ? max[i] : T(0);
    stats[i][1] = sum > T(0) ? T(1) / sum : T(0);
  }
}

// The backward's twin of block_softmax: scores -> A = exp(s - max) * inv from the saved stats,
// bit-identical to the forward's A, fused with r[i] = rowsum(G * A), returned in r.
template <typename T, typename V>
void block_probs(T* __restrict s, const T* __restrict g, int64_t ld, int64_t n, const int64_t* nv,
                 const T* __restrict keymask, const T* __restrict stats, T* r) {
  constexpr int L = kLanes<T>;
  typename V::Acc part[kRows];
  T max[kRows], inv[kRows];
  int64_t usable[kRows];  // nv, or 0 for a fully masked row (inv = 0)
  for (int i = 0; i < kRows; ++i) {
    max[i] = nv[i] ? stats[2 * i] : T(0);
    inv[i] = nv[i] ? stats[2 * i + 1] : T(0);
    usable[i] = inv[i] != T(0) ? nv[i] : 0;
    V::fill(part[i], T(0));
  }
  for (int64_t j0 = 0; j0 < n; j0 += L) {
    const typename V::Keys keys = V::keys(keymask + j0);
    for (int i = 0; i < kRows; ++i)
      V::probs_step(part[i], s + i * ld + j0, g + i * ld + j0, max[i], inv[i], V::usable(keys, usable[i], j0));
  }
  for (int i = 0; i < kRows; ++i) r[i] = V::fold_sum(part[i]);
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

}  // namespace

}  // namespace headlab::attention_kernels
