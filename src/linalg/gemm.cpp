#include "headlab/linalg/gemm.h"

#include <blis.h>

#include <cstdlib>
#include <mutex>

#include "headlab/common/parallel.h"

namespace headlab {

void init_blis() {
  static std::once_flag once;
  std::call_once(once, [] {
    // BLIS 0.9 only knows AMD families 0x15/0x17/0x19 and never tries its skx kernels on AMD, so
    // on Zen 4/5 it silently falls back to `generic` (3-7x slower). BLIS_ARCH_TYPE=0 is skx in
    // 0.9's arch enum; it must be set before BLIS's first call. A user's own choice wins.
    __builtin_cpu_init();
    const bool has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (has_avx512) setenv("BLIS_ARCH_TYPE", "0", /*overwrite=*/0);
    bli_init();
  });
}

std::string blis_kernel_name() {
  init_blis();
  return bli_arch_string(bli_arch_query_id());
}

namespace {

void blis_gemm(dim_t m, dim_t n, dim_t k, float alpha, float* a, inc_t rsa, inc_t csa, float* b, inc_t rsb, inc_t csb,
               float beta, float* c, inc_t rsc, inc_t csc, rntm_t* rntm) {
  bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, a, rsa, csa, b, rsb, csb, &beta, c, rsc, csc,
               nullptr, rntm);
}

void blis_gemm(dim_t m, dim_t n, dim_t k, double alpha, double* a, inc_t rsa, inc_t csa, double* b, inc_t rsb,
               inc_t csb, double beta, double* c, inc_t rsc, inc_t csc, rntm_t* rntm) {
  bli_dgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, a, rsa, csa, b, rsb, csb, &beta, c, rsc, csc,
               nullptr, rntm);
}

}  // namespace

template <typename T>
void gemm(const Tensor<T>& a, const Tensor<T>& b, const Tensor<T>& c, T alpha, T beta) {
  HEADLAB_CHECK(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, "gemm: operands must be matrices, got "
                                                                     << a.shape().str() << " x " << b.shape().str()
                                                                     << " -> " << c.shape().str());
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  HEADLAB_CHECK(
      b.size(0) == k && c.size(0) == m && c.size(1) == n,
      "gemm: shapes " << a.shape().str() << " x " << b.shape().str() << " -> " << c.shape().str() << " do not match");
  if (m == 0 || n == 0) return;
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(in_parallel_region() ? 1 : num_threads(), &rntm);
  // BLIS rejects a zero stride on a size-1 dimension; any positive value is fine there.
  auto fix = [](int64_t stride) { return static_cast<inc_t>(stride == 0 ? 1 : stride); };
  blis_gemm(m, n, k, alpha, const_cast<T*>(a.data()), fix(a.stride(0)), fix(a.stride(1)), const_cast<T*>(b.data()),
            fix(b.stride(0)), fix(b.stride(1)), beta, c.data(), fix(c.stride(0)), fix(c.stride(1)), &rntm);
}

template void gemm<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&, float, float);
template void gemm<double>(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&, double, double);

}  // namespace headlab
