// Seeded random tensors for tests. Values stay away from 0 when `away_from_zero` is set, so
// kinks (ReLU) are not straddled by a finite difference.
#pragma once

#include <cstdint>
#include <random>

#include "headlab/tensor/arena.h"

namespace headlab::test {

template <typename T>
Tensor<T> random_tensor(Arena& arena, const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor<T> t = arena.empty<T>(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<T>(dist(rng));
  return t;
}

// Copies a contiguous tensor into one of another scalar type, same shape.
template <typename To, typename From>
Tensor<To> convert(Arena& arena, const Tensor<From>& src) {
  Tensor<To> out = arena.empty<To>(src.shape());
  for (int64_t i = 0; i < src.numel(); ++i) out.data()[i] = static_cast<To>(src.data()[i]);
  return out;
}

}  // namespace headlab::test
