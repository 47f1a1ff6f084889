// headlab: the command-line entry point. Dispatches to a verb; every headlab::Error becomes one
// line on stderr and exit code 2, so bad input never ends in a crash or a stack trace.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/linalg/gemm.h"
#include "verbs.h"

namespace {

struct Verb {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

constexpr Verb kVerbs[] = {
    {"train", headlab::cli::run_train, "train a model from a config (resumable)"},
    {"eval", headlab::cli::run_eval, "evaluate a checkpoint on the val or test split"},
    {"sample", headlab::cli::run_sample, "generate text from a decoder checkpoint"},
    {"info", headlab::cli::run_info, "show the build, BLIS kernels, and a checkpoint's or config's model"},
    {"bench", headlab::cli::run_bench, "training speed on random tokens (one JSON line, like torch_ref.py)"},
    {"sweep", headlab::cli::run_sweep, "train every point of a grid over config keys, then aggregate over seeds"},
    {"plot", headlab::cli::run_plot, "draw PNG figures of a run or sweep folder into PATH/plots/"},
    {"analyze", headlab::cli::run_analyze, "per-head importance, ablation and attention statistics -> heads.csv"},
    {"prune", headlab::cli::run_prune, "prune heads by a score (or L0 gates), metric after every round -> prune.csv"},
};

void print_usage() {
  std::printf("usage: headlab <verb> [options]   (headlab <verb> --help for a verb's options)\n\nverbs:\n");
  for (const Verb& v : kVerbs) std::printf("  %-8s %s\n", v.name, v.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  for (const Verb& v : kVerbs) {
    if (std::strcmp(argv[1], v.name) != 0) continue;
    try {
      headlab::init_blis();
      return v.run(argc - 1, argv + 1);
    } catch (const headlab::Error& e) {
      std::fprintf(stderr, "headlab %s: error: %s\n", v.name, e.what());
    } catch (const cxxopts::exceptions::exception& e) {
      std::fprintf(stderr, "headlab %s: error: %s (see headlab %s --help)\n", v.name, e.what(), v.name);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "headlab %s: error: %s\n", v.name, e.what());
    }
    return 2;
  }
  std::fprintf(stderr, "headlab: error: unknown verb '%s'\n", argv[1]);
  print_usage();
  return 2;
}
