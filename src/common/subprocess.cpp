#include "headlab/common/subprocess.h"

#include <signal.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <sys/wait.h>

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "headlab/common/error.h"

extern char** environ;

namespace headlab {

bool program_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

pid_t start_child(const ChildProcess& child) {
  HEADLAB_CHECK(!child.args.empty(), "start_child: no program given");
  std::vector<char*> argv, envp;
  for (const std::string& a : child.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : child.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string exec_failed = "cannot execute " + child.args[0] + "\n";
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (child.own_process_group) ::setpgid(0, 0);
#if defined(__linux__)
    if (child.ends_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(130);  // the parent died before prctl
    }
#endif
    if (child.stdin_fd >= 0) ::dup2(child.stdin_fd, STDIN_FILENO);
    if (child.stdout_fd >= 0) ::dup2(child.stdout_fd, STDOUT_FILENO);
    if (child.stderr_fd >= 0) ::dup2(child.stderr_fd, STDERR_FILENO);
    if (!child.working_dir.empty() && ::chdir(child.working_dir.c_str()) != 0) ::_exit(126);
    ::execvpe(argv[0], argv.data(), envp.data());
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    ::_exit(127);
  }
  HEADLAB_CHECK(pid > 0, "cannot start " << child.args[0] << ": fork failed");
  return pid;
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

int run_child_reading_lines(ChildProcess child, const std::function<void(std::string_view)>& on_line,
                            ChildStream stream) {
  int fds[2];
  // Close-on-exec: no other child started meanwhile keeps the pipe open (dup2 onto the child's
  // stdout or stderr clears the flag there).
  HEADLAB_CHECK(::pipe2(fds, O_CLOEXEC) == 0,
                "cannot start " << child.args.at(0) << ": pipe: " << std::strerror(errno));
  (stream == ChildStream::out ? child.stdout_fd : child.stderr_fd) = fds[1];
  pid_t pid = -1;
  try {
    pid = start_child(child);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  std::FILE* in = ::fdopen(fds[0], "r");
  if (in == nullptr) {
    ::close(fds[0]);
    wait_child(pid);
    HEADLAB_CHECK(false, "cannot read the output of " << child.args[0] << ": " << std::strerror(errno));
  }
  char* line = nullptr;
  size_t capacity = 0;
  try {
    for (ssize_t length; (length = ::getline(&line, &capacity, in)) > 0;) {
      std::string_view text(line, static_cast<size_t>(length));
      if (text.back() == '\n') text.remove_suffix(1);
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      on_line(text);
    }
  } catch (...) {
    std::free(line);
    std::fclose(in);  // the child gets SIGPIPE at its next write
    wait_child(pid);
    throw;
  }
  std::free(line);
  std::fclose(in);
  return wait_child(pid);
}

}  // namespace headlab
