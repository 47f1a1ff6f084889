// BLEU ablation (analysis/bleu_ablation.h) on a tiny random translation model over small parallel
// files: every score is translate_split's with the gates set by hand (the encoder reused for
// decoder and cross heads, rerun for encoder heads), a head already gated 0 changes nothing
// without decoding, and the files hold what the result holds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "headlab/analysis/bleu_ablation.h"
#include "headlab/common/error.h"
#include "headlab/io/csv.h"
#include "support/tiny_translation.h"

using namespace headlab;

namespace {

// Sites of 2 heads (the encoder's) and of 4: only in the 4 is each head alone a setting of its own.
struct TinyTranslation : test::TinyTranslation {
  TinyTranslation() : test::TinyTranslation("bleu_ablation", test::tiny_seq2seq_spec(4, 2, 4, 2), 11) {}
};

std::vector<float> all_gates(const Model<float>& model) {
  const Parameters<float>& g = model.gates();
  std::vector<float> out;
  for (int i = 0; i < g.size(); ++i) out.insert(out.end(), g.value(i).data(), g.value(i).data() + g.value(i).numel());
  return out;
}

// translate_split with site s's gates set to `gates` by hand.
SplitTranslation by_hand(TinyTranslation& t, size_t s, const std::vector<float>& gates,
                         const BleuAblationOptions& options) {
  const Tensor<float> table = t.model.gates().value(static_cast<int>(s));
  const std::vector<float> kept(table.data(), table.data() + table.numel());
  std::copy(gates.begin(), gates.end(), table.data());
  SplitTranslation out = translate_split(t.model, t.data, Split::val, options.search, options.max_sentences);
  std::copy(kept.begin(), kept.end(), table.data());
  return out;
}

void check_against(const AblatedBleu& got, const SplitTranslation& want, const SplitTranslation& unmasked,
                   const BleuAblationOptions& options) {
  CHECK(got.hypotheses == want.hypotheses);
  CHECK(got.bleu_stats == want.bleu_stats);
  CHECK(got.chrf_stats == want.chrf_stats);
  CHECK(got.bleu.score == want.bleu.score);
  CHECK(got.chrf.score == want.chrf.score);
  CHECK(got.bleu_delta == want.bleu.score - unmasked.bleu.score);
  CHECK(got.chrf_delta == want.chrf.score - unmasked.chrf.score);
  const PairedBootstrap b =
      paired_bootstrap_bleu(unmasked.bleu_stats, want.bleu_stats, options.bootstrap_samples, options.bootstrap_seed);
  CHECK(got.bootstrap.p_value == b.p_value);
  CHECK(got.bootstrap.low == b.low);
  CHECK(got.bootstrap.high == b.high);
  CHECK(got.bootstrap.low99 == b.low99);
  CHECK(got.bootstrap.high99 == b.high99);
}

}  // namespace

TEST_CASE("BLEU ablation scores each head as translate_split does with that gate set to 0 by hand",
          "[analysis][bleu]") {
  TinyTranslation t;
  BleuAblationOptions options;  // beam 5
  options.max_sentences = 6;
  options.layer_only = true;
  options.bootstrap_samples = 200;
  const std::vector<float> gates = all_gates(t.model);
  const BleuAblation r = bleu_ablation(t.model, t.data, Split::val, options);
  CHECK(all_gates(t.model) == gates);  // restored

  const SplitTranslation unmasked = translate_split(t.model, t.data, Split::val, options.search, 6);
  REQUIRE(unmasked.hypotheses.size() == 6);
  CHECK(r.unmasked.hypotheses == unmasked.hypotheses);
  CHECK(r.unmasked.bleu_stats == unmasked.bleu_stats);
  CHECK(r.unmasked.bleu.score == unmasked.bleu.score);
  CHECK(r.unmasked.chrf.score == unmasked.chrf.score);

  const std::vector<AttentionSite> sites = t.model.spec().attention_sites();
  REQUIRE(r.heads.size() == 20);  // 2 layers of 2 encoder heads, of 4 decoder and of 4 cross heads
  size_t k = 0, changed = 0;
  for (size_t s = 0; s < sites.size(); ++s) {
    const Tensor<float> table = t.model.gates().value(static_cast<int>(s));
    const std::vector<float> own(table.data(), table.data() + table.numel());
    for (size_t h = 0; h < own.size(); ++h, ++k) {
      const HeadBleu& head = r.heads[k];
      INFO(head_label(head.site, head.head, false));
      CHECK(head.site.kind == sites[s].kind);
      CHECK(head.site.layer == sites[s].layer);
      CHECK(head.head == static_cast<int64_t>(h));
      CHECK(head.gate == static_cast<double>(own[h]));
      std::vector<float> masked = own, alone(own.size(), 0.0f);
      masked[h] = 0;
      alone[h] = own[h];
      check_against(head.masked, by_hand(t, s, masked, options), unmasked, options);
      REQUIRE(head.layer_only.has_value());
      check_against(*head.layer_only, by_hand(t, s, alone, options), unmasked, options);
      changed += head.masked.hypotheses != unmasked.hypotheses;
    }
  }
  CHECK(changed > 0);  // masking changes translations: the comparisons are not vacuous
  // In a 2-head site, head 0 alone is head 1 masked: decoded once. 4 + 4 x 8 distinct settings.
  CHECK(r.decodings == 1 + 4 + 32);
  CHECK_FALSE(r.heads[1].masked.decoded);
  CHECK(r.heads[1].masked.hypotheses == r.heads[0].layer_only->hypotheses);
  CHECK(head_label(r.heads[0].site, 0, false) == "enc.L0H0");
  CHECK(head_label(r.heads.back().site, 3, false) == "cross.L1H3");
}

TEST_CASE("BLEU ablation reusing the encoder gives what decoding every head from scratch gives", "[analysis][bleu]") {
  TinyTranslation t;
  BleuAblationOptions options;
  options.max_sentences = 8;
  options.search.batch_sentences = 3;  // several chunks, each with its own cross K/V
  const BleuAblation reused = bleu_ablation(t.model, t.data, Split::val, options);
  options.reuse_encoder = false;
  const BleuAblation scratch = bleu_ablation(t.model, t.data, Split::val, options);
  REQUIRE(reused.heads.size() == scratch.heads.size());
  for (size_t k = 0; k < reused.heads.size(); ++k) {
    INFO(head_label(reused.heads[k].site, reused.heads[k].head, false));
    CHECK(reused.heads[k].masked.hypotheses == scratch.heads[k].masked.hypotheses);
    CHECK(reused.heads[k].masked.bleu.score == scratch.heads[k].masked.bleu.score);
  }
}

TEST_CASE("a head already gated 0 changes BLEU by exactly 0, without decoding again", "[analysis][bleu]") {
  TinyTranslation t;
  // Site 0 is the encoder's layer 0, site 3 the cross-attention of decoder layer 0.
  t.model.gates().value(0)(1) = 0;
  t.model.gates().value(3)(0) = 0;
  BleuAblationOptions options;
  options.max_sentences = 6;
  options.layer_only = true;
  options.bootstrap_samples = 100;
  const BleuAblation r = bleu_ablation(t.model, t.data, Split::val, options);
  for (const size_t k : {size_t{1}, size_t{8}}) {
    const HeadBleu& head = r.heads[k];
    INFO(head_label(head.site, head.head, false));
    CHECK(head.gate == 0);
    CHECK_FALSE(head.masked.decoded);
    CHECK(head.masked.bleu_delta == 0);
    CHECK(head.masked.chrf_delta == 0);
    CHECK(head.masked.bootstrap.p_value == 1);
    CHECK(head.masked.bootstrap.low == 0);
    CHECK(head.masked.bootstrap.high == 0);
    CHECK(head.masked.hypotheses == r.unmasked.hypotheses);
    CHECK(head.masked.bleu_stats == r.unmasked.bleu_stats);
  }
  // Encoder layer 0 is [g, 0]: head 0 alone is the model as it is; head 1 alone switches the site
  // off, as head 0 masked did. Cross layer 0's gated head alone switches its site off: decoded.
  CHECK_FALSE(r.heads[0].layer_only->decoded);
  CHECK(r.heads[0].layer_only->bleu_delta == 0);
  CHECK_FALSE(r.heads[1].layer_only->decoded);
  CHECK(r.heads[1].layer_only->bleu_stats == r.heads[0].masked.bleu_stats);
  CHECK(r.heads[8].layer_only->decoded);
  // Decodings: unmasked, encoder layer 0 once, layer 1 twice, cross layer 0 7 times (its own
  // gates once among 8 settings), the three other 4-head sites 8 times each.
  CHECK(r.decodings == 1 + 1 + 2 + 7 + 24);
}

TEST_CASE(
    "BLEU ablation files: one CSV row per head, the same bytes run after run, and per-sentence statistics "
    "that rerun the paired test",
    "[analysis][bleu]") {
  TinyTranslation t;
  BleuAblationOptions options;
  options.search.beam = 2;
  options.max_sentences = 5;
  options.layer_only = true;
  options.bootstrap_samples = 50;
  const BleuAblation r = bleu_ablation(t.model, t.data, Split::val, options);
  const std::string csv = (t.scratch.dir / "bleu_ablation.csv").string(),
                    h5 = (t.scratch.dir / "bleu_ablation.h5").string();
  write_bleu_ablation_csv(csv, r);
  const std::string again = (t.scratch.dir / "again.csv").string();
  write_bleu_ablation_csv(again, bleu_ablation(t.model, t.data, Split::val, options));
  CHECK(test::read_file(again) == test::read_file(csv));
  const CsvTable table = read_csv(csv);
  REQUIRE(table.rows.size() == r.heads.size());
  CHECK(table.header.size() == 5 + 2 * 9);
  const std::vector<std::string>& last = table.rows.back();
  CHECK(last[table.column("label")] == "cross.L1H3");
  CHECK(last[table.column("attention")] == "cross");
  CHECK(last[table.column("layer")] == "1");
  CHECK(last[table.column("head")] == "3");
  CHECK(last[table.column("bleu_delta")] == csv_number("%.6g", r.heads.back().masked.bleu_delta));
  CHECK(last[table.column("layer_only_bleu_p")] == csv_number("%.6g", r.heads.back().layer_only->bootstrap.p_value));
  CHECK(last[table.column("bleu_low99")] == csv_number("%.6g", r.heads.back().masked.bootstrap.low99));
  CHECK(last[table.column("layer_only_bleu_high99")] ==
        csv_number("%.6g", r.heads.back().layer_only->bootstrap.high99));

  write_bleu_ablation_h5(h5, r);
  const BleuAblationStats stats = read_bleu_ablation_stats(h5);
  CHECK(stats.unmasked == r.unmasked.bleu_stats);
  REQUIRE(stats.masked.size() == r.heads.size());
  REQUIRE(stats.layer_only.size() == r.heads.size());
  for (size_t k = 0; k < r.heads.size(); ++k) {
    CHECK(stats.masked[k] == r.heads[k].masked.bleu_stats);
    CHECK(stats.layer_only[k] == r.heads[k].layer_only->bleu_stats);
    const PairedBootstrap b = paired_bootstrap_bleu(stats.unmasked, stats.masked[k], 50, 0);
    CHECK(b.p_value == r.heads[k].masked.bootstrap.p_value);
  }
  REQUIRE_THROWS_WITH(read_bleu_ablation_stats(csv), Catch::Contains(csv));
}

TEST_CASE("BLEU ablation refuses a decoder LM, a beam of 0 and no bootstrap samples with one line",
          "[analysis][bleu]") {
  TinyTranslation t;
  ModelSpec lm = test::tiny_spec(ModelKind::decoder, 2, 2);
  lm.vocab_size = t.data.vocab_size();
  Model<float> decoder(lm);
  REQUIRE_THROWS_WITH(bleu_ablation(decoder, t.data, Split::val, {}),
                      "bleu ablation: the model is a decoder, not an encoder_decoder");
  BleuAblationOptions options;
  options.search.beam = 0;
  REQUIRE_THROWS_WITH(bleu_ablation(t.model, t.data, Split::val, options),
                      "bleu ablation: the beam size must be at least 1, got 0");
  options.search.beam = 1;
  options.bootstrap_samples = 0;
  REQUIRE_THROWS_WITH(bleu_ablation(t.model, t.data, Split::val, options),
                      "bleu ablation: bootstrap_samples must be at least 1, got 0");
  ModelSpec other = t.model.spec();
  other.vocab_size += 1;
  Model<float> wrong_vocab(other);
  REQUIRE_THROWS_WITH(bleu_ablation(wrong_vocab, t.data, Split::val, {}),
                      Catch::Contains("bleu ablation: the model's vocab_size="));
}
