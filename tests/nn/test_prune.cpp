#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "headlab/decode/search.h"
#include "headlab/nn/kv_cache.h"
#include "headlab/nn/prune.h"
#include "support/tiny_model.h"

using namespace headlab;
using test::randomize;
using test::tiny_spec;
using test::TinyBatch;

namespace {

// Logits of a forward without grad, copied out.
template <typename T>
std::vector<T> logits_of(Model<T>& model, const TinyBatch& batch) {
  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  const Tensor<T> logits = model.forward(tape, batch.input(), {}).logits.value();
  std::vector<T> out(logits.data(), logits.data() + logits.numel());
  tape.reset();
  return out;
}

template <typename T>
double max_abs_difference(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return d;
}

// A 3-layer MHA model with 4 heads (d_head 2): non-trivial parameters and gates, then a
// different set of heads gated to 0 in each layer (2, 1 and 3 heads).
template <typename T>
Model<T> masked_model(ModelKind kind) {
  ModelSpec spec = tiny_spec(kind, 4, 4);
  spec.n_layers = 3;
  spec.positions = kind == ModelKind::decoder ? Positions::learned : Positions::sinusoidal;
  Model<T> model(spec);
  randomize(model, 21);
  const std::vector<std::vector<int64_t>> masked = {{1, 3}, {0}, {0, 1, 2}};
  for (int l = 0; l < 3; ++l)
    for (int64_t h : masked[static_cast<size_t>(l)]) model.gates().value(l)(h) = T(0);
  return model;
}

}  // namespace

TEST_CASE("a masked model and its physically pruned twin give the same logits", "[nn][prune]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  TinyBatch batch(tiny_spec(kind, 4, 4), 3);

  Model<float> masked = masked_model<float>(kind);
  const HeadKeepMask keep = heads_with_nonzero_gates(masked);
  Model<float> pruned = prune_heads(masked, keep);
  CHECK(pruned.spec().layer_heads == std::vector<int64_t>{2, 3, 1});
  // Each removed head took its 3 Dh rows of the q/k/v weight (and bias) and Dh columns of proj.
  const int64_t C = masked.spec().d_model, Dh = masked.spec().d_head, removed = 6;
  CHECK(masked.params().count() - pruned.params().count() == removed * (3 * Dh * C + 3 * Dh + C * Dh));
  // Surviving gates are copied (randomize gave them values in [0.5, 1.5), not 1).
  CHECK(pruned.gates().value(1)(0) == masked.gates().value(1)(1));
  CHECK(pruned.gates().value(2)(0) == masked.gates().value(2)(3));
  const double float_diff = max_abs_difference(logits_of(masked, batch), logits_of(pruned, batch));
  INFO("float: max |masked - pruned| = " << float_diff);
  CHECK(float_diff <= 1e-5);

  Model<double> masked_d = masked_model<double>(kind);
  Model<double> pruned_d = prune_heads(masked_d, heads_with_nonzero_gates(masked_d));
  const double double_diff = max_abs_difference(logits_of(masked_d, batch), logits_of(pruned_d, batch));
  INFO("double: max |masked - pruned| = " << double_diff);
  CHECK(double_diff <= 1e-13);
}

TEST_CASE("pruning a pruned model, or keeping every head, gives the same model again", "[nn][prune]") {
  Model<double> masked = masked_model<double>(ModelKind::decoder);
  Model<double> pruned = prune_heads(masked, heads_with_nonzero_gates(masked));
  Model<double> again = prune_heads(pruned, heads_with_nonzero_gates(pruned));  // all kept
  CHECK(again.spec().layer_heads == pruned.spec().layer_heads);
  REQUIRE(again.params().slab_size() == pruned.params().slab_size());
  CHECK(std::equal(pruned.params().values(), pruned.params().values() + pruned.params().slab_size(),
                   again.params().values()));
  // A full model that keeps every head keeps the plain spec (no layer_heads).
  Model<double> full(tiny_spec(ModelKind::decoder, 2, 2));
  CHECK(prune_heads(full, heads_with_nonzero_gates(full)).spec().layer_heads.empty());
}

TEST_CASE("a gate of zero removes the head's contribution exactly", "[nn][prune]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  const ModelSpec spec = tiny_spec(kind, 4, 4);
  TinyBatch batch(spec, 8);
  const int layer = 1;
  const int64_t head = 2, Dh = spec.d_head, H = spec.n_heads;
  Model<float> masked(spec);
  randomize(masked, 4);
  masked.gates().value(layer)(head) = 0.0f;
  const std::vector<float> reference = logits_of(masked, batch);

  // The masked head's q/k/v rows and bias perturbed: not one bit of the logits changes.
  Model<float> perturbed(spec);
  randomize(perturbed, 4);
  perturbed.gates().value(layer)(head) = 0.0f;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const Tensor<float> qkv = perturbed.params().value("blocks/1/attn/qkv/weight");
  const Tensor<float> qkv_bias = perturbed.params().value("blocks/1/attn/qkv/bias");
  for (int64_t block = 0; block < 3; ++block)
    for (int64_t r = (block * H + head) * Dh; r < (block * H + head + 1) * Dh; ++r) {
      qkv_bias(r) += u(rng);
      for (int64_t c = 0; c < spec.d_model; ++c) qkv(r, c) += u(rng);
    }
  CHECK(logits_of(perturbed, batch) == reference);

  // Gate 1 with the head's output-projection columns zeroed: the same logits, bit for bit.
  Model<float> zeroed(spec);
  randomize(zeroed, 4);
  zeroed.gates().value(layer)(head) = 1.0f;
  zeroed.params().value("blocks/1/attn/proj/weight").narrow(1, head * Dh, Dh).fill(0.0f);
  CHECK(logits_of(zeroed, batch) == reference);
}

TEST_CASE("a keep mask of the wrong shape or meeting GQA is one line", "[nn][prune]") {
  Model<float> model(tiny_spec(ModelKind::decoder, 4, 4));
  CHECK_THROWS_WITH(prune_heads(model, {{true, true, true, true}}), Catch::Contains("keep mask has 1 layers"));
  CHECK_THROWS_WITH(prune_heads(model, {{true, true}, {true, true, true, true}}),
                    Catch::Contains("keep mask of layer 0 has 2 heads"));
  Model<float> gqa(tiny_spec(ModelKind::decoder, 4, 2));
  CHECK_THROWS_WITH(prune_heads(gqa, heads_with_nonzero_gates(gqa)), Catch::Contains("needs multi-head attention"));
}

TEST_CASE("prune_problem is the one check behind pruned_spec: a reason, or none", "[nn][prune]") {
  const ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 4);
  CHECK(prune_problem(spec, {{true, false, false, false}, {false, true, true, true}}).empty());
  const HeadKeepMask emptied = {{true, true, true, true}, {false, false, false, false}};
  CHECK(prune_problem(spec, emptied).empty());  // a layer removed whole
  CHECK(pruned_spec(spec, emptied).layer_heads == std::vector<int64_t>{4, 0});
  const HeadKeepMask wrong = {{true, true, true, true}};
  CHECK_THROWS_WITH(pruned_spec(spec, wrong), Catch::Equals("prune_heads: " + prune_problem(spec, wrong)));
  const ModelSpec gqa = tiny_spec(ModelKind::decoder, 4, 2);
  const HeadKeepMask all = {{true, true, true, true}, {true, true, true, true}};
  CHECK(prune_problem(gqa, all) ==
        "physical removal needs multi-head attention (n_kv_heads=n_heads), got n_kv_heads=2, n_heads=4; mask GQA/MQA "
        "heads with gates instead");
  ModelSpec invalid = spec;
  invalid.n_kv_heads = 3;
  CHECK_THROWS_WITH(prune_problem(invalid, all), Catch::StartsWith("model: n_kv_heads=3 does not divide"));
}

TEST_CASE("switch_off_heads zeroes the named heads' gates and refuses a list of another shape", "[nn][prune]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 11, 4, 4, 8);
  spec.layer_heads = {2, 4};
  Model<double> model(spec);
  randomize(model, 2);
  const double kept = model.gates().value(1)(1);
  switch_off_heads(model, HeadKeepMask{{false, true}, {true, false, false, true}});
  CHECK(model.gates().value(0)(0) != 0.0);
  CHECK(model.gates().value(0)(1) == 0.0);
  CHECK(model.gates().value(1)(0) == 0.0);
  CHECK(model.gates().value(1)(1) == kept);
  CHECK(model.gates().value(1)(3) == 0.0);
  CHECK_THROWS_WITH(switch_off_heads(model, HeadKeepMask{{false, true}}),
                    Catch::Equals("switch_off_heads: the list has 1 layers, the model 2"));
  CHECK_THROWS_WITH(switch_off_heads(model, HeadKeepMask{{false, true}, {true}}),
                    Catch::Equals("switch_off_heads: the list has 1 heads in layer 1, the model 4"));
}

TEST_CASE("an encoder_decoder's heads are switched off per attention site", "[nn][prune]") {
  Model<double> model(test::tiny_seq2seq_spec(2, 4, 2, 1));  // sites enc 4, enc 4, dec 2, cross 2, dec 2, cross 2
  randomize(model, 4);
  HeadKeepMask named = heads_with_nonzero_gates(model);
  REQUIRE(named.size() == 6);
  CHECK(named[0].size() == 4);
  CHECK(named[3].size() == 2);
  for (std::vector<bool>& site : named) site.assign(site.size(), false);
  named[1][3] = named[3][1] = true;  // enc.L1H3 and cross.L0H1
  switch_off_heads(model, named);
  CHECK(model.gates().value(1)(3) == 0.0);
  CHECK(model.gates().value(3)(1) == 0.0);
  CHECK(model.gates().value(3)(0) != 0.0);
  const HeadKeepMask keep = heads_with_nonzero_gates(model);
  CHECK_FALSE(keep[1][3]);
  CHECK_FALSE(keep[3][1]);
  CHECK(keep[2][1]);
}

namespace {

// An encoder_decoder with MHA in all three kinds (enc 4 heads of width 2, dec 2 of width 4, cross
// 4 of width 2), non-trivial parameters and gates, and heads of every kind gated to 0, per site
// (enc.L0, enc.L1, dec.L0, cross.L0, dec.L1, cross.L1): 1, 2, 0, 2, 1 and 1 heads.
const std::vector<std::vector<int64_t>> kSeq2seqMasked = {{1}, {0, 3}, {}, {0, 2}, {0}, {3}};

template <typename T>
Model<T> masked_seq2seq() {
  Model<T> model(test::tiny_seq2seq_spec(2, 4, 4, 4));
  randomize(model, 31);
  for (size_t site = 0; site < kSeq2seqMasked.size(); ++site)
    for (int64_t h : kSeq2seqMasked[site]) model.gates().value(static_cast<int>(site))(h) = T(0);
  return model;
}

template <typename T>
double loss_of(Model<T>& model, const TinyBatch& batch) {
  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  return static_cast<double>(model.forward(tape, batch.input(), {}).loss.value()(0));
}

// Cached decoding of the batch's targets one token at a time: every step's logits, and the floats
// the cache holds for the cross-attention's K/V (the sources' part of the cache's buffers).
struct CachedDecoding {
  std::vector<double> logits;
  int64_t cross_floats = 0;
};

CachedDecoding decode_cached(Model<double>& model, const TinyBatch& batch) {
  KvCache<double> cache(model.spec(), batch.B, batch.T, batch.S);
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  model.start_decoding(tape, batch.input(), cache);
  tape.reset();
  CachedDecoding out;
  for (int64_t l = 0; l < model.spec().n_layers; ++l)
    out.cross_floats += cache.cross_keys(l).numel() + cache.cross_values(l).numel();
  for (int64_t t = 0; t < batch.T; ++t) {
    std::vector<int32_t> tokens;
    for (int64_t b = 0; b < batch.B; ++b) tokens.push_back(batch.tokens[static_cast<size_t>(b * batch.T + t)]);
    const Tensor<double> l =
        model.decode_step(tape, {batch.B, 1, tokens.data(), nullptr, nullptr}, cache).logits.value();
    out.logits.insert(out.logits.end(), l.data(), l.data() + l.numel());
    tape.reset();
  }
  return out;
}

}  // namespace

TEST_CASE("an encoder_decoder with heads of each kind masked and its physically pruned twin agree",
          "[nn][prune][encoder_decoder]") {
  const TinyBatch batch(test::tiny_seq2seq_spec(2, 4, 4, 4), 5);
  Model<double> masked = masked_seq2seq<double>();
  Model<double> pruned = prune_heads(masked, heads_with_nonzero_gates(masked));
  CHECK(pruned.spec().layer_heads == std::vector<int64_t>{3, 2, 2, 2, 1, 3});
  // Each removed head took 3 Dh rows of its Q/K/V projections (self: qkv; cross: q and kv), their
  // biases and Dh columns of proj: 4 Dh C + 3 Dh values, Dh = 2 (enc, cross) or 4 (dec).
  const int64_t C = 8, removed_enc = 3, removed_dec = 1, removed_cross = 3;
  auto per_head = [&](int64_t Dh) { return 4 * Dh * C + 3 * Dh; };
  CHECK(masked.params().count() - pruned.params().count() ==
        (removed_enc + removed_cross) * per_head(2) + removed_dec * per_head(4));
  // Surviving gates are copied: cross.L0 keeps heads 1 and 3.
  CHECK(pruned.gates().value(3)(0) == masked.gates().value(3)(1));
  CHECK(pruned.gates().value(3)(1) == masked.gates().value(3)(3));
  CHECK(pruned.gates().value(1)(1) == masked.gates().value(1)(2));

  SECTION("teacher-forced logits and loss") {
    const double double_diff = max_abs_difference(logits_of(masked, batch), logits_of(pruned, batch));
    INFO("double: max |masked - pruned| = " << double_diff);
    CHECK(double_diff <= 1e-13);
    CHECK(std::abs(loss_of(masked, batch) - loss_of(pruned, batch)) <= 1e-13);
    Model<float> masked_f = masked_seq2seq<float>();
    Model<float> pruned_f = prune_heads(masked_f, heads_with_nonzero_gates(masked_f));
    const double float_diff = max_abs_difference(logits_of(masked_f, batch), logits_of(pruned_f, batch));
    INFO("float: max |masked - pruned| = " << float_diff);
    CHECK(float_diff <= 1e-5);
    CHECK(std::abs(loss_of(masked_f, batch) - loss_of(pruned_f, batch)) <= 1e-5);
  }
  SECTION("cached decoding: the same logits step by step, from a smaller cross K/V cache") {
    const CachedDecoding full = decode_cached(masked, batch), small = decode_cached(pruned, batch);
    CHECK(max_abs_difference(full.logits, small.logits) <= 1e-13);
    // B = 2 sources of S = 6 tokens; 3 cross heads of width 2 gone, each with its K and V.
    CHECK(full.cross_floats - small.cross_floats == removed_cross * 2 * batch.B * batch.S * 2);
    CHECK(small.cross_floats == (8 - removed_cross) * 2 * batch.B * batch.S * 2);
  }
}

TEST_CASE("greedy and beam translation of a cross-pruned encoder_decoder give the masked model's tokens",
          "[nn][prune][encoder_decoder]") {
  Model<float> masked = masked_seq2seq<float>();
  Model<float> pruned = prune_heads(masked, heads_with_nonzero_gates(masked));
  std::mt19937_64 rng(3);
  std::vector<std::vector<int32_t>> sources(6);
  for (size_t i = 0; i < sources.size(); ++i) {
    for (size_t t = 0; t < 2 + i % 4; ++t) sources[i].push_back(4 + static_cast<int32_t>(rng() % 7));
    sources[i].push_back(3);  // </s>
  }
  SearchOptions search;
  search.beam = GENERATE(1, 3);
  search.max_len_a = 0;
  search.max_len_b = 7;
  search.batch_sentences = 4;
  const SpecialIds ids{.bos = 2, .eos = 3, .pad = 0};
  const std::vector<std::vector<int32_t>> want = translate(masked, sources, ids, search);
  int64_t tokens = 0;
  for (const std::vector<int32_t>& t : want) tokens += static_cast<int64_t>(t.size());
  INFO("beam " << search.beam << ", " << tokens << " target tokens");
  CHECK(tokens > 0);
  CHECK(translate(pruned, sources, ids, search) == want);
}

TEST_CASE("an encoder_decoder's keep mask of the wrong shape or meeting GQA is one line",
          "[nn][prune][encoder_decoder]") {
  const ModelSpec spec = test::tiny_seq2seq_spec(2, 4, 4, 4);
  Model<float> model(spec);
  HeadKeepMask keep = heads_with_nonzero_gates(model);
  keep[3].assign(4, false);  // cross.L0 removed whole: allowed
  CHECK(prune_problem(spec, keep).empty());
  keep.pop_back();
  CHECK(
      prune_problem(spec, keep) ==
      "the keep mask has 5 sites, the model 6 attention sites (encoder layers, then self and cross per decoder layer)");
  keep = heads_with_nonzero_gates(model);
  keep[2].push_back(true);
  CHECK(prune_problem(spec, keep) == "the keep mask of site 2 (dec.L0) has 3 heads, the site 2");
  const ModelSpec gqa = test::tiny_seq2seq_spec(2, 4, 4, 2);
  CHECK(prune_problem(gqa, heads_with_nonzero_gates(Model<float>(gqa))) ==
        "physical removal needs multi-head attention (cross_n_kv_heads=cross_n_heads), got cross_n_kv_heads=2, "
        "cross_n_heads=4; mask GQA/MQA heads with gates instead");
}

TEST_CASE("FFN units gated to 0 and the model with them cut out give the same logits, in every kind",
          "[nn][prune][ffn]") {
  // GQA and MQA too: a unit is not shared the way a K/V head is.
  const int kind = GENERATE(0, 1, 2);
  const ModelSpec spec = kind == 0   ? tiny_spec(ModelKind::decoder, 4, 2)
                         : kind == 1 ? tiny_spec(ModelKind::encoder, 2, 2)
                                     : test::tiny_seq2seq_spec(2, 2, 2, 1);
  const TinyBatch batch(spec, 3);
  auto masked_of = [&](auto zero) {
    using T = decltype(zero);
    Model<T> model(spec);
    randomize(model, 31);
    test::randomize_ffn_gates(model, 32);
    for (int b = 0; b < model.ffn_gates().size(); ++b)  // 3 units of each block, a different 3 each time
      for (const int f : {b % 16, (b + 5) % 16, (b + 11) % 16}) model.ffn_gates().value(b)(f) = zero;
    return model;
  };
  Model<float> masked = masked_of(0.0f);
  const UnitKeepMask keep = units_with_nonzero_gates(masked);
  Model<float> pruned = prune_units(masked, keep);
  const int64_t blocks = spec.mlp_blocks(), C = spec.d_model;
  CHECK(pruned.spec().mlp_units == std::vector<int64_t>(static_cast<size_t>(blocks), 13));
  // Each removed unit took its row of fc (C weights and a bias) and its column of the projection.
  CHECK(masked.params().count() - pruned.params().count() == blocks * 3 * (2 * C + 1));
  // Surviving gates are copied: block 0 lost units 0, 5 and 11, so its new unit 0 is old unit 1.
  CHECK(pruned.ffn_gates().value(0)(0) == masked.ffn_gates().value(0)(1));
  CHECK(pruned.gates().value(0)(1) == masked.gates().value(0)(1));
  const double float_diff = max_abs_difference(logits_of(masked, batch), logits_of(pruned, batch));
  INFO("float: max |masked - pruned| = " << float_diff);
  CHECK(float_diff <= 1e-5);
  Model<double> masked_d = masked_of(0.0);
  Model<double> pruned_d = prune_units(masked_d, units_with_nonzero_gates(masked_d));
  const double double_diff = max_abs_difference(logits_of(masked_d, batch), logits_of(pruned_d, batch));
  INFO("double: max |masked - pruned| = " << double_diff);
  CHECK(double_diff <= 1e-12);
  // Pruning the pruned model again, keeping everything, is the same model.
  Model<double> again = prune_units(pruned_d, units_with_nonzero_gates(pruned_d));
  CHECK(max_abs_difference(logits_of(pruned_d, batch), logits_of(again, batch)) == 0);
}

TEST_CASE("an FFN keep mask of the wrong shape is one line; one that empties a block removes it whole",
          "[nn][prune][ffn]") {
  const ModelSpec spec = tiny_spec(ModelKind::decoder, 2, 2);
  UnitKeepMask keep(2, std::vector<bool>(16, true));
  CHECK(prune_units_problem(spec, keep).empty());
  keep[1].assign(16, false);
  CHECK(prune_units_problem(spec, keep).empty());
  CHECK(pruned_units_spec(spec, keep).mlp_units == std::vector<int64_t>{16, 0});
  keep.pop_back();
  CHECK_THROWS_WITH(pruned_units_spec(spec, keep), "prune_units: the keep mask has 1 MLP blocks, the model 2");
  CHECK(prune_units_problem(spec, keep) == "the keep mask has 1 MLP blocks, the model 2");
  keep = UnitKeepMask(2, std::vector<bool>(15, true));
  CHECK(prune_units_problem(spec, keep) == "the keep mask of MLP block 0 has 15 units, the block 16");
}

TEST_CASE("an attention layer or FFN block removed whole computes the masked model bit for bit, in every kind",
          "[nn][prune][whole]") {
  // Every gate of one attention site and of one MLP block at 0 (the rest full): the model with
  // them cut out adds their projections' biases alone, which is exactly what the masked model's
  // projections of all-zero inputs add, in evaluation and in training (dropout on the same stream).
  const int kind = GENERATE(0, 1, 2);
  ModelSpec spec = kind == 0   ? tiny_spec(ModelKind::decoder, 4, 4)
                   : kind == 1 ? tiny_spec(ModelKind::encoder, 2, 2)
                               : test::tiny_seq2seq_spec(2, 4, 4, 4);
  spec.positions = kind == 0 ? Positions::learned : Positions::sinusoidal;
  spec.dropout = 0.25;
  const TinyBatch batch(spec, 7);
  const int n_sites = static_cast<int>(spec.attention_sites().size());
  const int site = kind == 2 ? 3 : 1, block = 0;  // cross.L0 in the encoder_decoder
  Model<double> masked(spec);
  randomize(masked, 41);
  test::randomize_ffn_gates(masked, 42);
  masked.gates().value(site).fill(0.0);
  masked.ffn_gates().value(block).fill(0.0);
  Model<double> pruned =
      prune_units(prune_heads(masked, heads_with_nonzero_gates(masked)), units_with_nonzero_gates(masked));
  std::vector<int64_t> want_heads;
  for (int i = 0; i < n_sites; ++i) want_heads.push_back(i == site ? 0 : masked.gates().value(i).numel());
  CHECK(pruned.spec().layer_heads == want_heads);
  CHECK(pruned.spec().mlp_units.at(block) == 0);
  CHECK(pruned.params().count() < masked.params().count());
  CHECK(logits_of(pruned, batch) == logits_of(masked, batch));
  auto training_loss = [&](Model<double>& m) {
    Arena arena;
    Tape<double> tape(arena);
    NoGradGuard<double> no_grad(tape);
    return m.forward(tape, batch.input(), {.training = true, .dropout_seed = 9}).loss.value()(0);
  };
  CHECK(training_loss(pruned) == training_loss(masked));
  if (kind == 2) {  // decoding: the emptied cross site holds no K/V and reads none
    CHECK(decode_cached(pruned, batch).logits == decode_cached(masked, batch).logits);
  }
}
