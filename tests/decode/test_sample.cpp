// Sampling with the KV cache (decode/sample.h) against a loop that recomputes the whole window at
// every step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "headlab/decode/sample.h"
#include "headlab/nn/model.h"
#include "support/tiny_model.h"

using namespace headlab;

using test::randomize;
using test::tiny_spec;

namespace {

// Greedy continuation by the whole-sequence forward over the last max_seq_len tokens.
std::vector<int32_t> greedy_by_full_forward(Model<float>& model, std::vector<int32_t> tokens, int64_t n) {
  const int64_t V = model.spec().vocab_size, window = model.spec().max_seq_len;
  const size_t prompt = tokens.size();
  Arena arena;
  Tape<float> tape(arena);
  NoGradGuard<float> no_grad(tape);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(tokens.size()), window);
    const ModelInput in{1, T, tokens.data() + tokens.size() - T, nullptr, nullptr};
    const Tensor<float> logits = model.forward(tape, in, {}).logits.value();
    const float* row = logits.data() + (T - 1) * V;
    tokens.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
    tape.reset();
  }
  return {tokens.begin() + static_cast<std::ptrdiff_t>(prompt), tokens.end()};
}

}  // namespace

TEST_CASE("greedy sampling with the cache equals the whole-sequence forward within the window", "[decode]") {
  const Positions positions = GENERATE(Positions::learned, Positions::sinusoidal);
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 2);
  spec.positions = positions;
  spec.max_seq_len = 12;
  Model<float> model(spec);
  randomize(model, 17);
  const std::vector<int32_t> prompt = {3, 1, 4};
  const std::vector<int32_t> got = sample_tokens(model, prompt, {.tokens = 9, .temperature = 0});
  CHECK(got == greedy_by_full_forward(model, prompt, 9));
}

TEST_CASE("sampling past max_seq_len sees the last max_seq_len tokens; draws are reproducible", "[decode]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 2, 1);
  Model<float> model(spec);
  randomize(model, 23);
  const std::vector<int32_t> prompt(11, 5);  // longer than max_seq_len = 8 already
  std::vector<int32_t> seen;
  const SampleOptions options{.tokens = 30, .temperature = 1.0, .seed = 4, .vocab_limit = 7};
  const std::vector<int32_t> a = sample_tokens(model, prompt, options, [&](int32_t t) { seen.push_back(t); });
  REQUIRE(a.size() == 30);
  CHECK(seen == a);
  CHECK(std::all_of(a.begin(), a.end(), [](int32_t t) { return t >= 0 && t < 7; }));
  CHECK(sample_tokens(model, prompt, options) == a);
  SampleOptions other = options;
  other.seed = 5;
  CHECK(sample_tokens(model, prompt, other) != a);
  // Every token sees the last max_seq_len tokens, as the whole-sequence forward over them does.
  CHECK(sample_tokens(model, prompt, {.tokens = 20, .temperature = 0}) == greedy_by_full_forward(model, prompt, 20));
}

TEST_CASE("sample_tokens refuses bad arguments in one line", "[decode]") {
  Model<float> model(tiny_spec(ModelKind::decoder, 2, 1));
  CHECK_THROWS_WITH(sample_tokens(model, {}, {}), Catch::Contains("the prompt has no tokens"));
  CHECK_THROWS_WITH(sample_tokens(model, {1}, {.temperature = -1}), Catch::Contains("temperature must be"));
  Model<float> classifier(tiny_spec(ModelKind::encoder, 2, 1));
  CHECK_THROWS_WITH(sample_tokens(classifier, {1}, {}), Catch::Contains("needs a decoder model, not encoder"));
}
