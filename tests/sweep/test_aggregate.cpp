// Aggregating a sweep: run metrics, means and sample stds, results.csv and summary.md
// (src/sweep/aggregate.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/sweep/sweep.h"
#include "sweep/sweep_scratch.h"

using namespace headlab;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;
using test::read_file;
using test::read_results;
using Scratch = test::SweepScratch;

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

  // A translation run's file has val_bleu (greedy BLEU at each evaluation); older files have none.
  CHECK_FALSE(m.val_bleu.has_value());
  const fs::path translation =
      s.write("translation.csv",
              "step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,val_bleu,grad_norm,tokens_per_s,elapsed_s\n"
              "2,20,0.1,4,3.5,,,7.25,1,300.0,0.2\n"
              "4,40,0.1,3,3.1,,,9.5,1,300.0,0.4\n");
  CHECK(*read_run_metrics(translation.string()).val_bleu == Approx(9.5));

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

  CHECK(rows[0].at("val_bleu_mean").empty());  // not translation: no BLEU column, and none in summary.md
  CHECK_THAT(summary, !Contains("val BLEU"));

  CHECK_THROWS_WITH(aggregate_sweep(s.dir.string()), Contains("not a sweep folder (no grid.csv"));
}

TEST_CASE("a translation sweep's val_bleu is averaged over seeds like the loss", "[sweep]") {
  Scratch s;
  const fs::path sweep = s.dir / "sweep_small";
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/sweep_small", sweep, fs::copy_options::recursive);
  // The fixture's runs with a val_bleu column: 10 x val_loss on every row with a val_loss.
  for (const auto& entry : fs::directory_iterator(sweep)) {
    if (!entry.is_directory()) continue;
    std::istringstream in(read_file(entry.path() / "metrics.csv"));
    std::string line, out;
    for (bool header = true; std::getline(in, line); header = false) {
      std::vector<std::string> f;
      std::stringstream fields(line);
      for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
      if (f.size() < 7) f.resize(7);
      const std::string bleu = header ? "val_bleu" : f[4].empty() ? "" : std::to_string(10 * std::stod(f[4]));
      f.insert(f.begin() + 7, bleu);
      for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
      out += "\n";
    }
    s.write(fs::relative(entry.path() / "metrics.csv", s.dir).string(), out);
  }
  aggregate_sweep(sweep.string());
  const auto rows = read_results(sweep / "results.csv");
  CHECK(std::stod(rows[0].at("val_bleu_mean")) == Approx(21.0));  // 10 x the loss mean 2.1
  CHECK(std::stod(rows[0].at("val_bleu_std")) == Approx(1.41421).epsilon(1e-5));
  CHECK(rows[1].at("val_bleu_std").empty());  // one finished seed
  CHECK_THAT(read_file(sweep / "summary.md"), Contains("val BLEU (greedy)"));
  CHECK_THAT(read_file(sweep / "summary.md"), Contains("| 21.00 ± 1.41 |"));
}

TEST_CASE("summary.md is headed by the sweep's name, which sweep_name.txt records, else the folder's", "[sweep]") {
  Scratch s;
  const fs::path sweep = s.dir / "sweep_small";
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/sweep_small", sweep, fs::copy_options::recursive);
  CHECK(sweep_name(sweep.string()) == "sweep_small");
  CHECK(sweep_name(sweep.string() + "/") == "sweep_small");
  aggregate_sweep(sweep.string() + "/");
  CHECK_THAT(read_file(sweep / "summary.md"), StartsWith("# Sweep sweep_small\n\n"));
  s.write("sweep_small/sweep_name.txt", "head_count \r\nignored\n");
  CHECK(sweep_name(sweep.string()) == "head_count");
  aggregate_sweep(sweep.string());
  CHECK_THAT(read_file(sweep / "summary.md"), StartsWith("# Sweep head_count\n\n"));
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
  for (const std::string step : {"1e308", "inf", "-1", "nan"}) {
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
