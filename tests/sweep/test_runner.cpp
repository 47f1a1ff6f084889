// Running a sweep's points: threads per job, the headlab binary in child processes, reruns,
// failures, locks, kill -9 and a full disk (src/sweep/runner.cpp).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/io/checkpoint.h"
#include "headlab/train/run_folder.h"
#include "headlab/sweep/sweep.h"
#include "support/run_files.h"
#include "sweep/sweep_scratch.h"

using namespace headlab;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;
using test::CommandResult;
using test::lines_of;
using test::metrics_without_timing;
using test::read_file;
using test::read_results;
using test::run_headlab;
using Scratch = test::SweepScratch;

TEST_CASE("each job gets max(1, cores / jobs) threads unless the sweep sets train.threads", "[sweep]") {
  Scratch s;
  // /bin/true "trains" nothing: the runs fail as unfinished, which also exercises failure reports.
  const std::string no_training = fs::exists("/bin/true") ? "/bin/true" : "/usr/bin/true";
  auto threads_with = [&](const std::string& set, int jobs) {
    const fs::path file =
        s.write("t.toml", "base = \"base.toml\"\n[set]\n" + set + "[grid]\n\"train.seed\" = [0, 1]\n");
    const std::vector<SweepPoint> points = expand_sweep(load_sweep(file.string()));
    SweepOptions o;
    o.out_dir = (s.dir / ("out_" + std::to_string(jobs) + std::to_string(set.size()))).string();
    o.jobs = jobs;
    o.cores = 2;
    o.headlab_binary = no_training;
    o.quiet = true;
    const SweepReport report = run_sweep(points, o);
    REQUIRE(report.failures.size() == 2);
    CHECK_THAT(report.failures[0].reason, StartsWith("exited without a checkpoint at train.steps = 6"));
    CHECK(fs::exists(fs::path(o.out_dir) / "grid.csv"));
    return load_config((fs::path(o.out_dir) / points[1].name / "config.toml").string()).train.threads;
  };
  CHECK(threads_with("", 1) == 2);
  CHECK(threads_with("", 2) == 1);
  CHECK(threads_with("", 3) == 1);
  CHECK(threads_with("\"train.threads\" = 1\n", 1) == 1);
}

TEST_CASE("a tiny sweep trains through the headlab binary; a re-run skips finished runs and resumes others",
          "[sweep]") {
  Scratch s;
  const fs::path file = s.write("tiny.toml",
                                "base = \"base.toml\"\n[grid]\n\"model.n_heads\" = [1, 2]\n"
                                "\"train.seed\" = [0, 1]\n");
  const fs::path out = s.dir / "out", log = s.dir / "sweep.log";
  const CommandResult first = run_headlab({"sweep", file.string(), "--jobs", "2", "--out", out.string()}, log);
  INFO(first.output);
  REQUIRE(first.code == 0);
  const std::vector<std::string> names = {"model.n_heads=1,train.seed=0", "model.n_heads=1,train.seed=1",
                                          "model.n_heads=2,train.seed=0", "model.n_heads=2,train.seed=1"};
  std::map<std::string, fs::file_time_type> written;
  for (const std::string& name : names) {
    const fs::path run = out / name;
    REQUIRE(fs::exists(checkpoint_path(run.string(), 6)));
    CHECK(fs::exists(run / "train.log"));
    CHECK(read_run_metrics((run / "metrics.csv").string()).last_step == 6);
    CHECK(load_config((run / "config.toml").string()).train.threads == 1);  // 2 jobs share the cores
    written[name] = fs::last_write_time(run / "metrics.csv");
  }
  const auto rows = read_results(out / "results.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("n_seeds") == "2");
  CHECK(rows[1].at("model.n_heads") == "2");
  // The folder is "out"; the sweep is named after its file, tiny.toml, and summary.md says so.
  CHECK(read_file(out / "sweep_name.txt") == "tiny\n");
  CHECK_THAT(read_file(out / "summary.md"), StartsWith("# Sweep tiny\n"));

  SECTION("finished runs are skipped: nothing is rewritten") {
    const CommandResult again = run_headlab({"sweep", file.string(), "--out", out.string()}, log);
    INFO(again.output);
    CHECK(again.code == 0);
    CHECK_THAT(again.output, Contains("4 finished (skipped), 0 to resume, 0 to start"));
    for (const std::string& name : names) CHECK(fs::last_write_time(out / name / "metrics.csv") == written[name]);
  }
  SECTION("run folders trained with another model fail up front and are left untouched") {
    const fs::path changed = s.write("tiny.toml",
                                     "base = \"base.toml\"\n[set]\n\"model.n_layers\" = 2\n"
                                     "[grid]\n\"model.n_heads\" = [1, 2]\n\"train.seed\" = [0, 1]\n");
    const auto config_written = fs::last_write_time(out / names[0] / "config.toml");
    const CommandResult again = run_headlab({"sweep", changed.string(), "--out", out.string()}, log);
    INFO(again.output);
    CHECK(again.code == 1);
    CHECK_THAT(again.output, Contains("sweep: failed: " + names[0] + ": ") &&
                                 Contains("was trained with a different [model] section"));
    CHECK(fs::last_write_time(out / names[0] / "config.toml") == config_written);
    for (const std::string& name : names) CHECK(fs::last_write_time(out / name / "metrics.csv") == written[name]);
  }
  SECTION("an interrupted run resumes from its checkpoint and ends as if never stopped") {
    const fs::path run = out / names[1];
    const std::vector<std::string> straight = metrics_without_timing(run);
    fs::remove(checkpoint_path(run.string(), 6));  // as if killed between steps 3 and 6
    const CommandResult again = run_headlab({"sweep", file.string(), "--out", out.string()}, log);
    INFO(again.output);
    CHECK(again.code == 0);
    CHECK_THAT(again.output, Contains("resumed " + names[1] + " from step 3"));
    CHECK(fs::exists(checkpoint_path(run.string(), 6)));
    CHECK(metrics_without_timing(run) == straight);
    for (const std::string& name : names)
      if (name != names[1]) CHECK(fs::last_write_time(out / name / "metrics.csv") == written[name]);
  }
}

TEST_CASE("a failing run is reported with its log's last line and the other runs still finish", "[sweep]") {
  Scratch s;
  // lr = 1e30 diverges at the first step: the trainer stops with an error (exit code 2).
  const fs::path file = s.write("lr.toml",
                                "base = \"base.toml\"\n[grid]\n\"train.lr\" = [3e-3, 1e30]\n"
                                "\"train.seed\" = [0, 1]\n");
  const fs::path out = s.dir / "out";
  const CommandResult r =
      run_headlab({"sweep", file.string(), "--jobs", "2", "--out", out.string()}, s.dir / "sweep.log");
  INFO(r.output);
  CHECK(r.code == 1);
  for (const char* seed : {"0", "1"}) {
    CHECK_THAT(r.output, Contains("sweep: failed: train.lr=1e30,train.seed=" + std::string(seed) +
                                  ": exit code 2: headlab train: error: training diverged"));
    CHECK(fs::exists(checkpoint_path((out / ("train.lr=0.003,train.seed=" + std::string(seed))).string(), 6)));
  }
  const auto rows = read_results(out / "results.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("n_seeds") == "2");
  CHECK(rows[0].at("n_failed") == "0");
  CHECK(rows[1].at("train.lr") == "1e30");
  CHECK(rows[1].at("n_seeds") == "0");
  // The failure is recorded where the results are read, with its error line.
  CHECK(rows[1].at("n_failed") == "2");
  CHECK_THAT(rows[1].at("failures"), Contains("train.lr=1e30,train.seed=0: exit code 2: ") &&
                                         Contains("train.lr=1e30,train.seed=1: exit code 2: ") &&
                                         Contains("training diverged"));
  CHECK_THAT(read_file(out / "summary.md"), Contains("FAILED: exit code 2: ") && Contains("training diverged"));
}

TEST_CASE("two sweeps on one folder, or two trainings of one run folder, do not run at once", "[sweep]") {
  Scratch s;
  const fs::path file = s.write("seeds.toml", "base = \"base.toml\"\n[grid]\n\"train.seed\" = [0, 1]\n");
  const fs::path out = s.dir / "out";
  fs::create_directories(out);
  {
    const FileLock held(out / ".sweep.lock", "held by the test");
    const CommandResult r = run_headlab({"sweep", file.string(), "--out", out.string()}, s.dir / "log.txt");
    CHECK(r.code == 2);
    REQUIRE(lines_of(r.output).size() == 1);
    CHECK_THAT(r.output, Contains("sweep folder " + out.string() + " is in use by another headlab process (pid " +
                                  std::to_string(::getpid()) + ")"));
    CHECK_FALSE(fs::exists(out / "grid.csv"));
    CHECK(run_headlab({"sweep", file.string(), "--out", out.string(), "--aggregate-only"}, s.dir / "log.txt").code ==
          2);
  }
  const fs::path run = s.dir / "run";
  fs::create_directories(run);
  const FileLock held(run / ".lock", "held by the test");
  const CommandResult r =
      run_headlab({"train", (s.dir / "base.toml").string(), "--out", run.string()}, s.dir / "t.txt");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("run folder " + run.string() + " is in use by another headlab process"));
  CHECK_FALSE(fs::exists(run / "metrics.csv"));
}

namespace {
// Waits until no process holds a run folder's lock (the runs of a killed sweep stop on SIGTERM,
// checkpointing first: slow under the sanitizers on a loaded machine, hence the generous bound).
// A kill that lands before the sweep made the folder leaves nothing to wait for: the probe would
// fail to create its lock file there, which is not "held" (the likely cause of a CI run that
// failed here after 60 s under the sanitizers; not reproduced).
void wait_until_unlocked(const fs::path& run) {
  if (!fs::exists(run)) return;
  for (int i = 0; i < 2400; ++i) {
    try {
      const FileLock probe(run / ".lock", "probe");
      return;
    } catch (const Error&) {
      ::usleep(25000);
    }
  }
  FAIL("a run of the killed sweep still holds " << run.string() << " after 60 s");
}
}  // namespace

TEST_CASE("kill -9 of a sweep or of one of its runs at any moment: a rerun ends as an uninterrupted sweep", "[sweep]") {
  Scratch s;
  // Three runs of 600 steps (about a second each), a checkpoint every 50: kills land mid-run.
  const fs::path file = s.write("seeds.toml",
                                "base = \"base.toml\"\n[set]\n\"train.steps\" = 600\n"
                                "\"train.checkpoint_every\" = 50\n\"train.eval_every\" = 100\n"
                                "[grid]\n\"train.seed\" = [0, 1, 2]\n");
  const fs::path straight = s.dir / "straight";
  REQUIRE(run_headlab({"sweep", file.string(), "--jobs", "2", "--out", straight.string()}, s.dir / "s.log").code == 0);
  const std::vector<std::string> names = {"train.seed=0", "train.seed=1", "train.seed=2"};
  auto same_as_straight = [&](const fs::path& out) {
    for (const std::string& name : names) {
      INFO(name);
      CHECK(metrics_without_timing(out / name) == metrics_without_timing(straight / name));
    }
    const auto want = read_results(straight / "results.csv"), got = read_results(out / "results.csv");
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      for (const char* key : {"n_seeds", "val_loss_mean", "val_loss_std", "n_failed", "failures"})
        CHECK(got[i].at(key) == want[i].at(key));
  };

  std::mt19937 rng(7);
  const std::string binary = test::headlab_binary();
  SECTION("the sweep process") {
    const fs::path out = s.dir / "killed";
    int interrupted = 0;  // kills that left a run unfinished (the others came too late)
    for (int attempt = 0; attempt < 4; ++attempt) {
      const pid_t sweep =
          test::start_program(binary, {"sweep", file.string(), "--jobs", "2", "--out", out.string()}, s.dir / "k.log");
      ::usleep(std::uniform_int_distribution<int>(100000, 1200000)(rng));
      ::kill(sweep, SIGKILL);
      test::wait_program(sweep, s.dir / "k.log");
      for (const std::string& name : names) wait_until_unlocked(out / name);
      bool all_done = true;
      for (const std::string& name : names)
        all_done = all_done && fs::exists(checkpoint_path((out / name).string(), 600));
      interrupted += !all_done;
    }
    CHECK(interrupted >= 1);
    const CommandResult rerun =
        run_headlab({"sweep", file.string(), "--jobs", "2", "--out", out.string()}, s.dir / "r.log");
    INFO(rerun.output);
    CHECK(rerun.code == 0);
    same_as_straight(out);
  }
  SECTION("one of its runs") {
    const fs::path out = s.dir / "child";
    const pid_t sweep =
        test::start_program(binary, {"sweep", file.string(), "--jobs", "1", "--out", out.string()}, s.dir / "k.log");
    // The first run's trainer: the process holding train.seed=0's lock, once it has a checkpoint.
    const fs::path first = out / names[0];
    for (int i = 0; i < 1000 && !fs::exists(checkpoint_path(first.string(), 50)); ++i) ::usleep(10000);
    const std::string holder = read_file(first / ".lock");
    REQUIRE(!holder.empty());
    ::kill(std::stoi(holder), SIGKILL);
    const CommandResult killed = test::wait_program(sweep, s.dir / "k.log");
    INFO(killed.output);
    CHECK(killed.code == 1);  // that run failed; the others finished
    const auto rows = read_results(out / "results.csv");
    CHECK(rows[0].at("n_failed") == "1");
    CHECK_THAT(rows[0].at("failures"), Contains("train.seed=0: killed by signal 9"));
    const CommandResult rerun =
        run_headlab({"sweep", file.string(), "--jobs", "2", "--out", out.string()}, s.dir / "r.log");
    INFO(rerun.output);
    CHECK(rerun.code == 0);
    CHECK_FALSE(fs::exists(first / "failed.txt"));
    same_as_straight(out);
  }
}

TEST_CASE("a run folder whose checkpoint cannot be read fails up front and is left untouched", "[sweep]") {
  Scratch s;
  const fs::path file = s.write("seeds.toml", "base = \"base.toml\"\n[grid]\n\"train.seed\" = [0, 1]\n");
  const std::vector<SweepPoint> points = expand_sweep(load_sweep(file.string()));
  const fs::path out = s.dir / "out", broken = out / "train.seed=1";
  fs::create_directories(broken / "checkpoints");
  std::ofstream(checkpoint_path(broken.string(), 3)) << "not a checkpoint";
  SweepOptions o;
  o.out_dir = out.string();
  o.headlab_binary = fs::exists("/bin/true") ? "/bin/true" : "/usr/bin/true";  // trains nothing
  o.quiet = true;
  const SweepReport report = run_sweep(points, o);
  REQUIRE(report.failures.size() == 2);
  CHECK(report.failures[0].run == "train.seed=1");  // reported before any run starts
  CHECK_THAT(report.failures[0].reason, Contains("not an HDF5 file"));
  CHECK(report.failures[1].run == "train.seed=0");  // /bin/true leaves no checkpoint
  CHECK_FALSE(fs::exists(broken / "config.toml"));
  CHECK_FALSE(fs::exists(broken / "train.log"));
}

namespace {

// The disk "fills up" at `bytes` per file, for this process and the programs it starts, until the
// end of the scope: RLIMIT_FSIZE with SIGXFSZ ignored (inherited through exec), so a write past
// the limit fails with EFBIG ("File too large") as one on a full disk fails with ENOSPC. The same
// mechanism as the io test "checkpoint commit that hits a full disk ...", for whole sweeps.
struct ScopedFullDisk {
  explicit ScopedFullDisk(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_limit);
    old_handler = ::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit limit = {bytes, old_limit.rlim_max};
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~ScopedFullDisk() {
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::signal(SIGXFSZ, old_handler);
  }
  ScopedFullDisk(const ScopedFullDisk&) = delete;
  ScopedFullDisk& operator=(const ScopedFullDisk&) = delete;
  struct rlimit old_limit {};
  sighandler_t old_handler = SIG_DFL;
};

}  // namespace

TEST_CASE("a full disk during a sweep loses nothing already finished, and the sweep names the failure in one line",
          "[sweep]") {
  Scratch s;
  // One run at a time, in grid order: d_model = 16 (checkpoints of ~0.2 MB) finishes, then the disk
  // is full for d_model = 128, whose first checkpoint (~3 MB) cannot be written.
  const fs::path file = s.write("disk.toml", "base = \"base.toml\"\n[grid]\n\"model.d_model\" = [16, 128]\n");
  const fs::path out = s.dir / "out", small = out / "model.d_model=16", big = out / "model.d_model=128";
  CommandResult full;
  {
    const ScopedFullDisk disk(1 << 20);
    full = run_headlab({"sweep", file.string(), "--jobs", "1", "--out", out.string()}, s.dir / "sweep.log");
  }
  INFO(full.output);
  CHECK(full.code == 1);
  // The failure is one line naming the run and the cause.
  std::vector<std::string> failed_lines;
  for (const std::string& line : lines_of(full.output))
    if (line.find("sweep: failed: ") != std::string::npos) failed_lines.push_back(line);
  REQUIRE(failed_lines.size() == 1);
  CHECK_THAT(failed_lines[0], Contains("model.d_model=128: exit code ") && Contains("File too large"));
  // The finished run is whole: its last checkpoint reads, its metrics reach the end, and the
  // results list it, with the failed run beside it.
  CHECK(CheckpointReader(checkpoint_path(small.string(), 6)).int_attr("step") == 6);
  CHECK(read_run_metrics((small / "metrics.csv").string()).last_step == 6);
  const auto rows = read_results(out / "results.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("n_seeds") == "1");
  CHECK(rows[1].at("n_failed") == "1");
  CHECK_THAT(rows[1].at("failures"), Contains("File too large"));
  // No half-written checkpoint of the failed run is left, under any name.
  for (const auto& entry : fs::recursive_directory_iterator(big))
    CHECK_THAT(entry.path().filename().string(), !Contains(".tmp"));
  const auto finished_at = fs::last_write_time(small / "metrics.csv");
  const std::string results = read_file(out / "results.csv"), summary = read_file(out / "summary.md");

  SECTION("a disk that fills while the results are aggregated leaves the previous results intact") {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // exit codes: 0 = one-line headlab::Error, 1 = no error, 2 = something else
      const ScopedFullDisk disk(16);
      int code = 1;
      try {
        aggregate_sweep(out.string());
      } catch (const Error& e) {
        code = std::string(e.what()).find('\n') == std::string::npos ? 0 : 2;
      } catch (...) {
        code = 2;
      }
      ::_exit(code);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(read_file(out / "results.csv") == results);
    CHECK(read_file(out / "summary.md") == summary);
    for (const auto& entry : fs::directory_iterator(out))
      CHECK_THAT(entry.path().filename().string(), !Contains(".tmp"));
  }
  SECTION("with space again, a rerun skips the finished run untouched and completes the failed one") {
    const CommandResult again =
        run_headlab({"sweep", file.string(), "--jobs", "1", "--out", out.string()}, s.dir / "sweep.log");
    INFO(again.output);
    CHECK(again.code == 0);
    CHECK_THAT(again.output, Contains("1 finished (skipped), 0 to resume, 1 to start"));
    CHECK(fs::last_write_time(small / "metrics.csv") == finished_at);
    CHECK(read_run_metrics((big / "metrics.csv").string()).last_step == 6);
    CHECK(read_results(out / "results.csv")[1].at("n_failed") == "0");
  }
}
