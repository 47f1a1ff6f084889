#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"
#include "headlab/nn/model.h"
#include "headlab/sweep/sweep.h"
#include "headlab/train/setup.h"
#include "support/run_files.h"
#include "support/scratch.h"

using namespace headlab;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;

namespace {

// A scratch folder with a small, learnable corpus and a tiny base config that trains in a blink.
struct Scratch : test::ScratchDir {
  Scratch() : test::ScratchDir("sweep") {
    write_corpus("corpus.txt", 400);
    write("base.toml",
          "[model]\nd_model = 16\nn_layers = 1\nmax_seq_len = 16\n"
          "[data]\npath = \"" +
              (dir / "corpus.txt").string() +
              "\"\nseq_len = 16\n"
              "[train]\nbatch_size = 4\nsteps = 6\nwarmup_steps = 1\nlr = 3e-3\neval_every = 3\n"
              "eval_batches = 1\nlog_every = 1\ncheckpoint_every = 3\nkeep_checkpoints = 0\n");
  }
};

using test::CommandResult;
using test::metrics_without_timing;
using test::read_file;
using test::run_headlab;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// results.csv rows as column -> value.
std::vector<std::map<std::string, std::string>> read_results(const fs::path& path) {
  const CsvTable table = read_csv(path);
  REQUIRE(!table.header.empty());
  std::vector<std::map<std::string, std::string>> rows;
  for (const std::vector<std::string>& fields : table.rows) {
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < fields.size(); ++c) row[table.header[c]] = fields[c];
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("a sweep's grid expands to the cartesian product in file order, the last key fastest", "[sweep]") {
  Scratch s;
  const fs::path file = s.write("heads.toml",
                                "base = \"base.toml\"\n[set]\n\"train.steps\" = 4\n"
                                "[grid]\n\"model.n_heads\" = [1, 2, 4]\ntrain.seed = [0, 1]\n");
  const SweepSpec spec = load_sweep(file.string());
  CHECK(spec.name == "heads");
  CHECK(spec.base == (s.dir / "base.toml").string());
  CHECK(spec.set == std::vector<std::string>{"train.steps=4"});
  REQUIRE(spec.grid.size() == 2);
  CHECK(spec.grid[0].key == "model.n_heads");
  CHECK(spec.grid[0].values == std::vector<std::string>{"1", "2", "4"});

  const std::vector<SweepPoint> points = expand_sweep(spec);
  std::vector<std::string> names;
  for (const SweepPoint& p : points) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"model.n_heads=1,train.seed=0", "model.n_heads=1,train.seed=1",
                                          "model.n_heads=2,train.seed=0", "model.n_heads=2,train.seed=1",
                                          "model.n_heads=4,train.seed=0", "model.n_heads=4,train.seed=1"});
  CHECK(points[3].config.model.n_heads == 2);
  CHECK(points[3].config.train.seed == 1);
  CHECK(points[3].config.train.steps == 4);     // [set]
  CHECK(points[3].config.model.d_model == 16);  // base
  CHECK(points[3].overrides == std::vector<std::string>{"train.steps=4", "model.n_heads=2", "train.seed=1"});
  // At fixed d_model the head count does not change the parameter count; it is the model's own.
  CHECK(points[0].n_params == points[5].n_params);
  CHECK(points[0].n_params == Model<float>(model_spec(points[0].config)).params().count());
}

TEST_CASE("grid keys may be quoted, dotted or in sub-tables, and keep their order in the file", "[sweep]") {
  Scratch s;
  const SweepSpec spec = parse_sweep_text(
      "base = \"base.toml\"\n"
      "[grid]\n"
      "data.offsets = [[1, 3], [2]]\n"
      "\"model.positions\" = [\"learned\", \"sinusoidal\"]\n"
      "[grid.train]\n"
      "lr = [1e-3]\n",
      (s.dir / "mixed.toml").string());
  const std::vector<SweepPoint> points = expand_sweep(spec);
  REQUIRE(points.size() == 4);
  CHECK(points[0].name == "data.offsets=1_3,model.positions=learned,train.lr=0.001");
  CHECK(points[3].name == "data.offsets=2,model.positions=sinusoidal,train.lr=0.001");
  CHECK(points[3].config.data.offsets == IntList{2});
  CHECK(points[3].config.model.positions == "sinusoidal");
}

TEST_CASE("run folder names keep only characters that are safe in file names", "[sweep]") {
  CHECK(run_folder_name({{"model.n_heads", "4"}, {"train.seed", "1"}}) == "model.n_heads=4,train.seed=1");
  CHECK(run_folder_name({{"data.offsets", "[1, 3]"}, {"train.lr", "3e-4"}}) == "data.offsets=1_3,train.lr=3e-4");
  CHECK(run_folder_name({{"data.path", "a b/c.txt"}}) == "data.path=a_b_c.txt");
}

TEST_CASE("an invalid grid point is reported before anything runs, naming the point", "[sweep]") {
  Scratch s;
  const fs::path file = s.write("bad.toml", "base = \"base.toml\"\n[grid]\n\"model.n_heads\" = [2, 3, 5]\n");
  REQUIRE_THROWS_WITH(expand_sweep(load_sweep(file.string())), StartsWith("grid point model.n_heads=3: ") &&
                                                                   Contains("not divisible") &&
                                                                   Contains("(2 of 3 grid points are invalid)"));

  const fs::path out = s.dir / "out";
  const CommandResult r = run_headlab({"sweep", file.string(), "--out", out.string()}, s.dir / "log.txt");
  CHECK(r.code == 2);
  const std::vector<std::string> lines = lines_of(r.output);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], StartsWith("headlab sweep: error: grid point model.n_heads=3: "));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("a bad key or value in [set] or [grid] is named by the file, line and section it was written at", "[sweep]") {
  Scratch s;
  const fs::path set_key = s.write("set_key.toml",
                                   "base = \"base.toml\"\n[set]\n\"model.n_head\" = 4\n"
                                   "[grid]\n\"train.seed\" = [0]\n");
  REQUIRE_THROWS_WITH(expand_sweep(load_sweep(set_key.string())),
                      Contains("unknown key 'model.n_head' in " + set_key.string() +
                               ":3 [set]; did you mean "
                               "'model.n_heads'?") &&
                          !Contains("--set"));
  const fs::path set_value = s.write("set_value.toml",
                                     "base = \"base.toml\"\n[set]\n\"model.n_heads\" = \"x\"\n"
                                     "[grid]\n\"train.seed\" = [0]\n");
  REQUIRE_THROWS_WITH(expand_sweep(load_sweep(set_value.string())), Contains("model.n_heads must be an integer") &&
                                                                        Contains(set_value.string() + ":3 [set]") &&
                                                                        !Contains("--set"));
  const fs::path grid_value = s.write("grid_value.toml", "base = \"base.toml\"\n[grid]\n\"train.steps\" = [2, -1]\n");
  REQUIRE_THROWS_WITH(expand_sweep(load_sweep(grid_value.string())),
                      Contains("train.steps must be") && Contains(grid_value.string() + ":3 [grid] train.steps=-1") &&
                          !Contains("--set"));
}

TEST_CASE("a malformed sweep file is one error line naming the file and the problem", "[sweep]") {
  Scratch s;
  const std::string path = (s.dir / "x.toml").string();
  auto parse = [&](const std::string& text) { return parse_sweep_text(text, path); };
  CHECK_THROWS_WITH(parse("base = \"base.toml\"\n"), Contains("[grid] is empty"));
  CHECK_THROWS_WITH(parse("[grid]\n\"model.n_heads\" = 4\n"),
                    Contains("x.toml:2: grid key 'model.n_heads' must be a non-empty list"));
  CHECK_THROWS_WITH(parse("[grid]\n\"model.n_heads\" = []\n"), Contains("must be a non-empty list"));
  CHECK_THROWS_WITH(parse("[set]\n\"model.n_heads\" = 4\n[grid]\n\"model.n_heads\" = [1]\n"),
                    Contains("'model.n_heads' is in both [set] and [grid]"));
  CHECK_THROWS_WITH(parse("steps = 3\n[grid]\n\"model.n_heads\" = [1]\n"), Contains("x.toml:1: unknown key 'steps'"));
  CHECK_THROWS_WITH(parse("base = \"missing.toml\"\n[grid]\n\"model.n_heads\" = [1]\n"),
                    Contains("base config 'missing.toml' not found"));
  CHECK_THROWS_WITH(parse("[grid\n"), StartsWith("TOML syntax error in sweep file " + path + ":1"));
  CHECK_THROWS_WITH(load_sweep((s.dir / "none.toml").string()), Contains("cannot read sweep file"));
}

TEST_CASE("mean_std gives the mean and the sample standard deviation (n - 1)", "[sweep]") {
  const MeanStd four = mean_std({1, 2, 3, 4});  // squares about 2.5: 2.25 + 0.25 + 0.25 + 2.25 = 5; 5 / 3
  CHECK(four.n == 4);
  CHECK(*four.mean == Approx(2.5));
  CHECK(*four.std == Approx(std::sqrt(5.0 / 3.0)));
  const MeanStd one = mean_std({7});
  CHECK(*one.mean == 7);
  CHECK_FALSE(one.std.has_value());
  CHECK_FALSE(mean_std({}).mean.has_value());
}

TEST_CASE("a run's final metrics come from its last row with a validation value", "[sweep]") {
  Scratch s;
  const fs::path path =
      s.write("metrics.csv",
              "step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,grad_norm,tokens_per_s,elapsed_s\n"
              "1,10,0.1,5,,,,1,10.0,0.1\n"
              "2,20,0.1,4,3.5,,5.05,1,300.0,0.2\n"
              "3,30,0.1,3,,,,1,500.0,0.3\n");
  const RunMetrics m = read_run_metrics(path.string());
  CHECK(m.last_step == 3);
  CHECK(*m.val_loss == Approx(3.5));
  CHECK_FALSE(m.val_accuracy.has_value());  // text has no accuracy
  CHECK(*m.val_bpb == Approx(5.05));
  CHECK(*m.tokens_per_s == Approx(400.0));  // (300 + 500) / 2: the first row is start-up

  s.write("other.csv", "a,b\n1,2\n");
  CHECK_THROWS_WITH(read_run_metrics((s.dir / "other.csv").string()), Contains("not a headlab metrics file"));
}

TEST_CASE("aggregating the fixture sweep gives the means and sample stds worked out by hand", "[sweep]") {
  Scratch s;
  const fs::path sweep = s.dir / "sweep_small";
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/sweep_small", sweep, fs::copy_options::recursive);
  aggregate_sweep(sweep.string());
  // The numbers and how they were worked out: tests/fixtures/README.md.
  const auto rows = read_results(sweep / "results.csv");
  REQUIRE(rows.size() == 3);
  CHECK_FALSE(rows[0].count("train.seed"));  // averaged over
  CHECK(rows[0].at("model.n_heads") == "1");
  CHECK(rows[0].at("n_seeds") == "2");
  CHECK(rows[0].at("params") == "30176");
  CHECK(std::stod(rows[0].at("val_loss_mean")) == Approx(2.1));
  CHECK(std::stod(rows[0].at("val_loss_std")) == Approx(0.141421).epsilon(1e-5));
  CHECK(std::stod(rows[0].at("val_accuracy_mean")) == Approx(0.45));
  CHECK(std::stod(rows[0].at("val_accuracy_std")) == Approx(0.0707107).epsilon(1e-5));
  CHECK(std::stod(rows[0].at("val_bpb_mean")) == Approx(3.2));
  CHECK(std::stod(rows[0].at("val_bpb_std")) == Approx(0.282843).epsilon(1e-5));
  CHECK(std::stod(rows[0].at("tokens_per_s")) == Approx(1050));
  // n_heads = 2: seed 1 stopped at step 20, so one seed and no std.
  CHECK(rows[1].at("n_seeds") == "1");
  CHECK(rows[1].at("n_runs") == "2");
  CHECK(std::stod(rows[1].at("val_loss_mean")) == Approx(1.8));
  CHECK(rows[1].at("val_loss_std").empty());
  CHECK(std::stod(rows[2].at("val_loss_mean")) == Approx(1.65));
  CHECK(std::stod(rows[2].at("val_loss_std")) == Approx(0.0707107).epsilon(1e-5));
  CHECK(std::stod(rows[2].at("val_accuracy_std")) == Approx(0.0282843).epsilon(1e-5));
  CHECK(std::stod(rows[2].at("tokens_per_s")) == Approx(3500));

  const std::string summary = read_file(sweep / "summary.md");
  CHECK_THAT(summary, Contains("| 1 | 2/2 | 30,176 | 2.1000 ± 0.1414 | 0.4500 ± 0.0707 | 3.2000 ± 0.2828 | 1050 |"));
  CHECK_THAT(summary, Contains("| 2 | 1/2 | 30,176 | 1.8000 | 0.5500 | 2.6000 | 2000 |"));
  CHECK_THAT(summary, Contains("model.n_heads=2,train.seed=1 (at step 20 of 40)"));

  CHECK_THROWS_WITH(aggregate_sweep(s.dir.string()), Contains("not a sweep folder (no grid.csv"));
}

// Found by tests/fuzz/fuzz_run_folder: a 300-byte run name in grid.csv threw std::filesystem_error.
TEST_CASE("a grid.csv row whose run is not a folder name is one error line", "[sweep]") {
  for (const std::string& name : {std::string(300, 'x'), std::string(".."), std::string("a/b"), std::string()}) {
    test::ScratchDir s("sweep");
    s.write("grid.csv", "run,model.n_heads,params,steps\n" + name + ",1,10,6\n");
    REQUIRE_THROWS_MATCHES(aggregate_sweep(s.dir.string()), Error,
                           Catch::Matchers::Message((s.dir / "grid.csv").string() + ": row '" + name +
                                                    ",1,10,6' names run '" + name + "', not a folder name"));
  }
}

// Found by .ci/test-fuzz (fuzz_run_folder): a step of 1e308 was converted to int64_t (undefined).
TEST_CASE("a metrics.csv row whose step is not a count is one error line", "[sweep]") {
  for (const std::string& step : {"1e308", "inf", "-1", "nan"}) {
    test::ScratchDir s("sweep");
    const std::string row = step + ",64,0.001,4,2.5,,3.6,1,1000,0.5";
    const fs::path path = s.write("metrics.csv",
                                  "step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,grad_norm,"
                                  "tokens_per_s,elapsed_s\n" +
                                      row + "\n");
    REQUIRE_THROWS_MATCHES(read_run_metrics(path.string()), Error,
                           Catch::Matchers::Message(path.string() + ": row '" + row + "' has no step"));
  }
}

TEST_CASE("a run is finished at a checkpoint at train.steps, resumable from an earlier one, fresh without", "[sweep]") {
  Scratch s;
  Config c;
  c.train.steps = 10;
  const fs::path run = s.dir / "run";
  CHECK(run_status(run.string(), c).state == RunState::fresh);
  fs::create_directories(run / "checkpoints");
  std::ofstream(checkpoint_path(run.string(), 5)) << "x";  // only the names are looked at
  std::ofstream(run / "checkpoints" / "best.h5") << "x";
  const RunStatus resume = run_status(run.string(), c);
  CHECK(resume.state == RunState::resume);
  CHECK(resume.step == 5);
  std::ofstream(checkpoint_path(run.string(), 10)) << "x";
  CHECK(run_status(run.string(), c).state == RunState::finished);
}

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
  CHECK(fs::exists(out / "summary.md"));

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
// Waits until no process holds a run folder's lock (the runs of a killed sweep stop on SIGTERM).
void wait_until_unlocked(const fs::path& run) {
  for (int i = 0; i < 400; ++i) {
    try {
      const FileLock probe(run / ".lock", "probe");
      return;
    } catch (const Error&) {
      ::usleep(25000);
    }
  }
  FAIL("a run of the killed sweep still holds " << run.string() << " after 10 s");
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
