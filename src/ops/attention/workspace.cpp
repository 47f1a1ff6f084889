// The attention kernels' shared pieces, compiled once (not per instruction set): the problem
// shapes, the layout of a thread's workspace, and the choice of kernel copy.
#include <cmath>
#include <cstdlib>
#include <string>

#include "headlab/common/error.h"
#include "kernels.h"
#include "tiles.h"

namespace headlab {

bool attention_kernels_available(AttentionKernels kernels) {
  if (kernels != AttentionKernels::avx512) return true;
#if defined(__x86_64__) && !defined(__clang__)  // the copy avx512.cpp builds (kernels.h)
  static const bool cpu_has_avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512cd");
  }();
  return cpu_has_avx512;
#else
  return false;
#endif
}

namespace attention_kernels {

KernelPath resolve_kernels(AttentionKernels kernels) {
  if (kernels == AttentionKernels::generic) return KernelPath::base_generic;
  if (kernels == AttentionKernels::avx512) {
    HEADLAB_CHECK(attention_kernels_available(kernels),
                  "attention: kernels=avx512 needs a CPU with AVX-512 (F, BW, CD, DQ, VL) and an x86-64 build");
    return KernelPath::avx512_intrinsic;
  }
  // automatic: what each build ran before both softmaxes were built everywhere.
#if defined(__AVX512F__)
  return KernelPath::avx512_intrinsic;  // a native build for an AVX-512 machine
#elif defined(HEADLAB_PORTABLE_KERNELS)
  static const bool avx512 = [] {  // a portable build: the generic kernels for AVX-512 if the CPU has it
    const char* off = std::getenv("HEADLAB_NO_AVX512");
    if (off != nullptr && *off != '\0' && std::string(off) != "0") return false;
    return attention_kernels_available(AttentionKernels::avx512);
  }();
  return avx512 ? KernelPath::avx512_generic : KernelPath::base_generic;
#else
  return KernelPath::base_generic;  // a native build for a machine without AVX-512, or not x86-64
#endif
}

}  // namespace attention_kernels

const char* attention_kernels_in_use(AttentionKernels kernels) {
  switch (attention_kernels::resolve_kernels(kernels)) {
    case attention_kernels::KernelPath::base_generic:
      return "baseline";
    case attention_kernels::KernelPath::avx512_generic:
      return "avx512-generic";
    case attention_kernels::KernelPath::avx512_intrinsic:
      return "avx512";
  }
  return "unknown";
}

namespace attention_kernels {

Problem::Problem(int64_t queries_, int64_t keys_, int64_t d_head_, bool causal_)
    : queries(queries_),
      keys(keys_),
      d_head(d_head_),
      tp(round_up(std::max<int64_t>(keys_, 1), kPad)),
      qp(round_up(std::max<int64_t>(queries_, 1), kPad)),
      dp(round_up(d_head_, 16)),
      offset(keys_ - queries_),
      causal(causal_),
      scale(1.0 / std::sqrt(static_cast<double>(d_head_))) {}

int64_t workspace_size(int64_t queries, int64_t keys, int64_t d_head, bool backward) {
  const Problem p(queries, keys, d_head, false);
  // kt, vt (+ kr, dk, dv) over keys; qr (+ orows) over queries; acc; s, g and keymask.
  return (backward ? 5 : 2) * p.tp * p.dp + (backward ? 2 : 1) * p.qp * p.dp + kRows * p.dp + (2 * kPair + 1) * p.tp;
}

template <typename T>
Workspace<T>::Workspace(T* block, const Problem& p, bool backward) {
  T* next = block;
  auto take = [&](int64_t n) {
    T* at = next;
    next += n;
    return at;
  };
  kt = take(p.dp * p.tp), vt = take(p.dp * p.tp), qr = take(p.qp * p.dp);
  vr = vt;  // V rows (forward) and V^T (backward) are never needed in the same call
  acc = take(kRows * p.dp), s = take(kPair * p.tp), g = take(kPair * p.tp), keymask = take(p.tp);
  if (!backward) return;
  kr = take(p.tp * p.dp), dk = take(p.tp * p.dp), dv = take(p.tp * p.dp), orows = take(p.qp * p.dp);
}
template struct Workspace<float>;
template struct Workspace<double>;

}  // namespace attention_kernels

}  // namespace headlab
