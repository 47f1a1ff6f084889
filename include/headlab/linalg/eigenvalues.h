// Eigenvalues of a small dense real matrix, through LAPACK's dgeev (Debian's liblapack-dev): the
// one place headlab calls LAPACK. For the OV circuit's copying score (analysis/composition.h),
// where the matrices are d_head x d_head.
//   std::vector<std::complex<double>> l = eigenvalues(a, n);   // a: n x n, row-major
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

namespace headlab {

// The n eigenvalues of the n x n row-major matrix `a`, complex-conjugate pairs adjacent, in
// LAPACK's order. Throws headlab::Error when a is not n x n or LAPACK does not converge.
std::vector<std::complex<double>> eigenvalues(std::vector<double> a, int64_t n);

}  // namespace headlab
