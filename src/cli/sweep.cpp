// headlab sweep SWEEP.toml [--jobs N] [--out DIR] [--dry-run | --aggregate-only]
// Expands and validates the grid (an invalid point stops everything before a file is written),
// runs the unfinished points through this executable's `train` verb, then aggregates
// DIR/results.csv and DIR/summary.md. Exit: 0 all finished, 1 a run failed, 2 bad input,
// 130 interrupted. Under `mpirun -np P`, rank 0 deals the points out to all ranks (each runs
// --jobs at once) and alone locks the folder, aggregates and reports.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/dist/dist.h"
#include "headlab/sweep/sweep.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace {

std::string this_executable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  HEADLAB_CHECK(!ec, "cannot find the headlab executable (/proc/self/exe: " << ec.message() << ")");
  return self.string();
}

const char* state_name(RunState s) {
  return s == RunState::finished ? "finished" : s == RunState::resume ? "resume" : "start";
}

}  // namespace

int run_sweep(int argc, char** argv) {
  cxxopts::Options options("headlab sweep", "Train every point of a grid over config keys (see docs/sweeps.md).");
  options.positional_help("SWEEP.toml");
  options.add_options()("sweep", "sweep file", cxxopts::value<std::string>())(
      "j,jobs", "runs at once; the cores are split between them", cxxopts::value<int>()->default_value("1"))(
      "out", "sweep folder (default runs/<sweep name>)", cxxopts::value<std::string>())(
      "dry-run", "validate the grid and list the runs with what a sweep would do; write nothing")(
      "aggregate-only", "only rewrite DIR/results.csv and DIR/summary.md from the runs' metrics")("h,help",
                                                                                                  "show this help");
  const auto parsed = parse_options(options, {"sweep"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("sweep"), "no sweep file given (usage: headlab sweep SWEEP.toml [--jobs N] [--out DIR])");
  const int jobs = *count_option<int>(args, "jobs", 1);
  const SweepSpec spec = load_sweep(args["sweep"].as<std::string>());
  const std::string out =
      args.count("out") ? args["out"].as<std::string>() : (std::filesystem::path("runs") / spec.name).string();
  const std::filesystem::path out_path(out);
  // One sweep process per folder at a time (each run also locks its own folder).
  auto lock_folder = [&] {
    std::filesystem::create_directories(out_path);
    return std::make_unique<FileLock>(out_path / ".sweep.lock", "sweep folder " + out);
  };

  const bool coordinator = dist::rank() == 0;
  if ((args.count("aggregate-only") || args.count("dry-run")) && !coordinator) return 0;  // one rank is enough
  if (args.count("aggregate-only")) {
    const auto lock = lock_folder();
    aggregate_sweep(out);
    std::printf("%s\n%s\n", (out_path / "results.csv").c_str(), (out_path / "summary.md").c_str());
    return 0;
  }

  const std::vector<SweepPoint> points = expand_sweep(spec);
  if (args.count("dry-run")) {
    std::printf("%-10s %12s  %s\n", "action", "parameters", "run folder");
    for (const SweepPoint& p : points) {
      const RunStatus s = run_status((out_path / p.name).string(), p.config);
      std::printf("%-10s %12lld  %s\n", state_name(s.state), static_cast<long long>(p.n_params),
                  (out_path / p.name).c_str());
    }
    std::printf("%s; nothing written\n", counted(static_cast<int64_t>(points.size()), "run").c_str());
    return 0;
  }

  std::unique_ptr<FileLock> lock;  // after the grid is known to be valid: bad input writes nothing
  dist::together([&] {
    if (coordinator) lock = lock_folder();
  });
  SweepOptions run;
  run.out_dir = out;
  run.jobs = jobs;
  run.headlab_binary = this_executable();
  run.name = spec.name;
  const SweepReport report = headlab::run_sweep(points, run);
  dist::together([&] {
    if (coordinator) aggregate_sweep(out);
  });
  if (!coordinator) return report.interrupted ? 130 : 0;
  std::fprintf(stderr, "sweep: %d ran, %d already finished, %zu failed%s; results in %s and %s\n", report.n_ran,
               report.n_skipped, report.failures.size(), report.interrupted ? ", interrupted" : "",
               (out_path / "results.csv").c_str(), (out_path / "summary.md").c_str());
  for (const SweepFailure& f : report.failures)
    std::fprintf(stderr, "sweep: failed: %s: %s\n", f.run.c_str(), f.reason.c_str());
  if (report.interrupted) {
    std::fprintf(stderr, "sweep: interrupted; run the same command again to resume\n");
    return 130;
  }
  return report.failures.empty() ? 0 : 1;
}

}  // namespace headlab::cli
