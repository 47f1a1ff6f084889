// FFN unit scores (analysis/ffn_units.h) on a random double model with non-trivial FFN gates:
// importance is |dL/dg| of each batch by central differences, averaged over batches, and 0 for a
// gated-off unit; magnitude is |g| ||W_fc row|| ||W_proj column||; integrated gradients over the
// FFN gates add up to the loss change from every unit off, the head gates untouched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "headlab/analysis/ffn_units.h"
#include "headlab/data/model_input.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

// Batch i's mean loss of the val split at the model's gates.
double batch_loss(Model<double>& model, const Dataset& data, int64_t i, int64_t batch_size) {
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  Batch batch = data.make_batch(batch_size);
  data.fill_batch(Split::val, i, batch);
  return model.forward(tape, model_input(model.spec(), batch), {}).loss.value()(0);
}

}  // namespace

TEST_CASE("FFN unit importance is the mean over batches of |dL/dg|, by central differences; a gated-off unit gets 0",
          "[analysis][ffn]") {
  Model<double> model(test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8));
  test::randomize(model, 14);
  test::randomize_ffn_gates(model, 15);
  model.ffn_gates().value(1).data()[4] = 0;
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  const FfnUnitScores s = ffn_unit_scores(model, *data, Split::val, 2, 4);
  REQUIRE(s.n_units() == 32);  // 2 blocks of d_mlp 16
  CHECK(s.block_labels == std::vector<std::string>{"L0", "L1"});
  CHECK(s.importance[16 + 4] == 0);
  CHECK(s.magnitude[16 + 4] == 0);
  const double eps = 1e-5;
  for (const int k : {0, 7, 16 + 3, 31}) {
    double* g = model.ffn_gates().value(k / 16).data() + k % 16;
    const double own = *g;
    double want = 0;
    for (int64_t i = 0; i < 2; ++i) {
      *g = own + eps;
      const double up = batch_loss(model, *data, i, 4);
      *g = own - eps;
      const double down = batch_loss(model, *data, i, 4);
      want += std::abs(up - down) / (2 * eps) / 2;
    }
    *g = own;
    CHECK(s.importance[static_cast<size_t>(k)] == Approx(want).epsilon(1e-6).margin(1e-10));
  }
  // Magnitude by hand for unit 7 of block 0.
  const Tensor<double> fc = model.params().value(model.param_index().blocks[0].fc.weight),
                       proj = model.params().value(model.param_index().blocks[0].mlp_proj.weight);
  double in = 0, out = 0;
  for (int64_t c = 0; c < 8; ++c) in += fc(7, c) * fc(7, c), out += proj(c, 7) * proj(c, 7);
  CHECK(s.magnitude[7] == Approx(std::abs(model.ffn_gates().value(0)(7)) * std::sqrt(in * out)).epsilon(1e-12));
  // Normalized per block: each block's importances have l2 norm 1.
  for (int b = 0; b < 2; ++b) {
    double norm = 0;
    for (int f = 0; f < 16; ++f) norm += std::pow(s.importance_normalized[static_cast<size_t>(16 * b + f)], 2);
    CHECK(norm == Approx(1).epsilon(1e-12));
  }
}

TEST_CASE("integrated gradients over the FFN gates add up to the loss change from every unit off", "[analysis][ffn]") {
  Model<double> model(test::tiny_spec(ModelKind::decoder, 11, 2, 1, 8));
  test::randomize(model, 16);
  test::randomize_ffn_gates(model, 17);
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  const std::vector<double> head_gates(model.gates().values(), model.gates().values() + model.gates().slab_size());
  const std::vector<double> ffn_gates(model.ffn_gates().values(),
                                      model.ffn_gates().values() + model.ffn_gates().slab_size());
  const FfnUnitScores s = ffn_unit_scores(model, *data, Split::val, 2, 4, 32);
  CHECK(std::equal(head_gates.begin(), head_gates.end(), model.gates().values()));
  CHECK(std::equal(ffn_gates.begin(), ffn_gates.end(), model.ffn_gates().values()));  // restored
  REQUIRE(s.integrated_gradients.size() == 32u);
  const double change = s.ig.loss - s.ig.baseline_loss;
  REQUIRE(std::abs(change) > 1e-3);
  double sum = 0;
  for (double a : s.integrated_gradients) sum += a;
  CHECK(std::abs(sum - change) == Approx(s.ig.completeness_error).margin(1e-15));
  CHECK(s.ig.completeness_error < 1e-2 * std::abs(change));
  CHECK(s.ig.loss == Approx(s.loss).epsilon(1e-12));
  const std::string csv = units_csv(s);
  CHECK(csv.rfind("block,label,unit,gate,importance,importance_normalized,magnitude,integrated_gradients\n", 0) == 0);
}
