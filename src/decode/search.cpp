// Greedy and beam search over the KV cache. See include/headlab/decode/search.h for the rules.
// Sentences go in chunks of batch_sentences, longest sources first (less padding), each decoded
// by `beam` cache rows side by side; results come back in the input order.
#include "headlab/decode/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "headlab/common/error.h"
#include "headlab/nn/kv_cache.h"
#include "headlab/ops/fast_exp.h"

namespace headlab {

namespace {

constexpr double kDead = -std::numeric_limits<double>::infinity();

struct Candidate {
  double score;  // the hypothesis' sum of log p with this token
  int64_t beam;
  int32_t token;
};

// Higher score first; ties to the lower beam, then the lower token.
bool better(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

struct Finished {
  std::vector<int32_t> tokens;  // without </s>
  double normalized;
};

struct Sentence {
  int64_t max_len = 0;  // target tokens counting </s>
  std::vector<Finished> finished;
  bool done = false;
};

// What a step needs of one row of logits: log sum_v exp(logit_v), in double, and the row's k best
// tokens by logit (ties to the lower id), optionally without one token. log p(v) = logit_v -
// log_sum, so these k are the row's k best continuations.
double log_sum_exp(const float* logits, int64_t V) {
  float max = logits[0];
  for (int64_t v = 1; v < V; ++v) max = std::max(max, logits[v]);
  // fast_exp (2 ulp; inlined, so the loop vectorises) of logit - max <= 0, summed in double.
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t v = 0; v < V; ++v) sum += static_cast<double>(fast_exp(logits[v] - max));
  return static_cast<double>(max) + std::log(sum);
}

void best_tokens(const float* logits, int64_t V, int64_t k, int32_t excluded, int32_t* out) {
  int64_t n = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (v == excluded || (n == k && logits[v] <= logits[out[k - 1]])) continue;
    int64_t i = n < k ? n++ : k - 1;  // the slot it takes, then moved up past every smaller one
    while (i > 0 && logits[out[i - 1]] < logits[v]) {
      out[i] = out[i - 1];
      --i;
    }
    out[i] = static_cast<int32_t>(v);
  }
  std::fill(out + n, out + k, -1);
}

class ChunkSearch {
 public:
  ChunkSearch(Model<float>& model, const std::vector<const std::vector<int32_t>*>& sources, const SpecialIds& ids,
              const SearchOptions& options)
      : model_(model),
        ids_(ids),
        beam_(options.beam),
        min_len_(options.min_len),
        lenpen_(options.length_penalty),
        n_(sources.size()) {
    int64_t S = 0, capacity = 0;
    sentences_.resize(n_);
    for (size_t i = 0; i < n_; ++i) {
      S = std::max<int64_t>(S, static_cast<int64_t>(sources[i]->size()));
      sentences_[i].max_len = max_target_tokens(model.spec(), static_cast<int64_t>(sources[i]->size()), options);
      capacity = std::max(capacity, sentences_[i].max_len);
    }
    source_.assign(n_ * static_cast<size_t>(S), ids.pad);
    source_padding_.assign(source_.size(), 0);
    for (size_t i = 0; i < n_; ++i)
      for (size_t s = 0; s < sources[i]->size(); ++s) {
        source_[i * S + s] = (*sources[i])[s];
        source_padding_[i * S + s] = 1;
      }
    S_ = S;
    if (options.use_cache) cache_.emplace(model.spec(), rows(), capacity, S);
  }

  // encoded: the chunk's cross K/V from an earlier decoding, used instead of the encoder; else,
  // with `keep`, the encoder's are appended to it (EncodedSources).
  std::vector<std::vector<int32_t>> run(const KvCache<float>* encoded = nullptr,
                                        std::vector<KvCache<float>>* keep = nullptr) {
    Arena arena;
    Tape<float> tape(arena);
    NoGradGuard<float> no_grad(tape);
    if (cache_ && encoded != nullptr) {
      cache_->copy_sources(*encoded);
    } else if (cache_) {
      model_.start_decoding(tape, source_input(static_cast<int64_t>(n_)), *cache_);
      tape.reset();
      if (keep != nullptr) keep->emplace_back(model_.spec(), static_cast<int64_t>(n_), 1, S_).copy_sources(*cache_);
    }
    // Every beam starts from <s>; only beam 0 of a sentence is live at the first step, so the
    // beams do not all pick the same tokens.
    scores_.assign(static_cast<size_t>(rows()), kDead);
    for (size_t i = 0; i < n_; ++i) scores_[i * beam_] = 0;
    histories_.assign(static_cast<size_t>(rows()), {});
    std::vector<int32_t> tokens(static_cast<size_t>(rows()), ids_.bos), parents(static_cast<size_t>(rows()));
    for (int64_t step = 0; !all_done(); ++step) {
      const float* logits =
          cache_ ? model_.decode_step(tape, {rows(), 1, tokens.data(), nullptr, nullptr}, *cache_).logits.value().data()
                 : recomputed_logits(tape, step);
      // Rows of finished sentences continue nothing: they stay where they are and read <pad>.
      std::iota(parents.begin(), parents.end(), 0);
      std::fill(tokens.begin(), tokens.end(), ids_.pad);
      next_scores_.assign(static_cast<size_t>(rows()), kDead);
      next_tokens_.assign(static_cast<size_t>(rows()), -1);
      score_rows(step, logits);
      for (size_t i = 0; i < n_; ++i)
        if (!sentences_[i].done) advance(i, step, logits, parents, tokens);
      tape.reset();
      reorder(parents);
      if (cache_ && !all_done()) cache_->reorder(parents);
    }
    std::vector<std::vector<int32_t>> out(n_);
    for (size_t i = 0; i < n_; ++i) {
      const std::vector<Finished>& f = sentences_[i].finished;
      // The best normalized score; ties to the one finished first.
      size_t best = 0;
      for (size_t j = 1; j < f.size(); ++j)
        if (f[j].normalized > f[best].normalized) best = j;
      out[i] = f[best].tokens;
    }
    return out;
  }

 private:
  int64_t rows() const { return static_cast<int64_t>(n_) * beam_; }

  // The source rows of the chunk, one per sentence (start_decoding: the cache keeps one cross K/V
  // per sentence for its beams), or repeated `beam` times (no cache: one row per hypothesis).
  ModelInput source_input(int64_t rows) const {
    ModelInput in{rows, 0, nullptr, nullptr, nullptr};
    in.source_len = S_;
    in.source_tokens = rows == static_cast<int64_t>(n_) ? source_.data() : beam_source_.data();
    in.source_padding = rows == static_cast<int64_t>(n_) ? source_padding_.data() : beam_padding_.data();
    return in;
  }

  // Without a cache: the whole model on every row's source and <s> + history (step + 1 tokens;
  // a dead row reads <pad> past its history), and each row's logits at its last position.
  const float* recomputed_logits(Tape<float>& tape, int64_t step) {
    const int64_t T = step + 1, R = rows();
    if (R != static_cast<int64_t>(n_) && beam_source_.empty()) {
      for (int64_t r = 0; r < R; ++r) {
        const size_t i = static_cast<size_t>(r / beam_) * static_cast<size_t>(S_);
        beam_source_.insert(beam_source_.end(), source_.begin() + i, source_.begin() + i + S_);
        beam_padding_.insert(beam_padding_.end(), source_padding_.begin() + i, source_padding_.begin() + i + S_);
      }
    }
    prefix_.assign(static_cast<size_t>(R * T), ids_.pad);
    for (int64_t r = 0; r < R; ++r) {
      prefix_[static_cast<size_t>(r * T)] = ids_.bos;
      const std::vector<int32_t>& history = histories_[static_cast<size_t>(r)];
      std::copy(history.begin(), history.end(), prefix_.begin() + r * T + 1);
    }
    ModelInput in = source_input(R);
    in.seq_len = T;
    in.tokens = prefix_.data();
    const Tensor<float> all = model_.forward(tape, in, {}).logits.value();  // [R*T, V]
    const int64_t V = all.size(1);
    last_logits_.resize(static_cast<size_t>(R * V));
    for (int64_t r = 0; r < R; ++r)
      std::copy(all.data() + (r * T + T - 1) * V, all.data() + (r * T + T) * V, last_logits_.begin() + r * V);
    return last_logits_.data();
  }
  bool all_done() const {
    return std::all_of(sentences_.begin(), sentences_.end(), [](const Sentence& s) { return s.done; });
  }

  // Every live row's log-sum-exp and 2 x beam best tokens (</s> left out before min_len), the
  // rows side by side on the threads: each row's result is the same on any thread.
  void score_rows(int64_t step, const float* logits) {
    const int64_t V = model_.spec().vocab_size, R = rows();
    top_k_ = std::min<int64_t>(2 * beam_, V);
    log_sums_.assign(static_cast<size_t>(R), 0.0);
    top_.assign(static_cast<size_t>(R * top_k_), -1);
    const int32_t excluded = step < min_len_ ? ids_.eos : -1;  // fairseq's min_len
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      if (scores_[static_cast<size_t>(r)] == kDead) continue;
      log_sums_[static_cast<size_t>(r)] = log_sum_exp(logits + r * V, V);
      best_tokens(logits + r * V, V, top_k_, excluded, top_.data() + r * top_k_);
    }
  }

  // Sentence i's step: candidates from its live beams, finished ones set aside, the beam best
  // others continue (rows i*beam ...), their parents and next tokens written.
  void advance(size_t i, int64_t step, const float* logits, std::vector<int32_t>& parents,
               std::vector<int32_t>& tokens) {
    Sentence& sentence = sentences_[i];
    const int64_t V = model_.spec().vocab_size, first = static_cast<int64_t>(i) * beam_;
    const bool last = step + 1 >= sentence.max_len;  // only </s> is left
    candidates_.clear();
    for (int64_t b = 0; b < beam_; ++b) {
      const size_t row = static_cast<size_t>(first + b);
      const double score = scores_[row];
      if (score == kDead) continue;
      const float* row_logits = logits + (first + b) * V;
      if (last) {
        candidates_.push_back({score + (row_logits[ids_.eos] - log_sums_[row]), b, ids_.eos});
        continue;
      }
      // This beam's 2 x beam best tokens: no more of them can make the sentence's top 2 x beam.
      for (int64_t j = 0; j < top_k_; ++j) {
        const int32_t v = top_[row * static_cast<size_t>(top_k_) + static_cast<size_t>(j)];
        if (v >= 0) candidates_.push_back({score + (row_logits[v] - log_sums_[row]), b, v});
      }
    }
    std::sort(candidates_.begin(), candidates_.end(), better);
    if (candidates_.size() > static_cast<size_t>(2 * beam_)) candidates_.resize(static_cast<size_t>(2 * beam_));
    int64_t live = 0;
    for (size_t rank = 0; rank < candidates_.size(); ++rank) {
      const Candidate& c = candidates_[rank];
      const std::vector<int32_t>& history = histories_[static_cast<size_t>(first + c.beam)];
      if (c.token == ids_.eos) {
        if (rank >= static_cast<size_t>(beam_)) continue;  // as fairseq: only the top beam may end
        const double length = static_cast<double>(history.size() + 1);
        sentence.finished.push_back({history, c.score / std::pow(length, lenpen_)});
        if (static_cast<int64_t>(sentence.finished.size()) >= beam_) break;
        continue;
      }
      if (live == beam_) continue;
      const int64_t row = first + live++;
      parents[static_cast<size_t>(row)] = static_cast<int32_t>(first + c.beam);
      tokens[static_cast<size_t>(row)] = c.token;
      next_scores_[static_cast<size_t>(row)] = c.score;
      next_tokens_[static_cast<size_t>(row)] = c.token;
    }
    if (static_cast<int64_t>(sentence.finished.size()) >= beam_ || live == 0) sentence.done = true;
  }

  // Histories and scores follow the rows' new parents; a row that continues nothing is dead.
  void reorder(const std::vector<int32_t>& parents) {
    std::vector<std::vector<int32_t>> next(histories_.size());
    for (size_t r = 0; r < histories_.size(); ++r) {
      scores_[r] = next_scores_[r];
      if (next_tokens_[r] < 0) continue;
      next[r] = histories_[static_cast<size_t>(parents[r])];
      next[r].push_back(next_tokens_[r]);
    }
    histories_ = std::move(next);
  }

  Model<float>& model_;
  SpecialIds ids_;
  int64_t beam_, min_len_;
  double lenpen_;
  size_t n_;
  int64_t S_ = 0;
  std::vector<int32_t> source_;
  std::vector<uint8_t> source_padding_;
  std::optional<KvCache<float>> cache_;  // empty: use_cache = false
  // use_cache = false only: the sources per hypothesis row, the prefixes, the last logits.
  std::vector<int32_t> beam_source_, prefix_;
  std::vector<uint8_t> beam_padding_;
  std::vector<float> last_logits_;
  std::vector<Sentence> sentences_;
  std::vector<double> scores_, log_sums_;  // per row: hypothesis score, this step's log-sum-exp
  std::vector<int32_t> top_;               // per row: its top_k_ best tokens, -1 past the last
  int64_t top_k_ = 0;
  std::vector<std::vector<int32_t>> histories_;
  std::vector<Candidate> candidates_;
  // What this step chose per row: its score and token (-1: the row continues nothing).
  std::vector<double> next_scores_;
  std::vector<int32_t> next_tokens_;
};

}  // namespace

int64_t max_target_tokens(const ModelSpec& spec, int64_t source_tokens, const SearchOptions& options) {
  const double limit = options.max_len_a * static_cast<double>(source_tokens) + static_cast<double>(options.max_len_b);
  return std::clamp<int64_t>(static_cast<int64_t>(limit), 1, spec.max_seq_len);
}

namespace {

std::vector<float> encoder_gates(const Model<float>& model) {
  std::vector<float> out;
  const std::vector<AttentionSite> sites = model.spec().attention_sites();
  for (size_t s = 0; s < sites.size(); ++s) {
    if (sites[s].kind != AttentionKind::enc) continue;
    const Tensor<float> g = model.gates().value(static_cast<int>(s));
    out.insert(out.end(), g.data(), g.data() + g.numel());
  }
  return out;
}

}  // namespace

std::vector<std::vector<int32_t>> translate(Model<float>& model, const std::vector<std::vector<int32_t>>& sources,
                                            const SpecialIds& ids, const SearchOptions& options,
                                            EncodedSources* encoded) {
  HEADLAB_CHECK(model_kind_info(model.spec().kind).source,
                "translate: the model is a " << model_kind_info(model.spec().kind).name << ", not an encoder_decoder");
  HEADLAB_CHECK(options.beam >= 1, "translate: the beam size must be at least 1, got " << options.beam);
  HEADLAB_CHECK(options.batch_sentences >= 1, "translate: batch_sentences must be at least 1");
  HEADLAB_CHECK(options.min_len >= 0, "translate: min_len must be at least 0, got " << options.min_len);
  HEADLAB_CHECK(ids.bos >= 0 && ids.eos >= 0 && ids.pad >= 0, "translate: the tokenizer has no <s>, </s> or <pad>");
  for (size_t i = 0; i < sources.size(); ++i)
    HEADLAB_CHECK(!sources[i].empty() && static_cast<int64_t>(sources[i].size()) <= model.spec().max_seq_len,
                  "translate: source " << i << " has " << sources[i].size()
                                       << " tokens; it needs 1 to max_seq_len=" << model.spec().max_seq_len);
  const bool reuse = encoded != nullptr && !encoded->empty();
  if (encoded != nullptr) {
    HEADLAB_CHECK(options.use_cache, "translate: encoded sources need the KV cache (use_cache = true)");
    HEADLAB_CHECK(!reuse || (encoded->sources_ == sources && encoded->batch_sentences_ == options.batch_sentences),
                  "translate: the encoded sources were made from other sources or another batch_sentences");
    HEADLAB_CHECK(!reuse || encoded->encoder_gates_ == encoder_gates(model),
                  "translate: the encoded sources were made with other encoder gates; clear them");
  }
  std::vector<KvCache<float>> filled;  // into `encoded` once every chunk is done
  // Longest first (stable: equal lengths keep their order), so a chunk's rows pad little.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  std::vector<std::vector<int32_t>> out(sources.size());
  const size_t per_chunk = static_cast<size_t>(options.batch_sentences);
  for (size_t start = 0; start < order.size(); start += per_chunk) {
    const size_t end = std::min(order.size(), start + per_chunk);
    std::vector<const std::vector<int32_t>*> chunk;
    for (size_t j = start; j < end; ++j) chunk.push_back(&sources[order[j]]);
    ChunkSearch search(model, chunk, ids, options);
    std::vector<std::vector<int32_t>> got =
        reuse ? search.run(&encoded->chunks_[start / per_chunk]) : search.run(nullptr, encoded ? &filled : nullptr);
    for (size_t j = start; j < end; ++j) out[order[j]] = std::move(got[j - start]);
  }
  if (encoded != nullptr && !reuse && !filled.empty()) {
    encoded->sources_ = sources;
    encoded->batch_sentences_ = options.batch_sentences;
    encoded->encoder_gates_ = encoder_gates(model);
    encoded->chunks_ = std::move(filled);
  }
  return out;
}

}  // namespace headlab
