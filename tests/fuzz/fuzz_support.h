// Shared by the libFuzzer targets in tests/fuzz (docs/reliability.md, "Fuzzing"): a private
// scratch folder for the bytes a target writes (on /dev/shm when there is one: no disk traffic),
// and the one rule every target checks, that bad input is a headlab::Error and nothing else.
// Anything else (another exception, a crash, a leak, undefined behaviour, a hang) is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "headlab/common/error.h"

namespace headlab::fuzz {

namespace fs = std::filesystem;

// A folder private to this process, removed at exit. The targets also point the user cache there
// and empty PATH, so that nothing they load can export the Bible or run another program.
inline const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    const std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    std::string pattern = base + "/headlab-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    ::setenv("XDG_CACHE_HOME", (pattern + "/cache").c_str(), 1);
    ::setenv("PATH", "", 1);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(scratch_dir(), ec);
    });
    return fs::path(pattern);
  }();
  return dir;
}

// A fresh empty folder under the scratch folder (the previous input's files are gone).
inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir = scratch_dir() / name;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  return dir;
}

inline void write_bytes(const fs::path& path, std::string_view bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// Splits `bytes` at every `separator` (the last piece may be empty).
inline std::vector<std::string_view> split(std::string_view bytes, std::string_view separator) {
  std::vector<std::string_view> parts;
  for (size_t at; (at = bytes.find(separator)) != std::string_view::npos;) {
    parts.push_back(bytes.substr(0, at));
    bytes.remove_prefix(at + separator.size());
  }
  parts.push_back(bytes);
  return parts;
}

// Runs `body`; headlab::Error is the expected answer to bad input, anything else aborts the
// fuzzer with the exception's text (libFuzzer then saves the input as a crash).
template <typename Body>
void expect_only_headlab_errors(Body&& body) {
  try {
    body();
  } catch (const headlab::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: exception other than headlab::Error: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: non-standard exception\n");
    std::abort();
  }
}

}  // namespace headlab::fuzz

// LeakSanitizer suppressions, compiled in (every target includes this header once). HDF5 1.10
// itself leaks on some corrupt files, in its own error paths that no caller can reach (an object
// header that fails to load leaves its metadata-cache entry allocated, H5O_protect). Debian's
// libhdf5 has no frame pointers, so LSan's fast unwinder sees only malloc and one HDF5 frame:
// memory allocated inside libhdf5 is exempt as a whole (docs/reliability.md says so). Leaks of
// headlab's own allocations are still reported.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libhdf5_serial.so\n";
}
