// For a test that needs an optional Debian package (bible-kjv, python3-matplotlib): where the
// package is missing, a warning and the test is skipped; under HEADLAB_REQUIRE_DEPS=1 (.ci/run
// sets it, after .ci/install-deps has installed every package) a failure, so that CI cannot pass
// by skipping.
//   if (!have_bible) { SKIP_FOR_MISSING_PACKAGE("the `bible` program is not installed ..."); return; }
#pragma once

#include <cstdlib>
#include <string>

namespace headlab::test {

inline bool packages_required() {
  const char* v = std::getenv("HEADLAB_REQUIRE_DEPS");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace headlab::test

#define SKIP_FOR_MISSING_PACKAGE(message)     \
  do {                                        \
    if (headlab::test::packages_required()) { \
      FAIL(message);                          \
    } else {                                  \
      WARN(message);                          \
    }                                         \
  } while (0)
