// Learnability: a small model trained for a test-sized run learns each task far past a baseline
// (chance, or an n-gram model fitted in the test). These run in the CTest entry `learn`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "headlab/autograd/tape.h"
#include "headlab/data/tasks.h"
#include "headlab/io/csv.h"
#include "headlab/tensor/arena.h"
#include "headlab/train/setup.h"
#include "headlab/train/step.h"
#include "headlab/train/trainer.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;

namespace {

// A one-thread, quiet run with one evaluation at the end on the first eval_batches of val: the
// tests' tiny task config, deeper and wider, at a lower learning rate.
Config tiny_config(const std::string& task_name, int64_t seq_len, int64_t vocab_size) {
  Config c = test::tiny_task_config(task_name, seq_len, vocab_size);
  c.data.seed = 3;
  c.model.d_model = 32;
  c.model.n_layers = 2;
  c.train.batch_size = 32;
  c.train.lr = 3e-3;
  c.train.weight_decay = 0;
  c.train.eval_batches = 16;
  c.train.log_every = 1000;
  return c;
}

struct Outcome {
  double val_loss = 0, val_accuracy = -1, seconds = 0;
};

// Trains and reads the final evaluation (val_loss, val_accuracy) from metrics.csv.
Outcome train(const Config& c, const std::function<bool(int64_t, Model<float>&)>& after_step = {}) {
  test::ScratchDir run("learn_" + c.data.task);
  RunOptions options;
  options.out_dir = (run.dir / "run").string();
  options.quiet = true;
  options.after_step = after_step;
  const auto start = std::chrono::steady_clock::now();
  run_training(c, options);
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const CsvTable metrics = read_csv(run.dir / "run" / "metrics.csv");
  REQUIRE(!metrics.rows.empty());
  const std::vector<std::string>& last = metrics.rows.back();
  o.val_loss = std::stod(last[metrics.column("val_loss")]);
  if (const std::string& accuracy = last[metrics.column("val_accuracy")]; !accuracy.empty())
    o.val_accuracy = std::stod(accuracy);
  return o;
}

// Calls visit(row, t, target) for every scored target (target >= 0) of the first `n_batches`
// batches of `split`, with `b` holding the batch: how the baselines below are fitted (train) and
// scored (val, whose first eval_batches batches are the ones the trainer's evaluation reads).
template <typename Visit>
void for_each_scored_target(const Dataset& data, Split split, int64_t n_batches, Batch& b, Visit visit) {
  const int64_t T = b.seq_len;
  for (int64_t i = 0; i < n_batches; ++i) {
    data.fill_batch(split, i, b);
    for (int64_t r = 0; r < b.batch_size; ++r)
      for (int64_t t = 0; t < T; ++t)
        if (const int32_t y = b.targets[static_cast<size_t>(r * T + t)]; y >= 0) visit(r, t, y);
  }
}

// The best n-gram model (1, 2 or 3 tokens of context, add-0.1 smoothing) fitted on `fit_batches`
// training batches: its mean loss in nats on the scored targets of the first `eval_batches`
// validation batches.
double best_ngram_val_loss(const Config& c, int64_t fit_batches) {
  const std::unique_ptr<Dataset> data = make_dataset(c);
  const int64_t V = c.data.vocab_size, T = c.data.seq_len;
  Batch b = data->make_batch(c.train.batch_size);
  // Context of order k before target t: tokens t-k+1 .. t (the target is the token after t);
  // positions before the row's start count as one more symbol, V.
  auto context = [&](int64_t row, int64_t t, int order) {
    uint64_t key = static_cast<uint64_t>(order);
    for (int64_t j = t - order + 1; j <= t; ++j)
      key = key * static_cast<uint64_t>(V + 1) +
            static_cast<uint64_t>(j < 0 ? V : b.tokens[static_cast<size_t>(row * T + j)]);
    return key;
  };
  double best = 1e9;
  for (int order = 1; order <= 3; ++order) {
    std::unordered_map<uint64_t, double> pair_counts, context_counts;
    for_each_scored_target(*data, Split::train, fit_batches, b, [&](int64_t r, int64_t t, int32_t y) {
      const uint64_t ctx = context(r, t, order);
      pair_counts[ctx * static_cast<uint64_t>(V) + static_cast<uint64_t>(y)] += 1;
      context_counts[ctx] += 1;
    });
    double loss = 0;
    int64_t scored = 0;
    for_each_scored_target(*data, Split::val, c.train.eval_batches, b, [&](int64_t r, int64_t t, int32_t y) {
      const uint64_t ctx = context(r, t, order);
      const auto pair = pair_counts.find(ctx * static_cast<uint64_t>(V) + static_cast<uint64_t>(y));
      const auto total = context_counts.find(ctx);
      const double p = ((pair == pair_counts.end() ? 0.0 : pair->second) + 0.1) /
                       ((total == context_counts.end() ? 0.0 : total->second) + 0.1 * static_cast<double>(V));
      loss -= std::log(p);
      ++scored;
    });
    best = std::min(best, loss / static_cast<double>(scored));
  }
  return best;
}

// The best predictor from one token alone: for each distance d, the most frequent target given the
// token d places back, fitted on `fit_batches` training batches; its accuracy on the scored targets
// of the first `eval_batches` validation batches. The best over d is returned: what a model blind
// to all but one position can reach.
double best_one_token_val_accuracy(const Config& c, int64_t fit_batches) {
  const std::unique_ptr<Dataset> data = make_dataset(c);
  const int64_t V = c.data.vocab_size, T = c.data.seq_len;
  Batch b = data->make_batch(c.train.batch_size);
  auto token_back = [&](int64_t r, int64_t t, int64_t d) { return b.tokens[static_cast<size_t>(r * T + t - d)]; };
  double best = 0;
  for (int64_t d = 0; d < T; ++d) {
    std::vector<int64_t> counts(static_cast<size_t>(V * V), 0);  // [token d back, target]
    for_each_scored_target(*data, Split::train, fit_batches, b, [&](int64_t r, int64_t t, int32_t y) {
      if (t >= d) ++counts[static_cast<size_t>(token_back(r, t, d) * V + y)];
    });
    int64_t right = 0, scored = 0;
    for_each_scored_target(*data, Split::val, c.train.eval_batches, b, [&](int64_t r, int64_t t, int32_t y) {
      ++scored;
      if (t < d) return;  // nothing d places back: counted wrong
      const int64_t* row = counts.data() + token_back(r, t, d) * V;
      right += std::max_element(row, row + V) - row == y;
    });
    best = std::max(best, static_cast<double>(right) / static_cast<double>(scored));
  }
  return best;
}

}  // namespace

TEST_CASE("k_relation with k = 2 is learned by one layer with two heads", "[data][tasks][learn]") {
  // (x[t-1] - x[t-3]) mod 5 on rows of 6 tokens: chance is 1/5, and neither token alone helps.
  // The baseline is measured here: the best predictor from any one token, which should sit at
  // chance. Learned means at least halfway from it to perfect, which takes both tokens. (Whether
  // one head of the same d_model also learns it depends on the seed at this size, so the
  // head-count comparison is in datasets/README.md, not here.)
  Config c = tiny_config("k_relation", 6, 5);
  c.data.offsets = {1, 3};
  c.model.n_layers = 1;
  c.train.batch_size = 128;
  c.train.steps = 800;
  const Outcome o = train(c);
  const double one_token = best_one_token_val_accuracy(c, 200);
  INFO("accuracy " << o.val_accuracy << " (" << o.seconds << " s); best from one token " << one_token);
  CHECK(one_token < 0.25);  // the task's claim: no single token predicts the target
  CHECK(o.val_accuracy > (1 + one_token) / 2);
}

TEST_CASE("induction is learned by two layers: the induction head forms", "[data][tasks][learn]") {
  Config c = tiny_config("induction", 32, 64);
  c.data.k = 1;
  c.model.d_model = 64;
  c.model.mlp_ratio = 1;
  c.train.lr = 1e-3;
  c.train.steps = 400;
  const Outcome o = train(c);
  INFO("accuracy " << o.val_accuracy << " (" << o.seconds << " s)");
  CHECK(o.val_accuracy > 0.6);  // chance 1/64; a previous-token-only model cannot pass 0.1
}

TEST_CASE("reverse and sort are learned to high accuracy", "[data][tasks][learn]") {
  for (const char* name : {"reverse", "sort"}) {
    Config c = tiny_config(name, 12, 12);  // 10 items, 2..6 of them
    c.data.min_len = 2;
    c.train.steps = 600;
    const Outcome o = train(c);
    INFO(name << ": accuracy " << o.val_accuracy << " (" << o.seconds << " s)");
    CHECK(o.val_accuracy > 0.9);
  }
}

TEST_CASE("classify is learned well above chance by a small encoder", "[data][tasks][learn]") {
  Config c = tiny_config("classify", 8, 16);
  c.model.kind = "encoder";
  c.model.pooling = "first";  // the CLS token reads the segments (mean pooling learns far slower)
  c.data.min_len = c.data.max_len = 3;
  c.train.batch_size = 64;
  // Learning here is a plateau then a jump whose timing varies: at 600 steps train.seed 0-3 gave
  // 0.63-0.73 (and one ulp of GELU moved seed 0 from 0.77 to 0.63); at 1000 steps 0.72-0.94.
  c.train.steps = 1000;
  const Outcome o = train(c);
  // Balanced classes: a model that has learned nothing scores 0.5 +- sqrt(0.25 / n) on the n
  // evaluated examples; demand more than 4 standard deviations above it (p < 1e-4 by chance).
  const double n = static_cast<double>(c.train.eval_batches * c.train.batch_size);
  const double bound = 0.5 + 4.0 * std::sqrt(0.25 / n);
  INFO("accuracy " << o.val_accuracy << " vs chance bound " << bound << " (" << o.seconds << " s)");
  CHECK(o.val_accuracy > bound);
}

TEST_CASE("grammar is learned past the best n-gram model fitted in the test, with agreement across attractors",
          "[data][tasks][learn]") {
  // The baseline is measured here, on the same validation batches: the best of the models with 1,
  // 2 or 3 tokens of context, fitted on 1000 training batches (a million targets). Beating it takes
  // context beyond 3 tokens. References at T = 32 (datasets/README.md): the grammar's entropy is
  // 1.644 nats per scored token; on 3.8M targets the n-grams score 3.36, 2.08 and 1.81.
  const int64_t T = 32;
  Config c = tiny_config("grammar", T, 51);
  c.train.steps = 400;
  const std::unique_ptr<Dataset> data = make_dataset(c);
  const std::vector<GrammarWord> lex = grammar_lexicon(51);
  auto cls = [&](int32_t id) { return lex[static_cast<size_t>(id)].word_class; };
  int64_t attracted = 0, attracted_right = 0, distant = 0, distant_right = 0;
  // After the last step: does the model prefer the verb form that agrees with its subject over
  // the same verb in the other number, when the subject is not the previous word?
  auto probe_agreement = [&](int64_t step, Model<float>& model) {
    if (step < c.train.steps) return true;
    Arena arena;
    Tape<float> tape(arena);
    NoGradGuard<float> no_grad(tape);
    Batch b = data->make_batch(64);
    for (int64_t i = 0; i < 8; ++i) {
      data->fill_batch(Split::val, i, b);
      const ModelOutput<float> out = model.forward(tape, model_input(model.spec(), b), {});
      const Tensor<float>& logits = out.logits.value();  // [B*T, V]
      for (int64_t r = 0; r < 64; ++r) {
        const int32_t* x = b.tokens.data() + r * T;
        const int32_t* head = b.gold_head.data() + r * T;
        for (int64_t v = 1; v < T; ++v) {
          if (cls(x[v]) != WordClass::verb) continue;
          int64_t subject = -1;
          for (int64_t t = v - 1; t >= 0 && subject < 0 && cls(x[t]) != WordClass::delimiter; --t)
            if (head[t] == v && (cls(x[t]) == WordClass::noun || cls(x[t]) == WordClass::pronoun)) subject = t;
          if (subject < 0) subject = head[v];  // "N that V": the relative clause's noun
          if (subject == v - 1) continue;
          bool attractor = false;
          for (int64_t t = subject + 1; t < v; ++t)
            attractor = attractor || (cls(x[t]) == WordClass::noun &&
                                      lex[static_cast<size_t>(x[t])].number != lex[static_cast<size_t>(x[v])].number);
          const bool right =
              logits(r * T + v - 1, x[v]) > logits(r * T + v - 1, lex[static_cast<size_t>(x[v])].other_number);
          ++distant;
          distant_right += right;
          attracted += attractor;
          attracted_right += attractor && right;
        }
      }
      tape.reset();
    }
    return true;
  };
  const Outcome o = train(c, probe_agreement);
  INFO("val loss " << o.val_loss << " (" << o.seconds << " s); agreement " << distant_right << "/" << distant
                   << " with the subject further back, " << attracted_right << "/" << attracted
                   << " across an attractor");
  const double ngram = best_ngram_val_loss(c, 1000);
  INFO("best n-gram (up to 3 tokens of context): " << ngram);
  CHECK(o.val_loss < ngram);
  REQUIRE(attracted > 100);
  CHECK(distant_right > 0.9 * static_cast<double>(distant));
  CHECK(attracted_right > 0.8 * static_cast<double>(attracted));
}
