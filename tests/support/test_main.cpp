// Catch2 main: BLIS must pick its kernels before any test makes a BLIS call (see init_blis).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "headlab/linalg/gemm.h"

int main(int argc, char* argv[]) {
  headlab::init_blis();
  return Catch::Session().run(argc, argv);
}
