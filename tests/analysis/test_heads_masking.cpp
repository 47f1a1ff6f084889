// Head analysis's masked forwards (ablation, each head alone in its layer, a physically pruned
// model) against the model run whole with the gates set by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "headlab/analysis/heads.h"
#include "headlab/data/tasks.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"
#include "headlab/nn/prune.h"
#include "headlab/ops/cross_entropy.h"
#include "support/scratch.h"
#include "support/tiny_model.h"

using namespace headlab;
using test::randomize;
using test::tiny_spec;

TEST_CASE("a physically pruned model's head scores equal its masked twin's on the surviving heads",
          "[analysis][prune]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  const int64_t T = 6;
  auto data = test::tiny_task(kind, T);
  Model<double> masked(tiny_spec(kind, kind == ModelKind::decoder ? 11 : 16, 4, 4, T));
  randomize(masked, 3);
  for (auto [layer, head] : {std::pair{0, 1}, std::pair{1, 0}, std::pair{1, 3}})
    masked.gates().value(layer)(head) = 0.0;
  const HeadKeepMask keep = heads_with_nonzero_gates(masked);
  Model<double> pruned = prune_heads(masked, keep);
  AnalysisOptions o;
  o.batch_size = 8;
  o.layer_only = true;
  const HeadScores a = analyze_heads(masked, *data, Split::val, 2, o);
  const HeadScores b = analyze_heads(pruned, *data, Split::val, 2, o);
  REQUIRE(b.n_total() == 5);
  CHECK(b.site_heads == std::vector<int64_t>{3, 2});
  CHECK(b.n_heads == 3);
  CHECK(b.loss == Approx(a.loss).epsilon(1e-12));
  // Old index of each surviving head, in the pruned model's order.
  std::vector<int64_t> old_index;
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h)
      if (keep[l][h]) old_index.push_back(a.index(l, h));
  auto same = [](double x, double y) {
    return (std::isnan(x) && std::isnan(y)) || std::abs(x - y) <= 1e-9 * std::max(1.0, std::abs(x));
  };
  for (const HeadColumn& c : head_columns()) {
    // The masked heads still attend (a gate scales the output, not A), so they take part in the
    // masked model's nearest-head search and per-layer importance norm; the rest must agree.
    if (std::string(c.name) == "js_nearest" || std::string(c.name) == "importance_normalized") continue;
    for (int64_t k = 0; k < 5; ++k) {
      INFO(c.name << " of pruned head " << k << ": masked " << (a.*c.values)[old_index[k]] << ", pruned "
                  << (b.*c.values)[k]);
      CHECK(same((a.*c.values)[old_index[k]], (b.*c.values)[k]));
    }
  }
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j)
      CHECK(same(a.js_distance[old_index[i] * a.n_total() + old_index[j]], b.js_distance[i * 5 + j]));

  // heads.csv has a row per head of each layer; heads.h5 pads layer 1 (2 of 3 heads) with NaN.
  test::ScratchDir dir("analysis_ragged");
  write_heads_csv((dir.dir / "heads.csv").string(), b);
  write_similarity_csv((dir.dir / "heads_similarity.csv").string(), b);
  write_heads_h5((dir.dir / "heads.h5").string(), b, {});
  const CsvTable heads = read_csv(dir.dir / "heads.csv");
  std::vector<std::string> rows;
  for (const std::vector<std::string>& row : heads.rows)
    rows.push_back(row[heads.column("layer")] + "," + row[heads.column("head")]);
  CHECK(rows == std::vector<std::string>{"0,0", "0,1", "0,2", "1,0", "1,1"});
  CHECK_THAT(test::read_file(dir.dir / "heads_similarity.csv"), Catch::StartsWith("head,L0H0,L0H1,L0H2,L1H0,L1H1\n"));
  CheckpointReader h5((dir.dir / "heads.h5").string());
  CHECK(h5.shape("heads/gate") == Shape{2, 3});
  const std::vector<double> gate = h5.read_array<double>("heads/gate");
  CHECK(gate[3] == b.gate[3]);
  CHECK(std::isnan(gate[5]));
  CHECK(h5.read_array<int64_t>("layer_heads") == std::vector<int64_t>{3, 2});
}

// Masked forwards by hand, the way analysis used to run them: the layer's gates set, the whole
// model run on the whole batch. Per example of every batch (those with a scored target), the
// mean loss; and the loss sum and correct count over all of them.
struct MaskedReference {
  std::vector<double> example_loss, example_accuracy;
  double loss_sum = 0, correct = 0;
};

template <typename T>
MaskedReference masked_by_hand(Model<T>& model, const Dataset& data, int64_t n_batches, int64_t B, int64_t layer,
                               const std::vector<bool>& gate_off) {
  Tensor<T> gates = model.gates().value(static_cast<int>(layer));
  const std::vector<T> saved(gates.data(), gates.data() + gates.numel());
  for (int64_t g = 0; g < gates.numel(); ++g)
    if (gate_off[g]) gates.data()[g] = T(0);
  MaskedReference r;
  Batch batch = data.make_batch(B);
  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  const bool encoder = model.spec().kind == ModelKind::encoder;
  for (int64_t i = 0; i < n_batches; ++i) {
    data.fill_batch(Split::val, i, batch);
    ModelInput in{B, batch.seq_len, batch.tokens.data(), encoder ? batch.labels.data() : batch.targets.data(),
                  batch.key_padding.empty() ? nullptr : batch.key_padding.data()};
    const Tensor<T> logits = model.forward(tape, in, {}).logits.value();
    const int64_t per = encoder ? 1 : batch.seq_len;
    for (int64_t b = 0; b < B; ++b) {
      const CrossEntropyStats e = cross_entropy_stats(logits.narrow(0, b * per, per), in.targets + b * per, -1);
      if (e.n_valid == 0) continue;
      r.example_loss.push_back(e.mean_loss());
      r.example_accuracy.push_back(static_cast<double>(e.n_correct) / static_cast<double>(e.n_valid));
      r.loss_sum += e.loss_sum;
      r.correct += static_cast<double>(e.n_correct);
    }
    tape.reset();
  }
  std::copy(saved.begin(), saved.end(), gates.data());
  return r;
}

TEST_CASE("ablation and layer-only scores are bit-identical to masking the gates and running the whole model",
          "[analysis]") {
  // Float (the precision analyze runs in), several batches, padding (encoder), GQA, a physically
  // pruned model with ragged layers, and zero gates (whose masks change nothing and are skipped).
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  const auto variant = GENERATE(as<std::string>{}, "mha", "gqa", "ragged");
  const int64_t T = 8, B = 5, n_batches = 3, H = 4;
  auto data = test::tiny_task(kind, T);
  ModelSpec spec = tiny_spec(kind, kind == ModelKind::decoder ? 11 : 16, H, variant == "gqa" ? 2 : H, T);
  spec.n_layers = 3;
  Model<float> full(spec);
  randomize(full, 17);
  full.gates().value(1)(3) = 0.0f;
  std::unique_ptr<Model<float>> pruned;
  if (variant == "ragged") {
    pruned = std::make_unique<Model<float>>(prune_heads(full, heads_with_nonzero_gates(full)));
    pruned->gates().value(2)(1) = 0.0f;  // a zero gate in the pruned model too
  }
  Model<float>& model = pruned ? *pruned : full;
  AnalysisOptions o;
  o.batch_size = B;
  o.layer_only = true;
  o.similarity = false;
  const HeadScores s = analyze_heads(model, *data, Split::val, n_batches, o);
  const int64_t E = s.n_examples;
  REQUIRE(E > 0);
  const double n_targets = static_cast<double>(s.n_targets);
  INFO(variant << (kind == ModelKind::decoder ? " decoder" : " encoder"));
  for (int64_t l = 0; l < spec.n_layers; ++l)
    for (int64_t h = 0; h < s.heads_at(l); ++h) {
      const int64_t k = s.index(l, h);
      INFO("layer " << l << " head " << h);
      std::vector<bool> off(static_cast<size_t>(s.heads_at(l)), false), others(off.size(), true);
      off[h] = true;
      others[h] = false;
      const MaskedReference ablated = masked_by_hand(model, *data, n_batches, B, l, off);
      const MaskedReference alone = masked_by_hand(model, *data, n_batches, B, l, others);
      REQUIRE(ablated.example_loss.size() == static_cast<size_t>(E));
      CHECK(std::equal(ablated.example_loss.begin(), ablated.example_loss.end(),
                       s.example_ablation_loss.begin() + k * E));
      CHECK(
          std::equal(alone.example_loss.begin(), alone.example_loss.end(), s.example_layer_only_loss.begin() + k * E));
      // Both tasks have an accuracy: per example too, from the same forwards.
      CHECK(std::equal(ablated.example_accuracy.begin(), ablated.example_accuracy.end(),
                       s.example_ablation_accuracy.begin() + k * E));
      CHECK(std::equal(alone.example_accuracy.begin(), alone.example_accuracy.end(),
                       s.example_layer_only_accuracy.begin() + k * E));
      CHECK(s.ablation_loss_delta[k] == ablated.loss_sum / n_targets - s.loss);
      CHECK(s.layer_only_loss_delta[k] == alone.loss_sum / n_targets - s.loss);
      CHECK(s.ablation_accuracy_delta[k] == ablated.correct / n_targets - s.accuracy);
      CHECK(s.layer_only_accuracy_delta[k] == alone.correct / n_targets - s.accuracy);
    }
}

TEST_CASE("per-example accuracies, unmasked, ablated and layer-only, average back to the accuracies analyze reports",
          "[analysis]") {
  // k_relation and classify score the same number of targets in every example, induction and
  // grammar a varying number (so only the mean weighted by n_targets pools back); grammar has no
  // accuracy.
  const std::string task = GENERATE(as<std::string>{}, "k_relation", "induction", "classify", "grammar");
  const int64_t T = 16, B = 6, n_batches = 3;
  TaskOptions t;
  t.task = task;
  t.seq_len = T;
  t.eval_examples = 64;
  t.vocab_size = task == "k_relation" ? 11 : task == "induction" ? 6 : task == "classify" ? 16 : 0;
  t.offsets = {1, 2};  // k_relation's; the other tasks ignore it
  t.min_len = 1;       // classify's shortest item list
  const std::unique_ptr<Dataset> data = make_task(t);
  const ModelKind kind = task == "classify" ? ModelKind::encoder : ModelKind::decoder;
  Model<float> model(tiny_spec(kind, data->vocab_size(), 4, 4, T));
  randomize(model, 23);
  if (kind == ModelKind::encoder) {  // random biases outweigh the features: every example one class
    for (const char* name : {"ln_f/bias", "cls_head/bias"}) {
      Tensor<float> bias = model.params().value(name);
      std::fill(bias.data(), bias.data() + bias.numel(), 0.0f);
    }
  }
  model.gates().value(0)(1) = 0.0f;  // its ablation changes nothing: the unmasked accuracies
  AnalysisOptions o;
  o.batch_size = B;
  o.layer_only = true;
  o.importance = false;
  o.attention = false;
  o.similarity = false;
  const HeadScores s = analyze_heads(model, *data, Split::val, n_batches, o);
  const int64_t E = s.n_examples, N = s.n_total();
  INFO(task << ": " << E << " examples, accuracy " << s.accuracy);
  REQUIRE(E > 0);
  REQUIRE(static_cast<int64_t>(s.example_n_targets.size()) == E);
  const int64_t targets = std::accumulate(s.example_n_targets.begin(), s.example_n_targets.end(), int64_t{0});
  CHECK(targets == s.n_targets);
  const auto [fewest, most] = std::minmax_element(s.example_n_targets.begin(), s.example_n_targets.end());
  CHECK((task == "induction" || task == "grammar") == (*fewest != *most));
  // The mean over examples weighted by their scored targets: the pooled value, as analyze pools.
  auto pooled = [&](const std::vector<double>& values, int64_t k) {
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += values[k * E + e] * static_cast<double>(s.example_n_targets[e]);
    return sum / static_cast<double>(targets);
  };
  CHECK(pooled(s.example_loss, 0) == Approx(s.loss).epsilon(1e-12));

  test::ScratchDir dir("analysis_example_accuracy");
  write_heads_h5((dir.dir / "heads.h5").string(), s, {});
  CheckpointReader h5((dir.dir / "heads.h5").string());
  CHECK(h5.read_array<int64_t>("examples/n_targets") == s.example_n_targets);
  if (!data->has_accuracy()) {
    CHECK(s.accuracy == -1);
    CHECK(s.example_accuracy.empty());
    CHECK(s.example_ablation_accuracy.empty());
    CHECK(s.example_layer_only_accuracy.empty());
    CHECK(!h5.has("examples/accuracy"));
    CHECK(!h5.has("examples/ablation_accuracy"));
    CHECK(!h5.has("examples/layer_only_accuracy"));
    return;
  }
  REQUIRE(static_cast<int64_t>(s.example_accuracy.size()) == E);
  REQUIRE(static_cast<int64_t>(s.example_ablation_accuracy.size()) == N * E);
  REQUIRE(static_cast<int64_t>(s.example_layer_only_accuracy.size()) == N * E);
  CHECK(s.accuracy > 0);  // some targets right, so the comparison is not 0 == 0
  CHECK(pooled(s.example_accuracy, 0) == Approx(s.accuracy).epsilon(1e-12));
  bool moved = false;
  for (int64_t k = 0; k < N; ++k) {
    INFO("head " << head_label(s, k));
    CHECK(pooled(s.example_ablation_accuracy, k) ==
          Approx(s.accuracy + s.ablation_accuracy_delta[k]).epsilon(1e-12).margin(1e-12));
    CHECK(pooled(s.example_layer_only_accuracy, k) ==
          Approx(s.accuracy + s.layer_only_accuracy_delta[k]).epsilon(1e-12).margin(1e-12));
    moved = moved || s.ablation_accuracy_delta[k] != 0 || s.layer_only_accuracy_delta[k] != 0;
    for (int64_t e = 0; e < E; ++e) {  // a fraction of that example's targets
      const double n = static_cast<double>(s.example_n_targets[e]);
      for (double a : {s.example_ablation_accuracy[k * E + e], s.example_layer_only_accuracy[k * E + e]})
        CHECK(a * n == Approx(std::round(a * n)).margin(1e-9));
    }
  }
  CHECK(moved);  // masking changed some prediction
  // Equal target counts: the plain mean over examples is the accuracy as well.
  if (*fewest == *most)
    CHECK(std::accumulate(s.example_accuracy.begin(), s.example_accuracy.end(), 0.0) / static_cast<double>(E) ==
          Approx(s.accuracy).epsilon(1e-12));
  const int64_t zero = s.index(0, 1);
  CHECK(
      std::equal(s.example_accuracy.begin(), s.example_accuracy.end(), s.example_ablation_accuracy.begin() + zero * E));

  // heads.h5 keeps them as [L, H, E], beside the losses.
  for (const char* name : {"examples/ablation_accuracy", "examples/layer_only_accuracy"})
    CHECK(h5.shape(name) == Shape{2, 4, E});
  CHECK(h5.read_array<double>("examples/accuracy") == s.example_accuracy);
  CHECK(h5.read_array<double>("examples/ablation_accuracy") == s.example_ablation_accuracy);
  CHECK(h5.read_array<double>("examples/layer_only_accuracy") == s.example_layer_only_accuracy);
}
