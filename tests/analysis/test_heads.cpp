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
#include "headlab/nn/prune.h"
#include "headlab/ops/cross_entropy.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "support/scratch.h"
#include "support/tiny_model.h"
#include "support/trained_run.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// Probabilities [1,H,T,T] filled by rule(h, t, s).
template <typename Rule>
std::vector<double> make_probs(int64_t H, int64_t T, Rule rule) {
  std::vector<double> p(static_cast<size_t>(H * T * T));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = 0; s < T; ++s) p[(h * T + t) * T + s] = rule(h, t, s);
  return p;
}

HeadScores empty_scores(int64_t L, int64_t H) {
  HeadScores s;
  s.n_layers = L;
  s.n_heads = H;
  return s;
}

ModelSpec tiny_spec(ModelKind kind, int64_t vocab, int64_t n_heads, int64_t n_kv_heads, int64_t T) {
  ModelSpec s;
  s.kind = kind;
  s.vocab_size = vocab;
  s.d_model = 8;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.d_head = 8 / n_heads;
  s.n_layers = 2;
  s.d_mlp = 16;
  s.max_seq_len = T;
  s.n_classes = 2;
  s.positions = kind == ModelKind::decoder ? Positions::learned : Positions::sinusoidal;
  return s;
}

// Non-trivial parameters and gates in [0.5, 1.5), so every path carries gradient.
template <typename T>
void randomize(Model<T>& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (int64_t i = 0; i < model.params().slab_size(); ++i) model.params().values()[i] = static_cast<T>(u(rng));
  for (int i = 0; i < model.gates().size(); ++i)
    for (int64_t h = 0; h < model.gates().value(i).numel(); ++h)
      model.gates().value(i).data()[h] = static_cast<T>(1 + u(rng));
}

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

TEST_CASE("attention statistics of uniform and one-hot rows have their known values", "[analysis]") {
  // Head 0 is uniform over 4 keys; head 1 attends to the previous token (token 0 to itself).
  const int64_t H = 2, T = 4;
  const auto probs = make_probs(H, T, [](int64_t h, int64_t t, int64_t s) {
    return h == 0 ? 0.25 : (s == std::max<int64_t>(t - 1, 0) ? 1.0 : 0.0);
  });
  const std::vector<int32_t> gold_head = {-1, 0, 1, 1};  // 1 and 2 and 3 hang off 0, 1, 1
  const std::vector<uint8_t> delimiter = {0, 0, 0, 1};
  AttentionBatchInfo info;
  info.batch_size = 1;
  info.seq_len = T;
  info.causal = false;
  info.gold_head = gold_head.data();
  info.is_delimiter = delimiter.data();
  AttentionSums sums(H);
  const Tensor<double> A(const_cast<double*>(probs.data()), {1, H, T, T});
  accumulate_attention_stats(A, 0, info, sums);
  accumulate_js_distance(std::vector<Tensor<double>>{A}, info, sums);
  HeadScores s = empty_scores(1, H);
  finish_attention_stats(sums, s);

  CHECK(s.entropy[0] == Approx(std::log(4.0)));
  CHECK(s.confidence[0] == Approx(0.25));
  CHECK(s.distance[0] == Approx((1.5 + 1 + 1 + 1.5) / 4));  // sum_s |t-s| / 4 for t = 0..3
  CHECK(s.delimiter_mass[0] == Approx(0.25));
  CHECK(s.previous_token_agreement[0] == Approx(1.0 / 3));  // argmax = first maximum = key 0
  CHECK(s.entropy[1] == 0.0);
  CHECK(s.confidence[1] == 1.0);
  CHECK(s.distance[1] == Approx(3.0 / 4));
  CHECK(s.delimiter_mass[1] == 0.0);
  CHECK(s.previous_token_agreement[1] == 1.0);
  CHECK(s.syntactic_head_agreement[1] == Approx(2.0 / 3));  // rows 1, 2 right, row 3 (head 1) wrong
  CHECK(s.delimiter_agreement[1] == 0.0);
  CHECK(std::isnan(s.antecedent_agreement[1]));  // no gold_antecedent given
  // JS between uniform(4) and a one-hot: m = (5/8, 1/8, 1/8, 1/8), H2(m) = 1.548795 bits,
  // JSD = H2(m) - (2 + 0)/2, distance = sqrt(0.548795).
  CHECK(s.js_distance[1] == Approx(std::sqrt(0.625 * std::log2(1 / 0.625) + 3 * 0.125 * 3 - 1)).epsilon(1e-12));
  CHECK(s.js_distance[2] == s.js_distance[1]);
  CHECK(s.js_distance[0] == 0.0);
  CHECK(s.js_nearest[0] == s.js_distance[1]);
}

TEST_CASE("causal rows are scored only where the query rows say, over the visible keys", "[analysis]") {
  // One causal head, uniform over the t + 1 visible keys; the first row is not counted.
  const int64_t T = 5;
  const auto probs = make_probs(1, T, [](int64_t, int64_t t, int64_t s) { return s <= t ? 1.0 / (t + 1) : 0.0; });
  const std::vector<uint8_t> rows = {0, 1, 1, 1, 1};
  AttentionBatchInfo info;
  info.batch_size = 1;
  info.seq_len = T;
  info.causal = true;
  info.query_rows = rows.data();
  AttentionSums sums(1);
  accumulate_attention_stats(Tensor<double>(const_cast<double*>(probs.data()), {1, 1, T, T}), 0, info, sums);
  HeadScores s = empty_scores(1, 1);
  finish_attention_stats(sums, s);
  CHECK(sums.rows[0] == 4);
  CHECK(s.entropy[0] == Approx((std::log(2.0) + std::log(3.0) + std::log(4.0) + std::log(5.0)) / 4));
  CHECK(s.confidence[0] == Approx((1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5) / 4));
  CHECK(std::isnan(s.delimiter_mass[0]));  // no delimiters in this batch
  CHECK(std::isnan(s.js_nearest[0]));      // no JS pass, and no other head
}

TEST_CASE("JS distance is 0 for identical rows and 1 for disjoint one-hot rows", "[analysis]") {
  const double a[4] = {0.1, 0.2, 0.3, 0.4}, one[4] = {1, 0, 0, 0}, other[4] = {0, 0, 1, 0};
  CHECK(js_distance(a, a, 4) == 0.0);
  CHECK(js_distance(one, other, 4) == Approx(1.0).epsilon(1e-15));
  CHECK(js_distance(a, one, 4) == Approx(js_distance(one, a, 4)));
  // The accumulated form (entropies reused) gives exactly 0 for two identical heads.
  const auto probs = make_probs(2, 3, [](int64_t, int64_t t, int64_t s) { return (t + s) % 3 == 0 ? 0.7 : 0.15; });
  AttentionBatchInfo info;
  info.batch_size = 1;
  info.seq_len = 3;
  info.causal = false;
  AttentionSums sums(2);
  accumulate_js_distance(std::vector<Tensor<double>>{Tensor<double>(const_cast<double*>(probs.data()), {1, 2, 3, 3})},
                         info, sums);
  CHECK(sums.js_sum[1] == 0.0);
  CHECK(sums.js_rows == 3);
}

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
  for (int64_t l = 0; l < fast.n_layers; ++l) {
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
  CHECK(header == expected);
  CHECK(header.rfind("layer,head,gate,importance,importance_normalized,ablation_loss_delta,", 0) == 0);
  int rows = 0;
  while (std::getline(csv, line)) ++rows;
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
  CHECK(bad.output.find("--split must be val, test or train") != std::string::npos);
}

TEST_CASE("on the grammar task every gold agreement is measured and padding rows are skipped", "[analysis]") {
  TaskOptions t;
  t.task = "grammar";
  t.seq_len = 40;
  t.eval_examples = 16;
  auto data = make_task(t);
  ModelSpec spec = tiny_spec(ModelKind::decoder, data->vocab_size(), 2, 2, 40);
  Model<float> model(spec);
  model.params().init(5);
  AnalysisOptions o;
  o.batch_size = 8;
  o.ablation = false;
  o.pad_token = 0;  // <pad>
  const HeadScores s = analyze_heads(model, *data, Split::val, 2, o);
  int64_t rows = 0;  // non-pad tokens after the first of each row
  Batch batch = data->make_batch(8);
  for (int64_t i = 0; i < 2; ++i) {
    data->fill_batch(Split::val, i, batch);
    for (int64_t r = 0; r < 8 * 40; ++r) rows += r % 40 > 0 && batch.tokens[r] != 0;
  }
  CHECK(s.n_query_rows == rows);
  CHECK(rows < 16 * 39);  // the rows did end in padding
  for (int64_t k = 0; k < s.n_total(); ++k) {
    for (const auto* v :
         {&s.syntactic_head_agreement, &s.dependent_agreement, &s.antecedent_agreement, &s.delimiter_agreement,
          &s.delimiter_mass, &s.previous_token_agreement, &s.positional_share, &s.rare_token_agreement}) {
      CHECK((*v)[k] >= 0);
      CHECK((*v)[k] <= 1);
    }
    CHECK(s.positional_offset[k] >= 0);  // a decoder attends to t - offset <= t
    CHECK(std::isnan(s.ablation_loss_delta[k]));
    CHECK(std::isnan(s.ablation_accuracy_delta[k]));  // grammar has no accuracy
  }
  for (const BaselineField& f : positional_baselines()) {
    const PositionalBaseline& b = s.*f.baseline;
    INFO(f.relation << ": baseline " << b.agreement << " at offset " << b.offset);
    CHECK(b.agreement > 0);
    CHECK(b.agreement <= 1);
    CHECK(b.offset >= 1);  // a key before t
  }
  // analyze_heads counts the baselines over its query rows: the same from the batches directly.
  AttentionSums direct(s.n_total());
  for (int64_t i = 0; i < 2; ++i) {
    data->fill_batch(Split::val, i, batch);
    std::vector<uint8_t> query_rows(batch.tokens.size());
    for (size_t r = 0; r < query_rows.size(); ++r) query_rows[r] = r % 40 > 0 && batch.tokens[r] != 0;
    AttentionBatchInfo info;
    info.batch_size = 8;
    info.seq_len = 40;
    info.query_rows = query_rows.data();
    info.gold_head = batch.gold_head.data();
    info.gold_antecedent = batch.gold_antecedent.data();
    accumulate_positional_baselines(info, direct);
  }
  HeadScores recount = empty_scores(s.n_layers, s.n_heads);
  finish_attention_stats(direct, recount);
  for (const BaselineField& f : positional_baselines()) {
    CHECK((recount.*f.baseline).agreement == (s.*f.baseline).agreement);
    CHECK((recount.*f.baseline).offset == (s.*f.baseline).offset);
  }
}

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
  CHECK(b.layer_heads == std::vector<int64_t>{3, 2});
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
  std::vector<double> example_loss;
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
    for (int64_t h = 0; h < s.heads_in_layer(l); ++h) {
      const int64_t k = s.index(l, h);
      INFO("layer " << l << " head " << h);
      std::vector<bool> off(static_cast<size_t>(s.heads_in_layer(l)), false), others(off.size(), true);
      off[h] = true;
      others[h] = false;
      const MaskedReference ablated = masked_by_hand(model, *data, n_batches, B, l, off);
      const MaskedReference alone = masked_by_hand(model, *data, n_batches, B, l, others);
      REQUIRE(ablated.example_loss.size() == static_cast<size_t>(E));
      CHECK(std::equal(ablated.example_loss.begin(), ablated.example_loss.end(),
                       s.example_ablation_loss.begin() + k * E));
      CHECK(
          std::equal(alone.example_loss.begin(), alone.example_loss.end(), s.example_layer_only_loss.begin() + k * E));
      CHECK(s.ablation_loss_delta[k] == ablated.loss_sum / n_targets - s.loss);
      CHECK(s.layer_only_loss_delta[k] == alone.loss_sum / n_targets - s.loss);
      CHECK(s.ablation_accuracy_delta[k] == ablated.correct / n_targets - s.accuracy);
      CHECK(s.layer_only_accuracy_delta[k] == alone.correct / n_targets - s.accuracy);
    }
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

TEST_CASE("heads named L:H are parsed, checked against the model and switched off", "[analysis][prune]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 11, 4, 4, 8);
  spec.layer_heads = {2, 4};
  const HeadKeepMask named = parse_head_list("0:1,1:3,1:0", spec, "--mask");
  CHECK(named == HeadKeepMask{{false, true}, {true, false, false, true}});
  CHECK_THROWS_WITH(parse_head_list("0-1", spec, "--mask"),
                    Catch::Equals("--mask: '0-1' is not LAYER:HEAD (e.g. --mask 0:1,1:3)"));
  CHECK_THROWS_WITH(parse_head_list("0:1,", spec, "--mask"), Catch::Contains("'' is not LAYER:HEAD"));
  CHECK_THROWS_WITH(parse_head_list("2:0", spec, "--mask"), Catch::Contains("layer 2 in '2:0' is outside [0, 2)"));
  CHECK_THROWS_WITH(parse_head_list("0:2", spec, "--mask"), Catch::Contains("head 2 in '0:2' is outside [0, 2)"));
  CHECK_THROWS_WITH(parse_head_list("1:1,1:1", spec, "--mask"), Catch::Contains("head 1:1 is named twice"));
  CHECK_THROWS_WITH(parse_head_list("1:1x", spec, "--mask"), Catch::Contains("'1:1x' is not LAYER:HEAD"));

  Model<double> model(spec);
  randomize(model, 2);
  const double kept = model.gates().value(1)(1);
  switch_off_heads(model, named);
  CHECK(model.gates().value(0)(0) != 0.0);
  CHECK(model.gates().value(0)(1) == 0.0);
  CHECK(model.gates().value(1)(0) == 0.0);
  CHECK(model.gates().value(1)(1) == kept);
  CHECK(model.gates().value(1)(3) == 0.0);
}
