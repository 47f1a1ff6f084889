// Voita et al.'s (2019) roles of heads, named from heads.csv's columns by fixed rules
// (docs/analysis.md, "Roles: Voita et al.'s criteria, applied"):
//   positional  positional_share >= kPositionalShare
//   rare_token  rare_token_agreement at least kRoleMinRatio times the larger of chance_ and
//               baseline_rare_token_agreement (the bar), and a one-sided exact binomial test of
//               agreement > the bar over the head's rare_token_rows gives p < kRoleLevel
//   syntactic   the same test for syntactic_head_agreement or dependent_agreement (gold data)
// Only heads of scores.baseline_kind are tested against the baselines (they were counted on their
// rows); a head without positions (cross, or no attention statistics) gets no role (-1).
//   assign_roles(scores);                       // analyze_heads does this
//   std::string r = role_name(scores.role[k]);  // "positional+rare_token", "none", "" (-1)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/analysis/heads.h"

namespace headlab {

inline constexpr double kPositionalShare = 0.9;  // Voita et al.'s 90%
inline constexpr double kRoleLevel = 0.01;       // the binomial tests' level
// The effect a relation role needs besides significance: agreement >= this times the bar. Rows
// of one sentence are not independent trials, so over a split of thousands of rows p alone calls
// an excess of a few points significant.
inline constexpr double kRoleMinRatio = 2.0;

// The roles' bits in HeadScores::role, and their names in the order role_name joins them.
enum : int { kRolePositional = 1, kRoleSyntactic = 2, kRoleRareToken = 4 };
struct HeadRole {
  int bit;
  const char* name;
};
const std::vector<HeadRole>& head_roles();
std::string role_name(int role);  // the names joined with '+'; "none" for 0, "" for -1
std::string role_bits();          // "positional=1,syntactic=2,rare_token=4" (heads.h5's role_bits)

// P(X >= hits) for X ~ Binomial(n, p), summed exactly in log space.
double binomial_upper_tail(int64_t hits, int64_t n, double p);

// The one-sided test of a head's agreement over `rows` rows against the relation's bar, the
// larger of its chance and positional baseline: p = P(X >= agreement * rows), X ~ Binomial(rows,
// bar). NaN when there is nothing to test (no rows, no baseline).
double role_test_p(double agreement, double rows, const PositionalBaseline& baseline);
// agreement >= kRoleMinRatio * the bar (and > it) and role_test_p < kRoleLevel.
bool beats_baselines(double agreement, double rows, const PositionalBaseline& baseline);

// Fills scores.role (size n_total()) from the columns and the baselines.
void assign_roles(HeadScores& scores);

}  // namespace headlab
