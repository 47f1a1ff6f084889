// The keys and values an incremental decoder keeps between steps, so that each new token costs
// one position of work instead of re-running the whole prefix:
//   self-attention  K, V [rows, capacity, Hkv, Dh] per decoder layer, filled up to `length`
//   cross-attention K, V [rows, S, Hkv, Dh] per decoder layer and the source padding [rows, S],
//                   computed once per sentence from the encoder's output (encoder_decoder)
// Rows are the sequences decoded side by side (beam search: sentences x beams, each sentence's
// beams next to each other). All memory is allocated by the constructor; steps write into it.
//   KvCache<float> cache(model.spec(), rows, capacity, max_source_len);
//   model.start_decoding(tape, source_input, cache);   // encoder_decoder: encoder + cross K/V
//   out = model.decode_step(tape, step_input, cache);  // n new tokens per row -> logits [rows*n, V]
//   cache.reorder(parents);                            // beam search: row i continues row parents[i]
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/nn/model.h"
#include "headlab/tensor/arena.h"

namespace headlab {

template <typename T>
class KvCache {
 public:
  // capacity: the longest target (<= max_seq_len); max_source_len: the longest source (0 for a
  // decoder-only model).
  KvCache(const ModelSpec& spec, int64_t rows, int64_t capacity, int64_t max_source_len = 0);

  int64_t rows() const { return rows_; }
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }  // target tokens cached so far
  int64_t source_len() const { return source_len_; }
  bool has_source() const { return source_len_ > 0; }

  // Forgets every cached token (and the source): the cache is ready for new sentences.
  void clear();
  // Row i takes what row parents[i] held (parents.size() == rows()); the rows of one source keep
  // their cross-attention K/V, so parents[i] must share row i's source (beam search does).
  void reorder(const std::vector<int32_t>& parents);

  // Used by Model::start_decoding and decode_step.
  Tensor<T> self_keys(int64_t layer) const { return self_k_[layer]; }  // [rows, capacity, Hkv, Dh]
  Tensor<T> self_values(int64_t layer) const { return self_v_[layer]; }
  // [rows, source_len, Hkv, Dh]: the filled part of the cross K/V buffers.
  Tensor<T> cross_keys(int64_t layer) const { return cross_k_[layer].narrow(1, 0, source_len_); }
  Tensor<T> cross_values(int64_t layer) const { return cross_v_[layer].narrow(1, 0, source_len_); }
  const uint8_t* source_padding() const { return source_padding_.data(); }  // [rows, source_len]
  uint8_t* source_padding_for(int64_t source_len);                          // sets source_len, for start_decoding
  void advance(int64_t n) { length_ += n; }

 private:
  int64_t rows_, capacity_, max_source_len_;
  int64_t length_ = 0, source_len_ = 0;
  Buffer storage_;
  std::vector<Tensor<T>> self_k_, self_v_, cross_k_, cross_v_;
  std::vector<uint8_t> source_padding_;  // [rows, source_len], packed for the current source_len
  Buffer scratch_;                       // reorder's copy of one tensor
};

extern template class KvCache<float>;
extern template class KvCache<double>;

}  // namespace headlab
