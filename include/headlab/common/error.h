// headlab::Error and HEADLAB_CHECK: every bad input becomes one exception with one line that
// names the place, the argument and the values. cli/main.cpp catches it, prints the line and
// exits non-zero; library code never calls exit() or assert().
//   HEADLAB_CHECK(h % hkv == 0, "attention: n_kv_heads=" << hkv << " does not divide n_heads=" << h);
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace headlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The parts streamed into one string: a message built before it is thrown or returned (nn's
// spec_problem, the config's combined checks). concat("n_heads=", 4) == "n_heads=4".
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

}  // namespace headlab

#define HEADLAB_CHECK(condition, message_stream)           \
  do {                                                     \
    if (!(condition)) {                                    \
      std::ostringstream headlab_check_stream_;            \
      headlab_check_stream_ << message_stream;             \
      throw ::headlab::Error(headlab_check_stream_.str()); \
    }                                                      \
  } while (0)
