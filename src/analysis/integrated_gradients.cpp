#include "headlab/analysis/integrated_gradients.h"

#include <cmath>
#include <memory>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/data/model_input.h"

namespace headlab {

namespace {

// The gates at a point of the path; the model's own come back when it goes out of scope, also
// when a forward throws (a ScopedSiteGates per site).
template <typename T>
class PathGates {
 public:
  explicit PathGates(Parameters<T>& gates) : gates_(gates) {
    for (int i = 0; i < gates.size(); ++i) {
      const Tensor<T> g = gates.value(i);
      own_.emplace_back(g.data(), g.data() + g.numel());
      restore_.push_back(std::make_unique<ScopedSiteGates<T>>(gates, static_cast<size_t>(i), own_.back()));
    }
  }

  // xi = b + a (g - b), site by site; a = 1 is the model's own gates exactly. A gate at 0 (a
  // pruned head or unit) is not on the path: it stays 0 whatever the baseline.
  void at(double a, double baseline) {
    for (int i = 0; i < gates_.size(); ++i) {
      Tensor<T> g = gates_.value(i);
      for (int64_t h = 0; h < g.numel(); ++h) {
        const T own = own_[static_cast<size_t>(i)][static_cast<size_t>(h)];
        g.data()[h] = a == 1 || own == 0 ? own : static_cast<T>(baseline + a * (static_cast<double>(own) - baseline));
      }
    }
  }
  double own(int site, int64_t head) const {
    return static_cast<double>(own_[static_cast<size_t>(site)][static_cast<size_t>(head)]);
  }

 private:
  Parameters<T>& gates_;
  std::vector<std::vector<T>> own_;
  std::vector<std::unique_ptr<ScopedSiteGates<T>>> restore_;
};

}  // namespace

template <typename T>
IntegratedGradients integrated_gradients(Model<T>& model, const Dataset& dataset, Split split, int64_t batches,
                                         int64_t batch_size, int64_t steps, double baseline, GateKind kind) {
  HEADLAB_CHECK(steps >= 1, "integrated gradients: " << steps << " steps; the path needs at least 1");
  HEADLAB_CHECK(baseline >= 0 && baseline <= 1, "integrated gradients: baseline " << baseline << " is outside [0, 1]");
  const ModelSpec& spec = model.spec();
  batches = dataset.batches_to_score(split, batches, batch_size, "integrated gradients");
  Parameters<T>& table = gates_of(model, kind);
  const int n_sites = table.size();
  IntegratedGradients ig;
  ig.steps = steps;
  ig.batches = batches;
  for (int i = 0; i < n_sites; ++i) ig.attribution.resize(ig.attribution.size() + table.value(i).numel(), 0.0);

  Arena arena;
  Tape<T> tape(arena);
  Batch batch = dataset.make_batch(batch_size);
  PathGates<T> gates(table);
  // The split's mean loss at the gates as they are set; with `grad`, adds d(that loss)/dxi times
  // `weight` to `into`, head by head. The batch's loss is a mean over its own scored targets, so
  // each batch's gradient counts by its share of the split's targets.
  auto mean_loss = [&](bool grad, double weight, std::vector<double>* into) {
    double loss_sum = 0;
    int64_t targets = 0;
    std::vector<double> grad_sum(grad ? ig.attribution.size() : 0, 0.0);
    tape.set_grad_enabled(grad);
    for (int64_t i = 0; i < batches; ++i) {
      dataset.fill_batch(split, i, batch);
      int64_t n = 0;
      for (const int32_t t : scored_targets(spec, batch)) n += t >= 0;
      if (n == 0) continue;
      if (grad) table.zero_grad();
      const ModelOutput<T> out =
          model.forward(tape, model_input(spec, batch), grad ? recording_gate_grads(kind) : ForwardOptions{});
      loss_sum += static_cast<double>(out.loss.value().data()[0]) * static_cast<double>(n);
      targets += n;
      if (grad) {
        tape.backward(out.loss);
        size_t k = 0;
        for (int s = 0; s < n_sites; ++s) {
          const Tensor<T> g = table.grad(s);
          for (int64_t h = 0; h < g.numel(); ++h)
            grad_sum[k++] += static_cast<double>(g.data()[h]) * static_cast<double>(n);
        }
      }
      tape.reset();
    }
    HEADLAB_CHECK(targets > 0, "integrated gradients: " << batches << " batches of the " << split_name(split)
                                                        << " split hold no scored target");
    ig.targets = targets;
    for (size_t k = 0; k < grad_sum.size(); ++k) (*into)[k] += weight * grad_sum[k] / static_cast<double>(targets);
    return loss_sum / static_cast<double>(targets);
  };

  std::vector<double> path_mean(ig.attribution.size(), 0.0);  // mean over the points of dL/dxi
  for (int64_t k = 0; k < steps; ++k) {
    gates.at((static_cast<double>(k) + 0.5) / static_cast<double>(steps), baseline);
    mean_loss(true, 1 / static_cast<double>(steps), &path_mean);
  }
  gates.at(0, baseline);
  ig.baseline_loss = mean_loss(false, 0, nullptr);
  gates.at(1, baseline);
  ig.loss = mean_loss(false, 0, nullptr);
  model.params().zero_grad();
  table.zero_grad();

  double sum = 0;
  size_t k = 0;
  for (int s = 0; s < n_sites; ++s)
    for (int64_t h = 0; h < table.value(s).numel(); ++h, ++k) {
      const double own = gates.own(s, h);
      ig.attribution[k] = own == 0 ? 0 : (own - baseline) * path_mean[k];
      sum += ig.attribution[k];
    }
  ig.completeness_error = std::abs(sum - (ig.loss - ig.baseline_loss));
  return ig;
}

template IntegratedGradients integrated_gradients<float>(Model<float>&, const Dataset&, Split, int64_t, int64_t,
                                                         int64_t, double, GateKind);
template IntegratedGradients integrated_gradients<double>(Model<double>&, const Dataset&, Split, int64_t, int64_t,
                                                          int64_t, double, GateKind);

}  // namespace headlab
