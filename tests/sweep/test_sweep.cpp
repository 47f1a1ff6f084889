// The sweep file, grid expansion, run folder names and run state (src/sweep/sweep.cpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/train/run_folder.h"
#include "headlab/nn/model.h"
#include "headlab/sweep/sweep.h"
#include "headlab/train/setup.h"
#include "sweep/sweep_scratch.h"

using namespace headlab;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;
using test::CommandResult;
using test::lines_of;
using test::run_headlab;
using Scratch = test::SweepScratch;

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
