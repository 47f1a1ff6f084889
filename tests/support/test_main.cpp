// Catch2 main: BLIS must pick its kernels before any test makes a BLIS call (see init_blis).
// Started by mpirun (the dist_N_ranks CTest entries), every rank runs the selected tests and the
// [dist] ones talk to each other; only rank 0 reports.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "headlab/dist/dist.h"
#include "headlab/linalg/gemm.h"

int main(int argc, char* argv[]) {
  headlab::dist::Session session(&argc, &argv);
  headlab::init_blis();
  return Catch::Session().run(argc, argv);
}
