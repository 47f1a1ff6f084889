#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "headlab/common/error.h"
#include "headlab/common/paths.h"
#include "support/scratch.h"

using namespace headlab;
namespace fs = std::filesystem;

TEST_CASE("the user cache is $XDG_CACHE_HOME/headlab, else ~/.cache/headlab", "[common][paths]") {
  test::ScopedEnv home("HOME", "/home/someone");
  {
    test::ScopedEnv xdg("XDG_CACHE_HOME", "/var/cache/someone");
    CHECK(user_cache_dir() == fs::path("/var/cache/someone/headlab"));
  }
  for (const char* ignored : {"", "relative/cache"}) {  // the XDG spec ignores both
    test::ScopedEnv xdg("XDG_CACHE_HOME", ignored);
    CHECK(user_cache_dir() == fs::path("/home/someone/.cache/headlab"));
  }
  test::ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  CHECK(user_cache_dir() == fs::path("/home/someone/.cache/headlab"));
  test::ScopedEnv no_home("HOME", nullptr);
  REQUIRE_THROWS_WITH(user_cache_dir(), Catch::Contains("neither XDG_CACHE_HOME nor HOME is set"));
}

TEST_CASE("a binary in the build tree finds the shared files in the source tree", "[common][paths]") {
  // headlab_tests sits in the build tree, like the headlab it was built with.
  REQUIRE(fs::equivalent(share_dir(), HEADLAB_SOURCE_DIR));
  CHECK(
      fs::equivalent(find_shared_file("configs/default.toml"), fs::path(HEADLAB_SOURCE_DIR) / "configs/default.toml"));
  CHECK(fs::equivalent(find_shared_file("plot/headlab_plot.py"),
                       fs::path(HEADLAB_SOURCE_DIR) / "src/plot/headlab_plot.py"));
  REQUIRE_THROWS_WITH(find_shared_file("configs/missing.toml"),
                      Catch::Contains("cannot find configs/missing.toml in ") && !Catch::Contains("\n"));
}
