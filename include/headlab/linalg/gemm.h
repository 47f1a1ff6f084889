// GEMM through BLIS's typed API with explicit strides, so per-head products on [B,T,H,Dh] views
// and transposed operands need no copies. The one place headlab calls BLIS.
//   C = alpha * op(A) * op(B) + beta * C, where each operand is a strided Tensor of rank 2.
//   gemm(x, w.transpose(0, 1), y, 1.0f, 0.0f);   // y[N,out] = x[N,in] * w[out,in]^T
// Transposes are views (Tensor::transpose), not flags. Outside an OpenMP region the call uses
// num_threads() BLIS threads; inside one it runs on the calling thread only.
#pragma once

#include <string>

#include "headlab/tensor/tensor.h"

namespace headlab {

// Selects BLIS's AVX-512 kernels on CPUs BLIS 0.9 fails to recognise (AMD Zen 4/5), unless the
// user set BLIS_ARCH_TYPE, then initialises BLIS. Idempotent; every entry point calls it first.
void init_blis();
// The kernel set BLIS runs on, e.g. "skx" or "generic".
std::string blis_kernel_name();

template <typename T>
void gemm(const Tensor<T>& a, const Tensor<T>& b, const Tensor<T>& c, T alpha, T beta);

extern template void gemm<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&, float, float);
extern template void gemm<double>(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&, double, double);

}  // namespace headlab
