#include "headlab/io/head_list.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "headlab/common/error.h"

namespace headlab {

namespace {

// "%lld<sep>%lld" and nothing else, e.g. "0:1" or (after the L) "0H1".
bool two_numbers(const std::string& text, const char* format, long long& a, long long& b) {
  int consumed = 0;
  return std::sscanf(text.c_str(), format, &a, &b, &consumed) == 2 && consumed == static_cast<int>(text.size()) &&
         std::isdigit(static_cast<unsigned char>(text[0]));
}

}  // namespace

HeadKeepMask parse_head_list(const std::string& list, const ModelSpec& spec, const std::string& option) {
  const std::vector<AttentionSite> sites = spec.attention_sites();
  const bool one_stack = !model_kind_info(spec.kind).source;
  HeadKeepMask named;
  for (const AttentionSite& site : sites)
    named.emplace_back(static_cast<size_t>(spec.attention_shape(site).heads), false);
  const std::string example = one_stack ? option + " 0:1,1:3" : option + " enc.L0H3,cross.L1H2";
  const std::string form = one_stack ? "LAYER:HEAD" : "KIND.L<layer>H<head> (kind enc, dec or cross)";
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string entry = list.substr(start, end - start);
    long long layer = -1, head = -1;
    AttentionKind kind = AttentionKind::dec;
    bool parsed = false, has_kind = false;
    const size_t dot = entry.find('.');
    if (dot != std::string::npos) {
      const std::string name = entry.substr(0, dot), rest = entry.substr(dot + 1);
      for (const AttentionKind k : {AttentionKind::enc, AttentionKind::dec, AttentionKind::cross})
        if (name == attention_kind_name(k)) kind = k, has_kind = true;
      parsed = has_kind && rest.size() > 1 && rest[0] == 'L' && two_numbers(rest.substr(1), "%lldH%lld%n", layer, head);
    } else if (!entry.empty() && entry[0] == 'L') {
      parsed = two_numbers(entry.substr(1), "%lldH%lld%n", layer, head);
    } else {
      parsed = entry.find(':') != std::string::npos && two_numbers(entry, "%lld:%lld%n", layer, head);
    }
    HEADLAB_CHECK(parsed, option << ": '" << entry << "' is not " << form << " (e.g. " << example << ")");
    HEADLAB_CHECK(has_kind || one_stack, option << ": '" << entry
                                                << "' does not say which attention: an encoder_decoder's heads are "
                                                   "named KIND.L<layer>H<head> (e.g. "
                                                << example << ")");
    int64_t layers = 0, site = -1;
    for (size_t i = 0; i < sites.size(); ++i)
      if (sites[i].kind == kind) {
        if (sites[i].layer == layer) site = static_cast<int64_t>(i);
        ++layers;
      }
    HEADLAB_CHECK(layers > 0, option << ": '" << entry << "' names a head of kind " << attention_kind_name(kind)
                                     << ", which this " << model_kind_info(spec.kind).name
                                     << " model does not have (its heads are "
                                     << (one_stack ? "L<layer>H<head>" : "KIND.L<layer>H<head>") << ")");
    HEADLAB_CHECK(
        site >= 0,
        option << ": layer " << layer << " in '" << entry << "' is outside [0, " << layers << ")"
               << (has_kind ? std::string(" (the model's ") + attention_kind_name(kind) + " layers)" : std::string()));
    const int64_t heads = spec.attention_shape(sites[static_cast<size_t>(site)]).heads;
    HEADLAB_CHECK(head >= 0 && head < heads,
                  option << ": head " << head << " in '" << entry << "' is outside [0, " << heads << ") ("
                         << (has_kind ? std::string(attention_kind_name(kind)) + ".L" : std::string("layer ")) << layer
                         << "'s heads)");
    std::vector<bool>::reference slot = named[static_cast<size_t>(site)][static_cast<size_t>(head)];
    HEADLAB_CHECK(!slot, option << ": head " << entry << " is named twice");
    slot = true;
    start = end + 1;
  }
  return named;
}

}  // namespace headlab
