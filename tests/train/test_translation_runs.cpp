// Training runs and metrics.csv's val_bleu column: BLEU of greedy val translations at each
// evaluation of a translation run (empty otherwise), exact resume with it, and metrics files
// written before the column existed.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "headlab/decode/translate_split.h"
#include "headlab/io/csv.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/run_folder.h"
#include "headlab/train/trainer.h"
#include "support/run_files.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

RunOptions quiet_run(const fs::path& dir, const std::string& resume = "") {
  RunOptions o;
  o.out_dir = dir.string();
  o.resume = resume;
  o.quiet = true;
  return o;
}

// The val_bleu field of every row, by step.
std::vector<std::pair<std::string, std::string>> bleu_column(const fs::path& run) {
  const CsvTable t = read_csv(run / "metrics.csv");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& row : t.rows) out.emplace_back(row[t.column("step")], row[t.column("val_bleu")]);
  return out;
}

}  // namespace

TEST_CASE("a translation run logs val BLEU at its evaluations, as translate_split scores the checkpoint",
          "[train][translate]") {
  test::ScratchDir s("translation_run");
  const Config c = test::tiny_translate_config(s.write_parallel_corpus(300));
  const RunResult r = run_training(c, quiet_run(s.dir / "run"));
  REQUIRE(r.val_bleu);
  const std::vector<std::pair<std::string, std::string>> rows = bleu_column(s.dir / "run");
  REQUIRE(rows.size() == 4);  // steps 5, 10, 15, 20
  for (const auto& [step, bleu] : rows) {
    INFO("step " << step);
    CHECK(bleu.empty() == (step != "10" && step != "20"));  // train.eval_every = 10
  }
  // The logged number is translate_split's on the first train.eval_bleu_sentences val sentences.
  OpenedCheckpoint opened = open_checkpoint(checkpoint_path((s.dir / "run").string(), 20));
  const auto& data = dynamic_cast<const TranslationDataset&>(*opened.dataset);
  const double bleu = translate_split(*opened.model, data, Split::val, {}, c.train.eval_bleu_sentences).bleu.score;
  CHECK(rows.back().second == csv_number("%.6g", bleu));
  CHECK(*r.val_bleu == bleu);
  CHECK_THAT(closing_line(r, c.train.eval_batches), Catch::Contains(", val BLEU "));

  Config off = c;
  off.train.eval_bleu_sentences = 0;
  off.train.steps = 10;
  CHECK_FALSE(run_training(off, quiet_run(s.dir / "off")).val_bleu);
  for (const auto& [step, bleu] : bleu_column(s.dir / "off")) CHECK(bleu.empty());
}

TEST_CASE("a text run's metrics.csv has the val_bleu column, empty", "[train][translate]") {
  test::ScratchDir s("text_run_bleu");
  const Config c = test::tiny_text_config(s.write_corpus("corpus.txt", 600));
  const RunResult r = run_training(c, quiet_run(s.dir / "run"));
  CHECK_FALSE(r.val_bleu);
  CHECK(test::read_file(s.dir / "run" / "metrics.csv").rfind(std::string(kMetricsHeader) + "\n", 0) == 0);
  const auto rows = bleu_column(s.dir / "run");
  CHECK(rows.size() == 4);
  for (const auto& [step, bleu] : rows) CHECK(bleu.empty());
}

TEST_CASE("a translation run killed between checkpoints and resumed ends bit-identical to a straight run",
          "[train][translate][resume]") {
  test::ScratchDir s("translation_resume");
  Config c = test::tiny_translate_config(s.write_parallel_corpus(300));
  c.model.dropout = 0.1;  // dropout masks, the smoothed loss and the micro-batch split replay too
  c.train.label_smoothing = 0.1;
  c.train.grad_accum = 2;
  run_training(c, quiet_run(s.dir / "straight"));
  RunOptions first = quiet_run(s.dir / "resumed");
  first.after_step = [](int64_t step, Model<float>&) { return step < 14; };
  CHECK(run_training(c, first).end == RunEnd::interrupted);
  CHECK(newest_checkpoint((s.dir / "resumed").string())->step == 10);
  CHECK(run_training(c, quiet_run(s.dir / "resumed", "auto")).end == RunEnd::finished);
  CHECK(test::metrics_without_timing(s.dir / "resumed") == test::metrics_without_timing(s.dir / "straight"));
  CHECK(test::checkpoint_tensors(checkpoint_path((s.dir / "resumed").string(), 20)) ==
        test::checkpoint_tensors(checkpoint_path((s.dir / "straight").string(), 20)));
}

TEST_CASE("a run whose metrics.csv has the header from before val_bleu resumes, the column added empty",
          "[train][resume]") {
  test::ScratchDir s("old_metrics_resume");
  Config c = test::tiny_text_config(s.write_corpus("corpus.txt", 600));
  c.train.steps = 8;
  run_training(c, quiet_run(s.dir / "straight"));
  RunOptions first = quiet_run(s.dir / "resumed");
  first.after_step = [](int64_t step, Model<float>&) { return step < 5; };  // the newest checkpoint: step 4
  CHECK(run_training(c, first).end == RunEnd::interrupted);
  // metrics.csv as the previous build wrote it: no val_bleu column.
  const fs::path metrics = s.dir / "resumed" / "metrics.csv";
  const CsvTable t = read_csv(metrics);
  const size_t bleu = t.column("val_bleu");
  std::string old = std::string(kMetricsHeaderBeforeBleu) + "\n";
  for (std::vector<std::string> row : t.rows) {
    row.erase(row.begin() + static_cast<std::ptrdiff_t>(bleu));
    old += csv_line(row);
  }
  std::ofstream(metrics, std::ios::trunc) << old;

  CHECK(run_training(c, quiet_run(s.dir / "resumed", "auto")).step == 8);
  CHECK(test::metrics_without_timing(s.dir / "resumed") == test::metrics_without_timing(s.dir / "straight"));

  // Any other header is still refused.
  std::ofstream(metrics, std::ios::trunc) << "step,tokens,loss\n1,2,3\n";
  Config longer = c;
  longer.train.steps = 10;
  CHECK_THROWS_WITH(run_training(longer, quiet_run(s.dir / "resumed", "auto")),
                    Catch::Contains("unexpected header, not a headlab metrics file"));
}
