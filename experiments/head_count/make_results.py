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
        ("scripts_commit", commit),
        ("regenerated_utc", regen[-1][0]),
        ("machine_nproc", str(os.cpu_count())),
        ("machine_cpu", cpu),
        ("run_sh_invocations", str(len(regen))),
        ("run_sh_wall_s", str(sum(int(r[1]) for r in regen))),
        ("run_sh_cpu_user_s", f"{sum(float(r[2]) for r in regen):.0f}"),
        ("run_sh_cpu_sys_s", f"{sum(float(r[3]) for r in regen):.0f}"),
        ("jobs", regen[-1][4]),
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
    """Holm's step-down adjustment of the comparisons' p values, in place."""
    order = sorted(range(len(comparisons)), key=lambda i: comparisons[i].p)
    m, running = len(comparisons), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * comparisons[i].p))
        comparisons[i].p_holm = running
    return comparisons


def word(c, direction):
    """'better', 'worse' or 'level' for B against A (direction +1: higher is better)."""
    if c.n < 2 or math.isnan(c.p_holm) or c.p_holm >= ALPHA:
        return "level"
    return "better" if c.mean * direction > 0 else "worse"


def fmt_p(p):
    if math.isnan(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


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
