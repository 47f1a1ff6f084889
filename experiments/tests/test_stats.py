"""The statistics the experiments' verdicts rest on (experiments/stats.py, and the rules of each
experiment built on them), against SciPy and hand-worked cases.
Run: python3 -m pytest experiments/tests (CTest runs it as experiments_python)."""
import math
import os
import sys

import numpy as np
import pytest
from scipy import special
from scipy import stats as sp

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXPERIMENTS)
import stats  # noqa: E402
import verdicts as V  # noqa: E402
from head_count import runs as head_count_runs  # noqa: E402
from head_count import sweeps as head_count_sweeps  # noqa: E402
from pruning import analysis as pruning  # noqa: E402


# ---- mean and std -------------------------------------------------------------------------------


def test_mean_std_is_numpys_sample_std_without_nans():
    rng = np.random.default_rng(0)
    x = rng.normal(3, 2, size=17)
    m, s = stats.mean_std(list(x) + [math.nan])
    assert (m, s) == pytest.approx((x.mean(), x.std(ddof=1)), rel=1e-12)
    assert stats.mean_std([1.0, 2.0, 3.0, math.nan]) == (2.0, 1.0)
    assert stats.mean_std([5.0])[0] == 5.0 and math.isnan(stats.mean_std([5.0])[1])
    assert all(math.isnan(x) for x in stats.mean_std([]))


# ---- Holm ---------------------------------------------------------------------------------------


def test_holm_adjusts_step_down_by_hand():
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> running max 0.06.
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.6, 0.5]) == [1.0, 1.0]  # capped at 1
    assert stats.holm([]) == []


def test_holm_reject_is_the_textbook_step_down_rule():
    rng = np.random.default_rng(1)
    for alpha in (0.01, 0.05):
        for _ in range(200):
            p = rng.uniform(0, 3 * alpha, size=rng.integers(1, 12))
            order = np.argsort(p, kind="stable")
            expected = np.zeros(len(p), dtype=bool)
            for rank, k in enumerate(order):  # stop at the first non-rejection
                if p[k] > alpha / (len(p) - rank):
                    break
                expected[k] = True
            assert (stats.holm_reject(p, alpha) == expected).all()


# ---- Student's t ----------------------------------------------------------------------------------


def test_incomplete_beta_matches_scipy():
    for a, b in ((0.5, 0.5), (2.0, 0.5), (4.5, 0.5), (15.0, 0.5), (3.0, 7.0)):
        for x in (0.0, 1e-6, 0.1, 0.5, 0.9, 0.999, 1.0):
            assert stats.betai(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=1e-9, abs=1e-15)


def test_student_t_helpers_match_scipy():
    for df in (1, 2, 4, 9, 30):
        for t in (0.0, 0.5, 2.0, 7.0):
            assert stats.t_two_sided_p(t, df) == pytest.approx(2 * sp.t.sf(t, df), rel=1e-9, abs=1e-15)
        for q in (0.9, 0.975, 0.995):
            assert stats.t_quantile(q, df) == pytest.approx(sp.t.ppf(q, df), rel=1e-8)  # tables print 3 decimals
        # The 95% interval of a mean of df + 1 values with sample std 0.7.
        n, sd = df + 1, 0.7
        assert stats.t_half_width(sd, n) == pytest.approx(sp.t.interval(0.95, df, scale=sd / math.sqrt(n))[1], rel=1e-8)


def test_paired_comparison_is_scipys_paired_t_test_and_interval():
    a = {0: 1.0, 1: 1.2, 2: 0.9, 3: 1.1, 4: 1.05}
    b = {0: 1.3, 1: 1.25, 2: 1.2, 3: 1.5, 4: 1.1, 9: 5.0}  # seed 9 has no partner: left out
    c = stats.Paired(a, b)
    after, before = [b[s] for s in range(5)], [a[s] for s in range(5)]
    diffs = np.array(after) - np.array(before)
    assert c.n == 5 and c.mean == pytest.approx(diffs.mean())
    test = sp.ttest_rel(after, before)
    assert c.p == pytest.approx(test.pvalue, rel=1e-9)
    interval = test.confidence_interval(0.95)
    assert (c.lo, c.hi) == pytest.approx((interval.low, interval.high), rel=1e-9)
    assert c.p_holm == c.p  # until holm_paired adjusts it
    level = stats.Paired(a, a)
    assert (level.mean, level.p, level.lo, level.hi) == (0.0, 1.0, 0.0, 0.0)  # no spread, no difference
    exact = {0: 1.0, 1: 1.25, 2: 0.5, 3: 2.0}  # + 0.5 is exact in binary: no spread at all
    shifted = stats.Paired(exact, {s: v + 0.5 for s, v in exact.items()})
    assert shifted.p == 0.0 and shifted.lo == shifted.hi == pytest.approx(0.5)  # no spread, a difference
    one = stats.Paired({0: 1.0}, {0: 2.0})
    assert one.n == 1 and math.isnan(one.p) and math.isnan(one.lo)
    with_nan = stats.Paired({0: 1.0, 1: math.nan, 2: 2.0}, {0: 1.5, 1: 3.0, 2: 2.1})
    assert with_nan.n == 2  # the NaN pair is left out


def test_holm_paired_adjusts_each_comparisons_p():
    a, b = {0: 1.0, 1: 1.2, 2: 0.9, 3: 1.1}, {0: 1.3, 1: 1.25, 2: 1.2, 3: 1.5}
    c, level = stats.Paired(a, b), stats.Paired(a, a)
    assert stats.holm_paired([c, level]) == [c, level]
    assert c.p_holm == pytest.approx(min(1.0, 2 * c.p)) and level.p_holm == 1.0


# ---- paired differences over examples -------------------------------------------------------------


def test_paired_t_is_the_normal_approximation_of_the_paired_test():
    rng = np.random.default_rng(2)
    diffs = rng.normal([[0.0], [0.3], [-0.2]], 1.0, size=(3, 400))
    mean, p = stats.paired_t(diffs)
    z = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(400))
    assert mean == pytest.approx(diffs.mean(axis=1))
    assert p == pytest.approx(2 * sp.norm.sf(np.abs(z)), rel=1e-9)
    # Within 1% of Student's t at this many examples.
    assert p == pytest.approx(sp.ttest_1samp(diffs, 0.0, axis=1).pvalue, rel=0.01, abs=1e-5)
    # No spread: p 1 without a difference, 0 with one.
    mean, p = stats.paired_t(np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.5]]))
    assert list(p) == [1.0, 0.0]


def test_significant_splits_holm_rejections_by_sign():
    rng = np.random.default_rng(2)
    diffs = rng.normal([[0.0], [0.3], [-0.2]], 1.0, size=(3, 400))
    worse, better = stats.significant(diffs, 0.01)
    assert list(worse) == [False, True, False] and list(better) == [False, False, True]
    worse, better = stats.significant(diffs, 1e-30)  # nothing survives so strict a level
    assert not worse.any() and not better.any()


# ---- rank correlation ------------------------------------------------------------------------------


def test_ranks_are_scipys_average_ranks_from_zero():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 6, size=30).astype(float)
    assert stats.ranks(x) == pytest.approx(sp.rankdata(x, method="average") - 1)
    assert list(stats.ranks([3.0, 1.0, 3.0, 2.0])) == [2.5, 0.0, 2.5, 1.0]


def test_spearman_matches_scipy_with_ties_and_nans():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=40).astype(float)
    y = x + rng.normal(0, 2, size=40)
    y[[3, 7]] = np.nan
    keep = ~np.isnan(y)
    assert stats.spearman(x, y) == pytest.approx(sp.spearmanr(x[keep], y[keep]).correlation, rel=1e-12)
    grid_x, grid_y = rng.normal(size=(2, 4)), rng.normal(size=(2, 4))  # [L, H] arrays are flattened
    assert stats.spearman(grid_x, grid_y) == pytest.approx(sp.spearmanr(grid_x.ravel(), grid_y.ravel()).correlation)
    assert math.isnan(stats.spearman([1, 2], [2, 1]))  # fewer than 3 pairs
    assert math.isnan(stats.spearman([1, 1, 1, 1], [1, 2, 3, 4]))  # no spread


# ---- permutation test --------------------------------------------------------------------------------


def exact_stratified_p(runs, group):
    """P(at least the observed number of group units with outcome 1) when the labels are permuted
    within each model: a sum of independent hypergeometric counts (the statistic, group rate minus
    the rest's, grows with that number when the group sizes and totals are fixed)."""
    dist, observed = np.array([1.0]), 0
    for labels, outcome in runs:
        inside = np.isin(labels, group)
        n, k, g = len(labels), int(outcome.sum()), int(inside.sum())
        dist = np.convolve(dist, sp.hypergeom.pmf(np.arange(g + 1), n, k, g))
        observed += int(outcome[inside].sum())
    return float(dist[observed:].sum())


def test_permutation_p_matches_the_exact_stratified_test():
    rng = np.random.default_rng(5)
    runs = []
    for n in (8, 10, 6):
        labels = np.array(["a"] * 3 + ["b"] * (n - 3))
        rng.shuffle(labels)
        runs.append((labels, (rng.uniform(size=n) < np.where(labels == "a", 0.7, 0.4)).astype(float)))
    p, group_rate, rest_rate = stats.permutation_p(runs, ("a",), 20000)
    exact = exact_stratified_p(runs, ("a",))
    assert 0.01 < exact < 0.99  # a case where the count matters
    assert p == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 20000) + 1e-4)
    inside = np.concatenate([k[r == "a"] for r, k in runs])
    rest = np.concatenate([k[r != "a"] for r, k in runs])
    assert (group_rate, rest_rate) == (inside.mean(), rest.mean())
    assert stats.permutation_p(runs, ("a",), 200) == stats.permutation_p(runs, ("a",), 200)  # seeded


def test_permutation_p_by_hand():
    roles = np.array(["positional"] * 4 + ["none"] * 28)
    kept_first = np.r_[np.ones(4), np.zeros(28)]
    runs = [(roles, kept_first)] * 3
    p, spec, rest = stats.permutation_p(runs, pruning.SPECIALISED, 1000)
    assert (spec, rest) == (1.0, 0.0)
    # P(all 12 specialised slots land on kept heads by chance) is tiny: p is the floor 1/(N+1).
    assert p == pytest.approx(1 / 1001)
    assert stats.permutation_p([(roles, 1 - kept_first)] * 3, pruning.SPECIALISED, 1000)[0] == 1.0
    assert math.isnan(stats.permutation_p([(np.array(["none"] * 8), np.ones(8))], pruning.SPECIALISED, 1000)[0])
    v, rates = pruning.survival_claim([(r, k, np.zeros(len(r), dtype=int)) for r, k in runs])  # one stratum
    assert v.p == pytest.approx(1 / (1 + pruning.PERMUTATIONS)) and rates == (1.0, 0.0)


# ---- the experiments' rules on top -------------------------------------------------------------------


def test_pruning_drop_and_prunable_by_hand():
    assert pruning.drop("val_loss", 2.0, 2.1) == pytest.approx(0.05)  # relative
    assert pruning.drop("val_accuracy", 0.9, 0.8) == pytest.approx(0.1)  # points, as a fraction
    rows = [{"fraction_pruned": f, "val_loss": v} for f, v in
            [("0", "2.0"), ("0.25", "2.01"), ("0.5", "2.018"), ("0.75", "2.2"), ("1", "2.0")]]
    assert pruning.prunable("val_loss", rows) == 0.5  # stops at the first round beyond 1%, never resumes
    control = [{"val_loss": v} for v in ("2.0", "2.0", "2.0", "2.19", "2.0")]
    assert pruning.prunable("val_loss", rows, control=control) == 1.0  # each round against the control's same round
    assert pruning.at_half("val_loss", rows) == pytest.approx(2.018)
    assert math.isnan(pruning.at_half("val_loss", rows[:2]))  # the curve stops before half


def test_head_count_rate_choice_and_words_by_hand():
    rows = [{"heads": h, "lr": lr, "val_loss": v} for h, lr, v in
            [("1", "0.003", "2.0"), ("1", "0.001", "2.0"), ("1", "0.01", "2.5"), ("4", "0.01", "1.9"),
             ("4", "0.003", "1.95")]]
    assert head_count_runs.choose_rates(rows) == {1: 0.001, 4: 0.01}  # a tie goes to the lower rate
    # translation chooses by the highest val BLEU; a sweep that mixes tasks has no one rule
    bleu = [{**r, "task": "translate", "val_bleu": b} for r, b in zip(rows, ("7", "6", "8", "5", "5.5"))]
    assert head_count_runs.choose_rates(bleu) == {1: 0.01, 4: 0.003}
    assert head_count_runs.choose_rates(bleu, criterion=("val_loss", min)) == {1: 0.001, 4: 0.01}
    # every rate from best to worst: the runner-up is the second (a tie still goes to the lower rate)
    assert head_count_runs.ranked_rates(bleu) == {1: [0.01, 0.003, 0.001], 4: [0.003, 0.01]}
    assert head_count_runs.ranked_rates(rows) == {1: [0.001, 0.003, 0.01], 4: [0.01, 0.003]}
    with pytest.raises(SystemExit):
        head_count_runs.choose_rates([{**bleu[0], "task": "text"}] + bleu[1:])
    with pytest.raises(SystemExit):  # a translation run without its val BLEU
        head_count_runs.choose_rates([{**bleu[0], "val_bleu": ""}] + bleu[1:])
    # a loss task: paired t-test with a threshold of 1% of the reference's mean
    a = {s: 2.0 + 0.01 * s for s in range(5)}
    big = {s: a[s] + 0.05 + 0.001 * (s % 2) for s in range(5)}    # +2.5%, tight: worse (lower is better)
    small = {s: a[s] + 0.005 + 0.001 * (s % 2) for s in range(5)}  # +0.25%, tight: within the threshold
    noisy = {s: a[s] + (0.3 if s % 2 else -0.25) for s in range(5)}  # wide interval: neither
    v = V.holm_claims({k: head_count_sweeps.claim(a, x, False, 2.02) for k, x in
                       (("big", big), ("small", small), ("noisy", noisy))}, level=head_count_sweeps.ALPHA)
    assert head_count_sweeps.verdict_word(v["big"], -1) == "worse"
    assert head_count_sweeps.verdict_word(v["big"], +1) == "better"
    assert head_count_sweeps.verdict_word(v["small"], -1) == head_count_sweeps.NO_DIFFERENCE
    assert head_count_sweeps.verdict_word(v["noisy"], -1) == head_count_sweeps.NOT_RESOLVED
    # an accuracy task: runs solved, Fisher; 5 of 5 against 0 of 5 resolves even after Holm over 5
    solved, stuck = {s: 1.0 for s in range(5)}, {s: 0.3 for s in range(5)}
    claims = {k: head_count_sweeps.claim(stuck, solved, "test_accuracy", 0.3) for k in range(5)}
    assert all(x.outcome == V.HOLDS for x in V.holm_claims(claims, level=0.05).values())
    claims.update({5: claims[0], 6: claims[0]})  # seven comparisons: 7 x 2/252 > 0.05, nothing can be resolved
    assert all(x.outcome == V.INCONCLUSIVE for x in V.holm_claims(claims, level=0.05).values())
