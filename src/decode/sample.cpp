// Sampling with the KV cache; see include/headlab/decode/sample.h.
#include "headlab/decode/sample.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "headlab/common/error.h"
#include "headlab/nn/kv_cache.h"
#include "headlab/nn/model_kinds.h"

namespace headlab {

namespace {

// The next token from one row of logits: the first maximum at temperature 0, else a draw from
// softmax(row / temperature) by inverting the cumulative sum.
int32_t pick(const float* row, int64_t V, double temperature, std::mt19937_64& rng, std::vector<double>& probs) {
  if (temperature == 0) return static_cast<int32_t>(std::max_element(row, row + V) - row);
  const double max_logit = *std::max_element(row, row + V);
  double total = 0;
  for (int64_t v = 0; v < V; ++v) total += probs[static_cast<size_t>(v)] = std::exp((row[v] - max_logit) / temperature);
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng) * total;
  int32_t next = 0;
  while (next < V - 1 && (u -= probs[static_cast<size_t>(next)]) > 0) ++next;
  return next;
}

}  // namespace

std::vector<int32_t> sample_tokens(Model<float>& model, const std::vector<int32_t>& prompt,
                                   const SampleOptions& options, const std::function<void(int32_t)>& on_token) {
  const ModelSpec& spec = model.spec();
  const ModelKindInfo& kind = model_kind_info(spec.kind);
  HEADLAB_CHECK(kind.lm_head && !kind.source, "sample: needs a decoder model, not " << kind.name);
  HEADLAB_CHECK(!prompt.empty(), "sample: the prompt has no tokens");
  HEADLAB_CHECK(options.tokens >= 0, "sample: tokens must be >= 0, got " << options.tokens);
  HEADLAB_CHECK(std::isfinite(options.temperature) && options.temperature >= 0,
                "sample: temperature must be finite and >= 0, got " << options.temperature);
  const int64_t V = spec.vocab_size, window = spec.max_seq_len;
  const int64_t V_drawn = options.vocab_limit > 0 ? std::min(V, options.vocab_limit) : V;

  std::vector<int32_t> tokens = prompt;
  Arena arena;
  Tape<float> tape(arena);
  NoGradGuard<float> no_grad(tape);
  KvCache<float> cache(spec, 1, window);
  int64_t cached_from = 0;  // tokens[cached_from ..) are in the cache
  std::mt19937_64 rng(options.seed);
  std::vector<double> probs(static_cast<size_t>(V_drawn));
  for (int64_t i = 0; i < options.tokens; ++i) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    int64_t fresh = n - cached_from - cache.length();
    if (cache.length() + fresh > window) {  // past the window: the last max_seq_len tokens anew
      const int64_t keep = std::min(n, window);
      cache.clear();
      cached_from = n - keep;
      fresh = keep;
    }
    const ModelInput in{1, fresh, tokens.data() + (n - fresh), nullptr, nullptr};
    const Tensor<float> logits = model.decode_step(tape, in, cache).logits.value();
    const int32_t next = pick(logits.data() + (fresh - 1) * V, V_drawn, options.temperature, rng, probs);
    tape.reset();
    tokens.push_back(next);
    if (on_token) on_token(next);
  }
  return {tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size()), tokens.end()};
}

}  // namespace headlab
