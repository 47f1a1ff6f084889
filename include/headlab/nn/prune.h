// Physical head pruning: a model without some attention heads, as opposed to masking them with
// a gate of 0. Layer l keeps H'_l of its H_l heads; the new model's spec has layer_heads = H'
// and its parameters are the old ones with the removed heads' rows of the fused Q/K/V projection
// (weight and bias) and columns of the output projection cut out, surviving gates copied. It
// computes what the masked model computes (a gate-0 head adds exactly 0 to the output
// projection), with fewer flops. MHA only (n_kv_heads == n_heads): with GQA/MQA several query
// heads read one K/V head, so heads can only be masked. Every layer keeps at least one head.
//   HeadKeepMask keep = heads_with_nonzero_gates(model);   // keep[l][h], true = keep
//   Model<float> small = prune_heads(model, keep);          // save: train/checkpointing.h
#pragma once

#include <string>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

using HeadKeepMask = std::vector<std::vector<bool>>;  // [layer][head], true = keep

// The heads whose gate is not 0 (the masked model's surviving heads).
template <typename T>
HeadKeepMask heads_with_nonzero_gates(const Model<T>& model);

// The spec of the pruned model: layer_heads[l] = kept heads of layer l, or empty when every layer
// keeps all n_heads. Throws one line on a mask of the wrong shape, a layer left without heads,
// or a GQA/MQA spec.
ModelSpec pruned_spec(const ModelSpec& spec, const HeadKeepMask& keep);

// The pruned model; `model` is unchanged.
template <typename T>
Model<T> prune_heads(const Model<T>& model, const HeadKeepMask& keep);

// Heads named on the command line, "L:H,L:H,..." (layer:head, 0-based, as heads.csv numbers
// them): [layer][head] true = named. A one-line error names `option` and the bad entry: not
// L:H, a layer or head the spec lacks, or a head named twice.
HeadKeepMask parse_head_list(const std::string& list, const ModelSpec& spec, const std::string& option);
// Sets the gates of the named heads to 0 (switched off, as pruning does); the others keep theirs.
template <typename T>
void switch_off_heads(Model<T>& model, const HeadKeepMask& heads);

extern template HeadKeepMask heads_with_nonzero_gates<float>(const Model<float>&);
extern template HeadKeepMask heads_with_nonzero_gates<double>(const Model<double>&);
extern template Model<float> prune_heads<float>(const Model<float>&, const HeadKeepMask&);
extern template Model<double> prune_heads<double>(const Model<double>&, const HeadKeepMask&);
extern template void switch_off_heads<float>(Model<float>&, const HeadKeepMask&);
extern template void switch_off_heads<double>(Model<double>&, const HeadKeepMask&);

}  // namespace headlab
