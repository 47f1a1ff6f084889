"""The verdict rules of every experiment, written once (docs/verdicts.md lists them with the papers'
criteria they match). make_results.py files and the translation experiment call these; the
statistics under them are experiments/stats.py's (nothing here recomputes a test stats.py has).

Every rule returns a Verdict: 'holds', 'does not hold' or 'inconclusive', with the reason in words
and the test, level and practical threshold it was reached with, so a RESULTS.md can print them
beside the verdict. No rule has a hidden default level or threshold: callers pass them (the
constants below are the defaults docs/verdicts.md proposes, named so a make_results.py can cite
them).

  Verdict, significant_with_effect   p < level AND |effect| >= a practical threshold
  most, share_text, most_claim       "most" is more than half; shares with the paper's beside
  removal_class, removal_counts      Michel Table 1: each head hurts / helps / no practical change
  smallest_p, seed_claim             paired seeds: exact sign, exact Wilcoxon or paired t, >= 5 seeds
  last_quarter_gain, plateaued,      base models at a plateau; steps_to_plateau: the budget a
  steps_to_plateau                   power-law fit says the rule would need
  solve_rate_claim, solve_rate_test  bimodal accuracies: Fisher's exact test on runs solved
  Claim, paired_t_test, holm_claims  a family of claims, Holm-adjusted together, each with its threshold
  stratified_permutation_claim       a group's rate against the rest, permuted within each layer
  noticeable                         Michel's "no noticeable impact", a drop within a threshold
  PaperValue, PAPER, paper_row,      "ours vs paper" rows: our value, the paper's with its table or
  paper_table                        figure, the test, the level, the verdict
"""
import math
from dataclasses import dataclass

from common import md_table
from stats import Paired, fisher_exact_p, holm, permutation_p, sign_test_p, wilcoxon_p

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive"

# ---- the proposed defaults (docs/verdicts.md: where each comes from) -------------------------------
MIN_SEEDS = 5           # a seed-level claim needs at least this many paired seeds (issue 29)
LEVEL_SEEDS = 0.05      # two-sided level of a seed-level claim
LEVEL_MICHEL = 0.01     # Michel et al. 2019's level per head (Table 1) and per layer (Table 2), uncorrected
# Practical thresholds: the smallest effect a verdict calls a change. Accuracy in points (fraction),
# loss and bits/byte relative to the reference model's, BLEU in BLEU points, solve rates as fractions.
# prune_fraction: a share of all heads prunable (one round of run.sh's pruning masks this share);
# kept_rate: a difference of two shares of heads kept by L0 (the scale of a solve rate).
PRACTICAL = {"accuracy": 0.01, "relative_loss": 0.01, "bleu": 0.5, "solve_rate": 0.2, "prune_fraction": 0.05,
             "kept_rate": 0.2}
NOTICEABLE = {"accuracy": 0.01, "relative_loss": 0.01, "bleu": 0.5}  # "no noticeable impact" (Michel Section 4)
SOLVED_AT = 0.99        # a run "solves" an accuracy task at this test accuracy (head_count's ACCURACY_THRESHOLD)
PERMUTATIONS = 10000


@dataclass(frozen=True)
class Verdict:
    """One rule's outcome (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE), why, and what it was reached with:
    the test in words, the level (NaN: no significance test), the practical threshold (NaN: none),
    the p value, the effect and the number of units (seeds, runs, heads) it rests on."""
    outcome: str
    reason: str
    test: str = ""
    level: float = math.nan
    threshold: float = math.nan
    p: float = math.nan
    effect: float = math.nan
    n: int = 0

    def __str__(self):
        return self.outcome

    @property
    def holds(self):
        return self.outcome == HOLDS

    def words(self):
        """'**holds**: the reason' (Markdown, for a verdict cell)."""
        return f"**{self.outcome}**: {self.reason}"

    def settings(self):
        """'level 0.05; threshold 0.01', the parts that apply ('–' for neither)."""
        parts = ([f"level {self.level:g}"] if not math.isnan(self.level) else []) + \
            ([f"threshold {self.threshold:g}"] if not math.isnan(self.threshold) else [])
        return "; ".join(parts) or "–"


def _p_text(p):
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


# ---- significance and size together ------------------------------------------------------------------


def significant_with_effect(p, effect, *, level, threshold, direction=0, interval=None, test="", n=0):
    """The claim "there is an effect of at least `threshold`" (in the direction's sign when
    direction is +1 or -1; either sign when 0). Michel et al. call a head's change significant at
    p < 0.01 and Voita et al. read effects in BLEU; the reviewer's rule (issue 29) is that no
    significance test stands alone: a practical threshold goes beside it.

      holds          p < level and |effect| >= threshold, in the claimed direction
      does not hold  significant and large the other way; or the interval (lo, hi), when given,
                     lies inside (-threshold, threshold); or, without an interval, significant but
                     |effect| < threshold (the per-head case: Michel's tests give p only)
      inconclusive   anything else: not significant and nothing shows the effect small; significant
                     and below the threshold while the interval reaches it; p or effect NaN

    `interval` should be at the confidence 1 - level if it is to show smallness at the same level."""
    kw = dict(test=test, level=level, threshold=threshold, p=p, effect=effect, n=n)
    if level is None or threshold is None:
        raise ValueError("significant_with_effect: the level and the threshold are stated, never implied")
    if math.isnan(p) or math.isnan(effect):
        return Verdict(INCONCLUSIVE, "no test result", **kw)
    significant, large = p < level, abs(effect) >= threshold
    right_way = direction == 0 or (effect > 0) == (direction > 0)
    if significant and large and right_way:
        return Verdict(HOLDS, f"{_p_text(p)} < {level:g} and the effect {effect:+.4g} is at least {threshold:g} "
                              "in size", **kw)
    if significant and large:
        return Verdict(DOES_NOT_HOLD, f"significant the other way ({_p_text(p)}, effect {effect:+.4g})", **kw)
    if interval is not None and -threshold < interval[0] and interval[1] < threshold:
        return Verdict(DOES_NOT_HOLD, f"the interval [{interval[0]:+.4g}, {interval[1]:+.4g}] lies within "
                                      f"±{threshold:g}", **kw)
    if significant and interval is not None:
        return Verdict(INCONCLUSIVE, f"significant ({_p_text(p)}) with the effect {effect:+.4g} below {threshold:g} "
                                     f"in size, but the interval [{interval[0]:+.4g}, {interval[1]:+.4g}] reaches it", **kw)
    if significant:
        return Verdict(DOES_NOT_HOLD, f"significant ({_p_text(p)}) but the effect {effect:+.4g} is below the "
                                      f"practical threshold {threshold:g} in size", **kw)
    return Verdict(INCONCLUSIVE, f"not significant ({_p_text(p)} >= {level:g}); nothing shows the effect is below "
                                 f"{threshold:g}", **kw)


# ---- "most", and shares with the paper's number beside ---------------------------------------------


def most(count, total):
    """Michel et al.'s "most" (Table 2: "for most layers, one head is enough"): more than half,
    count > total / 2. ValueError for an empty total: "most of nothing" is no claim."""
    if total <= 0:
        raise ValueError(f"most: total {total}")
    return 2 * count > total


@dataclass(frozen=True)
class PaperValue:
    """A number from a paper with where it is: value in words, the citation (paper, table or
    figure), and, for counts, count and total (so a share can be printed beside ours)."""
    value: str
    citation: str
    count: int = None
    total: int = None

    def text(self):
        return f"{self.value} ({self.citation})"


def share_text(count, total, paper=None):
    """'5 of 32 (16%)', with '; paper: 8 of 96 (8%), Michel et al. 2019, Table 1' beside."""
    ours = f"{count} of {total} ({count / total:.0%})" if total else f"{count} of 0"
    if paper is None or paper.count is None:
        return ours
    return f"{ours}; paper: {paper.count} of {paper.total} ({paper.count / paper.total:.0%}), {paper.citation}"


def most_claim(count, total, *, what, paper=None, unresolved=0):
    """The claim "most <what>": holds when count > total / 2; does not hold when it would not even
    with every unresolved unit (one no test could place, removal_class's UNRESOLVED) counted in;
    else inconclusive (no test: a count of units, the share and the paper's beside)."""
    if total <= 0:
        return Verdict(INCONCLUSIVE, f"no {what} to count", test="count > total / 2")
    kw = dict(test="count > total / 2", effect=count / total, n=total)
    text = f"{share_text(count, total, paper)} {what}"
    if most(count, total):
        return Verdict(HOLDS, f"{text}: more than half", **kw)
    if not most(count + unresolved, total):
        return Verdict(DOES_NOT_HOLD, f"{text}: not more than half" + (
            f", nor with the {unresolved} unresolved" if unresolved else ""), **kw)
    return Verdict(INCONCLUSIVE, f"{text}, {unresolved} unresolved: more than half if enough of those are", **kw)


# ---- Michel Table 1: each head's removal, on the task metric ------------------------------------


HURTS, HELPS, NO_CHANGE, UNRESOLVED = "hurts", "helps", "no practical change", "unresolved"


def removal_class(p, delta, *, level, threshold, higher_is_better, interval=None):
    """One head's removal, Michel et al. Table 1's question with a practical threshold: delta is the
    task metric with the head removed minus without (BLEU, accuracy; loss where the task metric is
    a loss, with higher_is_better False). HURTS or HELPS when significant_with_effect holds (by the
    sign), NO_CHANGE when it does not hold (significant but small, or, given the effect's interval
    at confidence 1 - level, shown small), UNRESOLVED when inconclusive. Without an interval a
    non-significant head is UNRESOLVED; over ~1000 examples the interval shows most heads that do
    nothing to be small. Michel count heads whose change is significant, and report those that help."""
    v = significant_with_effect(p, delta, level=level, threshold=threshold, interval=interval)
    if v.holds:
        return HELPS if (delta > 0) == higher_is_better else HURTS
    return NO_CHANGE if v.outcome == DOES_NOT_HOLD else UNRESOLVED


def removal_counts(classes):
    """{class: count} over the four classes (each present, 0 when absent)."""
    return {c: sum(x == c for x in classes) for c in (HURTS, HELPS, NO_CHANGE, UNRESOLVED)}


# ---- seed-level claims -------------------------------------------------------------------------------------

SEED_TESTS = {"sign": "exact two-sided sign test", "wilcoxon": "exact two-sided Wilcoxon signed-rank test",
              "t": "two-sided paired t-test"}


def smallest_p(test, n):
    """The smallest two-sided p a test can give over n paired seeds (no zero differences): 2 / 2^n
    for the exact sign and Wilcoxon tests (0.25 at 3 seeds, 0.0625 at 5, 0.03125 at 6); 0 for the
    t-test (n >= 2)."""
    if test in ("sign", "wilcoxon"):
        return min(1.0, 2.0 / 2 ** n) if n > 0 else 1.0
    if test == "t":
        return 0.0 if n >= 2 else 1.0
    raise ValueError(f"smallest_p: unknown test {test!r}")


def seed_claim(a, b, *, level, threshold, test, direction=0, min_seeds=MIN_SEEDS):
    """The claim "B differs from A (B - A in the direction's sign) by at least `threshold`", over
    seeds paired by number (a, b: {seed: value}; NaN pairs left out: stats.Paired pairs them).
    The issue's rule: seed-level claims rest on a test at a stated level over >= 5 seeds, never on
    "every one of 3 seeds" (a sign test's p = 0.25).
      test 'sign' or 'wilcoxon': exact, the effect is the median difference;
      test 't': stats.Paired's paired t-test, the effect is the mean difference, and its 95%
      interval can show the effect small (used only at level 0.05, the interval's level).
    Inconclusive, with the reason, below min_seeds paired seeds, and when the test cannot reach
    p < level with this many seeds (the exact tests at 5 seeds: 0.0625 > 0.05)."""
    if test not in SEED_TESTS:
        raise ValueError(f"seed_claim: unknown test {test!r}")
    c = Paired(a, b)
    words = f"{SEED_TESTS[test]} over {c.n} paired seeds"
    kw = dict(test=words, level=level, threshold=threshold, n=c.n)
    if c.n < min_seeds:
        return Verdict(INCONCLUSIVE, f"only {c.n} paired seeds: a seed-level claim needs at least {min_seeds}", **kw)
    if test == "t":
        p, effect = c.p, c.mean
        interval = (c.lo, c.hi) if level == 0.05 else None
    else:
        p = (sign_test_p if test == "sign" else wilcoxon_p)(c.diffs)
        effect, interval = _median(c.diffs), None
        if math.isnan(p):  # every difference is 0
            return significant_with_effect(1.0, 0.0, level=level, threshold=threshold, test=words, n=c.n,
                                           interval=(0.0, 0.0))
    floor = smallest_p(test, sum(d != 0 for d in c.diffs))
    v = significant_with_effect(p, effect, level=level, threshold=threshold, direction=direction,
                                interval=interval, test=words, n=c.n)
    if floor >= level and v.outcome != DOES_NOT_HOLD:
        return Verdict(INCONCLUSIVE, f"with {c.n} seeds the {SEED_TESTS[test]} cannot reach p < {level:g} (its "
                                     f"smallest p is {floor:.4g}); effect {effect:+.4g}", test=words, level=level,
                       threshold=threshold, p=p, effect=effect, n=c.n)
    return v


def _median(values):
    v = sorted(values)
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2.0


# ---- bimodal accuracies: solved or not ---------------------------------------------------------------------


def _accuracies(x):
    return [v for v in (x.values() if isinstance(x, dict) else x) if not math.isnan(v)]


def solve_rate_test(a, b, *, solved_at, threshold):
    """Arm B's solve rate against arm A's as a Claim (not yet a verdict): the runs solved
    (accuracy >= solved_at) in each arm, Fisher's exact test, two-sided, on the 2 x 2 table
    (stats.fisher_exact_p; the arms are not paired); the effect is B's rate minus A's. a, b: the
    runs' accuracies (a list, or {seed: accuracy}); NaN left out; n is the smaller arm."""
    a, b = _accuracies(a), _accuracies(b)
    sa, sb = sum(x >= solved_at for x in a), sum(x >= solved_at for x in b)
    words = (f"Fisher's exact test, two-sided, on runs solved (accuracy >= {solved_at:g}): "
             f"{sb} of {len(b)} against {sa} of {len(a)}")
    if not a or not b:
        return Claim(math.nan, math.nan, threshold, n=min(len(a), len(b)), test=words)
    p = fisher_exact_p([[sb, len(b) - sb], [sa, len(a) - sa]])
    return Claim(p, sb / len(b) - sa / len(a), threshold, n=min(len(a), len(b)), test=words)


def solve_rate_claim(a, b, *, solved_at, level, threshold, direction=0, min_seeds=MIN_SEEDS):
    """The claim "arm B solves the task more often (direction +1), less often (-1) or differently
    (0) than arm A, by at least `threshold` in solve rate". For accuracies that are bimodal (a run
    solves the task or stays on a plateau, as k = 3 does), a t-test on the accuracies fits badly;
    this is solve_rate_test's Fisher test with significant_with_effect. Each arm needs min_seeds
    runs."""
    c = solve_rate_test(a, b, solved_at=solved_at, threshold=threshold)
    sizes = (len(_accuracies(a)), len(_accuracies(b)))
    if min(sizes) < min_seeds:
        return Verdict(INCONCLUSIVE, f"{sizes[0]} and {sizes[1]} runs: each arm needs at least {min_seeds}",
                       test=c.test, level=level, threshold=threshold, n=sum(sizes))
    return significant_with_effect(c.p, c.effect, level=level, threshold=threshold, direction=direction,
                                   test=c.test, n=sum(sizes))


# ---- families of claims, Holm-corrected together -------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """One test's result before its family's correction: p, the effect (B - A), the practical
    threshold it is judged against, the interval of the effect when the test gives one (it can show
    the effect small), the number of units (seeds, runs of the smaller arm) and the test in words."""
    p: float
    effect: float
    threshold: float
    interval: tuple = None
    n: int = 0
    test: str = ""


def paired_t_test(a, b, *, threshold):
    """B - A over seeds paired by number ({seed: value} each) as a Claim: stats.Paired's two-sided
    paired t-test, its mean difference and 95% t-interval."""
    c = Paired(a, b)
    interval = None if math.isnan(c.lo) else (c.lo, c.hi)
    return Claim(c.p, c.mean, threshold, interval=interval, n=c.n, test=f"two-sided paired t-test over {c.n} seeds")


def holm_claims(claims, *, level, min_units=MIN_SEEDS):
    """One family of claims decided together ({key: Claim} -> {key: Verdict}): the p values are
    Holm-adjusted over the family (a NaN p is left out of it), then each claim is
    significant_with_effect(adjusted p, effect, its threshold, its interval) in either direction;
    the Verdict's p is the adjusted one. A claim resting on fewer than min_units units is
    inconclusive. One family per question means two rows of a table can never contradict each
    other: a pair compared twice (against the reference and against the best) is one claim."""
    keys = [k for k, c in claims.items() if not math.isnan(c.p)]
    adjusted = dict(zip(keys, holm([claims[k].p for k in keys])))
    out = {}
    for k, c in claims.items():
        test = f"{c.test}, Holm over {len(keys)}" if len(keys) > 1 else c.test
        if c.n < min_units:
            out[k] = Verdict(INCONCLUSIVE, f"only {c.n} units: a claim needs at least {min_units}", test=test,
                             level=level, threshold=c.threshold, p=adjusted.get(k, math.nan), effect=c.effect, n=c.n)
            continue
        out[k] = significant_with_effect(adjusted.get(k, math.nan), c.effect, level=level, threshold=c.threshold,
                                         interval=c.interval, test=test, n=c.n)
    return out


# ---- Voita: a group's rate against the rest, within each layer -------------------------------------------------


def stratified_permutation_claim(runs, layers, group, *, level, threshold, permutations, seed=0):
    """The claim "units whose label is in `group` (Voita's specialised heads) have outcome 1 (kept
    by L0) more often than the rest, by at least `threshold` in rate", tested one-sided by
    stats.permutation_p with the labels permuted only within each layer of each model (layers: one
    [N] array of each unit's layer per run). Stratifying matters where the outcome depends on the
    layer (L0 keeping only layer 0's heads): a group that sits in the kept layer then wins against
    every other layer's heads, which an unstratified test counts as evidence for the group."""
    p, group_rate, rest_rate = permutation_p(runs, group, permutations, seed=seed, strata=layers)
    words = f"permutation test, one-sided, labels permuted within each layer ({permutations} draws, seed {seed})"
    n = sum(len(r) for r, _ in runs)
    if math.isnan(p):
        return Verdict(INCONCLUSIVE, "no unit in the group, or none outside it", test=words, level=level,
                       threshold=threshold, n=n)
    return significant_with_effect(p, group_rate - rest_rate, level=level, threshold=threshold, direction=+1,
                                   test=words, n=n)


# ---- Michel Section 4: no noticeable impact ---------------------------------------------------------------


def noticeable(drop, *, threshold):
    """Michel et al. (Section 4) prune "without any noticeable negative impact": a drop (loss of
    quality: accuracy points, relative loss or bits/byte, BLEU points; > 0 is worse) is noticeable
    when it exceeds the threshold (NOTICEABLE: 1 point, 1%, 0.5 BLEU, not the 5% used before)."""
    return drop > threshold


# ---- base models trained to a plateau (issue 29) -----------------------------------------------------------

PLATEAU_TAIL = 0.25  # the last quarter of training


def last_quarter_gain(curve, *, higher_is_better, relative):
    """How much a validation curve [(step, value), ...] still improved over the last PLATEAU_TAIL
    of training: from the last evaluation at or before (1 - PLATEAU_TAIL) x the final step to the
    final one, > 0 = better. relative: as a fraction of the earlier value (losses), else in the
    metric's units (accuracy, BLEU). None if the curve has no evaluation in that window's start."""
    curve = sorted(curve)
    final_step, final = curve[-1]
    earlier = [(s, v) for s, v in curve if s <= (1 - PLATEAU_TAIL) * final_step]
    if not earlier:
        return None
    start = earlier[-1][1]
    gain = final - start if higher_is_better else start - final
    return gain / abs(start) if relative else gain


def plateaued(gain, *, threshold):
    """A base model is at its plateau when its last quarter gained less than the practical threshold
    (PRACTICAL: 1% of the loss, 1 accuracy point, 0.5 BLEU): more training would not change a
    verdict reached at that threshold. None (no such window) is not shown to be a plateau."""
    return gain is not None and gain < threshold


def steps_to_plateau(curve, *, threshold, fit_from=0.1, max_steps=1e9):
    """For a loss curve [(step, value), ...] that has not plateaued: the step count T at which a
    power law L(t) = a + b t^-alpha, fitted by least squares to the evaluations from fit_from x the
    final step on (past the warmup), predicts a last quarter (0.75 T -> T) gaining less than
    threshold (relative), i.e. the budget the plateau rule would need. An extrapolation, and on a
    curve shaped by its learning-rate schedule too, so only its order of magnitude is read. None when
    the fit fails or the prediction exceeds max_steps; also (T, alpha) are returned as a tuple."""
    from scipy.optimize import curve_fit

    curve = sorted(curve)
    final_step = curve[-1][0]
    points = [(s, v) for s, v in curve if s >= fit_from * final_step]
    if len(points) < 4:
        return None
    steps = [float(s) for s, _ in points]
    values = [float(v) for _, v in points]

    def law(t, a, b, alpha):
        return a + b * t ** -alpha

    try:
        (a, b, alpha), _ = curve_fit(law, steps, values, p0=(min(values) / 2, values[0] * steps[0] ** 0.3, 0.3),
                                     bounds=((0, 0, 1e-3), (max(values), math.inf, 3)), maxfev=20000)
    except (RuntimeError, ValueError):
        return None

    def gain(t):
        return (law(0.75 * t, a, b, alpha) - law(t, a, b, alpha)) / law(0.75 * t, a, b, alpha)

    t = float(final_step)
    while gain(t) >= threshold:  # the relative gain falls monotonically in t for this law
        t *= 1.1
        if t > max_steps:
            return None
    return round(t), alpha


# ---- ours vs the paper ------------------------------------------------------------------------------------

# The papers' numbers the rules are read against. Michel Tables 1 and 2 are the numbers
# experiments/translate_config/make_results.py already uses (MICHEL_TABLE1, MICHEL_TABLE2); that
# file should import these when it moves to these rules.
PAPER = {
    "michel_table1": PaperValue("8 of 96 Enc-Enc heads change BLEU significantly when removed (p < 0.01, paired "
                                "bootstrap, uncorrected), 4 of them for the better", "Michel et al. 2019, Table 1",
                                count=8, total=96),
    "michel_table1_better": PaperValue("4 of the 8 significant removals raise BLEU", "Michel et al. 2019, Table 1",
                                       count=4, total=8),
    "michel_table2": PaperValue("5 of 18 layers change BLEU significantly with only their best head kept; the "
                                "largest drop -13.56 BLEU (the last Enc-Dec layer)", "Michel et al. 2019, Table 2",
                                count=5, total=18),
    "vaswani_table3a": PaperValue("at fixed d_model, newstest2013 dev BLEU: 1 head 24.9, 4 heads 25.5, 8 heads 25.8, "
                                  "16 heads 25.8, 32 heads 25.4 (one head 0.9 BLEU below the best; too many heads "
                                  "lose quality)", "Vaswani et al. 2017, Table 3 rows (A)"),
    "mqa": PaperValue("one shared K/V head (MQA) loses little quality against MHA with a K/V cache n_heads times "
                      "smaller", "Shazeer 2019"),
    "gqa": PaperValue("grouped K/V heads (GQA) come close to MHA's quality, nearer than MQA", "Ainslie et al. 2023"),
    "michel_figure3": PaperValue("pruning heads by importance (I_h), BLEU holds to about 20% of heads pruned and "
                                 "falls sharply past about 60%", "Michel et al. 2019, Section 4.2, Figure 3"),
    "michel_figure4": PaperValue("pruned one kind at a time, Enc-Dec attention collapses past 60% of its heads "
                                 "pruned while Enc-Enc and Dec-Dec keep BLEU with 20% of theirs",
                                 "Michel et al. 2019, Section 5, Figure 4"),
    "michel_figure5": PaperValue("from epoch 10 of 40, about 40% of heads prunable at 85-90% of the unpruned BLEU; "
                                 "importance order only, no random order", "Michel et al. 2019, Section 6, Figure 5"),
    "voita_figure7": PaperValue("encoder heads pruned with L0 gates (WMT EN-RU): about 29.6 BLEU with all 48, 29.5 "
                                "with 10, 29.0 with 5, 28.25 with 2; 38 of 48 pruned for 0.15 BLEU",
                                "Voita et al. 2019, Section 6.2, Figure 7", count=38, total=48),
    "voita_figure9": PaperValue("with every kind gated, encoder self-attention heads are pruned first and "
                                "decoder-encoder (cross) heads last", "Voita et al. 2019, Section 7, Figure 9"),
    "voita_figure10": PaperValue("with every kind gated, decoder self-attention heads survive in the lower layers, "
                                 "decoder-encoder heads in the higher ones", "Voita et al. 2019, Section 7, Figure 10"),
    "voita_scratch": PaperValue("the pruned model's heads trained from scratch (the same layout) do worse than the "
                                "pruned model, by 0.15-0.5 BLEU", "Voita et al. 2019, Section 6.2"),
}

PAPER_HEADER = ["claim", "ours", "paper", "test", "level; threshold", "verdict"]


def paper_row(claim, ours, paper, verdict):
    """One "ours vs paper" row: the claim, our value, the paper's value with its table or figure
    (a PaperValue, or text already citing it), the test, the level and threshold, the verdict."""
    cells = [claim, ours, paper.text() if isinstance(paper, PaperValue) else paper, verdict.test or "–",
             verdict.settings(), verdict.words()]
    return [str(c).replace("|", "\\|") for c in cells]  # a | would end the Markdown cell


def paper_table(rows):
    """The rows under PAPER_HEADER as a Markdown table (common.md_table)."""
    return md_table(PAPER_HEADER, rows, align="---")


# ---- additions for experiments/pruning (issue 29) -------------------------------------------------------

# The numbers of PAPER entries a rule compares with (not only prints): Michel et al.'s Figure 5 prunes
# the checkpoint of epoch 10 of 40 and keeps 85-90% of the unpruned BLEU with about 40% of the heads
# pruned.
PAPER_NUMBERS = {"michel_figure5": {"epoch": 10, "epochs": 40, "fraction_pruned": 0.40, "retained": (0.85, 0.90)},
                 # Figure 3: the share of heads prunable by importance before BLEU drops noticeably
                 "michel_figure3": {"fraction_pruned": 0.20},
                 # Vaswani et al. 2017, Table 3 (A): newstest2013 dev BLEU per head count at d_model 512
                 "vaswani_table3a": {1: 24.9, 4: 25.5, 8: 25.8, 16: 25.8, 32: 25.4}}


def not_below(v, what):
    """The claim "B is not below A by the threshold or more" read from v, a test of the difference
    B - A at v's level and threshold (one-sided, direction -1, or two-sided; `what` names A in the
    reason): does not hold when B is below by at least the threshold; holds when B is above by that
    much, or significantly below by less (v does not hold); else inconclusive."""
    kw = dict(test=v.test, level=v.level, threshold=v.threshold, p=v.p, effect=v.effect, n=v.n)
    if v.holds and v.effect < 0:
        return Verdict(DOES_NOT_HOLD, f"below {what} by at least {v.threshold:g}: {v.reason}", **kw)
    if v.holds or v.outcome == DOES_NOT_HOLD:
        return Verdict(HOLDS, f"not below {what} by {v.threshold:g} or more: {v.reason}", **kw)
    return Verdict(INCONCLUSIVE, v.reason, **kw)


def not_below_claim(a, b, *, level, threshold, test, what, min_seeds=MIN_SEEDS):
    """not_below over seeds paired by number ({seed: value} each) from seed_claim of "B below A by
    at least the threshold" (B significantly above A, or the interval within ±threshold, or B
    significantly below by less than the threshold make it hold; fewer than min_seeds seeds or
    nothing resolved, inconclusive). A paper's "without noticeable loss" (B the pruned model, A its
    control), and a paper's number reached (reaches_claim)."""
    return not_below(seed_claim(a, b, level=level, threshold=threshold, test=test, direction=-1,
                                min_seeds=min_seeds), what)


def reaches_claim(values, target, *, level, threshold, test, min_seeds=MIN_SEEDS):
    """The claim "the per-seed values ({seed: value}) reach a paper's number": not_below_claim
    against the number at every seed."""
    return not_below_claim({s: target for s in values}, values, level=level, threshold=threshold, test=test,
                           what=f"{target:g}", min_seeds=min_seeds)
