// Voita et al.'s criteria on hand-built attention: positional offsets, the positional baselines
// of the gold relations, rare-token agreement with its chance and baseline. Every expected value
// is counted by hand in the comments next to the data.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "headlab/analysis/attention_stats.h"
#include "headlab/analysis/head_roles.h"

using namespace headlab;

namespace {

// Probabilities [B,H,T,T] peaked at argmax(b, h, t): 0.6 there and 0.4 spread over the other
// keys row t sees (all T keys, or s <= t when causal; padding gets 0); 1 when it sees one key.
std::vector<double> peaked_probs(int64_t B, int64_t H, int64_t T, bool causal, const std::vector<uint8_t>& padding,
                                 const std::function<int64_t(int64_t b, int64_t h, int64_t t)>& argmax) {
  std::vector<double> p(static_cast<size_t>(B * H * T * T), 0.0);
  auto real = [&](int64_t b, int64_t s) { return padding.empty() || padding[b * T + s] != 0; };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t a = argmax(b, h, t);
        REQUIRE(real(b, a));
        REQUIRE((!causal || a <= t));
        int64_t others = 0;
        for (int64_t s = 0; s < (causal ? t + 1 : T); ++s) others += s != a && real(b, s);
        double* row = p.data() + ((b * H + h) * T + t) * T;
        for (int64_t s = 0; s < (causal ? t + 1 : T); ++s)
          if (real(b, s)) row[s] = s == a ? (others > 0 ? 0.6 : 1.0) : 0.4 / static_cast<double>(others);
      }
  return p;
}

HeadScores finished(const AttentionSums& sums, int64_t H) {
  HeadScores s;
  s.n_sites = 1;
  s.n_heads = H;
  finish_attention_stats(sums, s);
  return s;
}

AttentionBatchInfo batch_info(int64_t B, int64_t T, bool causal) {
  AttentionBatchInfo info;
  info.batch_size = B;
  info.seq_len = T;
  info.causal = causal;
  return info;
}

// Probabilities [1,H,T,T] filled by rule(h, t, s).
template <typename Rule>
std::vector<double> make_probs(int64_t H, int64_t T, Rule rule) {
  std::vector<double> p(static_cast<size_t>(H * T * T));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = 0; s < T; ++s) p[(h * T + t) * T + s] = rule(h, t, s);
  return p;
}

HeadScores empty_scores(int64_t L, int64_t H) {
  HeadScores s;
  s.n_sites = L;
  s.n_heads = H;
  return s;
}

}  // namespace

TEST_CASE("a head's positional offset is its most frequent t - argmax, ties to the smaller |offset| then the negative",
          "[analysis]") {
  // Encoder, T = 5, every row counted. The argmax of each head at t = 0..4, and t - argmax:
  const int64_t T = 5, H = 4;
  const std::vector<std::vector<int64_t>> argmax = {
      {1, 0, 1, 2, 3},  // offsets -1 +1 +1 +1 +1: +1 in 4 of 5 rows (a sign slip would say -1)
      {1, 2, 3, 4, 3},  // offsets -1 -1 -1 -1 +1: -1 (the next token) in 4 of 5
      {1, 2, 1, 2, 2},  // offsets -1 -1 +1 +1 +2: -1 and +1 tie at 2 rows: the negative one
      {2, 3, 1, 2, 4},  // offsets -2 -2 +1 +1  0: -2 and +1 tie at 2 rows: the smaller |offset|
  };
  const auto probs = peaked_probs(1, H, T, false, {}, [&](int64_t, int64_t h, int64_t t) { return argmax[h][t]; });
  AttentionBatchInfo info = batch_info(1, T, false);
  AttentionSums sums(H);
  accumulate_attention_stats(Tensor<double>(const_cast<double*>(probs.data()), {1, H, T, T}), 0, info, sums);
  const HeadScores s = finished(sums, H);
  CHECK(s.positional_offset == std::vector<double>{1, -1, -1, 1});
  CHECK(s.positional_share == std::vector<double>{0.8, 0.8, 0.4, 0.4});
  // Without gold fields or token counts there is nothing to compare with.
  CHECK(std::isnan(s.rare_token_agreement[0]));
  CHECK(std::isnan(s.syntactic_head_baseline.agreement));
  CHECK(std::isnan(s.syntactic_head_baseline.offset));
}

TEST_CASE("the positional share counts every counted row, also those too early for the offset", "[analysis]") {
  // Causal, T = 5, row 0 not counted (one key). The head attends two back where it can, else to
  // token 0: offsets +1 (t = 1), +2 (t = 2, 3, 4), so +2 holds 3 of the 4 counted rows.
  const int64_t T = 5;
  const auto probs = peaked_probs(1, 1, T, true, {}, [](int64_t, int64_t, int64_t t) { return t >= 2 ? t - 2 : 0; });
  const std::vector<uint8_t> rows = {0, 1, 1, 1, 1};
  AttentionBatchInfo info = batch_info(1, T, true);
  info.query_rows = rows.data();
  AttentionSums sums(1);
  const Tensor<double> A(const_cast<double*>(probs.data()), {1, 1, T, T});
  accumulate_attention_stats(A, 0, info, sums);
  accumulate_attention_stats(A, 0, info, sums);  // a second batch: the counts add up, the share stays
  const HeadScores s = finished(sums, 1);
  CHECK(s.positional_offset[0] == 2);
  CHECK(s.positional_share[0] == 0.75);
}

TEST_CASE("a relation's positional baseline is the share of its rows whose key is at its most frequent offset",
          "[analysis]") {
  SECTION("decoder: only heads before t count, and a head at the baseline offset scores the baseline") {
    // gold_head per row, and t - gold_head where the head is visible (before t):
    //   row 0: -1 0 1 1 3 3  ->  -, +1, +1, +2, +1, +2
    //   row 1:  2 0 0 2 3 4  ->  (head after t: not counted), +1, +2, +1, +1, +1
    // 10 rows; +1 in 7 of them.
    const int64_t B = 2, T = 6;
    const std::vector<int32_t> gold_head = {-1, 0, 1, 1, 3, 3, 2, 0, 0, 2, 3, 4};
    AttentionBatchInfo info = batch_info(B, T, true);
    info.gold_head = gold_head.data();
    AttentionSums sums(1);
    accumulate_positional_baselines(info, sums);
    // The previous-token head (token 0 attends to itself): the syntactic head in exactly the
    // baseline's rows.
    const auto probs = peaked_probs(B, 1, T, true, {}, [](int64_t, int64_t, int64_t t) { return t > 0 ? t - 1 : 0; });
    accumulate_attention_stats(Tensor<double>(const_cast<double*>(probs.data()), {B, 1, T, T}), 0, info, sums);
    const HeadScores s = finished(sums, 1);
    CHECK(sums.syntactic_head.rows == 10);
    CHECK(s.syntactic_head_baseline.offset == 1);
    CHECK(s.syntactic_head_baseline.agreement == 0.7);
    CHECK(s.syntactic_head_agreement[0] == 0.7);
    // Dependents visible from their head: only token 0 of row 1, whose head is token 2.
    CHECK(sums.dependent.rows == 1);
    CHECK(s.dependent_baseline.offset == 2);
    CHECK(s.dependent_baseline.agreement == 1.0);
    CHECK(std::isnan(s.antecedent_baseline.agreement));  // no gold_antecedent
    CHECK(std::isnan(s.antecedent_baseline.offset));
  }
  SECTION("encoder: keys after t, rows with several dependents, padding and a tie") {
    // Token 5 is padding (neither a counted row nor a visible key).
    //   gold_head        1 -1  1  2  2  0   -> t - head: -1, -, +1, +1, +2        : +1 in 2 of 4
    //   dependents of t: t=1: 0 (+1), 2 (-1); t=2: 3 (-1), 4 (-2); t=0: 5 is padding
    //                    -> 2 rows, -1 in both (counted per row, not per dependent)
    //   gold_antecedent  -1 3 4 1 2 -1      -> t - antecedent: -2, -2, +2, +2     : a tie, -2 wins
    const int64_t T = 6;
    const std::vector<int32_t> gold_head = {1, -1, 1, 2, 2, 0}, antecedent = {-1, 3, 4, 1, 2, -1};
    const std::vector<uint8_t> real = {1, 1, 1, 1, 1, 0};
    AttentionBatchInfo info = batch_info(1, T, false);
    info.query_rows = real.data();
    info.key_padding = real.data();
    info.gold_head = gold_head.data();
    info.gold_antecedent = antecedent.data();
    AttentionSums sums(1);
    accumulate_positional_baselines(info, sums);
    const HeadScores s = finished(sums, 1);
    CHECK(s.syntactic_head_baseline.offset == 1);
    CHECK(s.syntactic_head_baseline.agreement == 0.5);
    CHECK(sums.dependent.rows == 2);
    CHECK(s.dependent_baseline.offset == -1);
    CHECK(s.dependent_baseline.agreement == 1.0);
    CHECK(s.antecedent_baseline.offset == -2);
    CHECK(s.antecedent_baseline.agreement == 0.5);
  }
}

TEST_CASE("rare-token agreement: the argmax holds the visible token rarest in training, any of tied ones",
          "[analysis]") {
  // Training counts of tokens 0..4; token 4 never occurs in training.
  const std::vector<int64_t> counts = {100, 5, 50, 5, 0};
  SECTION("decoder: the rarest of the keys before t; rows whose keys all tie are not counted") {
    // Row 0, tokens 0 2 1 0 3 2: the rarest count seen from t = 1..5 is 50, 5, 5, 5 (tokens 1 and
    // 3 tie), 5; t = 0 sees one key. Row 1 is one token repeated: nothing to pick out.
    const int64_t B = 2, T = 6;
    const std::vector<int32_t> tokens = {0, 2, 1, 0, 3, 2, 2, 2, 2, 2, 2, 2};
    // Head 0's argmax at t = 1..5: 1 (count 50, hit), 2 (5, hit), 0 (100), 4 (token 3: 5, hit), 5 (50): 3 of 5.
    // Head 1 is the previous token: 100, 50, 5 (hit), 100, 5 (hit): 2 of 5.
    const std::vector<int64_t> head0 = {0, 1, 2, 0, 4, 5};
    const auto probs = peaked_probs(
        B, 2, T, true, {}, [&](int64_t, int64_t h, int64_t t) { return h == 0 ? head0[t] : (t > 0 ? t - 1 : 0); });
    AttentionBatchInfo info = batch_info(B, T, true);
    info.tokens = tokens.data();
    info.token_counts = counts.data();
    info.vocab_size = static_cast<int64_t>(counts.size());
    AttentionSums sums(2);
    accumulate_attention_stats(Tensor<double>(const_cast<double*>(probs.data()), {B, 2, T, T}), 0, info, sums);
    const HeadScores s = finished(sums, 2);
    CHECK(sums.rare_n[0] == 5);
    CHECK(s.rare_token_agreement[0] == 0.6);
    CHECK(s.rare_token_agreement[1] == 0.4);
  }
  SECTION("encoder: padding is not a candidate, however rare its token") {
    // Tokens 0 1 2 4 4, the two 4s padding: every real row sees counts 100, 5, 50, rarest at s = 1.
    // Argmax 1, 1, 0 at t = 0, 1, 2: 2 of 3 (0 of 3 if the never-seen padding token counted).
    const int64_t T = 5;
    const std::vector<int32_t> tokens = {0, 1, 2, 4, 4};
    const std::vector<uint8_t> real = {1, 1, 1, 0, 0};
    const auto probs = peaked_probs(1, 1, T, false, real, [](int64_t, int64_t, int64_t t) { return t < 2 ? 1 : 0; });
    AttentionBatchInfo info = batch_info(1, T, false);
    info.query_rows = real.data();
    info.key_padding = real.data();
    info.tokens = tokens.data();
    info.token_counts = counts.data();
    info.vocab_size = static_cast<int64_t>(counts.size());
    AttentionSums sums(1);
    accumulate_attention_stats(Tensor<double>(const_cast<double*>(probs.data()), {1, 1, T, T}), 0, info, sums);
    const HeadScores s = finished(sums, 1);
    CHECK(s.rare_token_agreement[0] == Approx(2.0 / 3).epsilon(1e-15));
  }
}

TEST_CASE("attention statistics of uniform and one-hot rows have their known values", "[analysis]") {
  // Head 0 is uniform over 4 keys; head 1 attends to the previous token (token 0 to itself).
  const int64_t H = 2, T = 4;
  const auto probs = make_probs(H, T, [](int64_t h, int64_t t, int64_t s) {
    return h == 0 ? 0.25 : (s == std::max<int64_t>(t - 1, 0) ? 1.0 : 0.0);
  });
  const std::vector<int32_t> gold_head = {-1, 0, 1, 1};  // 1 and 2 and 3 hang off 0, 1, 1
  const std::vector<uint8_t> delimiter = {0, 0, 0, 1};
  AttentionBatchInfo info;
  info.batch_size = 1;
  info.seq_len = T;
  info.causal = false;
  info.gold_head = gold_head.data();
  info.is_delimiter = delimiter.data();
  AttentionSums sums(H);
  const Tensor<double> A(const_cast<double*>(probs.data()), {1, H, T, T});
  accumulate_attention_stats(A, 0, info, sums);
  accumulate_js_distance(std::vector<Tensor<double>>{A}, info, sums);
  HeadScores s = empty_scores(1, H);
  finish_attention_stats(sums, s);

  CHECK(s.entropy[0] == Approx(std::log(4.0)));
  CHECK(s.confidence[0] == Approx(0.25));
  CHECK(s.distance[0] == Approx((1.5 + 1 + 1 + 1.5) / 4));  // sum_s |t-s| / 4 for t = 0..3
  CHECK(s.delimiter_mass[0] == Approx(0.25));
  CHECK(s.previous_token_agreement[0] == Approx(1.0 / 3));  // argmax = first maximum = key 0
  CHECK(s.entropy[1] == 0.0);
  CHECK(s.confidence[1] == 1.0);
  CHECK(s.distance[1] == Approx(3.0 / 4));
  CHECK(s.delimiter_mass[1] == 0.0);
  CHECK(s.previous_token_agreement[1] == 1.0);
  CHECK(s.syntactic_head_agreement[1] == Approx(2.0 / 3));  // rows 1, 2 right, row 3 (head 1) wrong
  CHECK(s.delimiter_agreement[1] == 0.0);
  CHECK(std::isnan(s.antecedent_agreement[1]));  // no gold_antecedent given
  // JS between uniform(4) and a one-hot: m = (5/8, 1/8, 1/8, 1/8), H2(m) = 1.548795 bits,
  // JSD = H2(m) - (2 + 0)/2, distance = sqrt(0.548795).
  CHECK(s.js_distance[1] == Approx(std::sqrt(0.625 * std::log2(1 / 0.625) + 3 * 0.125 * 3 - 1)).epsilon(1e-12));
  CHECK(s.js_distance[2] == s.js_distance[1]);
  CHECK(s.js_distance[0] == 0.0);
  CHECK(s.js_nearest[0] == s.js_distance[1]);
}

TEST_CASE("causal rows are scored only where the query rows say, over the visible keys", "[analysis]") {
  // One causal head, uniform over the t + 1 visible keys; the first row is not counted.
  const int64_t T = 5;
  const auto probs = make_probs(1, T, [](int64_t, int64_t t, int64_t s) { return s <= t ? 1.0 / (t + 1) : 0.0; });
  const std::vector<uint8_t> rows = {0, 1, 1, 1, 1};
  AttentionBatchInfo info;
  info.batch_size = 1;
  info.seq_len = T;
  info.causal = true;
  info.query_rows = rows.data();
  AttentionSums sums(1);
  accumulate_attention_stats(Tensor<double>(const_cast<double*>(probs.data()), {1, 1, T, T}), 0, info, sums);
  HeadScores s = empty_scores(1, 1);
  finish_attention_stats(sums, s);
  CHECK(sums.rows[0] == 4);
  CHECK(s.entropy[0] == Approx((std::log(2.0) + std::log(3.0) + std::log(4.0) + std::log(5.0)) / 4));
  CHECK(s.confidence[0] == Approx((1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5) / 4));
  CHECK(std::isnan(s.delimiter_mass[0]));  // no delimiters in this batch
  CHECK(std::isnan(s.js_nearest[0]));      // no JS pass, and no other head
}

TEST_CASE("JS distance is 0 for identical rows and 1 for disjoint one-hot rows", "[analysis]") {
  const double a[4] = {0.1, 0.2, 0.3, 0.4}, one[4] = {1, 0, 0, 0}, other[4] = {0, 0, 1, 0};
  CHECK(js_distance(a, a, 4) == 0.0);
  CHECK(js_distance(one, other, 4) == Approx(1.0).epsilon(1e-15));
  CHECK(js_distance(a, one, 4) == Approx(js_distance(one, a, 4)));
  // The accumulated form (entropies reused) gives exactly 0 for two identical heads.
  const auto probs = make_probs(2, 3, [](int64_t, int64_t t, int64_t s) { return (t + s) % 3 == 0 ? 0.7 : 0.15; });
  AttentionBatchInfo info;
  info.batch_size = 1;
  info.seq_len = 3;
  info.causal = false;
  AttentionSums sums(2);
  accumulate_js_distance(std::vector<Tensor<double>>{Tensor<double>(const_cast<double*>(probs.data()), {1, 2, 3, 3})},
                         info, sums);
  CHECK(sums.js_sum[1] == 0.0);
  CHECK(sums.js_rows == 3);
}

TEST_CASE("cross-attention rows give entropy and confidence only, and JS distances stay within the heads compared",
          "[analysis]") {
  // Two cross heads (slots 1, 2) over S = 3 keys of another sequence, T = 2 query rows; slot 0 is
  // a head of another kind, never compared with them.
  const int64_t T = 2, S = 3;
  const std::vector<double> uniform_then_last = {1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0, 1}, first = {1, 0, 0, 1, 0, 0};
  const Tensor<double> A(const_cast<double*>(uniform_then_last.data()), {1, 1, T, S}),
      B(const_cast<double*>(first.data()), {1, 1, T, S});
  AttentionBatchInfo info;
  info.batch_size = 1;
  info.seq_len = T;
  info.key_len = S;
  AttentionSums sums(3);
  accumulate_attention_stats(A, 1, info, sums);
  accumulate_attention_stats(B, 2, info, sums);
  accumulate_js_distance(std::vector<Tensor<double>>{A, B}, info, sums, {1, 2});
  HeadScores s = empty_scores(3, 1);
  finish_attention_stats(sums, s);
  CHECK(s.entropy[1] == Approx(std::log(3.0) / 2));
  CHECK(s.confidence[1] == Approx((1.0 / 3 + 1) / 2));
  CHECK(s.entropy[2] == 0.0);
  for (const std::vector<double>* column : {&s.distance, &s.positional_offset, &s.positional_share,
                                            &s.previous_token_agreement, &s.delimiter_mass, &s.rare_token_agreement})
    CHECK(std::isnan((*column)[1]));
  CHECK(std::isnan(s.entropy[0]));
  // Row 0: uniform(3) against one-hot: m = (2/3, 1/6, 1/6), JSD = H2(m) - log2(3)/2; row 1: two
  // disjoint one-hots, distance 1.
  const double jsd = 2.0 / 3 * std::log2(1.5) + 2.0 / 6 * std::log2(6.0) - std::log2(3.0) / 2;
  CHECK(s.js_distance[1 * 3 + 2] == Approx((std::sqrt(jsd) + 1) / 2).epsilon(1e-12));
  CHECK(s.js_distance[2 * 3 + 1] == s.js_distance[1 * 3 + 2]);
  CHECK(std::isnan(s.js_distance[0 * 3 + 1]));
  CHECK(s.js_distance[0] == 0.0);
  CHECK(s.js_nearest[1] == s.js_distance[1 * 3 + 2]);
  CHECK(std::isnan(s.js_nearest[0]));
}

TEST_CASE("rare-token chance and positional baseline, counted by hand, and the role they give", "[analysis][roles]") {
  // Training counts of tokens 0..2. A causal row of tokens 0 1 2 1 0 (counts 100 5 50 5 100):
  //   t  keys seen  rarest keys (count 5)  chance  their offsets t - s
  //   0  1          - (one key: not counted)
  //   1  2          s = 1                  1/2     0
  //   2  3          s = 1                  1/3     1
  //   3  4          s = 1, 3               2/4     2, 0
  //   4  5          s = 1, 3               2/5     3, 1
  // chance = (1/2 + 1/3 + 1/2 + 2/5) / 4 = 13/30; offsets 0 and 1 hold 2 rows each, the tie goes
  // to 0: baseline 2/4 at offset 0. Gold heads 0 1 0 2 at t = 1..4: chance (1/2 + 1/3 + 1/4 + 1/5) / 4.
  const std::vector<int64_t> counts = {100, 5, 50};
  const std::vector<int32_t> row = {0, 1, 2, 1, 0};
  const std::vector<int32_t> row_heads = {-1, 0, 1, 0, 2};
  // Head 0 always attends to a rarest key (1, 1, 3, 3 at t = 1..4): 4 of 4. Head 1 attends to
  // itself, the baseline's offset: hits at t = 1 and 3, 2 of 4, the baseline exactly.
  const std::vector<int64_t> head0 = {0, 1, 1, 3, 3};
  const int64_t T = 5;
  for (const int64_t B : {1, 2}) {
    INFO("B = " << B << " copies of the row");
    std::vector<int32_t> tokens, gold;
    for (int64_t b = 0; b < B; ++b) {
      tokens.insert(tokens.end(), row.begin(), row.end());
      gold.insert(gold.end(), row_heads.begin(), row_heads.end());
    }
    const auto probs =
        peaked_probs(B, 2, T, true, {}, [&](int64_t, int64_t h, int64_t t) { return h == 0 ? head0[t] : t; });
    AttentionBatchInfo info = batch_info(B, T, true);
    info.tokens = tokens.data();
    info.token_counts = counts.data();
    info.vocab_size = static_cast<int64_t>(counts.size());
    info.gold_head = gold.data();
    AttentionSums sums(2);
    accumulate_attention_stats(Tensor<double>(const_cast<double*>(probs.data()), {B, 2, T, T}), 0, info, sums);
    accumulate_positional_baselines(info, sums);
    HeadScores s = finished(sums, 2);
    CHECK(s.rare_token_baseline.chance == Approx(13.0 / 30).epsilon(1e-15));
    CHECK(s.rare_token_baseline.agreement == 0.5);
    CHECK(s.rare_token_baseline.offset == 0);
    CHECK(s.syntactic_head_baseline.chance == Approx((1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5) / 4).epsilon(1e-15));
    CHECK(s.rare_token_agreement[0] == 1.0);
    CHECK(s.rare_token_agreement[1] == 0.5);
    CHECK(s.rare_token_rows[0] == 4 * B);
    CHECK(s.rare_token_rows[1] == 4 * B);
    CHECK(s.positional_share[1] == 1.0);  // offset 0 in every row, t = 0 included
    CHECK(s.positional_share[0] == 3.0 / 5);
    // Head 0's 4B of 4B against p0 = 1/2: p = 2^-4B, 0.0625 for one row (not rare), 0.0039 for two.
    assign_roles(s);
    CHECK(role_name(s.role[0]) == (B == 1 ? "none" : "rare_token"));
    CHECK(role_name(s.role[1]) == "positional");  // at the baseline: not rare_token
  }
}
