// Voita et al.'s roles by fixed rules: see include/headlab/analysis/head_roles.h and
// docs/analysis.md.
#include "headlab/analysis/head_roles.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace headlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double value(const std::vector<double>& column, int64_t k) {  // NaN for a column scores left empty
  return k < static_cast<int64_t>(column.size()) ? column[static_cast<size_t>(k)] : kNaN;
}

}  // namespace

const std::vector<HeadRole>& head_roles() {
  static const std::vector<HeadRole> roles = {
      {kRolePositional, "positional"}, {kRoleSyntactic, "syntactic"}, {kRoleRareToken, "rare_token"}};
  return roles;
}

std::string role_name(int role) {
  if (role < 0) return "";
  std::string out;
  for (const HeadRole& r : head_roles())
    if (role & r.bit) {
      if (!out.empty()) out += '+';
      out += r.name;
    }
  return out.empty() ? "none" : out;
}

std::string role_bits() {
  std::string out;
  for (const HeadRole& r : head_roles()) {
    if (!out.empty()) out += ',';
    out += r.name;
    out += '=';
    out += std::to_string(r.bit);
  }
  return out;
}

double binomial_upper_tail(int64_t hits, int64_t n, double p) {
  if (hits <= 0) return 1.0;
  if (hits > n) return 0.0;
  if (p <= 0) return 0.0;
  if (p >= 1) return 1.0;
  const auto lchoose = [](double n_, double k) {
    return std::lgamma(n_ + 1) - std::lgamma(k + 1) - std::lgamma(n_ - k + 1);
  };
  const double nd = static_cast<double>(n), log_odds = std::log(p) - std::log1p(-p);
  // log P(X = k) for k = hits, hits+1, ...; a running log-sum-exp (max m, sum s of exp(lt - m)).
  double lt = lchoose(nd, static_cast<double>(hits)) + static_cast<double>(hits) * std::log(p) +
              (nd - static_cast<double>(hits)) * std::log1p(-p);
  double m = lt, s = 1;
  const double mode = std::floor((nd + 1) * p);
  for (int64_t k = hits; k < n; ++k) {
    lt += std::log(nd - static_cast<double>(k)) - std::log(static_cast<double>(k + 1)) + log_odds;
    if (lt > m) {
      s = s * std::exp(m - lt) + 1;
      m = lt;
    } else {
      s += std::exp(lt - m);
    }
    // Past the mode the terms only shrink: stop once they no longer change a double.
    if (static_cast<double>(k + 1) > mode && lt < m + std::log(s) - 40) break;
  }
  return std::clamp(std::exp(m + std::log(s)), 0.0, 1.0);
}

double role_test_p(double agreement, double rows, const PositionalBaseline& baseline) {
  const double bar = std::max(baseline.chance, baseline.agreement);
  if (std::isnan(agreement) || std::isnan(rows) || rows <= 0 || std::isnan(baseline.chance) ||
      std::isnan(baseline.agreement))
    return kNaN;
  // agreement = hits / rows exactly (finish_attention_stats), so rounding recovers the hits.
  return binomial_upper_tail(std::llround(agreement * rows), std::llround(rows), bar);
}

bool beats_baselines(double agreement, double rows, const PositionalBaseline& baseline) {
  const double p = role_test_p(agreement, rows, baseline);
  const double bar = std::max(baseline.chance, baseline.agreement);
  return !std::isnan(p) && agreement > bar && agreement >= kRoleMinRatio * bar && p < kRoleLevel;
}

void assign_roles(HeadScores& s) {
  const int64_t N = s.n_total();
  s.role.assign(static_cast<size_t>(N), -1);
  for (int64_t k = 0; k < N; ++k) {
    const double share = value(s.positional_share, k);
    if (std::isnan(share)) continue;  // no positions (cross heads) or no attention statistics
    int role = share >= kPositionalShare ? kRolePositional : 0;
    if (s.site(s.site_of(k)).kind == s.baseline_kind) {
      if (beats_baselines(value(s.syntactic_head_agreement, k), value(s.syntactic_head_rows, k),
                          s.syntactic_head_baseline) ||
          beats_baselines(value(s.dependent_agreement, k), value(s.dependent_rows, k), s.dependent_baseline))
        role |= kRoleSyntactic;
      if (beats_baselines(value(s.rare_token_agreement, k), value(s.rare_token_rows, k), s.rare_token_baseline))
        role |= kRoleRareToken;
    }
    s.role[static_cast<size_t>(k)] = role;
  }
}

}  // namespace headlab
