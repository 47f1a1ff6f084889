// Greedy and beam search (decode/search.h) against references that recompute the whole sequence
// at every step: a greedy loop, and an exhaustive search over every short target.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "headlab/decode/search.h"
#include "headlab/nn/model.h"
#include "support/tiny_model.h"

using namespace headlab;

using test::randomize;
using test::tiny_seq2seq_spec;

namespace {

constexpr SpecialIds kIds{.bos = 2, .eos = 3, .pad = 0};

// log p(token | target prefix) for every token, by the whole-sequence forward on <s> + prefix.
std::vector<double> next_log_probs(Model<float>& model, const std::vector<int32_t>& source,
                                   const std::vector<int32_t>& prefix) {
  std::vector<int32_t> tokens = {kIds.bos};
  tokens.insert(tokens.end(), prefix.begin(), prefix.end());
  ModelInput in{1, static_cast<int64_t>(tokens.size()), tokens.data(), nullptr, nullptr};
  in.source_len = static_cast<int64_t>(source.size());
  in.source_tokens = source.data();
  Arena arena;
  Tape<float> tape(arena);
  NoGradGuard<float> no_grad(tape);
  const Tensor<float> logits = model.forward(tape, in, {}).logits.value();
  const int64_t V = logits.size(1), last = static_cast<int64_t>(prefix.size());
  double max = logits(last, 0), sum = 0;
  for (int64_t v = 0; v < V; ++v) max = std::max(max, static_cast<double>(logits(last, v)));
  for (int64_t v = 0; v < V; ++v) sum += std::exp(logits(last, v) - max);
  std::vector<double> out(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) out[static_cast<size_t>(v)] = logits(last, v) - max - std::log(sum);
  return out;
}

std::vector<std::vector<int32_t>> test_sources() {
  return {{5, 6, 7, 3}, {8, 3}, {4, 9, 10, 5, 6, 3}, {7, 7, 3}};
}

}  // namespace

TEST_CASE("greedy search picks the argmax of the whole-sequence forward at every step", "[decode]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 1);
  Model<float> model(spec);
  randomize(model, 31);
  const std::vector<std::vector<int32_t>> sources = test_sources();
  const SearchOptions options{.beam = 1, .max_len_a = 1.0, .max_len_b = 2};
  const std::vector<std::vector<int32_t>> got = translate(model, sources, kIds, options);
  for (size_t i = 0; i < sources.size(); ++i) {
    INFO("source " << i);
    std::vector<int32_t> want;
    const int64_t limit = max_target_tokens(spec, static_cast<int64_t>(sources[i].size()), options);
    for (int64_t step = 0; step < limit; ++step) {
      const std::vector<double> logp = next_log_probs(model, sources[i], want);
      int32_t best = step + 1 == limit ? kIds.eos : 0;  // the last step can only end the sentence
      if (step + 1 < limit)
        for (size_t v = 1; v < logp.size(); ++v)
          if (logp[v] > logp[static_cast<size_t>(best)]) best = static_cast<int32_t>(v);
      if (best == kIds.eos) break;
      want.push_back(best);
    }
    CHECK(got[i] == want);
  }
}

TEST_CASE("beam search as wide as every hypothesis finds the exhaustive search's best target", "[decode]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 2);
  Model<float> model(spec);
  randomize(model, 37);
  const double lenpen = GENERATE(0.0, 1.0);
  // Targets of at most 3 tokens (counting </s>): 1 + 11 + 121 hypotheses, all kept by beam 121.
  const SearchOptions wide{.beam = 121, .length_penalty = lenpen, .max_len_a = 0.0, .max_len_b = 3};
  for (const std::vector<int32_t>& source : test_sources()) {
    double best_score = -INFINITY;
    std::vector<int32_t> best;
    std::function<void(std::vector<int32_t>&, double)> search = [&](std::vector<int32_t>& prefix, double sum) {
      const std::vector<double> logp = next_log_probs(model, source, prefix);
      const double ended = (sum + logp[kIds.eos]) / std::pow(static_cast<double>(prefix.size() + 1), lenpen);
      if (ended > best_score) best_score = ended, best = prefix;
      if (prefix.size() + 1 == 3) return;
      for (int32_t v = 0; v < static_cast<int32_t>(logp.size()); ++v) {
        if (v == kIds.eos) continue;
        prefix.push_back(v);
        search(prefix, sum + logp[static_cast<size_t>(v)]);
        prefix.pop_back();
      }
    };
    std::vector<int32_t> prefix;
    search(prefix, 0.0);
    INFO("length penalty " << lenpen);
    CHECK(translate(model, {source}, kIds, wide)[0] == best);
  }
}

TEST_CASE("beam search is deterministic and does not depend on how sentences are batched", "[decode]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 1);
  Model<float> model(spec);
  randomize(model, 41);
  const std::vector<std::vector<int32_t>> sources = test_sources();
  SearchOptions options{.beam = 3, .max_len_a = 1.0, .max_len_b = 3};
  const std::vector<std::vector<int32_t>> together = translate(model, sources, kIds, options);
  CHECK(translate(model, sources, kIds, options) == together);
  options.batch_sentences = 1;
  CHECK(translate(model, sources, kIds, options) == together);
  options.batch_sentences = 32;
  options.beam = 1;
  const std::vector<std::vector<int32_t>> greedy = translate(model, sources, kIds, options);
  options.batch_sentences = 2;
  CHECK(translate(model, sources, kIds, options) == greedy);
}

TEST_CASE("translate refuses a beam of 0, an empty source and a decoder-only model with one line", "[decode]") {
  Model<float> model(tiny_seq2seq_spec(2, 2, 2, 2));
  REQUIRE_THROWS_WITH(translate(model, {{4, 3}}, kIds, {.beam = 0}),
                      "translate: the beam size must be at least 1, got 0");
  REQUIRE_THROWS_WITH(translate(model, {{}}, kIds, {}),
                      "translate: source 0 has 0 tokens; it needs 1 to max_seq_len=8");
  Model<float> decoder(test::tiny_spec(ModelKind::decoder, 2, 2));
  REQUIRE_THROWS_WITH(translate(decoder, {{4, 3}}, kIds, {}),
                      "translate: the model is a decoder, not an encoder_decoder");
}

TEST_CASE("decoding without the KV cache gives the same tokens as with it, greedy and beam", "[decode]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 1);
  Model<float> model(spec);
  randomize(model, 43);
  const std::vector<std::vector<int32_t>> sources = test_sources();
  const int64_t beam = GENERATE(1, 3);
  SearchOptions options{.beam = beam, .max_len_a = 1.0, .max_len_b = 4};
  const std::vector<std::vector<int32_t>> cached = translate(model, sources, kIds, options);
  options.use_cache = false;
  INFO("beam " << beam);
  CHECK(translate(model, sources, kIds, options) == cached);
}

TEST_CASE("min_len keeps </s> out until that many target tokens, and the length limit still ends", "[decode]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 1);
  Model<float> model(spec);
  randomize(model, 47);
  const std::vector<std::vector<int32_t>> sources = test_sources();
  const int64_t beam = GENERATE(1, 3);
  // Every target is exactly 5 tokens: </s> barred before 5, forced at the 6th (max_len_b counts it).
  SearchOptions options{.beam = beam, .max_len_a = 0.0, .max_len_b = 6, .min_len = 5};
  for (const std::vector<int32_t>& target : translate(model, sources, kIds, options)) CHECK(target.size() == 5);
  options.min_len = 99;  // past the limit: the limit wins
  for (const std::vector<int32_t>& target : translate(model, sources, kIds, options)) CHECK(target.size() == 5);
  options.min_len = -1;
  CHECK_THROWS_WITH(translate(model, sources, kIds, options), Catch::Contains("min_len must be at least 0"));
}

TEST_CASE("encoded sources decode to the tokens of decoding from scratch after a decoder or cross gate changes",
          "[decode]") {
  Model<float> model(tiny_seq2seq_spec(2, 2, 2, 1));
  randomize(model, 53);
  const std::vector<std::vector<int32_t>> sources = test_sources();
  const int64_t beam = GENERATE(1, 3);
  INFO("beam " << beam);
  // Two chunks, so that each chunk's own cross K/V is the one reused.
  const SearchOptions options{.beam = beam, .max_len_a = 1.0, .max_len_b = 4, .batch_sentences = 3};
  EncodedSources encoded;
  const std::vector<std::vector<int32_t>> unmasked = translate(model, sources, kIds, options, &encoded);
  REQUIRE(!encoded.empty());
  CHECK(unmasked == translate(model, sources, kIds, options));
  CHECK(translate(model, sources, kIds, options, &encoded) == unmasked);
  const std::vector<AttentionSite> sites = model.spec().attention_sites();
  int changed = 0;
  for (size_t s = 0; s < sites.size(); ++s) {
    if (sites[s].kind == AttentionKind::enc) continue;
    const Tensor<float> gates = model.gates().value(static_cast<int>(s));
    for (int64_t h = 0; h < gates.numel(); ++h) {
      INFO(attention_kind_name(sites[s].kind) << " layer " << sites[s].layer << " head " << h);
      const float kept = gates(h);
      gates(h) = 0;
      const std::vector<std::vector<int32_t>> scratch = translate(model, sources, kIds, options);
      CHECK(translate(model, sources, kIds, options, &encoded) == scratch);
      changed += scratch != unmasked;
      gates(h) = kept;
    }
  }
  CHECK(changed > 0);  // the gates change some translation: the comparison is not vacuous
}

TEST_CASE("translate refuses encoded sources of other sources, other encoder gates or no KV cache", "[decode]") {
  Model<float> model(tiny_seq2seq_spec(2, 2, 2, 1));
  randomize(model, 59);
  const std::vector<std::vector<int32_t>> sources = test_sources();
  EncodedSources encoded;
  const std::vector<std::vector<int32_t>> want = translate(model, sources, kIds, {}, &encoded);
  CHECK_THROWS_WITH(translate(model, {{4, 3}}, kIds, {}, &encoded),
                    "translate: the encoded sources were made from other sources or another batch_sentences");
  CHECK_THROWS_WITH(translate(model, sources, kIds, {.batch_sentences = 2}, &encoded),
                    "translate: the encoded sources were made from other sources or another batch_sentences");
  CHECK_THROWS_WITH(translate(model, sources, kIds, {.use_cache = false}, &encoded),
                    "translate: encoded sources need the KV cache (use_cache = true)");
  model.gates().value(0)(1) = 0;  // site 0: the encoder's first layer
  CHECK_THROWS_WITH(translate(model, sources, kIds, {}, &encoded),
                    "translate: the encoded sources were made with other encoder gates; clear them");
  encoded.clear();
  CHECK(encoded.empty());
  const std::vector<std::vector<int32_t>> masked = translate(model, sources, kIds, {}, &encoded);
  CHECK(masked == translate(model, sources, kIds, {}));
  CHECK(translate(model, sources, kIds, {}, &encoded) == masked);
  CHECK(want.size() == masked.size());
}
