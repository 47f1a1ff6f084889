#include "headlab/nn/saved_forward.h"

namespace headlab {

template <typename T>
void SavedForward<T>::copy_into(Stored& to, const Tensor<T>& from) {
  if (to.tensor.shape() != from.shape()) {
    to.buffer = Buffer(static_cast<size_t>(from.numel()) * sizeof(T));
    to.tensor = Tensor<T>(static_cast<T*>(to.buffer.data()), from.shape());
  }
  to.tensor.copy_from(from);
}

template <typename T>
void SavedForward<T>::save(const Model<T>& model, int64_t first) {
  const int64_t L = model.spec().n_layers;
  HEADLAB_CHECK(static_cast<int64_t>(model.block_inputs().size()) == L && first >= 0 && first < L &&
                    (first == 0 || n_layers() == L),
                "SavedForward: save from layer " << first << " needs the model's last forward and, above layer 0, an "
                                                 << "earlier save of every layer");
  block_inputs_.resize(static_cast<size_t>(L));
  attentions_.resize(static_cast<size_t>(L));
  for (int64_t l = first; l < L; ++l) {
    copy_into(block_inputs_[static_cast<size_t>(l)], model.block_inputs()[static_cast<size_t>(l)].value());
    copy_into(attentions_[static_cast<size_t>(l)], model.attention_outputs()[static_cast<size_t>(l)].value());
  }
}

template <typename T>
Tensor<T> SavedForward<T>::attention_without(Arena& arena, int64_t layer, const std::vector<uint8_t>& off) const {
  const Tensor<T>& a = attention(layer);  // [B,T,H,Dh]
  HEADLAB_CHECK(static_cast<int64_t>(off.size()) == a.size(2),
                "SavedForward: " << off.size() << " head flags for layer " << layer << " of " << a.size(2) << " heads");
  Tensor<T> masked = arena.empty<T>(a.shape());
  masked.copy_from(a);
  for (int64_t h = 0; h < a.size(2); ++h)
    if (off[static_cast<size_t>(h)]) masked.select(2, h).fill(T(0));
  return masked;
}

template <typename T>
int64_t SavedForward<T>::bytes(const ModelSpec& spec, int64_t batch_size, int64_t seq_len) {
  int64_t values = 0;
  for (int64_t l = 0; l < spec.n_layers; ++l)
    values += spec.d_model + spec.heads_at_site({AttentionKind::dec, l}) * spec.d_head;
  return values * batch_size * seq_len * static_cast<int64_t>(sizeof(T));
}

template class SavedForward<float>;
template class SavedForward<double>;

}  // namespace headlab
