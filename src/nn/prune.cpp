// Physical head pruning: copy a model's parameters into a smaller one, head by head. At attention
// site i (H heads before, H' after, kept old indices k_0 < ... < k_{H'-1}, MHA so Hkv = H), every
// projection whose output rows are heads keeps the kept heads' Dh-row slices (weight and bias),
// block of heads by block of heads, and the output projection the kept heads' Dh columns:
//   self-attention qkv [(3H) Dh, C] -> [(3H') Dh, C]   (q, k, v blocks; encoder and decoder alike)
//   cross q            [H Dh, C]    -> [H' Dh, C]     (queries from the target stream)
//   cross kv           [(2H) Dh, C] -> [(2H') Dh, C]  (k, v blocks, from the encoder's output)
//   proj               [C, H Dh]    -> [C, H' Dh];    gates [H] -> [H']: gates[k_j].
// Everything else (embeddings, norms, proj bias, MLP, heads) is copied unchanged. FFN units
// (prune_units) likewise: fc [F, C] -> [F', C] rows, its bias, the output projection [C, F] ->
// [C, F'] columns and the FFN gates [F] -> [F'].
#include "headlab/nn/prune.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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

// The tensors of one site cut head by head: projections whose output rows are heads, with how
// many blocks of heads each holds, and the output projection, whose input columns are heads.
struct SiteHeadTensors {
  std::vector<std::pair<LinearParams, int64_t>> rows;
  LinearParams proj;
};

SiteHeadTensors site_head_tensors(const ParamIndex& index, AttentionSite site) {
  const auto l = static_cast<size_t>(site.layer);
  if (site.kind == AttentionKind::cross) {
    const CrossParams& c = index.blocks[l].cross;
    return {{{c.q, 1}, {c.kv, 2}}, c.proj};
  }
  const BlockParams& b = site.kind == AttentionKind::enc ? index.encoder_blocks[l] : index.blocks[l];
  return {{{b.qkv, 3}}, b.proj};
}

// How messages name site i: "layer 2" in a one-stack model, "site 3 (cross.L0)" in an encoder_decoder.
std::string site_name(const ModelSpec& spec, AttentionSite site, size_t i) {
  if (!model_kind_info(spec.kind).source) return concat("layer ", i);
  return concat("site ", i, " (", attention_kind_name(site.kind), ".L", site.layer, ")");
}

// With GQA/MQA several query heads read one K/V head, whose rows no single head can take along.
std::string gqa_problem(const ModelSpec& spec) {
  for (const AttentionSite& site : spec.attention_sites()) {
    const AttentionShape a = spec.kind_shape(site.kind);
    if (a.kv_heads == a.heads) continue;
    const std::string kind = site.kind == AttentionKind::dec ? "" : concat(attention_kind_name(site.kind), "_");
    return concat("physical removal needs multi-head attention (", kind, "n_kv_heads=", kind, "n_heads), got ", kind,
                  "n_kv_heads=", a.kv_heads, ", ", kind, "n_heads=", a.heads,
                  "; mask GQA/MQA heads with gates instead");
  }
  return "";
}

std::vector<int64_t> kept_indices(const std::vector<bool>& keep) {
  std::vector<int64_t> kept;
  for (size_t h = 0; h < keep.size(); ++h)
    if (keep[h]) kept.push_back(static_cast<int64_t>(h));
  return kept;
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
  if (std::string why = gqa_problem(spec); !why.empty()) return why;
  const std::vector<AttentionSite> sites = spec.attention_sites();
  const bool one_stack = !model_kind_info(spec.kind).source;
  if (keep.size() != sites.size())
    return one_stack ? concat("the keep mask has ", keep.size(), " layers, the model ", sites.size())
                     : concat("the keep mask has ", keep.size(), " sites, the model ", sites.size(),
                              " attention sites (encoder layers, then self and cross per decoder layer)");
  for (size_t i = 0; i < sites.size(); ++i) {
    const int64_t heads = spec.heads_at_site(sites[i]);
    if (static_cast<int64_t>(keep[i].size()) != heads)
      return concat("the keep mask of ", site_name(spec, sites[i], i), " has ", keep[i].size(), " heads, the ",
                    one_stack ? "layer " : "site ", heads);
  }
  return "";
}

ModelSpec pruned_spec(const ModelSpec& spec, const HeadKeepMask& keep) {
  if (const std::string why = prune_problem(spec, keep); !why.empty()) throw Error("prune_heads: " + why);
  ModelSpec out = spec;
  out.layer_heads.clear();
  out.active_heads.clear();  // the gates carry it; kept heads are the ones with non-zero gates
  bool all_full = true;
  const std::vector<AttentionSite> sites = spec.attention_sites();
  for (size_t i = 0; i < sites.size(); ++i) {
    const auto kept = static_cast<int64_t>(std::count(keep[i].begin(), keep[i].end(), true));
    out.layer_heads.push_back(kept);
    all_full = all_full && kept == spec.kind_shape(sites[i].kind).heads;
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
  auto cut = [&](int new_index, int old_index, int dim, int64_t blocks, int64_t Dh, const std::vector<int64_t>& kept,
                 int64_t H) {
    if (new_index < 0) return;  // no bias
    copy_kept_heads(to.value(new_index), from.value(old_index), dim, blocks, Dh, kept, H);
    per_head[static_cast<size_t>(new_index)] = true;
  };
  const std::vector<AttentionSite> sites = spec.attention_sites();
  for (size_t i = 0; i < sites.size(); ++i) {
    const std::vector<int64_t> kept = kept_indices(keep[i]);
    const int64_t H = spec.heads_at_site(sites[i]), Dh = spec.attention_shape(sites[i]).d_head;
    const SiteHeadTensors old_site = site_head_tensors(model.param_index(), sites[i]),
                          new_site = site_head_tensors(pruned.param_index(), sites[i]);
    for (size_t r = 0; r < new_site.rows.size(); ++r) {
      const auto& [new_params, blocks] = new_site.rows[r];
      const LinearParams old_params = old_site.rows[r].first;
      cut(new_params.weight, old_params.weight, 0, blocks, Dh, kept, H);
      cut(new_params.bias, old_params.bias, 0, blocks, Dh, kept, H);
    }
    cut(new_site.proj.weight, old_site.proj.weight, 1, 1, Dh, kept, H);
    copy_kept_heads(pruned.gates().value(static_cast<int>(i)), model.gates().value(static_cast<int>(i)), 0, 1, 1, kept,
                    H);
  }
  // The rest keep their shapes: copied by name (Parameters::index throws on a name `from` lacks).
  for (int i = 0; i < to.size(); ++i)
    if (!per_head[static_cast<size_t>(i)]) to.value(i).copy_from(from.value(to.spec(i).name));
  for (int i = 0; i < pruned.ffn_gates().size(); ++i) pruned.ffn_gates().value(i).copy_from(model.ffn_gates().value(i));
  return pruned;
}

template <typename T>
UnitKeepMask units_with_nonzero_gates(const Model<T>& model) {
  UnitKeepMask keep;
  for (int b = 0; b < model.ffn_gates().size(); ++b) {
    const Tensor<T> g = model.ffn_gates().value(b);
    keep.emplace_back();
    for (int64_t f = 0; f < g.numel(); ++f) keep.back().push_back(g(f) != T(0));
  }
  return keep;
}

std::string prune_units_problem(const ModelSpec& spec, const UnitKeepMask& keep) {
  validate(spec);
  if (static_cast<int64_t>(keep.size()) != spec.mlp_blocks())
    return concat("the keep mask has ", keep.size(), " MLP blocks, the model ", spec.mlp_blocks());
  for (size_t b = 0; b < keep.size(); ++b) {
    const int64_t units = spec.units_at_block(static_cast<int64_t>(b));
    if (static_cast<int64_t>(keep[b].size()) != units)
      return concat("the keep mask of MLP block ", b, " has ", keep[b].size(), " units, the block ", units);
  }
  return "";
}

ModelSpec pruned_units_spec(const ModelSpec& spec, const UnitKeepMask& keep) {
  if (const std::string why = prune_units_problem(spec, keep); !why.empty()) throw Error("prune_units: " + why);
  ModelSpec out = spec;
  out.mlp_units.clear();
  bool all_full = true;
  for (const std::vector<bool>& block : keep) {
    const auto kept = static_cast<int64_t>(std::count(block.begin(), block.end(), true));
    out.mlp_units.push_back(kept);
    all_full = all_full && kept == spec.d_mlp;
  }
  if (all_full) out.mlp_units.clear();
  validate(out);
  return out;
}

template <typename T>
Model<T> prune_units(const Model<T>& model, const UnitKeepMask& keep) {
  const ModelSpec& spec = model.spec();
  Model<T> pruned(pruned_units_spec(spec, keep));
  const Parameters<T>& from = model.params();
  Parameters<T>& to = pruned.params();
  std::vector<bool> per_unit(static_cast<size_t>(to.size()), false);
  // Unit f is row f of fc's weight and bias, column f of the output projection, entry f of the gates.
  auto cut = [&](const Tensor<T>& dst, const Tensor<T>& src, int dim, const std::vector<int64_t>& kept) {
    for (size_t j = 0; j < kept.size(); ++j)
      dst.narrow(dim, static_cast<int64_t>(j), 1).copy_from(src.narrow(dim, kept[j], 1));
  };
  const ParamIndex &old_index = model.param_index(), &new_index = pruned.param_index();
  const bool source = model_kind_info(spec.kind).source;
  for (int64_t b = 0; b < spec.mlp_blocks(); ++b) {
    const std::vector<int64_t> kept = kept_indices(keep[static_cast<size_t>(b)]);
    const bool encoder = source && b < spec.n_encoder_layers;
    const auto l = static_cast<size_t>(encoder || !source ? b : b - spec.n_encoder_layers);
    const BlockParams& o = encoder ? old_index.encoder_blocks[l] : old_index.blocks[l];
    const BlockParams& n = encoder ? new_index.encoder_blocks[l] : new_index.blocks[l];
    for (const auto& [dst, src, dim] : {std::tuple{n.fc.weight, o.fc.weight, 0}, std::tuple{n.fc.bias, o.fc.bias, 0},
                                        std::tuple{n.mlp_proj.weight, o.mlp_proj.weight, 1}}) {
      if (dst < 0) continue;  // no bias
      cut(to.value(dst), from.value(src), dim, kept);
      per_unit[static_cast<size_t>(dst)] = true;
    }
    cut(pruned.ffn_gates().value(static_cast<int>(b)), model.ffn_gates().value(static_cast<int>(b)), 0, kept);
  }
  for (int i = 0; i < to.size(); ++i)
    if (!per_unit[static_cast<size_t>(i)]) to.value(i).copy_from(from.value(to.spec(i).name));
  for (int i = 0; i < pruned.gates().size(); ++i) pruned.gates().value(i).copy_from(model.gates().value(i));
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
template UnitKeepMask units_with_nonzero_gates<float>(const Model<float>&);
template UnitKeepMask units_with_nonzero_gates<double>(const Model<double>&);
template Model<float> prune_units<float>(const Model<float>&, const UnitKeepMask&);
template Model<double> prune_units<double>(const Model<double>&, const UnitKeepMask&);

}  // namespace headlab
