// cmake --install of this build into a temporary prefix, then the installed binary used the way a
// user would: from another folder, on the shipped default config, with HOME and the cache folder
// redirected so that every file it writes can be accounted for.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/scratch.h"
#include "support/skip.h"

using Catch::Matchers::Contains;
using namespace headlab;
namespace fs = std::filesystem;

namespace {

// Every file and folder under `root`, as paths relative to it.
std::set<std::string> tree(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    out.insert(fs::relative(entry.path(), root).string());
  return out;
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) out.insert(entry.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE(
    "an installed headlab trains, plots and evaluates from its shipped config, writing only its run folder "
    "and the user cache",
    "[install]") {
  test::ScratchDir s("install");
  const fs::path prefix = s.dir / "prefix", work = s.dir / "work", home = s.dir / "home", cache = s.dir / "cache";
  fs::create_directories(work);
  fs::create_directories(home);
  const auto install = test::run_program(HEADLAB_CMAKE, {"--install", HEADLAB_BUILD_DIR, "--prefix", prefix.string()},
                                         s.dir / "install.log");
  INFO(install.output);
  REQUIRE(install.code == 0);

  const fs::path share = prefix / "share" / "headlab", headlab = prefix / "bin" / "headlab";
  CHECK(fs::is_regular_file(share / "plot" / "headlab_plot.py"));
  CHECK(fs::is_regular_file(share / "plot" / "plot_common.py"));  // and the modules it imports
  CHECK(fs::is_regular_file(prefix / "share" / "doc" / "headlab" / "README.md"));
  CHECK(fs::is_regular_file(prefix / "share" / "doc" / "headlab" / "docs" / "config.md"));
  const std::set<std::string> installed = tree(prefix);

  // HOME and the cache are folders of the test, so a stray write shows up below. matplotlib
  // keeps its config and font cache in MPLCONFIGDIR, which is pointed into the cache too.
  const std::map<std::string, std::string> env = {{"HOME", home.string()},
                                                  {"XDG_CACHE_HOME", cache.string()},
                                                  {"MPLCONFIGDIR", (cache / "matplotlib").string()},
                                                  {"OMP_NUM_THREADS", "1"}};
  auto headlab_in_work = [&](const std::vector<std::string>& args, const std::string& log_name) {
    const auto r = test::run_program(headlab.string(), args, s.dir / log_name, env, work);
    INFO("headlab " << args.front() << " printed:\n" << r.output);
    REQUIRE(r.code == 0);
    return r.output;
  };

  // Every shipped config loads from the share folder (none refers to a file beside it).
  int n_configs = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(HEADLAB_SOURCE_DIR) / "configs")) {
    const fs::path config = share / "configs" / entry.path().filename();
    INFO(config.string());
    REQUIRE(fs::is_regular_file(config));
    headlab_in_work({"info", config.string()}, "info.log");
    ++n_configs;
  }
  CHECK(n_configs >= 2);
  const std::string info = headlab_in_work({"info"}, "info.log");
  CHECK_THAT(info,
             Contains("shared files " + share.string()) && Contains("user cache   " + (cache / "headlab").string()));

  // The default config as shipped (the Bible), with a model small enough to train in a moment.
  headlab_in_work({"train", (share / "configs" / "default.toml").string(),
                   "--set", "model.d_model=16",
                   "--set", "model.n_heads=2",
                   "--set", "model.n_layers=1",
                   "--set", "model.max_seq_len=16",
                   "--set", "data.seq_len=16",
                   "--set", "train.steps=3",
                   "--set", "train.warmup_steps=1",
                   "--set", "train.batch_size=4",
                   "--set", "train.eval_every=3",
                   "--set", "train.eval_batches=2",
                   "--set", "train.log_every=1",
                   "--set", "train.checkpoint_every=3"},
                  "train.log");
  const fs::path run = work / "runs" / "default";
  REQUIRE(fs::is_regular_file(run / "checkpoints" / "best.h5"));

  const auto matplotlib = test::run_program("/usr/bin/python3", {"-c", "import matplotlib"}, s.dir / "python.log");
  if (matplotlib.code == 0) {
    CHECK_THAT(headlab_in_work({"plot", "runs/default"}, "plot.log"), Contains("runs/default/plots/loss.png"));
    CHECK(fs::is_regular_file(run / "plots" / "loss.png"));
  } else {
    SKIP_FOR_MISSING_PACKAGE(
        "matplotlib is not importable by /usr/bin/python3 (apt-get install python3-matplotlib): plot not tested");
  }
  CHECK_THAT(
      headlab_in_work({"eval", "runs/default/checkpoints/best.h5", "--split", "test", "--batches", "8"}, "eval.log"),
      Contains("bits_per_byte"));
  // The report's page is compiled in: no shared file needed, written inside the run folder.
  CHECK_THAT(headlab_in_work({"report", "runs/default", "--prompt", "And God"}, "report.log"),
             Contains("wrote runs/default/report.html"));
  CHECK_THAT(test::read_file(run / "report.html"),
             Contains("function createViewer") && Contains("{\"name\":\"prompt\""));

  // Nothing written outside the run folder and the user cache.
  CHECK(names_in(work) == std::set<std::string>{"runs"});
  CHECK(names_in(work / "runs") == std::set<std::string>{"default"});
  CHECK(fs::is_empty(home));
  CHECK(names_in(cache / "headlab") == std::set<std::string>{"bible-kjv.txt"});
  for (const std::string& name : names_in(cache)) CHECK((name == "headlab" || name == "matplotlib"));
  CHECK(tree(prefix) == installed);

  // A moved prefix still works: the binary finds its files relative to itself.
  const fs::path moved = s.dir / "moved";
  fs::rename(prefix, moved);
  const auto moved_info = test::run_program((moved / "bin" / "headlab").string(), {"info"}, s.dir / "moved.log", env);
  CHECK(moved_info.code == 0);
  CHECK_THAT(moved_info.output, Contains("shared files " + (moved / "share" / "headlab").string()));
}
