#include "headlab/common/edit_distance.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace headlab {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1), next(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    next[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      next[j] = std::min({row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 2)});
    std::swap(row, next);
  }
  return row[b.size()];
}

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& c : candidates)
    if (const size_t d = edit_distance(name, c); d < best_distance) best_distance = d, best = c;
  return best_distance <= std::max<size_t>(2, name.size() / 2) ? best : "";
}

std::string unknown_choice(const std::string& what, const std::string& name, const std::vector<std::string>& choices) {
  const std::string message = "unknown " + what + " '" + name + "'";
  if (const std::string near = closest_name(name, choices); !near.empty())
    return message + "; did you mean '" + near + "'?";
  std::string expected;
  for (size_t i = 0; i < choices.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return message + " (expected " + expected + ")";
}

}  // namespace headlab
