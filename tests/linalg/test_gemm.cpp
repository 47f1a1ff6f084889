#include <catch2/catch.hpp>

#include <cstdlib>

#include "headlab/linalg/gemm.h"
#include "support/random.h"

using namespace headlab;

TEST_CASE("BLIS runs on its AVX-512 kernels when the CPU has AVX-512", "[linalg][blis]") {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  const char* user_choice = std::getenv("BLIS_ARCH_TYPE");
  INFO("kernel set: " << blis_kernel_name());
  if (avx512 && (user_choice == nullptr || std::string(user_choice) == "0")) CHECK(blis_kernel_name() == "skx");
  CHECK(blis_kernel_name() != "");
}

TEST_CASE("gemm on strided per-head views equals a naive product", "[linalg][gemm]") {
  Arena arena;
  // q [T=6, H=3, Dh=4] and k [T=6, H=3, Dh=4]: scores of head 1 = q_h k_h^T without copies.
  auto q = test::random_tensor<double>(arena, {6, 3, 4}, 1);
  auto k = test::random_tensor<double>(arena, {6, 3, 4}, 2);
  Tensor<double> qh = q.select(1, 1), kh = k.select(1, 1);
  Tensor<double> s = arena.zeros<double>({6, 6});
  gemm(qh, kh.transpose(0, 1), s, 1.0, 0.0);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      double expected = 0;
      for (int d = 0; d < 4; ++d) expected += q(i, 1, d) * k(j, 1, d);
      CHECK(s(i, j) == Approx(expected).epsilon(1e-14));
    }
  // beta = 1 accumulates.
  gemm(qh, kh.transpose(0, 1), s, 1.0, 1.0);
  double expected00 = 0;
  for (int d = 0; d < 4; ++d) expected00 += 2 * q(0, 1, d) * k(0, 1, d);
  CHECK(s(0, 0) == Approx(expected00).epsilon(1e-14));
}

TEST_CASE("gemm rejects mismatched shapes with both shapes in the message", "[linalg][gemm]") {
  Arena arena;
  auto a = arena.zeros<float>({2, 3});
  auto b = arena.zeros<float>({4, 5});
  auto c = arena.zeros<float>({2, 5});
  REQUIRE_THROWS_WITH(gemm(a, b, c, 1.0f, 0.0f),
                      Catch::Contains("gemm: shapes [2, 3] x [4, 5] -> [2, 5] do not match"));
}
