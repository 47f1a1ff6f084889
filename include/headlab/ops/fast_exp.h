// e^x for float without a libm call, so that loops around it vectorise (the softmax in the fused
// attention, GELU). x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by Cephes'
// degree-6 polynomial, 2^n from the exponent bits. About 2 ulp. x is clamped to [-87, 88] so
// 2^n stays a normal number (e^-87 = 1.6e-38); NaN gives NaN.
//   float y = fast_exp(x);
#pragma once

#include <bit>
#include <cstdint>

namespace headlab {

// e^r for r = x - n ln2, where n = x log2(e) rounded to an integer (held as a float): e^x = 2^n y.
// The one definition of the reduction and the polynomial, for fast_exp below and, with V a GCC
// vector of 16 floats, for the fused attention's AVX-512 softmax (which scales by 2^n itself).
// The result is an out-parameter so that no vector is passed by value to this template, which
// GCC instantiates for the baseline ISA (-Wpsabi); inlined, it compiles for the caller's.
template <typename V>
inline void fast_exp_reduced(V& y, const V& x, const V& n) {
  const V r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  V p = 1.9875691500e-4f * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  y = p * r * r + r + 1.0f;
}

// log2(e): n = x kFastExpLog2e rounded.
inline constexpr float kFastExpLog2e = 1.44269504f;

inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = (x * kFastExpLog2e + 12582912.0f) - 12582912.0f;  // round to nearest via 1.5 * 2^23
  float p;
  fast_exp_reduced(p, x, n);  // NaN for a NaN x, which the product passes on
  // A NaN x leaves n NaN, and converting NaN to an integer is undefined: scale by 2^0 instead.
  const float n_finite = n == n ? n : 0.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n_finite) + 127) << 23);
}

}  // namespace headlab
