// A forward's residual stream entering each block and each block's attention output, copied out
// of the tape, so that later forwards on the same input restart from a block instead of the
// embeddings (Model::forward_from). Masking heads of layer l leaves every layer below l as it
// was, and every other head's output in l too (a head's output is its own gate times its own
// A V), so such a forward reruns only l's output projection and the layers above:
//   head ablation (analysis/heads.cpp) starts every masked forward of a batch from the unmasked one;
//   a pruning curve (train/evaluate.h, PruningEvaluation) starts each round's from the last round's.
//   SavedForward<float> saved;  model.forward(tape, in, {});  saved.save(model);  tape.reset();
//   Tensor<float> a = saved.attention_without(tape.arena(), l, off);   // off[h]: head h zeroed
//   model.forward_from(tape, in, l, tape.constant(saved.block_input(l)), tape.constant(a));
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

template <typename T>
class SavedForward {
 public:
  // Copies layers first .. n_layers-1 of the model's last forward (or forward_from(first)); layers
  // below `first` keep what an earlier save() stored. Storage is allocated on the first save
  // and reused while the shapes stay the same.
  void save(const Model<T>& model, int64_t first = 0);

  int64_t n_layers() const { return static_cast<int64_t>(block_inputs_.size()); }
  const Tensor<T>& block_input(int64_t layer) const { return block_inputs_[static_cast<size_t>(layer)].tensor; }
  const Tensor<T>& attention(int64_t layer) const { return attentions_[static_cast<size_t>(layer)].tensor; }
  // A copy (in `arena`) of layer's attention output [B,T,H,Dh] with head h's rows set to 0 where
  // off[h]: what the attention op writes for a head whose gate is 0.
  Tensor<T> attention_without(Arena& arena, int64_t layer, const std::vector<uint8_t>& off) const;
  // Bytes a save of a forward on [B,T] holds (for memory budgets).
  static int64_t bytes(const ModelSpec& spec, int64_t batch_size, int64_t seq_len);

 private:
  struct Stored {
    Buffer buffer;
    Tensor<T> tensor;
  };
  static void copy_into(Stored& to, const Tensor<T>& from);
  std::vector<Stored> block_inputs_, attentions_;
};

extern template class SavedForward<float>;
extern template class SavedForward<double>;

}  // namespace headlab
