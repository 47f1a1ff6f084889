"""experiments/head_count, the rendering side: what data/ holds (Data), and one sweep's points and
their paired comparisons (Sweep), with the constants that turn numbers into words."""
import math
import os

from common import fmt_p, md_table, mean_std, number, pm, signed
from stats import Paired, holm_paired

from .runs import DATA, read_csv

LR_STUDIES = ("k_relation_3_long", "text_long")
ALPHA = 0.05  # two-sided, after Holm's correction within a family of comparisons

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
}
VAL_METRIC = {"k_relation": "val_accuracy", "induction": "val_accuracy", "grammar": "val_loss", "text": "val_bpb"}
ACCURACY_THRESHOLD = 0.99
# "flat": over the last quarter of training the val metric moved by less than this in every seed,
# relative for loss and bits/byte (False), absolute for accuracy (True)
PLATEAU_TOLERANCE = {False: 0.01, True: 0.01}


class Data:
    def __init__(self):
        self.runs = read_csv(os.path.join(DATA, "runs.csv"))
        self.curves = {}
        for c in read_csv(os.path.join(DATA, "curves.csv")):
            self.curves.setdefault((c["study"], c["run"]), []).append(c)
        self.prov = {r["key"]: r["value"] for r in read_csv(os.path.join(DATA, "provenance.csv"))}

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


def delta_text(c, digits):
    if c.n < 2:
        return "–"
    return f"{signed(c.mean, digits)} [{signed(c.lo, digits)}, {signed(c.hi, digits)}]"


def key_label(key, v, n=None):
    if key == "kv_heads":
        return {1: "MQA (1 KV head)", 8: "MHA (8 KV heads)"}.get(v, f"{v} KV heads")
    return f"{v} head" + ("" if v == 1 else "s")


def metric_of(data, study):
    task = data.rows(study)[0]["task"]
    return METRICS[task]


def word(c, direction):
    """'better', 'worse' or 'level' for B against A (direction +1: higher is better)."""
    if c.n < 2 or math.isnan(c.p_holm) or c.p_holm >= ALPHA:
        return "level"
    return "better" if c.mean * direction > 0 else "worse"


class Sweep:
    """One sweep: its points, the comparisons against a reference point and against the best."""

    def __init__(self, data, study, key="heads", reference=None, only=None):
        self.data, self.study, self.key = data, study, key
        self.points = data.points(study, key)
        if only is not None:
            self.points = {k: v for k, v in self.points.items() if k in only}
        self.metric, self.direction, self.metric_words, self.digits = metric_of(data, study)
        self.reference = reference if reference is not None else min(self.points)
        ref = by_seed(self.points[self.reference], self.metric)
        self.vs_ref = {v: Paired(ref, by_seed(rows, self.metric)) for v, rows in self.points.items() if v != self.reference}
        holm_paired(list(self.vs_ref.values()))
        means = {v: mean_std(values(rows, self.metric))[0] for v, rows in self.points.items()}
        self.best = max(means, key=lambda v: (means[v] * self.direction, -v))
        best = by_seed(self.points[self.best], self.metric)
        self.vs_best = {v: Paired(best, by_seed(rows, self.metric)) for v, rows in self.points.items() if v != self.best}
        holm_paired(list(self.vs_best.values()))
        self.seeds = sorted({int(r["seed"]) for rows in self.points.values() for r in rows})

    def ms(self, v, metric=None, digits=None):
        return pm(*mean_std(values(self.points[v], metric or self.metric)), self.digits if digits is None else digits)

    def comparison(self, v, against="ref"):
        c = (self.vs_ref if against == "ref" else self.vs_best)[v]
        return f"{delta_text(c, self.digits)}, {fmt_p(c.p_holm)}"

    def word(self, v, against="ref"):
        return word((self.vs_ref if against == "ref" else self.vs_best)[v], self.direction)

    def worse_than_best(self):
        return [v for v in self.vs_best if self.word(v, "best") == "worse"]

    def level_with_best(self):
        return [v for v in self.vs_best if self.word(v, "best") == "level"]

    def pattern(self):
        """A headline derived from the comparisons with the best point."""
        worse = self.worse_than_best()
        lo, hi = min(self.points), max(self.points)
        if not worse:
            # Nothing is resolved from the best, but the reference family can still resolve some
            # points from the reference (a different Holm family): say so rather than "flat".
            ref_label = key_label(self.key, self.reference)
            beat = [v for v in self.vs_ref if self.word(v) == "better"]
            lose = [v for v in self.vs_ref if self.word(v) == "worse"]
            if beat and not lose:
                return (f"{self.unit_list(beat)} better than {ref_label}, "
                        "but no setting is resolved from the best")
            if lose and not beat:
                return (f"{self.unit_list(lose)} worse than {ref_label}, "
                        "but no setting is resolved from the best")
            return "flat: no setting is distinguishable from the best"
        if self.key == "kv_heads":
            return "sharing K/V costs quality" if self.best == hi else "sharing K/V does not cost quality"
        if self.best == lo:
            return "one wide head is best"
        if self.best == hi:
            return "more heads are better"
        if lo in worse and hi in worse:
            return "more heads help up to a point, then hurt"
        if lo in worse:
            return "more heads help (one head is worse than the best)"
        return "splitting too finely hurts"

    def table(self):
        has_acc = self.metric == "test_accuracy"
        header = ["KV heads" if self.key == "kv_heads" else "heads", "d_head", "params"]
        if self.key == "kv_heads":
            header.append("KV cache / token")
        header += (["test accuracy", "test loss (nats/token)"] if has_acc else [self.metric_words])
        if has_acc:
            header.append(f"val steps to {ACCURACY_THRESHOLD:.0%} (runs that got there)")
        ref_label = key_label(self.key, self.reference)
        header += [f"Δ vs {ref_label} [95% CI], Holm p", "against " + ref_label, "seeds"]
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
            if v == self.reference:
                row += ["reference", "–"]
            else:
                row += [self.comparison(v), self.word(v)]
            row.append(len(runs))
            rows.append(row)
        return md_table(header, rows)

    def vs_ref_sentence(self):
        ref_label = key_label(self.key, self.reference)
        parts = [f"{key_label(self.key, v)} {self.word(v)} ({self.comparison(v)})" for v in self.vs_ref]
        return (f"Against {ref_label} (paired over {len(self.seeds)} seeds, Holm over {len(self.vs_ref)} comparisons), "
                f"in {self.metric_words}: " + "; ".join(parts) + ".")

    def unit_list(self, vs):
        """'4, 8, 16 heads' (or KV heads); 'none' when empty."""
        unit = "KV heads" if self.key == "kv_heads" else "heads"
        return (", ".join(str(v) for v in vs) + " " + unit) if vs else "none"

    def best_sentence(self):
        level = self.level_with_best()
        worse = self.worse_than_best()
        lab = self.unit_list
        return (f"Best mean {self.metric_words}: {key_label(self.key, self.best)} ({self.ms(self.best)}); "
                f"not distinguishable from it: {lab(level)}; worse than it: {lab(worse)} "
                f"(paired, Holm over {len(self.vs_best)}).")

