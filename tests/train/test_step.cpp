#include <catch2/catch.hpp>

#include <cmath>

#include "headlab/common/hash.h"
#include "headlab/train/setup.h"
#include "headlab/train/step.h"
#include "support/alloc_counter.h"

using namespace headlab;

namespace {

// Uniform random bytes as next-token data: enough to drive a real step without a file.
class RandomBytes : public Dataset {
 public:
  explicit RandomBytes(int64_t seq_len) : seq_len_(seq_len) {}
  std::string name() const override { return "random bytes"; }
  int64_t vocab_size() const override { return 256; }
  int64_t seq_len() const override { return seq_len_; }
  void fill_batch(Split split, int64_t index, Batch& out) const override {
    for (int64_t b = 0; b < out.batch_size; ++b) {
      RowRng rng(7, split, index, b);
      for (int64_t t = 0; t < seq_len_; ++t) {
        out.tokens[b * seq_len_ + t] = static_cast<int32_t>(rng.below(256));
        out.targets[b * seq_len_ + t] = static_cast<int32_t>(rng.below(256));
      }
    }
  }

 private:
  int64_t seq_len_;
};

}  // namespace

TEST_CASE("a warmed-up training step allocates nothing: no tensors, no heap", "[train][alloc]") {
  Config c;
  c.model.d_model = 32;
  c.model.n_heads = 4;
  c.model.n_kv_heads = 2;
  c.model.n_layers = 2;
  c.model.dropout = 0.1;
  c.data.seq_len = 16;
  c.train.batch_size = 4;
  c.train.grad_accum = 2;
  Model<float> model(model_spec(c));
  model.params().init(1);
  auto optimizer = make_optimizer(c, model.params());
  RandomBytes data(c.data.seq_len);
  BatchPrefetcher batches(data, Split::train, c.train.batch_size, /*background=*/true);
  Arena arena;
  Tape<float> tape(arena);
  TrainingContext ctx{model, *optimizer, batches, tape, schedule_options(c), c.train.grad_accum, c.train.grad_clip, 0};
  train_step(ctx, 0);
  train_step(ctx, 1);
  const int64_t tensors = tensor_system_allocations(), heap = test::heap_allocations();
  for (int64_t step = 2; step < 6; ++step) {
    const StepStats s = train_step(ctx, step);
    CHECK(std::isfinite(s.loss));
  }
  CHECK(tensor_system_allocations() == tensors);
  CHECK(test::heap_allocations() == heap);
}

TEST_CASE("gradient accumulation over two half batches equals one full batch", "[train]") {
  // Same 8 sequences either as one batch of 8 or as 2 micro-batches of 4: the mean loss and the
  // update agree up to float rounding (dropout off).
  Config c;
  c.model.d_model = 16;
  c.model.n_heads = 2;
  c.model.n_layers = 1;
  c.data.seq_len = 8;
  auto run = [&](int64_t batch_size, int64_t accum) {
    Model<float> model(model_spec(c));
    model.params().init(3);
    auto optimizer = make_optimizer(c, model.params());
    // Micro-batch m of step 0 is dataset batch m; the full batch is rows 0-3 of batch 0 and 1.
    class Halves : public Dataset {
     public:
      Halves(int64_t b) : full_(b == 8) {}
      std::string name() const override { return "halves"; }
      int64_t vocab_size() const override { return 256; }
      int64_t seq_len() const override { return 8; }
      void fill_batch(Split, int64_t index, Batch& out) const override {
        for (int64_t b = 0; b < out.batch_size; ++b) {
          const int64_t source = full_ ? b : (index % 2) * 4 + b;  // row id within the 8
          RowRng rng(1, Split::train, source / 4, source % 4);
          for (int64_t t = 0; t < 8; ++t) {
            out.tokens[b * 8 + t] = static_cast<int32_t>(rng.below(256));
            out.targets[b * 8 + t] = static_cast<int32_t>(rng.below(256));
          }
        }
      }
      bool full_;
    } data(batch_size);
    BatchPrefetcher batches(data, Split::train, batch_size, /*background=*/false);
    Arena arena;
    Tape<float> tape(arena);
    TrainingContext ctx{model, *optimizer, batches, tape, schedule_options(c), accum, 0.0, 0};
    const double loss = train_step(ctx, 50).loss;  // past warmup: a non-zero learning rate
    return std::pair<double, std::vector<float>>(
        loss, std::vector<float>(model.params().values(), model.params().values() + model.params().slab_size()));
  };
  const auto [full_loss, full_params] = run(8, 1);
  const auto [accum_loss, accum_params] = run(4, 2);
  CHECK(accum_loss == Approx(full_loss).epsilon(1e-6));
  double max_diff = 0;
  for (size_t i = 0; i < full_params.size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(full_params[i] - accum_params[i])));
  INFO("max parameter difference " << max_diff);
  CHECK(max_diff < 1e-6);
}
