// Training an encoder_decoder on data.task = translate through the trainer: variable-shape
// batches, the source side, label smoothing and dropout all replay exactly on resume.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <string>

#include "headlab/train/run_folder.h"
#include "headlab/train/trainer.h"
#include "support/run_files.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
using test::checkpoint_tensors;
using test::metrics_without_timing;
namespace fs = std::filesystem;

namespace {

// Line-aligned "sentences": the target is the source's words in reverse order, upper-cased, so
// both the lengths and the content of pairs vary.
struct ParallelScratch : test::ScratchDir {
  fs::path source, target;
  ParallelScratch() : test::ScratchDir("translation_runs") {
    static const char* words[] = {"in", "the", "beginning", "was", "word", "and", "light", "god", "said"};
    std::mt19937_64 rng(3);
    std::string src, tgt;
    for (int i = 0; i < 300; ++i) {
      std::vector<std::string> line(2 + rng() % 5);
      for (std::string& w : line) w = words[rng() % std::size(words)];
      for (size_t w = 0; w < line.size(); ++w) src += (w ? " " : "") + line[w];
      for (size_t w = line.size(); w-- > 0;) {
        std::string upper = line[w];
        for (char& ch : upper) ch = static_cast<char>(ch - 'a' + 'A');
        tgt += upper + (w ? " " : "");
      }
      src += '\n';
      tgt += '\n';
    }
    source = write("source.txt", src);
    target = write("target.txt", tgt);
  }
};

RunOptions quiet_run(const fs::path& dir, const std::string& resume = "") {
  RunOptions o;
  o.out_dir = dir.string();
  o.resume = resume;
  o.quiet = true;
  return o;
}

}  // namespace

TEST_CASE("a translate run stopped and resumed ends bit-identical to a straight run", "[train][resume][translation]") {
  ParallelScratch s;
  Config c = test::tiny_translate_config(s.source, s.target);
  c.model.dropout = 0.1;
  c.train.label_smoothing = 0.1;
  c.train.grad_accum = 2;
  c.train.steps = 8;
  c.train.eval_every = c.train.checkpoint_every = 4;
  const RunResult straight = run_training(c, quiet_run(s.dir / "straight"));
  CHECK(straight.end == RunEnd::finished);

  RunOptions first = quiet_run(s.dir / "resumed");
  first.after_step = [](int64_t step, Model<float>&) { return step < 6; };
  CHECK(run_training(c, first).end == RunEnd::interrupted);
  CHECK(newest_checkpoint((s.dir / "resumed").string())->step == 4);
  CHECK(run_training(c, quiet_run(s.dir / "resumed", "auto")).end == RunEnd::finished);
  const auto straight_rows = metrics_without_timing(s.dir / "straight");
  CHECK(straight_rows.size() == 9);  // header + 8 steps
  CHECK(metrics_without_timing(s.dir / "resumed") == straight_rows);
  CHECK(checkpoint_tensors(checkpoint_path((s.dir / "resumed").string(), 8)) ==
        checkpoint_tensors(checkpoint_path((s.dir / "straight").string(), 8)));
}
