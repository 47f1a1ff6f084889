#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "headlab/common/subprocess.h"

using namespace headlab;

namespace {

ChildProcess shell(const std::string& script) {
  ChildProcess child;
  child.args = {"/bin/sh", "-c", script};
  child.env = current_environment();
  return child;
}

}  // namespace

TEST_CASE("run_child_reading_lines gives every line of the child's stdout and its exit status", "[common]") {
  std::vector<std::string> lines;
  const int status = run_child_reading_lines(shell("printf 'one\\r\\n\\ntwo\\nlast without newline'; exit 3"),
                                             [&](std::string_view line) { lines.emplace_back(line); });
  CHECK(lines == std::vector<std::string>{"one", "", "two", "last without newline"});
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
}

TEST_CASE("run_child_reading_lines reports a program that cannot start as exit status 127", "[common]") {
  ChildProcess child;
  child.args = {"headlab-no-such-program"};
  child.env = current_environment();
  int calls = 0;
  const int status = run_child_reading_lines(child, [&](std::string_view) { ++calls; });
  CHECK(calls == 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 127);
}

TEST_CASE("an exception from the line callback reaps the child and goes on", "[common]") {
  // The child would print forever: closing the pipe must end it (SIGPIPE) so the call returns.
  int calls = 0;
  CHECK_THROWS_WITH(run_child_reading_lines(shell("yes"),
                                            [&](std::string_view) {
                                              if (++calls == 3) throw std::runtime_error("stop");
                                            }),
                    "stop");
  CHECK(calls == 3);
}

TEST_CASE("run_child_reading_lines can read the child's stderr instead", "[common]") {
  std::vector<std::string> lines;
  const int status = run_child_reading_lines(
      shell("echo out; echo err1 >&2; echo err2 >&2"), [&](std::string_view line) { lines.emplace_back(line); },
      ChildStream::err);
  CHECK(lines == std::vector<std::string>{"err1", "err2"});
  CHECK(WIFEXITED(status));
}
