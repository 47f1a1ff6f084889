#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "support/scratch.h"

using namespace headlab;
namespace fs = std::filesystem;

TEST_CASE("a FileLock excludes a second holder with one line naming the first, and dies with it", "[common]") {
  test::ScratchDir s("files");
  const fs::path path = s.dir / ".lock";
  std::optional<FileLock> first;
  first.emplace(path, "run folder x");
  CHECK_THROWS_WITH(
      FileLock(path, "run folder x"),
      Catch::Equals("run folder x is in use by another headlab process (pid " + std::to_string(::getpid()) + ")"));
  first.reset();
  CHECK_NOTHROW(FileLock(path, "run folder x"));  // released; the file left behind locks nothing
  CHECK(fs::exists(path));
  CHECK_THROWS_WITH(FileLock(s.dir / "missing" / ".lock", "x"), Catch::StartsWith("cannot create the lock file"));
}
