// A list of heads as the command line names them (`headlab eval --mask 0:1,1:3`, `analyze
// --mask`): "L:H,L:H,..." (layer:head, 0-based, as heads.csv numbers them), read against the
// model's spec into the [layer][head] structure nn takes (nn/prune.h: switch_off_heads).
//   switch_off_heads(model, parse_head_list(text, model.spec(), "--mask"));
#pragma once

#include <string>

#include "headlab/nn/model.h"
#include "headlab/nn/prune.h"

namespace headlab {

// [layer][head] true = named, one entry per head of each layer of `spec`. A one-line error names
// `option` and the bad entry: not L:H, a layer or head the spec lacks, or a head named twice.
HeadKeepMask parse_head_list(const std::string& list, const ModelSpec& spec, const std::string& option);

}  // namespace headlab
