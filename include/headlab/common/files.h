// Small file helpers shared by the trainer, the sweep runner and the CLI.
//   write_file_atomically("runs/x/config.toml", text);  // PATH.tmp, then rename over PATH
//   std::string text = read_text_file("a.toml", "config file");
#pragma once

#include <filesystem>
#include <string>

namespace headlab {

// Writes `text` to PATH.tmp and renames it over `path`, so readers see the old file or the new
// one, never half of one. Throws headlab::Error naming the path when either step fails.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

// The bytes of a regular file; else one line "cannot read <what> '<path>'" (a directory, which
// would open as an empty stream, included).
std::string read_text_file(const std::filesystem::path& path, const std::string& what);

// An exclusive lock on `path` (created if missing) for this object's lifetime: flock(2), so the
// kernel releases it when the process dies, kill -9 included, and a stale lock file locks
// nothing. Throws one line when another process (or another FileLock) holds it:
// "<what> is in use by another headlab process (pid N)".
class FileLock {
 public:
  FileLock(const std::filesystem::path& path, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace headlab
