// headlab train's own options (src/cli/train.cpp): --teacher is --set train.teacher, and a teacher
// that cannot be loaded stops the run before its folder exists.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "headlab/io/config.h"
#include "headlab/nn/model.h"
#include "headlab/train/checkpointing.h"
#include "support/scratch.h"
#include "cli/cli_scratch.h"

using namespace headlab;
using test::count_lines;
using test::run_headlab;
namespace fs = std::filesystem;

namespace {

// Every parameter of a checkpoint's model, in order.
std::vector<float> parameters_of(const fs::path& checkpoint) {
  Model<float> model(model_spec(checkpoint_config(checkpoint.string())));
  load_training_checkpoint(checkpoint.string(), model, nullptr);
  std::vector<float> all;
  for (int i = 0; i < model.params().size(); ++i) {
    const Tensor<float> t = model.params().value(i);
    all.insert(all.end(), t.data(), t.data() + t.numel());
  }
  return all;
}

}  // namespace

TEST_CASE("train --teacher distils as --set train.teacher does; two teachers or a bad one are one error line",
          "[cli][distill]") {
  test::CliScratch s;
  const auto teach = run_headlab({"train", s.config.string(), "--out", (s.dir / "teacher").string()}, s.dir / "t.log");
  INFO(teach.output);
  REQUIRE(teach.code == 0);
  const fs::path teacher = s.dir / "teacher" / "checkpoints" / "step_00000004.h5";
  const fs::path last = fs::path("checkpoints") / "step_00000004.h5";

  const auto flag =
      run_headlab({"train", s.config.string(), "--teacher", teacher.string(), "--out", (s.dir / "flag").string()},
                  s.dir / "flag.log");
  const auto set = run_headlab(
      {"train", s.config.string(), "--set", "train.teacher=" + teacher.string(), "--out", (s.dir / "set").string()},
      s.dir / "set.log");
  INFO(flag.output << set.output);
  REQUIRE(flag.code == 0);
  REQUIRE(set.code == 0);
  CHECK(checkpoint_config((s.dir / "flag" / last).string()).train.teacher == teacher.string());
  // The student starts where the teacher did (the same config and seed) and sees the same
  // batches: only the soft targets can take it elsewhere, and both spellings take it to the same
  // place, bit for bit.
  const std::vector<float> distilled = parameters_of(s.dir / "flag" / last);
  CHECK(distilled == parameters_of(s.dir / "set" / last));
  CHECK(distilled != parameters_of(teacher));

  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const fs::path corrupt = s.write("corrupt.h5", "this is not an HDF5 file");
  const std::vector<Case> cases = {
      {{"--teacher", teacher.string(), "--set", "train.teacher=" + teacher.string()}, "give one of them"},
      {{"--teacher", (s.dir / "missing.h5").string()}, "missing.h5"},
      {{"--teacher", corrupt.string()}, "corrupt.h5"},
  };
  const fs::path out = s.dir / "refused";
  for (const Case& c : cases) {
    std::vector<std::string> args = {"train", s.config.string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--out", out.string()});
    const auto r = run_headlab(args, s.dir / "refused.log");
    INFO(c.expected << ": " << r.output);
    CHECK(r.code == 2);
    // the error in one line, after at most the "training CONFIG -> DIR" line
    CHECK(count_lines(r.output) <= 2);
    CHECK(r.output.find("error: ") == r.output.rfind("error: "));
    CHECK_THAT(r.output, Catch::Contains(c.expected));
    CHECK_FALSE(fs::exists(out));  // refused before the run folder was made
  }
}
