// Physical head pruning: a model without some attention heads, as opposed to masking them with
// a gate of 0. Layer l keeps H'_l of its H_l heads; the new model's spec has layer_heads = H'
// and its parameters are the old ones with the removed heads' rows of the fused Q/K/V projection
// (weight and bias) and columns of the output projection cut out, surviving gates copied. It
// computes what the masked model computes (a gate-0 head adds exactly 0 to the output
// projection), with fewer flops. MHA only (n_kv_heads == n_heads): with GQA/MQA several query
// heads read one K/V head, so heads can only be masked. Every layer keeps at least one head.
// Decoder and encoder models only for now: an encoder_decoder's heads can be masked (its gates,
// one table per attention site), not yet removed.
//   HeadKeepMask keep = heads_with_nonzero_gates(model);   // keep[site][h], true = keep
//   Model<float> small = prune_heads(model, keep);          // save: train/checkpointing.h
#pragma once

#include <string>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

// [site][head] over spec.attention_sites() (the gates' order; for decoder and encoder models a
// site is a layer), true = keep (or, from io/head_list.h, true = named).
using HeadKeepMask = std::vector<std::vector<bool>>;

// The heads whose gate is not 0 (the masked model's surviving heads), per attention site.
template <typename T>
HeadKeepMask heads_with_nonzero_gates(const Model<T>& model);

// Why `keep` cannot be cut out of a model of `spec`, or "" when it can: an encoder_decoder, a
// GQA/MQA spec, a mask of the wrong shape, a layer left without heads. The one check of physical removal: pruned_spec
// throws it ("prune_heads: <reason>"), and headlab prune asks it before writing pruned_small.h5.
// An invalid spec throws as validate() does.
std::string prune_problem(const ModelSpec& spec, const HeadKeepMask& keep);

// The spec of the pruned model: layer_heads[l] = kept heads of layer l, or empty when every layer
// keeps all n_heads. Throws one line when prune_problem names one.
ModelSpec pruned_spec(const ModelSpec& spec, const HeadKeepMask& keep);

// The pruned model; `model` is unchanged.
template <typename T>
Model<T> prune_heads(const Model<T>& model, const HeadKeepMask& keep);

// Sets the gates of the named heads ([site][head] true = named, one entry per head of every
// attention site; io/head_list.h reads them from a command line) to 0, switched off as pruning
// does; the others keep theirs. A list of another shape is one line.
template <typename T>
void switch_off_heads(Model<T>& model, const HeadKeepMask& heads);

extern template HeadKeepMask heads_with_nonzero_gates<float>(const Model<float>&);
extern template HeadKeepMask heads_with_nonzero_gates<double>(const Model<double>&);
extern template Model<float> prune_heads<float>(const Model<float>&, const HeadKeepMask&);
extern template Model<double> prune_heads<double>(const Model<double>&, const HeadKeepMask&);
extern template void switch_off_heads<float>(Model<float>&, const HeadKeepMask&);
extern template void switch_off_heads<double>(Model<double>&, const HeadKeepMask&);

}  // namespace headlab
