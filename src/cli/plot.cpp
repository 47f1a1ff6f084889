// headlab plot PATH [--x-axis tokens|step] [--heads L:H,...] [--format png|pdf|svg] [--dpi N]
// [--no-title]: figures of a run folder, a sweep folder, or a folder of prune results, written to
// PATH/plots/ by src/plot/headlab_plot.py (matplotlib, Agg backend; docs/sweeps.md lists the
// figures). The script decides what PATH holds and checks --heads. For a sweep folder,
// DIR/results.csv and DIR/summary.md are rewritten first, so the figures and the tables always
// agree. The script is $HEADLAB_PLOT_SCRIPT, else plot/headlab_plot.py among the shared files
// (common/paths.h); the interpreter is $HEADLAB_PYTHON, else /usr/bin/python3 (where Debian's
// python3-matplotlib lives), else python3 on PATH.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/edit_distance.h"
#include "headlab/common/error.h"
#include "headlab/common/paths.h"
#include "headlab/common/subprocess.h"
#include "headlab/sweep/sweep.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace fs = std::filesystem;

namespace {

std::string find_plot_script() {
  if (const char* env = std::getenv("HEADLAB_PLOT_SCRIPT"); env && *env) {
    HEADLAB_CHECK(fs::is_regular_file(env), "HEADLAB_PLOT_SCRIPT=" << env << " does not exist");
    return env;
  }
  try {
    return find_shared_file("plot/headlab_plot.py").string();
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; or set HEADLAB_PLOT_SCRIPT");
  }
}

std::string find_python() {
  if (const char* env = std::getenv("HEADLAB_PYTHON"); env && *env) return env;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

// Runs the script with stdout passed through and stderr collected; a failure becomes one Error
// line (the script's last stderr line; any lines before it, such as a traceback, are printed).
void run_script(const std::string& python, const std::vector<std::string>& args) {
  ChildProcess child;
  child.args = {python};
  child.args.insert(child.args.end(), args.begin(), args.end());
  for (const std::string& var : current_environment())
    if (var.rfind("MPLBACKEND=", 0) != 0) child.env.push_back(var);
  child.env.push_back("MPLBACKEND=Agg");  // files, never a window
  std::fflush(stdout);
  std::string err;
  const int status = run_child_reading_lines(
      child, [&](std::string_view line) { err.append(line).push_back('\n'); }, ChildStream::err);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::fputs(err.c_str(), stderr);  // warnings, if any
    return;
  }
  HEADLAB_CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 127),
                "cannot run " << python << ": install Python with matplotlib: apt-get install python3-matplotlib");
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  const size_t cut = err.find_last_of('\n');
  const std::string last = cut == std::string::npos ? err : err.substr(cut + 1);
  if (cut != std::string::npos) std::fprintf(stderr, "%s\n", err.substr(0, cut).c_str());
  throw Error(last.empty() ? "the plot script failed (" + python + " " + args.front() + ")" : last);
}

}  // namespace

int run_plot(int argc, char** argv) {
  cxxopts::Options options("headlab plot",
                           "Draw figures of a run folder, a sweep folder or prune results into PATH/plots/ "
                           "(see docs/sweeps.md).");
  options.positional_help("PATH");
  options.add_options()("path", "run folder, sweep folder, or prune results", cxxopts::value<std::string>())(
      "x,x-axis", "x axis of the curves: tokens or step", cxxopts::value<std::string>()->default_value("tokens"))(
      "heads", "attention maps of these heads only, e.g. 0:1,2:3 (layer:head)", cxxopts::value<std::string>())(
      "format", "file format: png, pdf or svg (vector, for papers)",
      cxxopts::value<std::string>()->default_value("png"))(
      "dpi", "resolution of PNGs (and of images inside PDF/SVG), dots per inch",
      cxxopts::value<int>()->default_value("110"))(
      "no-title", "leave out each figure's title (run, config, seeds), for a caption to replace")("h,help",
                                                                                                  "show this help");
  const auto parsed = parse_options(options, {"path"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("path"), "no folder given (usage: headlab plot PATH, a run or sweep folder)");
  const std::string path = args["path"].as<std::string>(), x = args["x-axis"].as<std::string>();
  const std::vector<std::string> axes = {"tokens", "step"}, formats = {"png", "pdf", "svg"};
  HEADLAB_CHECK(std::find(axes.begin(), axes.end(), x) != axes.end(), unknown_choice("x axis", x, axes));
  const std::string format = args["format"].as<std::string>();
  HEADLAB_CHECK(std::find(formats.begin(), formats.end(), format) != formats.end(),
                unknown_choice("format", format, formats));
  const int dpi = args["dpi"].as<int>();
  // Above 2400 dpi a page-wide figure is hundreds of megapixels: surely a typo.
  HEADLAB_CHECK(dpi >= 10 && dpi <= 2400, "--dpi must be between 10 and 2400, got " << dpi);
  std::error_code ec;
  HEADLAB_CHECK(fs::is_directory(path, ec), "no such folder: " << path);
  HEADLAB_CHECK(!fs::is_empty(path, ec), path << " is empty: nothing to plot");
  if (fs::exists(fs::path(path) / "grid.csv")) aggregate_sweep(path);  // the figures read results.csv
  std::vector<std::string> script_args = {find_plot_script(), path,   "--x",   x,
                                          "--format",         format, "--dpi", std::to_string(dpi)};
  if (args.count("no-title")) script_args.push_back("--no-title");
  if (args.count("heads")) script_args.insert(script_args.end(), {"--heads", args["heads"].as<std::string>()});
  run_script(find_python(), script_args);
  return 0;
}

}  // namespace headlab::cli
