#!/usr/bin/env python3
"""experiments/pruning, beyond single heads (issue 32): run_beyond.sh's run folders into the compact
data/beyond/ folder that make_results.py reads (beyond.py renders it). Nothing here trains.

  python3 experiments/pruning/collect_beyond.py runs/pruning experiments/pruning/data/beyond \\
      [--tasks "grammar text"] [--seeds "0 1"] [--binary build/headlab] [--started UTC] \\
      [--wall-seconds S] [--load FILE] [--scale full]

data/beyond/
  heads.csv       task,seed,layer,head,importance,importance_normalized,ablation_loss_delta,
                  integrated_gradients: the final checkpoint's analysis (headlab analyze --ig-steps)
  analyses.csv    task,seed,loss,ig_loss_change,ig_completeness_error,ig_steps: its losses and how
                  far the heads' integrated gradients add up from L(g) - L(0)
  prune.csv       task,seed,arm + prune.csv's columns but the pruned lists (pruned_heads,
                  pruned_units: long, and read by nothing here): every round of every arm
  timings.csv     task,seed,job,seconds
  provenance.csv  key,value: the binary's commit, uncommitted changes, start (UTC), machine, wall
                  time, highest 1-minute load, scale
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common, pruning
import common  # noqa: E402
from common import fail, write_csv  # noqa: E402
from pruning.collect import cpu_model, fmt, job_seconds, read_heads, read_rows  # noqa: E402

HEAD_COLUMNS = ["importance", "importance_normalized", "ablation_loss_delta", "integrated_gradients"]
ANALYSIS_KEYS = ["loss", "ig_loss_change", "ig_completeness_error", "ig_steps"]
DROPPED = ("pruned_heads", "pruned_units")


def collect(out, tasks, seeds):
    heads, analyses, prune, timings = [], [], [], []
    for task in tasks:
        for seed in seeds:
            d = os.path.join(out, task, f"seed{seed}", "beyond")
            path = os.path.join(d, "analyze", "heads.h5")
            if not os.path.exists(path):
                continue
            columns, _, attrs = read_heads(path)
            missing = [c for c in HEAD_COLUMNS if c not in columns]
            if missing:
                fail(f"{path} has no {', '.join(missing)}: run_beyond.sh analyses with --ig-steps", "collect_beyond")
            L, H = columns["gate"].shape
            for layer in range(L):
                for head in range(H):
                    heads.append({"task": task, "seed": seed, "layer": layer, "head": head,
                                  **{c: fmt(columns[c][layer, head]) for c in HEAD_COLUMNS}})
            analyses.append({"task": task, "seed": seed, **{k: attrs.get(k, "") for k in ANALYSIS_KEYS}})
            timings += job_seconds(task, seed, os.path.join(d, "analyze"), "analyze")
            for arm in sorted(os.listdir(d)):
                adir = os.path.join(d, arm)
                if arm == "analyze" or not os.path.exists(os.path.join(adir, "pruned.h5")):
                    continue
                for r in read_rows(os.path.join(adir, "prune.csv")):
                    r["prune_seed"] = r.pop("seed")  # "seed" is the base model's here
                    prune.append({"task": task, "seed": seed, "arm": arm,
                                  **{k: v for k, v in r.items() if k not in DROPPED}})
                timings += job_seconds(task, seed, adir, arm)
    if not heads:
        fail(f"{out} holds no <task>/seed<N>/beyond/analyze/heads.h5 of {' '.join(tasks)}: "
             "run experiments/pruning/run_beyond.sh first", "collect_beyond")
    return heads, analyses, prune, timings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("data")
    ap.add_argument("--tasks", default="grammar text induction classify k_relation")
    ap.add_argument("--seeds", default="0 1 2 3 4")
    ap.add_argument("--binary", default="build/headlab")
    ap.add_argument("--started", default="")
    ap.add_argument("--wall-seconds", default="")
    ap.add_argument("--load", default="")
    ap.add_argument("--scale", default="full")
    args = ap.parse_args()
    heads, analyses, prune, timings = collect(args.out, args.tasks.split(), [int(s) for s in args.seeds.split()])
    os.makedirs(args.data, exist_ok=True)
    write_csv(os.path.join(args.data, "heads.csv"), ["task", "seed", "layer", "head"] + HEAD_COLUMNS, heads)
    write_csv(os.path.join(args.data, "analyses.csv"), ["task", "seed"] + ANALYSIS_KEYS, analyses)
    write_csv(os.path.join(args.data, "prune.csv"), list(dict.fromkeys(k for r in prune for k in r)), prune)
    write_csv(os.path.join(args.data, "timings.csv"), ["task", "seed", "job", "seconds"], timings)
    info = subprocess.run([args.binary, "info"], capture_output=True, text=True).stdout.splitlines()
    commit = next((x.split()[1] for x in info if x.startswith("commit") and len(x.split()) > 1), "")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=HERE).stdout.strip()
    loads = [float(x.split()[1]) for x in open(args.load) if len(x.split()) == 2] \
        if args.load and os.path.exists(args.load) else []
    provenance = {"commit": commit, "uncommitted_changes": "yes" if dirty else "no", "started_utc": args.started,
                  "machine": f"{cpu_model()}, {os.cpu_count()} cores", "wall_seconds": args.wall_seconds,
                  "max_load_1min": f"{max(loads):.2f}" if loads else "", "scale": args.scale,
                  "tasks": args.tasks, "seeds": args.seeds}
    write_csv(os.path.join(args.data, "provenance.csv"), ["key", "value"],
              [{"key": k, "value": v} for k, v in provenance.items()])
    print(f"collected {len(heads)} heads, {len(prune)} prune rounds: {args.out} -> {args.data}")


if __name__ == "__main__":
    try:
        main()
    except common.CsvError as e:
        fail(str(e), "collect_beyond")
