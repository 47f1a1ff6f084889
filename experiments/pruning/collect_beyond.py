#!/usr/bin/env python3
"""experiments/pruning, beyond single heads (issue 32): run_beyond.sh's run folders into the compact
data/beyond/ folder that make_results.py reads (beyond.py renders it). Nothing here trains.

  python3 experiments/pruning/collect_beyond.py runs/pruning experiments/pruning/data/beyond \\
      [--tasks "grammar text"] [--seeds "0 1"] [--binary build/headlab] [--started UTC] \\
      [--wall-seconds S] [--load FILE] [--scale full]

A part (run_beyond.sh with some TASKS) replaces its tasks' rows of data/beyond/ and keeps the
others', which must come from the same clean commit, the same seeds and scale (pruning/collect.py's
kept_part); provenance.csv then holds each part's tasks, start, machine, wall time and load as
part<N>_<key>, and the summed wall time.

data/beyond/
  heads.csv       task,seed,layer,head,importance,importance_normalized,ablation_loss_delta,
                  integrated_gradients: the final checkpoint's analysis (headlab analyze --ig-steps)
  analyses.csv    task,seed,loss,ig_loss_change,ig_completeness_error,ig_steps,ffn_ig_loss_change,
                  ffn_ig_completeness_error,ffn_ig_steps: its losses and how far the heads' (the FFN
                  units', analyze --ffn) integrated gradients add up from L(g) - L(0)
  prune.csv       task,seed,arm + prune.csv's columns but the pruned lists (pruned_heads,
                  pruned_units: long, and read by nothing here): every round of every arm
  timings.csv     task,seed,job,seconds
  provenance.csv  key,value: the binary's commit, uncommitted changes, start (UTC), machine, wall
                  time, highest 1-minute load, scale, tasks, seeds (and part<N>_<key> of each part)
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common, pruning
import common  # noqa: E402
from common import fail, write_csv  # noqa: E402
from pruning.collect import (TASK_ORDER, fmt, job_seconds, kept_part, merged_provenance, read_heads,  # noqa: E402
                             read_rows)

FILES = ("heads", "analyses", "prune", "timings")  # data/beyond/<name>.csv, every row with its task
PART_KEYS = ("tasks", "started_utc", "machine", "wall_seconds", "max_load_1min")
HEAD_COLUMNS = ["importance", "importance_normalized", "ablation_loss_delta", "integrated_gradients"]
ANALYSIS_KEYS = ["loss", "ig_loss_change", "ig_completeness_error", "ig_steps", "ffn_ig_loss_change",
                 "ffn_ig_completeness_error", "ffn_ig_steps"]
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
    tasks, seeds = args.tasks.split(), [int(s) for s in args.seeds.split()]
    new = dict(zip(FILES, collect(args.out, tasks, seeds)))
    provenance = {"commit": common.binary_commit(args.binary),
                  "uncommitted_changes": "yes" if common.checkout_dirty() else "no", "started_utc": args.started,
                  "machine": common.machine(), "wall_seconds": args.wall_seconds,
                  "max_load_1min": common.max_load(args.load, args.started), "scale": args.scale, "tasks": " ".join(tasks),
                  "seeds": " ".join(str(s) for s in seeds)}
    kept = write_part(args.data, new, provenance)
    print(f"collected {len(new['heads'])} heads, {len(new['prune'])} prune rounds: {args.out} -> {args.data}"
          + (f" (kept its {' '.join(kept)})" if kept else ""))


def write_part(data, new, provenance):
    """Writes data/beyond/ from one part's rows ({file: rows}) and provenance, keeping DATA's rows of
    the other tasks (same commit, seeds and scale, or a one-line failure); returns those tasks."""
    kept = kept_part(data, provenance["tasks"].split(), provenance["commit"], files=FILES,
                     dirty_key="uncommitted_changes")
    if kept and (kept["provenance"].get("seeds"), kept["provenance"].get("scale")) != (provenance["seeds"],
                                                                                         provenance["scale"]):
        fail(f"{data} holds {' '.join(kept['tasks'])} with seeds {kept['provenance'].get('seeds')} at scale "
             f"{kept['provenance'].get('scale')}, and this part has seeds {provenance['seeds']} at scale "
             f"{provenance['scale']}: every part must use the same", "collect_beyond")
    rows = {name: sorted((kept["rows"][name] if kept else []) + new[name], key=lambda r: TASK_ORDER.index(r["task"]))
            for name in FILES}  # in the tasks' order whatever the parts' order (a stable sort)
    os.makedirs(data, exist_ok=True)
    write_csv(os.path.join(data, "heads.csv"), ["task", "seed", "layer", "head"] + HEAD_COLUMNS, rows["heads"])
    write_csv(os.path.join(data, "analyses.csv"), ["task", "seed"] + ANALYSIS_KEYS, rows["analyses"])
    write_csv(os.path.join(data, "prune.csv"), list(dict.fromkeys(k for r in rows["prune"] for k in r)), rows["prune"])
    write_csv(os.path.join(data, "timings.csv"), ["task", "seed", "job", "seconds"], rows["timings"])
    if kept:
        provenance = merged_provenance(kept["provenance"], provenance, keys=PART_KEYS, wall="wall_seconds")
    write_csv(os.path.join(data, "provenance.csv"), ["key", "value"],
              [{"key": k, "value": v} for k, v in provenance.items()])
    return kept["tasks"] if kept else []

if __name__ == "__main__":
    try:
        main()
    except common.CsvError as e:
        fail(str(e), "collect_beyond")
