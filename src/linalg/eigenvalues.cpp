#include "headlab/linalg/eigenvalues.h"

#include <cstddef>

#include "headlab/common/error.h"

// LAPACK's Fortran entry point (gfortran's calling convention: every argument by pointer, the
// lengths of the two character arguments appended).
extern "C" void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda, double* wr,
                       double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr, double* work,
                       const int* lwork, int* info, size_t jobvl_len, size_t jobvr_len);

namespace headlab {

std::vector<std::complex<double>> eigenvalues(std::vector<double> a, int64_t n) {
  HEADLAB_CHECK(n >= 0 && static_cast<int64_t>(a.size()) == n * n,
                "eigenvalues: " << a.size() << " values are not a " << n << " x " << n << " matrix");
  if (n == 0) return {};
  // Row-major a is column-major a^T, which has the same eigenvalues.
  const int N = static_cast<int>(n), one = 1;
  std::vector<double> wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n));
  double unused = 0, work_size = 0;
  int info = 0, query = -1;
  dgeev_("N", "N", &N, a.data(), &N, wr.data(), wi.data(), &unused, &one, &unused, &one, &work_size, &query, &info, 1,
         1);
  HEADLAB_CHECK(info == 0, "eigenvalues: LAPACK dgeev's workspace query failed (info " << info << ")");
  const int lwork = static_cast<int>(work_size);
  std::vector<double> work(static_cast<size_t>(lwork));
  dgeev_("N", "N", &N, a.data(), &N, wr.data(), wi.data(), &unused, &one, &unused, &one, work.data(), &lwork, &info, 1,
         1);
  HEADLAB_CHECK(info == 0, "eigenvalues: LAPACK dgeev did not converge (info " << info << ")");
  std::vector<std::complex<double>> out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(wr[static_cast<size_t>(i)], wi[static_cast<size_t>(i)]);
  return out;
}

}  // namespace headlab
