// Activation and path patching (analysis/patching.h): patching the clean run into itself changes
// nothing, bit for bit, for every kind of patch; every head and the residual of a block patched at
// once give the clean metric; positions where the two inputs agree change nothing; a head switched
// off sends nothing down a path; and on the hand-built induction circuit the induction head's
// output carries the clean loss, and the previous-token head reaches it through its keys only.
// An encoder_decoder's three attentions likewise, where the decoder's inputs agree in both runs
// (only the sources differ), with paths exactly where the model has them.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <string>

#include "headlab/analysis/patching.h"
#include "headlab/common/error.h"
#include "headlab/data/translation.h"
#include "support/induction_circuit.h"
#include "support/scratch.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

// Clean and corrupted inputs alike: every patch gives the clean metric, bit for bit.
void check_changes_nothing(const ActivationPatching& p) {
  REQUIRE(p.clean == p.corrupt);
  for (double v : p.head_out) CHECK(v == p.clean);
  for (const auto& site : p.qkv)
    for (double v : site) CHECK(v == p.clean);
  for (double v : p.resid) CHECK(v == p.clean);
}

}  // namespace

TEST_CASE("patching the clean run into itself changes nothing, bit for bit", "[analysis][patching]") {
  const int64_t kv = GENERATE(2, 1);
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, kv, 8);
  Model<float> model(spec);
  test::randomize(model, 4);
  PatchingInputs in = repeated_token_pairs(3, 4, 11, 2);
  in.corrupt = in.clean;
  const ActivationPatching p = activation_patching(model, in);
  check_changes_nothing(p);
  const PathPatching pp = path_patching(model, in);
  for (const auto& site : pp.scores)
    for (double v : site)
      if (!std::isnan(v)) CHECK(v == p.clean);
}

TEST_CASE("a block's residual and heads patched at once give the clean metric; equal positions change nothing",
          "[analysis][patching]") {
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8);
  Model<float> model(spec);
  test::randomize(model, 6);
  const PatchingInputs in = repeated_token_pairs(3, 4, 11, 5);
  const ActivationPatching p = activation_patching(model, in);
  REQUIRE(p.clean != p.corrupt);
  REQUIRE(p.all_patched.size() == 2u);
  for (double v : p.all_patched) CHECK(v == p.clean);
  // Block 0's input at positions 4..7 (the second copies, the same tokens in both) is the same.
  for (int64_t t = 4; t < 8; ++t) CHECK(p.resid[static_cast<size_t>(t)] == p.corrupt);
  for (int64_t t = 0; t < 4; ++t) CHECK(p.resid[static_cast<size_t>(t)] != p.corrupt);
  CHECK(p.forwards == 2 * (2 * 4 + 8) + 2);  // per layer: 2 heads x (out, q, k, v), 8 positions; all_patched
}

TEST_CASE("a switched-off head sends nothing down a path", "[analysis][patching]") {
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8);
  Model<float> model(spec);
  test::randomize(model, 7);
  model.gates().value(0).data()[1] = 0;  // L0H1 off
  const PathPatching pp = path_patching(model, repeated_token_pairs(3, 4, 11, 5));
  REQUIRE(pp.labels.size() == 4u);
  for (size_t r : {2u, 3u})
    for (int s = 0; s < kPatchSites; ++s) {
      CHECK(pp.score(static_cast<PatchSite>(s), 1, r) == pp.corrupt);
      CHECK(std::isnan(pp.score(static_cast<PatchSite>(s), r, 1)));
    }
}

TEST_CASE("the induction circuit: the induction head carries the loss; the previous-token head reaches it by its keys",
          "[analysis][patching]") {
  Model<double> model = test::induction_circuit_model(6, 12);
  const PatchingInputs in = repeated_token_pairs(16, 6, 6, 3);
  const ActivationPatching p = activation_patching(model, in);
  CHECK(p.clean < 0.5 * p.corrupt);                   // the circuit copies; the corrupted first copy leaves it guessing
  CHECK(p.restored(p.head_out[2]) > 0.9);             // L1H0's output carries the prediction
  CHECK(std::abs(p.restored(p.head_out[1])) < 1e-9);  // L0H1 writes nothing
  const PathPatching pp = path_patching(model, in);
  auto restored = [&](PatchSite s, size_t sender, size_t receiver) {
    return (pp.score(s, sender, receiver) - pp.corrupt) / (pp.clean - pp.corrupt);
  };
  // The corrupted run's first copy is other tokens: with the clean previous tokens in its keys
  // (the path through k) the induction head looks where the clean run looks, but reads the
  // corrupted tokens there, so the loss moves without coming back. Queries and values read the
  // token subspace, which the previous-token head does not write: nothing moves.
  CHECK(std::abs(restored(PatchSite::k, 0, 2)) > 0.1);
  CHECK(std::abs(restored(PatchSite::q, 0, 2)) < 1e-6);
  CHECK(std::abs(restored(PatchSite::v, 0, 2)) < 1e-6);
  CHECK(std::abs(restored(PatchSite::k, 1, 2)) < 1e-9);
}

namespace {

// Clean and corrupted sources of S tokens that differ, one target both runs decode (T tokens).
PatchingInputs swapped_sources(int64_t rows, int64_t S, int64_t T, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  PatchingInputs in;
  in.rows = rows;
  in.seq_len = T;
  in.source_len = S;
  for (int64_t i = 0; i < rows * S; ++i) {
    in.clean_source.push_back(static_cast<int32_t>(rng() % vocab));
    in.corrupt_source.push_back(static_cast<int32_t>(rng() % vocab));
  }
  for (int64_t i = 0; i < rows * T; ++i) {
    in.clean.push_back(static_cast<int32_t>(rng() % vocab));
    in.targets.push_back(static_cast<int32_t>(rng() % vocab));
  }
  in.corrupt = in.clean;
  return in;
}

}  // namespace

TEST_CASE(
    "an encoder_decoder's patches: itself changes nothing; all at a site gives the clean metric; the "
    "decoder's first self-attention, the same in both runs, changes nothing",
    "[analysis][patching]") {
  const ModelSpec spec = test::tiny_seq2seq_spec(2, 4, 4, 1);  // MHA self, MHA enc, MQA cross
  Model<float> model(spec);
  test::randomize(model, 9);
  PatchingInputs in = swapped_sources(3, 6, 5, 11, 4);
  const ActivationPatching p = activation_patching(model, in);
  REQUIRE(p.clean != p.corrupt);
  const auto sites = spec.attention_sites();
  REQUIRE(p.all_patched.size() == sites.size());
  for (double v : p.all_patched) CHECK(v == p.clean);
  REQUIRE(p.labels.size() == 2u * 4 + 2u * (2 + 4));
  CHECK(p.labels.front() == "enc.L0H0");
  CHECK(p.labels[8] == "dec.L0H0");
  CHECK(p.labels[10] == "cross.L0H0");
  for (size_t k = 0; k < p.labels.size(); ++k)
    if (p.attention[k] == "dec" && p.layer[k] == 0) {
      CHECK(p.head_out[k] == p.corrupt);
      for (const auto& site : p.qkv) CHECK(site[k] == p.corrupt);
    }
  // Blocks: 2 encoder blocks x 6 source positions, then 2 decoder blocks x 5 target positions.
  REQUIRE(p.resid.size() == 2u * 6 + 2u * 5);
  CHECK(p.resid_stack.front() == "enc");
  CHECK(p.resid_stack.back() == "dec");
  for (size_t i = 0; i < p.resid.size(); ++i)
    if (p.resid_stack[i] == "dec" && p.resid_layer[i] == 0) CHECK(p.resid[i] == p.corrupt);
  CHECK(p.forwards == 2 * 4 * 4 + 2 * (2 + 4) * 4 + 2 * 6 + 2 * 5 + 6);

  in.corrupt_source = in.clean_source;
  check_changes_nothing(activation_patching(model, in));
}

TEST_CASE(
    "an encoder_decoder's paths: encoder heads reach later encoder heads and the cross-attention's keys and "
    "values, decoder heads the later self-attention and the cross-attention's queries",
    "[analysis][patching]") {
  const ModelSpec spec = test::tiny_seq2seq_spec(2, 2, 2, 1);
  Model<float> model(spec);
  test::randomize(model, 10);
  model.gates().value(0).data()[1] = 0;  // enc.L0H1 off: it sends nothing
  const PathPatching pp = path_patching(model, swapped_sources(2, 6, 5, 11, 8));
  const size_t N = pp.labels.size();
  REQUIRE(N == 12u);  // enc.L0, enc.L1, dec.L0, cross.L0, dec.L1, cross.L1: 2 heads each
  auto has = [&](PatchSite s, size_t a, size_t r) { return !std::isnan(pp.score(s, a, r)); };
  auto kind = [&](size_t k) { return pp.labels[k].substr(0, pp.labels[k].find('.')); };
  auto site = [&](size_t k) { return k / 2; };  // the attention site, in computation order
  for (size_t a = 0; a < N; ++a)
    for (size_t r = 0; r < N; ++r) {
      const std::string from = kind(a), to = kind(r);
      const bool later = site(r) > site(a);
      const bool qkv = later && ((from == "enc" && to == "enc") || (from != "enc" && to == "dec"));
      const bool q = qkv || (later && from != "enc" && to == "cross");
      const bool kv = qkv || (from == "enc" && to == "cross");
      CHECK(has(PatchSite::q, a, r) == q);
      CHECK(has(PatchSite::k, a, r) == kv);
      CHECK(has(PatchSite::v, a, r) == kv);
      if (a == 1 && (q || kv))
        for (int s = 0; s < kPatchSites; ++s)
          if (has(static_cast<PatchSite>(s), a, r)) CHECK(pp.score(static_cast<PatchSite>(s), a, r) == pp.corrupt);
    }
}

TEST_CASE("source-swapped pairs take the val sentences of the most common lengths and rotate their sources",
          "[analysis][patching]") {
  // 40 pairs: train 0-19, val 20-29, test 30-39. Val: four of 3 and 2 bytes; a repeated source
  // (skipped); two of 2 and 2 bytes (shorter, but fewer); three of lengths no other has.
  std::string source, target;
  for (int i = 0; i < 40; ++i) {
    const int v = i - 20;
    const std::string own = v >= 0 && v < 4 ? std::string("ab") + static_cast<char>('c' + v)
                            : v == 4        ? "abc"
                            : v == 5 || v == 6
                                ? std::string("x") + static_cast<char>('a' + v)
                                : "line " + std::to_string(i) + std::string(static_cast<size_t>(i % 5), 'z');
    source += own + "\n";
    target += (v >= 0 && v < 7 ? std::string("t") + static_cast<char>('a' + v) : "target " + std::to_string(i)) + "\n";
  }
  test::ScratchDir dir("patching-pairs");
  TranslationOptions o;
  o.path = dir.write("src.txt", source).string();
  o.target_path = dir.write("tgt.txt", target).string();
  o.train_fraction = 0.5;
  o.val_fraction = 0.25;
  o.seq_len = 32;
  const TranslationDataset data(o);
  const SpecialTokens sp = data.tokenizer()->specials();
  const PatchingInputs in = source_swap_pairs(data, Split::val, 16);
  REQUIRE(in.rows == 4);
  CHECK(in.source_len == 4);  // 3 bytes + </s>
  CHECK(in.seq_len == 3);     // <s> + 2 bytes
  auto row = [](const std::vector<int32_t>& v, int64_t r, int64_t n) {
    return std::vector<int32_t>(v.begin() + r * n, v.begin() + (r + 1) * n);
  };
  for (int64_t r = 0; r < 4; ++r) {
    const auto c = static_cast<int32_t>('c' + r), next = static_cast<int32_t>('c' + (r + 1) % 4);
    CHECK(row(in.clean_source, r, 4) == std::vector<int32_t>{'a', 'b', c, sp.eos});
    CHECK(row(in.corrupt_source, r, 4) == std::vector<int32_t>{'a', 'b', next, sp.eos});
    const auto t = static_cast<int32_t>('a' + r);
    CHECK(row(in.clean, r, 3) == std::vector<int32_t>{sp.bos, 't', t});
    CHECK(row(in.corrupt, r, 3) == row(in.clean, r, 3));
    CHECK(row(in.targets, r, 3) == std::vector<int32_t>{'t', t, sp.eos});
  }
  CHECK(source_swap_pairs(data, Split::val, 2).rows == 2);
  CHECK_THROWS_WITH(source_swap_pairs(data, Split::val, 1), Catch::Contains("swapping sources needs 2 or more"));
}

TEST_CASE("patching refuses inputs that do not fit in one line", "[analysis][patching]") {
  const ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8);
  PatchingInputs in = repeated_token_pairs(2, 4, 11, 0);
  in.corrupt.pop_back();
  CHECK_THROWS_WITH(check_patching_inputs(spec, in), Catch::Contains("differ in length"));
  in = repeated_token_pairs(2, 4, 11, 0);
  in.answer = 3;
  in.wrong = 11;
  CHECK_THROWS_WITH(check_patching_inputs(spec, in), Catch::Contains("token 11 is outside the model's vocabulary"));
  CHECK_THROWS_WITH(check_patching_inputs(spec, repeated_token_pairs(2, 5, 11, 0)),
                    Catch::Contains("the model takes 1 to 8"));
  CHECK_THROWS_WITH(check_patching_inputs(test::tiny_spec(ModelKind::encoder, 11, 2, 2, 8), in),
                    Catch::Contains("model.kind = decoder or encoder_decoder"));
  ModelSpec seq2seq = test::tiny_seq2seq_spec(2, 2, 2, 1);
  seq2seq.vocab_size = 11;
  CHECK_THROWS_WITH(check_patching_inputs(seq2seq, repeated_token_pairs(2, 2, 11, 0)),
                    Catch::Contains("an encoder_decoder needs clean and corrupted sources of one length"));
  PatchingInputs sources = swapped_sources(2, 6, 5, 11, 1);
  sources.corrupt_source.pop_back();
  CHECK_THROWS_WITH(check_patching_inputs(seq2seq, sources), Catch::Contains("(got 12 and 11 tokens)"));
  sources = swapped_sources(2, 6, 5, 11, 1);
  sources.clean_source[7] = 11;
  CHECK_THROWS_WITH(check_patching_inputs(seq2seq, sources), Catch::Contains("token 11 at source position 1"));
  CHECK_THROWS_WITH(check_patching_inputs(spec, swapped_sources(2, 6, 5, 11, 1)),
                    Catch::Contains("a source given to a decoder model"));
}
