#include "support/scratch.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "headlab/common/subprocess.h"
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace headlab::test {

ScratchDir::ScratchDir(const std::string& prefix) {
  static int counter = 0;
  dir = fs::temp_directory_path() /
        ("headlab_" + prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

fs::path ScratchDir::write(const std::string& name, const std::string& text) const {
  std::ofstream(dir / name) << text;
  return dir / name;
}

fs::path ScratchDir::write_config(const std::string& name, const Config& config) const {
  return write(name, to_toml(config));
}

fs::path ScratchDir::write_corpus(const std::string& name, int lines) const {
  const char* sentences[] = {"the cat sat on the mat.\n", "a dog ran in the park.\n", "the sun is warm today.\n",
                             "we read a book at night.\n"};
  std::ofstream out(dir / name);
  for (int i = 0; i < lines; ++i) out << sentences[(i * 7 + i / 3) % 4];
  return dir / name;
}

fs::path ScratchDir::write_parallel_corpus(int lines) const {
  const char* source_words[] = {"the", "light", "water", "earth", "god", "said", "was", "good", "night", "day"};
  const char* target_words[] = {"la", "luz", "agua", "tierra", "dios", "dijo", "era", "buena", "noche", "dia"};
  std::ofstream source(dir / "source.txt"), target(dir / "target.txt");
  uint64_t state = 12345;  // a fixed LCG: the same files on every machine
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int i = 0; i < lines; ++i) {
    const uint64_t words = 3 + next(4);
    for (uint64_t w = 0; w < words; ++w) {
      const uint64_t k = next(10);
      source << (w ? " " : "") << source_words[k];
      target << (w ? " " : "") << target_words[k];
    }
    source << "\n";
    target << "\n";
  }
  return dir / "source.txt";
}

fs::path ScratchDir::write_uneven_parallel_corpus(int lines) const {
  std::string source, target;
  for (int i = 0; i < lines; ++i) {
    source += "src ";
    source.append(static_cast<size_t>(3 + i % 7), static_cast<char>('a' + i % 26));
    source += '\n';
    target += 't';
    target.append(static_cast<size_t>(1 + i % 3), static_cast<char>('A' + i % 26));
    target += '\n';
  }
  write("tgt.txt", target);
  return write("src.txt", source);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

pid_t start_program(const std::string& program, const std::vector<std::string>& args, const fs::path& log,
                    const std::map<std::string, std::string>& env, const fs::path& cwd) {
  REQUIRE(::access(program.c_str(), X_OK) == 0);
  ChildProcess child;
  child.args = {program};
  child.args.insert(child.args.end(), args.begin(), args.end());
  for (const std::string& item : current_environment())
    if (!env.count(item.substr(0, item.find('=')))) child.env.push_back(item);
  for (const auto& [key, value] : env) child.env.push_back(key + "=" + value);
  child.working_dir = cwd.string();
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  child.stdout_fd = child.stderr_fd = fd;
  const pid_t pid = start_child(child);
  ::close(fd);
  return pid;
}

CommandResult wait_program(pid_t pid, const fs::path& log) {
  const int status = wait_child(pid);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_file(log)};
}

CommandResult run_program(const std::string& program, const std::vector<std::string>& args, const fs::path& log,
                          const std::map<std::string, std::string>& env, const fs::path& cwd) {
  return wait_program(start_program(program, args, log, env, cwd), log);
}

std::string headlab_binary() {
#ifdef HEADLAB_BINARY
  return HEADLAB_BINARY;
#else
  return (fs::read_symlink("/proc/self/exe").parent_path() / "headlab").string();
#endif
}

CommandResult run_headlab(const std::vector<std::string>& args, const fs::path& log,
                          const std::map<std::string, std::string>& env, const fs::path& cwd) {
  return run_program(headlab_binary(), args, log, env, cwd);  // REQUIREs the binary: build the `headlab` target first
}

ScopedEnv::ScopedEnv(const std::string& name, const char* value) : name(name) {
  if (const char* old = std::getenv(name.c_str())) was_set = true, old_value = old;
  if (value)
    ::setenv(name.c_str(), value, 1);
  else
    ::unsetenv(name.c_str());
}

ScopedEnv::~ScopedEnv() {
  if (was_set)
    ::setenv(name.c_str(), old_value.c_str(), 1);
  else
    ::unsetenv(name.c_str());
}

}  // namespace headlab::test
