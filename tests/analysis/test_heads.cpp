#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/analysis/attention_stats.h"
#include "headlab/analysis/heads.h"
#include "headlab/data/tasks.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"
#include "headlab/ops/cross_entropy.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "support/scratch.h"
#include "support/tiny_model.h"
#include "support/trained_run.h"

using namespace headlab;
using test::randomize;
using test::tiny_spec;
namespace fs = std::filesystem;

namespace {

// The loss of batch row b alone (the example's mean loss), without a backward.
template <typename T>
double example_loss(Model<T>& model, const Batch& batch, int64_t b) {
  const int64_t T_ = batch.seq_len;
  const bool encoder = model.spec().kind == ModelKind::encoder;
  ModelInput in{1, T_, batch.tokens.data() + b * T_, encoder ? batch.labels.data() + b : batch.targets.data() + b * T_,
                batch.key_padding.empty() ? nullptr : batch.key_padding.data() + b * T_};
  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  return static_cast<double>(model.forward(tape, in, {}).loss.value()(0));
}

// Michel's importance by central differences: mean over the batch's rows of |dL_b/dgate|.
std::vector<double> finite_difference_importance(Model<double>& model, const Batch& batch) {
  const int64_t L = model.spec().n_layers, H = model.spec().n_heads;
  std::vector<double> importance(static_cast<size_t>(L * H));
  const double step = 1e-5;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      double& gate = model.gates().value(static_cast<int>(l))(h);
      const double saved = gate;
      for (int64_t b = 0; b < batch.batch_size; ++b) {
        gate = saved + step;
        const double up = example_loss(model, batch, b);
        gate = saved - step;
        const double down = example_loss(model, batch, b);
        importance[l * H + h] += std::abs(up - down) / (2 * step) / static_cast<double>(batch.batch_size);
      }
      gate = saved;
    }
  return importance;
}

// A k_relation model with offset 1 (target = the previous token), trained once for the tests
// that need a trained checkpoint.
const test::TrainedRun& trained_run() {
  static const test::TrainedRun run("analysis", test::k_relation_config(1, 2, {1}, 300));
  return run;
}

}  // namespace

TEST_CASE("importance equals the mean absolute per-example gate gradient by central differences", "[analysis][grad]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  const auto heads = GENERATE(std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{4, 2});
  const int64_t T = 8, B = 3;
  auto data = test::tiny_task(kind, T);
  Model<double> model(tiny_spec(kind, kind == ModelKind::decoder ? 11 : 16, heads.first, heads.second, T));
  randomize(model, 7);
  AnalysisOptions o;
  o.batch_size = B;
  const HeadScores fast = analyze_heads(model, *data, Split::val, 1, o);
  o.importance_by_rows = true;
  const HeadScores by_rows = analyze_heads(model, *data, Split::val, 1, o);

  Batch batch = data->make_batch(B);
  data->fill_batch(Split::val, 0, batch);
  const std::vector<double> expected = finite_difference_importance(model, batch);
  REQUIRE(fast.n_examples == B);
  double worst = 0;
  for (int64_t k = 0; k < fast.n_total(); ++k) {
    INFO("head " << k << ": analysis " << fast.importance[k] << ", by rows " << by_rows.importance[k]
                 << ", finite differences " << expected[k]);
    worst = std::max(worst, std::abs(fast.importance[k] - expected[k]) / std::max(expected[k], 1e-3));
    CHECK(by_rows.importance[k] == Approx(fast.importance[k]).epsilon(1e-10));
  }
  CHECK(worst <= 1e-6);
  // Per layer, the normalised importances have unit l2 norm.
  for (int64_t l = 0; l < fast.n_sites; ++l) {
    double norm = 0;
    for (int64_t h = 0; h < fast.n_heads; ++h) norm += std::pow(fast.importance_normalized[fast.index(l, h)], 2);
    CHECK(norm == Approx(1.0));
  }
  // The gradient slabs are left zeroed and the gates untouched.
  CHECK(model.gates().grads()[0] == 0.0);
  CHECK(fast.gate[0] == static_cast<double>(model.gates().value(0)(0)));
}

TEST_CASE("ablating a head whose gate is already 0 changes nothing, and its importance is its gradient", "[analysis]") {
  const int64_t T = 8, B = 4;
  auto data = test::tiny_task(ModelKind::decoder, T);
  Model<double> model(tiny_spec(ModelKind::decoder, 11, 2, 2, T));
  randomize(model, 11);
  model.gates().value(1)(0) = 0.0;  // head 0 of layer 1 is pruned
  AnalysisOptions o;
  o.batch_size = B;
  const HeadScores s = analyze_heads(model, *data, Split::val, 2, o);
  const int64_t pruned = s.index(1, 0), E = s.n_examples;
  CHECK(s.ablation_loss_delta[pruned] == 0.0);
  CHECK(s.ablation_accuracy_delta[pruned] == 0.0);
  for (int64_t e = 0; e < E; ++e) CHECK(s.example_ablation_loss[pruned * E + e] == s.example_loss[e]);
  for (int64_t k = 0; k < s.n_total(); ++k)
    if (k != pruned) CHECK(s.ablation_loss_delta[k] != 0.0);
  // A zero gate switches the importance to one backward per example; it still matches
  // central differences around xi = 0 (for the first batch).
  const HeadScores first = analyze_heads(model, *data, Split::val, 1, o);
  Batch batch = data->make_batch(B);
  data->fill_batch(Split::val, 0, batch);
  const std::vector<double> expected = finite_difference_importance(model, batch);
  for (int64_t k = 0; k < s.n_total(); ++k)
    CHECK(first.importance[k] == Approx(expected[k]).epsilon(1e-6).margin(1e-9));
  CHECK(model.gates().value(1)(0) == 0.0);
}

// The batch's mean loss over its scored targets, as analyze_heads' `loss` (no backward).
template <typename T>
double batch_loss(Model<T>& model, const Batch& batch) {
  const bool encoder = model.spec().kind == ModelKind::encoder;
  ModelInput in{batch.batch_size, batch.seq_len, batch.tokens.data(),
                encoder ? batch.labels.data() : batch.targets.data(),
                batch.key_padding.empty() ? nullptr : batch.key_padding.data()};
  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  return static_cast<double>(model.forward(tape, in, {}).loss.value()(0));
}

TEST_CASE("each head alone in its layer matches masking the layer's other heads by hand", "[analysis]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  const int64_t T = 8, B = 4, H = 4;
  auto data = test::tiny_task(kind, T);
  Model<double> model(tiny_spec(kind, kind == ModelKind::decoder ? 11 : 16, H, H, T));
  randomize(model, 5);
  model.gates().value(1)(2) = 0.0;  // an already pruned head: alone in its layer it leaves the layer empty
  AnalysisOptions o;
  o.batch_size = B;
  o.layer_only = true;
  o.ablation = false;
  o.similarity = false;
  const HeadScores s = analyze_heads(model, *data, Split::val, 1, o);
  REQUIRE(s.n_examples == B);
  REQUIRE(s.example_layer_only_loss.size() == static_cast<size_t>(2 * H * B));
  CHECK(std::isnan(s.ablation_loss_delta[0]));

  Batch batch = data->make_batch(B);
  data->fill_batch(Split::val, 0, batch);
  const double unmasked = batch_loss(model, batch);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> saved(static_cast<size_t>(H));
      for (int64_t g = 0; g < H; ++g) {
        saved[g] = model.gates().value(static_cast<int>(l))(g);
        if (g != h) model.gates().value(static_cast<int>(l))(g) = 0.0;
      }
      const int64_t k = s.index(l, h);
      INFO("layer " << l << " head " << h);
      CHECK(s.layer_only_loss_delta[k] == Approx(batch_loss(model, batch) - unmasked).epsilon(1e-12).margin(1e-14));
      for (int64_t e = 0; e < B; ++e)
        CHECK(s.example_layer_only_loss[k * B + e] == Approx(example_loss(model, batch, e)).epsilon(1e-12));
      for (int64_t g = 0; g < H; ++g) model.gates().value(static_cast<int>(l))(g) = saved[g];
    }
  // The gates come back as they were, the zero one included.
  CHECK(model.gates().value(1)(2) == 0.0);
  CHECK(static_cast<double>(model.gates().value(0)(1)) == s.gate[s.index(0, 1)]);
  CHECK(!std::isnan(s.layer_only_accuracy_delta[0]));  // both tasks have an accuracy

  // heads.h5 keeps the per-example losses as [L, H, E].
  test::ScratchDir dir("analysis_layer_only");
  write_heads_h5((dir.dir / "heads.h5").string(), s, {});
  CheckpointReader h5((dir.dir / "heads.h5").string());
  CHECK(h5.shape("examples/layer_only_loss") == Shape{2, H, B});
  CHECK(h5.read_array<double>("examples/layer_only_loss") == s.example_layer_only_loss);
  CHECK(!h5.has("examples/ablation_loss"));
}

TEST_CASE("the encoder's statistics skip padded positions and rows without a label", "[analysis]") {
  const int64_t T = 12, B = 10;
  auto data = test::tiny_task(ModelKind::encoder, T);
  Model<float> model(tiny_spec(ModelKind::encoder, 16, 2, 2, T));
  model.params().init(3);
  AnalysisOptions o;
  o.batch_size = B;
  // The whole split: 64 val examples in 7 batches, whose last 6 rows have no label (skipped).
  const HeadScores s = analyze_heads(model, *data, Split::val, 0, o);
  CHECK(s.n_batches == 7);
  int64_t real = 0;
  Batch batch = data->make_batch(B);
  for (int64_t i = 0; i < 7; ++i) {
    data->fill_batch(Split::val, i, batch);
    for (int64_t b = 0; b < B; ++b)
      if (batch.labels[b] >= 0)
        for (int64_t t = 0; t < T; ++t) real += batch.key_padding[b * T + t];
  }
  CHECK(s.n_examples == 64);
  CHECK(s.n_targets == 64);
  CHECK(s.n_query_rows == real);
  CHECK(real < 64 * T);  // some padding was skipped
  CHECK(s.accuracy >= 0);
  for (int64_t k = 0; k < s.n_total(); ++k) {
    CHECK(s.entropy[k] > 0);
    CHECK(s.entropy[k] <= std::log(static_cast<double>(T)));
    CHECK(std::isnan(s.delimiter_mass[k]));
    CHECK(s.antecedent_agreement[k] >= 0);  // classify's gold_antecedent: the aligned item
    CHECK(std::isfinite(s.ablation_accuracy_delta[k]));
  }
  REQUIRE(static_cast<int64_t>(s.js_distance.size()) == s.n_total() * s.n_total());
  CHECK(s.js_distance[1] > 0);
  CHECK(s.js_distance[1] <= 1);
}

TEST_CASE("a model trained to copy the previous token has a previous-token head that carries the loss", "[analysis]") {
  const test::TrainedRun& run = trained_run();
  const Config config = checkpoint_config(run.checkpoint());
  Model<float> model(model_spec(config));
  load_training_checkpoint(run.checkpoint(), model, nullptr);
  auto data = make_dataset(config);
  AnalysisOptions o;
  o.batch_size = 16;
  const HeadScores s = analyze_heads(model, *data, Split::val, 8, o);
  REQUIRE(s.loss < 0.05);
  int64_t best = 0;  // the head whose removal hurts most
  for (int64_t k = 1; k < s.n_total(); ++k)
    if (s.ablation_loss_delta[k] > s.ablation_loss_delta[best]) best = k;
  INFO("head " << best << ": ablation " << s.ablation_loss_delta[best] << ", previous-token agreement "
               << s.previous_token_agreement[best] << ", distance " << s.distance[best]);
  CHECK(s.ablation_loss_delta[best] > 0.5);
  CHECK(s.previous_token_agreement[best] > 0.95);
  CHECK(s.positional_offset[best] == 1);  // t - argmax: the previous token is +1
  CHECK(s.positional_share[best] > 0.95);
  CHECK(s.distance[best] == Approx(1.0).margin(0.2));
  CHECK(s.ablation_accuracy_delta[best] < -0.1);
}

TEST_CASE("headlab analyze writes heads.csv, heads_similarity.csv, a readable heads.h5 and attention maps",
          "[analysis]") {
  const test::TrainedRun& run = trained_run();
  test::ScratchDir out("analysis_cli");
  const test::CommandResult r = test::run_headlab(
      {"analyze", run.checkpoint(), "--batches", "4", "--out", out.dir.string(), "--dump-example", "5", "--layer-only"},
      out.dir / "log.txt", {{"OMP_NUM_THREADS", "1"}});
  INFO(r.output);
  REQUIRE(r.code == 0);

  std::istringstream csv(test::read_file(out.dir / "heads.csv"));
  std::string header, line;
  std::getline(csv, header);
  std::string expected = "layer,head";
  for (const HeadColumn& c : head_columns()) expected += std::string(",") + c.name;
  CHECK(header == expected + ",role,attention,label");
  CHECK(header.rfind("layer,head,gate,importance,importance_normalized,ablation_loss_delta,", 0) == 0);
  int rows = 0;
  while (std::getline(csv, line)) {
    CHECK(line.rfind(rows == 0 ? "0,0," : "0,1,", 0) == 0);
    CHECK_THAT(line, Catch::EndsWith(rows == 0 ? ",dec,L0H0" : ",dec,L0H1"));
    ++rows;
  }
  CHECK(rows == 2);  // 1 layer x 2 heads
  CHECK(test::read_file(out.dir / "heads_similarity.csv").rfind("head,L0H0,L0H1\nL0H0,0,", 0) == 0);

  CheckpointReader h5((out.dir / "heads.h5").string());
  CHECK(h5.kind() == FileKind::heads);
  // heads.h5 is not a checkpoint, and a verb given one as a checkpoint says so in one line.
  const std::string heads = (out.dir / "heads.h5").string();
  const test::CommandResult eval = test::run_headlab({"eval", heads}, out.dir / "eval.log");
  CHECK(eval.code == 2);
  CHECK(std::count(eval.output.begin(), eval.output.end(), '\n') == 1);
  CHECK_THAT(eval.output, Catch::Contains(heads + ": a heads file (written by headlab analyze), not a checkpoint"));
  CHECK(h5.shape("heads/importance") == Shape{1, 2});
  CHECK(h5.shape("similarity/js_distance") == Shape{2, 2});
  const int64_t E = h5.int_attr("n_examples");
  CHECK(E == 4 * 16);
  CHECK(h5.shape("examples/ablation_loss") == Shape{1, 2, E});
  CHECK(h5.shape("examples/gate_grad") == Shape{E, 1, 2});
  CHECK(h5.shape("examples/layer_only_loss") == Shape{1, 2, E});
  CHECK(h5.string_attr("split") == "val");
  CHECK(std::isnan(h5.double_attr("baseline_syntactic_head_agreement")));  // k_relation has no gold fields
  CHECK(std::isnan(h5.double_attr("baseline_antecedent_offset")));
  CHECK(h5.shape("heads/positional_offset") == Shape{1, 2});
  const std::vector<double> importance = h5.read_array<double>("heads/importance");
  CHECK(importance[0] >= 0);

  CheckpointReader maps((out.dir / "attention_example_5.h5").string());
  CHECK(maps.kind() == FileKind::attention);
  REQUIRE(maps.shape("attention") == Shape{1, 2, 16, 16});
  const std::vector<double> a = maps.read_array<double>("attention");
  double row_sum = 0;
  for (int s = 0; s < 16; ++s) row_sum += a[7 * 16 + s];  // head 0, query 7
  CHECK(row_sum == Approx(1.0).epsilon(1e-5));
  CHECK(maps.read_array<int64_t>("tokens").size() == 16);
  std::istringstream map_csv(test::read_file(out.dir / "attention_example_5.csv"));
  std::getline(map_csv, header);
  CHECK(header.rfind("layer,head,query,k0,k1,", 0) == 0);
  rows = 0;
  while (std::getline(map_csv, line)) ++rows;
  CHECK(rows == 2 * 16);
  CHECK(test::read_file(out.dir / "attention_example_5_tokens.csv")
            .rfind("position,token,text,real,target,label,gold_head,gold_antecedent,is_delimiter\n0,", 0) == 0);

  // Without --out the files go to the run folder (the parent of checkpoints/).
  const test::CommandResult here = test::run_headlab(
      {"analyze", run.checkpoint(), "--batches", "1", "--no-ablation", "--no-similarity"}, out.dir / "here.txt");
  INFO(here.output);
  CHECK(here.code == 0);
  CHECK(fs::exists(run.run / "heads.csv"));
  CHECK(fs::exists(run.run / "heads.h5"));
  CHECK(!fs::exists(run.run / "heads_similarity.csv"));

  // A bad split is one line and exit code 2.
  const test::CommandResult bad =
      test::run_headlab({"analyze", run.checkpoint(), "--split", "dev"}, out.dir / "bad.txt");
  CHECK(bad.code == 2);
  CHECK(bad.output.find("unknown split 'dev' (expected val, test or train)") != std::string::npos);
}

TEST_CASE("a prompt's attention is the attention the same tokens get as a dataset example", "[analysis]") {
  const int64_t T = 8;
  auto data = test::tiny_task(ModelKind::decoder, T);
  Model<double> model(tiny_spec(ModelKind::decoder, 11, 4, 2, T));
  randomize(model, 5);
  const AttentionExample from_data = attention_example(model, *data, Split::val, 3, 4);
  const AttentionExample from_prompt = attention_on_tokens(model, from_data.row.tokens);
  CHECK(from_prompt.seq_len == T);
  CHECK(from_prompt.layer_heads == from_data.layer_heads);
  CHECK(from_prompt.probs == from_data.probs);  // bit for bit: the same forward
  // A shorter prompt is a prefix under the causal mask: its rows equal the longer one's first rows.
  const std::vector<int32_t> prefix(from_data.row.tokens.begin(), from_data.row.tokens.begin() + 5);
  const AttentionExample short_prompt = attention_on_tokens(model, prefix);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t t = 0; t < 5; ++t)
        for (int64_t s = 0; s < 5; ++s)
          CHECK(short_prompt.probs[((l * 4 + h) * 5 + t) * 5 + s] ==
                Approx(from_data.probs[((l * 4 + h) * T + t) * T + s]).epsilon(1e-12).margin(1e-15));
  CHECK_THROWS_WITH(attention_on_tokens(model, {1, 11}), Catch::Contains("prompt token 1 is 11"));
  CHECK_THROWS_WITH(attention_on_tokens(model, std::vector<int32_t>(9, 1)), Catch::Contains("takes 1 to 8"));
}
