// eigenvalues() through LAPACK: matrices whose eigenvalues are known by hand (a rotation's +-i, a
// triangular matrix's diagonal, a row-major matrix that is not symmetric), and a random one whose
// eigenvalues sum to its trace and multiply to its determinant.
#include <catch2/catch.hpp>

#include <algorithm>
#include <complex>
#include <random>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/linalg/eigenvalues.h"

using namespace headlab;
using C = std::complex<double>;

namespace {
std::vector<C> sorted(std::vector<C> v) {
  std::sort(v.begin(), v.end(),
            [](C a, C b) { return a.real() != b.real() ? a.real() < b.real() : a.imag() < b.imag(); });
  return v;
}
}  // namespace

TEST_CASE("eigenvalues of matrices known by hand", "[linalg][eigenvalues]") {
  const std::vector<C> rotation = sorted(eigenvalues({0, -1, 1, 0}, 2));
  CHECK(std::abs(rotation[0] - C(0, -1)) < 1e-14);
  CHECK(std::abs(rotation[1] - C(0, 1)) < 1e-14);
  // Upper triangular in row-major order (lower triangular to a reader that took it column-major):
  // either way the diagonal.
  const std::vector<C> triangular = sorted(eigenvalues({2, 7, -3, 0, -1, 5, 0, 0, 4}, 3));
  CHECK(std::abs(triangular[0] - C(-1, 0)) < 1e-13);
  CHECK(std::abs(triangular[1] - C(2, 0)) < 1e-13);
  CHECK(std::abs(triangular[2] - C(4, 0)) < 1e-13);
  // [[1, 2], [3, 4]]: (5 +- sqrt(33)) / 2.
  const std::vector<C> plain = sorted(eigenvalues({1, 2, 3, 4}, 2));
  CHECK(plain[0].real() == Approx((5 - std::sqrt(33.0)) / 2).epsilon(1e-14));
  CHECK(plain[1].real() == Approx((5 + std::sqrt(33.0)) / 2).epsilon(1e-14));
  CHECK(eigenvalues({}, 0).empty());
  CHECK_THROWS_WITH(eigenvalues({1, 2, 3}, 2), Catch::Contains("are not a 2 x 2 matrix"));
}

TEST_CASE("a random matrix's eigenvalues sum to its trace and multiply to its determinant", "[linalg][eigenvalues]") {
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal;
  std::vector<double> a(9);
  for (double& v : a) v = normal(rng);
  const std::vector<C> l = eigenvalues(a, 3);
  C sum = 0, product = 1;
  for (C v : l) sum += v, product *= v;
  const double det =
      a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) + a[2] * (a[3] * a[7] - a[4] * a[6]);
  CHECK(sum.real() == Approx(a[0] + a[4] + a[8]).epsilon(1e-12));
  CHECK(std::abs(sum.imag()) < 1e-12);
  CHECK(product.real() == Approx(det).epsilon(1e-12));
  CHECK(std::abs(product.imag()) < 1e-12);
}
