// Running a sweep's points: each one a child process of the headlab binary
// (`headlab train RUN/config.toml --out RUN --resume auto`). A child per run isolates failures (a
// crash or an OOM kills one run, not the sweep) and makes a run folder exactly what a single
// `headlab train` would leave. Children get their own process group, so a Ctrl-C reaches only the
// sweep, which forwards one SIGTERM to each running child: the trainer checkpoints on the first
// signal and dies at once on a second. Under mpirun, rank 0 deals the points out to every rank.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/common/parallel.h"
#include "headlab/common/signals.h"
#include "headlab/common/subprocess.h"
#include "headlab/dist/dist.h"
#include "headlab/sweep/sweep.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Running points.

// The last non-empty line of a log, with progress-line carriage returns resolved.
std::string last_log_line(const fs::path& log) {
  std::ifstream in(log, std::ios::binary);
  std::string line, last;
  while (std::getline(in, line)) {
    if (const size_t cr = line.find_last_of('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  }
  return last.empty() ? "(empty log)" : last;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

// The environment a run starts with: this one without the MPI launcher's variables, so that a
// run started by a rank of `mpirun headlab sweep` is one process and does not join the job.
std::vector<std::string> run_environment() {
  std::vector<std::string> env;
  for (const std::string& var : current_environment())
    if (var.rfind("OMPI_", 0) != 0 && var.rfind("PMIX_", 0) != 0 && var.rfind("PMI_", 0) != 0) env.push_back(var);
  return env;
}

// `binary train RUN/config.toml --out RUN --resume auto`, output appended to RUN/train.log, in
// its own process group (a Ctrl-C reaches the sweep only, which forwards one SIGTERM) and ended
// with the sweep: a sweep killed outright (kill -9) takes its runs down too, each checkpointing
// on SIGTERM, rather than leaving them training while a rerun starts the same points.
pid_t start_run(const std::string& binary, const fs::path& run_dir) {
  ChildProcess child;
  child.args = {binary, "train", (run_dir / "config.toml").string(), "--out", run_dir.string(), "--resume", "auto"};
  child.env = run_environment();
  child.own_process_group = true;
  child.ends_with_parent = true;
  const fs::path log = run_dir / "train.log";
  {
    std::ofstream header(log, std::ios::app);
    header << "== " << now_text() << ":";
    for (const std::string& a : child.args) header << " " << a;
    header << "\n";
  }
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  HEADLAB_CHECK(log_fd >= 0, "cannot open " << log.string() << " for writing");
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  child.stdout_fd = child.stderr_fd = log_fd;
  child.stdin_fd = null_fd;
  pid_t pid = -1;
  try {
    pid = start_child(child);
  } catch (...) {
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw;
  }
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  return pid;
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit code " + std::to_string(WEXITSTATUS(status));
}

// How a run that this process started ended.
enum class Ending { finished, stopped, failed };
struct RunEnded {
  size_t point = 0;
  Ending ending = Ending::failed;
  std::string detail;  // finished/stopped: the log's last line; failed: exit status and last line
  double seconds = 0;
};

// The runs this process (the sweep, or one rank of it) has running, as child processes.
class LocalRuns {
 public:
  LocalRuns(const std::vector<SweepPoint>& points, const fs::path& out, const std::string& binary)
      : points_(points), out_(out), binary_(binary) {}

  size_t size() const { return running_.size(); }

  void start(size_t point) {
    const fs::path run = out_ / points_[point].name;
    std::error_code ec;
    fs::remove(run / kFailedFile, ec);  // this attempt's outcome replaces the last one's
    running_.push_back({start_run(binary_, run), point, std::chrono::steady_clock::now()});
  }

  // SIGTERM to every running run, once: each checkpoints and exits with 130.
  void stop_all() {
    if (stopping_) return;
    stopping_ = true;
    for (const Child& c : running_) ::kill(c.pid, SIGTERM);
  }

  // The runs that have ended since the last call (waitpid without blocking).
  std::vector<RunEnded> reap() {
    std::vector<RunEnded> ended;
    for (size_t r = 0; r < running_.size();) {
      int status = 0;
      const pid_t got = ::waitpid(running_[r].pid, &status, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) {
        ++r;
        continue;
      }
      const Child child = running_[r];
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(r));
      const SweepPoint& point = points_[child.point];
      const fs::path run = out_ / point.name;
      RunEnded e;
      e.point = child.point;
      e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - child.start).count();
      // got < 0: the child was reaped elsewhere (SIGCHLD ignored); its checkpoints tell the outcome.
      const bool exited_ok = got < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
      const bool finished = exited_ok && run_status(run.string(), point.config).state == RunState::finished;
      const std::string last = last_log_line(run / "train.log");
      if (finished) {
        e.ending = Ending::finished;
        e.detail = last;
      } else if (stopping_ && got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 130) {
        e.ending = Ending::stopped;
        e.detail = last;
      } else {
        const std::string how =
            got < 0     ? std::string("lost track of the process")
            : exited_ok ? "exited without a checkpoint at train.steps = " + std::to_string(point.config.train.steps)
                        : describe_exit(status);
        e.ending = Ending::failed;
        e.detail = how + ": " + last;
      }
      ended.push_back(std::move(e));
    }
    return ended;
  }

 private:
  struct Child {
    pid_t pid;
    size_t point;
    std::chrono::steady_clock::time_point start;
  };
  const std::vector<SweepPoint>& points_;
  fs::path out_;
  std::string binary_;
  std::vector<Child> running_;
  bool stopping_ = false;
};

// The distributed sweep's work queue (mpirun -np P headlab sweep): rank 0 deals out points to
// the other ranks as their slots free up. A worker's messages to rank 0, on kToCoordinator:
//   "want"                        a slot is free: rank 0 answers on kToWorker with a point
//                                 index, or "none" (no more points: stop asking)
//   "ended POINT KIND SECONDS\nDETAIL"  a run ended (KIND 0 finished, 1 stopped, 2 failed)
//   "leaving"                     no run left and none wanted: the worker is done
constexpr int kToCoordinator = 11, kToWorker = 12;

std::string encode(const RunEnded& e) {
  std::ostringstream text;
  text << "ended " << e.point << ' ' << static_cast<int>(e.ending) << ' ' << e.seconds << '\n' << e.detail;
  return text.str();
}

RunEnded decode_ended(const std::string& text) {
  RunEnded e;
  std::istringstream in(text.substr(6, text.find('\n') - 6));
  int ending = 0;
  in >> e.point >> ending >> e.seconds;
  e.ending = static_cast<Ending>(ending);
  e.detail = text.substr(text.find('\n') + 1);
  return e;
}

// A rank other than 0: runs what rank 0 hands out, `jobs` at a time, until told there is no more.
void serve_points(const std::vector<SweepPoint>& points, const SweepOptions& options) {
  LocalRuns runs(points, options.out_dir, options.headlab_binary);
  bool asking = true;
  while (asking || runs.size() > 0) {
    if (stop_signal()) {
      asking = false;
      runs.stop_all();
    }
    if (asking && static_cast<int>(runs.size()) < options.jobs) {
      dist::send_text(0, kToCoordinator, "want");
      const std::string answer = dist::receive_text(0, kToWorker);
      if (answer == "none")
        asking = false;
      else
        runs.start(std::stoul(answer));
      continue;
    }
    const std::vector<RunEnded> ended = runs.reap();
    for (const RunEnded& e : ended) dist::send_text(0, kToCoordinator, encode(e));
    if (ended.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  dist::send_text(0, kToCoordinator, "leaving");
}

// "" when the run's newest checkpoint was trained with this point's [model] section (or there is
// none), else why not.
std::string model_mismatch(const RunStatus& status, const Config& config) {
  if (status.state == RunState::fresh) return "";
  try {
    if (checkpoint_config(status.checkpoint).model == config.model) return "";
    return status.checkpoint +
           " was trained with a different [model] section than this grid point; "
           "move the run folder away or sweep into another --out";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

SweepReport run_sweep(const std::vector<SweepPoint>& points, const SweepOptions& options) {
  const bool coordinator = dist::rank() == 0;
  SweepReport report;
  std::vector<size_t> pending;
  std::vector<int64_t> resume_step(points.size(), 0);
  int n_resume = 0, threads = 1;
  const fs::path out(options.out_dir);
  // Rank 0 checks the folder and writes every run's config.toml before any rank starts a run.
  dist::together([&] {
    HEADLAB_CHECK(!options.out_dir.empty(), "sweep: no output directory given");
    HEADLAB_CHECK(options.jobs >= 1, "sweep: --jobs " << options.jobs << " must be at least 1");
    HEADLAB_CHECK(::access(options.headlab_binary.c_str(), X_OK) == 0,
                  "sweep: cannot execute the headlab binary '" << options.headlab_binary << "'");
    const int cores = options.cores > 0 ? options.cores : dist::cores_per_rank(num_threads());
    threads = std::max(1, cores / options.jobs);
    if (!coordinator) return;
    fs::create_directories(out);
    write_grid_csv(out.string(), points);
    if (!options.name.empty()) write_file_atomically(out / kSweepNameFile, options.name + "\n");
    for (size_t i = 0; i < points.size(); ++i) {
      const fs::path run = out / points[i].name;
      const RunStatus status = run_status(run.string(), points[i].config);
      // A folder trained with another model (the sweep file changed) is neither skipped nor
      // resumed, and its config.toml is left describing its checkpoints.
      if (const std::string why = model_mismatch(status, points[i].config); !why.empty()) {
        report.failures.push_back({points[i].name, why});
        if (!options.quiet) std::fprintf(stderr, "sweep: FAILED %s (%s)\n", points[i].name.c_str(), why.c_str());
        continue;
      }
      if (status.state == RunState::finished) {
        ++report.n_skipped;
        continue;
      }
      n_resume += status.state == RunState::resume;
      resume_step[i] = status.step;
      Config config = points[i].config;
      const bool sweep_sets_threads =
          std::any_of(points[i].overrides.begin(), points[i].overrides.end(),
                      [](const std::string& o) { return o.rfind("train.threads=", 0) == 0; });
      if (!sweep_sets_threads) config.train.threads = threads;
      fs::create_directories(run);
      write_file_atomically(run / "config.toml", to_toml(config));
      pending.push_back(i);
    }
    if (!options.quiet) {
      const int ranks = dist::size();
      std::fprintf(
          stderr,
          "sweep: %zu runs: %d finished (skipped), %d to resume, %zu to start; %s%d at once x %d thread%s -> %s\n",
          points.size(), report.n_skipped, n_resume, pending.size() - n_resume,
          ranks > 1 ? (std::to_string(ranks) + " ranks x ").c_str() : "", options.jobs, threads,
          threads == 1 ? "" : "s", out.c_str());
      if (options.jobs > cores)
        std::fprintf(stderr,
                     "sweep: note: --jobs %d is more than the %d thread%s OMP_NUM_THREADS (or the machine) gives "
                     "this sweep; its runs will share them\n",
                     options.jobs, cores, cores == 1 ? "" : "s");
    }
  });

  // First SIGINT/SIGTERM: stop starting runs and forward SIGTERM to the running ones. A second
  // one kills the sweep at once (the children, in their own process groups, still checkpoint).
  StopOnSignal signals;
  if (!coordinator) {
    serve_points(points, options);
    report.interrupted = stop_signal() != 0;
    return report;
  }
  LocalRuns runs(points, out, options.headlab_binary);
  size_t next = 0, done = 0, remote_running = 0;
  int workers = dist::size() - 1;  // ranks that have not left yet
  bool stopping = false;
  auto record = [&](const RunEnded& e, int rank) {
    ++done;
    if (rank > 0) --remote_running;
    const SweepPoint& point = points[e.point];
    const fs::path run = out / point.name;
    const std::string where = rank > 0 ? " on rank " + std::to_string(rank) : "";
    if (e.ending == Ending::finished) {
      ++report.n_ran;
      if (!options.quiet)
        std::fprintf(stderr, "sweep: [%zu/%zu] done %s%s in %.1f s: %s\n", done, pending.size(), point.name.c_str(),
                     where.c_str(), e.seconds, e.detail.c_str());
    } else if (e.ending == Ending::stopped) {
      report.interrupted = true;
      if (!options.quiet)
        std::fprintf(stderr, "sweep: stopped %s%s: %s\n", point.name.c_str(), where.c_str(), e.detail.c_str());
    } else {
      report.failures.push_back({point.name, e.detail});
      write_file_atomically(run / kFailedFile, e.detail + "\n");
      if (!options.quiet)
        std::fprintf(stderr, "sweep: [%zu/%zu] FAILED %s%s (%s; log %s)\n", done, pending.size(), point.name.c_str(),
                     where.c_str(), e.detail.c_str(), (run / "train.log").c_str());
    }
  };
  auto announce = [&](size_t i, int rank) {
    if (options.quiet) return;
    const std::string where = rank > 0 ? " on rank " + std::to_string(rank) : "";
    if (resume_step[i] > 0)
      std::fprintf(stderr, "sweep: resumed %s%s from step %lld\n", points[i].name.c_str(), where.c_str(),
                   static_cast<long long>(resume_step[i]));
    else
      std::fprintf(stderr, "sweep: started %s%s\n", points[i].name.c_str(), where.c_str());
  };

  while (next < pending.size() || runs.size() > 0 || workers > 0) {
    if (stop_signal() && !stopping) {
      stopping = true;
      report.interrupted = true;
      if (!options.quiet)
        std::fprintf(stderr, "sweep: signal %d: stopping %zu running run%s (they checkpoint); %zu not started\n",
                     stop_signal(), runs.size() + remote_running, runs.size() + remote_running == 1 ? "" : "s",
                     pending.size() - next);
      runs.stop_all();
      next = pending.size();
    }
    while (!stopping && next < pending.size() && static_cast<int>(runs.size()) < options.jobs) {
      const size_t i = pending[next++];
      runs.start(i);
      announce(i, 0);
    }
    bool busy = false;
    for (const RunEnded& e : runs.reap()) {
      record(e, 0);
      busy = true;
    }
    for (dist::TextMessage m = dist::poll_text(kToCoordinator); m.from >= 0; m = dist::poll_text(kToCoordinator)) {
      busy = true;
      if (m.text == "want") {
        if (stopping || next >= pending.size()) {
          dist::send_text(m.from, kToWorker, "none");
        } else {
          const size_t i = pending[next++];
          ++remote_running;
          dist::send_text(m.from, kToWorker, std::to_string(i));
          announce(i, m.from);
        }
      } else if (m.text == "leaving") {
        --workers;
      } else {
        record(decode_ended(m.text), m.from);
      }
    }
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(stopping || runs.size() > 0 ? 50 : 5));
  }
  return report;
}

}  // namespace headlab
