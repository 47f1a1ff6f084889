// A forward's residual stream entering each attention site and each site's attention output (and
// an encoder_decoder's encoder output), copied out of the tape, so that later forwards on the
// same input restart from a site instead of the embeddings (Model::forward_from). Masking heads
// of site s leaves every site before s as it was, and every other head's output at s too (a
// head's output is its own gate times its own A V), so such a forward reruns only s's output
// projection and what follows:
//   head ablation (analysis/heads.cpp) starts every masked forward of a batch from the unmasked one;
//   a pruning curve (train/evaluate.h, PruningEvaluation) starts each round's from the last round's;
//   patching (analysis/patching.h) restarts the corrupted run at the patched site.
// In a decoder or an encoder classifier site s is layer s.
//   SavedForward<float> saved;  model.forward(tape, in, {});  saved.save(model);  tape.reset();
//   Tensor<float> a = saved.attention_without(tape.arena(), s, off);   // off[h]: head h zeroed
//   model.forward_from(tape, in, s, tape.constant(saved.site_input(s)), tape.constant(a));
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/nn/model.h"

namespace headlab {

template <typename T>
class SavedForward {
 public:
  // Copies sites first .. of the model's last forward (or forward_from(first)), and the memory;
  // sites before `first` keep what an earlier save() stored. Storage is allocated on the first
  // save and reused while the shapes stay the same.
  void save(const Model<T>& model, int64_t first = 0);

  int64_t n_sites() const { return static_cast<int64_t>(site_inputs_.size()); }
  const Tensor<T>& site_input(int64_t site) const { return site_inputs_[static_cast<size_t>(site)].tensor; }
  const Tensor<T>& attention(int64_t site) const { return attentions_[static_cast<size_t>(site)].tensor; }
  // An encoder_decoder's encoder output [B,S,C] and the stream before LN_enc; empty otherwise.
  const Tensor<T>& memory() const { return memory_.tensor; }
  const Tensor<T>& encoder_final_residual() const { return encoder_final_.tensor; }
  // A copy (in `arena`) of site's attention output [B,T,H,Dh] with head h's rows set to 0 where
  // off[h]: what the attention op writes for a head whose gate is 0.
  Tensor<T> attention_without(Arena& arena, int64_t site, const std::vector<uint8_t>& off) const;
  // Bytes a save of a one-stack model's forward on [B,T] holds (for memory budgets).
  static int64_t bytes(const ModelSpec& spec, int64_t batch_size, int64_t seq_len);

 private:
  struct Stored {
    Buffer buffer;
    Tensor<T> tensor;
  };
  static void copy_into(Stored& to, const Tensor<T>& from);
  std::vector<Stored> site_inputs_, attentions_;
  Stored memory_, encoder_final_;
};

extern template class SavedForward<float>;
extern template class SavedForward<double>;

}  // namespace headlab
