// headlab: the command-line entry point. Dispatches to a verb; every headlab::Error becomes one
// line on stderr and exit code 2, so bad input never ends in a crash or a stack trace. Under
// mpirun (train and sweep only) an error all ranks agreed on is printed once, by rank 0; an
// error only one rank met is printed by that rank, naming it, and ends the job (MPI_Abort).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/edit_distance.h"
#include "headlab/common/error.h"
#include "headlab/dist/dist.h"
#include "headlab/linalg/gemm.h"
#include "verbs.h"

namespace {

int run_help(int argc, char** argv);

struct Verb {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

constexpr Verb kVerbs[] = {
    {"train", headlab::cli::run_train, "train a model from a config (resumable)"},
    {"eval", headlab::cli::run_eval, "evaluate a checkpoint (or a run folder's best) on the val or test split"},
    {"sample", headlab::cli::run_sample, "generate text from a byte-level decoder checkpoint (or run folder)"},
    {"translate", headlab::cli::run_translate,
     "translate text (--text or --input, one sentence per line) with an encoder_decoder checkpoint"},
    {"info", headlab::cli::run_info,
     "show the build, BLIS kernels, a checkpoint's or config's model; --keys: every config key"},
    {"bench", headlab::cli::run_bench, "training speed on random tokens (one JSON line, like torch_ref.py)"},
    {"sweep", headlab::cli::run_sweep, "train every point of a grid over config keys, then aggregate over seeds"},
    {"plot", headlab::cli::run_plot, "draw PNG figures of a run or sweep folder into PATH/plots/"},
    {"analyze", headlab::cli::run_analyze, "per-head importance, ablation and attention statistics -> heads.csv"},
    {"circuits", headlab::cli::run_circuits,
     "how heads cooperate: head detector scores of a checkpoint or of every checkpoint of a run"},
    {"prune", headlab::cli::run_prune, "prune heads by a score (or L0 gates), metric after every round -> prune.csv"},
    {"report", headlab::cli::run_report,
     "one self-contained HTML file of a run or sweep: curves, heatmaps, attention viewer"},
    {"version", headlab::cli::run_version,
     "the version, git commit, build type and BLIS kernel set (also --version, -V)"},
    {"help", run_help, "this list (headlab help VERB: the verb's options)"},
};

void print_usage() {
  std::printf("usage: headlab <verb> [options]   (headlab <verb> --help for a verb's options)\n\nverbs:\n");
  for (const Verb& v : kVerbs) std::printf("  %-9s %s\n", v.name, v.summary);
}

const Verb* find_verb(const std::string& name) {
  for (const Verb& v : kVerbs)
    if (name == v.name) return &v;
  return nullptr;
}

[[noreturn]] void throw_unknown_verb(const std::string& name) {
  std::vector<std::string> names;
  for (const Verb& v : kVerbs) names.push_back(v.name);
  const std::string suggestion = headlab::closest_name(name, names);
  throw headlab::Error("unknown verb '" + name + "'" +
                       (suggestion.empty() ? " (headlab help lists them)" : "; did you mean '" + suggestion + "'?"));
}

// headlab help [VERB]: the verb list, or VERB --help.
int run_help(int argc, char** argv) {
  if (argc < 2) {
    print_usage();
    return 0;
  }
  HEADLAB_CHECK(argc == 2, "unexpected argument '" << argv[2] << "' (usage: headlab help [VERB])");
  const Verb* verb = find_verb(argv[1]);
  if (verb == nullptr) throw_unknown_verb(argv[1]);
  char help_flag[] = "--help";
  char* verb_argv[] = {argv[1], help_flag, nullptr};
  return verb->run(2, verb_argv);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const bool version_flag = !std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V");
  const Verb* verb = find_verb(version_flag ? "version" : argv[1]);
  const std::string name = verb ? verb->name : "";
  const std::string prefix = "headlab" + (name.empty() ? "" : " " + name) + ": error: ";
  try {
    const headlab::dist::Session session(&argc, &argv);
    try {
      if (verb == nullptr) throw_unknown_verb(argv[1]);
      if (headlab::dist::size() > 1 && name != "train" && name != "sweep")  // every rank stops here
        throw headlab::dist::JobError(name + " runs as one process; only train and sweep run under mpirun", 0);
      headlab::init_blis();
      return verb->run(argc - 1, argv + 1);
    } catch (const headlab::dist::JobError& e) {
      if (headlab::dist::rank() == 0) std::fprintf(stderr, "%s%s\n", prefix.c_str(), e.what());
    } catch (const std::exception& e) {
      const bool options_error = dynamic_cast<const cxxopts::exceptions::exception*>(&e) != nullptr;
      const std::string line = e.what() + (options_error ? " (see headlab " + name + " --help)" : std::string());
      // Under mpirun: the same bad input on every rank is one line from rank 0; an error on one
      // rank alone (the others wait for it in a collective) names the rank and ends the job.
      if (headlab::dist::all_ranks_failed(10.0)) {
        if (headlab::dist::rank() == 0) std::fprintf(stderr, "%s%s\n", prefix.c_str(), line.c_str());
      } else {
        std::fprintf(stderr, "%srank %d of %d: %s\n", prefix.c_str(), headlab::dist::rank(), headlab::dist::size(),
                     line.c_str());
        std::fflush(stderr);
        headlab::dist::abort_job(2);
      }
    }
  } catch (const std::exception& e) {  // from the Session: MPI is not available (said once)
    if (headlab::dist::rank_from_launcher() == 0) std::fprintf(stderr, "%s%s\n", prefix.c_str(), e.what());
  }
  return 2;
}
