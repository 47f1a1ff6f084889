// Sweeps: a base config, fixed overrides and a grid of values per dotted key (docs/sweeps.md).
// Every grid point becomes an ordinary run folder DIR/<point name> trained by `headlab train`
// in a child process; DIR/grid.csv lists the points, DIR/results.csv and DIR/summary.md hold the
// mean and sample std over seeds of each point's final metrics.
//   SweepSpec spec = load_sweep("experiments/head_count/sweep.toml");
//   std::vector<SweepPoint> points = expand_sweep(spec);   // validates every point, writes nothing
//   run_sweep(points, {.out_dir = "runs/sweep", .jobs = 2, .headlab_binary = "/path/to/headlab"});
//   aggregate_sweep("runs/sweep");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headlab/io/config.h"

namespace headlab {

// One swept key and its values, each as TOML text ("4", "\"induction\"", "[1, 3]"): a grid value
// reaches the config as the override "key=value", through the same parser as `--set`.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
  std::string origin;  // where the key was written: "grid.toml:9 [grid]"
};

struct SweepSpec {
  std::string path;                      // the sweep file
  std::string name;                      // `name = "..."` in the file, else the file's stem
  std::string base;                      // resolved path of the base config; "" = built-in defaults
  std::vector<std::string> set;          // "key=value" for every run, in file order
  std::vector<std::string> set_origins;  // where each was written: "grid.toml:5 [set]"
  std::vector<SweepAxis> grid;           // in file order; the first key varies slowest
};

struct SweepPoint {
  std::string name;                                         // folder name, e.g. "model.n_heads=4,train.seed=1"
  std::vector<std::pair<std::string, std::string>> values;  // grid key -> config_value(config, key)
  std::vector<std::string> overrides;                       // set, then this point's grid values
  std::vector<std::string> override_origins;                // where each was written, for errors
  Config config;                                            // resolved and validated
  int64_t n_params = 0;
};

// train.seed and data.seed: aggregation averages over them.
bool is_seed_key(const std::string& key);

// Parses a sweep file; throws a one-line headlab::Error on a malformed one. `base` is looked up
// next to the sweep file first, then in the working directory.
SweepSpec load_sweep(const std::string& path);
SweepSpec parse_sweep_text(const std::string& toml_text, const std::string& path);

// The cartesian product of the grid, in order (the last key varies fastest). Resolves every point
// (base + set + grid values), validates it and builds its model spec and dataset; the first invalid
// point is one error line "grid point <key=value,...>: <why>" (plus how many are invalid).
std::vector<SweepPoint> expand_sweep(const SweepSpec& spec);

// "model.n_heads=4,train.seed=1" from grid values as config_value prints them; characters that do
// not belong in a file name become '_' ("data.offsets=[1, 3]" -> "data.offsets=1_3").
std::string run_folder_name(const std::vector<std::pair<std::string, std::string>>& values);

// What re-running a point does: finished = a checkpoint at train.steps exists (skipped),
// resume = an earlier checkpoint exists (--resume auto), fresh = nothing to continue from.
enum class RunState { fresh, resume, finished };
struct RunStatus {
  RunState state = RunState::fresh;
  int64_t step = 0;        // newest checkpoint's step
  std::string checkpoint;  // and its path
};
RunStatus run_status(const std::string& run_dir, const Config& config);

struct SweepOptions {
  std::string out_dir;         // DIR
  int jobs = 1;                // runs at once
  int cores = 0;               // cores to split between jobs; 0 = num_threads()
  std::string headlab_binary;  // the executable that runs `train CONFIG --out RUN --resume auto`
  bool quiet = false;          // no progress lines on stderr
  std::string name;            // the sweep's name (SweepSpec::name), recorded in DIR/sweep_name.txt; "" = none
};

struct SweepFailure {
  std::string run;     // folder name
  std::string reason;  // exit status and the last line of RUN/train.log
};

struct SweepReport {
  int n_skipped = 0;  // already finished
  int n_ran = 0;      // started or resumed, and finished now
  std::vector<SweepFailure> failures;
  bool interrupted = false;  // SIGINT/SIGTERM: the runs got SIGTERM and checkpointed
};

// Writes DIR/grid.csv and each unfinished run's RUN/config.toml (train.threads = max(1, cores /
// jobs) unless the sweep sets it), then runs the unfinished points, `jobs` at a time, each with
// stdout and stderr appended to RUN/train.log. A failing run does not stop the others; a run
// folder whose checkpoints hold another model (or are unreadable) fails without being touched.
SweepReport run_sweep(const std::vector<SweepPoint>& points, const SweepOptions& options);

// The manifest DIR/grid.csv: run,<grid keys...>,params,steps; one row per point.
void write_grid_csv(const std::string& out_dir, const std::vector<SweepPoint>& points);

// DIR/sweep_name.txt: the sweep's name (the sweep file's `name`, else its stem) on one line,
// written by run_sweep next to grid.csv; summary.md and headlab plot's titles name the sweep by it.
inline constexpr const char* kSweepNameFile = "sweep_name.txt";

// RUN/failed.txt: why a run's last attempt failed (one line), written by run_sweep and removed
// when the run starts again; aggregation reports it in results.csv and summary.md.
inline constexpr const char* kFailedFile = "failed.txt";

// ---- aggregation (src/sweep/aggregate.cpp) ----

// What one run's metrics.csv says at its end.
struct RunMetrics {
  int64_t last_step = 0;           // step of the last row (0 = no rows)
  std::optional<double> val_loss;  // from the last row with a val_loss
  std::optional<double> val_accuracy;
  std::optional<double> val_bpb;
  std::optional<double> val_bleu;      // translation: greedy BLEU of the last evaluation (older files: none)
  std::optional<double> tokens_per_s;  // mean over the rows after the first (the only row if one)
};
// Throws if the file is missing or not a headlab metrics file.
RunMetrics read_run_metrics(const std::string& metrics_csv);

// Mean and sample standard deviation (n - 1); std is empty for fewer than two values.
struct MeanStd {
  int n = 0;
  std::optional<double> mean, std;
};
MeanStd mean_std(const std::vector<double>& values);

// The name DIR/sweep_name.txt records (its first line, trimmed), else DIR's own folder name.
std::string sweep_name(const std::string& sweep_dir);

// Reads DIR/grid.csv and every run's metrics.csv; writes DIR/results.csv (one row per grid point
// without the seed keys, in grid order; n_failed and failures name the runs whose last attempt
// failed, with why) and DIR/summary.md. Only runs whose metrics reach train.steps count;
// unfinished ones are listed in the summary, failed ones with why. Throws if DIR has no grid.csv.
void aggregate_sweep(const std::string& sweep_dir);

}  // namespace headlab
