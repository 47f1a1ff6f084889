// Small file helpers shared by the trainer and the sweep runner.
//   write_file_atomically("runs/x/config.toml", text);  // PATH.tmp, then rename over PATH
#pragma once

#include <filesystem>
#include <string>

namespace headlab {

// Writes `text` to PATH.tmp and renames it over `path`, so readers see the old file or the new
// one, never half of one. Throws headlab::Error naming the path when either step fails.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace headlab
