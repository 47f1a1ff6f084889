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
  const auto n = static_cast<int64_t>(model.spec().attention_sites().size());
  HEADLAB_CHECK(static_cast<int64_t>(model.site_inputs().size()) == n &&
                    static_cast<int64_t>(model.attention_outputs().size()) == n && first >= 0 && first < n &&
                    (first == 0 || n_sites() == n),
                "SavedForward: save from site " << first << " needs the model's last forward and, above site 0, an "
                                                << "earlier save of every site");
  for (int64_t s = first; s < n; ++s)
    HEADLAB_CHECK(model.attention_outputs()[static_cast<size_t>(s)].defined(),
                  "SavedForward: attention site " << s << " was removed whole; it has no output to save");
  site_inputs_.resize(static_cast<size_t>(n));
  attentions_.resize(static_cast<size_t>(n));
  for (int64_t s = first; s < n; ++s) {
    copy_into(site_inputs_[static_cast<size_t>(s)], model.site_inputs()[static_cast<size_t>(s)].value());
    copy_into(attentions_[static_cast<size_t>(s)], model.attention_outputs()[static_cast<size_t>(s)].value());
  }
  if (model.memory().defined()) {
    copy_into(memory_, model.memory().value());
    copy_into(encoder_final_, model.encoder_final_residual().value());
  }
}

template <typename T>
Tensor<T> SavedForward<T>::attention_without(Arena& arena, int64_t site, const std::vector<uint8_t>& off) const {
  const Tensor<T>& a = attention(site);  // [B,T,H,Dh]
  HEADLAB_CHECK(static_cast<int64_t>(off.size()) == a.size(2),
                "SavedForward: " << off.size() << " head flags for site " << site << " of " << a.size(2) << " heads");
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
