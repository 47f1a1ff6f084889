// Dropout forward and backward from one stateless mask.
//   keep(i) = (splitmix64(key + i * golden) >> 11) < (1 - p) * 2^53,  key = splitmix64(seed):
// the i-th output of a splitmix64 stream; its top 53 bits are a uniform draw in [0, 2^53). The kept
// fraction is 1 - p up to 2^-53, and any element's bit is known without generating the others.
// Forward:  y = keep ? x * scale : 0,  scale = 1/(1 - p).   Backward:  dx += keep ? dy * scale : 0
// (dx = ..., every element, when it is dx's first contribution: Tape::input_grad_target).
#include "headlab/ops/dropout.h"

#include <cmath>

#include "headlab/common/hash.h"
#include "headlab/common/parallel.h"

namespace headlab {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix64's stream increment

// The mask, as the two numbers every element needs.
struct DropoutMask {
  uint64_t key;         // splitmix64(seed): nearby seeds give unrelated streams
  uint64_t keep_below;  // an element is kept when its 53-bit draw is below this

  DropoutMask(uint64_t seed, double p)
      : key(splitmix64(seed)), keep_below(static_cast<uint64_t>(std::ldexp(1.0 - p, 53))) {}
  bool keep(int64_t i) const { return (splitmix64(key + static_cast<uint64_t>(i) * kGolden) >> 11) < keep_below; }
};

// ints[0] = seed (bit pattern), scalars[0] = p.
template <typename T>
void dropout_backward(Tape<T>& tape, const Node<T>& node) {
  const auto [dx, overwrite] = tape.input_grad_target(node, 0);
  if (dx.empty()) return;
  const double p = node.scalars[0];
  const DropoutMask mask(static_cast<uint64_t>(node.ints[0]), p);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const T* g = node.grad.data();
  T* d = dx.data();
  const int64_t n = dx.numel();
  if (overwrite) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i] = mask.keep(i) ? g[i] * scale : T(0);
  } else {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      if (mask.keep(i)) d[i] += g[i] * scale;
  }
}

}  // namespace

template <typename T>
Var<T> dropout(Var<T> x, double p, uint64_t seed) {
  HEADLAB_CHECK(p >= 0 && p < 1, "dropout: p=" << p << " must be in [0, 1)");
  if (p == 0 || !x.tape->grad_enabled()) return x;
  HEADLAB_CHECK(x.value().is_contiguous(), "dropout: input " << x.shape().str() << " must be contiguous");
  Tensor<T> out = x.tape->arena().template empty<T>(x.shape());
  const DropoutMask mask(seed, p);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const T* xv = x.value().data();
  T* o = out.data();
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) o[i] = mask.keep(i) ? xv[i] * scale : T(0);
  Node<T>& node = x.tape->record(out, dropout_backward<T>, {x});
  node.ints[0] = static_cast<int64_t>(seed);
  node.scalars[0] = p;
  return x.tape->last();
}

#define HEADLAB_INSTANTIATE(T) template Var<T> dropout<T>(Var<T>, double, uint64_t);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
