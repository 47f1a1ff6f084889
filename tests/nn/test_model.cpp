#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/nn/model.h"
#include "headlab/nn/saved_forward.h"
#include "support/alloc_counter.h"
#include "support/model_gradcheck.h"
#include "support/tiny_model.h"

using namespace headlab;

using test::randomize;
using test::tiny_spec;
using test::TinyBatch;

TEST_CASE(
    "model gradients match central differences for every parameter, head gate and FFN unit gate, ragged "
    "layers included",
    "[nn][model][grad]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  struct Heads {
    int64_t n_heads, n_kv_heads;
    std::vector<int64_t> layer_heads, mlp_units;  // ragged: a physically pruned model (0: removed whole)
  };
  const Heads heads = GENERATE(Heads{2, 2, {}, {}}, Heads{4, 2, {}, {}}, Heads{4, 1, {}, {}},
                               Heads{4, 4, {1, 3}, {5, 16}}, Heads{4, 4, {0, 3}, {0, 16}});
  ModelSpec spec = tiny_spec(kind, heads.n_heads, heads.n_kv_heads);
  spec.layer_heads = heads.layer_heads;
  spec.mlp_units = heads.mlp_units;
  spec.positions = kind == ModelKind::decoder ? Positions::learned : Positions::sinusoidal;
  spec.tie_embeddings = kind == ModelKind::decoder;
  spec.activation = kind == ModelKind::decoder ? Activation::gelu : Activation::relu;
  Model<double> model(spec);
  randomize(model, 5);
  test::randomize_ffn_gates(model, 6);
  TinyBatch batch(spec, 9);
  const test::GradCheckResult result = test::check_model_gradients(model, batch.input());
  INFO(result.str() << " (input >= 1000: gates of layer input-1000; >= 2000: FFN gates of block input-2000)");
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
      for (int64_t j = 0; j < from.value(i).numel(); ++j)
        to.value(i).data()[j] = static_cast<float>(from.value(i).data()[j]);
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

TEST_CASE(
    "a forward restarted at any attention site from its saved stream, output and memory is the forward, bit "
    "for bit",
    "[nn][model]") {
  // A decoder, an encoder classifier (padded rows), and an encoder_decoder, whose restarts at
  // an encoder site rerun the encoder and then the decoder, and at a cross site skip the block's
  // self-attention; with and without the site's attention output given.
  const int kind = GENERATE(0, 1, 2);
  const ModelSpec spec = kind == 0   ? tiny_spec(ModelKind::decoder, 4, 2)
                         : kind == 1 ? tiny_spec(ModelKind::encoder, 2, 2)
                                     : test::tiny_seq2seq_spec(2, 4, 4, 1);
  Model<float> model(spec);
  randomize(model, 12);
  const TinyBatch batch(spec, 5);
  Arena arena;
  Tape<float> tape(arena);
  NoGradGuard<float> no_grad(tape);
  const ModelOutput<float> whole = model.forward(tape, batch.input(), {});
  const std::vector<float> logits(whole.logits.value().data(),
                                  whole.logits.value().data() + whole.logits.value().numel());
  const float loss = whole.loss.value()(0);
  SavedForward<float> saved;
  saved.save(model);
  tape.reset();
  REQUIRE(saved.n_sites() == static_cast<int64_t>(spec.attention_sites().size()));
  CHECK(saved.memory().empty() == (kind != 2));
  for (int64_t s = 0; s < saved.n_sites(); ++s)
    for (const bool given : {false, true}) {
      const Var<float> memory = saved.memory().empty() ? Var<float>{} : tape.constant(saved.memory());
      const ModelOutput<float> out =
          model.forward_from(tape, batch.input(), s, tape.constant(saved.site_input(s)),
                             given ? tape.constant(saved.attention(s)) : Var<float>{}, memory);
      CHECK(out.loss.value()(0) == loss);
      CHECK(std::equal(logits.begin(), logits.end(), out.logits.value().data()));
      tape.reset();
    }
  if (kind == 2) {  // a decoder site needs the memory; x must have its site's shape
    const int64_t self0 = spec.n_encoder_layers;
    CHECK_THROWS_WITH(model.forward_from(tape, batch.input(), self0, tape.constant(saved.site_input(self0))),
                      Catch::Contains("needs the encoder's output"));
    CHECK_THROWS_WITH(model.forward_from(tape, batch.input(), 0, tape.constant(saved.site_input(self0))),
                      Catch::Contains("forward_from site 0 needs x [2, 6, 8]"));
  }
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

TEST_CASE("per-layer head counts shape the parameters, the gates and the flop count", "[nn][model]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 4);  // d_head 2
  spec.layer_heads = {1, 3};
  const Model<float> model(spec);
  const int64_t C = spec.d_model, Dh = spec.d_head;
  CHECK(model.params().value("blocks/0/attn/qkv/weight").shape() == Shape{3 * 1 * Dh, C});
  CHECK(model.params().value("blocks/0/attn/qkv/bias").shape() == Shape{3 * 1 * Dh});
  CHECK(model.params().value("blocks/0/attn/proj/weight").shape() == Shape{C, 1 * Dh});
  CHECK(model.params().value("blocks/1/attn/qkv/weight").shape() == Shape{3 * 3 * Dh, C});
  CHECK(model.params().value("blocks/1/attn/proj/weight").shape() == Shape{C, 3 * Dh});
  CHECK(model.gates().value(0).numel() == 1);
  CHECK(model.gates().value(1).numel() == 3);
  CHECK(spec.total_heads() == 4);
  // Per-layer terms add up: a {1, 3} model costs the mean of a {1, 1} and a {3, 3} one.
  ModelSpec ones = spec, threes = spec;
  ones.layer_heads = {1, 1};
  threes.layer_heads = {3, 3};
  const double T = 5;
  CHECK(model.forward_flops_per_token(T) ==
        Approx((Model<float>(ones).forward_flops_per_token(T) + Model<float>(threes).forward_flops_per_token(T)) / 2));
}

TEST_CASE("switched-off heads start gated, get no gradient and do not change the function, emptied layers included",
          "[nn][model]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 4);  // d_head 2
  spec.active_heads = {1, 0};
  Model<double> model(spec);
  CHECK(model.gates().value(0)(0) == 1.0);
  for (int64_t h = 1; h < 4; ++h) CHECK(model.gates().value(0)(h) == 0.0);
  for (int64_t h = 0; h < 4; ++h) CHECK(model.gates().value(1)(h) == 0.0);
  // Random weights everywhere (the gates kept as the spec set them).
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (int64_t i = 0; i < model.params().slab_size(); ++i) model.params().values()[i] = u(rng);
  TinyBatch batch(spec, 9);
  Arena arena;
  auto loss_and_grads = [&] {
    Tape<double> tape(arena);
    model.params().zero_grad();
    const Var<double> loss = model.forward(tape, batch.input(), {}).loss;
    tape.backward(loss);
    const double value = loss.value()(0);
    tape.reset();
    return value;
  };
  const double loss = loss_and_grads();
  const int64_t C = spec.d_model, Dh = spec.d_head;
  const Tensor<double> qkv0 = model.params().grad("blocks/0/attn/qkv/weight");    // [(3*4) Dh, C]
  const Tensor<double> proj0 = model.params().grad("blocks/0/attn/proj/weight");  // [C, 4 Dh]
  double on = 0, off = 0;
  for (int64_t block = 0; block < 3; ++block)  // q, k, v rows: head 0 is on, heads 1-3 off
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t r = 0; r < Dh; ++r)
        for (int64_t c = 0; c < C; ++c) (h == 0 ? on : off) += std::abs(qkv0((block * 4 + h) * Dh + r, c));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < 4 * Dh; ++j) (j < Dh ? on : off) += std::abs(proj0(c, j));
  CHECK(on > 0);
  CHECK(off == 0);
  const Tensor<double> qkv1 = model.params().grad("blocks/1/attn/qkv/weight");
  const Tensor<double> proj1 = model.params().grad("blocks/1/attn/proj/weight");
  for (int64_t i = 0; i < qkv1.numel(); ++i) CHECK(qkv1.data()[i] == 0.0);
  for (int64_t i = 0; i < proj1.numel(); ++i) CHECK(proj1.data()[i] == 0.0);
  CHECK(std::abs(model.params().grad("blocks/1/attn/proj/bias")(0)) > 0);  // the emptied layer's one attention term
  // The switched-off heads' weights do not matter: new values, the same loss to the last bit.
  Tensor<double> w1 = model.params().value("blocks/1/attn/qkv/weight");
  for (int64_t i = 0; i < w1.numel(); ++i) w1.data()[i] = u(rng);
  Tensor<double> w0 = model.params().value("blocks/0/attn/qkv/weight");
  for (int64_t block = 0; block < 3; ++block)
    for (int64_t h = 1; h < 4; ++h)
      for (int64_t r = 0; r < Dh; ++r)
        for (int64_t c = 0; c < C; ++c) w0((block * 4 + h) * Dh + r, c) = u(rng);
  CHECK(loss_and_grads() == loss);
}

TEST_CASE("impossible per-layer head counts are rejected with one line", "[nn][model]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 4);
  spec.layer_heads = {2};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Equals("model: layer_heads has 1 entries but n_layers=2: one per layer, "
                                                      "or [] for n_heads in every layer"));
  spec.layer_heads = {2, 5};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Equals("model: layer_heads[1]=5 exceeds n_heads=4"));
  spec.layer_heads = {-1, 1};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Equals("model: layer_heads[0] must be >= 0, got -1"));
  spec.layer_heads = {0, 1};  // layer 0's attention removed whole
  CHECK_NOTHROW(Model<float>(spec));
  spec = tiny_spec(ModelKind::decoder, 4, 2);
  spec.layer_heads = {2, 2};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Contains("layer_heads needs multi-head attention"));
  spec = tiny_spec(ModelKind::decoder, 4, 4);
  spec.layer_heads = {1, 3};
  spec.active_heads = {1, 4};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Equals("model: active_heads[1]=4 exceeds the layer's 3 heads"));
  spec.active_heads = {-1, 0};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Equals("model: active_heads[0] must be >= 0, got -1"));
  spec.active_heads = {1};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::StartsWith("model: active_heads has 1 entries but n_layers=2"));
  // active_heads is read per layer through layer_heads: a layer_heads of the wrong length is
  // named first, not read past its end.
  spec.layer_heads = {1};
  spec.active_heads = {1, 1};
  CHECK_THROWS_WITH(Model<float>(spec), Catch::StartsWith("model: layer_heads has 1 entries"));
}

TEST_CASE("a spec's problem names its fields with the caller's prefix, the field to blame first", "[nn][model]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 4, 4);
  CHECK_FALSE(spec_problem(spec).has_value());
  spec.n_kv_heads = 3;
  std::optional<SpecProblem> p = spec_problem(spec, "model.");
  REQUIRE(p);
  CHECK(p->message == "model.n_kv_heads=3 does not divide model.n_heads=4");
  CHECK(p->fields == std::vector<std::string>{"model.n_kv_heads", "model.n_heads"});
  spec = tiny_spec(ModelKind::decoder, 4, 2);
  spec.layer_heads = {2, 2};
  p = spec_problem(spec);
  REQUIRE(p);
  CHECK(p->message ==
        "layer_heads needs multi-head attention (n_kv_heads = n_heads), got n_kv_heads=2, n_heads=4; "
        "mask GQA/MQA heads with gates instead");
  CHECK(p->fields.front() == "layer_heads");
  spec = tiny_spec(ModelKind::encoder, 4, 4);
  spec.n_classes = 1;
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Equals("model: an encoder needs n_classes >= 2, got 1"));
  spec = tiny_spec(ModelKind::decoder, 4, 4);
  spec.positions = Positions::sinusoidal;
  spec.d_model = 7;
  CHECK_THROWS_WITH(Model<float>(spec), Catch::Equals("model: sinusoidal positions need an even d_model, got 7"));
  spec = tiny_spec(ModelKind::decoder, 4, 4);
  spec.d_mlp = 0;
  CHECK_THROWS_WITH(Model<float>(spec),
                    Catch::StartsWith("model: sizes must be positive (") && Catch::Contains("d_mlp=0"));
}

TEST_CASE("FFN gates of 1 leave the model as it was, bit for bit; a gate of 0 removes its unit exactly",
          "[nn][model][ffn]") {
  const ModelSpec spec = tiny_spec(ModelKind::decoder, 2, 2);
  Model<float> model(spec);
  randomize(model, 8);
  const TinyBatch batch(spec, 4);
  Arena arena;
  Tape<float> tape(arena);
  NoGradGuard<float> no_grad(tape);
  auto loss = [&] {
    const float value = model.forward(tape, batch.input(), {}).loss.value()(0);
    tape.reset();
    return value;
  };
  const float plain = loss();
  // A gate of 0 is the same model as zeroing the unit's column of the output projection.
  model.ffn_gates().value(1)(3) = 0;
  const float gated = loss();
  CHECK(gated != plain);
  model.ffn_gates().value(1)(3) = 1;
  CHECK(loss() == plain);
  Tensor<float> proj = model.params().value(model.param_index().blocks[1].mlp_proj.weight);  // [C, F]
  for (int64_t c = 0; c < proj.size(0); ++c) proj(c, 3) = 0;
  CHECK(loss() == gated);
}

TEST_CASE("mlp_units of the wrong length or outside [0, d_mlp] are one line naming the key", "[nn][model][ffn]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 2, 2);
  spec.mlp_units = {4};
  CHECK_THROWS_WITH(validate(spec), Catch::Contains("mlp_units has 1 entries but n_layers=2"));
  spec.mlp_units = {4, 17};
  CHECK_THROWS_WITH(validate(spec), Catch::Contains("mlp_units[1]=17 is outside [0, d_mlp=16]"));
  spec.mlp_units = {4, -1};
  CHECK_THROWS_WITH(validate(spec), Catch::Contains("mlp_units[1]=-1 is outside [0, d_mlp=16]"));
  spec.mlp_units = {4, 16};
  const Model<float> model(spec);
  CHECK(model.ffn_gates().value(0).numel() == 4);
  CHECK(model.params().value(model.param_index().blocks[0].fc.weight).size(0) == 4);
  CHECK(model.ffn_gates().spec(1).name == "blocks/1/mlp/gates");
}
