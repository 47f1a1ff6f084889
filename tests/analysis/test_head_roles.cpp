// Voita et al.'s roles by the fixed rules of analysis/head_roles.h on hand-made scores: the
// binomial tail against values computed exactly by hand (Python's math.comb), the 0.9 positional
// threshold, rare-token and syntactic heads that must beat chance, the positional baseline and
// the test, and only heads of the kind the baselines were counted on.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "headlab/analysis/head_roles.h"

using namespace headlab;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One site of `heads` dec heads, every column NaN, as analyze_heads leaves unmeasured ones.
HeadScores dec_scores(int64_t heads) {
  HeadScores s;
  s.n_sites = 1;
  s.n_heads = heads;
  for (const HeadColumn& c : head_columns()) (s.*c.values).assign(static_cast<size_t>(heads), kNaN);
  return s;
}

PositionalBaseline baseline(double agreement, double chance) {
  PositionalBaseline b;
  b.agreement = agreement;
  b.offset = 0;
  b.chance = chance;
  return b;
}

}  // namespace

TEST_CASE("the binomial upper tail is P(X >= hits), exact", "[analysis][roles]") {
  CHECK(binomial_upper_tail(8, 10, 0.5) == Approx(56.0 / 1024).epsilon(1e-12));  // (45 + 10 + 1) / 2^10
  CHECK(binomial_upper_tail(60, 100, 0.5) == Approx(0.028443966820490395).epsilon(1e-10));
  CHECK(binomial_upper_tail(330, 1000, 0.3) == Approx(0.02158184429584406).epsilon(1e-9));
  CHECK(binomial_upper_tail(0, 10, 0.2) == 1.0);
  CHECK(binomial_upper_tail(11, 10, 0.2) == 0.0);
  CHECK(binomial_upper_tail(10, 10, 0.5) == Approx(1.0 / 1024).epsilon(1e-12));
  CHECK(binomial_upper_tail(3, 10, 0.0) == 0.0);
  CHECK(binomial_upper_tail(3, 10, 1.0) == 1.0);
  // Far in the tail it stays a small positive number, not 0 or NaN.
  const double tiny = binomial_upper_tail(900, 1000, 0.5);
  CHECK(tiny > 0);
  CHECK(tiny < 1e-100);
}

TEST_CASE("a head is positional at a share of 0.9 or more", "[analysis][roles]") {
  HeadScores s = dec_scores(4);
  s.positional_share = {0.95, 0.85, 0.9, kNaN};
  assign_roles(s);
  CHECK(s.role == std::vector<int>{kRolePositional, 0, kRolePositional, -1});
  CHECK(role_name(s.role[0]) == "positional");
  CHECK(role_name(s.role[1]) == "none");
  CHECK(role_name(s.role[3]).empty());  // no positions: no role assessed
}

TEST_CASE("a rare-token head beats chance and the positional baseline twice over, significantly", "[analysis][roles]") {
  HeadScores s = dec_scores(5);
  s.positional_share = {0.5, 0.5, 0.5, 0.5, 0.95};
  s.rare_token_baseline = baseline(0.2, 0.1);  // the bar is 0.2; a role needs 0.4 and p < 0.01
  s.rare_token_rows = {1000, 1000, 10, 2, 1000};
  // 0: 0.6 of 1000 rows; 1: 0.3 of 1000, significant (p ~ 1e-15) but not twice the bar; 2: 5 of
  // 10 is no evidence (p = 0.033); 3: 2 of 2, p = 0.2^2 = 0.04; 4: rare and positional.
  s.rare_token_agreement = {0.6, 0.3, 0.5, 1.0, 0.6};
  assign_roles(s);
  CHECK(s.role == std::vector<int>{kRoleRareToken, 0, 0, 0, kRolePositional | kRoleRareToken});
  CHECK(role_name(s.role[4]) == "positional+rare_token");
  CHECK(role_test_p(1.0, 2, s.rare_token_baseline) == Approx(0.04).epsilon(1e-12));
  CHECK(role_test_p(0.5, 10, s.rare_token_baseline) == Approx(0.0327934976).epsilon(1e-9));
  CHECK(role_test_p(0.3, 1000, s.rare_token_baseline) < 1e-10);
  // The bar is the larger of the two: a baseline below chance leaves chance to beat.
  s.rare_token_baseline = baseline(0.2, 0.35);
  assign_roles(s);
  CHECK(s.role == std::vector<int>{0, 0, 0, 0, kRolePositional});
}

TEST_CASE("a syntactic head beats its relation's chance and baseline; no gold, no syntactic head",
          "[analysis][roles]") {
  HeadScores s = dec_scores(3);
  s.positional_share = {0.3, 0.3, 0.3};
  s.syntactic_head_baseline = baseline(0.3, 0.1);  // bar 0.3: a role needs 0.6
  s.dependent_baseline = baseline(0.25, 0.15);     // bar 0.25: a role needs 0.5
  s.syntactic_head_rows = {500, 500, 500};
  s.dependent_rows = {300, 300, 300};
  s.syntactic_head_agreement = {0.8, 0.55, 0.55};  // head 0 by its syntactic heads; 0.55 is not twice 0.3
  s.dependent_agreement = {0.2, 0.3, 0.6};         // head 2 by its dependents
  assign_roles(s);
  CHECK(s.role == std::vector<int>{kRoleSyntactic, 0, kRoleSyntactic});
  CHECK(role_name(kRolePositional | kRoleSyntactic | kRoleRareToken) == "positional+syntactic+rare_token");
  s.syntactic_head_baseline = {};  // translation: no parser, no gold relation, no baseline
  s.dependent_baseline = {};
  assign_roles(s);
  CHECK(s.role == std::vector<int>{0, 0, 0});
}

TEST_CASE("in an encoder_decoder only the encoder's heads are tested against the source's baselines",
          "[analysis][roles]") {
  HeadScores s;
  s.n_sites = 3;
  s.n_heads = 1;
  s.sites = {{AttentionKind::enc, 0}, {AttentionKind::dec, 0}, {AttentionKind::cross, 0}};
  s.baseline_kind = AttentionKind::enc;
  for (const HeadColumn& c : head_columns()) (s.*c.values).assign(3, kNaN);
  s.positional_share = {0.5, 0.5, kNaN};       // cross heads have no positions
  s.rare_token_baseline = baseline(0.3, 0.2);  // bar 0.3
  s.rare_token_rows = {800, 800, kNaN};
  s.rare_token_agreement = {0.7, 0.7, kNaN};  // the dec head's rows are the target's, not the baseline's
  assign_roles(s);
  CHECK(s.role == std::vector<int>{kRoleRareToken, 0, -1});
  CHECK(role_bits() == "positional=1,syntactic=2,rare_token=4");
}
