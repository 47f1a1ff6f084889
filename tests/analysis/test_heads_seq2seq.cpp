// Head analysis of an encoder_decoder (src/analysis/heads.cpp): every head of its three kinds of
// attention (enc, dec, cross), numbered by site, against the model run by hand: importance
// against finite differences of each gate, masking against the gates set by name and the whole
// model run, and the attention statistics against each example's maps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "headlab/analysis/heads.h"
#include "headlab/data/model_input.h"
#include "headlab/io/head_list.h"
#include "headlab/nn/prune.h"
#include "headlab/ops/attention.h"
#include "headlab/ops/cross_entropy.h"
#include "support/scratch.h"
#include "support/tiny_model.h"

using namespace headlab;
using test::randomize;

namespace {

// 2 encoder layers of 4 heads, 2 decoder layers of 2 self and 2 cross heads over 1 K/V head:
// sites enc.L0, enc.L1, dec.L0, cross.L0, dec.L1, cross.L1.
template <typename T>
Model<T> tiny_seq2seq(const Dataset& data, uint64_t seed) {
  ModelSpec spec = test::tiny_seq2seq_spec(2, 4, 2, 1);
  spec.vocab_size = data.vocab_size();
  spec.max_seq_len = 32;
  Model<T> model(spec);
  randomize(model, seed);
  return model;
}

// Each example's mean loss over its scored targets, from one forward of the whole batch (no grad).
template <typename T>
std::vector<double> example_losses(Model<T>& model, const Batch& batch) {
  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  const ModelInput in = model_input(model.spec(), batch);
  const Tensor<T> logits = model.forward(tape, in, {}).logits.value();
  std::vector<double> losses;
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    const CrossEntropyStats e =
        cross_entropy_stats(logits.narrow(0, b * batch.seq_len, batch.seq_len), in.targets + b * batch.seq_len, -1);
    if (e.n_valid > 0) losses.push_back(e.mean_loss());
  }
  return losses;
}

// The loss of batch row b alone, as analysis's one backward per example sees it.
double row_loss(Model<double>& model, const Batch& batch, int64_t b) {
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  return model.forward(tape, model_input(model.spec(), batch, b, 1), {}).loss.value()(0);
}

// Michel's importance by central differences, every gate of every site in gate order: the mean
// over the batch's rows of |dL_b/dgate|.
std::vector<double> finite_difference_importance(Model<double>& model, const Batch& batch) {
  std::vector<double> importance;
  const double step = 1e-5;
  for (int site = 0; site < model.gates().size(); ++site)
    for (int64_t h = 0; h < model.gates().value(site).numel(); ++h) {
      double& gate = model.gates().value(site)(h);
      const double saved = gate;
      double sum = 0;
      for (int64_t b = 0; b < batch.batch_size; ++b) {
        gate = saved + step;
        const double up = row_loss(model, batch, b);
        gate = saved - step;
        const double down = row_loss(model, batch, b);
        sum += std::abs(up - down) / (2 * step);
      }
      gate = saved;
      importance.push_back(sum / static_cast<double>(batch.batch_size));
    }
  return importance;
}

}  // namespace

TEST_CASE("an encoder_decoder's heads of every kind are numbered by site and named by kind", "[analysis]") {
  test::ScratchDir dir("heads_seq2seq_labels");
  const auto data = test::tiny_translation(dir);
  Model<double> model = tiny_seq2seq<double>(*data, 3);
  AnalysisOptions o;
  o.batch_size = 4;
  o.ablation = false;
  o.similarity = false;
  const HeadScores s = analyze_heads(model, *data, Split::val, 1, o);
  REQUIRE(s.n_sites == 6);
  CHECK(s.n_heads == 4);
  CHECK(s.site_heads == std::vector<int64_t>{4, 4, 2, 2, 2, 2});
  REQUIRE(s.n_total() == 16);
  std::vector<std::string> labels;
  for (int64_t k = 0; k < s.n_total(); ++k) labels.push_back(head_label(s, k));
  CHECK(labels == std::vector<std::string>{"enc.L0H0", "enc.L0H1", "enc.L0H2", "enc.L0H3", "enc.L1H0", "enc.L1H1",
                                           "enc.L1H2", "enc.L1H3", "dec.L0H0", "dec.L0H1", "cross.L0H0", "cross.L0H1",
                                           "dec.L1H0", "dec.L1H1", "cross.L1H0", "cross.L1H1"});
  CHECK(s.index(5, 1) == 15);
  CHECK(s.site_of(11) == 3);
  CHECK_FALSE(s.one_stack());
}

TEST_CASE("an encoder_decoder's importance equals the gate gradients by central differences, every kind",
          "[analysis][grad]") {
  test::ScratchDir dir("heads_seq2seq_importance");
  const auto data = test::tiny_translation(dir);
  Model<double> model = tiny_seq2seq<double>(*data, 7);
  // A zero gate switches to one backward per example; without one, the fast path's per-site
  // dL/dout . out / gate must agree with it and with finite differences.
  const bool zero_gate = GENERATE(false, true);
  if (zero_gate) model.gates().value(3)(1) = 0.0;  // cross.L0H1
  AnalysisOptions o;
  o.batch_size = 4;
  o.ablation = false;
  o.attention = false;
  o.similarity = false;
  const HeadScores fast = analyze_heads(model, *data, Split::val, 1, o);
  o.importance_by_rows = true;
  const HeadScores by_rows = analyze_heads(model, *data, Split::val, 1, o);

  Batch batch = data->make_batch(4);
  data->fill_batch(Split::val, 0, batch);
  REQUIRE(fast.n_examples == batch.batch_size);
  const std::vector<double> expected = finite_difference_importance(model, batch);
  REQUIRE(expected.size() == static_cast<size_t>(fast.n_total()));
  for (int64_t k = 0; k < fast.n_total(); ++k) {
    INFO(head_label(fast, k) << ": analysis " << fast.importance[k] << ", by rows " << by_rows.importance[k]
                             << ", finite differences " << expected[k]);
    CHECK(fast.importance[k] == Approx(expected[k]).epsilon(1e-6).margin(1e-9));
    CHECK(by_rows.importance[k] == Approx(fast.importance[k]).epsilon(1e-10).margin(1e-12));
  }
  CHECK(model.gates().grads()[0] == 0.0);
  CHECK(model.gates().value(3)(1) == (zero_gate ? 0.0 : fast.gate[11]));
}

TEST_CASE("an encoder_decoder's masked scores equal its gates set by name and the whole model run, every kind",
          "[analysis]") {
  // Float (the precision analyze runs in), two batches, a head already gated off in each kind.
  test::ScratchDir dir("heads_seq2seq_masking");
  const auto data = test::tiny_translation(dir);
  Model<float> model = tiny_seq2seq<float>(*data, 17);
  switch_off_heads(model, parse_head_list("enc.L1H2,dec.L0H1,cross.L1H0", model.spec(), "--mask"));
  CHECK(model.gates().value(1)(2) == 0.0f);
  CHECK(model.gates().value(2)(1) == 0.0f);
  CHECK(model.gates().value(5)(0) == 0.0f);
  const int64_t B = 4, n_batches = 2;
  const HeadScores s = analyze_heads(model, *data, Split::val, n_batches,
                                     {.batch_size = B, .importance = false, .layer_only = true, .similarity = false});
  const int64_t E = s.n_examples;
  REQUIRE(E > 0);

  const ModelSpec spec = model.spec();
  const std::vector<float> gates(model.gates().values(), model.gates().values() + model.gates().slab_size());
  // The examples' losses with the heads named in `mask` switched off, batch after batch.
  auto masked_by_hand = [&](const std::string& mask) {
    if (!mask.empty()) switch_off_heads(model, parse_head_list(mask, spec, "--mask"));
    std::vector<double> losses;
    Batch batch = data->make_batch(B);
    for (int64_t i = 0; i < n_batches; ++i) {
      data->fill_batch(Split::val, i, batch);
      const std::vector<double> l = example_losses(model, batch);
      losses.insert(losses.end(), l.begin(), l.end());
    }
    std::copy(gates.begin(), gates.end(), model.gates().values());
    return losses;
  };
  const std::vector<double> unmasked = masked_by_hand("");
  CHECK(unmasked == s.example_loss);
  for (int64_t site = 0; site < s.n_sites; ++site)
    for (int64_t h = 0; h < s.heads_at(site); ++h) {
      const int64_t k = s.index(site, h);
      const std::string label = head_label(s, k);
      INFO(label);
      std::string others;
      for (int64_t g = 0; g < s.heads_at(site); ++g) {
        if (g == h) continue;
        if (!others.empty()) others += ',';
        others += head_label(s, s.index(site, g));
      }
      const std::vector<double> ablated = masked_by_hand(label), alone = masked_by_hand(others);
      REQUIRE(ablated.size() == static_cast<size_t>(E));
      CHECK(std::equal(ablated.begin(), ablated.end(), s.example_ablation_loss.begin() + k * E));
      CHECK(std::equal(alone.begin(), alone.end(), s.example_layer_only_loss.begin() + k * E));
      if (s.gate[k] == 0) CHECK(s.ablation_loss_delta[k] == 0.0);  // already off: exactly nothing changes
      if (s.gate[k] != 0) CHECK(s.ablation_loss_delta[k] != 0.0);
    }
  // The gates come back as they were, the switched-off ones included.
  CHECK(std::equal(gates.begin(), gates.end(), model.gates().values()));
}

TEST_CASE(
    "an encoder_decoder's attention statistics: encoder heads over the source, cross heads' entropy and "
    "confidence, JS within a kind",
    "[analysis]") {
  test::ScratchDir dir("heads_seq2seq_stats");
  const auto data = test::tiny_translation(dir);
  Model<double> model = tiny_seq2seq<double>(*data, 5);
  const int64_t B = 4;
  AnalysisOptions o;
  o.batch_size = B;
  o.ablation = false;
  o.importance = false;
  const HeadScores s = analyze_heads(model, *data, Split::val, 1, o);

  // By hand from the same batch's maps: mean entropy and confidence over the rows analysis
  // counts (encoder: real source tokens; cross: real target tokens), for enc.L0 and cross.L0.
  Batch batch = data->make_batch(B);
  data->fill_batch(Split::val, 0, batch);
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  ForwardOptions keep;
  keep.keep_probs = true;
  model.forward(tape, model_input(model.spec(), batch), keep);
  const int64_t enc_site = 0, cross_site = 3, He = 4, Hc = 2, S = batch.source_len, T = batch.seq_len;
  const Tensor<double> enc_probs = attention_probs(model.attention_outputs()[enc_site]);      // [B,He,S,S]
  const Tensor<double> cross_probs = attention_probs(model.attention_outputs()[cross_site]);  // [B,Hc,T,S]
  std::vector<double> enc_entropy(He), cross_ent(Hc), cross_confidence(Hc);
  double enc_rows = 0, cross_rows = 0;
  bool padded = false;
  auto entropy = [](const double* p, int64_t n) {
    double e = 0, best = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (p[j] > 0) e -= p[j] * std::log(p[j]);
      best = std::max(best, p[j]);
    }
    return std::pair{e, best};
  };
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    const uint8_t* source_real = batch.source_padding.data() + b * S;
    int64_t real_source = 0;
    for (int64_t j = 0; j < S; ++j) real_source += source_real[j];
    padded = padded || real_source < S;
    REQUIRE(real_source >= 2);
    for (int64_t t = 0; t < S; ++t) {
      if (!source_real[t]) continue;
      enc_rows += 1;
      for (int64_t h = 0; h < He; ++h)
        enc_entropy[h] += entropy(enc_probs.data() + ((b * He + h) * S + t) * S, S).first;
    }
    for (int64_t t = 0; t < T; ++t) {
      if (!batch.key_padding[b * T + t]) continue;
      cross_rows += 1;
      for (int64_t h = 0; h < Hc; ++h) {
        const auto [e, best] = entropy(cross_probs.data() + ((b * Hc + h) * T + t) * S, S);
        cross_ent[h] += e;
        cross_confidence[h] += best;
      }
    }
  }
  tape.reset();
  CHECK(padded);  // some source is padded in its batch, so padding is left out
  for (int64_t h = 0; h < He; ++h)
    CHECK(s.entropy[s.index(enc_site, h)] == Approx(enc_entropy[h] / enc_rows).epsilon(1e-9));
  for (int64_t h = 0; h < Hc; ++h) {
    const int64_t k = s.index(cross_site, h);
    CHECK(s.entropy[k] == Approx(cross_ent[h] / cross_rows).epsilon(1e-9));
    CHECK(s.confidence[k] == Approx(cross_confidence[h] / cross_rows).epsilon(1e-9));
    // Positions of two sequences do not compare: no distance, offset or token statistics.
    CHECK(std::isnan(s.distance[k]));
    CHECK(std::isnan(s.positional_offset[k]));
    CHECK(std::isnan(s.previous_token_agreement[k]));
    CHECK(std::isnan(s.rare_token_agreement[k]));
  }
  const int64_t enc = s.index(enc_site, 0), dec = s.index(2, 0), cross = s.index(cross_site, 0), N = s.n_total();
  for (int64_t k : {enc, dec}) {
    CHECK(!std::isnan(s.distance[k]));
    CHECK(!std::isnan(s.positional_offset[k]));
    CHECK(!std::isnan(s.previous_token_agreement[k]));
  }
  // JS only within a kind (the same queries and keys): enc with enc, cross with cross.
  REQUIRE(s.js_distance.size() == static_cast<size_t>(N * N));
  CHECK(std::isnan(s.js_distance[enc * N + cross]));
  CHECK(std::isnan(s.js_distance[dec * N + cross]));
  CHECK(std::isnan(s.js_distance[enc * N + dec]));
  CHECK(s.js_distance[cross * N + s.index(5, 1)] > 0);
  CHECK(s.js_distance[enc * N + s.index(1, 3)] > 0);
  for (int64_t k = 0; k < N; ++k) CHECK(!std::isnan(s.js_nearest[k]));
  // Roles: the baselines are the source's, so enc heads are tested against them; cross heads have
  // no positions and get no role.
  CHECK(s.baseline_kind == AttentionKind::enc);
  REQUIRE(s.role.size() == static_cast<size_t>(N));
  CHECK(s.role[enc] >= 0);
  CHECK(s.role[dec] >= 0);
  CHECK(s.role[cross] == -1);
  REQUIRE(!std::isnan(s.rare_token_agreement[enc]));
  CHECK(s.rare_token_rows[enc] == s.rare_token_rows[s.index(1, 3)]);  // the same rows for every enc head
  CHECK(s.rare_token_baseline.chance > 0);
  CHECK(s.rare_token_baseline.chance < 1);
  CHECK(s.rare_token_baseline.agreement >= s.rare_token_baseline.chance * 0.999);  // the best offset
}
