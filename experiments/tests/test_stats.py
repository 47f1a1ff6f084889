"""The statistics the experiments' verdicts rest on, against SciPy and hand-worked cases.
Run: python3 -m pytest experiments/tests (CTest runs it as experiments_python)."""
import importlib.util
import math
import os
import sys

import numpy as np
import pytest
from scipy import stats

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXPERIMENTS)
import common  # noqa: E402


def load(name):
    spec = importlib.util.spec_from_file_location(f"{name}_make_results",
                                                  os.path.join(EXPERIMENTS, name, "make_results.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pruning = load("pruning")
head_count = load("head_count")


def test_holm_adjusts_step_down_by_hand():
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> running max 0.06.
    assert common.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert common.holm([0.6, 0.5]) == [1.0, 1.0]  # capped at 1
    assert common.holm([]) == []


def test_pruning_holm_rejects_what_the_step_down_rule_rejects():
    rng = np.random.default_rng(1)
    for _ in range(200):
        p = rng.uniform(0, 3 * pruning.ALPHA, size=rng.integers(1, 12))
        order = np.argsort(p, kind="stable")
        expected = np.zeros(len(p), dtype=bool)
        for rank, k in enumerate(order):  # the textbook rule: stop at the first non-rejection
            if p[k] > pruning.ALPHA / (len(p) - rank):
                break
            expected[k] = True
        assert (pruning.holm(p) == expected).all()


def test_paired_t_is_the_normal_approximation_of_the_paired_test():
    rng = np.random.default_rng(2)
    diffs = rng.normal([[0.0], [0.3], [-0.2]], 1.0, size=(3, 400))
    mean, p = pruning.paired_t(diffs)
    z = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(400))
    assert mean == pytest.approx(diffs.mean(axis=1))
    assert p == pytest.approx(2 * stats.norm.sf(np.abs(z)), rel=1e-9)
    # Within 1% of Student's t at this many examples.
    assert p == pytest.approx(stats.ttest_1samp(diffs, 0.0, axis=1).pvalue, rel=0.01, abs=1e-5)
    worse, better = pruning.significant(diffs)
    assert list(worse) == [False, True, False] and list(better) == [False, False, True]


def test_spearman_matches_scipy_with_ties_and_nans():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=40).astype(float)
    y = x + rng.normal(0, 2, size=40)
    y[[3, 7]] = np.nan
    keep = ~np.isnan(y)
    assert pruning.spearman(x, y) == pytest.approx(stats.spearmanr(x[keep], y[keep]).correlation, rel=1e-12)
    assert math.isnan(pruning.spearman([1, 2], [2, 1]))  # fewer than 3 pairs
    assert math.isnan(pruning.spearman([1, 1, 1, 1], [1, 2, 3, 4]))  # no spread


def test_permutation_p_separates_kept_roles_from_chance():
    roles = np.array(["positional"] * 4 + ["none"] * 28)
    kept_first = np.r_[np.ones(4), np.zeros(28)]
    runs = [(roles, kept_first)] * 3
    p, spec, rest = pruning.permutation_p(runs)
    assert (spec, rest) == (1.0, 0.0)
    # P(all 12 specialised slots land on kept heads by chance) is tiny: p is the floor 1/(N+1).
    assert p == pytest.approx(1 / (1 + pruning.PERMUTATIONS))
    p_reversed, _, _ = pruning.permutation_p([(roles, 1 - kept_first)] * 3)
    assert p_reversed == 1.0
    assert math.isnan(pruning.permutation_p([(np.array(["none"] * 8), np.ones(8))])[0])


def test_drop_and_prunable_by_hand():
    assert pruning.drop("val_loss", 2.0, 2.1) == pytest.approx(0.05)  # relative
    assert pruning.drop("val_accuracy", 0.9, 0.8) == pytest.approx(0.1)  # points, as a fraction
    rows = [{"fraction_pruned": f, "val_loss": v} for f, v in
            [("0", "2.0"), ("0.25", "2.05"), ("0.5", "2.09"), ("0.75", "2.2"), ("1", "2.0")]]
    assert pruning.prunable("val_loss", rows) == 0.5  # stops at the first round beyond 5%, never resumes


def test_student_t_helpers_match_scipy():
    for df in (1, 2, 4, 9, 30):
        for t in (0.0, 0.5, 2.0, 7.0):
            assert head_count.t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9, abs=1e-15)
        assert head_count.t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)


def test_paired_comparison_is_scipys_paired_t_test_and_interval():
    a = {0: 1.0, 1: 1.2, 2: 0.9, 3: 1.1, 4: 1.05}
    b = {0: 1.3, 1: 1.25, 2: 1.2, 3: 1.5, 4: 1.1, 9: 5.0}  # seed 9 has no partner: left out
    c = head_count.Paired(a, b)
    diffs = np.array([b[s] - a[s] for s in range(5)])
    assert c.n == 5 and c.mean == pytest.approx(diffs.mean())
    assert c.p == pytest.approx(stats.ttest_rel([b[s] for s in range(5)], [a[s] for s in range(5)]).pvalue, rel=1e-9)
    half = stats.t.ppf(0.975, 4) * diffs.std(ddof=1) / math.sqrt(5)
    assert (c.lo, c.hi) == pytest.approx((diffs.mean() - half, diffs.mean() + half), rel=1e-9)
    comparisons = head_count.holm([c, head_count.Paired(a, a)])
    assert comparisons[0].p_holm == pytest.approx(min(1.0, 2 * c.p))


def test_mean_std_and_pm():
    assert common.mean_std([1.0, 2.0, 3.0, math.nan]) == (2.0, 1.0)
    assert all(math.isnan(x) for x in common.mean_std([]))
    assert common.pm(1.23456, 0.1, 2) == "1.23 ± 0.10"
    assert common.pm(1.0, math.nan, 1) == "1.0"
