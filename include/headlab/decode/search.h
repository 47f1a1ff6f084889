// Translation by greedy or beam search over an encoder_decoder, with the KV cache (nn/kv_cache.h):
// the encoder runs once per sentence, and each target token costs one cached decoder step.
// Beam search follows fairseq's: each step extends every live hypothesis by every token, keeps
// the 2 x beam best candidates per sentence, moves those of the top beam ending in </s> to the
// finished list (scored sum log p / length^length_penalty, the length counting </s>) and
// continues the beam best others; a sentence stops once it has beam finished hypotheses, or at its length limit,
// where its live hypotheses finish as they are. beam = 1 is greedy decoding. Ties go to the
// lower (beam, token) index, so results are deterministic.
//   std::vector<std::vector<int32_t>> out = translate(model, sources, {.bos = 2, .eos = 3, .pad = 0}, {.beam = 5});
//   EncodedSources encoded;  translate(model, sources, ids, options, &encoded);  // runs the encoder, keeps its K/V
//   gate a decoder or cross head;  translate(model, sources, ids, options, &encoded);  // no encoder
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/nn/kv_cache.h"
#include "headlab/nn/model.h"

namespace headlab {

struct SpecialIds {
  int32_t bos = -1, eos = -1, pad = -1;
};

struct SearchOptions {
  int64_t beam = 1;             // 1 = greedy
  double length_penalty = 1.0;  // fairseq's lenpen: 0 = raw sum of log p, 1 = mean per token
  // At most max_len_a * source tokens + max_len_b target tokens, and what max_seq_len allows.
  double max_len_a = 1.5;
  int64_t max_len_b = 10;
  // fairseq's --min-len: </s> is not a candidate before this many target tokens (the length
  // limit still ends the sentence). Benchmarks set it to decode a fixed number of tokens.
  int64_t min_len = 0;
  int64_t batch_sentences = 32;  // sentences decoded side by side (beam rows each)
  // false: no KV cache; every step runs the whole model on the source and <s> + the prefix
  // (the baseline the cache is measured against; same tokens, much slower).
  bool use_cache = true;
};

class EncodedSources;

// The target tokens (without <s> and </s>) of each source row. A source row is the token ids the
// model was trained to read (the dataset's source rows: the sentence's ids and </s>), unpadded.
// With `encoded` (below): an empty one is filled with the encoder's work on these sources; a
// filled one replaces the encoder, giving the tokens decoding from scratch gives.
// Throws headlab::Error on a beam size below 1, an empty source, or a model without a source.
std::vector<std::vector<int32_t>> translate(Model<float>& model, const std::vector<std::vector<int32_t>>& sources,
                                            const SpecialIds& ids, const SearchOptions& options,
                                            EncodedSources* encoded = nullptr);

// What the encoder made of a list of sources, kept to decode them again without it: per chunk of
// translate() (batch_sentences sentences, longest first), each decoder layer's cross-attention K/V
// and the source padding. Gating a decoder self- or cross-attention head changes neither (a gate
// scales a head's output, not K/V), so a BLEU ablation decodes a split once per such head with the
// encoder run once. translate() refuses a filled one for other sources, another batch_sentences,
// other encoder gates or use_cache = false; it cannot see a changed parameter: clear() it then.
// The beam may differ between calls (the beams of a sentence share its cross K/V).
class EncodedSources {
 public:
  bool empty() const { return chunks_.empty(); }
  void clear() { *this = EncodedSources(); }

 private:
  friend std::vector<std::vector<int32_t>> translate(Model<float>&, const std::vector<std::vector<int32_t>>&,
                                                     const SpecialIds&, const SearchOptions&, EncodedSources*);
  std::vector<std::vector<int32_t>> sources_;
  int64_t batch_sentences_ = 0;
  std::vector<float> encoder_gates_;    // every encoder site's gates, in site order
  std::vector<KvCache<float>> chunks_;  // one per chunk: rows = its sentences, their cross K/V
};

// The length limit a source of `source_tokens` tokens gets (counting </s>), for tests and docs.
int64_t max_target_tokens(const ModelSpec& spec, int64_t source_tokens, const SearchOptions& options);

}  // namespace headlab
