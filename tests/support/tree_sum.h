// The canonical summation tree of train/gradient_sum.h and dist::sum_over_ranks, written the
// plain recursive way for tests: at level k, node i (a multiple of 2^(k+1)) adds node i + 2^k.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace headlab::test {

inline std::vector<float> canonical_tree_sum(std::vector<std::vector<float>> nodes) {
  for (size_t stride = 1; stride < nodes.size(); stride *= 2)
    for (size_t i = 0; i + stride < nodes.size(); i += 2 * stride)
      for (size_t e = 0; e < nodes[i].size(); ++e) nodes[i][e] = nodes[i][e] + nodes[i + stride][e];
  return nodes.at(0);
}

// Values whose sum depends on the order of the additions (magnitudes spread over 2^-20..2^20).
inline std::vector<float> order_sensitive_values(unsigned seed, size_t n) {
  std::vector<float> v(n);
  unsigned state = seed * 2654435761u + 12345u;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    const float mantissa = static_cast<float>((state >> 8) & 0xffff) / 65536.0f + 0.5f;
    const int exponent = static_cast<int>((state >> 24) % 41) - 20;
    x = (state & 1 ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
  }
  return v;
}

}  // namespace headlab::test
