// Activation patching and path patching (Meng et al. 2022; Wang et al. 2022, "Interpretability in
// the Wild"; Goldowsky-Dill et al. 2023; TransformerLens's patching module): run a model on a
// clean and a corrupted input of the same length, then rerun the corrupted one with one
// activation taken from the clean run, and see how much of the clean run's metric comes back.
//   head outputs   head h's output (every position) in layer l  (TL get_act_patch_attn_head_out_all_pos)
//   residual       the stream entering block l at position t    (TL get_act_patch_resid_pre)
//   q, k, v        head h's queries, or the keys or values it reads (TL ..._q/_k/_v_all_pos); in a
//                  GQA/MQA layer the keys and values are its K/V head's, which the query heads
//                  sharing it receive too
//   path           sender head s -> receiver head r through r's queries, keys or values only: r's
//                  input is the corrupted stream plus the change in s's direct output
//                  ((a_clean - a_corrupt) W_O^s), every other path frozen at the corrupted run;
//                  the receiver's new q, k or v then runs through the rest of the corrupted model.
// The metric is the mean loss over the inputs' scored targets, or the mean logit difference
// logit(answer) - logit(wrong) at each row's last position. Each patch reruns the model from the
// patched block only (Model::forward_from): the blocks below it are the corrupted run's.
//   PatchingInputs in = repeated_token_pairs(16, 8, vocab, 0);
//   ActivationPatching p = activation_patching(model, in);          // p.head_out[k], p.resid[l * T + t]
//   PathPatching pp = path_patching(model, in);                      // pp.score(kind, sender, receiver)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

struct PatchingInputs {
  int64_t rows = 0, seq_len = 0;
  std::vector<int32_t> clean, corrupt;  // [rows, T]
  std::vector<int32_t> targets;         // [rows, T], -1 = not scored: the loss metric's (both runs')
  int32_t answer = -1, wrong = -1;      // both >= 0: the logit-difference metric at the last position
  std::string metric_name() const { return answer >= 0 ? "logit_diff" : "loss"; }
};

// Generated pairs for any decoder (Olsson et al.'s repeated random tokens): clean rows are n
// random tokens twice, corrupted rows the same second copy after n fresh random tokens, so only
// the clean run can copy; scored targets are the second copy's tokens from its second on (what
// an induction head predicts). The loss metric.
PatchingInputs repeated_token_pairs(int64_t rows, int64_t half, int64_t vocab, uint64_t seed);

// Checks the inputs against the model (lengths, token ids, answer/wrong): one headlab::Error line.
void check_patching_inputs(const ModelSpec& spec, const PatchingInputs& in);

enum class PatchSite { q, k, v };
inline constexpr int kPatchSites = 3;
const char* patch_site_name(PatchSite site);  // "q", "k", "v"

struct ActivationPatching {
  double clean = 0, corrupt = 0;  // the metric of the two runs
  std::vector<std::string> labels;
  std::vector<int64_t> layer, head;
  std::vector<double> head_out;                      // [heads]
  std::array<std::vector<double>, kPatchSites> qkv;  // [site][heads]
  int64_t n_layers = 0, seq_len = 0;
  std::vector<double> resid;  // [layers, T]: block l's input at position t
  // [layers]: block l's input at every position and all its heads' outputs from the clean run at
  // once, which is the clean run from there on: the clean metric, bit for bit (a check).
  std::vector<double> all_patched;
  int64_t forwards = 0;  // model runs the patching took (from the patched block on)
  // (patched - corrupt) / (clean - corrupt): 1 = the clean run's metric fully back, 0 = no change.
  double restored(double patched) const { return (patched - corrupt) / (clean - corrupt); }
};
template <typename T>
ActivationPatching activation_patching(Model<T>& model, const PatchingInputs& inputs);

struct PathPatching {
  double clean = 0, corrupt = 0;
  std::vector<std::string> labels;
  std::vector<int64_t> layer, head;
  std::array<std::vector<double>, kPatchSites>
      scores;  // [site][sender * N + receiver]; NaN unless sender's layer < receiver's
  int64_t forwards = 0;
  double score(PatchSite site, size_t sender, size_t receiver) const {
    return scores[static_cast<size_t>(site)][sender * labels.size() + receiver];
  }
};
template <typename T>
PathPatching path_patching(Model<T>& model, const PatchingInputs& inputs);

// patching_heads.csv: label,layer,head,head_out,q,k,v (the metric after each patch) and the
// restored fractions; patching_resid.csv: layer,position,metric,restored; path_patching.csv:
// sender,receiver,sender_layer,receiver_layer,q,k,v (metrics) and q_restored,k_restored,v_restored.
void write_activation_patching(const std::string& dir, const ActivationPatching& p);
void write_path_patching(const std::string& path, const PathPatching& p);

}  // namespace headlab
