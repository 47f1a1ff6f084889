#!/usr/bin/env python3
"""experiments/head_count: from the runs to data/, and from data/ to RESULTS.md and figures/.

  make_results.py                  RESULTS.md and figures/ from data/ alone (no runs needed)
  make_results.py --check          exit 0 when the committed RESULTS.md is what data/ gives, else
                                   a one-line hint and exit 1 (no matplotlib, no figures)
  make_results.py collect OUT [--binary PATH]   OUT (run.sh's sweep folders) -> data/
  make_results.py seeds-sweeps LR.toml LR_OUT SEEDS_OUT   (run.sh) one sweep file per head count
                                   at the rate its seed-0 run did best with on val; prints them
  make_results.py eval-jobs HEADLAB OUT   (run.sh) the test-split evaluations still to run

The run-side commands read the runs' config.toml (tomllib, Python >= 3.11); rendering reads only
the CSV files in data/ (see data/README.md for their columns).
"""
import csv
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402  (experiments/common.py)
from common import fail, mean_std, number, pm, write_atomically  # noqa: E402

LR_STUDIES = ("k_relation_3_long", "text_long")
FRESH_SEEDS = [1, 2, 3, 4, 5]  # the seeds trained at each head count's chosen rate (seed 0 chose it)
EVAL_EXAMPLES = 2048  # generated tasks: the whole test set (datasets/README.md)


def read_csv(path):
    return common.read_csv(path, "run experiments/head_count/run.sh first")


# ---- the rate choice (shared by run.sh's seeds-sweeps and the rendering) ------------------------


def choose_rates(rows):
    """rows: dicts with heads, lr, val_loss (strings) of one study's seed-0 runs.
    Per head count, the rate with the lowest final val loss; a tie goes to the lower rate."""
    best = {}
    for r in rows:
        h, lr, loss = int(r["heads"]), float(r["lr"]), number(r["val_loss"])
        if math.isnan(loss):
            fail(f"no final val loss for {h} heads at lr {lr}: the rate sweep has not finished")
        if h not in best or (loss, lr) < (best[h][1], best[h][0]):
            best[h] = (lr, loss)
    return {h: lr for h, (lr, _) in sorted(best.items())}


# ---- run side: reading run folders --------------------------------------------------------------


def load_toml(path):
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def final_row(metrics):
    """The last row with a validation value (the evaluation after the last step)."""
    rows = [m for m in metrics if m["val_loss"] != ""]
    return rows[-1] if rows else None


def run_facts(run_dir):
    """Config facts and final metrics of one finished run folder; None if it has not finished."""
    config = load_toml(os.path.join(run_dir, "config.toml"))
    metrics = read_csv(os.path.join(run_dir, "metrics.csv"))
    m, d, t = config["model"], config["data"], config["train"]
    last = final_row(metrics)
    if last is None or int(last["step"]) != t["steps"]:
        return None
    heads = m["n_heads"]
    return {
        "task": d["task"],
        "heads": heads,
        "kv_heads": m["n_kv_heads"] or heads,
        "d_head": m["d_head"] or m["d_model"] // heads,
        "d_model": m["d_model"],
        "layers": m["n_layers"],
        "lr": repr(t["lr"]),
        "steps": t["steps"],
        "batch": t["batch_size"],
        "seq_len": d["seq_len"],
        "vocab": d["vocab_size"] or m["vocab_size"],
        "offsets": "_".join(str(o) for o in d["offsets"]) if d["task"] == "k_relation" else "",
        "seed": t["seed"],
        "val_loss": last["val_loss"],
        "val_accuracy": last["val_accuracy"],
        "val_bpb": last["val_bpb"],
        "elapsed_s": metrics[-1]["elapsed_s"],
    }, metrics, config


def final_checkpoint(run_dir, steps):
    return os.path.join(run_dir, "checkpoints", f"step_{steps:08d}.h5")


def run_dirs(out):
    """(sweep name, run folder) of every run under OUT: OUT/<sweep>/<run>/ and, for the
    generated seed sweeps, OUT/<study>_seeds/heads=<H>/<run>/."""
    found = []
    for sweep in sorted(os.listdir(out)):
        top = os.path.join(out, sweep)
        if not os.path.isdir(top):
            continue
        for sub in [top] + [os.path.join(top, s) for s in sorted(os.listdir(top)) if s.startswith("heads=")]:
            grid = os.path.join(sub, "grid.csv")
            if os.path.exists(grid):
                for g in read_csv(grid):
                    found.append((sweep, os.path.join(sub, g["run"])))
    return found


def cmd_seeds_sweeps(lr_toml, lr_out, seeds_out):
    sweep = load_toml(lr_toml)
    base = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(lr_toml)), sweep["base"]))
    rows = []
    for g in read_csv(os.path.join(lr_out, "grid.csv")):
        facts = run_facts(os.path.join(lr_out, g["run"]))
        if facts is None:
            fail(f"{os.path.join(lr_out, g['run'])} has not finished")
        rows.append({k: str(v) for k, v in facts[0].items()})
    os.makedirs(seeds_out, exist_ok=True)
    study = os.path.basename(os.path.normpath(seeds_out))
    for heads, lr in choose_rates(rows).items():
        lines = [
            f"# Generated by make_results.py seeds-sweeps from {os.path.relpath(lr_toml, REPO)}: {heads} heads at",
            f"# lr {lr!r}, the rate whose seed-0 run ended with the lowest val loss; fresh seeds.",
            f'base = "{base}"',
            f'name = "{study}_heads={heads}"',
            "",
            "[set]",
        ]
        for key, value in sweep["set"].items():
            lines.append(f'"{key}" = {toml_value(value)}')
        lines += [f'"model.n_heads" = {heads}', f'"train.lr" = {lr!r}', "", "[grid]", f'"train.seed" = {FRESH_SEEDS}', ""]
        path = os.path.join(seeds_out, f"heads={heads}.toml")
        write_atomically(path, "\n".join(lines))
        print(path)


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    fail(f"cannot write {v!r} to a sweep file")


def cmd_eval_jobs(headlab, out):
    """One shell line per finished run without RUN/test.txt: headlab eval of its final checkpoint
    on the test split (generated tasks: all 2048 test examples; text: the whole split)."""
    for _, run in run_dirs(out):
        if os.path.exists(os.path.join(run, "test.txt")) or not os.path.exists(os.path.join(run, "metrics.csv")):
            continue
        got = run_facts(run)
        if got is None:
            continue
        facts, _, config = got
        batches = "" if facts["task"] == "text" else f" --batches {-(-EVAL_EXAMPLES // facts['batch'])}"
        ckpt = final_checkpoint(run, facts["steps"])
        q = lambda p: "'" + p.replace("'", "'\\''") + "'"  # noqa: E731
        print(f"{q(headlab)} eval {q(ckpt)} --split test{batches} > {q(run + '/test.txt.tmp')} && mv {q(run + '/test.txt.tmp')} {q(run + '/test.txt')}")


def read_test(run):
    """RUN/test.txt (headlab eval's output) -> test_loss, test_accuracy, test_bpb strings."""
    path = os.path.join(run, "test.txt")
    if not os.path.exists(path):
        fail(f"{path} is missing: run.sh evaluates every final checkpoint on the test split")
    got = {"test_loss": "", "test_accuracy": "", "test_bpb": ""}
    names = {"loss": "test_loss", "accuracy": "test_accuracy", "bits_per_byte": "test_bpb"}
    for line in open(path):
        parts = line.split()
        if len(parts) == 2 and parts[0] in names:
            got[names[parts[0]]] = parts[1]
    if got["test_loss"] == "":
        fail(f"{path} has no loss line")
    return got



RUN_COLUMNS = ["study", "run", "task", "heads", "kv_heads", "d_head", "d_model", "layers", "params", "lr", "steps",
               "batch", "seq_len", "vocab", "offsets", "seed", "val_loss", "val_accuracy", "val_bpb", "test_loss",
               "test_accuracy", "test_bpb", "elapsed_s"]
CURVE_COLUMNS = ["study", "run", "step", "tokens", "lr", "train_loss", "val_loss", "val_accuracy", "val_bpb"]


def write_csv(path, columns, rows):
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: r[c] for c in columns})
    write_atomically(path, buf.getvalue())


def overlapping(regen):
    """The invocations running at the busiest moment (their JOBS add up)."""
    import datetime

    spans = [(datetime.datetime.strptime(r[0], "%Y-%m-%dT%H:%M:%SZ").timestamp(), r) for r in regen]
    best = []
    for t, _ in spans:
        now = [r for s, r in spans if s <= t < s + int(r[1])]
        if sum(int(r[4]) for r in now) > sum(int(r[4]) for r in best):
            best = now
    return best or regen[-1:]


def wall_span(regen):
    """From the first invocation's start to the last one's end (invocations may overlap)."""
    import datetime

    starts = [datetime.datetime.strptime(r[0], "%Y-%m-%dT%H:%M:%SZ").timestamp() for r in regen]
    return int(max(s + int(r[1]) for s, r in zip(starts, regen)) - min(starts))


def cmd_collect(out, binary):
    """OUT -> data/runs.csv, data/curves.csv, data/provenance.csv."""
    runs, curves = [], []
    for study, run in run_dirs(out):
        got = run_facts(run) if os.path.exists(os.path.join(run, "metrics.csv")) else None
        if got is None:
            fail(f"{run} has not finished: run run.sh to the end first")
        facts, metrics, _ = got
        sweep_dir = os.path.dirname(run)
        grid = {g["run"]: g for g in read_csv(os.path.join(sweep_dir, "grid.csv"))}
        name = os.path.relpath(run, os.path.join(out, study))
        row = {"study": study, "run": name, "params": grid[os.path.basename(run)]["params"], **facts, **read_test(run)}
        runs.append(row)
        for m in metrics:
            if m["val_loss"] != "":
                curves.append({"study": study, "run": name, **{c: m[c] for c in CURVE_COLUMNS[2:]}})
    os.makedirs(DATA, exist_ok=True)
    write_csv(os.path.join(DATA, "runs.csv"), RUN_COLUMNS, runs)
    write_csv(os.path.join(DATA, "curves.csv"), CURVE_COLUMNS, curves)

    regen = list(csv.reader(open(os.path.join(out, "regeneration.csv"))))
    loads = [float(line.split()[1]) for line in open(os.path.join(out, "load.txt"))] if os.path.exists(
        os.path.join(out, "load.txt")) else []
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    info = subprocess.run([binary, "info"], capture_output=True, text=True).stdout.split("\n")
    version = " ".join(info[0].split()[1:]) if info and info[0].startswith("headlab") else ""
    kernels = next((" ".join(x.split()[2:]) for x in info if x.startswith("blis kernels")), "")
    import hashlib

    sha = hashlib.sha256(open(binary, "rb").read()).hexdigest()
    m = re.search(r"headlab-([0-9a-f]{7,40})$", os.path.basename(binary))
    built_from = m.group(1) if m else os.environ.get("HEADLAB_COMMIT", commit)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    # every run.sh invocation that contributed (a resumed regeneration has several)
    prov = [
        ("binary_built_from_commit", built_from),
        ("binary_version", version),
        ("binary_sha256", sha),
        ("blis_kernels", kernels),
        ("repository_head_when_collected", commit),
        ("collected_utc", __import__("datetime").datetime.now(__import__("datetime").timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")),
        ("machine_nproc", str(os.cpu_count())),
        ("machine_cpu", cpu),
        ("run_sh_invocations", str(len(regen))),
        ("run_sh_wall_s", str(wall_span(regen))),
        ("run_sh_cpu_user_s", f"{sum(float(r[2]) for r in regen):.0f}"),
        ("run_sh_cpu_sys_s", f"{sum(float(r[3]) for r in regen):.0f}"),
        ("jobs", str(sum(int(r[4]) for r in overlapping(regen)))),
        ("load_average_mean", f"{sum(loads) / len(loads):.2f}" if loads else ""),
        ("load_average_max", f"{max(loads):.2f}" if loads else ""),
        ("runs", str(len(runs))),
        ("runs_elapsed_sum_s", f"{sum(float(r['elapsed_s']) for r in runs):.0f}"),
    ]
    write_csv(os.path.join(DATA, "provenance.csv"), ["key", "value"], [{"key": k, "value": v} for k, v in prov])
    print(f"wrote {DATA}/runs.csv ({len(runs)} runs), curves.csv ({len(curves)} rows), provenance.csv")


# ---- statistics -----------------------------------------------------------------------------------

ALPHA = 0.05  # two-sided, after Holm's correction within a family of comparisons


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


class Paired:
    """B - A over the seeds both arms have: mean, 95% t-interval, two-sided paired t-test p."""

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
            se = sd / math.sqrt(self.n)
            self.p = t_two_sided_p(self.mean / se, self.n - 1)
            half = t_quantile(0.975, self.n - 1) * se
            self.lo, self.hi = self.mean - half, self.mean + half
        self.p_holm = self.p


def holm(comparisons):
    """Holm's step-down adjustment of the comparisons' p values (common.holm), in place."""
    for c, adjusted in zip(comparisons, common.holm([c.p for c in comparisons])):
        c.p_holm = adjusted
    return comparisons


def word(c, direction):
    """'better', 'worse' or 'level' for B against A (direction +1: higher is better)."""
    if c.n < 2 or math.isnan(c.p_holm) or c.p_holm >= ALPHA:
        return "level"
    return "better" if c.mean * direction > 0 else "worse"


def fmt_p(p):
    """'p = 0.012', 'p < 0.001'."""
    if math.isnan(p):
        return "p –"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


# ---- rendering: data/ -> RESULTS.md and figures/ ----------------------------------------------------

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


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows])


def signed(x, digits):
    return "–" if math.isnan(x) else f"{x:+.{digits}f}"


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
        holm(list(self.vs_ref.values()))
        means = {v: mean_std(values(rows, self.metric))[0] for v, rows in self.points.items()}
        self.best = max(means, key=lambda v: (means[v] * self.direction, -v))
        best = by_seed(self.points[self.best], self.metric)
        self.vs_best = {v: Paired(best, by_seed(rows, self.metric)) for v, rows in self.points.items() if v != self.best}
        holm(list(self.vs_best.values()))
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

    def table(self, extra_steps=False):
        first = self.data.points(self.study, self.key)
        r0 = self.points[self.reference][0]
        has_acc = self.metric == "test_accuracy"
        header = ["KV heads" if self.key == "kv_heads" else "heads", "d_head", "params"]
        if self.key == "kv_heads":
            header.append("KV cache / token")
        header += ([f"test accuracy", "test loss (nats/token)"] if has_acc else [self.metric_words])
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
        header = ["heads", "d_head", f"{self.base_steps} steps, lr {self.base_lr}: {b.metric_words}",
                  "Δ vs 1 head [95% CI], Holm p", "against 1 head", f"{self.long_steps} steps, chosen lr: {l.metric_words}",
                  "Δ vs 1 head [95% CI], Holm p", "against 1 head", f"{self.plateau_words()} over the last quarter (mean; largest)"]
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
            wb, wl = b.word(h), l.word(h)  # h heads against 1 head
            one_b = {"better": "worse", "worse": "better", "level": "level"}[wb]
            one_l = {"better": "worse", "worse": "better", "level": "level"}[wl]
            if one_b == "worse" and one_l == "worse":
                kind = ("one head is worse at both budgets: a capacity gap, or a learnability gap that "
                        f"{self.long_steps / self.base_steps:g}x the steps and the best of three rates do not close")
            elif one_b == "worse" and one_l == "level":
                kind = "one head is only slower (learnability): the gap at the original budget closes with the longer budget and the chosen rate"
            elif one_b == "level" and one_l == "level":
                kind = "no gap resolved at either budget"
            elif one_b == "level" and one_l == "worse":
                kind = "one head falls behind only with the longer budget"
            else:
                kind = f"one head is {one_b} at the original budget and {one_l} at the longer one"
            gap_b, gap_l = b.vs_ref[h].mean, l.vs_ref[h].mean
            ratio = f"; the mean gap goes from {signed(gap_b, b.digits)} to {signed(gap_l, l.digits)}"
            out.append(f"- **{h} heads against 1 head: {kind}**{ratio} ({l.metric_words}, {h} heads minus 1 head).")
        solved = self.one_head_solved()
        if solved is not None:
            got, total = solved
            if got:
                out.append(f"- **Capacity is not what one head lacks here**: {len(got)} of {total} one-head runs at "
                           f"{self.long_steps} steps (the rate sweep and the fresh seeds) reached "
                           f"{ACCURACY_THRESHOLD:.0%} val accuracy (" + ", ".join(got) + "), so one head of width "
                           f"{self.long.points[1][0]['d_head']} can represent the task; what the gap measures is how "
                           "reliably training finds that solution (learnability), not what one head can express.")
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


def fields(data):
    f = {}
    prov = data.prov
    f["provenance"] = md_table(["provenance of data/", ""], [
        ["binary built from commit", f"`{prov['binary_built_from_commit']}` (headlab {prov['binary_version']}, sha256 `{prov['binary_sha256'][:16]}…`, BLIS kernels {prov['blis_kernels']})"],
        ["repository HEAD when collected", f"`{prov['repository_head_when_collected']}`"],
        ["collected (UTC)", prov["collected_utc"]],
        ["machine", f"{prov['machine_nproc']} cores, {prov['machine_cpu']}"],
        ["run.sh wall time", f"{int(prov['run_sh_wall_s']) / 60:.0f} min from the first start to the last end, {prov['run_sh_invocations']} invocation(s), up to {prov['jobs']} one-thread runs at a time"],
        ["CPU time of the runs", f"{(float(prov['run_sh_cpu_user_s']) + float(prov['run_sh_cpu_sys_s'])) / 60:.0f} min (user + system, of the sweeps and evaluations each invocation waited for: a sweep stopped by a restart is not counted, so this is a lower bound)"],
        ["runs, their summed wall time", f"{prov['runs']} runs, {float(prov['runs_elapsed_sum_s']) / 60:.0f} min"],
        ["load average while it ran", f"mean {prov['load_average_mean']}, max {prov['load_average_max']} (sampled each minute)"],
    ])
    cpu_min = (float(prov["run_sh_cpu_user_s"]) + float(prov["run_sh_cpu_sys_s"])) / 60
    f["regen_time"] = (f"about {cpu_min / 2:.0f} minutes on 2 idle cores (the runs' CPU time, at least "
                       f"{cpu_min:.0f} min, over two one-thread runs at a time); the last regeneration took "
                       f"{int(prov['run_sh_wall_s']) / 60:.0f} min of wall time while other work shared the machine "
                       f"(load average {prov['load_average_mean']} on average)")
    f["n_runs"] = prov["runs"]

    sweeps = {}
    for study in ("k_relation_2", "k_relation_3", "induction", "grammar", "grammar_fixed_d_head", "text", "text_fixed_d_head"):
        sweeps[study] = Sweep(data, study)
    for study in ("grammar_kv_heads", "text_kv_heads"):
        sweeps[study] = Sweep(data, study, key="kv_heads", reference=8)
    for study, s in sweeps.items():
        f[f"table {study}"] = s.table()
        f[f"vs_ref {study}"] = s.vs_ref_sentence()
        f[f"best {study}"] = s.best_sentence()
        f[f"pattern {study}"] = s.pattern()
        f[f"Pattern {study}"] = s.pattern()[0].upper() + s.pattern()[1:]
        f[f"seeds {study}"] = str(len(s.seeds))

    # explanations that only fit some outcomes
    if sweeps["induction"].pattern() in ("one wide head is best", "splitting too finely hurts"):
        f["note induction"] = (" A plausible reason: the induction head's query-key product must match token identities "
                               "among 64 symbols, and a 4- or 8-dimensional query/key space is small for that match.")
    else:
        f["note induction"] = ""

    # k = 2: speed to 99% (paired over seeds, one head against each other count)
    k2 = sweeps["k_relation_2"]
    reached = {h: {int(r["seed"]): steps_to(data.curve(r)) for r in rows} for h, rows in k2.points.items()}
    all_reached = all(s is not None for h in reached for s in reached[h].values())
    steps = {h: {s: float(v if v is not None else int(k2.points[h][0]["steps"]) + 1) for s, v in d.items()} for h, d in reached.items()}
    cmp = {h: Paired(steps[1], steps[h]) for h in steps if h != 1}
    holm(list(cmp.values()))
    f["k2 speed"] = ("Every run of every head count reached 99% val accuracy" if all_reached else
                     "Not every run reached 99% val accuracy (those that did not count as the budget + 1)") + \
        "; steps to 99%, each head count minus one head (paired, Holm): " + "; ".join(
            f"{h} heads {signed(c.mean, 0)} [{signed(c.lo, 0)}, {signed(c.hi, 0)}], {fmt_p(c.p_holm)} ({word(c, -1)})"
            for h, c in cmp.items()) + "."

    studies = {n: Study(data, n) for n in LR_STUDIES}
    for n, st in studies.items():
        f[f"lr_table {n}"] = st.lr_table()
        f[f"cl_table {n}"] = st.table()
        f[f"cl_verdicts {n}"] = st.verdicts()
        f[f"plateau {n}"] = st.plateau_sentence()
        f[f"long_steps {n}"] = str(st.long_steps)
        f[f"base_steps {n}"] = str(st.base_steps)

    # the 2-layer k = 3 model against one layer (same heads per layer, same seeds)
    two = data.rows("k_relation_3_two_layers")
    one = [r for r in data.rows("k_relation_3", heads=8) if int(r["seed"]) in {int(x["seed"]) for x in two}]
    c = Paired(by_seed(one, "test_accuracy"), by_seed(two, "test_accuracy"))
    f["two_layers table"] = md_table(
        ["model", "params"] + [f"seed {r['seed']}" for r in sorted(two, key=lambda r: int(r["seed"]))] + ["mean ± std"],
        [[f"{len_l} layer{'s' if len_l > 1 else ''} x 8 heads", f"{int(rows[0]['params']):,}"]
         + [f"{number(r['test_accuracy']):.3f}" for r in sorted(rows, key=lambda r: int(r["seed"]))]
         + [pm(*mean_std(values(rows, "test_accuracy")), 3)] for len_l, rows in ((1, one), (2, two))])
    w = {"better": "better than", "worse": "worse than", "level": "level with"}[word(c, +1)]
    f["two_layers verdict"] = (f"Two layers are {w} one layer in test accuracy "
                               f"({signed(c.mean, 3)} [{signed(c.lo, 3)}, {signed(c.hi, 3)}], paired t-test over {c.n} seeds, {fmt_p(c.p)})")
    f["two_layers steps"] = two[0]["steps"]

    p6 = Sweep(data, "k_relation_3_p6")
    c = p6.vs_ref[3]
    f["p6 table"] = p6.table()
    w = word(c, +1)  # three heads against one head
    f["p6 verdict"] = {"worse": "one wide head beats three narrow ones here too",
                       "better": "three narrow heads beat one wide head here: the opposite of the pair-target note",
                       "level": "one wide head and three narrow ones are not distinguishable here"}[w] + \
        f" (three heads minus one head: {p6.comparison(3)}, paired over {c.n} seeds)"

    f["claims"] = claims_table(sweeps, studies)
    return f


def solved_words(study):
    """', though N of M one-head runs solved it (so: learnability, not capacity)' or ''."""
    solved = study.one_head_solved()
    if not solved or not solved[0]:
        return ""
    return (f", though {len(solved[0])} of {solved[1]} one-head runs at {study.long_steps} steps solved it "
            "(one head can represent it: the gap is learnability, not capacity)")


def claims_table(sweeps, studies):
    """Against the sources' claims: every cell built from the comparisons."""
    rows = []
    # Vaswani Table 3 (A): more heads help, up to a point
    parts = []
    for study in ("text", "k_relation_3", "induction", "grammar"):
        s = sweeps[study]
        parts.append(f"{TITLES[study]}: {s.pattern()} (best {key_label('heads', s.best)}; worse than it: "
                     + (", ".join(str(v) for v in s.worse_than_best()) or "none") + ")")
    agree = [st for st in ("text", "k_relation_3", "induction", "grammar")
             if sweeps[st].pattern() == "more heads help up to a point, then hurt"]
    head = ("**Agrees on " + ", ".join(TITLES[a] for a in agree) + "**" if agree else "**Not reproduced on any task**")
    rows.append(["More heads help, up to a point (Vaswani et al. 2017, Table 3 rows A: 1 head 0.9 BLEU worse than 8, "
                 "16 heads level with 8, 32 heads 0.4 worse)", head + ". " + "; ".join(parts) + "."])
    # d_head
    parts = []
    for study in ("text", "induction", "k_relation_3"):
        s = sweeps[study]
        ok = [s.best] + s.level_with_best()
        dh = {v: int(s.points[v][0]["d_head"]) for v in s.points}
        parts.append(f"{TITLES[study]}: best d_head {dh[s.best]}, smallest d_head not distinguishable from the best "
                     f"{min(dh[v] for v in ok)}")
    rows.append(["d_head around 64-128 at scale", "; ".join(parts) + ". At d_model 64-128 we cannot test 64 against 128 "
                 "with more than one or two heads."])
    # one wide head
    k3, tx = studies["k_relation_3_long"], studies["text_long"]
    top3, toptx = max(k3.heads), min(h for h in tx.heads if h > 1)
    k2 = sweeps["k_relation_2"]
    k2_word = [k2.word(v) for v in k2.vs_ref]
    rows.append(["One wide head is not equivalent to several (the \"why multi-head\" argument)",
                 f"k = 3: {top3} heads against one head are {k3.base.word(top3)} at {k3.base_steps} steps "
                 f"({k3.base.comparison(top3)}) and {k3.long.word(top3)} at {k3.long_steps} steps with each count's best rate "
                 f"({k3.long.comparison(top3)})" + solved_words(k3) + ". k = 2: more heads are "
                 + ("level with one head in test accuracy at every count" if set(k2_word) == {"level"} else
                    ", ".join(f"{v}: {w}" for v, w in zip(k2.vs_ref, k2_word)))
                 + f". Text: {toptx} heads against one are {tx.base.word(toptx)} at {tx.base_steps} steps ({tx.base.comparison(toptx)}) "
                 f"and {tx.long.word(toptx)} at {tx.long_steps} ({tx.long.comparison(toptx)})."])
    # MQA / GQA
    parts = []
    for study in ("text_kv_heads", "grammar_kv_heads"):
        s = sweeps[study]
        ref = mean_std(values(s.points[8], s.metric))[0]
        for v in (1, 4):
            m = mean_std(values(s.points[v], s.metric))[0]
            w = {"better": "better than", "worse": "worse than", "level": "level with"}[s.word(v)]
            parts.append(f"{TITLES[study].split(',')[0]}, {key_label('kv_heads', v)}: {(m - ref) / ref:+.1%} "
                         f"({w} MHA, {s.comparison(v)})")
    rows.append(["MQA/GQA keep most of MHA's quality with a much smaller KV cache (Shazeer 2019; Ainslie et al. 2023)",
                 "; ".join(parts) + " (relative change of the test metric against MHA; the cache is 8x and 2x smaller)."])
    return md_table(["claim", "here"], rows)


# ---- figures (a normal run only; --check never imports matplotlib) ----------------------------------


def figures(data):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "svg.hashsalt": "headlab"})
    out = os.path.join(HERE, "figures")
    os.makedirs(out, exist_ok=True)
    written = set()

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110, metadata={"Software": None})
        plt.close(fig)
        written.add(name)

    def setup(r):
        layers = int(r["layers"])
        return f"{layers} layer{'s' if layers > 1 else ''}, d_model {r['d_model']}, {r['steps']} steps"

    def final_plot(ax, study, key="heads", only=None, label_d_head=True):
        s = Sweep(data, study, key=key, reference=8 if key == "kv_heads" else None, only=only)
        xs = list(s.points)
        for i, v in enumerate(xs):
            ys = values(s.points[v], s.metric)
            jitter = [(j - (len(ys) - 1) / 2) * 0.06 for j in range(len(ys))]
            ax.scatter([i + j for j in jitter], ys, s=12, color="0.55", zorder=2, label="one seed" if i == 0 else None)
            m, sd = mean_std(ys)
            half = t_quantile(0.975, len(ys) - 1) * sd / math.sqrt(len(ys)) if len(ys) > 1 else 0.0
            ax.errorbar([i], [m], yerr=[[half], [half]], fmt="o", color="C0", capsize=4, zorder=3,
                        label="mean, 95% t-interval" if i == 0 else None)
        ticks = [f"{v}\n(d_head {s.points[v][0]['d_head']})" if (label_d_head and key == "heads") else str(v) for v in xs]
        ax.set_xticks(range(len(xs)), ticks)
        ax.set_xlabel("KV heads (8 query heads)" if key == "kv_heads" else "heads")
        ax.set_ylabel(s.metric_words)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        return s

    for study in ("k_relation_2", "k_relation_3", "induction", "grammar", "grammar_fixed_d_head", "text",
                  "text_fixed_d_head", "grammar_kv_heads", "text_kv_heads"):
        key = "kv_heads" if study.endswith("kv_heads") else "heads"
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        s = final_plot(ax, study, key=key, label_d_head=not study.endswith("fixed_d_head"))
        ax.set_title(f"{TITLES[study]}: {s.metric_words} of each seed\n({setup(data.rows(study)[0])})")
        save(fig, f"{study}_final.png")

    def curves(ax, study, key="heads", only=None, metric=None, rows_of=None):
        """Mean val curve per point, band = min-max over seeds; colour by the point's rank in
        `only` (so two panels of the same points match), else in the sweep."""
        pts = rows_of if rows_of is not None else data.points(study, key)
        order = sorted(only) if only is not None else list(pts)
        for v, rows in pts.items():
            if v not in order:
                continue
            i = order.index(v)
            m = metric or VAL_METRIC[rows[0]["task"]]
            cs = [data.curve(r) for r in rows]
            steps = [int(c["step"]) for c in cs[0]]
            ys = [[number(c[j][m]) for c in cs] for j in range(len(steps))]
            mean = [sum(y) / len(y) for y in ys]
            ax.plot(steps, mean, color=f"C{i}", label=f"{key_label(key, v)} (d_head {rows[0]['d_head']})" if key == "heads" else key_label(key, v))
            ax.fill_between(steps, [min(y) for y in ys], [max(y) for y in ys], color=f"C{i}", alpha=0.15, lw=0)
        ax.set_xlabel("step")
        ax.set_ylabel({"val_accuracy": "val accuracy", "val_bpb": "val bits/byte", "val_loss": "val loss (nats/token)"}[m])
        ax.grid(alpha=0.3)

    for study in ("k_relation_2", "k_relation_3", "induction", "text"):
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        curves(ax, study)
        n = len({r["seed"] for r in data.rows(study)})
        ax.set_title(f"{TITLES[study]}: validation curves\n(mean over {n} seeds, band = min-max; {setup(data.rows(study)[0])})")
        ax.legend(fontsize=7, ncol=2)
        save(fig, f"{study}_curves.png")

    for name in LR_STUDIES:
        st = Study(data, name)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
        curves(axes[0], st.base.study, only=st.heads)
        axes[0].set_title(f"{st.base_steps} steps, lr {st.base_lr}, seeds {min(st.base.seeds)}-{max(st.base.seeds)}")
        curves(axes[1], st.long.study, rows_of=st.long.points, only=st.heads)
        axes[1].set_title(f"{st.long_steps} steps, each count's chosen lr, seeds {min(st.long.seeds)}-{max(st.long.seeds)}")
        axes[1].legend(fontsize=7)
        fig.suptitle(f"{TITLES[name]}: original against 3x budget (mean, band = min-max over seeds)")
        save(fig, f"{name}_curves.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    two = data.rows("k_relation_3_two_layers")
    seeds = {r["seed"] for r in two}
    one = [r for r in data.rows("k_relation_3", heads=8) if r["seed"] in seeds]
    for i, (label, rows) in enumerate((("1 layer x 8 heads", one), ("2 layers x 8 heads", two))):
        for j, r in enumerate(sorted(rows, key=lambda r: int(r["seed"]))):
            c = data.curve(r)
            axes[0].plot([int(x["step"]) for x in c], [number(x["val_accuracy"]) for x in c], color=f"C{i}", alpha=0.8,
                         label=label if j == 0 else None)
    axes[0].set_title(f"{TITLES['k_relation_3']}: one or two layers\n(each line one seed)")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("val accuracy")
    axes[0].grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    curves(axes[1], "k_relation_3_p6")
    axes[1].set_title(f"{TITLES['k_relation_3_p6']}\n(mean, band = min-max over seeds)")
    axes[1].legend(fontsize=8)
    save(fig, "k_relation_3_extras.png")

    for png in os.listdir(out):  # figures of an earlier layout
        if png.endswith(".png") and png not in written:
            os.remove(os.path.join(out, png))


def render(check):
    data = Data()
    f = fields(data)
    template = open(os.path.join(HERE, "results.template.md")).read()
    used = set()

    def fill(m):
        name = m.group(1)
        if name not in f:
            fail(f"results.template.md: unknown placeholder {{{{{name}}}}}")
        used.add(name)
        return f[name]

    text = re.sub(r"\{\{([^{}]+)\}\}", fill, template)
    target = os.path.join(HERE, "RESULTS.md")
    if check:
        old = open(target).read() if os.path.exists(target) else ""
        if old == text:
            return
        a, b = old.splitlines(), text.splitlines()
        line = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        print(f"make_results --check: RESULTS.md differs from what data/ gives, first at line {line + 1}; "
              f"regenerate with python3 experiments/head_count/make_results.py", file=sys.stderr)
        sys.exit(1)
    figures(data)
    write_atomically(target, text)
    print(f"wrote {target}")


# ---- main ---------------------------------------------------------------------------------------------


def main():
    args = sys.argv[1:]
    if args[:1] == ["seeds-sweeps"] and len(args) == 4:
        return cmd_seeds_sweeps(*args[1:])
    if args[:1] == ["eval-jobs"] and len(args) == 3:
        return cmd_eval_jobs(*args[1:])
    if args[:1] == ["collect"] and len(args) in (2, 4) and (len(args) == 2 or args[2] == "--binary"):
        return cmd_collect(args[1], args[3] if len(args) == 4 else os.path.join(REPO, "build", "headlab"))
    if args in ([], ["--check"]):
        return render(check=bool(args))
    fail("usage: make_results.py [--check] | collect OUT [--binary PATH] | seeds-sweeps LR.toml LR_OUT SEEDS_OUT"
         " | eval-jobs HEADLAB OUT")


if __name__ == "__main__":
    main()
