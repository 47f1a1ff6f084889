#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/scratch.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;
using namespace headlab;

namespace {

// A scratch copy of the fixtures (tests/fixtures/README.md): plots are written into the folder.
struct Scratch : test::ScratchDir {
  Scratch() : test::ScratchDir("plot") {
    fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures", dir, fs::copy_options::recursive);
  }
};

using test::CommandResult;
using test::read_file;

// `headlab plot ARGS...` with `env` added to the environment.
CommandResult run_plot(std::vector<std::string> args, const fs::path& log,
                       const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), "plot");
  return test::run_headlab(args, log, env);
}

uint32_t big_endian_u32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// A complete PNG: the signature, an IHDR chunk first with a positive size, an IEND chunk last.
void check_png(const fs::path& path) {
  INFO(path.string());
  REQUIRE(fs::exists(path));
  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() > 1000);
  CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(bytes.substr(12, 4) == "IHDR");
  CHECK(big_endian_u32(bytes, 16) > 100);  // width
  CHECK(big_endian_u32(bytes, 20) > 100);  // height
  CHECK(bytes.substr(bytes.size() - 8, 4) == "IEND");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("plotting the fixture run writes its loss, metric and per-head PNGs", "[plot]") {
  Scratch s;
  const fs::path run = s.dir / "run_small";
  const auto r = run_plot({run.string()}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* name : {"loss.png", "val_accuracy.png", "val_bpb.png", "heads_importance.png",
                           "heads_attn_entropy.png"})
    check_png(run / "plots" / name);
  CHECK_THAT(r.output, Contains("run_small/plots/loss.png"));  // the written files are listed
}

TEST_CASE("plotting the fixture sweep writes overlaid curves, final metrics with error bars and heatmaps",
          "[plot]") {
  Scratch s;
  const fs::path sweep = s.dir / "sweep_small";
  const auto r = run_plot({sweep.string(), "--x-axis", "step"}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* name : {"loss.png", "val_accuracy.png", "val_bpb.png", "final_val_loss.png",
                           "final_val_accuracy.png", "final_val_bpb.png",
                           "model.n_heads=4,train.seed=0/heads_importance.png"})
    check_png(sweep / "plots" / name);
  CHECK(fs::exists(sweep / "results.csv"));  // plot aggregates first
  CHECK(fs::exists(sweep / "summary.md"));
}

TEST_CASE("plot errors are one line and exit code 2", "[plot]") {
  Scratch s;
  const fs::path log = s.dir / "log.txt";
  auto one_line_error = [&](const std::vector<std::string>& args, const std::string& expected,
                            const std::map<std::string, std::string>& env = {}) {
    const auto r = run_plot(args, log, env);
    INFO(r.output);
    CHECK(r.code == 2);
    const std::vector<std::string> lines = lines_of(r.output);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], StartsWith("headlab plot: error: ") && Contains(expected));
  };
  one_line_error({(s.dir / "missing").string()}, "no such folder: ");
  fs::create_directories(s.dir / "empty");
  one_line_error({(s.dir / "empty").string()}, "is empty: nothing to plot");
  one_line_error({s.dir.string()}, "holds neither metrics.csv (a run folder) nor grid.csv (a sweep folder)");

  const fs::path header_only = s.dir / "header_only";
  fs::create_directories(header_only);
  std::ofstream(header_only / "metrics.csv")
      << "step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,grad_norm,tokens_per_s,elapsed_s\n";
  one_line_error({header_only.string()}, "has no rows yet: nothing to plot");

  const fs::path unstarted = s.dir / "sweep_small";
  for (const auto& entry : fs::directory_iterator(unstarted))
    if (entry.is_directory()) fs::remove(entry.path() / "metrics.csv");
  one_line_error({unstarted.string()}, "has metrics yet: nothing to plot");

  // A Python without matplotlib: -S leaves out site-packages and dist-packages.
  const fs::path bare_python = s.dir / "bare_python";
  std::ofstream(bare_python) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  fs::permissions(bare_python, fs::perms::owner_all);
  one_line_error({(s.dir / "run_small").string()}, "apt-get install python3-matplotlib",
                 {{"HEADLAB_PYTHON", bare_python.string()}});
}
