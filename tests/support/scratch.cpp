#include "support/scratch.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
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

fs::path ScratchDir::write_corpus(const std::string& name, int lines) const {
  const char* sentences[] = {"the cat sat on the mat.\n", "a dog ran in the park.\n", "the sun is warm today.\n",
                             "we read a book at night.\n"};
  std::ofstream out(dir / name);
  for (int i = 0; i < lines; ++i) out << sentences[(i * 7 + i / 3) % 4];
  return dir / name;
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
  std::vector<std::string> all = {program};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment is built before fork(): the child of a threaded process may only exec.
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) {
    const std::string item(*e);
    if (!env.count(item.substr(0, item.find('=')))) environment.push_back(item);
  }
  for (const auto& [key, value] : env) environment.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string dir = cwd.string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    if (!dir.empty() && ::chdir(dir.c_str()) != 0) ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  REQUIRE(pid > 0);
  return pid;
}

CommandResult wait_program(pid_t pid, const fs::path& log) {
  int status = 0;
  ::waitpid(pid, &status, 0);
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
