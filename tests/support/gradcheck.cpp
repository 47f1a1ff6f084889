#include "support/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "headlab/ops/elementwise.h"

namespace headlab::test {

std::string GradCheckResult::str() const {
  std::ostringstream out;
  out << "max relative error " << max_rel_error << " at input " << worst_input << " index " << worst_index
      << " (analytic " << analytic << ", numeric " << numeric << "), " << checked << " elements checked";
  return out.str();
}

namespace {

// L = sum(w * y) evaluated without recording a backward.
double loss_value(const GraphFn& graph, const std::vector<Tensor<double>>& inputs, const std::vector<double>& weights) {
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  std::vector<Var<double>> vars;
  for (const auto& x : inputs) vars.push_back(tape.constant(x));
  const Tensor<double> y = graph(tape, vars).value();
  double total = 0;
  for (int64_t i = 0; i < y.numel(); ++i) total += weights[i] * y.data()[i];
  return total;
}

}  // namespace

void compare_with_central_differences(const std::function<double()>& loss, double* values, const double* analytic,
                                      const std::vector<int64_t>& indices, int input, const GradCheckOptions& options,
                                      GradCheckResult& result) {
  for (int64_t index : indices) {
    const double original = values[index];
    values[index] = original + options.step;
    const double plus = loss();
    values[index] = original - options.step;
    const double minus = loss();
    values[index] = original;
    const double numeric = (plus - minus) / (2 * options.step);
    const double a = analytic == nullptr ? 0.0 : analytic[index];
    // A NaN or infinite gradient on either side is the worst possible error: as a ratio it would
    // be NaN, which loses every comparison and would leave the check passing.
    const bool finite = std::isfinite(a) && std::isfinite(numeric);
    const double rel = finite ? std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), options.floor})
                              : std::numeric_limits<double>::infinity();
    ++result.checked;
    if (rel >= result.max_rel_error) {
      result.max_rel_error = rel;
      result.worst_input = input;
      result.worst_index = index;
      result.analytic = a;
      result.numeric = numeric;
    }
  }
}

void fill_arena_with_nan(Arena& arena, size_t bytes) {
  const Tensor<double> block = arena.empty<double>({static_cast<int64_t>(bytes / sizeof(double))});
  block.fill(std::numeric_limits<double>::quiet_NaN());
  arena.reset();
}

GradCheckResult gradcheck(const GraphFn& graph, const std::vector<Tensor<double>>& inputs,
                          const GradCheckOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);

  // Analytic gradients of L = sum(w * y).
  Arena arena;
  fill_arena_with_nan(arena, size_t(8) << 20);
  Tape<double> tape(arena);
  std::vector<Var<double>> vars;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool diff = options.differentiable.empty() || options.differentiable[i];
    vars.push_back(diff ? tape.leaf_with_grad(inputs[i]) : tape.constant(inputs[i]));
  }
  Var<double> y = graph(tape, vars);
  std::vector<double> weights(y.value().numel());
  for (double& w : weights) w = unit(rng);
  Tensor<double> w_tensor = arena.empty<double>(y.shape());
  std::copy(weights.begin(), weights.end(), w_tensor.data());
  Var<double> loss = sum(mul(y, tape.constant(w_tensor)));
  tape.backward(loss);

  GradCheckResult result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!vars[i].requires_grad()) continue;
    const Tensor<double>& x = inputs[i];
    const Tensor<double>& grad = vars[i].grad();
    std::vector<int64_t> indices(x.numel());
    std::iota(indices.begin(), indices.end(), 0);
    if (static_cast<int64_t>(indices.size()) > options.max_per_input) {
      std::shuffle(indices.begin(), indices.end(), rng);
      indices.resize(options.max_per_input);
    }
    auto perturbed_loss = [&] { return loss_value(graph, inputs, weights); };
    compare_with_central_differences(perturbed_loss, x.data(), grad.empty() ? nullptr : grad.data(), indices,
                                     static_cast<int>(i), options, result);
  }
  // A check of nothing (no input differentiable) must not read as a pass.
  if (result.checked == 0) result.max_rel_error = std::numeric_limits<double>::infinity();
  return result;
}

}  // namespace headlab::test
