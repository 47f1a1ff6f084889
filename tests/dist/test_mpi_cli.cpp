// `mpirun -np P headlab train|sweep` against one process (issue 15): the CTest entry `mpi` runs
// these with Open MPI allowed to run as root. Each test starts mpirun itself.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "headlab/dist/dist.h"
#include "headlab/io/csv.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/run_folder.h"
#include "support/run_files.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
using Catch::Matchers::Contains;
using test::checkpoint_tensors;
using test::CommandResult;
using test::metrics_without_timing;
using test::read_file;
using test::run_headlab;
namespace fs = std::filesystem;

namespace {

// A tiny decoder with GQA and dropout (so that the masks must line up across ranks too),
// four micro-batches a step, one thread per process.
struct Scratch : test::ScratchDir {
  Scratch() : test::ScratchDir("mpi") {
    Config c = test::tiny_text_config(write_corpus("corpus.txt", 400));
    c.model.n_heads = 4;
    c.model.n_kv_heads = 2;
    c.model.n_layers = 2;
    c.model.dropout = 0.1;
    c.train.grad_accum = 4;
    c.train.steps = 12;
    c.train.warmup_steps = 2;
    c.train.lr = 3e-3;
    c.train.eval_every = c.train.checkpoint_every = 4;
    write_config("tiny.toml", c);
  }
  std::string config() const { return (dir / "tiny.toml").string(); }
};

std::string mpirun() {
  const char* from_build = std::getenv("HEADLAB_MPIEXEC");
  return from_build ? from_build : "/usr/bin/mpirun";
}

std::vector<std::string> mpirun_args(int ranks, const std::vector<std::string>& headlab_args,
                                     const std::vector<std::string>& options = {}) {
  std::vector<std::string> args = {"--oversubscribe", "-np", std::to_string(ranks)};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(test::headlab_binary());
  args.insert(args.end(), headlab_args.begin(), headlab_args.end());
  return args;
}

CommandResult run_mpi(int ranks, const std::vector<std::string>& headlab_args, const fs::path& log,
                      const std::vector<std::string>& options = {}) {
  return test::run_program(mpirun(), mpirun_args(ranks, headlab_args, options), log);
}

int count_lines_containing(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(part) != std::string::npos;
  return n;
}

void require_same_run(const fs::path& a, const fs::path& b, int64_t final_step) {
  INFO(a.string() << " vs " << b.string());
  CHECK(metrics_without_timing(a) == metrics_without_timing(b));
  CHECK(checkpoint_tensors(checkpoint_path(a.string(), final_step)) ==
        checkpoint_tensors(checkpoint_path(b.string(), final_step)));
  CHECK(checkpoint_tensors(best_checkpoint_path(a.string())) == checkpoint_tensors(best_checkpoint_path(b.string())));
}

// Lines of metrics.csv (header included) once the file has at least `lines`, or after 60 s.
void wait_for_metrics_lines(const fs::path& run, size_t lines) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(run / "metrics.csv");
    size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    if (n >= lines) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("metrics.csv of " << run.string() << " did not reach " << lines << " lines");
}

// The pid of rank `rank` of the headlab job writing to `out` (from /proc: its command line names
// the folder, its environment the rank).
pid_t pid_of_rank(const fs::path& out, int rank) {
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path() / "cmdline"), environ_text = read_file(entry.path() / "environ");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(test::headlab_binary()) == std::string::npos || cmdline.find(out.string()) == std::string::npos)
      continue;
    if (environ_text.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

}  // namespace

TEST_CASE("mpirun -np 2 and -np 4 train bit-identical to one process with the same grad_accum", "[mpi]") {
  REQUIRE(dist::built_with_mpi());  // the mpi CTest entry exists only in MPI builds
  Scratch s;
  REQUIRE(run_headlab({"train", s.config(), "--out", (s.dir / "one").string()}, s.dir / "one.log").code == 0);
  for (int ranks : {2, 4}) {
    const fs::path run = s.dir / ("ranks" + std::to_string(ranks));
    const CommandResult r = run_mpi(ranks, {"train", s.config(), "--out", run.string()}, s.dir / "mpi.log");
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(count_lines_containing(r.output, "finished at step 12") == 1);  // rank 0 alone reports
    require_same_run(s.dir / "one", run, 12);
  }
}

TEST_CASE("under mpirun, bad input is one line, printed once", "[mpi]") {
  REQUIRE(dist::built_with_mpi());  // the mpi CTest entry exists only in MPI builds
  Scratch s;
  // Three micro-batches do not split over two ranks: every rank finds out; rank 0 says it.
  const CommandResult r =
      run_mpi(2, {"train", s.config(), "--set", "train.grad_accum=3", "--out", (s.dir / "run").string()},
              s.dir / "bad.log", {"--quiet"});
  CHECK(r.code != 0);
  CHECK(count_lines_containing(r.output, "error") == 1);
  CHECK_THAT(r.output, Contains("headlab train: error: rank 0 of 2: train.grad_accum = 3 does not split over 2 ranks; "
                                "set it to a multiple of 2 (e.g. --set train.grad_accum=2)\n"));
  CHECK_FALSE(fs::exists(s.dir / "run" / "metrics.csv"));
  // Verbs other than train and sweep run as one process.
  const CommandResult eval = run_mpi(2, {"info"}, s.dir / "info.log", {"--quiet"});
  CHECK(eval.code != 0);
  CHECK(eval.output == "headlab info: error: info runs as one process; only train and sweep run under mpirun\n");
}

TEST_CASE("a 2-rank run stopped by SIGTERM or by a killed rank resumes to the bits of a straight run", "[mpi]") {
  REQUIRE(dist::built_with_mpi());  // the mpi CTest entry exists only in MPI builds
  Scratch s;
  const std::vector<std::string> longer = {"--set", "train.steps=2000",   "--set", "train.checkpoint_every=10",
                                           "--set", "train.eval_every=50"};
  auto train_args = [&](const fs::path& run, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"train", s.config(), "--out", run.string()};
    args.insert(args.end(), longer.begin(), longer.end());
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const fs::path straight = s.dir / "straight";
  REQUIRE(run_headlab(train_args(straight), s.dir / "straight.log").code == 0);

  SECTION("SIGTERM to mpirun: the ranks agree on a step, rank 0 checkpoints it, one process resumes") {
    const fs::path run = s.dir / "stopped";
    // mpirun forwards SIGTERM to the ranks and SIGKILLs them 1 s later: time enough here for a
    // step and a checkpoint (docs/distributed.md says what to do when a step takes longer).
    const pid_t job = test::start_program(mpirun(), mpirun_args(2, train_args(run)), s.dir / "stopped.log");
    wait_for_metrics_lines(run, 3);  // early: mpirun forwards the signal some milliseconds later
    ::kill(job, SIGTERM);
    const CommandResult r = test::wait_program(job, s.dir / "stopped.log");
    INFO(r.output);
    CHECK(r.code != 0);
    CHECK_THAT(r.output, Contains("stopped by a signal at step"));
    const auto newest = newest_checkpoint(run.string());
    REQUIRE(newest);
    CHECK(newest->step < 2000);
    CHECK(metrics_without_timing(run).size() == static_cast<size_t>(newest->step) + 1);  // header + a row a step
    const CommandResult resumed = run_headlab(train_args(run, {"--resume", "auto"}), s.dir / "resumed.log");
    INFO(resumed.output);
    REQUIRE(resumed.code == 0);
    require_same_run(straight, run, 2000);
  }
  SECTION("kill -9 of rank 1: mpirun names the rank; the checkpoints on disk resume on 2 ranks") {
    const fs::path run = s.dir / "killed";
    const pid_t job = test::start_program(mpirun(), mpirun_args(2, train_args(run)), s.dir / "killed.log");
    wait_for_metrics_lines(run, 25);  // a checkpoint (step 10, 20) exists
    const pid_t rank1 = pid_of_rank(run, 1);
    REQUIRE(rank1 > 0);
    ::kill(rank1, SIGKILL);
    const CommandResult r = test::wait_program(job, s.dir / "killed.log");
    INFO(r.output);
    CHECK(r.code != 0);
    // Open MPI's own line names the rank and the signal (its PID field reads 0 in Open MPI 4.1).
    CHECK(count_lines_containing(r.output, "mpirun noticed that process rank 1 with PID") == 1);
    CHECK_THAT(r.output, Contains("exited on signal 9 (Killed)"));
    const auto newest = newest_checkpoint(run.string());
    REQUIRE(newest);
    const CommandResult resumed = run_mpi(2, train_args(run, {"--resume", "auto"}), s.dir / "resumed.log");
    INFO(resumed.output);
    REQUIRE(resumed.code == 0);
    require_same_run(straight, run, 2000);
  }
}

TEST_CASE("mpirun -np 2 headlab sweep deals the points to both ranks and matches the serial sweep", "[mpi]") {
  REQUIRE(dist::built_with_mpi());  // the mpi CTest entry exists only in MPI builds
  Scratch s;
  const fs::path file = s.write("grid.toml",
                                "base = \"tiny.toml\"\n[set]\n\"train.steps\" = 8\n"
                                "[grid]\n\"model.n_heads\" = [2, 4]\n\"train.seed\" = [0, 1, 2]\n");
  const CommandResult serial =
      run_headlab({"sweep", file.string(), "--out", (s.dir / "serial").string()}, s.dir / "serial.log");
  REQUIRE(serial.code == 0);
  const CommandResult two = run_mpi(2, {"sweep", file.string(), "--out", (s.dir / "two").string()}, s.dir / "two.log");
  INFO(two.output);
  REQUIRE(two.code == 0);
  CHECK_THAT(two.output, Contains("on rank 1"));  // rank 1 ran points too
  // results.csv without its speed column, and every run's metrics: the same.
  auto without_speed = [](const fs::path& csv) {
    const CsvTable table = read_csv(csv);
    const size_t speed = table.column("tokens_per_s");
    std::vector<std::vector<std::string>> rows = {table.header};
    rows.insert(rows.end(), table.rows.begin(), table.rows.end());
    for (std::vector<std::string>& row : rows) row.erase(row.begin() + static_cast<std::ptrdiff_t>(speed));
    return rows;
  };
  const auto serial_rows = without_speed(s.dir / "serial" / "results.csv");
  CHECK(serial_rows.size() == 3);  // header + 2 head counts (aggregated over seeds)
  CHECK(without_speed(s.dir / "two" / "results.csv") == serial_rows);
  for (const fs::directory_entry& run : fs::directory_iterator(s.dir / "serial"))
    if (run.is_directory())
      CHECK(metrics_without_timing(run.path()) == metrics_without_timing(s.dir / "two" / run.path().filename()));
  // A rerun under mpirun skips every finished point, as a serial rerun does.
  const CommandResult again =
      run_mpi(2, {"sweep", file.string(), "--out", (s.dir / "two").string()}, s.dir / "again.log");
  INFO(again.output);
  CHECK(again.code == 0);
  CHECK_THAT(again.output, Contains("6 runs: 6 finished (skipped), 0 to resume, 0 to start"));
  CHECK(without_speed(s.dir / "two" / "results.csv") == serial_rows);
}
