// The incremental decoder's key/value cache. See include/headlab/nn/kv_cache.h.
#include "headlab/nn/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "headlab/common/error.h"

namespace headlab {

template <typename T>
KvCache<T>::KvCache(const ModelSpec& spec, int64_t rows, int64_t capacity, int64_t max_source_len)
    : rows_(rows), capacity_(capacity), max_source_len_(max_source_len) {
  HEADLAB_CHECK(rows >= 1 && capacity >= 1 && capacity <= spec.max_seq_len,
                "kv cache: rows=" << rows << " and capacity=" << capacity
                                  << " must be in [1, max_seq_len=" << spec.max_seq_len << "]");
  const bool source = model_kind_info(spec.kind).source;
  HEADLAB_CHECK(!source || (max_source_len >= 1 && max_source_len <= spec.max_seq_len),
                "kv cache: an encoder_decoder needs max_source_len in [1, max_seq_len=" << spec.max_seq_len << "], got "
                                                                                        << max_source_len);
  // One slab for every tensor: self K, V per layer, then cross K, V per layer.
  int64_t elements = 0, largest = 0;
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const AttentionShape a = spec.attention_shape({AttentionKind::dec, l});
    elements += 2 * rows * capacity * a.kv_heads * a.d_head;
    largest = std::max(largest, rows * capacity * a.kv_heads * a.d_head);
    if (source) {
      const AttentionShape c = spec.attention_shape({AttentionKind::cross, l});
      elements += 2 * rows * max_source_len * c.kv_heads * c.d_head;
      largest = std::max(largest, rows * max_source_len * c.kv_heads * c.d_head);
    }
  }
  storage_ = Buffer(static_cast<size_t>(elements) * sizeof(T));
  scratch_ = Buffer(static_cast<size_t>(largest) * sizeof(T));
  T* next = static_cast<T*>(storage_.data());
  auto take = [&](int64_t length, AttentionShape a) {
    Tensor<T> t(next, {rows, length, a.kv_heads, a.d_head});
    next += t.numel();
    return t;
  };
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const AttentionShape a = spec.attention_shape({AttentionKind::dec, l});
    self_k_.push_back(take(capacity, a));
    self_v_.push_back(take(capacity, a));
    if (source) {
      const AttentionShape c = spec.attention_shape({AttentionKind::cross, l});
      cross_k_.push_back(take(max_source_len, c));
      cross_v_.push_back(take(max_source_len, c));
    }
  }
  source_padding_.reserve(static_cast<size_t>(rows * max_source_len));
}

template <typename T>
void KvCache<T>::clear() {
  length_ = 0;
  source_len_ = 0;
  sources_ = 0;
}

template <typename T>
void KvCache<T>::copy_sources(const KvCache& from) {
  HEADLAB_CHECK(from.has_source() && from.cross_k_.size() == cross_k_.size(),
                "kv cache: copy_sources needs a cache of the same encoder_decoder after start_decoding");
  clear();
  const uint8_t* padding = from.source_padding();
  std::copy(padding, padding + from.sources_ * from.source_len_, start_sources(from.sources_, from.source_len_));
  for (size_t l = 0; l < cross_k_.size(); ++l) {
    cross_keys(static_cast<int64_t>(l)).copy_from(from.cross_keys(static_cast<int64_t>(l)));
    cross_values(static_cast<int64_t>(l)).copy_from(from.cross_values(static_cast<int64_t>(l)));
  }
}

template <typename T>
uint8_t* KvCache<T>::start_sources(int64_t sources, int64_t source_len) {
  HEADLAB_CHECK(source_len >= 1 && source_len <= max_source_len_,
                "kv cache: a source of " << source_len << " tokens does not fit max_source_len=" << max_source_len_);
  HEADLAB_CHECK(sources >= 1 && rows_ % sources == 0,
                "kv cache: " << sources << " sources do not divide the cache's " << rows_ << " rows");
  source_len_ = source_len;
  sources_ = sources;
  // The buffers hold rows x max_source_len; sources x source_len packed fits in them.
  source_padding_.resize(static_cast<size_t>(sources * source_len));  // within the reserved capacity
  return source_padding_.data();
}

template <typename T>
void KvCache<T>::reorder(const std::vector<int32_t>& parents) {
  HEADLAB_CHECK(static_cast<int64_t>(parents.size()) == rows_,
                "kv cache: reorder needs one parent per row (" << rows_ << "), got " << parents.size());
  for (int32_t p : parents)
    HEADLAB_CHECK(p >= 0 && p < rows_, "kv cache: parent row " << p << " is outside [0, " << rows_ << ")");
  if (length_ == 0) return;
  // Only rows whose parent is another row move: their new contents go to the scratch first (a
  // parent may itself be overwritten), then into place. Greedy decoding never moves a row.
  for (std::vector<Tensor<T>>* tensors : {&self_k_, &self_v_})
    for (const Tensor<T>& t : *tensors) {
      const Tensor<T> filled = t.narrow(1, 0, length_);
      const int64_t per_row = length_ * t.size(2) * t.size(3);
      const Shape row_shape{length_, t.size(2), t.size(3)};
      T* copy = static_cast<T*>(scratch_.data());
      for (int64_t r = 0; r < rows_; ++r)
        if (parents[r] != r) Tensor<T>(copy + r * per_row, row_shape).copy_from(filled.select(0, parents[r]));
      for (int64_t r = 0; r < rows_; ++r)
        if (parents[r] != r) filled.select(0, r).copy_from(Tensor<T>(copy + r * per_row, row_shape));
    }
}

template class KvCache<float>;
template class KvCache<double>;

}  // namespace headlab
