"""The shared verdict rules (experiments/verdicts.py) and the exact tests under them
(experiments/stats.py: sign, Wilcoxon, Fisher, the stratified permutation test), against
hand-computed cases and SciPy. Run: python3 -m pytest experiments/tests."""
import math
import os
import sys
from itertools import product

import numpy as np
import pytest
from scipy import stats as sp

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXPERIMENTS)
import stats  # noqa: E402
import verdicts as V  # noqa: E402


# ---- the exact tests (stats.py) --------------------------------------------------------------------


def test_sign_test_by_hand():
    # n = 3, all one way: 2 x (1/2)^3 = 0.25 (the reviewer's "every one of 3 seeds").
    assert stats.sign_test_p([0.1, 0.2, 0.3]) == 0.25
    # n = 5, all one way: 2 / 32 = 0.0625, the smallest two-sided p at 5 seeds; 6 seeds: 0.03125.
    assert stats.sign_test_p([1, 2, 3, 4, 5]) == 0.0625
    assert stats.sign_test_p([-1] * 6) == 0.03125
    # n = 5, 4 of 5 positive: 2 x (C(5,4) + C(5,5)) / 32 = 12 / 32.
    assert stats.sign_test_p([1, 1, 1, 1, -1]) == pytest.approx(12 / 32)
    assert stats.sign_test_p([1, -1]) == 1.0  # capped
    assert stats.sign_test_p([0.0, 2.0, math.nan, 3.0]) == 0.5  # zeros and NaN dropped: n = 2
    assert math.isnan(stats.sign_test_p([0.0, 0.0]))


def test_sign_test_matches_scipys_binomial_test():
    rng = np.random.default_rng(5)
    for _ in range(100):
        d = rng.normal(0.4, 1, size=rng.integers(1, 15))
        assert stats.sign_test_p(d) == pytest.approx(sp.binomtest(int((d > 0).sum()), len(d)).pvalue, rel=1e-12)


def test_wilcoxon_by_hand_and_against_scipy():
    # All 5 positive: W+ = 15, the largest of 32 equally likely sign patterns (and W+ = 0 the
    # smallest): 2 / 32.
    assert stats.wilcoxon_p([0.5, 0.1, 0.4, 0.2, 0.3]) == 0.0625
    # d = [1, 2, -3]: ranks 1, 2, 3; W+ = 3, centre 3, every pattern is at least as far: p = 1.
    assert stats.wilcoxon_p([1.0, 2.0, -3.0]) == 1.0
    # d = [1, 2, 3, -4]: W+ = 6, centre 5; |W+ - 5| >= 1 for the sums 0,1,2,3,4,6,7,8,9,10 of the
    # 16 patterns: the subset sums of {1,2,3,4} equal to 5 are {1,4} and {2,3}: p = 14 / 16.
    assert stats.wilcoxon_p([1.0, 2.0, 3.0, -4.0]) == pytest.approx(14 / 16)
    rng = np.random.default_rng(6)
    for _ in range(100):
        d = rng.normal(0.5, 1, size=rng.integers(1, 13))
        assert stats.wilcoxon_p(d) == pytest.approx(sp.wilcoxon(d, method="exact").pvalue, rel=1e-12)
    with pytest.raises(ValueError):
        stats.wilcoxon_p(np.arange(1, stats.WILCOXON_MAX_N + 2))


def test_wilcoxon_with_ties_is_the_exact_sign_flip_distribution():
    d = [1.0, 1.0, 2.0, -2.0, 3.0]  # mean ranks 1.5, 1.5, 3.5, 3.5, 5
    r = stats.ranks(np.abs(d)) + 1
    observed = abs(sum(x for x, v in zip(r, d) if v > 0) - r.sum() / 2)
    flips = [abs(sum(x for x, s in zip(r, signs) if s) - r.sum() / 2) for signs in product([0, 1], repeat=5)]
    assert stats.wilcoxon_p(d) == pytest.approx(sum(f >= observed - 1e-12 for f in flips) / 32)


def test_fisher_exact_by_hand():
    # [[3, 0], [0, 3]]: rows 3, 3; columns 3, 3; N = 6. P(a) = C(3,a) C(3,3-a) / C(6,3) = 1, 9, 9, 1 over 20.
    assert stats.hypergeom_pmf(3, 6, 3, 3) == pytest.approx(1 / 20)
    assert stats.hypergeom_pmf(2, 6, 3, 3) == pytest.approx(9 / 20)
    assert stats.fisher_exact_p([[3, 0], [0, 3]]) == pytest.approx(2 / 20)
    assert stats.fisher_exact_p([[3, 0], [0, 3]], "greater") == pytest.approx(1 / 20)
    assert stats.fisher_exact_p([[3, 0], [0, 3]], "less") == pytest.approx(1.0)
    # 5 runs each, 4 of 5 solved against 0 of 5: columns 4, 6, N = 10, C(10,5) = 252.
    # P(a = 4) = C(4,4) C(6,1) / 252 = 6/252; P(a = 0) = C(4,0) C(6,5) / 252 = 6/252; the others
    # (a = 1, 2, 3: 60, 120, 60 over 252) are more probable: two-sided 12/252 = 0.0476.
    assert stats.fisher_exact_p([[4, 1], [0, 5]]) == pytest.approx(12 / 252)
    # 5 of 5 against 0 of 5: 2 / 252 (the smallest two-sided p with 5 runs an arm).
    assert stats.fisher_exact_p([[5, 0], [0, 5]]) == pytest.approx(2 / 252)
    assert stats.hypergeom_pmf(7, 10, 4, 5) == 0.0  # outside the support
    with pytest.raises(ValueError):
        stats.fisher_exact_p([[1, 0], [0, 1]], "sideways")


def test_fisher_exact_matches_scipy():
    rng = np.random.default_rng(7)
    for _ in range(300):
        table = rng.integers(0, 9, size=(2, 2)).tolist()
        for alternative in ("two-sided", "greater", "less"):
            assert stats.fisher_exact_p(table, alternative) == pytest.approx(
                sp.fisher_exact(table, alternative).pvalue, rel=1e-10, abs=1e-15)


def test_permuted_labels_never_mix_layers():
    rng = np.random.default_rng(8)
    labels = np.array(list("aabbcdcdeeff"))
    layers = np.array([0] * 4 + [1] * 4 + [2] * 4)
    seen = set()
    for _ in range(300):
        out = stats.permuted_labels(labels, layers, rng)
        for layer in range(3):
            assert sorted(out[layers == layer]) == sorted(labels[layers == layer])
        seen.add(tuple(out))
    assert len(seen) > 20  # it does permute within the layers
    # Layers need not be contiguous.
    layers = np.array([0, 1] * 6)
    for _ in range(50):
        out = stats.permuted_labels(labels, layers, rng)
        assert sorted(out[layers == 0]) == sorted(labels[layers == 0])


def test_unstratified_permutation_p_draws_as_before():
    """strata=None is the test the pruning RESULTS.md was rendered with: the same draws."""
    rng = np.random.default_rng(9)
    runs = [(rng.choice(np.array(["positional", "none", "rare"]), 16), rng.integers(0, 2, 16)) for _ in range(3)]
    group = ("positional", "rare")

    def old(rs, permutations, seed=0):  # permutation_p before strata existed, verbatim
        def stat(rs):
            inside = np.concatenate([k[np.isin(r, group)] for r, k in rs])
            rest = np.concatenate([k[~np.isin(r, group)] for r, k in rs])
            return inside.mean() - rest.mean()
        observed, g = stat(rs), np.random.default_rng(seed)
        return (1 + sum(stat([(g.permutation(r), k) for r, k in rs]) >= observed for _ in range(permutations))) / (
            1 + permutations)

    assert stats.permutation_p(runs, group, 500)[0] == old(runs, 500)


def exact_stratified_p(units, group):
    """P(at least the observed group units with outcome 1), labels permuted within each stratum:
    a sum of independent hypergeometric counts, one per stratum."""
    dist, observed = np.array([1.0]), 0
    for labels, outcome in units:
        inside = np.isin(labels, group)
        n, k, g = len(labels), int(outcome.sum()), int(inside.sum())
        dist = np.convolve(dist, sp.hypergeom.pmf(np.arange(g + 1), n, k, g))
        observed += int(outcome[inside].sum())
    return float(dist[observed:].sum())


def test_stratified_permutation_p_matches_the_exact_test_by_layer():
    rng = np.random.default_rng(10)
    runs, strata, units = [], [], []
    for _ in range(2):  # two models of 3 layers x 6 heads
        layer = np.repeat(np.arange(3), 6)
        labels = rng.choice(np.array(["a", "b"]), 18, p=[0.3, 0.7])
        kept = (rng.random(18) < np.where(labels == "a", 0.7, 0.4)).astype(float)
        runs.append((labels, kept))
        strata.append(layer)
        units += [(labels[layer == x], kept[layer == x]) for x in range(3)]
    p = stats.permutation_p(runs, ("a",), 20000, strata=strata)[0]
    assert p == pytest.approx(exact_stratified_p(units, ("a",)), abs=0.01)
    with pytest.raises(ValueError):
        stats.permutation_p(runs, ("a",), 10, strata=strata[:1])


def test_stratifying_by_layer_removes_a_layer_effect():
    """The issue's case: L0 keeps only layer 0's heads, and the one specialised head is in layer 0.
    Unstratified, the group is kept 1.0 against 0.25 for the rest; within layer 0 (every head kept)
    and layer 1 (none kept) no permutation changes anything: p = 1."""
    labels = np.array(["positional", "none", "none", "none", "none", "none", "none", "none"])
    layers = np.array([0, 0, 1, 1, 1, 1, 1, 1])
    kept = (layers == 0).astype(float)
    runs = [(labels, kept)] * 5
    p_flat, group_rate, rest_rate = stats.permutation_p(runs, ("positional",), 2000)
    p_layer = stats.permutation_p(runs, ("positional",), 2000, strata=[layers] * 5)[0]
    assert (group_rate, rest_rate) == (1.0, pytest.approx(5 / 35))
    assert p_flat < 0.01 and p_layer == 1.0


# ---- significant_with_effect ---------------------------------------------------------------------------


def test_significant_with_effect_needs_both():
    held = V.significant_with_effect(0.001, 0.05, level=0.01, threshold=0.02, test="t")
    assert held.outcome == V.HOLDS and held.holds and str(held) == "holds"
    assert (held.level, held.threshold, held.p, held.effect) == (0.01, 0.02, 0.001, 0.05)
    assert held.settings() == "level 0.01; threshold 0.02" and held.words().startswith("**holds**: ")
    tiny = V.significant_with_effect(1e-9, 0.001, level=0.01, threshold=0.02)  # 31 of 32 heads on text
    assert tiny.outcome == V.DOES_NOT_HOLD and "below the practical threshold" in tiny.reason
    noisy = V.significant_with_effect(0.2, 0.5, level=0.01, threshold=0.02)
    assert noisy.outcome == V.INCONCLUSIVE
    small = V.significant_with_effect(0.2, 0.001, level=0.05, threshold=0.02, interval=(-0.01, 0.012))
    assert small.outcome == V.DOES_NOT_HOLD and "within ±0.02" in small.reason
    wide = V.significant_with_effect(0.2, 0.001, level=0.05, threshold=0.02, interval=(-0.01, 0.03))
    assert wide.outcome == V.INCONCLUSIVE
    assert V.significant_with_effect(0.01, 0.02, level=0.01, threshold=0.02).outcome != V.HOLDS  # p < level, strictly
    assert V.significant_with_effect(0.0099, 0.02, level=0.01, threshold=0.02).holds  # |effect| >= threshold
    assert V.significant_with_effect(math.nan, 1.0, level=0.05, threshold=0.1).outcome == V.INCONCLUSIVE
    with pytest.raises(ValueError):
        V.significant_with_effect(0.01, 1.0, level=None, threshold=0.1)


def test_significant_with_effect_direction():
    up = dict(level=0.05, threshold=0.1, direction=+1)
    assert V.significant_with_effect(0.001, 0.3, **up).holds
    other = V.significant_with_effect(0.001, -0.3, **up)
    assert other.outcome == V.DOES_NOT_HOLD and "other way" in other.reason
    assert V.significant_with_effect(0.001, -0.3, level=0.05, threshold=0.1, direction=-1).holds
    assert V.significant_with_effect(0.001, -0.3, level=0.05, threshold=0.1).holds  # either sign


# ---- most --------------------------------------------------------------------------------------------------


def test_most_means_more_than_half():
    assert V.most(10, 18) and not V.most(9, 18) and not V.most(8, 18)
    assert V.most(3, 5) and not V.most(2, 5) and V.most(1, 1)
    with pytest.raises(ValueError):
        V.most(0, 0)
    paper = V.PAPER["michel_table1"]
    assert V.share_text(5, 32) == "5 of 32 (16%)"
    assert V.share_text(5, 32, paper) == "5 of 32 (16%); paper: 8 of 96 (8%), Michel et al. 2019, Table 1"
    some = V.most_claim(1, 4, what="layers keep their metric with one head")
    assert some.outcome == V.DOES_NOT_HOLD and "not more than half" in some.reason  # "some" is not "most"
    assert V.most_claim(13, 18, what="layers").holds
    assert V.most_claim(0, 0, what="layers").outcome == V.INCONCLUSIVE
    # Units no test could place: 0 shown small and 9 unresolved of 16 could still be a majority.
    assert V.most_claim(0, 16, what="heads", unresolved=9).outcome == V.INCONCLUSIVE
    assert V.most_claim(0, 16, what="heads", unresolved=8).outcome == V.DOES_NOT_HOLD  # 8 is not most of 16
    assert V.most_claim(9, 16, what="heads", unresolved=7).holds


def test_removal_class_reports_helping_heads():
    kw = dict(level=0.01, threshold=0.5)
    assert V.removal_class(0.001, -1.2, higher_is_better=True, **kw) == V.HURTS  # BLEU falls
    assert V.removal_class(0.001, +0.8, higher_is_better=True, **kw) == V.HELPS  # BLEU rises
    assert V.removal_class(0.001, +0.8, higher_is_better=False, **kw) == V.HURTS  # loss rises
    assert V.removal_class(0.001, 0.1, higher_is_better=True, **kw) == V.NO_CHANGE
    assert V.removal_class(0.3, 1.0, higher_is_better=True, **kw) == V.UNRESOLVED
    classes = [V.HURTS, V.HELPS, V.HELPS, V.NO_CHANGE]
    assert V.removal_counts(classes) == {V.HURTS: 1, V.HELPS: 2, V.NO_CHANGE: 1, V.UNRESOLVED: 0}


# ---- seed-level claims -----------------------------------------------------------------------------------


def seeds(values):
    return dict(enumerate(values))


def test_seed_claim_refuses_below_five_seeds():
    a, b = seeds([0.5, 0.6, 0.55, 0.52]), seeds([0.9, 0.95, 0.97, 0.99])
    for test in ("sign", "wilcoxon", "t"):
        v = V.seed_claim(a, b, level=0.05, threshold=0.1, test=test)
        assert v.outcome == V.INCONCLUSIVE and "only 4 paired seeds" in v.reason and v.n == 4
    # A fifth seed in one arm only does not count: pairs are by seed.
    v = V.seed_claim({**a, 7: 0.5}, b, level=0.05, threshold=0.1, test="t")
    assert v.outcome == V.INCONCLUSIVE and v.n == 4
    # NaN pairs are left out too.
    v = V.seed_claim(seeds([0.5] * 5), seeds([0.9, 0.9, 0.9, 0.9, math.nan]), level=0.05, threshold=0.1, test="t")
    assert v.outcome == V.INCONCLUSIVE and v.n == 4


def test_seed_claim_says_when_the_test_cannot_reach_the_level():
    a, b = seeds([0.5, 0.6, 0.55, 0.52, 0.51]), seeds([0.9, 0.95, 0.97, 0.99, 0.93])
    for test in ("sign", "wilcoxon"):  # 5 of 5 one way: p = 0.0625, never below 0.05
        v = V.seed_claim(a, b, level=0.05, threshold=0.1, test=test)
        assert v.outcome == V.INCONCLUSIVE and v.p == 0.0625 and "cannot reach p < 0.05" in v.reason
        assert V.seed_claim(a, b, level=0.1, threshold=0.1, test=test).holds  # at a stated 0.1 it can
    six_a, six_b = {**a, 5: 0.5}, {**b, 5: 0.96}
    assert V.seed_claim(six_a, six_b, level=0.05, threshold=0.1, test="sign").holds  # p = 0.03125
    assert V.smallest_p("sign", 3) == 0.25 and V.smallest_p("wilcoxon", 5) == 0.0625 and V.smallest_p("t", 5) == 0.0


def test_seed_claim_t_uses_stats_paired():
    a = seeds([1.0, 1.2, 0.9, 1.1, 1.05])
    b = seeds([1.3, 1.25, 1.2, 1.5, 1.1])
    v = V.seed_claim(a, b, level=0.05, threshold=0.1, test="t", direction=+1)
    c = stats.Paired(a, b)
    assert (v.p, v.effect, v.n) == (c.p, c.mean, 5)
    assert v.p == pytest.approx(sp.ttest_rel([b[s] for s in b], [a[s] for s in a]).pvalue)
    assert v.holds  # +0.22 mean, p = 0.037
    # mean +0.22, 95% interval [+0.021, +0.419], p = 0.037:
    assert V.seed_claim(a, b, level=0.05, threshold=0.5, test="t").outcome == V.DOES_NOT_HOLD  # inside ±0.5
    reaches = V.seed_claim(a, b, level=0.05, threshold=0.3, test="t")  # below 0.3, but the interval reaches it
    assert reaches.outcome == V.INCONCLUSIVE and "reaches it" in reaches.reason
    assert V.seed_claim(a, b, level=0.01, threshold=0.1, test="t").outcome == V.INCONCLUSIVE  # p > 0.01
    same = V.seed_claim(a, {s: x + 0.001 * (-1) ** s for s, x in a.items()}, level=0.05, threshold=0.1, test="t")
    assert same.outcome == V.DOES_NOT_HOLD and "within ±0.1" in same.reason  # shown small
    flat = V.seed_claim(a, a, level=0.05, threshold=0.1, test="sign")
    assert flat.outcome == V.DOES_NOT_HOLD  # every difference 0


def test_seed_claim_median_effect_and_unknown_test():
    a, b = seeds([0.0] * 7), seeds([0.1, 0.2, 0.3, 0.4, 5.0, 0.25, 0.15])
    v = V.seed_claim(a, b, level=0.05, threshold=0.1, test="wilcoxon")
    assert v.effect == 0.25 and v.p == pytest.approx(2 / 128) and v.holds
    with pytest.raises(ValueError):
        V.seed_claim(a, b, level=0.05, threshold=0.1, test="z")


# ---- solve rates ------------------------------------------------------------------------------------------


def test_solve_rate_claim_is_fishers_exact_test_on_solved_runs():
    one_head = [0.31, 0.998, 0.30, 0.29, 0.33]  # bimodal: solved or on the plateau
    many = [0.999, 0.997, 1.0, 0.995, 0.999]
    v = V.solve_rate_claim(one_head, many, solved_at=0.99, level=0.05, threshold=0.2, direction=+1)
    # 5 of 5 against 1 of 5: P(a = 5 | rows 5, 5; columns 6, 4) = C(6,5) C(4,0) / 252 = 6/252, and
    # the other tail a = 1: C(6,1) C(4,4) / 252 = 6/252: p = 12 / 252.
    assert v.p == pytest.approx(12 / 252) and v.effect == pytest.approx(0.8) and v.holds
    assert "5 of 5 against 1 of 5" in v.test
    two = [0.31, 0.998, 0.30, 0.995, 0.33]  # 2 of 5 solved: p = 0.167, inconclusive
    assert V.solve_rate_claim(two, many, solved_at=0.99, level=0.05, threshold=0.2).outcome == V.INCONCLUSIVE
    short = V.solve_rate_claim(one_head[:3], many, solved_at=0.99, level=0.05, threshold=0.2)
    assert short.outcome == V.INCONCLUSIVE and "each arm needs at least 5" in short.reason
    by_seed = V.solve_rate_claim(dict(enumerate(one_head)), dict(enumerate(many + [math.nan])), solved_at=0.99,
                                 level=0.05, threshold=0.2)
    assert by_seed.p == v.p  # dicts work, NaN left out


# ---- the stratified permutation verdict ---------------------------------------------------------------------


def test_stratified_permutation_claim():
    labels = np.array(["positional", "none", "none", "none", "none", "none", "none", "none"])
    layers = np.array([0, 0, 1, 1, 1, 1, 1, 1])
    runs = [(labels, (layers == 0).astype(float))] * 5
    v = V.stratified_permutation_claim(runs, [layers] * 5, ("positional",), level=0.01, threshold=0.2,
                                       permutations=500)
    assert v.outcome == V.INCONCLUSIVE and v.p == 1.0 and "within each layer" in v.test
    # Within layer 0 the specialised head is kept and its neighbour is not, in each of 5 models:
    # under the within-layer null each model keeps it with probability 1/2, so exactly p = 1/32.
    runs = [(labels, np.array([1, 0, 0, 0, 0, 0, 0, 0], dtype=float))] * 5
    v = V.stratified_permutation_claim(runs, [layers] * 5, ("positional",), level=0.05, threshold=0.2,
                                       permutations=4000)
    assert v.holds and v.p == pytest.approx(1 / 32, abs=0.01) and v.effect == 1.0
    assert V.stratified_permutation_claim(runs, [layers] * 5, ("positional",), level=0.01, threshold=0.2,
                                          permutations=4000).outcome == V.INCONCLUSIVE  # 1/32 > 0.01
    empty = V.stratified_permutation_claim([(np.array(["none"] * 4), np.ones(4))], [np.zeros(4)], ("rare",),
                                           level=0.01, threshold=0.2, permutations=10)
    assert empty.outcome == V.INCONCLUSIVE


def test_noticeable():
    assert V.noticeable(0.011, threshold=V.NOTICEABLE["relative_loss"])
    assert not V.noticeable(0.01, threshold=V.NOTICEABLE["relative_loss"])
    assert not V.noticeable(-0.2, threshold=0.01)  # better is not a drop


# ---- ours vs the paper ----------------------------------------------------------------------------------------


def test_paper_rows():
    v = V.most_claim(13, 18, what="layers keep BLEU with one head", paper=V.PAPER["michel_table2"])
    row = V.paper_row("For most layers one head is enough", "13 of 18 layers", V.PAPER["michel_table2"], v)
    assert row[0] == "For most layers one head is enough" and row[1] == "13 of 18 layers"
    assert row[2].endswith("(Michel et al. 2019, Table 2)") and row[3] == "count > total / 2"
    assert row[4] == "–" and row[5].startswith("**holds**: 13 of 18 (72%); paper: 5 of 18")
    s = V.seed_claim(seeds([0.0] * 5), seeds([0.1] * 5), level=0.05, threshold=0.05, test="t")
    row = V.paper_row("claim", "0.10", "text citing itself (Voita et al. 2019, Fig. 8)", s)
    assert row[2] == "text citing itself (Voita et al. 2019, Fig. 8)" and row[4] == "level 0.05; threshold 0.05"
    table = V.paper_table([row])
    assert table.splitlines()[0] == "| " + " | ".join(V.PAPER_HEADER) + " |" and len(table.splitlines()) == 3


def test_paper_row_cells_cannot_break_the_table():
    v = V.significant_with_effect(0.001, 0.3, level=0.01, threshold=0.1, test="a | b")
    row = V.paper_row("x | y", "1", "p", v)
    assert row[0] == "x \\| y" and row[3] == "a \\| b" and "|" not in v.reason
    assert len(V.paper_table([row]).splitlines()[2].replace("\\|", "").split("|")) == len(V.PAPER_HEADER) + 2


def test_holm_claims_adjusts_together_and_keeps_each_threshold():
    claims = {"a": V.Claim(0.01, 0.5, 0.2, n=5), "b": V.Claim(0.02, 0.5, 0.2, n=5),
              "c": V.Claim(0.04, 0.05, 0.2, interval=(-0.1, 0.15), n=5), "short": V.Claim(0.001, 0.9, 0.2, n=3),
              "nan": V.Claim(math.nan, 0.3, 0.2, n=5)}
    v = V.holm_claims(claims, level=0.05)
    adjusted = stats.holm([0.01, 0.02, 0.04, 0.001])  # the NaN is left out of the family
    assert [v[k].p for k in ("a", "b", "c", "short")] == pytest.approx(adjusted)
    assert v["a"].outcome == V.HOLDS and v["b"].outcome == V.HOLDS  # 0.04, 0.04 after Holm over 4
    assert v["c"].outcome == V.DOES_NOT_HOLD  # not significant after Holm, the interval within +-0.2
    assert v["short"].outcome == V.INCONCLUSIVE and "only 3 units" in v["short"].reason
    assert v["nan"].outcome == V.INCONCLUSIVE
    assert "Holm over 4" in v["a"].test


def test_paired_t_test_and_solve_rate_test_are_the_claims_the_rules_use():
    a, b = {s: 1.0 + 0.1 * s for s in range(5)}, {s: 1.3 + 0.1 * s + 0.01 * (s % 2) for s in range(5)}
    c, p = V.paired_t_test(a, b, threshold=0.1), stats.Paired(a, b)
    assert (c.p, c.effect, c.interval, c.n) == (p.p, p.mean, (p.lo, p.hi), 5)
    s = V.solve_rate_test([0.2, 0.995, 0.3, 0.1, 0.2], [1.0, 0.99, 0.98, 1.0, 1.0], solved_at=0.99, threshold=0.2)
    assert s.effect == pytest.approx(4 / 5 - 1 / 5)
    assert s.p == pytest.approx(sp.fisher_exact([[4, 1], [1, 4]])[1])
    assert "4 of 5 against 1 of 5" in s.test


def test_last_quarter_gain_measures_from_the_three_quarter_mark():
    loss = [(100, 2.0), (200, 1.5), (300, 1.2), (400, 1.19)]  # 3/4 of 400 = 300: 1.2 -> 1.19
    assert V.last_quarter_gain(loss, higher_is_better=False, relative=True) == pytest.approx(0.01 / 1.2)
    acc = [(250, 0.5), (500, 0.9), (750, 0.95), (1000, 0.99)]  # 750 -> 1000, in points
    assert V.last_quarter_gain(acc, higher_is_better=True, relative=False) == pytest.approx(0.04)
    # Unsorted input, and a loss that got worse (a negative gain: at a plateau or past it).
    assert V.last_quarter_gain([(4, 1.1), (3, 1.0)], higher_is_better=False, relative=True) == pytest.approx(-0.1)
    assert V.last_quarter_gain([(10, 1.0)], higher_is_better=False, relative=True) is None


def test_plateaued_needs_a_gain_below_the_threshold():
    assert V.plateaued(0.009, threshold=0.01)
    assert not V.plateaued(0.01, threshold=0.01)
    assert not V.plateaued(0.2, threshold=0.01)
    assert V.plateaued(-0.03, threshold=0.01)
    assert not V.plateaued(None, threshold=0.01)


def test_steps_to_plateau_inverts_a_known_power_law():
    # L(t) = 1 + 5 t^-0.5: the last quarter's relative gain is 5 t^-0.5 (0.75^-0.5 - 1) / L(0.75 t),
    # which first falls below 1% near t = 5150 (by hand: sqrt(t) = 5 x 0.1547 / (0.01 x L), L ~ 1.07).
    law = [(t, 1 + 5 * t ** -0.5) for t in range(200, 2001, 100)]
    steps, alpha = V.steps_to_plateau(law, threshold=0.01)
    assert alpha == pytest.approx(0.5, rel=1e-3)
    assert 5000 < steps < 5700  # the search steps by 10%
    # Out of reach below max_steps, too few points, or already there: None / the final step.
    assert V.steps_to_plateau(law, threshold=0.01, max_steps=4000) is None
    assert V.steps_to_plateau(law[:3], threshold=0.01) is None
    assert V.steps_to_plateau(law, threshold=0.5)[0] == 2000
