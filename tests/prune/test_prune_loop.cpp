#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/io/csv.h"
#include "headlab/prune/prune_loop.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/setup.h"
#include "support/scratch.h"
#include "support/trained_run.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// 2 layers x 4 heads trained to copy the previous token (k_relation, offset 1) for 200 steps:
// a loss near 1e-3 that some heads carry, so pruning moves it.
const test::TrainedRun& trained_run() {
  static const test::TrainedRun run("prune", test::k_relation_config(2, 4, {1}, 200));
  return run;
}

PruneOptions fast_options(PruneStrategy strategy) {
  PruneOptions o;
  o.strategy = strategy;
  o.step_frac = 0.25;  // 2 of 8 heads per round
  o.eval_batches = 2;
  o.score_batches = 2;
  return o;
}

// The checkpoint pruned as `headlab prune` does it: fine-tuning continues its optimizer state.
struct Pruned {
  OpenedCheckpoint checkpoint = open_checkpoint(trained_run().checkpoint());
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(checkpoint.config, checkpoint.model->params());
  std::vector<PruneRound> rounds;
  explicit Pruned(const PruneOptions& o, bool continue_state = true) {
    if (continue_state) REQUIRE(continue_optimizer_state(trained_run().checkpoint(), *optimizer));
    rounds = iterative_prune(*checkpoint.model, *optimizer, checkpoint.config, *checkpoint.dataset, o,
                             checkpoint.progress.step);
  }
};

EvalStats unpruned_metric(int64_t batches) {
  OpenedCheckpoint c = open_checkpoint(trained_run().checkpoint());
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = c.dataset->make_batch(c.config.train.batch_size);
  return evaluate(*c.model, *c.dataset, Split::val, batches, batch, tape);
}

int count_lines(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

}  // namespace

TEST_CASE("the prune loop runs end to end on a tiny model and its curve starts at the unpruned metric", "[prune]") {
  const PruneStrategy strategy =
      GENERATE(PruneStrategy::importance, PruneStrategy::importance_raw, PruneStrategy::random, PruneStrategy::entropy,
               PruneStrategy::confidence, PruneStrategy::ablation);
  INFO("strategy " << prune_strategy_name(strategy));
  Pruned p(fast_options(strategy));
  const std::vector<PruneRound>& rounds = p.rounds;
  const EvalStats unpruned = unpruned_metric(2);
  REQUIRE(rounds.size() == 4);                    // 8 -> 6 -> 4 -> 2 heads
  CHECK(rounds[0].metric.loss == unpruned.loss);  // exactly: the same batches, the same model
  CHECK(rounds[0].metric.accuracy == unpruned.accuracy);
  CHECK(rounds[0].pruned.empty());
  CHECK(rounds[0].heads_per_site == std::vector<int64_t>{4, 4});
  for (size_t r = 0; r < rounds.size(); ++r) {
    CHECK(rounds[r].round == static_cast<int64_t>(r));
    for (int64_t c : rounds[r].heads_per_site) CHECK(c >= 1);
    CHECK(rounds[r].heads_total() + static_cast<int64_t>(rounds[r].pruned.size()) == 8);
    if (r > 0) {
      CHECK(rounds[r].pruned.size() == rounds[r - 1].pruned.size() + 2);
      // Cumulative: the earlier rounds' heads come first, in the same order.
      CHECK(std::equal(rounds[r - 1].pruned.begin(), rounds[r - 1].pruned.end(), rounds[r].pruned.begin()));
    }
  }
  CHECK(rounds.back().heads_per_site == std::vector<int64_t>{1, 1});
  CHECK(rounds.back().metric.loss != unpruned.loss);
  // The model is left with exactly the last round's mask.
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) {
      const bool pruned = std::find(rounds.back().pruned.begin(), rounds.back().pruned.end(), SiteHead{l, h}) !=
                          rounds.back().pruned.end();
      CHECK(p.checkpoint.model->gates().value(static_cast<int>(l))(h) == (pruned ? 0.0f : 1.0f));
    }
}

TEST_CASE("FFN units are pruned like heads: every block keeps one, the curve starts at the unpruned metric",
          "[prune][ffn]") {
  const PruneStrategy strategy = GENERATE(PruneStrategy::importance, PruneStrategy::magnitude,
                                          PruneStrategy::integrated_gradients, PruneStrategy::random);
  INFO("strategy " << prune_strategy_name(strategy));
  PruneOptions o = fast_options(strategy);
  o.unit = GateKind::ffn_units;
  o.step_frac = 0.3;
  o.ig_steps = 4;
  Pruned p(o);
  const std::vector<PruneRound>& rounds = p.rounds;
  const Model<float>& model = *p.checkpoint.model;
  const int64_t units = model.ffn_gates().value(0).numel() + model.ffn_gates().value(1).numel();
  const int64_t per_round = std::llround(0.3 * static_cast<double>(units));
  REQUIRE(rounds.size() >= 3);
  CHECK(rounds[0].metric.loss == unpruned_metric(2).loss);
  CHECK(rounds[0].heads_per_site == std::vector<int64_t>{4, 4});
  for (size_t r = 1; r < rounds.size(); ++r) {
    CHECK(rounds[r].heads_per_site == std::vector<int64_t>{4, 4});  // heads untouched
    CHECK(rounds[r].units_total() + static_cast<int64_t>(rounds[r].pruned.size()) == units);
    CHECK(static_cast<int64_t>(rounds[r].pruned.size()) <= static_cast<int64_t>(r) * per_round);
    for (int64_t c : rounds[r].units_per_block) CHECK(c >= 1);
  }
  CHECK(rounds.back().units_per_block == std::vector<int64_t>{1, 1});
  for (const SiteHead& x : rounds.back().pruned)
    CHECK(model.ffn_gates().value(static_cast<int>(x.site))(x.head) == 0.0f);
  const std::string csv = prune_csv(rounds, o);
  CHECK(csv.find(",ffn,") != std::string::npos);
}

TEST_CASE("FFN pruning refuses the strategies and options that score heads, in one line", "[prune][ffn]") {
  PruneOptions o = fast_options(PruneStrategy::ablation);
  o.unit = GateKind::ffn_units;
  CHECK_THROWS_WITH(validate(o), Catch::Contains("--unit ffn: --strategy ablation scores heads"));
  o.strategy = PruneStrategy::magnitude;
  CHECK_NOTHROW(validate(o));
  o.unit = GateKind::heads;
  CHECK_THROWS_WITH(validate(o), Catch::Contains("--strategy magnitude scores FFN units (--unit ffn)"));
  CHECK(prune_run_name([] {
          PruneOptions x;
          x.unit = GateKind::ffn_units;
          return x;
        }()) == "importance_ffn");
}

TEST_CASE("random pruning is identical for the same seed and differs across seeds", "[prune]") {
  PruneOptions o = fast_options(PruneStrategy::random);
  o.seed = 1;
  const Pruned a(o), b(o);
  o.seed = 2;
  const Pruned c(o);
  REQUIRE(a.rounds.size() == b.rounds.size());
  for (size_t r = 0; r < a.rounds.size(); ++r) {
    CHECK(a.rounds[r].pruned == b.rounds[r].pruned);
    CHECK(a.rounds[r].metric.loss == b.rounds[r].metric.loss);
  }
  CHECK(a.rounds.back().pruned != c.rounds.back().pruned);
}

TEST_CASE("fine-tuning between rounds trains the model but never reopens a pruned gate", "[prune]") {
  PruneOptions o = fast_options(PruneStrategy::importance);
  o.finetune_steps = 3;
  o.recompute = true;  // importance of a model with zero gates: the per-example backward path
  Pruned tuned(o);
  const Pruned plain(fast_options(PruneStrategy::importance));
  const OpenedCheckpoint original = open_checkpoint(trained_run().checkpoint());
  REQUIRE(tuned.rounds.size() == 4);
  CHECK(tuned.rounds[0].metric.loss == plain.rounds[0].metric.loss);
  CHECK(tuned.rounds[1].pruned == plain.rounds[1].pruned);  // round 1 uses the unpruned scores either way
  CHECK(tuned.rounds[1].metric.loss != plain.rounds[1].metric.loss);
  const Model<float>& model = *tuned.checkpoint.model;
  for (const SiteHead& x : tuned.rounds.back().pruned)
    CHECK(model.gates().value(static_cast<int>(x.site))(x.head) == 0.0f);
  float open_sum = 0;
  for (int l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) open_sum += model.gates().value(l)(h);
  CHECK(open_sum == 2.0f);  // the two kept heads are still exactly 1
  int64_t changed = 0;
  for (int64_t i = 0; i < model.params().slab_size(); ++i)
    changed += model.params().values()[i] != original.model->params().values()[i];
  CHECK(changed > model.params().count() / 2);
}

TEST_CASE("recovery by distillation: alpha 0 is fine-tuning bit for bit; alpha 0.5 trains differently",
          "[prune][distill]") {
  PruneOptions o = fast_options(PruneStrategy::importance);
  o.finetune_steps = 3;
  const Pruned tuned(o);
  o.distill = true;
  o.distill_alpha = 0;
  const Pruned zero(o);
  o.distill_alpha = 0.5;
  const Pruned half(o);
  REQUIRE(zero.rounds.size() == tuned.rounds.size());
  for (size_t r = 0; r < tuned.rounds.size(); ++r) {
    CHECK(zero.rounds[r].metric.loss == tuned.rounds[r].metric.loss);
    CHECK(zero.rounds[r].pruned == tuned.rounds[r].pruned);
  }
  const Parameters<float>&a = tuned.checkpoint.model->params(), &b = zero.checkpoint.model->params(),
        &c = half.checkpoint.model->params();
  CHECK(std::equal(a.values(), a.values() + a.slab_size(), b.values()));
  CHECK_FALSE(std::equal(a.values(), a.values() + a.slab_size(), c.values()));
  CHECK(half.rounds[1].metric.loss != tuned.rounds[1].metric.loss);
  const std::string csv = prune_csv(half.rounds, o);
  CHECK(csv.find(",distill,0.5,2") != std::string::npos);
  CHECK(prune_run_name(o) == "importance_ft3_distill_seed0");
  PruneOptions bad = fast_options(PruneStrategy::importance);
  bad.distill = true;
  CHECK_THROWS_WITH(validate(bad), Catch::Contains("--recover distill trains the pruned model"));
}

TEST_CASE("heads are chosen by ascending score, ties by index, never a layer's last head", "[prune]") {
  // 2 layers x 3 heads; layer 0 holds the three lowest scores.
  const std::vector<double> scores = {0.1, 0.2, 0.3, 0.5, 0.2, 0.9};
  const std::vector<uint8_t> all(6, 1);
  const std::vector<int64_t> layer_of = {0, 0, 0, 1, 1, 1};
  CHECK(heads_to_prune(scores, all, layer_of, 1) == std::vector<int64_t>{0});
  CHECK(heads_to_prune(scores, all, layer_of, 2) == std::vector<int64_t>{0, 1});
  CHECK(heads_to_prune(scores, all, layer_of, 3) == std::vector<int64_t>{0, 1, 4});  // 2 would empty layer 0
  CHECK(heads_to_prune(scores, all, layer_of, 10) == std::vector<int64_t>{0, 1, 4, 3});
  const std::vector<uint8_t> some = {0, 1, 1, 1, 0, 1};
  CHECK(heads_to_prune(scores, some, layer_of, 10) == std::vector<int64_t>{1, 3});
  CHECK(heads_to_prune(scores, {0, 0, 1, 0, 0, 1}, layer_of, 10).empty());
}

TEST_CASE("heads_to_prune takes sites of any size and leaves heads outside `prunable` alone", "[prune]") {
  // Three sites of 2, 3 and 1 heads (an encoder_decoder's enc, dec, cross of different widths).
  const std::vector<double> scores = {0.4, 0.1, 0.2, 0.3, 0.05, 0.0};
  const std::vector<uint8_t> all(6, 1);
  const std::vector<int64_t> site_of = {0, 0, 1, 1, 1, 2};
  CHECK(heads_to_prune(scores, all, site_of, 10) == std::vector<int64_t>{4, 1, 2});  // 5 is site 2's only head
  // Only the middle site (--only dec): its two lowest go, never its last.
  const std::vector<uint8_t> only_site_1 = {0, 0, 1, 1, 1, 0};
  CHECK(heads_to_prune(scores, all, site_of, 10, only_site_1) == std::vector<int64_t>{4, 2});
  CHECK(heads_to_prune(scores, all, site_of, 1, only_site_1) == std::vector<int64_t>{4});
  CHECK(heads_to_prune(scores, all, site_of, 10, {0, 0, 0, 0, 0, 1}).empty());
}

TEST_CASE("L0 gates with a large lambda close more heads than with a tiny one", "[prune][l0]") {
  PruneOptions o = fast_options(PruneStrategy::l0);
  o.l0_steps = 40;
  o.l0_lr = 0.2;  // Adam moves log_alpha about lr per step: from 3 past -0.79 within the run
  o.seed = 5;
  // The default penalty averages the 2 layers' sums: lambda 2e-4 and 2 are the sum's 1e-4 and 1.
  REQUIRE(o.l0_penalty == L0Penalty::layer_mean);
  o.lambda = 2e-4;
  const Pruned tiny(o);
  o.lambda = 2.0;
  const Pruned large(o);
  REQUIRE(tiny.rounds.size() == 2);
  REQUIRE(large.rounds.size() == 2);
  CHECK(tiny.rounds[0].metric.loss == unpruned_metric(2).loss);
  INFO("closed with lambda 2e-4: " << tiny.rounds[1].pruned.size()
                                   << ", with lambda 2: " << large.rounds[1].pruned.size());
  CHECK(large.rounds[1].pruned.size() > tiny.rounds[1].pruned.size());
  CHECK(large.rounds[1].pruned.size() >= 2);
  // The gates are binary after the run, and the run is a pure function of its seed.
  for (int l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) {
      const float g = large.checkpoint.model->gates().value(l)(h);
      CHECK((g == 0.0f || g == 1.0f));
    }
  const Pruned again(o);
  CHECK(again.rounds[1].pruned == large.rounds[1].pruned);
  CHECK(again.rounds[1].metric.loss == large.rounds[1].metric.loss);
  // --l0-penalty sum at half the lambda is the same run: the aggregates differ by a factor only.
  o.l0_penalty = L0Penalty::sum;
  o.lambda = 1.0;
  const Pruned summed(o);
  CHECK(summed.rounds[1].pruned == large.rounds[1].pruned);
  CHECK(summed.rounds[1].metric.loss == large.rounds[1].metric.loss);
}

TEST_CASE("L0 gates on FFN units: a large lambda closes more units than a tiny one, the heads untouched",
          "[prune][l0][ffn]") {
  PruneOptions o = fast_options(PruneStrategy::l0);
  o.unit = GateKind::ffn_units;
  o.l0_steps = 40;
  o.l0_lr = 0.2;
  o.seed = 5;
  o.lambda = 1e-4;
  const Pruned tiny(o);
  o.lambda = 20.0;
  const Pruned large(o);
  REQUIRE(large.rounds.size() == 2);
  INFO("units closed with lambda 1e-4: " << tiny.rounds[1].pruned.size()
                                         << ", with lambda 20: " << large.rounds[1].pruned.size());
  CHECK(large.rounds[1].pruned.size() > tiny.rounds[1].pruned.size());
  CHECK(large.rounds[1].heads_per_site == std::vector<int64_t>{4, 4});
  CHECK(large.rounds[1].units_total() + static_cast<int64_t>(large.rounds[1].pruned.size()) ==
        large.rounds[0].units_total());
  const Model<float>& model = *large.checkpoint.model;
  for (int b = 0; b < model.ffn_gates().size(); ++b)
    for (int64_t f = 0; f < model.ffn_gates().value(b).numel(); ++f) {
      const float g = model.ffn_gates().value(b)(f);
      CHECK((g == 0.0f || g == 1.0f));
    }
  for (const SiteHead& x : large.rounds[1].pruned)
    CHECK(model.ffn_gates().value(static_cast<int>(x.site))(x.head) == 0.0f);
  for (int l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) CHECK(model.gates().value(l)(h) == 1.0f);
  CHECK(prune_csv(large.rounds, o).find(",ffn,") != std::string::npos);
}

TEST_CASE("prune.csv has the agreed header, one row per round and cumulative pruned heads", "[prune]") {
  PruneOptions o = fast_options(PruneStrategy::ablation);
  const Pruned p(o);
  const std::string csv = prune_csv(p.rounds, o);
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line ==
        "strategy,seed,finetune_steps,recompute,lambda,round,heads_pruned,fraction_pruned,heads_kept,heads_per_layer,"
        "val_loss,val_accuracy,val_bpb,pruned_heads,only,val_bleu,val_chrf,l0_penalty,unit,units_pruned,units_kept,"
        "units_per_block,pruned_units,recover,distill_alpha,distill_temperature");
  const std::vector<std::string> header = split_csv_line(line);
  std::getline(in, line);
  CHECK(line.rfind("ablation,0,0,0,,0,0,0,8,4 4,", 0) == 0);
  // k_relation: accuracy but no bits per byte; nothing pruned; every kind; no BLEU; not L0; heads
  // pruned (the FFN units' columns empty but their count per block), recovered by fine-tuning.
  const std::vector<std::string> cells = split_csv_line(line);
  REQUIRE(cells.size() == header.size());
  auto cell = [&](const char* name) { return cells[std::find(header.begin(), header.end(), name) - header.begin()]; };
  CHECK(!cell("val_accuracy").empty());
  for (const char* empty : {"val_bpb", "pruned_heads", "only", "val_bleu", "val_chrf", "l0_penalty", "units_pruned",
                            "units_kept", "pruned_units", "distill_alpha", "distill_temperature"})
    CHECK(cell(empty).empty());
  CHECK(cell("unit") == "heads");
  CHECK(cell("recover") == "finetune");
  std::getline(in, line);
  CHECK(line.rfind("ablation,0,0,0,,1,2,0.25,6,", 0) == 0);
  CHECK(count_lines(csv) == 5);
  o.strategy = PruneStrategy::l0;
  o.lambda = 0.5;
  CHECK(prune_csv(p.rounds, o).find("\nl0,0,200,0,0.5,0,") != std::string::npos);
  CHECK(prune_csv(p.rounds, o).find(",,,,layer_mean,heads,") != std::string::npos);  // the default, Voita's
  CHECK(prune_run_name(o) == "l0_seed0_lambda0.5");  // the default penalty is not in the name
  o.only = {AttentionKind::enc, AttentionKind::cross};
  o.l0_freeze = true;
  CHECK(prune_run_name(o) == "l0_enc_cross_seed0_lambda0.5_frozen");
  CHECK(prune_csv(p.rounds, o).find(",enc cross,,,layer_mean,heads,") != std::string::npos);
  o.l0_penalty = L0Penalty::sum;
  CHECK(prune_run_name(o) == "l0_enc_cross_seed0_lambda0.5_penalty_sum_frozen");
  CHECK(prune_csv(p.rounds, o).find(",enc cross,,,sum,heads,") != std::string::npos);
  o.l0_penalty = L0Penalty::mean;
  o.only = {};
  o.l0_freeze = false;
  CHECK(prune_run_name(o) == "l0_seed0_lambda0.5_penalty_mean");
  CHECK(prune_run_name(fast_options(PruneStrategy::entropy)) == "entropy");
  PruneOptions tuned = fast_options(PruneStrategy::random);
  tuned.finetune_steps = 5;
  tuned.recompute = true;
  tuned.seed = 3;
  CHECK(prune_run_name(tuned) == "random_ft5_recompute_seed3");
}

TEST_CASE("headlab prune writes prune.csv and a checkpoint headlab eval reads; bad input is one line and exit 2",
          "[prune]") {
  const test::TrainedRun& run = trained_run();
  test::ScratchDir logs("prune_cli");
  const fs::path prune_dir = run.run / "prune";
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> bad = {
      {{"prune", run.checkpoint(), "--strategy", "xyzzy"},
       "unknown strategy 'xyzzy' (expected importance, importance_raw, integrated_gradients, magnitude, random"},
      {{"prune", run.checkpoint(), "--strategy", "magnitude"}, "--strategy magnitude scores FFN units (--unit ffn)"},
      {{"prune", run.checkpoint(), "--strategy", "importnce"},
       "unknown strategy 'importnce'; did you mean 'importance'?"},
      {{"prune", run.checkpoint(), "--strategy", "random", "--step-frac", "1.5"}, "--step-frac must be in (0, 1)"},
      {{"prune", run.checkpoint(), "--strategy", "random", "--step-frac", "0"}, "--step-frac must be in (0, 1)"},
      {{"prune", (run.run / "missing.h5").string(), "--strategy", "random"}, "does not exist"},
      {{"prune", run.checkpoint(), "--strategy", "l0", "--lambda=-1"}, "--lambda must be >= 0"},
      {{"prune", run.checkpoint(), "--strategy", "l0"}, "needs --lambda"},
      {{"prune", run.checkpoint(), "--strategy", "l0", "--lambda", "0.1", "--l0-penalty", "avg"},
       "unknown l0 penalty 'avg' (expected layer_mean, mean or sum)"},
      {{"prune", run.checkpoint(), "--strategy", "l0", "--lambda", "0.1", "--l0-penalty", "meen"},
       "unknown l0 penalty 'meen'; did you mean 'mean'?"},
      {{"prune", run.checkpoint(), "--strategy", "random", "--l0-penalty", "sum"},
       "--lambda, --l0-steps, --l0-lr and --l0-penalty apply only to --strategy l0"},
      {{"prune", run.checkpoint(), "--strategy", "random", "--set", "model.n_heads=2"},
       "only train.*, data.* can change here"},
      {{"prune", run.checkpoint(), "--strategy", "none"}, "needs --finetune-steps"},
      {{"prune", run.checkpoint(), "--strategy", "random", "--rounds", "2"},
       "--rounds applies only to --strategy none"},
      {{"prune", run.checkpoint(), "--strategy", "random", "--finetune-lr", "1e-3"}, "--finetune-lr needs fine-tuning"},
      {{"prune", run.checkpoint(), "--strategy", "random", "--unit", "layers"}, "unknown unit 'layers'"},
      {{"prune", run.checkpoint(), "--strategy", "entropy", "--unit", "ffn_blocks"},
       "--unit ffn_blocks: --strategy entropy does not score whole tables"},
  };
  for (const Case& c : bad) {
    const test::CommandResult r = test::run_headlab(c.args, logs.dir / "bad.txt");
    INFO(c.args[3] << ": " << r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains(c.expected));
    CHECK_FALSE(fs::exists(prune_dir));
  }

  const test::CommandResult r = test::run_headlab({"prune", run.checkpoint(), "--strategy", "importance", "--step-frac",
                                                   "0.25", "--batches", "2", "--score-batches", "2"},
                                                  logs.dir / "good.txt", {{"OMP_NUM_THREADS", "1"}});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const fs::path out = prune_dir / "importance";
  const std::string csv = test::read_file(out / "prune.csv");
  CHECK(count_lines(csv) == 5);
  CHECK(csv.find("\nimportance,0,0,0,,3,6,0.75,2,1 1,") != std::string::npos);
  // The masked checkpoint evaluates to the last row's loss.
  const test::CommandResult e =
      test::run_headlab({"eval", (out / "pruned.h5").string(), "--batches", "2"}, logs.dir / "eval.txt");
  INFO(e.output);
  REQUIRE(e.code == 0);
  const CsvTable table = parse_csv(csv, "prune.csv");
  REQUIRE(!table.rows.empty());
  char expected[32];
  std::snprintf(expected, sizeof expected, "loss %.4f", std::stod(table.rows.back()[table.column("val_loss")]));
  CHECK_THAT(e.output, Catch::Contains(expected));
  // Its physically pruned twin (one head per layer left in the tensors) evaluates the same.
  const test::CommandResult small =
      test::run_headlab({"eval", (out / "pruned_small.h5").string(), "--batches", "2"}, logs.dir / "eval_small.txt");
  INFO(small.output);
  REQUIRE(small.code == 0);
  CHECK_THAT(small.output, Catch::Contains(expected));
  const test::CommandResult info =
      test::run_headlab({"info", (out / "pruned_small.h5").string()}, logs.dir / "info.txt");
  CHECK_THAT(info.output, Catch::Contains("layer heads  L0 1 L1 1"));
  // pruned.h5 keeps the optimizer state for `train --init`; the physically pruned twin cannot.
  const OpenedCheckpoint masked = open_checkpoint((out / "pruned.h5").string());
  CHECK(continue_optimizer_state((out / "pruned.h5").string(), *make_optimizer(masked.config, masked.model->params())));
  const OpenedCheckpoint removed = open_checkpoint((out / "pruned_small.h5").string());
  CHECK_FALSE(continue_optimizer_state((out / "pruned_small.h5").string(),
                                       *make_optimizer(removed.config, removed.model->params())));
  fs::remove_all(prune_dir);
}

TEST_CASE("fine-tuning with no head pruned does not make the model worse; fresh moments at the peak rate do",
          "[prune]") {
  // The control arm: the same rounds of fine-tuning, nothing pruned. Continued from the
  // checkpoint's AdamW state at the rate its schedule ended at (1e-3 here), the model only
  // improves; restarted from zero moments at the peak rate (1e-2), as fine-tuning used to, the
  // first round undoes part of the training. The second run shows the tolerance can fail.
  PruneOptions o = fast_options(PruneStrategy::none);
  o.finetune_steps = 10;
  const double before = unpruned_metric(2).loss;
  const Pruned continued(o);
  REQUIRE(continued.rounds.size() == 4);  // as many rounds as pruning 2 of 8 heads at a time takes
  CHECK(finetune_rate(continued.checkpoint.config, o, continued.checkpoint.progress.step) ==
        Approx(continued.checkpoint.config.train.lr * continued.checkpoint.config.train.min_lr_ratio));
  const double tolerance = 0.05 * before;
  for (const PruneRound& r : continued.rounds) {
    INFO("round " << r.round << ": " << r.metric.loss << " against " << before);
    CHECK(r.metric.loss <= before + tolerance);
    CHECK(r.pruned.empty());
    CHECK(r.heads_total() == 8);
    CHECK(r.step == continued.checkpoint.progress.step + r.round * o.finetune_steps);
  }
  PruneOptions restarted_at_peak = o;
  restarted_at_peak.finetune_lr = continued.checkpoint.config.train.lr;
  const Pruned restarted(restarted_at_peak, /*continue_state=*/false);
  INFO("restarted: " << restarted.rounds[1].metric.loss << " against " << before);
  CHECK(restarted.rounds[1].metric.loss > before + tolerance);
}

TEST_CASE("the control's rounds are plain fine-tuning: K steps x 2 rounds equal 2K steps x 1 round", "[prune]") {
  PruneOptions o = fast_options(PruneStrategy::none);
  o.finetune_steps = 3;
  o.rounds = 2;
  const Pruned two(o);
  o.finetune_steps = 6;
  o.rounds = 1;
  const Pruned one(o);
  REQUIRE(two.rounds.size() == 3);
  REQUIRE(one.rounds.size() == 2);
  CHECK(two.rounds[2].metric.loss == one.rounds[1].metric.loss);  // bit for bit: same steps, batches, rate
  CHECK(two.rounds[1].metric.loss != one.rounds[1].metric.loss);
  CHECK(prune_run_name(o) == "none_ft6_seed0");
}

TEST_CASE("whole attention layers and FFN blocks are pruned a table at a time until none is left", "[prune][whole]") {
  const PruneStrategy strategy = GENERATE(PruneStrategy::importance, PruneStrategy::ablation,
                                          PruneStrategy::integrated_gradients, PruneStrategy::random);
  const GateKind unit = GENERATE(GateKind::heads, GateKind::ffn_units);
  PruneOptions o = fast_options(strategy);
  o.unit = unit;
  o.whole = true;
  o.ig_steps = 4;
  INFO(prune_strategy_name(strategy) << " " << prune_unit_name({unit, true}));
  Pruned p(o);
  const std::vector<PruneRound>& rounds = p.rounds;
  const Model<float>& model = *p.checkpoint.model;
  const Parameters<float>& gates = gates_of(model, unit);
  const int64_t per_table = gates.value(0).numel();
  REQUIRE(rounds.size() == 3);  // 2 tables, llround(0.25 * 2) = 1 per round
  CHECK(rounds[0].metric.loss == unpruned_metric(2).loss);
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::vector<int64_t>& kept = unit == GateKind::heads ? rounds[r].heads_per_site : rounds[r].units_per_block;
    // r tables emptied, each whole; the other kind of gate untouched
    CHECK(std::count(kept.begin(), kept.end(), 0) == static_cast<std::ptrdiff_t>(r));
    CHECK(std::count(kept.begin(), kept.end(), per_table) == static_cast<std::ptrdiff_t>(2 - r));
    CHECK(static_cast<int64_t>(rounds[r].pruned.size()) == static_cast<int64_t>(r) * per_table);
    CHECK((unit == GateKind::heads ? rounds[r].units_total() : rounds[r].heads_total()) ==
          (unit == GateKind::heads ? 2 * model.spec().d_mlp : 8));
  }
  for (int t = 0; t < 2; ++t)
    for (int64_t k = 0; k < per_table; ++k) CHECK(gates.value(t)(k) == 0.0f);
  CHECK(rounds.back().metric.loss != rounds[0].metric.loss);
  const CsvTable csv = parse_csv(prune_csv(rounds, o), "prune.csv");
  std::vector<std::string> fractions, units;
  for (const auto& row : csv.rows) {
    fractions.push_back(row[csv.column("fraction_pruned")]);
    units.push_back(row[csv.column("unit")]);
  }
  CHECK(fractions == std::vector<std::string>{"0", "0.5", "1"});
  CHECK(units == std::vector<std::string>(3, prune_unit_name({unit, true})));
  CHECK(prune_run_name(o).find(unit == GateKind::heads ? "_attention_layers" : "_ffn_blocks") != std::string::npos);
}

TEST_CASE("whole tables may all go: heads_to_prune with keep_per_site 0", "[prune][whole]") {
  const std::vector<double> scores = {0.3, 0.1, 0.2};
  const std::vector<int64_t> table_of = {0, 1, 2};
  CHECK(heads_to_prune(scores, {1, 1, 1}, table_of, 2, {}, 0) == std::vector<int64_t>{1, 2});
  CHECK(heads_to_prune(scores, {1, 0, 1}, table_of, 5, {}, 0) == std::vector<int64_t>{2, 0});
  CHECK(heads_to_prune(scores, {1, 1, 1}, table_of, 5).empty());  // by default a table's last entry stays
  CHECK(heads_to_prune(scores, {1, 1, 1}, table_of, 5, {1, 0, 1}, 0) == std::vector<int64_t>{2, 0});
}

TEST_CASE("headlab prune --unit attention_layers removes the layers from the tensors, evaluating the same",
          "[prune][whole]") {
  const test::TrainedRun& run = trained_run();
  test::ScratchDir logs("prune_whole_cli");
  const fs::path out = logs.dir / "layers";
  const test::CommandResult r =
      test::run_headlab({"prune", run.checkpoint(), "--strategy", "ablation", "--unit", "attention_layers",
                         "--step-frac", "0.5", "--batches", "2", "--score-batches", "2", "--out", out.string()},
                        logs.dir / "prune.txt", {{"OMP_NUM_THREADS", "1"}});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const CsvTable csv = parse_csv(test::read_file(out / "prune.csv"), "prune.csv");
  REQUIRE(csv.rows.size() == 3);
  char expected[32];
  std::snprintf(expected, sizeof expected, "loss %.4f", std::stod(csv.rows.back()[csv.column("val_loss")]));
  for (const char* file : {"pruned.h5", "pruned_small.h5"}) {
    const test::CommandResult e =
        test::run_headlab({"eval", (out / file).string(), "--batches", "2"}, logs.dir / "eval.txt");
    INFO(file << ": " << e.output);
    REQUIRE(e.code == 0);
    CHECK_THAT(e.output, Catch::Contains(expected));
  }
  const OpenedCheckpoint small = open_checkpoint((out / "pruned_small.h5").string());
  CHECK(small.model->spec().layer_heads == std::vector<int64_t>{0, 0});
}
