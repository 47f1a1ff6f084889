// L0 gates: sampling, penalty and binarisation around the Hard Concrete op.
#include "headlab/prune/l0_gates.h"

#include <string>
#include <vector>

#include "headlab/common/edit_distance.h"
#include "headlab/common/error.h"
#include "headlab/common/hash.h"
#include "headlab/ops/elementwise.h"
#include "headlab/ops/hard_concrete.h"

namespace headlab {

namespace {

// One table per gate table, named after it: ".../gates" -> ".../log_alpha".
std::vector<ParamSpec> log_alpha_specs(const ModelSpec& spec, GateKind kind) {
  std::vector<ParamSpec> specs = kind == GateKind::heads ? gate_specs(spec) : ffn_gate_specs(spec);
  for (ParamSpec& p : specs) {
    p.name = p.name.substr(0, p.name.rfind('/') + 1) + "log_alpha";
    p.init = Init::zeros;
    p.kind = ParamKind::bias;  // never decayed (its Adam has no weight decay either)
  }
  return specs;
}

// Plain Adam on log_alpha: decaying it towards 0 would pull every gate towards P(open) = 0.91.
AdamWOptions log_alpha_adam() {
  AdamWOptions o;
  o.weight_decay = 0;
  return o;
}

constexpr L0Penalty kPenalties[] = {L0Penalty::layer_mean, L0Penalty::mean, L0Penalty::sum};

}  // namespace

const char* l0_penalty_name(L0Penalty penalty) {
  switch (penalty) {
    case L0Penalty::layer_mean:
      return "layer_mean";
    case L0Penalty::mean:
      return "mean";
    case L0Penalty::sum:
      return "sum";
  }
  return "unknown";
}

L0Penalty parse_l0_penalty(const std::string& name) {
  std::vector<std::string> choices;
  for (L0Penalty p : kPenalties) {
    if (name == l0_penalty_name(p)) return p;
    choices.push_back(l0_penalty_name(p));
  }
  throw Error(unknown_choice("l0 penalty", name, choices));
}

template <typename T>
Var<T> l0_penalty(const std::vector<Var<T>>& log_alpha, L0Penalty penalty, double lambda) {
  HEADLAB_CHECK(!log_alpha.empty(), "L0 penalty: no gated site");
  Var<T> open = sum(hard_concrete_open_probability(log_alpha.front()));
  int64_t heads = log_alpha.front().value().numel();
  for (size_t l = 1; l < log_alpha.size(); ++l) {
    open = add(open, sum(hard_concrete_open_probability(log_alpha[l])));
    heads += log_alpha[l].value().numel();
  }
  const double count = penalty == L0Penalty::mean         ? static_cast<double>(heads)
                       : penalty == L0Penalty::layer_mean ? static_cast<double>(log_alpha.size())
                                                          : 1.0;
  return scale(open, lambda / count);
}

template Var<float> l0_penalty<float>(const std::vector<Var<float>>&, L0Penalty, double);
template Var<double> l0_penalty<double>(const std::vector<Var<double>>&, L0Penalty, double);

L0Gates::L0Gates(const Model<float>& model, const L0Options& options)
    : model_(model),
      options_(options),
      log_alpha_(log_alpha_specs(model.spec(), options.kind)),
      optimizer_(log_alpha_, log_alpha_adam()) {
  HEADLAB_CHECK(options.sites.empty() || static_cast<int>(options.sites.size()) == log_alpha_.size(),
                "L0 gates: " << options.sites.size() << " sites chosen, the model has " << log_alpha_.size());
  for (int i = 0; i < log_alpha_.size(); ++i) log_alpha_.value(i).fill(static_cast<float>(options.init));
  log_alpha_.zero_grad();
  leaves_.reserve(static_cast<size_t>(log_alpha_.size()));
  gates_.reserve(static_cast<size_t>(log_alpha_.size()));
}

const Var<float>* L0Gates::sample(Tape<float>& tape, int64_t step, int64_t micro) {
  leaves_.clear();
  gates_.clear();
  const uint64_t step_seed = micro_batch_seed(options_.seed, step, micro);
  const Parameters<float>& fixed = gates_of(model_, options_.kind);
  for (int l = 0; l < log_alpha_.size(); ++l) {
    if (!gated(l)) {
      gates_.push_back(tape.constant(fixed.value(l)));
      continue;
    }
    leaves_.push_back(tape.leaf(log_alpha_.value(l), log_alpha_.grad(l)));
    const Var<float> g = hard_concrete(leaves_.back(), hash_combine(step_seed, static_cast<uint64_t>(l)));
    gates_.push_back(mul(g, tape.constant(fixed.value(l))));
  }
  return gates_.data();
}

Var<float> L0Gates::penalty(Tape<float>& tape) {
  HEADLAB_CHECK(!leaves_.empty() && leaves_.front().tape == &tape, "L0 gates: penalty() before sample() on this tape");
  return l0_penalty(leaves_, options_.penalty, options_.lambda);  // leaves_: the gated sites only
}

void L0Gates::binarise_into(Model<float>& model) const {
  for (int l = 0; l < log_alpha_.size(); ++l) {
    if (!gated(l)) continue;
    const Tensor<float> gates = gates_of(model, options_.kind).value(l), log_alpha = log_alpha_.value(l);
    for (int64_t h = 0; h < gates.numel(); ++h)
      gates(h) *= static_cast<float>(hard_concrete_eval_gate(static_cast<double>(log_alpha(h))));
  }
}

}  // namespace headlab
