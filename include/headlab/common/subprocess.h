// Child processes, started one way (the sweep's runs, `headlab plot`'s Python, the Bible export's
// `bible`, the tests' runs of the binary). Everything the child needs is prepared before fork(); after it the child
// calls only async-signal-safe functions and then exec, as the parent may have threads (OpenMP, the batch prefetcher).
//   ChildProcess child;
//   child.args = {"/usr/bin/python3", "script.py"};
//   child.env = current_environment();  child.stderr_fd = fd;
//   const pid_t pid = start_child(child);  ...  const int status = wait_child(pid);
//   const int status = run_child_reading_lines(child, [&](std::string_view line) { ... });
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace headlab {

struct ChildProcess {
  std::vector<std::string> args;                      // args[0]: the program; without a '/', looked up in PATH
  std::vector<std::string> env;                       // the child's whole environment, "NAME=value" entries
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;  // dup2'ed onto 0, 1, 2; -1: inherited
  std::string working_dir;                            // "": this process's
  bool own_process_group = false;                     // a Ctrl-C at the terminal reaches the parent only
  bool ends_with_parent = false;                      // SIGTERM when the parent dies, even by kill -9 (Linux)
};

// Whether `program` (no '/') is an executable file in one of $PATH's folders (unset PATH: /usr/bin:/bin).
bool program_on_path(const std::string& program);

// This process's environment, as "NAME=value" entries.
std::vector<std::string> current_environment();

// fork + exec; throws headlab::Error if fork fails. If exec fails, the child writes
// "cannot execute PROGRAM" to its stderr and exits with 127.
pid_t start_child(const ChildProcess& child);

// waitpid(pid) until it returns (EINTR retried): the raw status for WIFEXITED and friends.
int wait_child(pid_t pid);

// Runs `child` to its end with its stdout (or stderr) on a pipe, that fd of `child` ignored,
// calling on_line for every line, without its '\n' (and a '\r' before it); returns wait_child's
// status. If on_line throws, the pipe is closed and the child reaped before the exception goes on.
enum class ChildStream { out, err };
int run_child_reading_lines(ChildProcess child, const std::function<void(std::string_view)>& on_line,
                            ChildStream stream = ChildStream::out);

}  // namespace headlab
