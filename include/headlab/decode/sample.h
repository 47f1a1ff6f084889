// Continuing a decoder's token sequence by sampling (or greedily), with the KV cache
// (nn/kv_cache.h): the prompt is one cached step, each new token one more. Past max_seq_len every
// token sees the last max_seq_len tokens, recomputed (positions shift, so no cache can be kept):
// the result is the whole-sequence forward's over that window at every step, as python/headlab's
// generate() computes it.
//   std::vector<int32_t> out = sample_tokens(model, prompt, {.tokens = 200, .temperature = 0.8}, print);
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

struct SampleOptions {
  int64_t tokens = 200;      // new tokens to generate
  double temperature = 0.8;  // softmax temperature; 0 = greedy (the first maximum)
  uint64_t seed = 0;         // mt19937_64 seed of the draws
  // Draw only ids below this (a tokenizer smaller than model.vocab_size); <= 0: the whole vocabulary.
  int64_t vocab_limit = 0;
};

// The generated tokens (not the prompt); `on_token`, if given, sees each as it is drawn. Throws
// headlab::Error for an empty prompt, a negative count, a temperature that is negative or not
// finite, or a model without an LM head or with a source side.
std::vector<int32_t> sample_tokens(Model<float>& model, const std::vector<int32_t>& prompt,
                                   const SampleOptions& options, const std::function<void(int32_t)>& on_token = {});

}  // namespace headlab
