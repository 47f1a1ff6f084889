// The encoder_decoder model kind: its parameters and gates, gradients against central
// differences, and what its masks promise (a target position sees only earlier targets and the
// real source tokens).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "headlab/nn/model.h"
#include "support/model_gradcheck.h"
#include "support/tiny_model.h"

using namespace headlab;

using test::randomize;
using test::tiny_seq2seq_spec;
using test::TinyBatch;

namespace {

// Logits [B*T, V] of a no-grad forward, as a vector.
std::vector<double> logits_of(Model<double>& model, const ModelInput& input) {
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  const Tensor<double> logits = model.forward(tape, input, {}).logits.value();
  return std::vector<double>(logits.data(), logits.data() + logits.numel());
}

// Largest |a - b| over the logits of target position t of row b.
double position_change(const std::vector<double>& a, const std::vector<double>& b, int64_t row, int64_t t,
                       const TinyBatch& batch, int64_t vocab) {
  double most = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const size_t i = static_cast<size_t>((row * batch.T + t) * vocab + v);
    most = std::max(most, std::abs(a[i] - b[i]));
  }
  return most;
}

}  // namespace

TEST_CASE("an encoder_decoder has an encoder, and cross-attention in every decoder block, each with its own shape",
          "[nn][model][encoder_decoder]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 4, 4, 2);
  spec.n_encoder_layers = 3;
  const std::vector<ParamSpec> params = parameter_specs(spec);
  auto shape_of = [&](const std::string& name) {
    for (const ParamSpec& p : params)
      if (p.name == name) return p.shape;
    FAIL("no parameter " << name);
    return Shape{};
  };
  // Encoder: 4 heads of width 2 (qkv 3 * 4 * 2), three blocks, its own final LayerNorm.
  CHECK(shape_of("enc/2/attn/qkv/weight") == Shape{24, 8});
  CHECK(shape_of("enc/ln_f/weight") == Shape{8});
  // Decoder self-attention: 2 heads of width 4; cross: 4 query heads over 2 K/V heads of width 2.
  CHECK(shape_of("blocks/1/attn/qkv/weight") == Shape{24, 8});
  CHECK(shape_of("blocks/1/cross/q/weight") == Shape{8, 8});
  CHECK(shape_of("blocks/1/cross/kv/weight") == Shape{8, 8});
  CHECK(shape_of("blocks/1/cross/proj/weight") == Shape{8, 8});
  CHECK(shape_of("blocks/0/cross/ln/weight") == Shape{8});
  // Gates: one table per attention site, the encoder's first, then per decoder layer self, cross.
  const std::vector<ParamSpec> gates = gate_specs(spec);
  std::vector<std::string> names;
  for (const ParamSpec& g : gates) names.push_back(g.name + " " + g.shape.str());
  CHECK(names == std::vector<std::string>{"enc/0/attn/gates [4]", "enc/1/attn/gates [4]", "enc/2/attn/gates [4]",
                                          "blocks/0/attn/gates [2]", "blocks/0/cross/gates [4]",
                                          "blocks/1/attn/gates [2]", "blocks/1/cross/gates [4]"});
  const std::vector<AttentionSite> sites = spec.attention_sites();
  REQUIRE(sites.size() == gates.size());
  CHECK(attention_kind_name(sites[4].kind) == std::string("cross"));
  CHECK(sites[4].layer == 0);
}

TEST_CASE("encoder_decoder gradients match central differences for every parameter and head gate",
          "[nn][model][encoder_decoder][grad]") {
  struct Heads {
    int64_t dec, enc, cross, cross_kv;
  };
  const Heads h = GENERATE(Heads{2, 2, 2, 2}, Heads{4, 1, 4, 1}, Heads{1, 4, 2, 1});
  ModelSpec spec = tiny_seq2seq_spec(h.dec, h.enc, h.cross, h.cross_kv);
  spec.positions = GENERATE(Positions::learned, Positions::sinusoidal);
  spec.tie_embeddings = spec.positions == Positions::learned;
  Model<double> model(spec);
  randomize(model, 5);
  TinyBatch batch(spec, 9);
  const test::GradCheckResult result = test::check_model_gradients(model, batch.input());
  INFO(result.str() << " (input >= 1000: gates of attention site input-1000)");
  REQUIRE(result.max_rel_error <= 1e-6);
}

TEST_CASE("an encoder_decoder's target position sees earlier targets and real source tokens only",
          "[nn][model][encoder_decoder]") {
  const ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 1);
  Model<double> model(spec);
  randomize(model, 7);
  const TinyBatch batch(spec, 3);
  const std::vector<double> base = logits_of(model, batch.input());
  SECTION("changing target token 2 leaves positions 0-1 alone and changes 2 and later") {
    TinyBatch changed = batch;
    changed.tokens[2] = (changed.tokens[2] + 1) % static_cast<int32_t>(spec.vocab_size);
    const std::vector<double> after = logits_of(model, changed.input());
    for (int64_t t = 0; t < 2; ++t) CHECK(position_change(base, after, 0, t, batch, spec.vocab_size) == 0);
    for (int64_t t = 2; t < batch.T; ++t) CHECK(position_change(base, after, 0, t, batch, spec.vocab_size) > 1e-6);
    for (int64_t t = 0; t < batch.T; ++t) CHECK(position_change(base, after, 1, t, batch, spec.vocab_size) == 0);
  }
  SECTION("a padded source token changes nothing, a real one changes every target position of its row") {
    TinyBatch padded = batch, real = batch;
    const int32_t V = static_cast<int32_t>(spec.vocab_size);
    padded.source[batch.S + batch.S - 1] = (padded.source[batch.S + batch.S - 1] + 1) % V;  // row 1, padding
    real.source[batch.S + 1] = (real.source[batch.S + 1] + 1) % V;                          // row 1, real
    const std::vector<double> after_pad = logits_of(model, padded.input()), after_real = logits_of(model, real.input());
    CHECK(after_pad == base);
    for (int64_t t = 0; t < batch.T; ++t) {
      CHECK(position_change(base, after_real, 1, t, batch, spec.vocab_size) > 1e-6);
      CHECK(position_change(base, after_real, 0, t, batch, spec.vocab_size) == 0);
    }
  }
}

TEST_CASE("an encoder_decoder refuses a missing source and per-layer head lists with one line",
          "[nn][model][encoder_decoder]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 2);
  Model<double> model(spec);
  TinyBatch batch(spec, 1);
  ModelInput no_source = batch.input();
  no_source.source_tokens = nullptr;
  Arena arena;
  Tape<double> tape(arena);
  REQUIRE_THROWS_WITH(model.forward(tape, no_source, {}),
                      "model: an encoder_decoder needs a source (source_tokens, source_len >= 1)");
  spec.layer_heads = {2, 2};
  REQUIRE_THROWS_WITH(validate(spec), "model: layer_heads and active_heads are not supported by an encoder_decoder");
  spec.layer_heads = {};
  spec.cross_n_kv_heads = 3;
  REQUIRE_THROWS_WITH(validate(spec), "model: cross_n_kv_heads=3 does not divide cross_n_heads=2");
}
