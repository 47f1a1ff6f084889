#include "headlab/common/subprocess.h"

#include <signal.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <sys/wait.h>

#include <cerrno>

#include "headlab/common/error.h"

extern char** environ;

namespace headlab {

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

}  // namespace headlab
