// libFuzzer target: the files of a run or sweep folder that headlab reads back (src/report/
// gather.cpp, src/sweep/aggregate.cpp): heads.csv and heads_similarity.csv (headlab analyze),
// prune.csv and prune/<name>/prune.csv (headlab prune), metrics.csv, the attention dumps
// attention_example_<i>.csv / .h5 and _tokens.csv (an encoder_decoder's _cross.csv and a verse's
// _gold_alignment.csv too), and a sweep's grid.csv with its runs' metrics.csv and failed.txt.
// (heads.h5 has no C++ reader: only Python reads it.)
// Input: files, each "@@@ NAME\n" then its bytes up to the next "\n@@@ " (binary allowed);
// NAME is a relative path of [A-Za-z0-9_.=,/-] without "..". The folder is then read as
// `headlab report` reads it (gather_report, which aggregates a sweep first), and metrics.csv
// as the sweep aggregation reads it (read_run_metrics).
#include <string>

#include "fuzz_support.h"
#include "headlab/report/report.h"
#include "headlab/sweep/sweep.h"

namespace {

bool safe_name(std::string_view name) {
  if (name.empty() || name.size() > 100 || name.front() == '/' || name.back() == '/' ||
      name.find("..") != std::string_view::npos || name.find("//") != std::string_view::npos)
    return false;
  for (const char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '=' || c == ',' || c == '/' ||
          c == '-'))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  const fuzz::fs::path dir = fuzz::fresh_dir("run");
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (!bytes.starts_with("@@@ ")) return 0;
  bytes.remove_prefix(4);
  for (std::string_view file : fuzz::split(bytes, "\n@@@ ")) {
    const size_t eol = file.find('\n');
    const std::string_view name = file.substr(0, eol);
    if (!safe_name(name)) continue;
    std::error_code ec;
    if (fuzz::fs::is_directory(dir / name, ec)) continue;
    fuzz::fs::create_directories((dir / name).parent_path(), ec);
    if (ec || fuzz::fs::is_regular_file((dir / name).parent_path(), ec)) continue;
    fuzz::write_bytes(dir / name, eol == std::string_view::npos ? std::string_view() : file.substr(eol + 1));
  }
  fuzz::expect_only_headlab_errors([&] { (void)gather_report(dir.string(), {}); });
  fuzz::expect_only_headlab_errors([&] {
    if (fuzz::fs::is_regular_file(dir / "metrics.csv")) (void)read_run_metrics((dir / "metrics.csv").string());
  });
  return 0;
}
