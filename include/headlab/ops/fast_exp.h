// e^x for float without a libm call, so that loops around it vectorise (the softmax in the fused
// attention, GELU). x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by Cephes'
// degree-6 polynomial, 2^n from the exponent bits. About 2 ulp. x is clamped to [-87, 88] so
// 2^n stays a normal number (e^-87 = 1.6e-38).
#pragma once

#include <bit>
#include <cstdint>

namespace headlab {

inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest via 1.5 * 2^23
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

}  // namespace headlab
