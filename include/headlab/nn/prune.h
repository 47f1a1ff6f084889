// Physical pruning: a model without some attention heads (or FFN units, below), as opposed to
// masking them with a gate of 0. Attention site i (spec.attention_sites(): a layer of a decoder or encoder; an
// encoder_decoder's encoder self-attention, decoder self- and cross-attention) keeps H'_i of its
// H_i heads; the new model's spec has layer_heads = H' and its parameters are the old ones with
// the removed heads' rows of the site's Q/K/V projections (the fused qkv; cross-attention's query
// projection and fused K/V projection of the encoder's output; weight and bias) and columns of
// its output projection cut out, surviving gates copied. It computes what the masked model
// computes (a gate-0 head adds exactly 0 to the output projection), with fewer flops and, for
// cross heads, a smaller cross K/V cache. MHA only, in every kind (n_kv_heads == n_heads): with
// GQA/MQA several query heads read one K/V head, so heads can only be masked. A site that keeps
// no head is removed whole (layer_heads 0): the model adds its output projection's bias alone, as
// the masked model does.
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

// Why `keep` cannot be cut out of a model of `spec`, or "" when it can: a GQA/MQA kind of
// attention, a mask of the wrong shape. The one check of physical removal: pruned_spec
// throws it ("prune_heads: <reason>"), and headlab prune asks it before writing pruned_small.h5.
// An invalid spec throws as validate() does.
std::string prune_problem(const ModelSpec& spec, const HeadKeepMask& keep);

// The spec of the pruned model: layer_heads[i] = kept heads of site i, or empty when every site
// keeps all its kind's heads. Throws one line when prune_problem names one.
ModelSpec pruned_spec(const ModelSpec& spec, const HeadKeepMask& keep);

// The pruned model; `model` is unchanged.
template <typename T>
Model<T> prune_heads(const Model<T>& model, const HeadKeepMask& keep);

// Sets the gates of the named heads ([site][head] true = named, one entry per head of every
// attention site; io/head_list.h reads them from a command line) to 0, switched off as pruning
// does; the others keep theirs. A list of another shape is one line.
template <typename T>
void switch_off_heads(Model<T>& model, const HeadKeepMask& heads);

// FFN units: [mlp block][unit] over spec.mlp_block() order (the FFN gates' order), true = keep.
// Removing a unit cuts its row of the block's fc (weight and bias) and its column of the output
// projection; the model computes what the model with that unit's gate at 0 computes (the unit
// adds 0 to the projection), to float precision (the projection sums fewer terms), with fewer
// flops. Any kind of attention (GQA/MQA included); a block that keeps no unit is removed whole
// (mlp_units 0, its output projection's bias alone added).
using UnitKeepMask = std::vector<std::vector<bool>>;

template <typename T>
UnitKeepMask units_with_nonzero_gates(const Model<T>& model);
// Why `keep` cannot be cut out of a model of `spec`, or "": a mask of the wrong shape.
std::string prune_units_problem(const ModelSpec& spec, const UnitKeepMask& keep);
// The spec with mlp_units = kept units per block (empty when every block keeps d_mlp).
ModelSpec pruned_units_spec(const ModelSpec& spec, const UnitKeepMask& keep);
template <typename T>
Model<T> prune_units(const Model<T>& model, const UnitKeepMask& keep);

extern template HeadKeepMask heads_with_nonzero_gates<float>(const Model<float>&);
extern template HeadKeepMask heads_with_nonzero_gates<double>(const Model<double>&);
extern template Model<float> prune_heads<float>(const Model<float>&, const HeadKeepMask&);
extern template Model<double> prune_heads<double>(const Model<double>&, const HeadKeepMask&);
extern template void switch_off_heads<float>(Model<float>&, const HeadKeepMask&);
extern template void switch_off_heads<double>(Model<double>&, const HeadKeepMask&);
extern template UnitKeepMask units_with_nonzero_gates<float>(const Model<float>&);
extern template UnitKeepMask units_with_nonzero_gates<double>(const Model<double>&);
extern template Model<float> prune_units<float>(const Model<float>&, const UnitKeepMask&);
extern template Model<double> prune_units<double>(const Model<double>&, const UnitKeepMask&);

}  // namespace headlab
