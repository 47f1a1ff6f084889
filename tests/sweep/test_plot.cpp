#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/analysis/attention_dump.h"
#include "headlab/train/trainer.h"
#include "support/bible_verse.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

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

uint32_t png_width(const fs::path& path) {
  return big_endian_u32(read_file(path), 16);
}
uint32_t png_height(const fs::path& path) {
  return big_endian_u32(read_file(path), 20);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// `headlab plot ARGS...` fails with exit code 2 and one line naming the problem.
void check_one_line_error(const std::vector<std::string>& args, const fs::path& log, const std::string& expected,
                          const std::map<std::string, std::string>& env = {}) {
  const auto r = run_plot(args, log, env);
  INFO(r.output);
  CHECK(r.code == 2);
  const std::vector<std::string> lines = lines_of(r.output);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], StartsWith("headlab plot: error: ") && Contains(expected));
}

const char* const kPruneHeader =
    "strategy,seed,finetune_steps,recompute,lambda,round,heads_pruned,fraction_pruned,heads_kept,heads_per_layer,"
    "val_loss,val_accuracy,val_bpb,pruned_heads\n";

}  // namespace

TEST_CASE("plotting the fixture run writes its loss, metric, per-head, similarity and attention PNGs", "[plot]") {
  Scratch s;
  const fs::path run = s.dir / "run_small";
  const auto r = run_plot({run.string()}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* name : {"loss.png", "val_accuracy.png", "val_bpb.png", "heads_importance.png", "heads_entropy.png",
                           "heads_ablation_loss_delta.png", "heads_similarity.png", "attention_example_0.png"})
    check_png(run / "plots" / name);
  CHECK_THAT(r.output, Contains("run_small/plots/loss.png"));  // the written files are listed
  // Columns without a picture to draw are skipped, and stdout says so.
  CHECK(!fs::exists(run / "plots" / "heads_gate.png"));
  CHECK(!fs::exists(run / "plots" / "heads_syntactic_head_agreement.png"));
  CHECK_THAT(r.output,
             Contains("no heatmap for gate (every head 1)") && Contains("syntactic_head_agreement (no values)"));
}

TEST_CASE("--heads draws only the chosen heads' attention maps; a bad choice is one line and exit code 2", "[plot]") {
  Scratch s;
  const fs::path run = s.dir / "run_small", figure = run / "plots" / "attention_example_0.png";
  const fs::path log = s.dir / "log.txt";
  auto r = run_plot({run.string()}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_png(figure);
  const uint32_t all_heads_width = png_width(figure);  // 2 layers x 4 heads: 4 panels wide
  r = run_plot({run.string(), "--heads", "1:2"}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_png(figure);
  CHECK(png_width(figure) < all_heads_width * 2 / 3);  // one panel

  check_one_line_error({run.string(), "--heads", "2:0"}, log, "--heads 2:0: ");
  check_one_line_error({run.string(), "--heads", "1-2"}, log, "--heads: expected layer:head pairs");
  check_one_line_error({(s.dir / "prune_small").string(), "--heads", "0:0"}, log, "has no attention_example_");
}

TEST_CASE("--format, --dpi and --no-title make figures for papers; a bad value is one line and exit code 2", "[plot]") {
  Scratch s;
  // Only the curves (no analysis files): three figures per call keep the test quick.
  const fs::path run = s.dir / "curves", log = s.dir / "log.txt", loss = run / "plots" / "loss.png";
  fs::create_directories(run);
  for (const char* name : {"metrics.csv", "config.toml"}) fs::copy(s.dir / "run_small" / name, run / name);
  auto plot = [&](const std::vector<std::string>& options) {
    std::vector<std::string> args = {run.string()};
    args.insert(args.end(), options.begin(), options.end());
    const auto r = run_plot(args, log);
    INFO(r.output);
    REQUIRE(r.code == 0);
    return r.output;
  };
  plot({});
  check_png(loss);
  const uint32_t width = png_width(loss), height = png_height(loss);
  plot({"--dpi", "220"});
  check_png(loss);
  CHECK(png_width(loss) >= 2 * width - 4);  // twice the dots per inch, twice the pixels (bbox rounding)
  CHECK(png_width(loss) <= 2 * width + 4);
  plot({"--no-title"});
  check_png(loss);
  CHECK(png_width(loss) <= width);
  CHECK(png_height(loss) < height - 20);  // the two title lines are gone

  CHECK_THAT(plot({"--format", "pdf"}), Contains("curves/plots/loss.pdf"));
  CHECK(read_file(run / "plots" / "loss.pdf").substr(0, 5) == "%PDF-");
  CHECK_THAT(plot({"--format", "svg", "--no-title"}), Contains("curves/plots/loss.svg"));
  CHECK_THAT(read_file(run / "plots" / "loss.svg"), Contains("<svg"));

  check_one_line_error({run.string(), "--format", "jpg"}, log, "unknown format 'jpg'; did you mean 'png'?");
  check_one_line_error({run.string(), "--dpi", "0"}, log, "--dpi must be between 10 and 2400, got 0");
  check_one_line_error({run.string(), "--dpi", "many"}, log, "many");
}

TEST_CASE("headlab analyze's attention dump of a trained model plots", "[plot]") {
  // The run_small fixture imitates analyze's files; this checks the real ones read the same way.
  test::ScratchDir s("plot_analyze");
  const fs::path run = s.dir / "run";
  Config c = test::k_relation_config(1, 2, {1}, 40);
  c.train.warmup_steps = 5;
  c.train.batch_size = 8;
  c.train.eval_batches = 1;
  RunOptions o;
  o.out_dir = run.string();
  o.quiet = true;
  run_training(c, o);
  const auto analyzed = test::run_headlab(
      {"analyze", (run / "checkpoints" / "best.h5").string(), "--batches", "1", "--no-ablation", "--dump-example", "0"},
      s.dir / "analyze.txt", {{"OMP_NUM_THREADS", "1"}});
  INFO(analyzed.output);
  REQUIRE(analyzed.code == 0);
  const auto r = run_plot({run.string()}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* name : {"loss.png", "heads_importance.png", "heads_similarity.png", "attention_example_0.png"})
    check_png(run / "plots" / name);
}

TEST_CASE("a Bible verse's cross-attention plots with each layer's mean and its gold cells outlined on every panel",
          "[plot]") {
  test::ScratchDir s("plot_gold");
  const std::unique_ptr<TranslationDataset> data = test::bible_fixture_data(s);
  const test::VerseDump v = test::verse_dump(*data, 0, 3);
  const auto cells = std::count(v.gold.begin(), v.gold.end(), 1);
  REQUIRE(cells > 0);
  const fs::path run = s.dir / "run";
  fs::create_directories(run);
  write_attention_dump(run.string(), "0", v.attention, *data, -1, "ckpt.h5", "val", v.gold);
  const auto r = run_plot({run.string(), "--format", "svg"}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string svg = read_file(run / "plots" / "attention_example_0_cross.svg");
  int64_t panels = 0;  // every head of every layer, and each layer's mean
  for (const int64_t heads : v.attention.cross.layer_heads) panels += heads + 1;
  size_t outlines = 0;
  for (size_t at = svg.find("stroke: #00e5ff"); at != std::string::npos; at = svg.find("stroke: #00e5ff", at + 1))
    ++outlines;
  CHECK(outlines == static_cast<size_t>(cells * panels));
  CHECK_THAT(svg, Contains("mean of its heads"));
  CHECK(read_file(run / "plots" / "attention_example_0.svg").find("#00e5ff") == std::string::npos);
}

TEST_CASE("plotting prune results draws a curve per strategy and the heads left per layer", "[plot]") {
  Scratch s;
  const fs::path run = s.dir / "prune_small", log = s.dir / "log.txt";
  auto r = run_plot({run.string()}, log);  // a run folder: every prune/*/prune.csv
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* name : {"prune_val_accuracy.png", "prune_val_loss.png", "prune_heads_per_layer.png"})
    check_png(run / "plots" / name);
  CHECK(!fs::exists(run / "plots" / "prune_val_bpb.png"));  // the fixture's val_bpb cells are empty
  CHECK(!fs::exists(run / "plots" / "loss.png"));           // no metrics.csv: only the prune figures

  r = run_plot({(run / "prune").string()}, log);  // a folder of invocations
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_png(run / "prune" / "plots" / "prune_val_accuracy.png");
  const fs::path one = run / "prune" / "l0_lambda0.003";  // one invocation's folder
  r = run_plot({one.string()}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_png(one / "plots" / "prune_val_loss.png");
  CHECK(!fs::exists(one / "plots" / "prune_val_bleu.png"));  // no BLEU columns: written before translation
}

TEST_CASE("a translation model's prune.csv gets BLEU and chrF curves", "[plot]") {
  Scratch s;
  const fs::path dir = s.dir / "translation_prune", log = s.dir / "log.txt";
  fs::create_directories(dir);
  std::ofstream(dir / "prune.csv") << std::string(kPruneHeader, std::strlen(kPruneHeader) - 1)
                                   << ",only,val_bleu,val_chrf\n"
                                   << "importance,0,0,0,,0,0,0,6,2 2 2,3.1,,,,cross,12.5,40.1\n"
                                   << "importance,0,0,0,,1,1,0.166667,5,2 2 1,3.3,,,2:1,cross,10.25,38.0\n";
  const auto r = run_plot({dir.string()}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* name : {"prune_val_bleu.png", "prune_val_chrf.png", "prune_val_loss.png"})
    check_png(dir / "plots" / name);
}

TEST_CASE("a malformed prune.csv is one line and exit code 2", "[plot]") {
  Scratch s;
  const fs::path log = s.dir / "log.txt", bad = s.dir / "prune_small" / "prune" / "random_seed1" / "prune.csv";
  std::ofstream(bad) << "strategy,seed,finetune_steps,recompute,round,heads_pruned,fraction_pruned,heads_kept,"
                        "heads_per_layer,val_loss,val_accuracy,val_bpb,pruned_heads\n"
                        "random,1,0,0,0,0,0,16,4 4 4 4,1.2,0.64,,\n";
  check_one_line_error({(s.dir / "prune_small").string()}, log, "random_seed1/prune.csv: not a headlab prune.csv");
  std::ofstream(bad) << kPruneHeader << "weights,0,0,0,,0,0,0,16,4 4 4 4,1.2,0.64,,\n";
  check_one_line_error({(s.dir / "prune_small").string()}, log, "line 2: unknown strategy 'weights'");
  std::ofstream(bad) << kPruneHeader << "random,1,0,0,,0,0,zero,16,4 4 4 4,1.2,0.64,,\n";
  check_one_line_error({(s.dir / "prune_small").string()}, log, "line 2 has a malformed number");
}

TEST_CASE("plotting the fixture sweep writes overlaid curves, final metrics with error bars and heatmaps", "[plot]") {
  Scratch s;
  const fs::path sweep = s.dir / "sweep_small";
  const auto r = run_plot({sweep.string(), "--x-axis", "step"}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* name :
       {"loss.png", "val_accuracy.png", "val_bpb.png", "final_val_loss.png", "final_val_accuracy.png",
        "final_val_bpb.png", "model.n_heads=4,train.seed=0/heads_importance.png"})
    check_png(sweep / "plots" / name);
  CHECK(fs::exists(sweep / "results.csv"));  // plot aggregates first
  CHECK(fs::exists(sweep / "summary.md"));
}

namespace {

// The text of an SVG figure: matplotlib writes each line of every text element as a comment
// (<!-- text -->) above the glyphs it draws, so titles and tick labels can be read back.
std::vector<std::string> svg_texts(const fs::path& path) {
  INFO(path.string());
  REQUIRE(fs::exists(path));
  const std::string svg = read_file(path);
  std::vector<std::string> texts;
  for (size_t at = svg.find("<!-- "); at != std::string::npos; at = svg.find("<!-- ", at + 1)) {
    const size_t end = svg.find(" -->", at);
    if (end == std::string::npos) break;
    texts.push_back(svg.substr(at + 5, end - at - 5));
  }
  return texts;
}

bool has_text(const std::vector<std::string>& texts, const std::string& part) {
  for (const std::string& t : texts)
    if (t.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("plot titles name the sweep, count its seeds and say one file, not 1 files", "[plot]") {
  Scratch s;
  const fs::path sweep = s.dir / "sweep_small", log = s.dir / "log.txt";
  std::ofstream(sweep / "sweep_name.txt") << "head_count\n";  // as headlab sweep records the file's name
  auto r = run_plot({sweep.string(), "--format", "svg"}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(read_file(sweep / "summary.md"), StartsWith("# Sweep head_count\n"));
  const auto finals = svg_texts(sweep / "plots" / "final_val_loss.svg");
  // n_heads = 2 has one finished seed of two; the others two.
  CHECK(has_text(finals,
                 "Final validation loss against number of heads (model.n_heads), sweep head_count "
                 "(mean ± sample std over 1-2 seeds)"));
  CHECK(has_text(finals, "; 2 seeds (train.seed)"));
  const auto curves = svg_texts(sweep / "plots" / "loss.svg");
  CHECK(has_text(curves, "of every run in sweep head_count, coloured by"));
  CHECK(has_text(curves, "2 seeds (train.seed)"));
  CHECK_FALSE(has_text(curves, "seeds: "));

  const fs::path prune = s.dir / "prune_small", one = prune / "prune" / "l0_lambda0.001";
  r = run_plot({one.string(), "--format", "svg"}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(has_text(svg_texts(one / "plots" / "prune_val_loss.svg"), "as heads are pruned (1 prune.csv file)"));
  r = run_plot({prune.string(), "--format", "svg"}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto all = svg_texts(prune / "plots" / "prune_val_loss.svg");
  CHECK(has_text(all, "as heads are pruned (14 prune.csv files)"));
  CHECK(has_text(all, "random (mean of 3 seeds, band = min-max)"));
  // Every strategy headlab prune writes plots: the unnormalised importance, and the control as a
  // line at its fine-tuned loss.
  CHECK(has_text(all, "importance, not normalised per layer, scored once"));
  CHECK(has_text(all, "nothing pruned, fine-tuned only (the control), fine-tuned 50 steps, after 3 rounds"));
}

TEST_CASE("the prune curves' x axis ends at the most that can be pruned: every layer keeps one head", "[plot]") {
  Scratch s;
  const fs::path folder = s.dir / "prune_2x2" / "importance", log = s.dir / "log.txt";
  fs::create_directories(folder);
  std::ofstream(folder / "prune.csv") << kPruneHeader << "importance,0,0,1,,0,0,0,4,2 2,1.5,0.6,,\n"
                                      << "importance,0,0,1,,1,2,0.5,2,1 1,1.9,0.5,,0:1 1:0\n";
  const auto r = run_plot({folder.string(), "--format", "svg"}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(has_text(svg_texts(folder / "plots" / "prune_val_loss.svg"),
                 "fraction of heads pruned (at most 0.5: every layer keeps one head)"));
}

TEST_CASE("past 24 positions, attention maps label every k-th position with its token", "[plot]") {
  Scratch s;
  const fs::path run = s.dir / "long", log = s.dir / "log.txt";
  fs::create_directories(run);
  const std::string text = "In the beginning God created";  // 28 bytes; 3 panels: up to 24 labels, so k = 2
  const int T = static_cast<int>(text.size());
  std::ofstream dump(run / "attention_example_0.csv"), tokens(run / "attention_example_0_tokens.csv");
  dump << "layer,head,query";
  for (int k = 0; k < T; ++k) dump << ",k" << k;
  dump << "\n";
  for (int h = 0; h < 3; ++h)
    for (int q = 0; q < T; ++q) {
      dump << "0," << h << "," << q;
      for (int k = 0; k < T; ++k) dump << "," << (k == q ? 1 : 0);
      dump << "\n";
    }
  tokens << "position,token,text,real,target,label,gold_head,gold_antecedent,is_delimiter\n";
  for (int t = 0; t < T; ++t)
    tokens << t << "," << static_cast<int>(text[t]) << "," << text[t] << ",1," << (t + 1 < T ? 32 : 0) << ",,,,\n";
  dump.close();
  tokens.close();
  const auto r = run_plot({run.string(), "--format", "svg"}, log);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto texts = svg_texts(run / "plots" / "attention_example_0.svg");
  // Positions 0, 2, 4, ...: "I", "␣", "h", ...; "b" at 7 and "G" at 17 are odd positions.
  for (const char* label : {"0 I", "4 h", "8 e", "18 o", "26 e"}) {
    INFO(label);
    CHECK(std::count(texts.begin(), texts.end(), label) == 6);  // x and y of 3 panels
  }
  CHECK(std::count(texts.begin(), texts.end(), "7 b") == 0);
  CHECK(has_text(texts, "ticks every 2 positions: position and token"));

  // Up to 24 positions every token is a label, as before: the fixture's 16 bytes "And God said, Le".
  const auto short_run = run_plot({(s.dir / "run_small").string(), "--format", "svg"}, log);
  INFO(short_run.output);
  REQUIRE(short_run.code == 0);
  const auto small = svg_texts(s.dir / "run_small" / "plots" / "attention_example_0.svg");
  CHECK(std::count(small.begin(), small.end(), "G") == 16);  // 8 panels, x and y
  CHECK_FALSE(has_text(small, "ticks every"));
}

TEST_CASE("plot errors are one line and exit code 2", "[plot]") {
  Scratch s;
  const fs::path log = s.dir / "log.txt";
  auto one_line_error = [&](const std::vector<std::string>& args, const std::string& expected,
                            const std::map<std::string, std::string>& env = {}) {
    check_one_line_error(args, log, expected, env);
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
