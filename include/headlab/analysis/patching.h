// Activation patching and path patching (Meng et al. 2022; Wang et al. 2022, "Interpretability in
// the Wild"; Goldowsky-Dill et al. 2023; TransformerLens's patching module): run a model on a
// clean and a corrupted input of the same length, then rerun the corrupted one with one
// activation taken from the clean run, and see how much of the clean run's metric comes back.
//   head outputs   head h's output (every position) at an attention site (TL
//                  get_act_patch_attn_head_out_all_pos)
//   residual       the stream entering block l at position t    (TL get_act_patch_resid_pre); an
//                  encoder_decoder's encoder blocks (source positions) and decoder blocks
//   q, k, v        head h's queries, or the keys or values it reads (TL ..._q/_k/_v_all_pos); in a
//                  GQA/MQA layer the keys and values are its K/V head's, which the query heads
//                  sharing it receive too; a cross-attention head's keys and values are computed
//                  from the encoder's output
//   path           sender head s -> receiver head r through r's queries, keys or values only: r's
//                  input is the corrupted stream plus the change in s's direct output
//                  ((a_clean - a_corrupt) W_O^s), every other path frozen at the corrupted run;
//                  the receiver's new q, k or v then runs through the rest of the corrupted model.
//                  In an encoder_decoder an encoder head reaches the encoder's later heads and,
//                  through the encoder's output (LN_enc of the stream plus its change), every
//                  cross-attention head's keys and values; a decoder self- or cross-attention
//                  head reaches the decoder's later self-attention heads and the queries of the
//                  later cross-attention heads. Pairs with no such path are NaN.
// The metric is the mean loss over the inputs' scored targets, or the mean logit difference
// logit(answer) - logit(wrong) at each row's last position. Each patch reruns the model from the
// patched attention site only (Model::forward_from): what comes before it is the corrupted run's.
//   PatchingInputs in = repeated_token_pairs(16, 8, vocab, 0);       // or source_swap_pairs(data, ...)
//   ActivationPatching p = activation_patching(model, in);          // p.head_out[k], p.resid[i]
//   PathPatching pp = path_patching(model, in);                      // pp.score(kind, sender, receiver)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

class TranslationDataset;  // data/translation.h

struct PatchingInputs {
  int64_t rows = 0, seq_len = 0;
  std::vector<int32_t> clean, corrupt;  // [rows, T]: the (decoder's) tokens
  std::vector<int32_t> targets;         // [rows, T], -1 = not scored: the loss metric's (both runs')
  int32_t answer = -1, wrong = -1;      // both >= 0: the logit-difference metric at the last position
  // An encoder_decoder's sources, [rows, S] each, S = source_len; empty otherwise. No padding:
  // every row's tokens are real.
  int64_t source_len = 0;
  std::vector<int32_t> clean_source, corrupt_source;
  std::string metric_name() const { return answer >= 0 ? "logit_diff" : "loss"; }
};

// Generated pairs for any decoder (Olsson et al.'s repeated random tokens): clean rows are n
// random tokens twice, corrupted rows the same second copy after n fresh random tokens, so only
// the clean run can copy; scored targets are the second copy's tokens from its second on (what
// an induction head predicts). The loss metric.
PatchingInputs repeated_token_pairs(int64_t rows, int64_t half, int64_t vocab, uint64_t seed);

// Pairs from a translation split: up to `rows` of its sentences sharing one source length and
// one target length (the most common pair of lengths; the first sentences in split order);
// clean row r is sentence r's source and reference, corrupted row r the next row's source (the
// last row takes the first's) with row r's reference. Both runs decode the same reference
// (teacher-forced: <s> + reference), so only the source differs, and patching shows where the
// source's information reaches the prediction of the reference. The loss metric over the
// reference's tokens and </s>. One headlab::Error line when no two sentences share lengths.
PatchingInputs source_swap_pairs(const TranslationDataset& data, Split split, int64_t rows);

// Checks the inputs against the model (lengths, token ids, answer/wrong): one headlab::Error line.
void check_patching_inputs(const ModelSpec& spec, const PatchingInputs& in);

enum class PatchSite { q, k, v };
inline constexpr int kPatchSites = 3;
const char* patch_site_name(PatchSite site);  // "q", "k", "v"

struct ActivationPatching {
  double clean = 0, corrupt = 0;  // the metric of the two runs
  // Every head, in attention-site order: head_label, its site's kind ("enc", "dec", "cross"),
  // layer within its stack and index.
  std::vector<std::string> labels, attention;
  std::vector<int64_t> layer, head;
  std::vector<double> head_out;                      // [heads]
  std::array<std::vector<double>, kPatchSites> qkv;  // [site][heads]
  // The residual stream entering each block at each position, in site order (an encoder_decoder's
  // encoder blocks over the source, then the decoder's): the metric, and where it was patched.
  std::vector<double> resid;
  std::vector<std::string> resid_stack;  // "enc" or "dec"
  std::vector<int64_t> resid_layer, resid_position;
  // [attention sites]: the stream entering site s and all its heads' outputs (and an
  // encoder_decoder's encoder output) from the clean run at once, which is the clean run from
  // there on: the clean metric, bit for bit (a check).
  std::vector<double> all_patched;
  int64_t forwards = 0;  // model runs the patching took (from the patched site on)
  // (patched - corrupt) / (clean - corrupt): 1 = the clean run's metric fully back, 0 = no change.
  double restored(double patched) const { return (patched - corrupt) / (clean - corrupt); }
};
template <typename T>
ActivationPatching activation_patching(Model<T>& model, const PatchingInputs& inputs);

struct PathPatching {
  double clean = 0, corrupt = 0;
  std::vector<std::string> labels, attention;  // as ActivationPatching's
  std::vector<int64_t> layer, head;
  std::array<std::vector<double>, kPatchSites>
      scores;  // [site][sender * N + receiver]; NaN where the sender has no path to that input
  int64_t forwards = 0;
  double score(PatchSite site, size_t sender, size_t receiver) const {
    return scores[static_cast<size_t>(site)][sender * labels.size() + receiver];
  }
};
template <typename T>
PathPatching path_patching(Model<T>& model, const PatchingInputs& inputs);

// patching_heads.csv: label,attention,layer,head,head_out,q,k,v (the metric after each patch) and
// the restored fractions; patching_resid.csv: stack,layer,position,metric,restored;
// path_patching.csv, a row per pair with a path: sender,receiver,sender_layer,receiver_layer,
// q,k,v (metrics; nan where that input has no path) and q_restored,k_restored,v_restored.
void write_activation_patching(const std::string& dir, const ActivationPatching& p);
void write_path_patching(const std::string& path, const PathPatching& p);

}  // namespace headlab
