// Test scaffolding shared by the tests that train, sweep or run the binary:
//   ScratchDir s("trainer");            a fresh temp folder, removed at the end of the test
//   s.write_corpus("corpus.txt", 1500); a small learnable text (four sentences, repeated)
//   run_headlab({"train", cfg, "--out", run}, s.dir / "log.txt")  -> {exit code, output}
//   run_program(installed / "bin/headlab", {"info"}, log, {{"HOME", home}}, work_dir)
//   ScopedEnv env("XDG_CACHE_HOME", dir);  set (nullptr: unset) until the end of the scope
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "headlab/io/config.h"

namespace headlab::test {

struct ScratchDir {
  std::filesystem::path dir;
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::filesystem::path write(const std::string& name, const std::string& text) const;
  // A config as a TOML file (every key), for tests that run the binary.
  std::filesystem::path write_config(const std::string& name, const Config& config) const;
  // Four short sentences in a fixed pseudo-random order, `lines` lines in all.
  std::filesystem::path write_corpus(const std::string& name, int lines) const;
  // Two line-aligned files, source.txt and target.txt, of `lines` sentences of 3 to 6 words:
  // each target word translates its source word ("the light" -> "la luz"), word for word.
  // Returns the source file; the target file is next to it.
  std::filesystem::path write_parallel_corpus(int lines) const;
  // Two line-aligned files, src.txt and tgt.txt, whose sources are longer than their targets
  // (S != T) and of varied length, so that every batch pads: for attention maps of each shape.
  // Returns the source file; the target file is next to it.
  std::filesystem::path write_uneven_parallel_corpus(int lines) const;
};

std::string read_file(const std::filesystem::path& path);

struct CommandResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

// Runs `program` with `args` (and `env` added to the environment) in the folder `cwd` (empty:
// this process's), its output captured in `log`.
CommandResult run_program(const std::string& program, const std::vector<std::string>& args,
                          const std::filesystem::path& log, const std::map<std::string, std::string>& env = {},
                          const std::filesystem::path& cwd = {});

// run_program in two halves, for a test that signals the process while it runs.
pid_t start_program(const std::string& program, const std::vector<std::string>& args, const std::filesystem::path& log,
                    const std::map<std::string, std::string>& env = {}, const std::filesystem::path& cwd = {});
CommandResult wait_program(pid_t pid, const std::filesystem::path& log);

// The headlab executable in the build tree.
std::string headlab_binary();

// run_program of the headlab executable in the build tree. The build passes HEADLAB_BINARY;
// otherwise it sits next to the test binary.
CommandResult run_headlab(const std::vector<std::string>& args, const std::filesystem::path& log,
                          const std::map<std::string, std::string>& env = {}, const std::filesystem::path& cwd = {});

// Sets (or with nullptr unsets) an environment variable for this process until the end of the
// scope, then restores it. The variable is process-wide: the tests of one process run one by one.
struct ScopedEnv {
  ScopedEnv(const std::string& name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  std::string name, old_value;
  bool was_set = false;
};

}  // namespace headlab::test
