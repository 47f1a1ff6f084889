"""experiments/head_count, the budget studies (k_relation_3_long, text_long): the rate sweep
(seed 0), the fresh seeds at each head count's chosen rate, and the same head counts at the
original budget; whether one head is worse, only slower, or level."""
from common import fail, md_table, mean_std, number, signed

from .runs import choose_rates
from .sweeps import ACCURACY_THRESHOLD, BASE_OF, NO_DIFFERENCE, PLATEAU_TOLERANCE, VAL_METRIC, Sweep


def last_quarter_change(curve, metric, relative):
    """Change of the val metric from the evaluation nearest 3/4 of training to the last one
    (relative to the former, or absolute)."""
    steps = [int(c["step"]) for c in curve]
    q = min(range(len(steps)), key=lambda i: abs(steps[i] - 0.75 * steps[-1]))
    a, b = number(curve[q][metric]), number(curve[-1][metric])
    return (b - a) / a if relative else b - a


class Study:
    """Capacity or learnability: the rate sweep (seed 0), the fresh seeds at the chosen rates, and
    the same head counts at the original budget (the base sweep, its seeds)."""

    def __init__(self, data, name):
        self.data, self.name = data, name
        self.lr_rows = data.rows(name + "_lr")
        self.seed_rows = data.rows(name + "_seeds")
        self.heads = sorted({int(r["heads"]) for r in self.lr_rows})
        self.chosen = choose_rates(self.lr_rows)
        for r in self.seed_rows:  # the seed runs must be at the rate the rule picks from the data
            if float(r["lr"]) != self.chosen[int(r["heads"])]:
                fail(f"data/runs.csv: {name}_seeds {r['run']} ran at lr {r['lr']}, the rule picks {self.chosen[int(r['heads'])]}")
        self.base = Sweep(data, BASE_OF[name], only=self.heads)
        self.long = Sweep(data, name + "_seeds", only=self.heads)
        self.task = self.lr_rows[0]["task"]
        self.base_lr = data.rows(BASE_OF[name])[0]["lr"]
        self.base_steps = int(data.rows(BASE_OF[name])[0]["steps"])
        self.long_steps = int(self.seed_rows[0]["steps"])

    def lr_table(self):
        rates = sorted({float(r["lr"]) for r in self.lr_rows})
        has_acc = self.task != "text" and self.task != "grammar"
        header = ["heads"] + [f"lr {lr:g}" for lr in rates] + ["chosen"]
        rows = []
        for h in self.heads:
            row = [h]
            for lr in rates:
                r = next(x for x in self.lr_rows if int(x["heads"]) == h and float(x["lr"]) == lr)
                cell = f"{number(r['val_loss']):.3f}"
                if has_acc:
                    cell += f" ({number(r['val_accuracy']):.3f})"
                row.append(cell)
            row.append(f"{self.chosen[h]:g}")
            rows.append(row)
        return md_table(header, rows)

    def plateau(self, h):
        """Mean change and largest |change| over seeds of the val metric over the last quarter."""
        m = VAL_METRIC[self.task]
        changes = [last_quarter_change(self.data.curve(r), m, relative=(m != "val_accuracy")) for r in self.long.points[h]]
        return mean_std(changes)[0], max(abs(c) for c in changes)

    def tolerance(self):
        return PLATEAU_TOLERANCE[VAL_METRIC[self.task] == "val_accuracy"]

    def plateau_words(self):
        return "val accuracy change (points)" if VAL_METRIC[self.task] == "val_accuracy" else \
            f"relative change of {VAL_METRIC[self.task].replace('_', ' ')}"

    def fmt_change(self, x, signed_=False):
        if VAL_METRIC[self.task] == "val_accuracy":
            return f"{x * 100:+.1f}" if signed_ else f"{x * 100:.1f}"
        return f"{x:+.2%}" if signed_ else f"{x:.2%}"

    def flat(self, h):
        return self.plateau(h)[1] < self.tolerance()

    def table(self):
        b, l = self.base, self.long
        cmp_words = "Δ vs 1 head [95% CI]" + ("; runs solved" if b.accuracy else "") + ", Holm p"
        header = ["heads", "d_head", f"{self.base_steps} steps, lr {self.base_lr}: {b.metric_words}",
                  cmp_words, "against 1 head", f"{self.long_steps} steps, chosen lr: {l.metric_words}", cmp_words,
                  "against 1 head", f"{self.plateau_words()} over the last quarter (mean; largest)"]
        rows = []
        for h in self.heads:
            d = l.points[h][0]["d_head"]
            pm_change = self.plateau(h)
            row = [h, d, b.ms(h)]
            row += ["reference", "–"] if h == b.reference else [b.comparison(h), b.word(h)]
            row.append(l.ms(h))
            row += ["reference", "–"] if h == l.reference else [l.comparison(h), l.word(h)]
            row.append(self.fmt_change(pm_change[0], signed_=True) + "; " + self.fmt_change(pm_change[1]))
            rows.append(row)
        return md_table(header, rows)

    def verdicts(self):
        """One sentence per head count against one head: worse, slower, or no gap."""
        b, l = self.base, self.long
        out = []
        for h in self.heads:
            if h == 1:
                continue
            one = {"better": "worse", "worse": "better"}  # h heads against 1 head -> 1 head against h heads
            one_b, one_l = (one.get(w, w) for w in (b.word(h), l.word(h)))
            if one_b == "worse" and one_l == "worse":
                kind = ("one head is worse at both budgets: a capacity gap, or a learnability gap that "
                        f"{self.long_steps / self.base_steps:g}x the steps and the best of three rates do not close")
            elif one_b == "worse" and one_l == NO_DIFFERENCE:
                kind = ("one head is only slower (learnability): the gap at the original budget closes to within "
                        "the practical threshold with the longer budget and the chosen rate")
            elif one_b != "worse" and one_l == "worse":
                kind = f"one head falls behind only with the longer budget ({one_b} at the original one)"
            else:
                kind = f"one head: {one_b} at the original budget, {one_l} at the longer one"
            gap_b, gap_l = b.pair(1, h)[0].mean, l.pair(1, h)[0].mean
            ratio = f"; the mean gap goes from {signed(gap_b, b.digits)} to {signed(gap_l, l.digits)}"
            out.append(f"- **{h} heads against 1 head: {kind}**{ratio} ({l.metric_words}, {h} heads minus 1 head).")
        solved = self.one_head_solved()
        if solved is not None:
            got, total = solved
            if got:
                out.append(f"- **An existence proof, not a test**: {len(got)} of {total} one-head runs at "
                           f"{self.long_steps} steps (the rate sweep and the fresh seeds) reached "
                           f"{ACCURACY_THRESHOLD:.0%} val accuracy (" + ", ".join(got) + "), so one head of width "
                           f"{self.long.points[1][0]['d_head']} can represent the task; a gap in the share of runs "
                           "solved then measures how reliably training finds that solution (learnability), not "
                           "what one head can express.")
            else:
                out.append(f"- None of the {total} one-head runs at {self.long_steps} steps (the rate sweep and the "
                           f"fresh seeds) reached {ACCURACY_THRESHOLD:.0%} val accuracy, so these runs give no "
                           "existence proof that one head can represent the task.")
        return "\n".join(out)

    def one_head_solved(self):
        """For accuracy tasks: (which one-head runs of the longer budget reached the threshold on val,
        how many there are); None for loss tasks, where no threshold means "solved"."""
        if VAL_METRIC[self.task] != "val_accuracy":
            return None
        runs = [r for r in self.lr_rows + self.seed_rows if int(r["heads"]) == 1]
        got = [f"seed {r['seed']} at lr {float(r['lr']):g}" for r in runs
               if number(r["val_accuracy"]) >= ACCURACY_THRESHOLD]
        return got, len(runs)

    def plateau_sentence(self):
        flat = [h for h in self.heads if self.flat(h)]
        moving = [h for h in self.heads if not self.flat(h)]
        parts = []
        tol = (f"{self.tolerance() * 100:.0f} point" if VAL_METRIC[self.task] == "val_accuracy"
               else f"{self.tolerance():.0%}")
        what = "val accuracy" if VAL_METRIC[self.task] == "val_accuracy" else VAL_METRIC[self.task].replace("_", " ")
        if flat:
            parts.append(f"flat ({what} moved by less than {tol} over the last quarter of training in every seed) at "
                         + ", ".join(f"{h}" for h in flat) + " heads")
        if moving:
            parts.append(f"still moving by more than {tol} in some seed at " + ", ".join(
                f"{h} (largest {self.fmt_change(self.plateau(h)[1])})" for h in moving) + " heads")
        return f"At {self.long_steps} steps the curves are " + "; ".join(parts) + "."
