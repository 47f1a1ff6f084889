// The head detectors of analysis/head_detectors.h: TransformerLens's detection patterns written
// out by hand on a short sequence, the "mul" score and Olsson's prefix matching on hand-made
// attention, the repeated random inputs, the refusal of models without causal self-attention, and
// the hand-built induction circuit (support/induction_circuit.h) scoring as what it was built to be.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headlab/analysis/head_detectors.h"
#include "headlab/common/error.h"
#include "support/induction_circuit.h"
#include "support/tiny_model.h"

using namespace headlab;
using headlab::test::induction_circuit_model;

namespace {

// The cells (i, j) of a [T,T] pattern that are 1.
std::vector<std::pair<int64_t, int64_t>> ones(const std::vector<uint8_t>& d, int64_t T) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (d[static_cast<size_t>(i * T + j)]) out.emplace_back(i, j);
  return out;
}

using Cells = std::vector<std::pair<int64_t, int64_t>>;

}  // namespace

TEST_CASE("detection patterns are TransformerLens's, cell by cell", "[analysis][detectors]") {
  // tokens 5 7 9 5 7 5: duplicates of 5 at 0, 3, 5 and of 7 at 1, 4.
  const std::vector<int32_t> x = {5, 7, 9, 5, 7, 5};
  const int64_t T = 6;
  CHECK(ones(detection_pattern(HeadDetector::previous_token, x.data(), T), T) ==
        Cells{{1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 4}});
  CHECK(ones(detection_pattern(HeadDetector::duplicate_token, x.data(), T), T) ==
        Cells{{3, 0}, {4, 1}, {5, 0}, {5, 3}});
  // Induction: the duplicate pattern moved one key right (the token after each earlier copy).
  CHECK(ones(detection_pattern(HeadDetector::induction, x.data(), T), T) == Cells{{3, 1}, {4, 2}, {5, 1}, {5, 4}});
  CHECK(detection_pattern(HeadDetector::prefix_matching, x.data(), T) ==
        detection_pattern(HeadDetector::induction, x.data(), T));
}

TEST_CASE("scores are the attention's share on the pattern, prefix matching over the second copy",
          "[analysis][detectors]") {
  const std::vector<int32_t> x = {1, 2, 3, 1, 2, 3};  // half 3
  const int64_t T = 6, half = 3;
  std::vector<double> a(T * T, 0.0);
  const auto score = [&](HeadDetector d) {
    return detector_score(d, a.data(), detection_pattern(d, x.data(), T), T, half);
  };
  // A perfect previous-token head (row 0 can only attend to itself): 5 of 6 rows on the pattern.
  a[0] = 1;
  for (int64_t i = 1; i < T; ++i) a[static_cast<size_t>(i * T + i - 1)] = 1;
  CHECK(score(HeadDetector::previous_token) == Approx(5.0 / 6).epsilon(1e-15));
  CHECK(score(HeadDetector::induction) == 0);
  // A perfect induction head: second-copy rows on the token after the first copy, first-copy rows
  // split evenly over what they see.
  std::fill(a.begin(), a.end(), 0.0);
  for (int64_t i = 0; i < half; ++i)
    for (int64_t j = 0; j <= i; ++j) a[static_cast<size_t>(i * T + j)] = 1.0 / static_cast<double>(i + 1);
  for (int64_t i = half; i < T; ++i) a[static_cast<size_t>(i * T + i - half + 1)] = 1;
  CHECK(score(HeadDetector::prefix_matching) == 1);
  CHECK(score(HeadDetector::induction) == Approx(3.0 / 6).epsilon(1e-15));
  // Half the second copy's mass moved to the previous token: prefix matching 0.5.
  for (int64_t i = half; i < T; ++i) {
    a[static_cast<size_t>(i * T + i - half + 1)] = 0.5;
    a[static_cast<size_t>(i * T + i - 1)] += 0.5;
  }
  CHECK(score(HeadDetector::prefix_matching) == Approx(0.5).epsilon(1e-15));
  CHECK(score(HeadDetector::previous_token) ==
        Approx((0.5 + 0.5 * 3 + 1.0 / 3) / 6).epsilon(1e-15));  // rows 1 and 2 of the first copy, and the second's
}

TEST_CASE("repeated random tokens repeat, stay in the vocabulary and follow the seed", "[analysis][detectors]") {
  const DetectorInputs in = repeated_random_tokens(5, 7, 11, 3);
  REQUIRE(in.tokens.size() == 5u * 14u);
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t t = 0; t < 7; ++t) {
      const int32_t first = in.tokens[static_cast<size_t>(r * 14 + t)];
      CHECK(first >= 0);
      CHECK(first < 11);
      CHECK(in.tokens[static_cast<size_t>(r * 14 + 7 + t)] == first);
    }
  CHECK(repeated_random_tokens(5, 7, 11, 3).tokens == in.tokens);
  CHECK(repeated_random_tokens(5, 7, 11, 4).tokens != in.tokens);
  CHECK_THROWS_WITH(repeated_random_tokens(0, 7, 11, 3), Catch::Contains("rows=0"));
}

TEST_CASE("a model without a decoder's causal self-attention is refused in one line", "[analysis][detectors]") {
  const DetectorInputs in = repeated_random_tokens(2, 3, 11, 0);
  Model<double> encoder(test::tiny_spec(ModelKind::encoder, 2, 2));
  CHECK_THROWS_WITH(detect_heads(encoder, in), Catch::Contains("has no causal self-attention"));
  CHECK_THAT(detector_model_problem(test::tiny_spec(ModelKind::encoder_decoder, 2, 2)),
             Catch::Contains("also attends to a source"));
  CHECK(detector_model_problem(test::tiny_spec(ModelKind::decoder, 2, 2)).empty());
  Model<double> decoder(test::tiny_spec(ModelKind::decoder, 2, 2));
  CHECK_THROWS_WITH(detect_heads(decoder, repeated_random_tokens(2, 5, 11, 0)),
                    Catch::Contains("the model takes 2 to 8"));
}

TEST_CASE("the hand-built induction circuit: L0H0 scores as a previous-token head, L1H0 as an induction head",
          "[analysis][detectors]") {
  Model<double> model = induction_circuit_model(6, 12);
  const DetectorInputs in = repeated_random_tokens(16, 6, 6, 1);
  const DetectorScores s = detect_heads(model, in);
  REQUIRE(s.labels == std::vector<std::string>{"L0H0", "L0H1", "L1H0", "L1H1"});
  auto score = [&](HeadDetector d, size_t k) { return s.scores[static_cast<size_t>(d)][k]; };
  // Previous token: every row but the first (11 of 12), to within the softmax's leak.
  CHECK(score(HeadDetector::previous_token, 0) == Approx(11.0 / 12).margin(1e-3));
  CHECK(score(HeadDetector::previous_token, 0) > 0.9);
  // The induction head lands on the token after an earlier copy of its own: prefix matching 1
  // (rows with a chance repeat in the first copy too count as matches, the pattern's own rule).
  CHECK(score(HeadDetector::prefix_matching, 2) > 0.99);
  for (size_t k : {0u, 1u, 3u}) {
    CHECK(score(HeadDetector::prefix_matching, k) < 0.5);
    CHECK(score(HeadDetector::induction, k) < score(HeadDetector::induction, 2));
  }
  CHECK(score(HeadDetector::previous_token, 2) < 0.5);
}
