"""experiments/head_count, the rendering side: what data/ holds (Data), and one sweep's points and
their paired comparisons (Sweep), with the constants that turn numbers into words."""
import os

from common import fmt_p, md_table, mean_std, number, pm, signed
from stats import Paired
from verdicts import DOES_NOT_HOLD, HOLDS, LEVEL_SEEDS, PRACTICAL, SOLVED_AT, holm_claims, paired_t_test, \
    solve_rate_test

from .runs import DATA, read_csv

LR_STUDIES = ("k_relation_3_long", "text_long")
ALPHA = LEVEL_SEEDS  # two-sided, after Holm's correction within a sweep's family of comparisons
# The words of a comparison (docs/verdicts.md): "better" / "worse" when the claim of a practical
# difference holds; NO_DIFFERENCE when it does not hold (shown within the threshold, or significant
# but smaller); NOT_RESOLVED when inconclusive (with these seeds, neither).
NO_DIFFERENCE, NOT_RESOLVED = "no practical difference", "not resolved"

# study -> what the task is, in words (titles and tables)
TITLES = {
    "k_relation_2": "k-relation retrieval, k = 2",
    "k_relation_3": "k-relation retrieval, k = 3",
    "induction": "induction",
    "grammar": "synthetic grammar",
    "grammar_fixed_d_head": "synthetic grammar, head width held at 16",
    "grammar_kv_heads": "synthetic grammar, 8 query heads sharing K/V heads",
    "text": "real text (KJV bytes)",
    "text_fixed_d_head": "real text (KJV bytes), head width held at 32",
    "text_kv_heads": "real text (KJV bytes), 8 query heads sharing K/V heads",
    "k_relation_3_two_layers": "k-relation retrieval, k = 3, two layers",
    "k_relation_3_p6": "k-relation retrieval, 3 offsets, p = 6, d_model 24",
    "k_relation_3_long": "k-relation retrieval, k = 3",
    "text_long": "real text (KJV bytes)",
}
BASE_OF = {"k_relation_3_long": "k_relation_3", "text_long": "text"}  # the study at the original budget
# task -> primary metric column, direction (+1: higher is better), words, decimals
METRICS = {
    "k_relation": ("test_accuracy", +1, "test accuracy", 3),
    "induction": ("test_accuracy", +1, "test accuracy", 3),
    "grammar": ("test_loss", -1, "test loss (nats/token)", 3),
    "text": ("test_bpb", -1, "test bits/byte", 3),
    "translate": ("test_bleu", +1, "test BLEU (beam 5)", 2),  # experiments/translation's head-count arm
}
VAL_METRIC = {"k_relation": "val_accuracy", "induction": "val_accuracy", "grammar": "val_loss", "text": "val_bpb",
              "translate": "val_bleu"}
ACCURACY_THRESHOLD = SOLVED_AT  # a run solves an accuracy task at this accuracy
# "flat": over the last quarter of training the val metric moved by less than this in every seed,
# relative for loss and bits/byte (False), absolute for accuracy (True)
PLATEAU_TOLERANCE = {False: 0.01, True: 0.01}


class Data:
    """A data folder: runs.csv, provenance.csv and (when it has one) curves.csv; data/before/ has
    no curves, so only the comparisons can be made from it. with_provenance=False: a folder whose
    provenance.csv is another experiment's (experiments/translation's parts table), not read."""

    def __init__(self, folder=DATA, with_provenance=True):
        self.runs = read_csv(os.path.join(folder, "runs.csv"))
        self.curves = {}
        if os.path.exists(os.path.join(folder, "curves.csv")):
            for c in read_csv(os.path.join(folder, "curves.csv")):
                self.curves.setdefault((c["study"], c["run"]), []).append(c)
        self.prov = {r["key"]: r["value"] for r in read_csv(os.path.join(folder, "provenance.csv"))} \
            if with_provenance else {}

    def rows(self, study, **eq):
        return [r for r in self.runs if r["study"] == study and all(r[k] == str(v) for k, v in eq.items())]

    def points(self, study, key):
        """value of key -> rows, in numeric order."""
        out = {}
        for r in self.rows(study):
            out.setdefault(int(r[key]), []).append(r)
        return dict(sorted(out.items()))

    def curve(self, r):
        return self.curves[(r["study"], r["run"])]


def by_seed(rows, metric):
    return {int(r["seed"]): number(r[metric]) for r in rows}


def values(rows, metric):
    return [number(r[metric]) for r in rows]


def steps_to(curve, threshold=ACCURACY_THRESHOLD):
    for c in curve:
        if number(c["val_accuracy"]) >= threshold:
            return int(c["step"])
    return None


def delta_text(c, digits, sign=+1):
    """'+0.044 [-0.146, +0.234]': the mean difference and its 95% t-interval (sign -1: of A - B)."""
    if c.n < 2:
        return "–"
    lo, hi = sorted((sign * c.lo, sign * c.hi))
    return f"{signed(sign * c.mean, digits)} [{signed(lo, digits)}, {signed(hi, digits)}]"


def key_label(key, v, n=None):
    if key == "kv_heads":
        return {1: "MQA (1 KV head)", 8: "MHA (8 KV heads)"}.get(v, f"{v} KV heads")
    return f"{v} head" + ("" if v == 1 else "s")


def metric_of(data, study):
    task = data.rows(study)[0]["task"]
    return METRICS[task]


def claim(a, b, metric, reference_mean):
    """B against A ({seed: value} each) as a verdicts.Claim, by the rule of docs/verdicts.md: on an
    accuracy task the runs solved (Fisher's exact test, threshold PRACTICAL["solve_rate"]), since
    the accuracies are bimodal (solved, or stuck on a plateau); on BLEU the paired t-test over seeds,
    threshold PRACTICAL["bleu"] points; on a loss the paired t-test, threshold
    PRACTICAL["relative_loss"] of the reference's mean."""
    if metric == "test_accuracy":
        return solve_rate_test(a, b, solved_at=ACCURACY_THRESHOLD, threshold=PRACTICAL["solve_rate"])
    if metric == "test_bleu":
        return paired_t_test(a, b, threshold=PRACTICAL["bleu"])
    return paired_t_test(a, b, threshold=PRACTICAL["relative_loss"] * abs(reference_mean))


def verdict_word(verdict, sign):
    """The word for a verdict on B - A; sign: +1 when a positive effect is better (after orienting)."""
    if verdict.outcome == HOLDS:
        return "better" if verdict.effect * sign > 0 else "worse"
    return NO_DIFFERENCE if verdict.outcome == DOES_NOT_HOLD else NOT_RESOLVED


class Sweep:
    """One sweep: its points, the comparisons against a reference point and against the best."""

    def __init__(self, data, study, key="heads", reference=None, only=None):
        self.data, self.study, self.key = data, study, key
        self.points = data.points(study, key)
        if only is not None:
            self.points = {k: v for k, v in self.points.items() if k in only}
        self.metric, self.direction, self.metric_words, self.digits = metric_of(data, study)
        self.accuracy = self.metric == "test_accuracy"
        self.reference = reference if reference is not None else min(self.points)
        self.means = {v: mean_std(values(rows, self.metric))[0] for v, rows in self.points.items()}
        self.best = max(self.means, key=lambda v: (self.means[v] * self.direction, -v))
        self.seeds = sorted({int(r["seed"]) for rows in self.points.values() for r in rows})
        # One family per sweep, each pair once: every point against the reference and, for head
        # counts, the largest count against the best (Vaswani's "too many heads hurt"). Nothing
        # else is tested, so the family stays small enough for 5 runs an arm to resolve a gap
        # (Fisher's smallest p at 5 against 5 is 0.008: 0.04 after Holm over 5).
        pairs = [(self.reference, v) for v in self.points if v != self.reference]
        self.top = max(self.points) if key == "heads" and self.best not in (self.reference, max(self.points)) else None
        if self.top is not None:
            pairs.append((self.best, self.top))
        seeds = {v: by_seed(rows, self.metric) for v, rows in self.points.items()}
        self.paired = {(a, b): Paired(seeds[a], seeds[b]) for a, b in pairs}
        self.verdicts = holm_claims({(a, b): claim(seeds[a], seeds[b], self.metric, self.means[a]) for a, b in pairs},
                                    level=ALPHA)

    def pair(self, a, b):
        """(Paired, Verdict, sign) for B against A, whichever way round the family holds the pair
        (sign -1: it holds A - B)."""
        if (a, b) in self.verdicts:
            return self.paired[(a, b)], self.verdicts[(a, b)], +1
        return self.paired[(b, a)], self.verdicts[(b, a)], -1

    def against(self, which):
        return self.reference if which == "ref" else self.best

    def ms(self, v, metric=None, digits=None):
        return pm(*mean_std(values(self.points[v], metric or self.metric)), self.digits if digits is None else digits)

    def comparison(self, v, against="ref"):
        """'+0.044 [-0.146, +0.234]; solved 5 of 5 vs 3 of 5; Holm p = 1.000': v minus the point
        it is compared with, the runs solved on accuracy tasks, the family's adjusted p."""
        c, verdict, sign = self.pair(self.against(against), v)
        delta = delta_text(c, self.digits, sign)
        solved = f"; solved {self.solved(v)} vs {self.solved(self.against(against))}" if self.accuracy else ""
        return f"{delta}{solved}, Holm {fmt_p(verdict.p)}"

    def solved(self, v):
        runs = values(self.points[v], self.metric)
        return f"{sum(x >= ACCURACY_THRESHOLD for x in runs)} of {len(runs)}"

    def word(self, v, against="ref"):
        """v against the reference (or the best): better, worse, NO_DIFFERENCE or NOT_RESOLVED."""
        _, verdict, sign = self.pair(self.against(against), v)
        return verdict_word(verdict, sign * self.direction)

    def threshold_words(self):
        if self.accuracy:
            return (f"{PRACTICAL['solve_rate']:g} in the share of runs solved (test accuracy >= "
                    f"{ACCURACY_THRESHOLD:g}), Fisher's exact test")
        if self.metric == "test_bleu":
            return f"{PRACTICAL['bleu']:g} {self.metric_words} points, paired t-test"
        return f"{PRACTICAL['relative_loss']:.0%} of the reference's mean {self.metric_words}, paired t-test"

    def resolved(self, word):
        """The points whose comparison with the reference got this word."""
        return [v for v in self.points if v != self.reference and self.word(v) == word]

    def top_word(self):
        """The largest head count against the best (None when the best is the reference or the largest)."""
        return None if self.top is None else self.word(self.top, "best")

    def pattern(self):
        """A headline derived from the family's comparisons alone."""
        better, worse = self.resolved("better"), self.resolved("worse")
        ref_label = key_label(self.key, self.reference)
        if all(self.word(v) == NO_DIFFERENCE for v in self.points if v != self.reference):
            return f"flat: every setting is within the practical threshold of {ref_label}"
        if self.key == "kv_heads":
            if worse:
                return f"sharing K/V costs quality ({self.unit_list(worse)} worse than {ref_label})"
            return (f"not resolved: no K/V sharing shown worse than {ref_label} (within the threshold: "
                    f"{self.unit_list(self.resolved(NO_DIFFERENCE))}; not resolved: "
                    f"{self.unit_list(self.resolved(NOT_RESOLVED))})")
        if better and self.top_word() == "worse":
            return (f"more heads help up to a point, then hurt ({self.unit_list(better)} better than one head; "
                    f"{self.top} heads worse than the best, {self.best} heads)")
        if better:
            return f"more heads help ({self.unit_list(better)} better than one head)"
        if worse:
            return f"splitting hurts ({self.unit_list(worse)} worse than one head)"
        return f"not resolved: no setting is shown better or worse than {ref_label}"

    def table(self):
        has_acc = self.accuracy
        header = ["KV heads" if self.key == "kv_heads" else "heads", "d_head", "params"]
        if self.key == "kv_heads":
            header.append("KV cache / token")
        header += (["test accuracy", "test loss (nats/token)"] if has_acc else [self.metric_words])
        if self.metric == "test_bleu":
            header.append("test chrF")  # beside BLEU (issue 30 asks for both); the verdicts are in BLEU
        if has_acc:
            header.append(f"val steps to {ACCURACY_THRESHOLD:.0%} (runs that got there)")
        ref_label = key_label(self.key, self.reference)
        header += [f"Δ vs {ref_label} [95% CI]" + ("; runs solved" if has_acc else "") + ", Holm p",
                   "against " + ref_label, "seeds"]
        rows = []
        for v, runs in self.points.items():
            r = runs[0]
            row = [v, r["d_head"], f"{int(r['params']):,}"]
            if self.key == "kv_heads":
                row.append(f"{2 * int(r['layers']) * int(r['kv_heads']) * int(r['d_head']) * 4:,} B")
            if has_acc:
                row += [self.ms(v), self.ms(v, "test_loss")]
                got = [s for s in (steps_to(self.data.curve(x)) for x in runs) if s is not None]
                m, sd = mean_std([float(s) for s in got])
                row.append(f"{pm(m, sd, 0)} ({len(got)}/{len(runs)})" if got else f"– (0/{len(runs)})")
            else:
                row.append(self.ms(v))
            if self.metric == "test_bleu":
                row.append(self.ms(v, "test_chrf", 2))
            if v == self.reference:
                row += ["reference", "–"]
            else:
                row += [self.comparison(v), self.word(v)]
            row.append(len(runs))
            rows.append(row)
        return md_table(header, rows)

    def vs_ref_sentence(self, ref_label=None):
        ref_label = ref_label or key_label(self.key, self.reference)
        others = [v for v in self.points if v != self.reference]
        parts = [f"{key_label(self.key, v)} {self.word(v)} ({self.comparison(v)})" for v in others]
        return (f"Against {ref_label} (over {len(self.seeds)} seeds; threshold {self.threshold_words()}; Holm over "
                f"the sweep's {len(self.verdicts)} comparisons), in {self.metric_words}: " + "; ".join(parts) + ".")

    def unit_list(self, vs):
        """'4, 8, 16 heads' (or KV heads); 'none' when empty."""
        unit = "KV heads" if self.key == "kv_heads" else "heads"
        return (", ".join(str(v) for v in vs) + " " + unit) if vs else "none"

    def best_sentence(self):
        best = f"Best mean {self.metric_words}: {key_label(self.key, self.best)} ({self.ms(self.best)})"
        if self.top is None:
            return best + "."
        return (f"{best}; the largest count, {self.top} heads, against it: {self.top_word()} "
                f"({self.comparison(self.top, 'best')}; the same family).")
