#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "headlab/ops/fast_exp.h"

using namespace headlab;

namespace {

// Distance in units in the last place between two positive finite floats.
int64_t ulps_apart(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

}  // namespace

TEST_CASE("fast_exp is within 3 ulp of e^x over its range", "[ops][fast_exp]") {
  int64_t worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    worst = std::max(worst, ulps_apart(fast_exp(x), want));
  }
  CHECK(worst <= 3);
  CHECK(fast_exp(0.0f) == 1.0f);
}

TEST_CASE("fast_exp clamps to [-87, 88] and passes NaN on", "[ops][fast_exp]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(fast_exp(-inf) == fast_exp(-87.0f));
  CHECK(fast_exp(-1000.0f) == fast_exp(-87.0f));
  CHECK(fast_exp(inf) == fast_exp(88.0f));
  CHECK(std::isfinite(fast_exp(inf)));
  CHECK(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(fast_exp(-std::numeric_limits<float>::quiet_NaN())));
}
