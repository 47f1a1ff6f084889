// headlab report RUN_OR_SWEEP [--out FILE.html] [--prompt TEXT | --prompt-file FILE] [--set data.KEY=V]
// One self-contained HTML file of a run or sweep folder (default: PATH/report.html): config and
// provenance, training curves, per-head heatmaps, pruning curves and an attention viewer
// (src/report/, docs/report.md). --prompt first computes every head's attention on the text with
// the run's best checkpoint (as analyze --prompt does, without writing its files) and adds it to
// the viewer. For a sweep folder, results.csv and summary.md are rewritten first, as plot does.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/files.h"
#include "headlab/data/text.h"
#include "headlab/report/report.h"
#include "headlab/train/checkpointing.h"
#include "options.h"
#include "prompt.h"
#include "verbs.h"

namespace headlab::cli {

namespace fs = std::filesystem;

namespace {

// The viewer's name for this command's --prompt: "prompt", or "prompt (report)" when the folder
// holds analyze --prompt's dump, which the report reads as the example "prompt" (attention_example_
// prompt.h5 or .csv): two examples of one name could not be told apart in the menu or the URL.
std::string prompt_example_name(const std::string& run) {
  for (const char* file : {"attention_example_prompt.h5", "attention_example_prompt.csv"})
    if (fs::exists(fs::path(run) / file)) return "prompt (report)";
  return "prompt";
}

ExtraExample prompt_example(const std::string& run, const std::string& text,
                            const std::vector<std::string>& overrides) {
  const std::string checkpoint = resolve_checkpoint(run);
  OpenedCheckpoint opened = open_checkpoint(checkpoint, overrides);
  PromptAttention p = prompt_attention(*opened.model, *opened.dataset, opened.config, text);
  ExtraExample e;
  e.name = prompt_example_name(run);
  e.attention = std::move(p.attention);
  e.token_labels = std::move(p.token_labels);
  e.source_labels = std::move(p.source_labels);
  return e;
}

}  // namespace

int run_report(int argc, char** argv) {
  cxxopts::Options options("headlab report",
                           "One self-contained HTML file of a run or sweep folder: config, curves, per-head heatmaps, "
                           "pruning curves and an attention viewer (docs/report.md).");
  options.positional_help("RUN_OR_SWEEP");
  options.add_options()("path", "run folder or sweep folder", cxxopts::value<std::string>())(
      "out", "the HTML file to write (default: PATH/report.html)", cxxopts::value<std::string>())(
      "prompt",
      "also every head's attention on this text (the run's best checkpoint; text models, or a source "
      "sentence for a translation model)",
      cxxopts::value<std::string>())("prompt-file", "the same with the text of a file", cxxopts::value<std::string>())(
      "set", "change a data.* key of the checkpoint's config for --prompt, e.g. --set data.path=moved.txt (repeatable)",
      cxxopts::value<std::vector<std::string>>())("h,help", "show this help");
  const auto parsed = parse_options(options, {"path"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("path"), "no folder given (usage: headlab report RUN_OR_SWEEP [--out FILE.html])");
  const std::string path = args["path"].as<std::string>();
  std::error_code ec;
  HEADLAB_CHECK(fs::is_directory(path, ec), "no such folder: " << path);
  const std::vector<std::string> overrides = checkpoint_overrides(args, {"data."});

  std::vector<ExtraExample> extra;
  if (const std::optional<std::string> text = prompt_option(args)) {
    HEADLAB_CHECK(!fs::exists(fs::path(path) / "grid.csv"),
                  path << " is a sweep folder: --prompt needs a run folder (one of its runs)");
    extra.push_back(prompt_example(path, *text, overrides));
  }
  const fs::path out = args.count("out") ? fs::path(args["out"].as<std::string>()) : fs::path(path) / "report.html";
  const std::string html = report_html(gather_report(path, extra), fs::absolute(path).lexically_normal().string());
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  write_file_atomically(out, html);
  std::printf("wrote %s (%.1f KB)\n", out.string().c_str(), html.size() / 1024.0);
  return 0;
}

}  // namespace headlab::cli
