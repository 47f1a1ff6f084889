// Physical head pruning: copy a model's parameters into a smaller one, head by head. In layer l
// (H heads before, H' after, kept old indices k_0 < ... < k_{H'-1}, MHA so Hkv = H):
//   qkv weight [(3H) Dh, C] -> [(3H') Dh, C]: within each of the q, k and v blocks, new head j's
//                              Dh rows are old head k_j's (the bias alike);
//   proj weight [C, H Dh]   -> [C, H' Dh]: new head j's Dh columns are old head k_j's;
//   gates [H]               -> [H']: gates[k_j].
// Everything else (embeddings, norms, proj bias, MLP, heads) is copied unchanged.
#include "headlab/nn/prune.h"

#include <algorithm>
#include <sstream>
#include <string>

#include "headlab/common/error.h"

namespace headlab {

namespace {

// Copies the Dh-wide slices of the kept heads along `dim`, in `blocks` consecutive blocks of
// heads (3 for the fused q/k/v rows, 1 for the output projection's columns or the gates).
template <typename T>
void copy_kept_heads(const Tensor<T>& to, const Tensor<T>& from, int dim, int64_t blocks, int64_t width,
                     const std::vector<int64_t>& kept, int64_t old_heads) {
  const auto new_heads = static_cast<int64_t>(kept.size());
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < new_heads; ++j)
      to.narrow(dim, (b * new_heads + j) * width, width)
          .copy_from(from.narrow(dim, (b * old_heads + kept[static_cast<size_t>(j)]) * width, width));
}

}  // namespace

template <typename T>
HeadKeepMask heads_with_nonzero_gates(const Model<T>& model) {
  HeadKeepMask keep;
  for (int l = 0; l < model.gates().size(); ++l) {
    const Tensor<T> g = model.gates().value(l);
    keep.emplace_back();
    for (int64_t h = 0; h < g.numel(); ++h) keep.back().push_back(g(h) != T(0));
  }
  return keep;
}

std::string prune_problem(const ModelSpec& spec, const HeadKeepMask& keep) {
  validate(spec);
  std::ostringstream why;
  if (model_kind_info(spec.kind).source) return "physical removal of encoder_decoder heads is not supported yet";
  if (spec.n_kv_heads != spec.n_heads) {
    why << "physical removal needs multi-head attention (n_kv_heads=n_heads), got n_kv_heads=" << spec.n_kv_heads
        << ", n_heads=" << spec.n_heads << "; mask GQA/MQA heads with gates instead";
    return why.str();
  }
  if (static_cast<int64_t>(keep.size()) != spec.n_layers) {
    why << "the keep mask has " << keep.size() << " layers, the model " << spec.n_layers;
    return why.str();
  }
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const std::vector<bool>& layer = keep[static_cast<size_t>(l)];
    if (static_cast<int64_t>(layer.size()) != spec.heads_in_layer(l)) {
      why << "the keep mask of layer " << l << " has " << layer.size() << " heads, the layer "
          << spec.heads_in_layer(l);
      return why.str();
    }
    if (std::none_of(layer.begin(), layer.end(), [](bool k) { return k; })) {
      why << "layer " << l << " would keep no head (at least one per layer must remain)";
      return why.str();
    }
  }
  return "";
}

ModelSpec pruned_spec(const ModelSpec& spec, const HeadKeepMask& keep) {
  if (const std::string why = prune_problem(spec, keep); !why.empty()) throw Error("prune_heads: " + why);
  ModelSpec out = spec;
  out.layer_heads.clear();
  out.active_heads.clear();  // the gates carry it; kept heads are the ones with non-zero gates
  bool all_full = true;
  for (const std::vector<bool>& layer : keep) {
    const auto kept = static_cast<int64_t>(std::count(layer.begin(), layer.end(), true));
    out.layer_heads.push_back(kept);
    all_full = all_full && kept == spec.n_heads;
  }
  if (all_full) out.layer_heads.clear();  // an unpruned model keeps the plain spec
  validate(out);
  return out;
}

template <typename T>
Model<T> prune_heads(const Model<T>& model, const HeadKeepMask& keep) {
  const ModelSpec& spec = model.spec();
  Model<T> pruned(pruned_spec(spec, keep));
  const Parameters<T>& from = model.params();
  Parameters<T>& to = pruned.params();
  std::vector<bool> per_head(static_cast<size_t>(to.size()), false);  // the tensors copy_kept_heads fills
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    std::vector<int64_t> kept;
    for (size_t h = 0; h < keep[static_cast<size_t>(l)].size(); ++h)
      if (keep[static_cast<size_t>(l)][h]) kept.push_back(static_cast<int64_t>(h));
    const int64_t H = spec.heads_in_layer(l), Dh = spec.d_head;
    const BlockParams &old_block = model.param_index().blocks[static_cast<size_t>(l)],
                      &new_block = pruned.param_index().blocks[static_cast<size_t>(l)];
    copy_kept_heads(to.value(new_block.qkv.weight), from.value(old_block.qkv.weight), 0, 3, Dh, kept, H);
    if (new_block.qkv.bias >= 0)
      copy_kept_heads(to.value(new_block.qkv.bias), from.value(old_block.qkv.bias), 0, 3, Dh, kept, H);
    copy_kept_heads(to.value(new_block.proj.weight), from.value(old_block.proj.weight), 1, 1, Dh, kept, H);
    copy_kept_heads(pruned.gates().value(static_cast<int>(l)), model.gates().value(static_cast<int>(l)), 0, 1, 1, kept,
                    H);
    for (int i : {new_block.qkv.weight, new_block.qkv.bias, new_block.proj.weight})
      if (i >= 0) per_head[static_cast<size_t>(i)] = true;
  }
  // The rest keep their shapes: copied by name (Parameters::index throws on a name `from` lacks).
  for (int i = 0; i < to.size(); ++i)
    if (!per_head[static_cast<size_t>(i)]) to.value(i).copy_from(from.value(to.spec(i).name));
  return pruned;
}

template <typename T>
void switch_off_heads(Model<T>& model, const HeadKeepMask& heads) {
  HEADLAB_CHECK(static_cast<int>(heads.size()) == model.gates().size(),
                "switch_off_heads: the list has " << heads.size() << " layers, the model " << model.gates().size());
  for (int l = 0; l < model.gates().size(); ++l)
    HEADLAB_CHECK(static_cast<int64_t>(heads[static_cast<size_t>(l)].size()) == model.gates().value(l).numel(),
                  "switch_off_heads: the list has " << heads[static_cast<size_t>(l)].size() << " heads in layer " << l
                                                    << ", the model " << model.gates().value(l).numel());
  for (int l = 0; l < model.gates().size(); ++l) {
    Tensor<T> g = model.gates().value(l);
    for (int64_t h = 0; h < g.numel(); ++h)
      if (heads[static_cast<size_t>(l)][static_cast<size_t>(h)]) g(h) = T(0);
  }
}

template void switch_off_heads<float>(Model<float>&, const HeadKeepMask&);
template void switch_off_heads<double>(Model<double>&, const HeadKeepMask&);
template HeadKeepMask heads_with_nonzero_gates<float>(const Model<float>&);
template HeadKeepMask heads_with_nonzero_gates<double>(const Model<double>&);
template Model<float> prune_heads<float>(const Model<float>&, const HeadKeepMask&);
template Model<double> prune_heads<double>(const Model<double>&, const HeadKeepMask&);

}  // namespace headlab
