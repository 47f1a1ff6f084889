#include "support/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "headlab/ops/elementwise.h"

namespace headlab::test {

std::string GradCheckResult::str() const {
  std::ostringstream out;
  out << "max relative error " << max_rel_error << " at input " << worst_input << " index "
      << worst_index << " (analytic " << analytic << ", numeric " << numeric << "), " << checked
      << " elements checked";
  return out.str();
}

namespace {

// L = sum(w * y) evaluated without recording a backward.
double loss_value(const GraphFn& graph, const std::vector<Tensor<double>>& inputs,
                  const std::vector<double>& weights) {
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

GradCheckResult gradcheck(const GraphFn& graph, const std::vector<Tensor<double>>& inputs,
                          const GradCheckOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);

  // Analytic gradients of L = sum(w * y).
  Arena arena;
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
    for (int64_t index : indices) {
      double& element = x.data()[index];
      const double original = element;
      element = original + options.step;
      const double plus = loss_value(graph, inputs, weights);
      element = original - options.step;
      const double minus = loss_value(graph, inputs, weights);
      element = original;
      const double numeric = (plus - minus) / (2 * options.step);
      const double analytic = grad.empty() ? 0.0 : grad.data()[index];
      const double denom = std::max({std::abs(analytic), std::abs(numeric), options.floor});
      const double rel = std::abs(analytic - numeric) / denom;
      ++result.checked;
      if (rel >= result.max_rel_error) {
        result.max_rel_error = rel;
        result.worst_input = static_cast<int>(i);
        result.worst_index = index;
        result.analytic = analytic;
        result.numeric = numeric;
      }
    }
  }
  return result;
}

}  // namespace headlab::test
