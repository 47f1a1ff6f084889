#include "headlab/train/evaluate.h"

#include <algorithm>

#include "headlab/train/step.h"

namespace headlab {

namespace {

// Sums of losses over targets (not means over batches: the last batch may be partly empty).
struct EvalSums {
  double loss_sum = 0;
  int64_t n_valid = 0, n_correct = 0;

  void add(const CrossEntropyStats& s) {
    loss_sum += s.loss_sum;
    n_valid += s.n_valid;
    n_correct += s.n_correct;
  }
  EvalStats stats(const Dataset& dataset, Split split) const {
    EvalStats e;
    e.n_targets = n_valid;
    e.loss = n_valid ? loss_sum / static_cast<double>(n_valid) : 0.0;
    if (dataset.has_accuracy()) e.accuracy = n_valid ? static_cast<double>(n_correct) / n_valid : 0.0;
    if (dataset.bytes_per_token(split) > 0) e.bits_per_byte = bits_per_byte(e.loss, dataset.bytes_per_token(split));
    return e;
  }
};

}  // namespace

EvalStats evaluate(Model<float>& model, const Dataset& dataset, Split split, int64_t n_batches, Batch& batch,
                   Tape<float>& tape) {
  n_batches = dataset.batches_to_score(split, n_batches, batch.batch_size, "evaluate");
  EvalSums sums;
  NoGradGuard<float> no_grad(tape);
  for (int64_t i = 0; i < n_batches; ++i) {
    dataset.fill_batch(split, i, batch);
    const ModelInput input = model_input(model.spec(), batch);
    sums.add(cross_entropy_stats(model.forward(tape, input, {}).logits.value(), input.targets, -1));
    tape.reset();
  }
  return sums.stats(dataset, split);
}

PruningEvaluation::PruningEvaluation(const Dataset& dataset, Split split, int64_t n_batches, int64_t batch_size,
                                     int64_t max_saved_bytes)
    : dataset_(dataset),
      split_(split),
      n_batches_(dataset.batches_to_score(split, n_batches, batch_size, "evaluate")),
      max_saved_bytes_(max_saved_bytes),
      batch_(dataset.make_batch(batch_size)) {}

void PruningEvaluation::forget() {
  for (SavedBatch& s : saved_) s.valid = false;
}

namespace {

// The lowest table of `gates` (a layer's heads, or a block's FFN units) whose gates changed since
// `was`, `off` flagging the entries switched off there; the table count when nothing changed; -1
// when a gate changed other than to 0, or the shapes differ (another model).
int64_t first_changed_table(const Parameters<float>& gates, const std::vector<std::vector<float>>& was,
                            std::vector<uint8_t>& off) {
  if (static_cast<int64_t>(was.size()) != gates.size()) return -1;
  for (int l = 0; l < gates.size(); ++l) {
    const Tensor<float> g = gates.value(l);
    const std::vector<float>& before = was[static_cast<size_t>(l)];
    if (static_cast<int64_t>(before.size()) != g.numel()) return -1;
    off.assign(static_cast<size_t>(g.numel()), 0);
    bool changed = false;
    for (int64_t k = 0; k < g.numel(); ++k) {
      if (g(k) == before[static_cast<size_t>(k)]) continue;
      if (g(k) != 0.0f) return -1;
      off[static_cast<size_t>(k)] = 1;
      changed = true;
    }
    if (changed) return l;
  }
  return gates.size();
}

void copy_gates(const Parameters<float>& gates, std::vector<std::vector<float>>& into) {
  into.resize(static_cast<size_t>(gates.size()));
  for (int l = 0; l < gates.size(); ++l) {
    const Tensor<float> g = gates.value(l);
    into[static_cast<size_t>(l)].assign(g.data(), g.data() + g.numel());
  }
}

}  // namespace

// Where a batch's forward can start, from the gates its saved forward ran with: the lowest layer
// whose head gates changed, `off` flagging the heads switched off there since, or the lowest
// layer whose FFN gates changed, its attention output as saved (its MLP comes after it; the
// layers above run anew, so their gates may have changed any way). L = nothing changed; -1 = run
// it whole (a gate changed other than to 0).
int64_t PruningEvaluation::first_changed_layer(const Model<float>& model, const SavedBatch& saved,
                                               std::vector<uint8_t>& off) {
  std::vector<uint8_t> unit_off;
  const int64_t heads = first_changed_table(model.gates(), saved.gates, off);
  const int64_t units = first_changed_table(model.ffn_gates(), saved.ffn_gates, unit_off);
  if (heads < 0 || units < 0) return -1;
  if (units < heads) off.assign(static_cast<size_t>(model.gates().value(static_cast<int>(units)).numel()), 0);
  return std::min(heads, units);
}

EvalStats PruningEvaluation::evaluate(Model<float>& model, Tape<float>& tape) {
  // The saved forwards' budget (SavedForward::bytes) counts one stack's sizes, so an
  // encoder_decoder, whose batches also vary in source length, runs whole: not done yet.
  if (model_kind_info(model.spec().kind).source)
    return headlab::evaluate(model, dataset_, split_, n_batches_, batch_, tape);
  const int64_t L = model.spec().n_layers;
  if (saved_.empty()) {
    const int64_t per_batch = SavedForward<float>::bytes(model.spec(), batch_.batch_size, batch_.seq_len);
    saved_.resize(static_cast<size_t>(std::min(n_batches_, max_saved_bytes_ / std::max<int64_t>(per_batch, 1))));
  }
  EvalSums sums;
  NoGradGuard<float> no_grad(tape);
  std::vector<uint8_t> off;
  for (int64_t i = 0; i < n_batches_; ++i) {
    dataset_.fill_batch(split_, i, batch_);
    const ModelInput input = model_input(model.spec(), batch_);
    if (i >= static_cast<int64_t>(saved_.size())) {  // past the memory budget
      sums.add(cross_entropy_stats(model.forward(tape, input, {}).logits.value(), input.targets, -1));
      tape.reset();
      continue;
    }
    SavedBatch& saved = saved_[static_cast<size_t>(i)];
    const int64_t first = saved.valid ? first_changed_layer(model, saved, off) : -1;
    if (first < 0) {
      saved.stats = cross_entropy_stats(model.forward(tape, input, {}).logits.value(), input.targets, -1);
      saved.forward.save(model);
    } else if (first < L) {
      const Tensor<float> a = saved.forward.attention_without(tape.arena(), first, off);
      const ModelOutput<float> out =
          model.forward_from(tape, input, first, tape.constant(saved.forward.site_input(first)), tape.constant(a));
      saved.stats = cross_entropy_stats(out.logits.value(), input.targets, -1);
      saved.forward.save(model, first);
    }  // else nothing changed: the saved stats are this forward's
    tape.reset();
    sums.add(saved.stats);
    copy_gates(model.gates(), saved.gates);
    copy_gates(model.ffn_gates(), saved.ffn_gates);
    saved.valid = true;
  }
  return sums.stats(dataset_, split_);
}

}  // namespace headlab
