#include "headlab/train/run_folder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "headlab/common/error.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {
bool parse_step(const std::string& digits, int64_t& step) {
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::from_chars(digits.data(), digits.data() + digits.size(), step).ec == std::errc();
}

std::vector<fs::path> list_dir(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(dir, ec) && !ec) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  HEADLAB_CHECK(!ec, "cannot list " << dir.string() << ": " << ec.message());
  return out;
}
}  // namespace

std::string checkpoint_path(const std::string& run_dir, int64_t step) {
  HEADLAB_CHECK(step >= 0, "checkpoint_path: negative step " << step);
  char name[40];
  std::snprintf(name, sizeof name, "step_%08lld.h5", static_cast<long long>(step));
  return (fs::path(run_dir) / "checkpoints" / name).string();
}

std::string best_checkpoint_path(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoints" / "best.h5").string();
}

std::vector<CheckpointFile> list_checkpoints(const std::string& run_dir) {
  std::vector<CheckpointFile> out;
  for (const fs::path& p : list_dir(fs::path(run_dir) / "checkpoints")) {
    const std::string name = p.filename().string();
    int64_t step;
    std::error_code ec;
    if (name.size() > 8 && name.starts_with("step_") && name.ends_with(".h5") &&
        parse_step(name.substr(5, name.size() - 8), step) && fs::is_regular_file(p, ec))
      out.push_back({step, p.string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return std::tie(a.step, a.path) < std::tie(b.step, b.path);
  });
  return out;
}

std::optional<CheckpointFile> newest_checkpoint(const std::string& run_dir) {
  std::vector<CheckpointFile> all = list_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::vector<std::string> prune_checkpoints(const std::string& run_dir, int keep_last, const std::string& best_path) {
  HEADLAB_CHECK(keep_last >= 0, "prune_checkpoints: keep_last=" << keep_last << " is negative");
  std::vector<std::string> doomed;
  const std::vector<CheckpointFile> all = list_checkpoints(run_dir);
  // equivalent() compares the files, so `best_path` may be spelled differently or be a link; if it
  // cannot tell (an error), compare the normalised paths instead.
  auto is_best = [&](const std::string& p) {
    std::error_code ec, ec_p, ec_best;
    const bool same = !best_path.empty() && fs::equivalent(p, best_path, ec);
    if (best_path.empty() || !ec) return same;
    return fs::absolute(p, ec_p).lexically_normal() == fs::absolute(best_path, ec_best).lexically_normal();
  };
  for (size_t i = 0; i + keep_last < all.size(); ++i)
    if (!is_best(all[i].path)) doomed.push_back(all[i].path);
  // Temp files of commits whose process is gone (killed mid-write); live writers are left alone.
  for (const fs::path& p : list_dir(fs::path(run_dir) / "checkpoints")) {
    const std::string name = p.filename().string();
    const size_t at = name.rfind(".h5.tmp.");
    int64_t pid;
    if (at != std::string::npos && parse_step(name.substr(at + 8), pid) && pid > 0 && pid != ::getpid() &&
        ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      doomed.push_back(p.string());
  }
  for (const std::string& p : doomed) {
    std::error_code ec;
    fs::remove(p, ec);
    HEADLAB_CHECK(!ec, "prune_checkpoints: cannot delete " << p << ": " << ec.message());
  }
  return doomed;
}

}  // namespace headlab
