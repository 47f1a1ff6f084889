"""The statistics the experiments' verdicts rest on, in one place (experiments/tests/test_stats.py
checks each against SciPy or a hand-worked case). Pure Python and NumPy: SciPy is for the tests.

  mean_std                   mean and sample std, NaN-aware
  holm, holm_reject          Holm's step-down correction: adjusted p values; which are rejected
  betai, t_two_sided_p,      Student's t: the two-sided p, the quantiles, the 95% interval of a
  t_quantile, t_half_width   mean (head_count: t-tests and intervals over seeds)
  Paired, holm_paired        B - A over seeds: mean, 95% t-interval, paired t-test; Holm over several
  paired_t, significant      per-example paired differences, normal approximation (pruning)
  ranks, spearman            Spearman's rank correlation, ties as mean ranks
  sign_test_p                the exact two-sided sign test (binomial, p = 1/2) of paired differences
  wilcoxon_p                 the exact two-sided Wilcoxon signed-rank test (all 2^n sign flips)
  fisher_exact_p             Fisher's exact test of a 2 x 2 table (hypergeometric, math.comb)
  permuted_labels,           a one-sided permutation test of a group's rate against the rest,
  permutation_p              labels permuted within each model, or within each stratum (layer)
verdicts.py turns these into verdicts (levels, practical thresholds, the papers' criteria).
"""
import math

import numpy as np


def mean_std(values):
    """Mean and sample standard deviation (n - 1) of the non-NaN values; NaN where undefined."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else math.nan
    return m, s


# ---- Holm ---------------------------------------------------------------------------------------


def holm(p_values):
    """Holm's step-down adjusted p values, in the input's order: sorted ascending, the k-th smallest
    (k from 0) becomes max over j <= k of min(1, (m - j) p_(j)). A hypothesis is rejected at
    family-wise level alpha where its adjusted p is at most alpha. Ties keep their input order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running, m = [math.nan] * len(p_values), 0.0, len(p_values)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def holm_reject(p_values, alpha):
    """Holm-Bonferroni: [K] bool, which of the p values are rejected at family-wise level alpha."""
    return np.array(holm([float(x) for x in p_values])) <= alpha


# ---- Student's t (no SciPy at run time) -----------------------------------------------------------


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (Numerical Recipes 6.4)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > 1e-300 else 1e-300
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > 1e-300 else 1e-300
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betai(a, b, x):
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1.0 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbeta) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbeta) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t, df):
    return betai(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(q, df):
    """The q-quantile (q > 0.5) of Student's t by bisection on the two-sided p."""
    target = 2.0 * (1.0 - q)
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def t_half_width(sd, n):
    """Half the width of the 95% t-interval of a mean of n values with sample std sd:
    t_(0.975, n - 1) * sd / sqrt(n)."""
    return t_quantile(0.975, n - 1) * (sd / math.sqrt(n))


# ---- paired comparisons over seeds (head_count) ---------------------------------------------------


class Paired:
    """B - A over the seeds both arms have ({seed: value} each; NaN pairs left out): mean, 95%
    t-interval (lo, hi), two-sided paired t-test p, and p_holm (p until holm_paired adjusts it)."""

    def __init__(self, a, b):
        seeds = sorted(set(a) & set(b))
        self.diffs = [b[s] - a[s] for s in seeds if not (math.isnan(a[s]) or math.isnan(b[s]))]
        self.n = len(self.diffs)
        self.mean, sd = mean_std(self.diffs)
        if self.n < 2:
            self.lo = self.hi = math.nan
            self.p = math.nan
        elif sd == 0.0:
            self.lo = self.hi = self.mean
            self.p = 1.0 if self.mean == 0.0 else 0.0
        else:
            self.p = t_two_sided_p(self.mean / (sd / math.sqrt(self.n)), self.n - 1)
            half = t_half_width(sd, self.n)
            self.lo, self.hi = self.mean - half, self.mean + half
        self.p_holm = self.p


def holm_paired(comparisons):
    """Holm's step-down adjustment of the Paired comparisons' p values (into .p_holm), in place."""
    for c, adjusted in zip(comparisons, holm([c.p for c in comparisons])):
        c.p_holm = adjusted
    return comparisons


# ---- paired differences over examples (pruning) ----------------------------------------------------


def paired_t(diffs):
    """diffs [K, E] -> (mean [K], two-sided p [K]) of a paired t-test, normal approximation."""
    mean = diffs.mean(axis=1)
    se = diffs.std(axis=1, ddof=1) / math.sqrt(diffs.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, np.abs(mean) / se, np.where(mean == 0, 0.0, np.inf))
    return mean, np.array([math.erfc(v / math.sqrt(2)) for v in z])


def significant(diffs, alpha):
    """(worse, better) [K] bool: Holm-corrected paired t-tests of the rows of diffs (masked - full
    per-example loss: > 0 is worse) at family-wise level alpha."""
    mean, p = paired_t(diffs)
    reject = holm_reject(p, alpha)
    return reject & (mean > 0), reject & (mean < 0)


# ---- rank correlation ------------------------------------------------------------------------------


def ranks(values):
    """Ranks from 0, ties given the mean of their ranks."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(len(values), dtype=float)
    for v in np.unique(values):
        tied = values == v
        r[tied] = r[tied].mean()
    return r


def spearman(x, y):
    """Spearman's rho over the pairs where neither is NaN; NaN for fewer than 3 pairs or no spread."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    keep = ~(np.isnan(x) | np.isnan(y))
    if keep.sum() < 3:
        return math.nan
    rx, ry = ranks(x[keep]), ranks(y[keep])
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


# ---- exact tests over few units (seeds, solved runs) ---------------------------------------------------


def _nonzero(diffs):
    """The paired differences that are neither 0 nor NaN (exact tests drop zero differences)."""
    return [float(d) for d in diffs if not math.isnan(d) and d != 0.0]


def sign_test_p(diffs):
    """Exact two-sided sign test of paired differences (zeros and NaN left out): with k of the n
    non-zero differences positive, p = min(1, 2 min(P(X <= k), P(X >= k))), X ~ Binomial(n, 1/2).
    NaN when no difference is non-zero. The smallest p it can give is 2 / 2^n: 0.25 at n = 3,
    0.0625 at n = 5, 0.03125 at n = 6."""
    d = _nonzero(diffs)
    n, k = len(d), sum(x > 0 for x in d)
    if n == 0:
        return math.nan
    low = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    high = sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n
    return min(1.0, 2.0 * min(low, high))


WILCOXON_MAX_N = 20  # 2^20 sign patterns: the exact enumeration's limit


def wilcoxon_p(diffs):
    """Exact two-sided Wilcoxon signed-rank test of paired differences (zeros and NaN left out, as
    Wilcoxon's original): W+ = the sum of the ranks of |d| (ties as mean ranks) of the positive
    differences, its null distribution enumerated over all 2^n sign patterns (exact with ties too,
    conditional on the ranks); p = P(|W+ - n(n+1)/4| >= observed), at most 1. NaN when no
    difference is non-zero; ValueError above WILCOXON_MAX_N differences. Its smallest p is
    2 / 2^n, as the sign test's: 0.0625 at n = 5."""
    d = _nonzero(diffs)
    n = len(d)
    if n == 0:
        return math.nan
    if n > WILCOXON_MAX_N:
        raise ValueError(f"wilcoxon_p: {n} differences, more than the exact enumeration's {WILCOXON_MAX_N}")
    r = ranks([abs(x) for x in d]) + 1.0
    centre = float(r.sum()) / 2.0
    observed = abs(sum(float(rank) for rank, x in zip(r, d) if x > 0) - centre)
    # W+ over every sign pattern: the distribution of sums of subsets of the ranks (doubled to integers).
    counts = {0: 1}
    for rank in (int(round(2 * v)) for v in r):
        nxt = dict(counts)
        for w, c in counts.items():
            nxt[w + rank] = nxt.get(w + rank, 0) + c
        counts = nxt
    extreme = sum(c for w, c in counts.items() if abs(w / 2.0 - centre) >= observed - 1e-9)
    return min(1.0, extreme / 2 ** n)


def hypergeom_pmf(k, total, successes, draws):
    """P(k successes in `draws` draws without replacement from `total` holding `successes`)."""
    if k < max(0, draws - (total - successes)) or k > min(draws, successes):
        return 0.0
    return math.comb(successes, k) * math.comb(total - successes, draws - k) / math.comb(total, draws)


def fisher_exact_p(table, alternative="two-sided"):
    """Fisher's exact test of the 2 x 2 table [[a, b], [c, d]] (rows: arms; columns: solved, not
    solved), conditional on the margins: a is hypergeometric. 'two-sided': the sum of the
    probabilities of the tables no more probable than the observed one (relative tolerance 1e-7,
    as R and SciPy); 'greater': P(a' >= a), the first row solves more often; 'less': P(a' <= a)."""
    (a, b), (c, d) = table
    if min(a, b, c, d) < 0:
        raise ValueError(f"fisher_exact_p: negative count in {table}")
    total, row, col = a + b + c + d, a + b, a + c
    lo, hi = max(0, row - (total - col)), min(row, col)
    pmf = {k: hypergeom_pmf(k, total, col, row) for k in range(lo, hi + 1)}
    if alternative == "greater":
        return min(1.0, sum(p for k, p in pmf.items() if k >= a))
    if alternative == "less":
        return min(1.0, sum(p for k, p in pmf.items() if k <= a))
    if alternative != "two-sided":
        raise ValueError(f"fisher_exact_p: alternative {alternative!r}")
    observed = pmf[a]
    return min(1.0, sum(p for p in pmf.values() if p <= observed * (1 + 1e-7)))


# ---- permutation test --------------------------------------------------------------------------------


def permuted_labels(labels, strata, rng):
    """One draw of the labels permuted within each stratum (strata: [N] keys, e.g. each head's layer;
    None: one stratum, the whole array). A label never leaves its stratum."""
    if strata is None:
        return rng.permutation(labels)
    out = np.array(labels, copy=True)
    strata = np.asarray(strata)
    for key in sorted(set(strata.tolist())):
        idx = np.flatnonzero(strata == key)
        out[idx] = rng.permutation(out[idx])
    return out


def permutation_p(runs, group, permutations, seed=0, strata=None):
    """runs: [(labels [N], outcome [N] 0/1)], one per model. One-sided p that the units whose label
    is in `group` have outcome 1 more often than the rest, the labels permuted within each model
    (`permutations` draws of default_rng(seed); p = (1 + draws at least as extreme) / (1 + draws));
    and the observed rates of the group and of the rest. NaN p where either side is empty.
    strata: None, or one [N] array per run (each unit's layer, say): the labels are then permuted
    only within each stratum of each model, so a group that sits in one layer is compared with
    that layer's other units only. strata=None draws exactly what it drew before strata existed."""
    def stat(rs):
        inside = np.concatenate([k[np.isin(r, group)] for r, k in rs])
        rest = np.concatenate([k[~np.isin(r, group)] for r, k in rs])
        if len(inside) == 0 or len(rest) == 0:
            return math.nan, math.nan, math.nan
        return inside.mean() - rest.mean(), inside.mean(), rest.mean()
    observed, group_rate, rest_rate = stat(runs)
    if math.isnan(observed):
        return math.nan, group_rate, rest_rate
    if strata is not None and len(strata) != len(runs):
        raise ValueError(f"permutation_p: {len(strata)} strata arrays for {len(runs)} runs")
    per_run = strata if strata is not None else [None] * len(runs)
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(permutations):
        count += stat([(permuted_labels(r, st, rng), k) for (r, k), st in zip(runs, per_run)])[0] >= observed
    return (1 + count) / (1 + permutations), group_rate, rest_rate
