#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/io/checkpoint.h"
#include "headlab/train/run_folder.h"
#include "headlab/nn/prune.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/distillation.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/setup.h"
#include "headlab/train/step.h"
#include "headlab/train/trainer.h"
#include "support/run_files.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
using test::checkpoint_tensors;
using test::metrics_without_timing;
namespace fs = std::filesystem;

namespace {

// A scratch folder with a small, learnable text corpus.
struct Scratch : test::ScratchDir {
  Scratch() : test::ScratchDir("trainer") { write_corpus("corpus.txt", 1500); }
};

Config tiny_config(const Scratch& s) {
  Config c = test::tiny_text_config(s.dir / "corpus.txt");
  c.data.seq_len = c.model.max_seq_len = 32;
  c.model.d_model = 32;
  c.model.n_heads = 4;
  c.model.n_layers = 2;
  c.train.batch_size = 8;
  c.train.steps = 12;
  c.train.warmup_steps = 2;
  c.train.lr = 3e-3;
  c.train.eval_every = c.train.checkpoint_every = 4;
  c.train.eval_batches = 2;
  return c;
}

RunOptions quiet_run(const fs::path& dir, const std::string& resume = "") {
  RunOptions o;
  o.out_dir = dir.string();
  o.resume = resume;
  o.quiet = true;
  return o;
}

}  // namespace

TEST_CASE("a small model drives the loss on learnable text far below its start", "[train][learn]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 150;
  c.train.eval_every = 0;
  c.train.checkpoint_every = 0;
  const RunResult r = run_training(c, quiet_run(s.dir / "run"));
  // A uniform guess over 256 bytes costs ln 256 = 5.55 nats; the corpus is four short sentences.
  REQUIRE(r.val_loss);
  INFO("final val loss " << *r.val_loss);
  CHECK(*r.val_loss < 1.0);
  CHECK(r.end == RunEnd::finished);
}

TEST_CASE(
    "distillation: alpha 0 is plain training bit for bit; a teacher equal to the student gives no soft "
    "gradient; a teacher of other outputs is one line",
    "[train][distill]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 4;
  c.train.eval_every = c.train.checkpoint_every = 4;
  run_training(c, quiet_run(s.dir / "teacher"));
  const std::string teacher = newest_checkpoint((s.dir / "teacher").string())->path;
  auto final_params = [&](const Config& config, const std::string& name) {
    run_training(config, quiet_run(s.dir / name));
    Model<float> m(model_spec(config));
    load_training_checkpoint(newest_checkpoint((s.dir / name).string())->path, m, nullptr);
    return std::vector<float>(m.params().values(), m.params().values() + m.params().slab_size());
  };
  const std::vector<float> plain = final_params(c, "plain");
  Config zero = c;
  zero.train.teacher = teacher;
  zero.train.distill_alpha = 0;
  CHECK(final_params(zero, "alpha0") == plain);
  Config half = zero;
  half.train.distill_alpha = 0.5;
  CHECK(final_params(half, "alpha_half") != plain);

  // The teacher as the student's start with alpha 1: the student's logits are the teacher's (no
  // dropout), so the soft loss's gradient is 0 but for rounding; with half the hard loss it is not.
  {
    const Config tc = checkpoint_config(teacher);
    Model<float> student(model_spec(tc));
    load_training_checkpoint(teacher, student, nullptr);
    auto dataset = make_dataset(tc);
    std::unique_ptr<Model<float>> t = load_teacher(teacher, student.spec(), dataset->tokenizer());
    auto optimizer = make_optimizer(tc, student.params());
    Arena arena;
    Tape<float> tape(arena);
    BatchPrefetcher batches(*dataset, Split::train, tc.train.batch_size, false);
    Distillation d{*t, 1.0, 2.0};
    TrainingContext ctx{student, *optimizer, batches, tape, schedule_options(tc), 1, 0.0, 0};
    ctx.distillation = &d;
    ctx.update_parameters = false;
    const double soft_only = train_step(ctx, 0).grad_norm;
    d.alpha = 0.5;
    const double mixed = train_step(ctx, 0).grad_norm;
    CHECK(mixed > 0);
    CHECK(soft_only <= 1e-5 * mixed);
  }

  Config other = c;
  other.model.vocab_size = 300;
  other.train.teacher = teacher;
  CHECK_THROWS_WITH(run_training(other, quiet_run(s.dir / "mismatched")),
                    Catch::Contains("model.vocab_size = 256, the student's is 300"));
}

TEST_CASE("a run stopped between checkpoints and resumed ends bit-identical to a straight run", "[train][resume]") {
  Scratch s;
  Config c = tiny_config(s);
  c.model.dropout = 0.1;  // dropout masks must replay too
  c.train.grad_accum = 2;
  // Two threads, so the parallel loops' split must replay too. Only here: under ctest -j2 a
  // 2-thread run shares 2 cores with another test, and every OpenMP barrier waits for a thread
  // the other process holds (the prefetching test took 5 times as long that way).
  c.train.threads = 2;
  run_training(c, quiet_run(s.dir / "straight"));

  SECTION("killed after step 6, resumed from the step-4 checkpoint") {
    RunOptions first = quiet_run(s.dir / "resumed");
    first.after_step = [](int64_t step, Model<float>&) { return step < 6; };
    CHECK(run_training(c, first).end == RunEnd::interrupted);
    CHECK(newest_checkpoint((s.dir / "resumed").string())->step == 4);
  }
  SECTION("Ctrl-C at step 7 checkpoints step 7, then resumes") {
    RunOptions first = quiet_run(s.dir / "resumed");
    first.after_step = [](int64_t step, Model<float>&) {
      if (step == 7) std::raise(SIGINT);
      return true;
    };
    CHECK(run_training(c, first).end == RunEnd::interrupted);
    CHECK(newest_checkpoint((s.dir / "resumed").string())->step == 7);
  }
  const RunResult resumed = run_training(c, quiet_run(s.dir / "resumed", "auto"));
  CHECK(resumed.end == RunEnd::finished);
  const auto straight_rows = metrics_without_timing(s.dir / "straight"),
             resumed_rows = metrics_without_timing(s.dir / "resumed");
  CHECK(straight_rows.size() == 13);  // header + 12 steps
  CHECK(resumed_rows == straight_rows);
  CHECK(checkpoint_tensors(checkpoint_path((s.dir / "resumed").string(), 12)) ==
        checkpoint_tensors(checkpoint_path((s.dir / "straight").string(), 12)));
}

TEST_CASE("prefetching batches in the background changes nothing: runs with and without it are bit-identical",
          "[train]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.grad_accum = 2;
  c.train.prefetch = true;
  const RunResult with = run_training(c, quiet_run(s.dir / "with"));
  c.train.prefetch = false;
  const RunResult without = run_training(c, quiet_run(s.dir / "without"));
  CHECK(metrics_without_timing(s.dir / "with") == metrics_without_timing(s.dir / "without"));
  CHECK(checkpoint_tensors(checkpoint_path((s.dir / "with").string(), 12)) ==
        checkpoint_tensors(checkpoint_path((s.dir / "without").string(), 12)));
  CHECK(with.batches == 24);  // 12 steps x 2 micro-batches
  CHECK(without.batches == 0);
}

TEST_CASE("a NaN loss stops the run with a clear message and keeps the last good checkpoint", "[train][faults]") {
  Scratch s;
  Config c = tiny_config(s);
  RunOptions o = quiet_run(s.dir / "run");
  o.after_step = [](int64_t step, Model<float>& model) {
    if (step == 5) model.params().value("ln_f/weight").data()[0] = std::nanf("");
    return true;
  };
  REQUIRE_THROWS_WITH(run_training(c, o), Catch::Contains("training diverged: loss is nan at step 5"));
  const auto newest = newest_checkpoint((s.dir / "run").string());
  REQUIRE(newest.has_value());
  CHECK(newest->step == 4);
  Model<float> model(model_spec(c));
  CHECK(load_training_checkpoint(newest->path, model, nullptr).step == 4);
}

TEST_CASE("resume refuses a checkpoint of a different architecture or a corrupt one", "[train][faults]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 4;
  run_training(c, quiet_run(s.dir / "run"));
  Config other = c;
  other.model.n_heads = 2;
  REQUIRE_THROWS_WITH(run_training(other, quiet_run(s.dir / "run", "auto")),
                      Catch::Contains("trained with a different model section"));
  // The checkpoint itself, loaded into the wrong model, names the mismatched tensor.
  Model<float> wrong(model_spec(other));
  CHECK_THROWS_WITH(load_training_checkpoint(checkpoint_path((s.dir / "run").string(), 4), wrong, nullptr),
                    Catch::Contains("has shape"));
  // Truncate the newest checkpoint: resuming is one clear error.
  const std::string path = checkpoint_path((s.dir / "run").string(), 4);
  fs::resize_file(path, fs::file_size(path) / 2);
  Config longer = c;
  longer.train.steps = 8;
  CHECK_THROWS_AS(run_training(longer, quiet_run(s.dir / "run", "auto")), Error);
}

TEST_CASE("resume refuses a metrics.csv whose step is not a count, in one line, leaving the file", "[train][faults]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 4;
  run_training(c, quiet_run(s.dir / "run"));
  const fs::path metrics = s.dir / "run" / "metrics.csv";
  std::string text = test::read_file(metrics);
  text.replace(text.find('\n') + 1, 1, "x");  // the first row's step, "1", becomes "x"
  std::ofstream(metrics, std::ios::trunc) << text;
  Config longer = c;
  longer.train.steps = 8;
  REQUIRE_THROWS_WITH(run_training(longer, quiet_run(s.dir / "run", "auto")),
                      "cannot resume: " + metrics.string() + ":2: step 'x' is not a step count");
  CHECK(test::read_file(metrics) == text);
}

TEST_CASE("a fresh run refuses a folder that already holds one, writing nothing", "[train][faults]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 2;
  run_training(c, quiet_run(s.dir / "run"));
  const auto before = fs::last_write_time(s.dir / "run" / "metrics.csv");
  REQUIRE_THROWS_WITH(run_training(c, quiet_run(s.dir / "run")), Catch::Contains("already holds a run"));
  CHECK(fs::last_write_time(s.dir / "run" / "metrics.csv") == before);
}

TEST_CASE("a missing corpus is one line naming the path, before anything is written", "[train][faults]") {
  Scratch s;
  Config c = tiny_config(s);
  c.data.path = (s.dir / "nope.txt").string();
  REQUIRE_THROWS_WITH(run_training(c, quiet_run(s.dir / "run")), Catch::Contains("nope.txt"));
  CHECK_FALSE(fs::exists(s.dir / "run"));
}

TEST_CASE("a checkpoint round trip restores parameters, gates and optimizer state exactly", "[train][checkpoint]") {
  Scratch s;
  Config c = tiny_config(s);
  Model<float> a(model_spec(c));
  a.params().init(3);
  a.gates().value(1).data()[2] = 0.0f;  // a pruned head
  auto opt_a = make_optimizer(c, a.params());
  for (int64_t i = 0; i < a.params().slab_size(); ++i) a.params().grads()[i] = 0.01f * static_cast<float>(i % 7);
  opt_a->step(1e-3);
  RunProgress p;
  p.step = 42;
  p.tokens_seen = 1234;
  fs::create_directories(s.dir);
  const std::string path = (s.dir / "x.h5").string();
  save_training_checkpoint(path, c, a, opt_a.get(), p, nullptr);

  Model<float> b(model_spec(c));
  auto opt_b = make_optimizer(c, b.params());
  const RunProgress q = load_training_checkpoint(path, b, opt_b.get());
  CHECK(q.step == 42);
  CHECK(q.tokens_seen == 1234);
  CHECK(std::equal(a.params().values(), a.params().values() + a.params().slab_size(), b.params().values()));
  CHECK(b.gates().value(1).data()[2] == 0.0f);
  CHECK(opt_b->step_count() == 1);
  const auto sa = opt_a->state_tensors(), sb = opt_b->state_tensors();
  for (size_t i = 0; i < sa.size(); ++i)
    CHECK(std::equal(sa[i].second.data(), sa[i].second.data() + sa[i].second.numel(), sb[i].second.data()));
  CHECK(checkpoint_config(path) == c);
}

namespace {

// A trained-looking model of tiny_config with heads 0, 2 and 3 of layer 1 masked, and its
// physically pruned twin (layer_heads = [4, 1]).
struct MaskedAndPruned {
  Model<float> masked, pruned;
  explicit MaskedAndPruned(const Config& c) : masked(model_spec(c)), pruned(make(masked)) {}
  static Model<float> make(Model<float>& masked) {
    masked.params().init(5);
    for (int64_t h : {0, 2, 3}) masked.gates().value(1)(h) = 0.0f;
    return prune_heads(masked, heads_with_nonzero_gates(masked));
  }
};

}  // namespace

TEST_CASE("a pruned checkpoint round-trips: config with layer_heads, no optimizer state, same outputs",
          "[train][checkpoint][prune]") {
  Scratch s;
  const Config c = tiny_config(s);
  MaskedAndPruned m(c);
  const std::string path = (s.dir / "pruned.h5").string();
  save_pruned_checkpoint(path, c, m.pruned, 42, nullptr);

  const Config saved = checkpoint_config(path);
  CHECK(saved.model.layer_heads == std::vector<int64_t>{4, 1});
  CHECK(saved.model.d_head == c.model.d_model / c.model.n_heads);  // explicit, not 0
  CHECK(saved.train == c.train);
  CHECK_FALSE(CheckpointReader(path).has_attr("optimizer"));
  Model<float> loaded(model_spec(saved));
  CHECK(load_training_checkpoint(path, loaded, nullptr).step == 42);
  REQUIRE(loaded.params().slab_size() == m.pruned.params().slab_size());
  CHECK(std::equal(m.pruned.params().values(), m.pruned.params().values() + m.pruned.params().slab_size(),
                   loaded.params().values()));
  // Resuming it as a training run needs optimizer state: a clear error, not zero moments in disguise.
  auto optimizer = make_optimizer(saved, loaded.params());
  CHECK_THROWS_WITH(load_training_checkpoint(path, loaded, optimizer.get()),
                    Catch::Contains("optimizer state is for 'none'"));

  // The loaded pruned model scores the validation split as the masked one does.
  auto dataset = make_dataset(c);
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = dataset->make_batch(c.train.batch_size);
  const EvalStats masked = evaluate(m.masked, *dataset, Split::val, 2, batch, tape);
  const EvalStats pruned = evaluate(loaded, *dataset, Split::val, 2, batch, tape);
  CHECK(pruned.loss == Approx(masked.loss).epsilon(1e-5));

  // A config that differs in more than the heads does not describe the model.
  Config other = c;
  other.model.d_model = 64;
  CHECK_THROWS_WITH(save_pruned_checkpoint(path, other, m.pruned, 42, nullptr),
                    Catch::Contains("does not describe this model"));
}

TEST_CASE("FFN gates are saved when a unit is off and read back; FFN units cut out round-trip with mlp_units",
          "[train][checkpoint][prune][ffn]") {
  Scratch s;
  const Config c = tiny_config(s);
  Model<float> model(model_spec(c));
  model.params().init(5);
  const std::string plain = (s.dir / "plain.h5").string(), gated = (s.dir / "gated.h5").string(),
                    small = (s.dir / "small.h5").string();
  save_pruned_checkpoint(plain, c, model, 1, nullptr);
  CHECK_FALSE(CheckpointReader(plain).has("model/blocks/0/mlp/gates"));  // all 1: none saved
  model.ffn_gates().value(1)(2) = 0.0f;
  model.ffn_gates().value(0)(7) = 0.5f;
  save_pruned_checkpoint(gated, c, model, 2, nullptr);
  CHECK(CheckpointReader(gated).has("model/blocks/0/mlp/gates"));
  Model<float> loaded(model_spec(checkpoint_config(gated)));
  load_training_checkpoint(gated, loaded, nullptr);
  CHECK(loaded.ffn_gates().value(1)(2) == 0.0f);
  CHECK(loaded.ffn_gates().value(0)(7) == 0.5f);
  load_training_checkpoint(plain, loaded, nullptr);  // a file without FFN gates: all 1 again
  CHECK(loaded.ffn_gates().value(1)(2) == 1.0f);

  const Model<float> pruned = prune_units(model, units_with_nonzero_gates(model));
  save_pruned_checkpoint(small, c, pruned, 3, nullptr);
  const Config saved = checkpoint_config(small);
  const int64_t d_mlp = c.model.mlp_ratio * c.model.d_model;
  CHECK(saved.model.mlp_units == std::vector<int64_t>{d_mlp, d_mlp - 1});
  Model<float> reloaded(model_spec(saved));
  load_training_checkpoint(small, reloaded, nullptr);
  CHECK(reloaded.ffn_gates().value(0)(7) == 0.5f);
  auto dataset = make_dataset(c);
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = dataset->make_batch(c.train.batch_size);
  CHECK(evaluate(reloaded, *dataset, Split::val, 2, batch, tape).loss ==
        Approx(evaluate(model, *dataset, Split::val, 2, batch, tape).loss).epsilon(1e-5));
}

TEST_CASE("an encoder_decoder's pruned checkpoint round-trips with per-site layer_heads and the same loss",
          "[train][checkpoint][prune][encoder_decoder]") {
  test::ScratchDir s("pruned_seq2seq");
  const Config c = test::tiny_translate_config(s.write_parallel_corpus(200));
  Model<float> masked(model_spec(c));  // sites enc.L0, dec.L0, cross.L0: 2 heads each
  masked.params().init(3);
  masked.gates().value(0)(1) = 0.0f;  // enc.L0H1
  masked.gates().value(2)(0) = 0.0f;  // cross.L0H0
  const Model<float> pruned = prune_heads(masked, heads_with_nonzero_gates(masked));
  const std::string path = (s.dir / "pruned.h5").string();
  save_pruned_checkpoint(path, c, pruned, 9, nullptr);

  const Config saved = checkpoint_config(path);
  CHECK(saved.model.layer_heads == std::vector<int64_t>{1, 2, 1});
  CHECK(saved.model.cross_d_head == c.model.d_model / c.model.n_heads);  // explicit, not 0
  Model<float> loaded(model_spec(saved));
  CHECK(load_training_checkpoint(path, loaded, nullptr).step == 9);
  REQUIRE(loaded.params().slab_size() == pruned.params().slab_size());
  CHECK(std::equal(pruned.params().values(), pruned.params().values() + pruned.params().slab_size(),
                   loaded.params().values()));
  CHECK(loaded.gates().value(2)(0) == masked.gates().value(2)(1));

  auto dataset = make_dataset(c);
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = dataset->make_batch(8);
  const EvalStats want = evaluate(masked, *dataset, Split::val, 2, batch, tape);
  const EvalStats got = evaluate(loaded, *dataset, Split::val, 2, batch, tape);
  CHECK(got.loss == Approx(want.loss).epsilon(1e-5));
}

TEST_CASE("train --init fine-tunes a pruned checkpoint from step 0 with zero optimizer moments",
          "[train][checkpoint][prune]") {
  Scratch s;
  const Config c = tiny_config(s);
  MaskedAndPruned m(c);
  const std::string path = (s.dir / "pruned.h5").string();
  save_pruned_checkpoint(path, c, m.pruned, 12, nullptr);

  RunOptions o = quiet_run(s.dir / "finetune");
  o.init_from = path;
  Config short_run = c;  // the model section comes from the checkpoint
  short_run.train.steps = 4;
  const RunResult r = run_training(short_run, o);
  CHECK(r.end == RunEnd::finished);
  CHECK(r.step == 4);
  const std::string last = checkpoint_path((s.dir / "finetune").string(), 4);
  const Config saved = checkpoint_config(last);
  CHECK(saved.model.layer_heads == std::vector<int64_t>{4, 1});
  Model<float> tuned(model_spec(saved));
  auto optimizer = make_optimizer(saved, tuned.params());
  CHECK(load_training_checkpoint(last, tuned, optimizer.get()).step == 4);
  CHECK(optimizer->step_count() == 4);  // the moments started at zero at step 0
  CHECK_FALSE(std::equal(tuned.params().values(), tuned.params().values() + tuned.params().slab_size(),
                         m.pruned.params().values()));  // it trained
  // Resuming the fine-tuning run with --init again picks up its own newest checkpoint.
  RunOptions resume = o;
  resume.resume = "auto";
  short_run.train.steps = 6;
  CHECK(run_training(short_run, resume).step == 6);
}

TEST_CASE("train --init of a checkpoint with optimizer state continues its moments", "[train][checkpoint]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 6;
  RunOptions first = quiet_run(s.dir / "first");
  REQUIRE(run_training(c, first).step == 6);
  const std::string from = checkpoint_path((s.dir / "first").string(), 6);

  RunOptions o = quiet_run(s.dir / "second");
  o.init_from = from;
  c.train.steps = 3;
  REQUIRE(run_training(c, o).step == 3);
  const std::string last = checkpoint_path((s.dir / "second").string(), 3);
  Model<float> tuned(model_spec(c));
  auto optimizer = make_optimizer(c, tuned.params());
  CHECK(load_training_checkpoint(last, tuned, optimizer.get()).step == 3);  // a new run: steps from 0
  CHECK(optimizer->step_count() == 6 + 3);  // the moments went on from the first run's six updates
}

TEST_CASE("train --init refuses a --set model key the checkpoint contradicts; model.dropout applies",
          "[train][checkpoint]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 4;
  REQUIRE(run_training(c, quiet_run(s.dir / "first")).step == 4);
  RunOptions o = quiet_run(s.dir / "second");
  o.init_from = checkpoint_path((s.dir / "first").string(), 4);

  Config eight = c;  // as `--set model.n_heads=8` leaves it
  eight.model.n_heads = 8;
  o.set_keys = {"train.steps", "model.n_heads"};
  REQUIRE_THROWS_WITH(run_training(eight, o), "--set model.n_heads=8 contradicts --init " + o.init_from +
                                                  ", whose model has model.n_heads=4 (--init keeps the "
                                                  "checkpoint's model; only model.dropout may change)");
  CHECK_FALSE(fs::exists(s.dir / "second"));
  // Without the --set, the config file's n_heads is replaced by the checkpoint's, as documented.
  o.set_keys = {"train.steps"};
  CHECK(run_training(eight, o).step == 4);
  fs::remove_all(s.dir / "second");
  // A --set that agrees is fine; model.dropout applies.
  Config dropout = c;
  dropout.model.dropout = 0.25;
  o.set_keys = {"model.n_heads", "model.dropout"};
  REQUIRE(run_training(dropout, o).step == 4);
  CHECK(checkpoint_config(checkpoint_path((s.dir / "second").string(), 4)).model.dropout == 0.25);
}

TEST_CASE("the closing line holds metrics.csv's last numbers and no placeholder for what is unknown", "[train]") {
  Scratch s;
  Config c = tiny_config(s);
  c.train.steps = 10;
  c.train.log_every = 3;  // rows at 3, 4 (eval), 6, 8 (eval), 9, 10 (eval, last)
  const fs::path dir = s.dir / "run";
  const RunResult r = run_training(c, quiet_run(dir));
  REQUIRE(r.train_loss);
  REQUIRE(r.val_loss);
  // The last row of metrics.csv, as written.
  std::ifstream in(dir / "metrics.csv");
  std::string row, last;
  while (std::getline(in, row)) last = row;
  std::vector<std::string> cells;
  std::stringstream cut(last);
  for (std::string cell; std::getline(cut, cell, ',');) cells.push_back(cell);
  REQUIRE(cells.size() >= 5);  // step, tokens, lr, train_loss, val_loss, ...
  CHECK(cells[0] == "10");
  CHECK(*r.train_loss == Approx(std::stod(cells[3])).epsilon(1e-5));  // the row holds %.6g
  CHECK(*r.val_loss == Approx(std::stod(cells[4])).epsilon(1e-5));
  CHECK(r.train_loss_from == 10);  // the row after step 9's covers step 10 alone
  CHECK(r.val_step == 10);
  char expected[128];
  std::snprintf(
      expected, sizeof expected,
      "finished at step 10 of 10: train loss %.4f (mean of steps 10-10), val loss %.4f (step 10, 2 batches of val)",
      *r.train_loss, *r.val_loss);
  CHECK_THAT(closing_line(r, 2), Catch::StartsWith(expected));

  // Resuming the finished run trains nothing and says so, with no made-up numbers.
  const RunResult again = run_training(c, quiet_run(dir, "auto"));
  CHECK(again.steps_trained == 0);
  CHECK_FALSE(again.train_loss);
  const std::string said = closing_line(again, 2);
  CHECK_THAT(said, Catch::StartsWith("already finished at step 10 of 10: nothing to train (best val loss "));
  CHECK_THAT(said, !Catch::Contains("-1") && !Catch::Contains("tokens/s"));
}

TEST_CASE("a run stopped before its first row or validation says so instead of printing a number", "[train]") {
  RunResult r;
  r.end = RunEnd::interrupted;
  r.step = 3;
  r.total_steps = 100;
  r.steps_trained = 3;
  CHECK(closing_line(r, 8) == "stopped at step 3 of 100: no metrics row written, no validation yet; 0 tokens/s, 0.0 s");
  r.train_loss = 2.5;
  r.train_loss_from = 1;
  r.train_loss_to = 3;
  r.best_val_loss = 2.25;  // from an earlier call of a resumed run
  CHECK(closing_line(r, 8) ==
        "stopped at step 3 of 100: train loss 2.5000 (mean of steps 1-3), no validation yet, best 2.2500; 0 tokens/s, "
        "0.0 s");
}
