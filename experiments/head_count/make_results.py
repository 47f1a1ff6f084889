#!/usr/bin/env python3
"""Fills experiments/head_count/RESULTS.md from the sweeps' aggregates (run.sh calls it).

RESULTS.md is results.template.md with every `{{table NAME}}` replaced by a table built from
OUT/NAME/results.csv (the sweep's own mean and sample std over seeds), plus columns derived from
each run's config.toml and metrics.csv: the head width, the KV-cache size, and how many steps the
runs needed to reach a validation accuracy threshold. Figures: OUT/NAME/plots/final_*.png and
the validation curves are copied to experiments/head_count/figures/NAME_*.png.

  python3 experiments/head_count/make_results.py runs/head_count
"""
import math
import os
import re
import shutil
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
from common import fail, mean_std, number, pm, write_atomically  # noqa: E402  (experiments/common.py)

ACCURACY_THRESHOLD = 0.99


def steps_to_accuracy(metrics_rows, steps):
    """First logged step with val_accuracy >= threshold; `steps` + 1 (censored) if never."""
    for row in metrics_rows:
        if number(row["val_accuracy"]) >= ACCURACY_THRESHOLD:
            return int(row["step"])
    return steps + 1


def read_csv(path):
    return common.read_csv(path, "run the sweep first (experiments/head_count/run.sh)")


def sweep_table(out, name):
    sweep = os.path.join(out, name)
    results = read_csv(os.path.join(sweep, "results.csv"))
    grid = read_csv(os.path.join(sweep, "grid.csv"))
    keys = [k for k in grid[0].keys() if k not in ("run", "params", "steps", "train.seed", "data.seed")]
    # Runs of each point (every seed), for the derived columns.
    runs_of = {}
    for g in grid:
        runs_of.setdefault(tuple(g[k] for k in keys), []).append(g)

    has_acc = any(r["val_accuracy_mean"] for r in results)
    has_bpb = any(r["val_bpb_mean"] for r in results)
    header = [KEY_TITLES.get(k, k) for k in keys] + ["d_head", "params"]
    if any(k == "model.n_kv_heads" for k in keys):
        header.append("KV cache / token")
    header += ["val loss (nats/token)"]
    if has_acc:
        header += ["val accuracy", f"steps to {ACCURACY_THRESHOLD:.0%} (runs that got there)"]
    if has_bpb:
        header += ["val bits/byte"]
    header += ["seeds"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]

    for r in results:
        point = tuple(r[k] for k in keys)
        runs = runs_of[point]
        config = tomllib.load(open(os.path.join(sweep, runs[0]["run"], "config.toml"), "rb"))
        model = config["model"]
        n_heads = model["n_heads"]
        d_head = model["d_head"] or model["d_model"] // n_heads
        row = [r[k].replace("_", ", ") if k == "data.offsets" else r[k] for k in keys] + [str(d_head), f"{int(r['params']):,}"]
        if "model.n_kv_heads" in keys:
            kv = model["n_kv_heads"] or n_heads
            row.append(f"{2 * model['n_layers'] * kv * d_head * 4:,} B")  # K and V, fp32, all layers
        row.append(pm(number(r["val_loss_mean"]), number(r["val_loss_std"]), 3))
        if has_acc:
            row.append(pm(number(r["val_accuracy_mean"]), number(r["val_accuracy_std"]), 3))
            reached = []
            for g in runs:
                steps = int(g["steps"])
                s = steps_to_accuracy(read_csv(os.path.join(sweep, g["run"], "metrics.csv")), steps)
                reached.append(s if s <= steps else math.nan)
            got = [s for s in reached if not math.isnan(s)]
            m, s = mean_std(got)
            row.append(f"{pm(m, s, 0)} ({len(got)}/{len(runs)})" if got else f"– (0/{len(runs)})")
        if has_bpb:
            row.append(pm(number(r["val_bpb_mean"]), number(r["val_bpb_std"]), 3))
        row += [f"{r['n_seeds']}/{r['n_runs']}"]
        lines.append("| " + " | ".join(row) + " |")

    figures = os.path.join(HERE, "figures")
    os.makedirs(figures, exist_ok=True)
    for png in sorted(os.listdir(os.path.join(sweep, "plots"))) if os.path.isdir(os.path.join(sweep, "plots")) else []:
        if png.endswith(".png") and (png.startswith("final_") or png.startswith("val_")):
            shutil.copyfile(os.path.join(sweep, "plots", png), os.path.join(figures, f"{name}_{png}"))
    return "\n".join(lines)


KEY_TITLES = {
    "model.n_heads": "heads",
    "model.n_kv_heads": "KV heads",
    "data.offsets": "offsets",
    "model.d_head": "d_head",
}


def main():
    if len(sys.argv) != 2:
        fail("usage: make_results.py OUT (the folder holding the sweeps, e.g. runs/head_count)")
    out = sys.argv[1]
    template = open(os.path.join(HERE, "results.template.md")).read()
    text = re.sub(r"\{\{table (\w+)\}\}", lambda m: sweep_table(out, m.group(1)), template)
    target = os.path.join(HERE, "RESULTS.md")
    write_atomically(target, text)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
