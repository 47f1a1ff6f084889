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

// diatheke and the three SWORD modules the Bible pairs use (KJV, RV1909, WEB).
inline bool have_sword_modules() {
  return std::system("command -v diatheke > /dev/null 2>&1") == 0 &&
         std::system(
             "diatheke -b system -k modulelist 2>/dev/null | grep -q '^engKJV2006eb :' && "
             "diatheke -b system -k modulelist 2>/dev/null | grep -q '^spaRV1909eb :' && "
             "diatheke -b system -k modulelist 2>/dev/null | grep -q '^engWEB2015eb :'") == 0;
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

// In a test function: skips it (or fails under HEADLAB_REQUIRE_DEPS=1) without the SWORD modules.
#define REQUIRE_SWORD()                                                             \
  if (!headlab::test::have_sword_modules()) {                                       \
    SKIP_FOR_MISSING_PACKAGE(                                                       \
        "diatheke or a SWORD module is missing (apt-get install diatheke "          \
        "sword-text-kjv sword-text-web sword-text-sparv): Bible pairs not tested"); \
    return;                                                                         \
  }
