#include "headlab/common/paths.h"

#include <cstdlib>
#include <vector>

#include "headlab/common/error.h"

// CMakeLists.txt defines both for this file only: a binary run where CMake built it reads the
// shared files from the source tree instead of an install.
#ifndef HEADLAB_SOURCE_TREE
#define HEADLAB_SOURCE_TREE ""
#endif
#ifndef HEADLAB_BUILD_TREE
#define HEADLAB_BUILD_TREE ""
#endif

namespace headlab {

namespace fs = std::filesystem;

namespace {

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

fs::path installed_share_dir(const fs::path& exe_dir) {
  return (exe_dir / ".." / "share" / "headlab").lexically_normal();
}

bool in_build_tree(const fs::path& exe_dir) {
  std::error_code ec;
  return !exe_dir.empty() && *HEADLAB_BUILD_TREE && fs::equivalent(exe_dir, HEADLAB_BUILD_TREE, ec);
}

}  // namespace

fs::path share_dir() {
  const fs::path exe_dir = executable_dir();
  std::error_code ec;
  if (!exe_dir.empty() && fs::is_directory(installed_share_dir(exe_dir), ec)) return installed_share_dir(exe_dir);
  if (in_build_tree(exe_dir)) return HEADLAB_SOURCE_TREE;
  return {};
}

fs::path find_shared_file(const std::string& rel) {
  const fs::path root = share_dir();
  HEADLAB_CHECK(!root.empty(), "cannot find " << rel << ": " << installed_share_dir(executable_dir()).string()
                                              << " does not exist (install headlab with cmake --install)");
  const bool source_tree = root == fs::path(HEADLAB_SOURCE_TREE);
  std::vector<fs::path> candidates = {root / rel};
  if (source_tree) candidates.push_back(root / "src" / rel);
  std::error_code ec;
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c, ec)) return c;
  throw Error("cannot find " + rel + " in " + root.string() + (source_tree ? "" : " (an incomplete install?)"));
}

fs::path user_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && fs::path(xdg).is_absolute())
    return fs::path(xdg) / "headlab";
  const char* home = std::getenv("HOME");
  HEADLAB_CHECK(home && *home, "cannot locate the user cache folder: neither XDG_CACHE_HOME nor HOME is set");
  return fs::path(home) / ".cache" / "headlab";
}

}  // namespace headlab
