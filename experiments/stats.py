"""The statistics the experiments' verdicts rest on, in one place (experiments/tests/test_stats.py
checks each against SciPy or a hand-worked case). Pure Python and NumPy: SciPy is for the tests.

  mean_std                   mean and sample std, NaN-aware
  holm, holm_reject          Holm's step-down correction: adjusted p values; which are rejected
  betai, t_two_sided_p,      Student's t: the two-sided p, the quantiles, the 95% interval of a
  t_quantile, t_half_width   mean (head_count: t-tests and intervals over seeds)
  Paired, holm_paired        B - A over seeds: mean, 95% t-interval, paired t-test; Holm over several
  paired_t, significant      per-example paired differences, normal approximation (pruning)
  ranks, spearman            Spearman's rank correlation, ties as mean ranks
  permutation_p              a one-sided permutation test of a group's rate against the rest
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


# ---- permutation test --------------------------------------------------------------------------------


def permutation_p(runs, group, permutations, seed=0):
    """runs: [(labels [N], outcome [N] 0/1)], one per model. One-sided p that the units whose label
    is in `group` have outcome 1 more often than the rest, the labels permuted within each model
    (`permutations` draws of default_rng(seed); p = (1 + draws at least as extreme) / (1 + draws));
    and the observed rates of the group and of the rest. NaN p where either side is empty."""
    def stat(rs):
        inside = np.concatenate([k[np.isin(r, group)] for r, k in rs])
        rest = np.concatenate([k[~np.isin(r, group)] for r, k in rs])
        if len(inside) == 0 or len(rest) == 0:
            return math.nan, math.nan, math.nan
        return inside.mean() - rest.mean(), inside.mean(), rest.mean()
    observed, group_rate, rest_rate = stat(runs)
    if math.isnan(observed):
        return math.nan, group_rate, rest_rate
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(permutations):
        count += stat([(rng.permutation(r), k) for r, k in runs])[0] >= observed
    return (1 + count) / (1 + permutations), group_rate, rest_rate
