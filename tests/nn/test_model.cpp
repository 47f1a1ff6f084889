#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/nn/model.h"
#include "support/alloc_counter.h"
#include "support/gradcheck.h"

using namespace headlab;

namespace {

ModelSpec tiny_spec(ModelKind kind, int64_t n_heads, int64_t n_kv_heads) {
  ModelSpec s;
  s.kind = kind;
  s.vocab_size = 11;
  s.d_model = 8;
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.d_head = 8 / n_heads;
  s.n_layers = 2;
  s.d_mlp = 16;
  s.max_seq_len = 8;
  s.n_classes = 3;
  return s;
}

struct TinyBatch {
  int64_t B = 2, T = 5;
  std::vector<int32_t> tokens, targets;
  std::vector<uint8_t> padding;
  explicit TinyBatch(const ModelSpec& s, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < B * T; ++i) tokens.push_back(static_cast<int32_t>(rng() % s.vocab_size));
    if (s.kind == ModelKind::decoder) {
      for (int64_t i = 0; i < B * T; ++i) targets.push_back(i == 3 ? -1 : static_cast<int32_t>(rng() % s.vocab_size));
    } else {
      for (int64_t b = 0; b < B; ++b) targets.push_back(static_cast<int32_t>(rng() % s.n_classes));
      padding.assign(B * T, 1);
      padding[B * T - 1] = padding[B * T - 2] = 0;  // the last row ends in two pad tokens
    }
  }
  ModelInput input() const {
    return {B, T, tokens.data(), targets.data(), padding.empty() ? nullptr : padding.data()};
  }
};

// Gives every parameter (and gate) a non-trivial value, so LayerNorm gains and biases are not
// the degenerate 1/0 of the init and every path carries gradient.
template <typename T>
void randomize(Model<T>& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (int64_t i = 0; i < model.params().slab_size(); ++i) model.params().values()[i] = static_cast<T>(u(rng));
  for (int i = 0; i < model.gates().size(); ++i) {
    Tensor<T> g = model.gates().value(i);
    for (int64_t h = 0; h < g.numel(); ++h) g.data()[h] = static_cast<T>(0.5 + u(rng));
  }
}

}  // namespace

TEST_CASE("model gradients match central differences for every parameter and head gate", "[nn][model][grad]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  const auto heads = GENERATE(std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{4, 2},
                              std::pair<int64_t, int64_t>{4, 1});
  ModelSpec spec = tiny_spec(kind, heads.first, heads.second);
  spec.positions = kind == ModelKind::decoder ? Positions::learned : Positions::sinusoidal;
  spec.tie_embeddings = kind == ModelKind::decoder;
  Model<double> model(spec);
  randomize(model, 5);
  TinyBatch batch(spec, 9);
  Arena arena;
  Tape<double> tape(arena);
  model.params().zero_grad();
  model.gates().zero_grad();
  tape.backward(model.forward(tape, batch.input(), {.gate_grads = true}).loss);
  tape.reset();
  auto loss = [&] {
    Tape<double> t(arena);
    NoGradGuard<double> no_grad(t);
    const double value = model.forward(t, batch.input(), {}).loss.value()(0);
    t.reset();
    return value;
  };
  test::GradCheckResult result;
  test::GradCheckOptions options;
  std::mt19937_64 rng(3);
  for (int i = 0; i < model.params().size(); ++i) {
    // A few elements of every parameter tensor, chosen at random.
    std::vector<int64_t> indices;
    const int64_t n = model.params().spec(i).shape.numel();
    for (int j = 0; j < 6; ++j) indices.push_back(model.params().offset(i) + static_cast<int64_t>(rng() % n));
    test::compare_with_central_differences(loss, model.params().values(), model.params().grads(), indices, i, options,
                                           result);
  }
  for (int i = 0; i < model.gates().size(); ++i) {
    std::vector<int64_t> indices(spec.n_heads);
    std::iota(indices.begin(), indices.end(), model.gates().offset(i));
    test::compare_with_central_differences(loss, model.gates().values(), model.gates().grads(), indices, 1000 + i,
                                           options, result);
  }
  INFO(result.str() << " (input >= 1000: gates of layer input-1000)");
  REQUIRE(result.max_rel_error <= 1e-6);
}

TEST_CASE("float and double runs of the same network agree to about 1e-4", "[nn][model]") {
  const ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 2);
  Model<double> md(spec);
  Model<float> mf(spec);
  randomize(md, 11);
  // Slab offsets differ between float and double (64-byte alignment), so copy tensor by tensor.
  auto copy_all = [](const Parameters<double>& from, Parameters<float>& to) {
    for (int i = 0; i < from.size(); ++i)
      for (int64_t j = 0; j < from.value(i).numel(); ++j) to.value(i).data()[j] = static_cast<float>(from.value(i).data()[j]);
  };
  copy_all(md.params(), mf.params());
  copy_all(md.gates(), mf.gates());
  TinyBatch batch(spec, 4);
  Arena arena_d, arena_f;
  Tape<double> td(arena_d);
  Tape<float> tf(arena_f);
  auto od = md.forward(td, batch.input(), {.gate_grads = true});
  auto of = mf.forward(tf, batch.input(), {.gate_grads = true});
  td.backward(od.loss);
  tf.backward(of.loss);
  CHECK(of.loss.value()(0) == Approx(od.loss.value()(0)).epsilon(1e-5));
  double max_rel = 0, scale = 0;
  for (int64_t i = 0; i < md.params().slab_size(); ++i) scale = std::max(scale, std::abs(md.params().grads()[i]));
  for (int i = 0; i < md.params().size(); ++i)
    for (int64_t j = 0; j < md.params().grad(i).numel(); ++j)
      max_rel = std::max(max_rel, std::abs(md.params().grad(i).data()[j] - mf.params().grad(i).data()[j]) / scale);
  INFO("max gradient difference relative to the largest gradient: " << max_rel);
  CHECK(max_rel <= 1e-4);
  CHECK(max_rel > 0);  // they really ran in different precisions
}

TEST_CASE("the same inputs and thread count give bit-identical outputs and gradients", "[nn][model][determinism]") {
  const int threads = GENERATE(1, 2);
  set_num_threads(threads);
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 4);
  spec.dropout = 0.1;
  spec.d_model = 64;  // big enough for the parallel loops to split work
  spec.d_head = 16;
  spec.d_mlp = 256;
  auto run = [&](std::vector<float>& grads) {
    Model<float> model(spec);
    model.params().init(7);
    TinyBatch batch(spec, 1);
    Arena arena;
    Tape<float> tape(arena);
    auto out = model.forward(tape, batch.input(), {.training = true, .dropout_seed = 42});
    tape.backward(out.loss);
    grads.assign(model.params().grads(), model.params().grads() + model.params().slab_size());
    return out.loss.value()(0);
  };
  std::vector<float> g1, g2;
  const float l1 = run(g1), l2 = run(g2);
  set_num_threads(2);
  CHECK(l1 == l2);
  CHECK(g1 == g2);
}

TEST_CASE("a warmed-up forward and backward allocate nothing", "[nn][model][alloc]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 2);
  spec.dropout = 0.1;
  Model<float> model(spec);
  model.params().init(1);
  TinyBatch batch(spec, 2);
  Arena arena;
  Tape<float> tape(arena);
  auto step = [&](uint64_t seed) {
    model.params().zero_grad();
    tape.backward(model.forward(tape, batch.input(), {.training = true, .dropout_seed = seed}).loss);
    tape.reset();
  };
  step(0);
  step(1);
  const int64_t tensors_before = tensor_system_allocations(), heap_before = test::heap_allocations();
  for (uint64_t s = 2; s < 5; ++s) step(s);
  CHECK(tensor_system_allocations() == tensors_before);
  CHECK(test::heap_allocations() == heap_before);
}

TEST_CASE("model specs with impossible head layouts are rejected with one line", "[nn][model]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 4);
  spec.n_kv_heads = 3;
  REQUIRE_THROWS_WITH(Model<float>(spec), Catch::Contains("n_kv_heads=3 does not divide n_heads=4"));
}

TEST_CASE("gates passed as tape variables act as the model's gates and receive their gradient", "[nn][model]") {
  const ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 2);
  Model<double> model(spec);
  randomize(model, 13);
  TinyBatch batch(spec, 6);
  Arena arena;
  Tape<double> tape(arena);
  model.params().zero_grad();
  model.gates().zero_grad();
  const ModelOutput<double> own = model.forward(tape, batch.input(), {.gate_grads = true});
  tape.backward(own.loss);
  const double own_loss = own.loss.value()(0);
  const std::vector<double> own_grads(model.gates().grads(), model.gates().grads() + model.gates().slab_size());
  tape.reset();

  // The same values as Vars with their own gradient buffers; the model's gates are then set to
  // 0 to show that they are not read.
  std::vector<Tensor<double>> values, grads;
  std::vector<Var<double>> vars;
  for (int l = 0; l < model.gates().size(); ++l) {
    values.push_back(arena.empty<double>({spec.n_heads}));
    grads.push_back(arena.zeros<double>({spec.n_heads}));
    for (int64_t h = 0; h < spec.n_heads; ++h) values.back()(h) = model.gates().value(l)(h);
  }
  for (int l = 0; l < model.gates().size(); ++l) model.gates().value(l).fill(0.0);
  for (int l = 0; l < model.gates().size(); ++l) vars.push_back(tape.leaf(values[l], grads[l]));
  const ModelOutput<double> given = model.forward(tape, batch.input(), {}, vars.data());
  tape.backward(given.loss);
  CHECK(given.loss.value()(0) == own_loss);
  for (int l = 0; l < model.gates().size(); ++l)
    for (int64_t h = 0; h < spec.n_heads; ++h)
      CHECK(grads[l](h) == own_grads[static_cast<size_t>(model.gates().offset(l) + h)]);
}
