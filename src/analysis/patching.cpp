#include "headlab/analysis/patching.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/common/hash.h"
#include "headlab/data/translation.h"
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

// An attention site's queries, keys and values (Model::attention_inputs), kept.
template <typename T>
struct KeptQkv {
  std::array<Kept<T>, kPatchSites> parts;  // q [B,T,H,Dh], k and v [B,S,Hkv,Dh]
  const Tensor<T>& operator[](PatchSite site) const { return parts[static_cast<size_t>(site)].tensor; }
};

// Which head of its tensor a patch of query head h at `site` replaces: h's query, or the K/V
// head it reads.
int64_t patched_head(PatchSite site, int64_t h, const AttentionShape& s) {
  return site == PatchSite::q ? h : h / (s.heads / s.kv_heads);
}

// The two runs, saved, and the patched reruns from an attention site on.
template <typename T>
class Patcher {
 public:
  Patcher(Model<T>& model, const PatchingInputs& in)
      : model_(model), in_(in), sites_(model.spec().attention_sites()), tape_(arena_), no_grad_(tape_) {
    check_patching_inputs(model.spec(), in);
    clean_metric = run(clean_input(), clean_);
    corrupt_metric = run(corrupt_input(), corrupt_);
    qkv_clean_.resize(sites_.size());
    qkv_corrupt_.resize(sites_.size());
    for (int64_t s = 0; s < n_sites(); ++s) {
      keep_inputs(s, clean_.site_input(s), clean_.memory(), qkv_clean_[static_cast<size_t>(s)]);
      keep_inputs(s, corrupt_.site_input(s), corrupt_.memory(), qkv_corrupt_[static_cast<size_t>(s)]);
    }
  }

  double clean_metric = 0, corrupt_metric = 0;
  int64_t forwards = 0;
  int64_t n_sites() const { return static_cast<int64_t>(sites_.size()); }
  AttentionSite site(int64_t s) const { return sites_[static_cast<size_t>(s)]; }
  const SavedForward<T>& clean() const { return clean_; }
  const SavedForward<T>& corrupt() const { return corrupt_; }
  const KeptQkv<T>& qkv_clean(int64_t s) const { return qkv_clean_[static_cast<size_t>(s)]; }
  Arena& arena() { return arena_; }
  Tape<T>& tape() { return tape_; }

  // A copy of `t` in the arena (to patch; gone at the next reset).
  Tensor<T> copy(const Tensor<T>& t) {
    Tensor<T> out = arena_.template empty<T>(t.shape());
    out.copy_from(t);
    return out;
  }
  // Site s's queries, keys and values for a stream x entering it (and, at a cross site, the
  // encoder's output `memory`), as the forward computes them, into `out`.
  void keep_inputs(int64_t s, const Tensor<T>& x, const Tensor<T>& memory, KeptQkv<T>& out) {
    const auto qkv =
        model_.attention_inputs(tape_, s, tape_.constant(x), memory.empty() ? Var<T>{} : tape_.constant(memory));
    out.parts[0].keep(qkv.q.value());
    out.parts[1].keep(qkv.k.value());
    out.parts[2].keep(qkv.v.value());
    tape_.reset();
  }
  // An encoder_decoder's memory for the corrupted encoder's last stream plus `delta` [B,S,C].
  Tensor<T> memory_plus(const std::vector<double>& delta) {
    Tensor<T> x = copy(corrupt_.encoder_final_residual());
    add_to(x, delta);
    return model_.encoder_output(tape_, tape_.constant(x)).value();
  }

  // The corrupted run from site s on with the stream x entering it and, when given, its
  // attention output a and the encoder's output `memory` (default: the corrupted run's).
  double from(int64_t s, const Tensor<T>& x, const Tensor<T>& a = {}, const Tensor<T>& memory = {}) {
    const Tensor<T>& m = memory.empty() ? corrupt_.memory() : memory;
    const ModelOutput<T> out =
        model_.forward_from(tape_, corrupt_input(), s, tape_.constant(x), a.empty() ? Var<T>{} : tape_.constant(a),
                            m.empty() ? Var<T>{} : tape_.constant(m));
    const double metric_value = metric(out);
    ++forwards;
    tape_.reset();
    return metric_value;
  }
  // The corrupted run from site s on with query head h's queries, or the keys or values it
  // reads, taken from `source` (site s's, computed from another stream).
  double with_head(int64_t s, PatchSite which, int64_t h, const KeptQkv<T>& source) {
    // The corrupted run's q, k and v, read as kept; only the patched one is copied.
    const KeptQkv<T>& corrupt = qkv_corrupt_[static_cast<size_t>(s)];
    std::array<Tensor<T>, kPatchSites> qkv;
    for (int i = 0; i < kPatchSites; ++i) qkv[static_cast<size_t>(i)] = corrupt[static_cast<PatchSite>(i)];
    const int64_t g = patched_head(which, h, model_.spec().attention_shape(site(s)));
    Tensor<T>& patched = qkv[static_cast<size_t>(which)];
    patched = copy(patched);
    patched.narrow(2, g, 1).copy_from(source[which].narrow(2, g, 1));
    const Var<T> a = model_.site_attention(tape_, s, corrupt_input(),
                                           {tape_.constant(qkv[0]), tape_.constant(qkv[1]), tape_.constant(qkv[2])});
    return from(s, corrupt_.site_input(s), a.value());
  }

  static void add_to(Tensor<T>& x, const std::vector<double>& delta) {
    T* xd = x.data();
    for (int64_t i = 0; i < x.numel(); ++i)
      xd[i] = static_cast<T>(static_cast<double>(xd[i]) + delta[static_cast<size_t>(i)]);
  }

 private:
  ModelInput input(const std::vector<int32_t>& tokens, const std::vector<int32_t>& source) const {
    ModelInput input;
    input.batch_size = in_.rows;
    input.seq_len = in_.seq_len;
    input.tokens = tokens.data();
    input.targets = in_.answer >= 0 ? nullptr : in_.targets.data();
    if (in_.source_len > 0) {
      input.source_len = in_.source_len;
      input.source_tokens = source.data();
    }
    return input;
  }
  ModelInput clean_input() const { return input(in_.clean, in_.clean_source); }
  ModelInput corrupt_input() const { return input(in_.corrupt, in_.corrupt_source); }
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
  double run(const ModelInput& input, SavedForward<T>& saved) {
    const ModelOutput<T> out = model_.forward(tape_, input, {});
    const double m = metric(out);
    saved.save(model_);
    tape_.reset();
    return m;
  }

  Model<T>& model_;
  const PatchingInputs& in_;
  std::vector<AttentionSite> sites_;
  Arena arena_;
  Tape<T> tape_;
  NoGradGuard<T> no_grad_;
  SavedForward<T> clean_, corrupt_;
  std::vector<KeptQkv<T>> qkv_clean_, qkv_corrupt_;
};

// Every head of the model in site order, as both results list them.
template <typename Result>
void list_heads(const ModelSpec& spec, Result& p, std::vector<size_t>* first_head = nullptr) {
  const bool one_stack = !model_kind_info(spec.kind).source;
  for (const AttentionSite& site : spec.attention_sites()) {
    if (first_head != nullptr) first_head->push_back(p.labels.size());
    for (int64_t h = 0; h < spec.heads_at_site(site); ++h) {
      p.labels.push_back(head_label(site, h, one_stack));
      p.attention.push_back(attention_kind_name(site.kind));
      p.layer.push_back(site.layer);
      p.head.push_back(h);
    }
  }
}

// Head hs's change in direct output at site s: (a_clean - a_corrupt) W_O^s, [B,P,C] in double.
template <typename T>
std::vector<double> direct_output_change(const Model<T>& model, const Patcher<T>& run, int64_t s, int64_t hs) {
  const AttentionSite site = run.site(s);
  const Tensor<T> a_clean = run.clean().attention(s).narrow(2, hs, 1),
                  a_corrupt = run.corrupt().attention(s).narrow(2, hs, 1);  // [B,P,1,Dh]
  const ParamIndex& index = model.param_index();
  const bool encoder = site.kind == AttentionKind::enc && model_kind_info(model.spec().kind).source;
  const BlockParams& block = (encoder ? index.encoder_blocks : index.blocks)[static_cast<size_t>(site.layer)];
  const Tensor<T> proj =
      model.params().value(site.kind == AttentionKind::cross ? block.cross.proj.weight : block.proj.weight);
  const int64_t rows = a_clean.size(0) * a_clean.size(1), P = a_clean.size(1), Dh = a_clean.size(3), HDh = proj.size(1),
                C = proj.size(0);
  std::vector<double> delta(static_cast<size_t>(rows * C), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t d = 0; d < Dh; ++d) {
      const int64_t b = i / P, t = i % P;
      const double diff = static_cast<double>(a_clean(b, t, 0, d)) - static_cast<double>(a_corrupt(b, t, 0, d));
      if (diff == 0) continue;
      for (int64_t c = 0; c < C; ++c)
        delta[static_cast<size_t>(i * C + c)] += diff * static_cast<double>(proj.data()[c * HDh + hs * Dh + d]);
    }
  return delta;
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

PatchingInputs source_swap_pairs(const TranslationDataset& data, Split split, int64_t rows) {
  HEADLAB_CHECK(rows >= 2, "source_swap_pairs: " << rows << " rows; swapping sources needs 2 or more");
  const std::vector<TranslationSentence>& sentences = data.sentences(split);
  // The most common (source length, target length), the shorter first on a tie; sentences with
  // a source already taken are skipped (a swap with an equal source corrupts nothing).
  std::map<std::pair<size_t, size_t>, std::vector<size_t>> by_lengths;
  std::set<std::vector<int32_t>> seen;
  for (size_t i = 0; i < sentences.size(); ++i)
    if (seen.insert(sentences[i].source_ids).second)
      by_lengths[{sentences[i].source_ids.size(), sentences[i].target_ids.size()}].push_back(i);
  const std::vector<size_t>* group = nullptr;
  for (const auto& [lengths, members] : by_lengths)
    if (group == nullptr || members.size() > group->size()) group = &members;
  HEADLAB_CHECK(group != nullptr && group->size() >= 2,
                "source_swap_pairs: no two " << split_name(split) << " sentences of " << data.name()
                                             << " share a source and a target length; give --prompt, --corrupt and "
                                                "--target");
  const SpecialTokens specials = data.tokenizer()->specials();
  PatchingInputs in;
  in.rows = std::min<int64_t>(rows, static_cast<int64_t>(group->size()));
  const size_t m = sentences[group->front()].source_ids.size(), n = sentences[group->front()].target_ids.size();
  in.source_len = static_cast<int64_t>(m + 1);
  in.seq_len = static_cast<int64_t>(n + 1);
  for (int64_t r = 0; r < in.rows; ++r) {
    const TranslationSentence& own = sentences[(*group)[static_cast<size_t>(r)]];
    const TranslationSentence& next = sentences[(*group)[static_cast<size_t>((r + 1) % in.rows)]];
    for (const auto* source : {&own, &next}) {
      std::vector<int32_t>& side = source == &own ? in.clean_source : in.corrupt_source;
      side.insert(side.end(), source->source_ids.begin(), source->source_ids.end());
      side.push_back(specials.eos);
    }
    for (std::vector<int32_t>* side : {&in.clean, &in.corrupt}) {  // <s> + the reference, in both runs
      side->push_back(specials.bos);
      side->insert(side->end(), own.target_ids.begin(), own.target_ids.end());
    }
    in.targets.insert(in.targets.end(), own.target_ids.begin(), own.target_ids.end());
    in.targets.push_back(specials.eos);
  }
  return in;
}

void check_patching_inputs(const ModelSpec& spec, const PatchingInputs& in) {
  const ModelKindInfo& kind = model_kind_info(spec.kind);
  HEADLAB_CHECK(kind.lm_head, "patching: a " << kind.name
                                             << " model; patching reads an LM head (model.kind = decoder or "
                                                "encoder_decoder)");
  const auto n = static_cast<size_t>(in.rows * in.seq_len);
  HEADLAB_CHECK(in.rows >= 1 && in.clean.size() == n && in.corrupt.size() == n,
                "patching: the clean and corrupted inputs differ in length (" << in.clean.size() << " and "
                                                                              << in.corrupt.size() << " tokens)");
  HEADLAB_CHECK(in.seq_len >= 1 && in.seq_len <= spec.max_seq_len,
                "patching: " << in.seq_len << " tokens; the model takes 1 to " << spec.max_seq_len);
  const auto n_source = static_cast<size_t>(in.rows * in.source_len);
  if (kind.source) {
    HEADLAB_CHECK(in.source_len >= 1 && in.clean_source.size() == n_source && in.corrupt_source.size() == n_source,
                  "patching: an encoder_decoder needs clean and corrupted sources of one length (got "
                      << in.clean_source.size() << " and " << in.corrupt_source.size() << " tokens)");
    HEADLAB_CHECK(in.source_len <= spec.max_seq_len,
                  "patching: a source of " << in.source_len << " tokens; the model takes 1 to " << spec.max_seq_len);
  } else {
    HEADLAB_CHECK(in.source_len == 0 && in.clean_source.empty() && in.corrupt_source.empty(),
                  "patching: a source given to a " << kind.name << " model, which reads none");
  }
  const std::pair<const std::vector<int32_t>*, const char*> sides[] = {{&in.clean, "position"},
                                                                       {&in.corrupt, "position"},
                                                                       {&in.clean_source, "source position"},
                                                                       {&in.corrupt_source, "source position"}};
  for (const auto& [tokens, where] : sides) {
    const auto T = static_cast<size_t>(tokens == &in.clean || tokens == &in.corrupt ? in.seq_len : in.source_len);
    for (size_t i = 0; i < tokens->size(); ++i)
      HEADLAB_CHECK((*tokens)[i] >= 0 && (*tokens)[i] < spec.vocab_size,
                    "patching: token " << (*tokens)[i] << " at " << where << " " << i % T
                                       << " is outside the model's vocabulary [0, " << spec.vocab_size << ")");
  }
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
  ActivationPatching p;
  p.clean = run.clean_metric;
  p.corrupt = run.corrupt_metric;
  list_heads(model.spec(), p);
  for (int64_t s = 0; s < run.n_sites(); ++s) {
    const AttentionSite site = run.site(s);
    for (int64_t h = 0; h < model.spec().heads_at_site(site); ++h) {
      Tensor<T> a = run.copy(run.corrupt().attention(s));
      a.narrow(2, h, 1).copy_from(run.clean().attention(s).narrow(2, h, 1));
      p.head_out.push_back(run.from(s, run.corrupt().site_input(s), a));
      for (int which = 0; which < kPatchSites; ++which)
        p.qkv[static_cast<size_t>(which)].push_back(
            run.with_head(s, static_cast<PatchSite>(which), h, run.qkv_clean(s)));
    }
    if (site.kind == AttentionKind::cross) continue;  // a cross site's stream is inside its block
    const Tensor<T>& clean = run.clean().site_input(s);
    for (int64_t t = 0; t < clean.size(1); ++t) {
      Tensor<T> x = run.copy(run.corrupt().site_input(s));
      x.narrow(1, t, 1).copy_from(clean.narrow(1, t, 1));
      p.resid.push_back(run.from(s, x));
      p.resid_stack.push_back(site.kind == AttentionKind::enc && model_kind_info(model.spec().kind).source ? "enc"
                                                                                                           : "dec");
      p.resid_layer.push_back(site.layer);
      p.resid_position.push_back(t);
    }
  }
  for (int64_t s = 0; s < run.n_sites(); ++s)
    p.all_patched.push_back(run.from(s, run.clean().site_input(s), run.clean().attention(s), run.clean().memory()));
  p.forwards = run.forwards;
  return p;
}

template <typename T>
PathPatching path_patching(Model<T>& model, const PatchingInputs& inputs) {
  Patcher<T> run(model, inputs);
  const ModelSpec& spec = model.spec();
  const bool two_stacks = model_kind_info(spec.kind).source;
  PathPatching p;
  p.clean = run.clean_metric;
  p.corrupt = run.corrupt_metric;
  std::vector<size_t> first_head;  // site s's heads are first_head[s] + h
  list_heads(spec, p, &first_head);
  const size_t N = p.labels.size();
  for (auto& scores : p.scores) scores.assign(N * N, kNaN);
  // Receiver site r's heads, each input in `reached` computed from `sent`.
  auto receive = [&](size_t sender, int64_t r, const KeptQkv<T>& sent, std::initializer_list<PatchSite> reached) {
    for (int64_t hr = 0; hr < spec.heads_at_site(run.site(r)); ++hr)
      for (const PatchSite which : reached)
        p.scores[static_cast<size_t>(which)][sender * N + first_head[static_cast<size_t>(r)] +
                                             static_cast<size_t>(hr)] = run.with_head(r, which, hr, sent);
  };
  KeptQkv<T> sent;
  for (int64_t s = 0; s < run.n_sites(); ++s) {
    const AttentionSite from = run.site(s);
    const bool encoder_sender = two_stacks && from.kind == AttentionKind::enc;
    for (int64_t hs = 0; hs < spec.heads_at_site(from); ++hs) {
      const size_t sender = first_head[static_cast<size_t>(s)] + static_cast<size_t>(hs);
      const std::vector<double> delta = direct_output_change(model, run, s, hs);
      std::vector<T> memory_storage;  // an encoder sender's memory, for the cross sites' keys and values
      Tensor<T> memory;
      for (int64_t r = s + 1; r < run.n_sites(); ++r) {
        const AttentionSite to = run.site(r);
        const bool same_stack = (to.kind == AttentionKind::enc) == encoder_sender;
        if (same_stack && to.kind != AttentionKind::cross) {  // the stream entering r carries the change
          Tensor<T> x = run.copy(run.corrupt().site_input(r));
          Patcher<T>::add_to(x, delta);
          run.keep_inputs(r, x, run.corrupt().memory(), sent);
          receive(sender, r, sent, {PatchSite::q, PatchSite::k, PatchSite::v});
        } else if (same_stack) {  // a decoder head reaches a later cross site's queries
          Tensor<T> x = run.copy(run.corrupt().site_input(r));
          Patcher<T>::add_to(x, delta);
          run.keep_inputs(r, x, run.corrupt().memory(), sent);
          receive(sender, r, sent, {PatchSite::q});
        } else if (to.kind == AttentionKind::cross) {  // an encoder head reaches every cross site's keys and values
          if (memory.empty()) {
            const Tensor<T> m = run.memory_plus(delta);
            memory_storage.assign(m.data(), m.data() + m.numel());
            memory = Tensor<T>(memory_storage.data(), m.shape());
            run.tape().reset();
          }
          run.keep_inputs(r, run.corrupt().site_input(r), memory, sent);
          receive(sender, r, sent, {PatchSite::k, PatchSite::v});
        }
      }
    }
  }
  p.forwards = run.forwards;
  return p;
}

void write_activation_patching(const std::string& dir, const ActivationPatching& p) {
  std::vector<std::string> header = {"label", "attention", "layer", "head", "head_out"};
  for (int s = 0; s < kPatchSites; ++s) header.push_back(patch_site_name(static_cast<PatchSite>(s)));
  header.push_back("head_out_restored");
  for (int s = 0; s < kPatchSites; ++s)
    header.push_back(std::string(patch_site_name(static_cast<PatchSite>(s))) + "_restored");
  CsvWriter heads(header);
  for (size_t k = 0; k < p.labels.size(); ++k) {
    std::vector<std::string> row = {p.labels[k], p.attention[k], std::to_string(p.layer[k]), std::to_string(p.head[k]),
                                    csv_number("%.6g", p.head_out[k])};
    for (const auto& v : p.qkv) row.push_back(csv_number("%.6g", v[k]));
    row.push_back(csv_number("%.6g", p.restored(p.head_out[k])));
    for (const auto& v : p.qkv) row.push_back(csv_number("%.6g", p.restored(v[k])));
    heads.row(row);
  }
  write_file_atomically(dir + "/patching_heads.csv", heads.text());
  CsvWriter resid({"stack", "layer", "position", "metric", "restored"});
  for (size_t i = 0; i < p.resid.size(); ++i)
    resid.row({p.resid_stack[i], std::to_string(p.resid_layer[i]), std::to_string(p.resid_position[i]),
               csv_number("%.6g", p.resid[i]), csv_number("%.6g", p.restored(p.resid[i]))});
  write_file_atomically(dir + "/patching_resid.csv", resid.text());
}

void write_path_patching(const std::string& path, const PathPatching& p) {
  CsvWriter csv({"sender", "receiver", "sender_layer", "receiver_layer", "q", "k", "v", "q_restored", "k_restored",
                 "v_restored"});
  const size_t N = p.labels.size();
  for (size_t a = 0; a < N; ++a)
    for (size_t r = 0; r < N; ++r) {
      bool path_exists = false;
      for (int s = 0; s < kPatchSites; ++s)
        path_exists = path_exists || !std::isnan(p.score(static_cast<PatchSite>(s), a, r));
      if (!path_exists) continue;
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
