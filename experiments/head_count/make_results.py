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


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] in ("seeds-sweeps", "eval-jobs"):
    if sys.argv[1] == "seeds-sweeps" and len(sys.argv) == 5:
        cmd_seeds_sweeps(*sys.argv[2:])
    elif sys.argv[1] == "eval-jobs" and len(sys.argv) == 4:
        cmd_eval_jobs(*sys.argv[2:])
    else:
        fail("usage: make_results.py seeds-sweeps LR.toml LR_OUT SEEDS_OUT | eval-jobs HEADLAB OUT")
    sys.exit(0)
