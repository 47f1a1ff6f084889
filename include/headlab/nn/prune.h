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

// Why `keep` cannot be cut out of a model of `spec`, or "" when it can: a GQA/MQA spec, a mask of
// the wrong shape, a layer left without heads. The one check of physical removal: pruned_spec
// throws it ("prune_heads: <reason>"), and headlab prune asks it before writing pruned_small.h5.
// An invalid spec throws as validate() does.
std::string prune_problem(const ModelSpec& spec, const HeadKeepMask& keep);

// The spec of the pruned model: layer_heads[l] = kept heads of layer l, or empty when every layer
// keeps all n_heads. Throws one line when prune_problem names one.
ModelSpec pruned_spec(const ModelSpec& spec, const HeadKeepMask& keep);

// The pruned model; `model` is unchanged.
template <typename T>
Model<T> prune_heads(const Model<T>& model, const HeadKeepMask& keep);

// Sets the gates of the named heads ([layer][head] true = named, one entry per head of the model;
// io/head_list.h reads them from a command line) to 0, switched off as pruning does; the others
// keep theirs. A list of another shape is one line.
template <typename T>
void switch_off_heads(Model<T>& model, const HeadKeepMask& heads);

extern template HeadKeepMask heads_with_nonzero_gates<float>(const Model<float>&);
extern template HeadKeepMask heads_with_nonzero_gates<double>(const Model<double>&);
extern template Model<float> prune_heads<float>(const Model<float>&, const HeadKeepMask&);
extern template Model<double> prune_heads<double>(const Model<double>&, const HeadKeepMask&);
extern template void switch_off_heads<float>(Model<float>&, const HeadKeepMask&);
extern template void switch_off_heads<double>(Model<double>&, const HeadKeepMask&);

}  // namespace headlab
