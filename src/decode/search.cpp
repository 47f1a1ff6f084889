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

// log softmax of one row of logits, in double.
void log_softmax(const float* logits, int64_t V, std::vector<double>& out) {
  out.resize(static_cast<size_t>(V));
  double max = logits[0];
  for (int64_t v = 1; v < V; ++v) max = std::max(max, static_cast<double>(logits[v]));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(logits[v] - max);
  const double log_sum = max + std::log(sum);
  for (int64_t v = 0; v < V; ++v) out[static_cast<size_t>(v)] = logits[v] - log_sum;
}

class ChunkSearch {
 public:
  ChunkSearch(Model<float>& model, const std::vector<const std::vector<int32_t>*>& sources, const SpecialIds& ids,
              const SearchOptions& options)
      : model_(model), ids_(ids), beam_(options.beam), lenpen_(options.length_penalty), n_(sources.size()) {
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
    cache_.emplace(model.spec(), rows(), capacity, S);
  }

  std::vector<std::vector<int32_t>> run() {
    Arena arena;
    Tape<float> tape(arena);
    NoGradGuard<float> no_grad(tape);
    ModelInput source{static_cast<int64_t>(n_), 0, nullptr, nullptr, nullptr};
    source.source_len = S_;
    source.source_tokens = source_.data();
    source.source_padding = source_padding_.data();
    model_.start_decoding(tape, source, *cache_);
    tape.reset();
    // Every beam starts from <s>; only beam 0 of a sentence is live at the first step, so the
    // beams do not all pick the same tokens.
    scores_.assign(static_cast<size_t>(rows()), kDead);
    for (size_t i = 0; i < n_; ++i) scores_[i * beam_] = 0;
    histories_.assign(static_cast<size_t>(rows()), {});
    std::vector<int32_t> tokens(static_cast<size_t>(rows()), ids_.bos), parents(static_cast<size_t>(rows()));
    for (int64_t step = 0; !all_done(); ++step) {
      const Tensor<float> logits =
          model_.decode_step(tape, {rows(), 1, tokens.data(), nullptr, nullptr}, *cache_).logits.value();
      // Rows of finished sentences continue nothing: they stay where they are and read <pad>.
      std::iota(parents.begin(), parents.end(), 0);
      std::fill(tokens.begin(), tokens.end(), ids_.pad);
      next_scores_.assign(static_cast<size_t>(rows()), kDead);
      next_tokens_.assign(static_cast<size_t>(rows()), -1);
      for (size_t i = 0; i < n_; ++i)
        if (!sentences_[i].done) advance(i, step, logits, parents, tokens);
      tape.reset();
      reorder(parents);
      if (!all_done()) cache_->reorder(parents);
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
  bool all_done() const {
    return std::all_of(sentences_.begin(), sentences_.end(), [](const Sentence& s) { return s.done; });
  }

  // Sentence i's step: candidates from its live beams, finished ones set aside, the beam best
  // others continue (rows i*beam ...), their parents and next tokens written.
  void advance(size_t i, int64_t step, const Tensor<float>& logits, std::vector<int32_t>& parents,
               std::vector<int32_t>& tokens) {
    Sentence& sentence = sentences_[i];
    const int64_t V = logits.size(1), first = static_cast<int64_t>(i) * beam_;
    const bool last = step + 1 >= sentence.max_len;  // only </s> is left
    candidates_.clear();
    for (int64_t b = 0; b < beam_; ++b) {
      const double score = scores_[static_cast<size_t>(first + b)];
      if (score == kDead) continue;
      log_softmax(logits.data() + (first + b) * V, V, logp_);
      if (last) {
        candidates_.push_back({score + logp_[static_cast<size_t>(ids_.eos)], b, ids_.eos});
        continue;
      }
      // This beam's 2 x beam best tokens: no more of them can make the sentence's top 2 x beam.
      const size_t keep = std::min<size_t>(static_cast<size_t>(2 * beam_), static_cast<size_t>(V));
      const size_t before = candidates_.size();
      for (int64_t v = 0; v < V; ++v)
        candidates_.push_back({score + logp_[static_cast<size_t>(v)], b, static_cast<int32_t>(v)});
      std::partial_sort(candidates_.begin() + static_cast<std::ptrdiff_t>(before),
                        candidates_.begin() + static_cast<std::ptrdiff_t>(before + keep), candidates_.end(), better);
      candidates_.resize(before + keep);
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
  int64_t beam_;
  double lenpen_;
  size_t n_;
  int64_t S_ = 0;
  std::vector<int32_t> source_;
  std::vector<uint8_t> source_padding_;
  std::optional<KvCache<float>> cache_;
  std::vector<Sentence> sentences_;
  std::vector<double> scores_, logp_;
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

std::vector<std::vector<int32_t>> translate(Model<float>& model, const std::vector<std::vector<int32_t>>& sources,
                                            const SpecialIds& ids, const SearchOptions& options) {
  HEADLAB_CHECK(model_kind_info(model.spec().kind).source,
                "translate: the model is a " << model_kind_info(model.spec().kind).name << ", not an encoder_decoder");
  HEADLAB_CHECK(options.beam >= 1, "translate: the beam size must be at least 1, got " << options.beam);
  HEADLAB_CHECK(options.batch_sentences >= 1, "translate: batch_sentences must be at least 1");
  HEADLAB_CHECK(ids.bos >= 0 && ids.eos >= 0 && ids.pad >= 0, "translate: the tokenizer has no <s>, </s> or <pad>");
  for (size_t i = 0; i < sources.size(); ++i)
    HEADLAB_CHECK(!sources[i].empty() && static_cast<int64_t>(sources[i].size()) <= model.spec().max_seq_len,
                  "translate: source " << i << " has " << sources[i].size()
                                       << " tokens; it needs 1 to max_seq_len=" << model.spec().max_seq_len);
  // Longest first (stable: equal lengths keep their order), so a chunk's rows pad little.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  std::vector<std::vector<int32_t>> out(sources.size());
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(options.batch_sentences)) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(options.batch_sentences));
    std::vector<const std::vector<int32_t>*> chunk;
    for (size_t j = start; j < end; ++j) chunk.push_back(&sources[order[j]]);
    ChunkSearch search(model, chunk, ids, options);
    std::vector<std::vector<int32_t>> got = search.run();
    for (size_t j = start; j < end; ++j) out[order[j]] = std::move(got[j - start]);
  }
  return out;
}

}  // namespace headlab
