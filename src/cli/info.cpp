// headlab info: what this build runs on (threads, BLIS kernel set).
#include <cstdio>

#include <cxxopts.hpp>

#include "headlab/common/parallel.h"
#include "headlab/linalg/gemm.h"
#include "verbs.h"

namespace headlab::cli {

int run_info(int argc, char** argv) {
  cxxopts::Options options("headlab info", "Show the build, threads and BLIS kernel set.");
  options.add_options()("h,help", "show this help");
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  std::printf("headlab %s\n", HEADLAB_VERSION);
  std::printf("threads      %d (OpenMP; BLIS uses them for large GEMMs, 1 per call inside parallel loops)\n",
              num_threads());
  std::printf("blis kernels %s\n", blis_kernel_name().c_str());
  return 0;
}

}  // namespace headlab::cli
