// Comparing kernel results in tests: a copy into a std::vector, a tolerance check that names the
// worst index, and bit identity; and the attention op's results (NaiveAttention's fields) whole.
//   require_close("dq", got, want, 1e-5);  CHECK(same_bits(a, b));  check_same_bits(run_a, run_b);
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "headlab/tensor/tensor.h"
#include "support/naive_attention.h"

namespace headlab::test {

template <typename T>
std::vector<T> to_vector(const Tensor<T>& t) {
  std::vector<T> out(t.numel());
  Tensor<T>(out.data(), t.shape()).copy_from(t);
  return out;
}

// max |got - want| <= tol * max(1, max |want|), and every value finite.
template <typename T>
void require_close(const char* what, const std::vector<T>& got, const std::vector<T>& want, double tol) {
  REQUIRE(got.size() == want.size());
  double max_ref = 0, max_diff = 0;
  size_t worst = 0, non_finite = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    non_finite += !std::isfinite(got[i]);
    max_ref = std::max(max_ref, std::abs(double(want[i])));
    const double diff = std::abs(double(got[i]) - double(want[i]));
    if (diff > max_diff) max_diff = diff, worst = i;
  }
  INFO(what << ": max |diff| " << max_diff << " at index " << worst << ", max |ref| " << max_ref << ", " << non_finite
            << " non-finite values");
  REQUIRE(non_finite == 0);
  REQUIRE(max_diff <= tol * std::max(1.0, max_ref));
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Every field of two attention results: within tol (as require_close), or bit for bit.
template <typename T>
void require_close(const NaiveAttention<T>& got, const NaiveAttention<T>& want, double tol) {
  require_close("out", got.out, want.out, tol);
  require_close("probs", got.probs, want.probs, tol);
  require_close("dq", got.dq, want.dq, tol);
  require_close("dk", got.dk, want.dk, tol);
  require_close("dv", got.dv, want.dv, tol);
  require_close("dgates", got.dgates, want.dgates, tol);
}
template <typename T>
void check_same_bits(const NaiveAttention<T>& a, const NaiveAttention<T>& b) {
  CHECK(same_bits(a.out, b.out));
  CHECK(same_bits(a.probs, b.probs));
  CHECK(same_bits(a.dq, b.dq));
  CHECK(same_bits(a.dk, b.dk));
  CHECK(same_bits(a.dv, b.dv));
  CHECK(same_bits(a.dgates, b.dgates));
}

}  // namespace headlab::test
