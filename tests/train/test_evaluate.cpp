#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "headlab/data/tasks.h"
#include "headlab/nn/saved_forward.h"
#include "headlab/train/evaluate.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

void check_same(const EvalStats& a, const EvalStats& b) {
  CHECK(a.loss == b.loss);
  CHECK(a.accuracy == b.accuracy);
  CHECK(a.bits_per_byte == b.bits_per_byte);
  CHECK(a.n_targets == b.n_targets);
}

}  // namespace

TEST_CASE("a pruning curve's evaluation equals evaluate() bit for bit, round after round", "[train]") {
  const auto kind = GENERATE(ModelKind::decoder, ModelKind::encoder);
  const int64_t kv_heads = GENERATE(4, 2);
  const int64_t T = 8, B = 6, n_batches = 3;
  INFO((kind == ModelKind::decoder ? "decoder" : "encoder") << ", " << kv_heads << " kv heads");
  auto data = test::tiny_task(kind, T, 16);  // 3 batches of 6: the last one is partly empty
  ModelSpec spec = test::tiny_spec(kind, 4, kv_heads);
  spec.n_layers = 3;
  spec.vocab_size = data->vocab_size();
  spec.n_classes = 2;
  spec.max_seq_len = T;
  Model<float> model(spec);
  test::randomize(model, 23);
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = data->make_batch(B);
  // A budget of one batch's saved forward: batch 0 restarts from its saved layers, the others
  // always run whole, and both kinds must agree with evaluate().
  PruningEvaluation curve(*data, Split::val, n_batches, B, SavedForward<float>::bytes(spec, B, T));
  auto gate = [&](int64_t l, int64_t h) -> float& { return model.gates().value(static_cast<int>(l))(h); };
  auto round = [&](const char* what) {
    INFO(what);
    check_same(curve.evaluate(model, tape), evaluate(model, *data, Split::val, n_batches, batch, tape));
  };
  round("unpruned");
  gate(2, 1) = 0.0f;
  round("a head of the top layer off");
  gate(0, 3) = 0.0f;
  gate(2, 2) = 0.0f;
  round("heads of the first and the top layer off");
  round("nothing changed");
  gate(1, 0) = 0.0f;
  gate(2, 0) = 0.75f;  // above the lowest changed layer a gate may change any way
  round("a head of the middle layer off, a top-layer gate changed");
  gate(1, 2) = 0.5f;  // a change other than to 0: the whole forward again
  round("a gate changed to another nonzero value");
  gate(0, 3) = 1.25f;  // a head switched back on
  round("a pruned head reopened");
  model.params().values()[0] += 0.125f;
  curve.forget();
  gate(1, 1) = 0.0f;
  round("parameters changed (forget), then a head off");
  // FFN units: a block's MLP follows its attention, so the forward restarts at that layer.
  auto unit = [&](int64_t b, int64_t f) -> float& { return model.ffn_gates().value(static_cast<int>(b))(f); };
  unit(1, 5) = 0.0f;
  round("an FFN unit of the middle block off");
  unit(0, 2) = 0.0f;
  gate(1, 3) = 0.0f;
  round("an FFN unit of the first block and a head of the middle layer off");
  gate(0, 1) = 0.0f;
  unit(2, 7) = 0.0f;
  round("a head of the first layer and an FFN unit of the top block off");
  unit(1, 5) = 1.0f;
  round("an FFN unit reopened");
}
