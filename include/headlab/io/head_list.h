// A list of heads as the command line names them (`headlab eval --mask 0:1,1:3`, `analyze
// --mask enc.L0H3,cross.L1H2`), read against the model's spec into the [site][head] structure nn
// takes (nn/prune.h: switch_off_heads). Each entry is a head label as heads.csv writes it
// (nn/model.h: head_label): "<kind>.L<layer>H<head>" (kind enc, dec or cross; layer within its
// stack) in any model, or, in a model with one stack (decoder, encoder: its heads are `dec`),
// "L<layer>H<head>" or the older "LAYER:HEAD". All 0-based.
//   switch_off_heads(model, parse_head_list(text, model.spec(), "--mask"));
#pragma once

#include <string>

#include "headlab/nn/model.h"
#include "headlab/nn/prune.h"

namespace headlab {

// [site][head] true = named, one entry per head of each attention site of `spec`. A one-line
// error names `option` and the bad entry: not a head's name, a kind the model lacks (cross.L0H0
// on a decoder LM), an L:H on an encoder_decoder (which needs the kind), a layer or head the
// spec lacks, or a head named twice.
HeadKeepMask parse_head_list(const std::string& list, const ModelSpec& spec, const std::string& option);

}  // namespace headlab
