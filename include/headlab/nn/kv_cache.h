// The keys and values an incremental decoder keeps between steps, so that each new token costs
// one position of work instead of re-running the whole prefix:
//   self-attention  K, V [rows, capacity, Hkv, Dh] per decoder layer, filled up to `length`
//   cross-attention K, V [sources, S, Hkv, Dh] per decoder layer and the source padding
//                   [sources, S], computed once per sentence from the encoder's output
//                   (encoder_decoder); rows / sources consecutive rows decode each source
// Rows are the sequences decoded side by side (beam search: sentences x beams, each sentence's
// beams next to each other). The beams of a sentence share one copy of its cross K/V: a step
// reads it once per sentence, not once per beam. All memory is allocated by the constructor;
// steps write into it.
//   KvCache<float> cache(model.spec(), rows, capacity, max_source_len);
//   model.start_decoding(tape, source_input, cache);   // encoder_decoder: encoder + cross K/V
//   out = model.decode_step(tape, step_input, cache);  // n new tokens per row -> logits [rows*n, V]
//   cache.reorder(parents);                            // beam search: row i continues row parents[i]
//   again.copy_sources(cache);                         // the same sources decoded again, no encoder
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
  // Forgets every cached token and takes `from`'s sources: their cross-attention K/V and padding
  // (from.sources() must divide rows()). Decodes the same sources again without the encoder, as
  // when only decoder or cross-attention gates changed (a gate scales a head's output, not K/V).
  void copy_sources(const KvCache& from);
  // Row i takes what row parents[i] held (parents.size() == rows()); the rows of one source keep
  // their cross-attention K/V, so parents[i] must share row i's source (beam search does).
  void reorder(const std::vector<int32_t>& parents);

  // Used by Model::start_decoding and decode_step.
  Tensor<T> self_keys(int64_t layer) const { return self_k_[layer]; }  // [rows, capacity, Hkv, Dh]
  Tensor<T> self_values(int64_t layer) const { return self_v_[layer]; }
  // [sources, source_len, Hkv, Dh]: the filled part of the cross K/V buffers.
  Tensor<T> cross_keys(int64_t layer) const { return cross(cross_k_[layer]); }
  Tensor<T> cross_values(int64_t layer) const { return cross(cross_v_[layer]); }
  const uint8_t* source_padding() const { return source_padding_.data(); }  // [sources, source_len]
  int64_t sources() const { return sources_; }
  // For start_decoding: `sources` sources (dividing rows()) of source_len tokens; returns their
  // padding [sources, source_len] to fill.
  uint8_t* start_sources(int64_t sources, int64_t source_len);
  void advance(int64_t n) { length_ += n; }

 private:
  int64_t rows_, capacity_, max_source_len_;
  Tensor<T> cross(const Tensor<T>& buffer) const {
    return Tensor<T>(buffer.data(), {sources_, source_len_, buffer.size(2), buffer.size(3)});
  }

  int64_t length_ = 0, source_len_ = 0, sources_ = 0;
  Buffer storage_;
  std::vector<Tensor<T>> self_k_, self_v_, cross_k_, cross_v_;
  std::vector<uint8_t> source_padding_;  // [sources, source_len], packed for the current sources
  Buffer scratch_;                       // reorder's copy of one tensor
};

extern template class KvCache<float>;
extern template class KvCache<double>;

}  // namespace headlab
