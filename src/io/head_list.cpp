#include "headlab/io/head_list.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "headlab/common/error.h"

namespace headlab {

HeadKeepMask parse_head_list(const std::string& list, const ModelSpec& spec, const std::string& option) {
  HeadKeepMask named;
  for (int64_t l = 0; l < spec.n_layers; ++l) named.emplace_back(static_cast<size_t>(spec.heads_in_layer(l)), false);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string entry = list.substr(start, end - start);
    const size_t colon = entry.find(':');
    long long layer = -1, head = -1;
    int consumed = 0;
    const bool parsed = colon != std::string::npos &&
                        std::sscanf(entry.c_str(), "%lld:%lld%n", &layer, &head, &consumed) == 2 &&
                        consumed == static_cast<int>(entry.size());
    HEADLAB_CHECK(parsed, option << ": '" << entry << "' is not LAYER:HEAD (e.g. " << option << " 0:1,1:3)");
    HEADLAB_CHECK(layer >= 0 && layer < spec.n_layers,
                  option << ": layer " << layer << " in '" << entry << "' is outside [0, " << spec.n_layers << ")");
    HEADLAB_CHECK(head >= 0 && head < spec.heads_in_layer(layer),
                  option << ": head " << head << " in '" << entry << "' is outside [0, " << spec.heads_in_layer(layer)
                         << ") (layer " << layer << "'s heads)");
    std::vector<bool>::reference slot = named[static_cast<size_t>(layer)][static_cast<size_t>(head)];
    HEADLAB_CHECK(!slot, option << ": head " << entry << " is named twice");
    slot = true;
    start = end + 1;
  }
  return named;
}

}  // namespace headlab
