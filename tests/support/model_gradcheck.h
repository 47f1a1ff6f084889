// Central differences for a whole model: the loss's gradient for a few random elements of every
// parameter tensor, for every head gate and for a few FFN unit gates of every block, against what
// the model's backward gives.
//   const test::GradCheckResult r = test::check_model_gradients(model, batch.input());
//   REQUIRE(r.max_rel_error <= 1e-6);   // r.str() names the worst element; head gates are input
//                                       // 1000+i, FFN gates 2000+i
#pragma once

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "headlab/nn/model.h"
#include "support/gradcheck.h"

namespace headlab::test {

inline GradCheckResult check_model_gradients(Model<double>& model, const ModelInput& input,
                                             int elements_per_tensor = 6) {
  Arena arena;
  Tape<double> tape(arena);
  model.params().zero_grad();
  model.gates().zero_grad();
  model.ffn_gates().zero_grad();
  tape.backward(model.forward(tape, input, {.gate_grads = true, .ffn_gate_grads = true}).loss);
  tape.reset();
  auto loss = [&] {
    Tape<double> t(arena);
    NoGradGuard<double> no_grad(t);
    const double value = model.forward(t, input, {}).loss.value()(0);
    t.reset();
    return value;
  };
  GradCheckResult result;
  GradCheckOptions options;
  std::mt19937_64 rng(3);
  for (int i = 0; i < model.params().size(); ++i) {
    // A few elements of every parameter tensor, chosen at random.
    std::vector<int64_t> indices;
    const int64_t n = model.params().spec(i).shape.numel();
    for (int j = 0; j < elements_per_tensor && n > 0; ++j)  // n = 0: a layer removed whole
      indices.push_back(model.params().offset(i) + static_cast<int64_t>(rng() % n));
    compare_with_central_differences(loss, model.params().values(), model.params().grads(), indices, i, options,
                                     result);
  }
  for (int i = 0; i < model.gates().size(); ++i) {
    std::vector<int64_t> indices(model.gates().value(i).numel());
    std::iota(indices.begin(), indices.end(), model.gates().offset(i));
    compare_with_central_differences(loss, model.gates().values(), model.gates().grads(), indices, 1000 + i, options,
                                     result);
  }
  for (int i = 0; i < model.ffn_gates().size(); ++i) {
    std::vector<int64_t> indices;
    const int64_t n = model.ffn_gates().value(i).numel();
    for (int j = 0; j < elements_per_tensor && n > 0; ++j)
      indices.push_back(model.ffn_gates().offset(i) + static_cast<int64_t>(rng() % n));
    compare_with_central_differences(loss, model.ffn_gates().values(), model.ffn_gates().grads(), indices, 2000 + i,
                                     options, result);
  }
  return result;
}

}  // namespace headlab::test
