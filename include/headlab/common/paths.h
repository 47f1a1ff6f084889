// Where headlab finds its shared files and keeps its per-user cache: the one place that knows
// the install layout (CMakeLists.txt's install() rules write it).
//   <prefix>/bin/headlab  <prefix>/share/headlab/{configs,plot}/  <prefix>/share/doc/headlab/
//   find_shared_file("plot/headlab_plot.py")  // <prefix>/share/headlab/plot/headlab_plot.py
//   user_cache_dir() / "bible-kjv.txt"        // ~/.cache/headlab/bible-kjv.txt
#pragma once

#include <filesystem>
#include <string>

namespace headlab {

// The folder of shared files, found relative to the running executable (so a moved prefix still
// works): <exe_dir>/../share/headlab when installed; for a binary in the build tree, the source
// tree it was built from. Empty when neither applies.
std::filesystem::path share_dir();

// share_dir() / rel. The source tree keeps the same files at rel (configs/) or at src/rel
// (plot/). Throws headlab::Error naming where it looked when the file is not there.
std::filesystem::path find_shared_file(const std::string& rel);

// $XDG_CACHE_HOME/headlab, else $HOME/.cache/headlab (XDG base directory spec: a relative
// XDG_CACHE_HOME is ignored). Generated files shared by every run of the user go here; the
// folder is not created. Throws headlab::Error when neither variable is set.
std::filesystem::path user_cache_dir();

}  // namespace headlab
