#include "headlab/analysis/patching.h"

#include <cmath>
#include <limits>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/common/hash.h"
#include "headlab/io/csv.h"
#include "headlab/nn/saved_forward.h"
#include "headlab/ops/attention.h"

namespace headlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A tensor that outlives the tape's resets (the arena is reset after every patched run).
template <typename T>
struct Kept {
  std::vector<T> storage;
  Tensor<T> tensor;
  void keep(const Tensor<T>& from) {
    storage.resize(static_cast<size_t>(from.numel()));
    tensor = Tensor<T>(storage.data(), from.shape());
    tensor.copy_from(from);
  }
};

// The two runs, saved, and the patched reruns from a block on.
template <typename T>
class Patcher {
 public:
  Patcher(Model<T>& model, const PatchingInputs& in) : model_(model), in_(in), tape_(arena_), no_grad_(tape_) {
    check_patching_inputs(model.spec(), in);
    clean_metric = run(in.clean.data(), clean_);
    corrupt_metric = run(in.corrupt.data(), corrupt_);
    const int64_t L = model.spec().n_layers;
    qkv_clean_.resize(static_cast<size_t>(L));
    qkv_corrupt_.resize(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) {
      qkv_clean_[static_cast<size_t>(l)].keep(qkv_of(clean_.block_input(l), l));
      qkv_corrupt_[static_cast<size_t>(l)].keep(qkv_of(corrupt_.block_input(l), l));
      tape_.reset();
    }
  }

  double clean_metric = 0, corrupt_metric = 0;
  int64_t forwards = 0;
  const SavedForward<T>& clean() const { return clean_; }
  const SavedForward<T>& corrupt() const { return corrupt_; }
  const Tensor<T>& qkv_clean(int64_t l) const { return qkv_clean_[static_cast<size_t>(l)].tensor; }
  const Tensor<T>& qkv_corrupt(int64_t l) const { return qkv_corrupt_[static_cast<size_t>(l)].tensor; }
  Arena& arena() { return arena_; }
  Tape<T>& tape() { return tape_; }

  // A copy of `t` in the arena (to patch; gone at the next reset).
  Tensor<T> copy(const Tensor<T>& t) {
    Tensor<T> out = arena_.template empty<T>(t.shape());
    out.copy_from(t);
    return out;
  }
  // Block l's fused q/k/v [B,T,H + 2 Hkv,Dh] for a stream x entering it, as the forward computes it.
  Tensor<T> qkv_of(const Tensor<T>& x, int64_t l) { return model_.attention_qkv(tape_, tape_.constant(x), l).value(); }

  // The corrupted run from block l on, with its input x and, when given, its attention output a.
  double from(int64_t l, const Tensor<T>& x, const Tensor<T>& a = {}) {
    const ModelInput input = model_input(in_.corrupt.data());
    const ModelOutput<T> out =
        model_.forward_from(tape_, input, l, tape_.constant(x), a.empty() ? Var<T>{} : tape_.constant(a));
    const double m = metric(out);
    ++forwards;
    tape_.reset();
    return m;
  }
  // The corrupted run from block l on with one slot of its fused q/k/v (a query head, or a K/V
  // head's keys or values) taken from `source` [B,T,H + 2 Hkv,Dh].
  double with_slot(int64_t l, int64_t slot, const Tensor<T>& source) {
    Tensor<T> qkv = copy(qkv_corrupt(l));
    qkv.narrow(2, slot, 1).copy_from(source.narrow(2, slot, 1));
    return from_qkv(l, qkv);
  }

 private:
  // The same with block l's attention recomputed from the q/k/v given (a patched copy of its own).
  double from_qkv(int64_t l, const Tensor<T>& qkv) {
    const AttentionShape s = model_.spec().attention_shape({AttentionKind::dec, l});
    AttentionOptions o;
    o.causal = true;
    const Var<T> a =
        attention(tape_.constant(qkv.narrow(2, 0, s.heads)), tape_.constant(qkv.narrow(2, s.heads, s.kv_heads)),
                  tape_.constant(qkv.narrow(2, s.heads + s.kv_heads, s.kv_heads)), o,
                  tape_.constant(model_.gates().value(static_cast<int>(l))));
    return from(l, corrupt_.block_input(l), a.value());
  }

  ModelInput model_input(const int32_t* tokens) const {
    ModelInput input;
    input.batch_size = in_.rows;
    input.seq_len = in_.seq_len;
    input.tokens = tokens;
    input.targets = in_.answer >= 0 ? nullptr : in_.targets.data();
    return input;
  }
  double metric(const ModelOutput<T>& out) const {
    if (in_.answer < 0) return static_cast<double>(out.loss.value().data()[0]);
    const int64_t V = model_.spec().vocab_size;
    double sum = 0;
    for (int64_t r = 0; r < in_.rows; ++r) {
      const T* logits = out.logits.value().data() + (r * in_.seq_len + in_.seq_len - 1) * V;
      sum += static_cast<double>(logits[in_.answer]) - static_cast<double>(logits[in_.wrong]);
    }
    return sum / static_cast<double>(in_.rows);
  }
  double run(const int32_t* tokens, SavedForward<T>& saved) {
    const ModelOutput<T> out = model_.forward(tape_, model_input(tokens), {});
    const double m = metric(out);
    saved.save(model_);
    tape_.reset();
    return m;
  }

  Model<T>& model_;
  const PatchingInputs& in_;
  Arena arena_;
  Tape<T> tape_;
  NoGradGuard<T> no_grad_;
  SavedForward<T> clean_, corrupt_;
  std::vector<Kept<T>> qkv_clean_, qkv_corrupt_;
};

// Which slot of the fused q/k/v a patch of query head h at `site` replaces: its query, or the K/V
// head it reads.
int64_t qkv_slot(PatchSite site, int64_t h, const AttentionShape& s) {
  const int64_t g = h / (s.heads / s.kv_heads);
  return site == PatchSite::q ? h : site == PatchSite::k ? s.heads + g : s.heads + s.kv_heads + g;
}

void check_one_stack(const ModelSpec& spec) {
  const ModelKindInfo& kind = model_kind_info(spec.kind);
  HEADLAB_CHECK(kind.lm_head && !kind.source, "patching: a " << kind.name
                                                             << " model; patching reads a decoder's LM head over one "
                                                                "stack (model.kind = decoder)");
}

}  // namespace

const char* patch_site_name(PatchSite site) {
  constexpr const char* kNames[kPatchSites] = {"q", "k", "v"};
  return kNames[static_cast<int>(site)];
}

PatchingInputs repeated_token_pairs(int64_t rows, int64_t half, int64_t vocab, uint64_t seed) {
  HEADLAB_CHECK(rows >= 1 && half >= 2 && vocab >= 2,
                "repeated_token_pairs: rows=" << rows << ", half=" << half << ", vocab=" << vocab
                                              << " (need rows >= 1, half >= 2, vocab >= 2)");
  PatchingInputs in;
  in.rows = rows;
  in.seq_len = 2 * half;
  const int64_t T = in.seq_len;
  in.clean.resize(static_cast<size_t>(rows * T));
  in.corrupt.resize(in.clean.size());
  in.targets.assign(in.clean.size(), -1);
  auto draw = [&](uint64_t stream, int64_t r, int64_t t) {
    return static_cast<int32_t>(
        splitmix64(hash_combine(hash_combine(hash_combine(seed, stream), static_cast<uint64_t>(r)),
                                static_cast<uint64_t>(t))) %
        static_cast<uint64_t>(vocab));
  };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < half; ++t) {
      const int32_t x = draw(0, r, t);
      in.clean[static_cast<size_t>(r * T + t)] = in.clean[static_cast<size_t>(r * T + half + t)] = x;
      in.corrupt[static_cast<size_t>(r * T + t)] = draw(1, r, t);
      in.corrupt[static_cast<size_t>(r * T + half + t)] = x;
    }
  for (int64_t r = 0; r < rows; ++r)  // position t predicts t + 1: the second copy from its second token
    for (int64_t t = half; t + 1 < T; ++t)
      in.targets[static_cast<size_t>(r * T + t)] = in.clean[static_cast<size_t>(r * T + t + 1)];
  return in;
}

void check_patching_inputs(const ModelSpec& spec, const PatchingInputs& in) {
  check_one_stack(spec);
  const auto n = static_cast<size_t>(in.rows * in.seq_len);
  HEADLAB_CHECK(in.rows >= 1 && in.clean.size() == n && in.corrupt.size() == n,
                "patching: the clean and corrupted inputs differ in length (" << in.clean.size() << " and "
                                                                              << in.corrupt.size() << " tokens)");
  HEADLAB_CHECK(in.seq_len >= 1 && in.seq_len <= spec.max_seq_len,
                "patching: " << in.seq_len << " tokens; the model takes 1 to " << spec.max_seq_len);
  for (const auto* tokens : {&in.clean, &in.corrupt})
    for (size_t i = 0; i < n; ++i)
      HEADLAB_CHECK((*tokens)[i] >= 0 && (*tokens)[i] < spec.vocab_size,
                    "patching: token " << (*tokens)[i] << " at position " << i % static_cast<size_t>(in.seq_len)
                                       << " is outside the model's vocabulary [0, " << spec.vocab_size << ")");
  HEADLAB_CHECK((in.answer < 0) == (in.wrong < 0), "patching: a logit difference needs both tokens");
  for (const int32_t token : {in.answer, in.wrong})
    HEADLAB_CHECK(token < spec.vocab_size, "patching: logit-difference token "
                                               << token << " is outside the model's vocabulary [0, " << spec.vocab_size
                                               << ")");
  if (in.answer < 0) {
    HEADLAB_CHECK(in.targets.size() == n, "patching: the loss metric needs a target per position");
    bool any = false;
    for (const int32_t t : in.targets) any = any || t >= 0;
    HEADLAB_CHECK(any, "patching: the loss metric has no scored target");
  }
}

template <typename T>
ActivationPatching activation_patching(Model<T>& model, const PatchingInputs& inputs) {
  Patcher<T> run(model, inputs);
  const ModelSpec& spec = model.spec();
  const int64_t L = spec.n_layers, T_ = inputs.seq_len;
  ActivationPatching p;
  p.clean = run.clean_metric;
  p.corrupt = run.corrupt_metric;
  p.n_layers = L;
  p.seq_len = T_;
  for (int64_t l = 0; l < L; ++l) {
    const AttentionShape s = spec.attention_shape({AttentionKind::dec, l});
    for (int64_t h = 0; h < s.heads; ++h) {
      p.labels.push_back(head_label({AttentionKind::dec, l}, h, true));
      p.layer.push_back(l);
      p.head.push_back(h);
      Tensor<T> a = run.copy(run.corrupt().attention(l));
      a.narrow(2, h, 1).copy_from(run.clean().attention(l).narrow(2, h, 1));
      p.head_out.push_back(run.from(l, run.corrupt().block_input(l), a));
      for (int site = 0; site < kPatchSites; ++site)
        p.qkv[static_cast<size_t>(site)].push_back(
            run.with_slot(l, qkv_slot(static_cast<PatchSite>(site), h, s), run.qkv_clean(l)));
    }
    for (int64_t t = 0; t < T_; ++t) {
      Tensor<T> x = run.copy(run.corrupt().block_input(l));
      x.narrow(1, t, 1).copy_from(run.clean().block_input(l).narrow(1, t, 1));
      p.resid.push_back(run.from(l, x));
    }
  }
  for (int64_t l = 0; l < L; ++l)
    p.all_patched.push_back(run.from(l, run.clean().block_input(l), run.clean().attention(l)));
  p.forwards = run.forwards;
  return p;
}

template <typename T>
PathPatching path_patching(Model<T>& model, const PatchingInputs& inputs) {
  Patcher<T> run(model, inputs);
  const ModelSpec& spec = model.spec();
  const int64_t L = spec.n_layers, C = spec.d_model;
  PathPatching p;
  p.clean = run.clean_metric;
  p.corrupt = run.corrupt_metric;
  std::vector<size_t> first_head(static_cast<size_t>(L));  // layer l's heads are first_head[l] + h
  for (int64_t l = 0; l < L; ++l) {
    first_head[static_cast<size_t>(l)] = p.labels.size();
    for (int64_t h = 0; h < spec.heads_at_site({AttentionKind::dec, l}); ++h) {
      p.labels.push_back(head_label({AttentionKind::dec, l}, h, true));
      p.layer.push_back(l);
      p.head.push_back(h);
    }
  }
  const size_t N = p.labels.size();
  for (auto& scores : p.scores) scores.assign(N * N, kNaN);
  for (size_t sender = 0; sender < N; ++sender) {
    const int64_t ls = p.layer[sender], hs = p.head[sender];
    // The sender's change in direct output: (a_clean - a_corrupt) W_O^s, [B,T,C] in double.
    const Tensor<T> a_clean = run.clean().attention(ls).narrow(2, hs, 1),
                    a_corrupt = run.corrupt().attention(ls).narrow(2, hs, 1);
    const Tensor<T> proj = model.params().value(model.param_index().blocks[static_cast<size_t>(ls)].proj.weight);
    const int64_t rows = inputs.rows * inputs.seq_len, Dh = a_clean.shape()[3], HDh = proj.shape()[1];
    std::vector<double> delta(static_cast<size_t>(rows * C), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t d = 0; d < Dh; ++d) {
        const int64_t b = i / inputs.seq_len, t = i % inputs.seq_len;
        const double diff = static_cast<double>(a_clean(b, t, 0, d)) - static_cast<double>(a_corrupt(b, t, 0, d));
        if (diff == 0) continue;
        for (int64_t c = 0; c < C; ++c)
          delta[static_cast<size_t>(i * C + c)] += diff * static_cast<double>(proj.data()[c * HDh + hs * Dh + d]);
      }
    for (int64_t lr = ls + 1; lr < L; ++lr) {
      const AttentionShape s = spec.attention_shape({AttentionKind::dec, lr});
      Tensor<T> x = run.copy(run.corrupt().block_input(lr));
      T* xd = x.data();
      for (int64_t i = 0; i < rows * C; ++i)
        xd[i] = static_cast<T>(static_cast<double>(xd[i]) + delta[static_cast<size_t>(i)]);
      Kept<T> qkv_sent;
      qkv_sent.keep(run.qkv_of(x, lr));
      run.tape().reset();
      for (int64_t hr = 0; hr < s.heads; ++hr) {
        const size_t receiver = first_head[static_cast<size_t>(lr)] + static_cast<size_t>(hr);
        for (int site = 0; site < kPatchSites; ++site)
          p.scores[static_cast<size_t>(site)][sender * N + receiver] =
              run.with_slot(lr, qkv_slot(static_cast<PatchSite>(site), hr, s), qkv_sent.tensor);
      }
    }
  }
  p.forwards = run.forwards;
  return p;
}

void write_activation_patching(const std::string& dir, const ActivationPatching& p) {
  std::vector<std::string> header = {"label", "layer", "head", "head_out"};
  for (int s = 0; s < kPatchSites; ++s) header.push_back(patch_site_name(static_cast<PatchSite>(s)));
  header.push_back("head_out_restored");
  for (int s = 0; s < kPatchSites; ++s)
    header.push_back(std::string(patch_site_name(static_cast<PatchSite>(s))) + "_restored");
  CsvWriter heads(header);
  for (size_t k = 0; k < p.labels.size(); ++k) {
    std::vector<std::string> row = {p.labels[k], std::to_string(p.layer[k]), std::to_string(p.head[k]),
                                    csv_number("%.6g", p.head_out[k])};
    for (const auto& v : p.qkv) row.push_back(csv_number("%.6g", v[k]));
    row.push_back(csv_number("%.6g", p.restored(p.head_out[k])));
    for (const auto& v : p.qkv) row.push_back(csv_number("%.6g", p.restored(v[k])));
    heads.row(row);
  }
  write_file_atomically(dir + "/patching_heads.csv", heads.text());
  CsvWriter resid({"layer", "position", "metric", "restored"});
  for (int64_t l = 0; l < p.n_layers; ++l)
    for (int64_t t = 0; t < p.seq_len; ++t) {
      const double m = p.resid[static_cast<size_t>(l * p.seq_len + t)];
      resid.row({std::to_string(l), std::to_string(t), csv_number("%.6g", m), csv_number("%.6g", p.restored(m))});
    }
  write_file_atomically(dir + "/patching_resid.csv", resid.text());
}

void write_path_patching(const std::string& path, const PathPatching& p) {
  CsvWriter csv({"sender", "receiver", "sender_layer", "receiver_layer", "q", "k", "v", "q_restored", "k_restored",
                 "v_restored"});
  const size_t N = p.labels.size();
  for (size_t a = 0; a < N; ++a)
    for (size_t r = 0; r < N; ++r) {
      if (p.layer[a] >= p.layer[r]) continue;
      std::vector<std::string> row = {p.labels[a], p.labels[r], std::to_string(p.layer[a]), std::to_string(p.layer[r])};
      for (int s = 0; s < kPatchSites; ++s) row.push_back(csv_number("%.6g", p.score(static_cast<PatchSite>(s), a, r)));
      for (int s = 0; s < kPatchSites; ++s)
        row.push_back(
            csv_number("%.6g", (p.score(static_cast<PatchSite>(s), a, r) - p.corrupt) / (p.clean - p.corrupt)));
      csv.row(row);
    }
  write_file_atomically(path, csv.text());
}

template ActivationPatching activation_patching<float>(Model<float>&, const PatchingInputs&);
template ActivationPatching activation_patching<double>(Model<double>&, const PatchingInputs&);
template PathPatching path_patching<float>(Model<float>&, const PatchingInputs&);
template PathPatching path_patching<double>(Model<double>&, const PatchingInputs&);

}  // namespace headlab
