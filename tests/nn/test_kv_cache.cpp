// Cached incremental decoding (nn/kv_cache.h, Model::start_decoding / decode_step) against the
// whole-sequence forward it replaces.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headlab/nn/kv_cache.h"
#include "headlab/nn/model.h"
#include "support/tiny_model.h"

using namespace headlab;

using test::randomize;
using test::tiny_seq2seq_spec;
using test::tiny_spec;
using test::TinyBatch;

namespace {

// Logits [B*T, V] of the whole-sequence forward.
std::vector<double> full_logits(Model<double>& model, const ModelInput& input) {
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  const Tensor<double> l = model.forward(tape, input, {}).logits.value();
  return std::vector<double>(l.data(), l.data() + l.numel());
}

// The same logits from the cache, feeding the target in chunks of the given sizes.
std::vector<double> cached_logits(Model<double>& model, const TinyBatch& batch, const std::vector<int64_t>& chunks) {
  const int64_t V = model.spec().vocab_size, B = batch.B, T = batch.T;
  KvCache<double> cache(model.spec(), B, T, batch.S);
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  if (model_kind_info(model.spec().kind).source) {
    model.start_decoding(tape, batch.input(), cache);
    tape.reset();
  }
  std::vector<double> logits(static_cast<size_t>(B * T * V));
  std::vector<int32_t> tokens;
  int64_t t0 = 0;
  for (int64_t n : chunks) {
    tokens.clear();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = t0; t < t0 + n; ++t) tokens.push_back(batch.tokens[b * T + t]);
    ModelInput step{B, n, tokens.data(), nullptr, nullptr};
    const Tensor<double> l = model.decode_step(tape, step, cache).logits.value();  // [B*n, V]
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i)
        std::copy(l.data() + (b * n + i) * V, l.data() + (b * n + i + 1) * V, logits.begin() + (b * T + t0 + i) * V);
    tape.reset();
    t0 += n;
  }
  REQUIRE(cache.length() == T);
  return logits;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(a[i] - b[i]));
  return most;
}

}  // namespace

TEST_CASE("cached decoding gives the whole-sequence forward's logits, token by token or in chunks", "[nn][kv_cache]") {
  const bool seq2seq = GENERATE(true, false);
  ModelSpec spec = seq2seq ? tiny_seq2seq_spec(2, 4, 4, 2) : tiny_spec(ModelKind::decoder, 4, 2);
  spec.positions = GENERATE(Positions::learned, Positions::sinusoidal);
  Model<double> model(spec);
  randomize(model, 13);
  TinyBatch batch(spec, 21);
  batch.padding.clear();  // decoded rows are all real tokens
  const std::vector<double> want = full_logits(model, batch.input());
  const std::vector<int64_t> chunks = GENERATE(std::vector<int64_t>{1, 1, 1, 1, 1}, std::vector<int64_t>{2, 3},
                                               std::vector<int64_t>{5}, std::vector<int64_t>{1, 3, 1});
  INFO((seq2seq ? "encoder_decoder" : "decoder") << ", chunks of " << chunks.size());
  CHECK(max_abs_difference(cached_logits(model, batch, chunks), want) <= 1e-12);
}

TEST_CASE("a reordered cache continues the sequences of its new parents", "[nn][kv_cache]") {
  // Rows 0 and 1 decode the same source (beam search's two beams of one sentence); after two
  // tokens row 0 takes row 1's history. Its next logits must be those of row 1's prefix followed
  // by row 0's next token.
  const ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 1);
  Model<double> model(spec);
  randomize(model, 17);
  TinyBatch one(spec, 5);
  one.B = 1;
  one.source.resize(static_cast<size_t>(one.S));
  one.source_padding.assign(static_cast<size_t>(one.S), 1);
  const std::vector<int32_t> row0 = {3, 4, 7}, row1 = {5, 6, 8};
  KvCache<double> cache(spec, 2, 3, one.S);
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  model.start_decoding(tape, one.input(), cache);  // one source row, two cache rows
  tape.reset();
  std::vector<int32_t> step = {row0[0], row0[1], row1[0], row1[1]};
  model.decode_step(tape, {2, 2, step.data(), nullptr, nullptr}, cache);
  tape.reset();
  cache.reorder({1, 1});
  step = {row0[2], row1[2]};
  const Tensor<double> got = model.decode_step(tape, {2, 1, step.data(), nullptr, nullptr}, cache).logits.value();
  // The whole forward of row 1's prefix + row 0's third token.
  std::vector<int32_t> target = {row1[0], row1[1], row0[2]};
  ModelInput full = one.input();
  full.seq_len = 3;
  full.tokens = target.data();
  full.targets = nullptr;
  const std::vector<double> want = full_logits(model, full);
  const int64_t V = spec.vocab_size;
  for (int64_t v = 0; v < V; ++v) CHECK(std::abs(got(0, v) - want[static_cast<size_t>(2 * V + v)]) <= 1e-12);
}

TEST_CASE("decoding refuses grad, a full cache and a missing source with one line", "[nn][kv_cache]") {
  const ModelSpec spec = tiny_seq2seq_spec(2, 2, 2, 2);
  Model<double> model(spec);
  TinyBatch batch(spec, 2);
  KvCache<double> cache(spec, batch.B, 2, batch.S);
  Arena arena;
  Tape<double> tape(arena);
  std::vector<int32_t> tokens(static_cast<size_t>(batch.B * 3), 1);
  REQUIRE_THROWS_WITH(model.start_decoding(tape, batch.input(), cache),
                      "model: decoding runs without grad (NoGradGuard)");
  NoGradGuard<double> no_grad(tape);
  REQUIRE_THROWS_WITH(model.decode_step(tape, {batch.B, 1, tokens.data(), nullptr, nullptr}, cache),
                      "model: an encoder_decoder's decode_step needs start_decoding first");
  model.start_decoding(tape, batch.input(), cache);
  REQUIRE_THROWS_WITH(model.decode_step(tape, {batch.B, 3, tokens.data(), nullptr, nullptr}, cache),
                      "model: 0 cached + 3 new tokens exceed the cache's capacity 2");
  REQUIRE_THROWS_WITH(KvCache<double>(spec, 2, 9, 4), "kv cache: rows=2 and capacity=9 must be in [1, max_seq_len=8]");
}
