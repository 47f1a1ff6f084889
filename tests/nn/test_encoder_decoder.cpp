// The encoder_decoder model kind: its parameters and gates, gradients against central
// differences, and what its masks promise (a target position sees only earlier targets and the
// real source tokens).
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
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

// The shape of the parameter named `name` among `specs` (a test failure when there is none).
Shape shape_named(const std::vector<ParamSpec>& specs, const std::string& name) {
  for (const ParamSpec& p : specs)
    if (p.name == name) return p.shape;
  FAIL("no parameter " << name);
  return Shape{};
}

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
  const auto shape_of = [specs = parameter_specs(spec)](const std::string& name) { return shape_named(specs, name); };
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

TEST_CASE("encoder_decoder gradients match central differences for every parameter, head gate and FFN unit gate",
          "[nn][model][encoder_decoder][grad]") {
  struct Heads {
    int64_t dec, enc, cross, cross_kv;
    bool whole = false;  // enc.L1, cross.L0, encoder block 0 and decoder block 1 removed whole
  };
  const Heads h = GENERATE(Heads{2, 2, 2, 2}, Heads{4, 1, 4, 1}, Heads{1, 4, 2, 1}, Heads{2, 2, 2, 2, true});
  ModelSpec spec = tiny_seq2seq_spec(h.dec, h.enc, h.cross, h.cross_kv);
  spec.positions = GENERATE(Positions::learned, Positions::sinusoidal);
  spec.tie_embeddings = spec.positions == Positions::learned;
  if (h.dec == 1) spec.mlp_units = {3, 16, 7, 16};  // units removed from encoder block 0, decoder block 0
  if (h.whole) {
    spec.layer_heads = {2, 0, 2, 0, 2, 2};
    spec.mlp_units = {0, 16, 16, 0};
  }
  Model<double> model(spec);
  randomize(model, 5);
  test::randomize_ffn_gates(model, 6);
  TinyBatch batch(spec, 9);
  const test::GradCheckResult result = test::check_model_gradients(model, batch.input());
  INFO(result.str() << " (input >= 1000: gates of attention site input-1000; >= 2000: FFN gates of block "
                       "input-2000)");
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

TEST_CASE("an encoder_decoder refuses a missing source and a bad cross-attention shape with one line",
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
  spec.cross_n_kv_heads = 3;
  REQUIRE_THROWS_WITH(validate(spec), "model: cross_n_kv_heads=3 does not divide cross_n_heads=2");
}

TEST_CASE("an encoder_decoder's layer_heads give each attention site its heads, in gate order",
          "[nn][model][encoder_decoder]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 4, 4, 4);  // sites enc.L0 enc.L1 dec.L0 cross.L0 dec.L1 cross.L1
  spec.layer_heads = {1, 4, 2, 3, 1, 2};
  validate(spec);
  CHECK(spec.total_heads() == 13);
  CHECK(spec.attention_shape({AttentionKind::cross, 1}) == AttentionShape{2, 2, 2});
  CHECK(spec.attention_shape({AttentionKind::dec, 1}) == AttentionShape{1, 1, 4});
  const auto shape_of = [specs = parameter_specs(spec)](const std::string& name) { return shape_named(specs, name); };
  CHECK(shape_of("enc/0/attn/qkv/weight") == Shape{3 * 1 * 2, 8});
  CHECK(shape_of("enc/0/attn/proj/weight") == Shape{8, 1 * 2});
  CHECK(shape_of("blocks/0/cross/q/weight") == Shape{3 * 2, 8});
  CHECK(shape_of("blocks/0/cross/kv/weight") == Shape{2 * 3 * 2, 8});
  CHECK(shape_of("blocks/0/cross/proj/weight") == Shape{8, 3 * 2});
  CHECK(shape_of("blocks/1/attn/qkv/weight") == Shape{3 * 1 * 4, 8});
  std::vector<std::string> gates;
  for (const ParamSpec& g : gate_specs(spec)) gates.push_back(g.name + " " + g.shape.str());
  CHECK(gates == std::vector<std::string>{"enc/0/attn/gates [1]", "enc/1/attn/gates [4]", "blocks/0/attn/gates [2]",
                                          "blocks/0/cross/gates [3]", "blocks/1/attn/gates [1]",
                                          "blocks/1/cross/gates [2]"});
  Model<double> model(spec);  // and its forward runs on the ragged sites
  randomize(model, 3);
  CHECK(logits_of(model, TinyBatch(spec, 2).input()).size() == 2 * 5 * 11);
}

TEST_CASE("an encoder_decoder's active_heads switch on the first heads of each attention site",
          "[nn][model][encoder_decoder]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 4, 4, 2);  // GQA cross-attention: gates only, no layer_heads
  spec.active_heads = {4, 1, 0, 2, 2, 4};
  const Model<float> model(spec);
  const std::vector<std::vector<float>> want = {{1, 1, 1, 1}, {1, 0, 0, 0}, {0, 0}, {1, 1, 0, 0}, {1, 1}, {1, 1, 1, 1}};
  for (size_t site = 0; site < want.size(); ++site) {
    const Tensor<float> g = model.gates().value(static_cast<int>(site));
    INFO("site " << site);
    CHECK(std::vector<float>(g.data(), g.data() + g.numel()) == want[site]);
  }
}

TEST_CASE("an encoder_decoder's per-site head lists refuse a bad layout with one line naming the key",
          "[nn][model][encoder_decoder]") {
  ModelSpec spec = tiny_seq2seq_spec(2, 4, 4, 4);
  auto problem = [](const ModelSpec& s) {
    const std::optional<SpecProblem> p = spec_problem(s, "model.");
    return p ? p->message : std::string("none");
  };
  spec.layer_heads = {2, 2, 2, 2, 2};
  CHECK(problem(spec) ==
        "model.layer_heads has 5 entries but an encoder_decoder has 6 attention sites (2 encoder layers, then self "
        "and cross per decoder layer), or [] for all heads");
  spec.layer_heads = {2, 2, 2, -1, 2, 2};
  CHECK(problem(spec) == "model.layer_heads[3] must be >= 0, got -1 (cross.L0)");
  spec.layer_heads = {2, 2, 3, 2, 2, 2};
  CHECK(problem(spec) == "model.layer_heads[2]=3 exceeds model.n_heads=2 (dec.L0)");
  spec.layer_heads = {5, 2, 2, 2, 2, 2};
  CHECK(problem(spec) == "model.layer_heads[0]=5 exceeds model.enc_n_heads=4 (enc.L0)");
  spec.layer_heads = {2, 2, 2, 2, 2, 2};
  spec.active_heads = {2, 2, 2, 3, 2, 2};
  CHECK(problem(spec) == "model.active_heads[3]=3 exceeds the site's (cross.L0) 2 heads");
  spec.active_heads = {1, 1};
  CHECK(problem(spec) ==
        "model.active_heads has 2 entries but an encoder_decoder has 6 attention sites (2 encoder layers, then self "
        "and cross per decoder layer), or [] for all heads");
  spec.active_heads = {};
  spec.cross_n_kv_heads = 2;  // GQA in one kind: its heads can only be masked
  CHECK(problem(spec) ==
        "model.layer_heads needs multi-head attention (model.cross_n_kv_heads = model.cross_n_heads), got "
        "model.cross_n_kv_heads=2, model.cross_n_heads=4; mask GQA/MQA heads with gates instead");
  CHECK(spec_problem(spec, "model.")->fields.front() == "model.layer_heads");
  spec.layer_heads = {};
  CHECK(problem(spec) == "none");
}
