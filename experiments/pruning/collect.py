#!/usr/bin/env python3
"""Collects what run.sh wrote under OUT into the compact data/ folder that make_results.py
reads (run.sh calls it; nothing here trains or analyses):

  provenance.csv   key,value: the commit, date, machine and times of the regeneration
  setup.csv        task,seed: the base model and its training (from the run's config.toml)
  base_curves.csv  task,seed,step,...: the base runs' evaluation rows of metrics.csv
  analyses.csv     task,seed,step,...: each headlab analyze (final checkpoint and dynamics)
  heads.csv        task,seed,step,layer,head,<every per-head column of heads.h5>
  examples.h5      <task>/seed<N>/...: per-example values of the final analysis, the paired
                   tests' input (heads.h5's examples/ datasets under the same names; gzip):
                     loss [E], ablation_loss [L,H,E], layer_only_loss [L,H,E]  (float64)
                     n_targets [E] (int64): each example's scored targets, the weights that pool
                       the per-example values back into analyze's loss and accuracy
                     accuracy [E], ablation_accuracy [L,H,E], layer_only_accuracy [L,H,E]
                       (float64, fraction of the example's targets right): tasks with an
                       accuracy only (induction, classify, k_relation), Michel et al.'s Tables 1
                       and 2 on the task metric
                   (n_targets and the accuracies: data collected since issue 29)
  prune.csv        task,seed,checkpoint_step,arm,<prune.csv's columns, its seed as prune_seed>:
                   every round of every arm (pruned_heads kept for L0 only; l0_penalty, L0's
                   aggregate, empty in files written before it existed)
  evals.csv        task,seed,arm,split,loss,accuracy,bpb: headlab eval of L0 models, their
                   controls and the retrained layouts
  scratch.csv      task,seed,active_heads,steps: the L0 layouts trained from scratch
  timings.csv      task,seed,job,seconds: each job's wall time (run.sh's seconds.txt)

  python3 experiments/pruning/collect.py runs/pruning experiments/pruning/data [--base DIR]
  python3 experiments/pruning/collect.py runs/pruning experiments/pruning/data --only-scratch
      replaces only the retrained layouts' rows of data/ (run.sh with ONLY_SCRATCH=1)
  python3 experiments/pruning/collect.py runs/pruning experiments/pruning/data --tasks text --merge
      replaces the rows of --tasks and keeps the other tasks' (run.sh with MERGE=1): a
      regeneration in parts, one session each, every part from the same clean commit (refused
      otherwise); provenance.csv lists each part's tasks, date, machine and wall time
"""
import argparse
import os
import re
import subprocess
import sys
import time
import tomllib

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402  (experiments/common.py)
from common import write_csv  # noqa: E402

EVAL_LINE = re.compile(r"^(loss|accuracy|bits_per_byte) (\S+)$", re.M)


def fail(message):
    common.fail(message, "collect")


def read_rows(path):
    """A CSV file's rows by column name; a missing file or column is a CsvError, one line (main())."""
    return common.plot_shared.read_csv(path, hint="run experiments/pruning/run.sh first")


def fmt(x):
    """Floats as the shortest repr that reads back exactly; NaN as an empty cell."""
    x = float(x)
    return "" if np.isnan(x) else repr(x)


def read_heads(path):
    with h5py.File(path, "r") as f:
        columns = {name: f["heads"][name][()] for name in f["heads"]}
        examples = {name: f["examples"][name][()] for name in f["examples"]} if "examples" in f else {}
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    return columns, examples, attrs


def eval_metrics(path):
    """loss, accuracy, bpb from `headlab eval` output (4 decimals, as it prints them)."""
    found = dict(EVAL_LINE.findall(open(path).read()))
    if "loss" not in found:
        fail(f"{path}: no 'loss' line (headlab eval output expected)")
    return found["loss"], found.get("accuracy", ""), found.get("bits_per_byte", "")


def seed_dirs(out, task, seeds):
    return [(s, os.path.join(out, task, f"seed{s}")) for s in seeds if os.path.isdir(os.path.join(out, task, f"seed{s}"))]


def git(*args):
    try:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("data")
    ap.add_argument("--base", help="where the base sweeps live (default: OUT)")
    ap.add_argument("--tasks", default="grammar text induction classify k_relation")
    ap.add_argument("--seeds", default="0 1 2")
    ap.add_argument("--scale", default="full")
    ap.add_argument("--wall-seconds", type=float)
    ap.add_argument("--only-scratch", action="store_true",
                    help="replace only the retrained layouts' rows of DATA (the other runs may be gone)")
    ap.add_argument("--merge", action="store_true",
                    help="keep DATA's rows of the tasks not in --tasks (a regeneration in parts, one commit)")
    args = ap.parse_args()
    out, data, base = args.out, args.data, args.base or args.out
    tasks, seeds = args.tasks.split(), [int(s) for s in args.seeds.split()]
    if args.only_scratch:
        return merge_scratch(out, data, tasks, seeds)
    os.makedirs(data, exist_ok=True)
    commit = git("rev-parse", "--short=12", "HEAD")
    kept = kept_part(data, tasks, commit) if args.merge else None

    setup, curves, analyses, heads, prune, evals, scratch, timings = [], [], [], [], [], [], [], []
    head_columns = None
    examples_tmp = os.path.join(data, "examples.h5.tmp")
    with h5py.File(examples_tmp, "w", track_order=True) as ex:
        for task in tasks:
            for seed, sdir in seed_dirs(out, task, seeds):
                run = os.path.join(base, f"base_{task}", f"train.seed={seed}")
                config = tomllib.load(open(os.path.join(run, "config.toml"), "rb"))
                m, t = config["model"], config["train"]
                setup.append({"task": task, "seed": seed, "kind": m["kind"], "n_layers": m["n_layers"],
                              "n_heads": m["n_heads"], "d_model": m["d_model"], "d_head": m["d_head"] or m["d_model"] // m["n_heads"],
                              "steps": t["steps"], "batch_size": t["batch_size"], "lr": t["lr"],
                              "min_lr_ratio": t["min_lr_ratio"]})
                rows = read_rows(os.path.join(run, "metrics.csv"))
                for r in rows:
                    if r["val_loss"]:
                        curves.append({"task": task, "seed": seed, **{k: r[k] for k in
                                       ("step", "lr", "train_loss", "val_loss", "val_accuracy", "val_bpb")}})
                timings.append({"task": task, "seed": seed, "job": "base training", "seconds": rows[-1]["elapsed_s"]})

                # Analyses: the final checkpoint's, then each dynamics checkpoint's.
                found = [(None, sdir)]
                dyn = os.path.join(sdir, "dynamics")
                if os.path.isdir(dyn):
                    found += [(d, os.path.join(dyn, d)) for d in sorted(os.listdir(dyn))]
                for name, adir in found:
                    path = os.path.join(adir, "heads.h5")
                    if not os.path.exists(path):
                        continue
                    columns, examples, attrs = read_heads(path)
                    step = int(attrs["step"])
                    final = name is None
                    analyses.append({"task": task, "seed": seed, "step": step, "final": int(final),
                                     **{k: fmt(attrs[k]) if isinstance(attrs[k], float) else attrs[k]
                                        for k in sorted(attrs) if k not in ("config", "checkpoint", "contents", "site_kinds")}})
                    names = sorted(columns) if final else ["importance", "importance_normalized"]
                    if final and head_columns is None:
                        head_columns = names
                    L, H = columns["gate"].shape
                    for layer in range(L):
                        for head in range(H):
                            heads.append({"task": task, "seed": seed, "step": step, "layer": layer, "head": head,
                                          **{c: fmt(columns[c][layer, head]) for c in names}})
                    if final:
                        g = ex.create_group(f"{task}/seed{seed}")
                        for k in EXAMPLE_DATASETS:
                            if k in examples:
                                g.create_dataset(k, data=examples[k], compression="gzip", compression_opts=9,
                                                 shuffle=True, track_times=False)
                    timings.extend(job_seconds(task, seed, adir, "analyze " + ("final" if final else "dynamics")))

                # Prune arms: the final checkpoint's and each dynamics checkpoint's.
                arm_roots = [(None, os.path.join(sdir, "prune"))] + [
                    (d, os.path.join(dyn, d, "prune")) for d in (sorted(os.listdir(dyn)) if os.path.isdir(dyn) else [])]
                for ckpt, root in arm_roots:
                    for arm in sorted(os.listdir(root)) if os.path.isdir(root) else []:
                        adir = os.path.join(root, arm)
                        if not os.path.exists(os.path.join(adir, "pruned.h5")):
                            continue
                        step = int(ckpt.split("_")[1]) if ckpt else config["train"]["steps"]
                        for r in read_rows(os.path.join(adir, "prune.csv")):
                            r["prune_seed"] = r.pop("seed")  # "seed" is the base model's here
                            if r["strategy"] != "l0":
                                r["pruned_heads"] = ""  # only L0's survivors are read; the rest is long
                            prune.append({"task": task, "seed": seed, "checkpoint_step": step, "arm": arm, **r})
                        kind = re.sub(r"lambda[\d.e-]+$", "lambda", re.sub(r"_seed\d+$", "", arm))
                        timings.extend(job_seconds(task, seed, adir, "prune " + ("dynamics " if ckpt else "") + kind))
                        test = os.path.join(adir, "test", "eval.txt")
                        if os.path.exists(test):
                            loss, acc, bpb = eval_metrics(test)
                            evals.append({"task": task, "seed": seed, "arm": arm, "split": "test", "loss": loss,
                                          "accuracy": acc, "bpb": bpb})

                collect_scratch(task, seed, sdir, scratch, evals, timings)
        if kept:
            with h5py.File(os.path.join(data, "examples.h5"), "r") as old:
                for task in kept["tasks"]:
                    if task in old:
                        old.copy(old[task], ex, name=task)
    os.replace(examples_tmp, os.path.join(data, "examples.h5"))
    if kept:  # the other parts' rows first, as a whole regeneration would order the tasks anyway
        rows = kept["rows"]
        setup, curves, analyses, heads = rows["setup"] + setup, rows["base_curves"] + curves, \
            rows["analyses"] + analyses, rows["heads"] + heads
        prune, evals, scratch, timings = rows["prune"] + prune, rows["evals"] + evals, rows["scratch"] + scratch, \
            rows["timings"] + timings

    if not setup:
        fail(f"{out} holds no task folder of {tasks} with seeds {seeds}: run experiments/pruning/run.sh first")
    write_csv(os.path.join(data, "setup.csv"), list(setup[0]), setup)
    write_csv(os.path.join(data, "base_curves.csv"), list(curves[0]), curves)
    analysis_keys = sorted({k for a in analyses for k in a}, key=lambda k: (k not in ("task", "seed", "step", "final"), k))
    write_csv(os.path.join(data, "analyses.csv"), analysis_keys, analyses)
    write_csv(os.path.join(data, "heads.csv"), ["task", "seed", "step", "layer", "head"] + head_columns, heads)
    # Every column any arm has, in first-seen order: a prune.csv from before a column was added
    # (l0_penalty) leaves its cells empty.
    prune_keys = list(dict.fromkeys(k for r in prune for k in r))
    write_csv(os.path.join(data, "prune.csv"), prune_keys, prune)
    write_csv(os.path.join(data, "evals.csv"), ["task", "seed", "arm", "split", "loss", "accuracy", "bpb"], evals)
    write_csv(os.path.join(data, "scratch.csv"), SCRATCH_COLUMNS, scratch)
    write_csv(os.path.join(data, "timings.csv"), ["task", "seed", "job", "seconds"], timings)

    provenance = {
        "commit": commit,
        "uncommitted_source_changes": "yes" if git("status", "--porcelain", "--", "../../src", "../../include",
                                                    "../../CMakeLists.txt") else "no",
        "jobs_commits": os.environ.get("JOBS_COMMITS", ""),
        "base_models_commit": os.environ.get("BASE_COMMIT", git("rev-parse", "--short=12", "HEAD")),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": common.machine(),
        "scale": args.scale,
        "tasks": " ".join(tasks),
        "seeds": " ".join(str(s) for s in seeds),
        "run_sh_wall_seconds": "" if args.wall_seconds is None else f"{args.wall_seconds:.0f}",
    }
    old = os.path.join(data, "provenance.csv")
    if args.wall_seconds is None and os.path.exists(old):  # an intermediate collect keeps the last wall time
        provenance["run_sh_wall_seconds"] = {r["key"]: r["value"] for r in read_rows(old)}.get("run_sh_wall_seconds", "")
    if args.merge:
        provenance = merged_provenance(kept["provenance"] if kept else {}, provenance)
    write_csv(old, ["key", "value"], [{"key": k, "value": v} for k, v in provenance.items()])
    size = sum(os.path.getsize(os.path.join(data, f)) for f in os.listdir(data))
    print(f"collected {out} -> {data} ({size / 1e6:.1f} MB)")


# heads.h5's examples/ datasets kept in examples.h5 (the accuracies exist for accuracy tasks only).
EXAMPLE_DATASETS = ("loss", "ablation_loss", "layer_only_loss", "n_targets", "accuracy", "ablation_accuracy",
                    "layer_only_accuracy")
SCRATCH_COLUMNS = ["task", "seed", "active_heads", "steps"]
SCRATCH_JOB = "train L0 layout from scratch"


def collect_scratch(task, seed, sdir, scratch, evals, timings):
    """The L0 layout retrained from scratch (sdir/scratch_l0), when finished."""
    sc = os.path.join(sdir, "scratch_l0")
    if not os.path.exists(os.path.join(sc, "done")):
        return
    c = tomllib.load(open(os.path.join(sc, "config.toml"), "rb"))
    scratch.append({"task": task, "seed": seed, "active_heads": " ".join(str(h) for h in c["model"]["active_heads"]),
                    "steps": c["train"]["steps"]})
    for split in ("val", "test"):
        path = os.path.join(sc, split, "eval.txt")
        if os.path.exists(path):
            loss, acc, bpb = eval_metrics(path)
            evals.append({"task": task, "seed": seed, "arm": "scratch_l0", "split": split,
                          "loss": loss, "accuracy": acc, "bpb": bpb})
    timings.extend(job_seconds(task, seed, sc, SCRATCH_JOB))


def merge_scratch(out, data, tasks, seeds):
    """Replaces the scratch rows of data/ (scratch.csv, evals.csv's scratch_l0 arm, their timings)
    with what OUT holds, leaving every other row as it was; provenance gains the commit."""
    scratch, evals, timings = [], [], []
    for task in tasks:
        for seed, sdir in seed_dirs(out, task, seeds):
            collect_scratch(task, seed, sdir, scratch, evals, timings)
    if not scratch:
        fail(f"{out} holds no finished scratch_l0 run of {tasks} with seeds {seeds}")
    done = {(r["task"], str(r["seed"])) for r in scratch}
    keep = lambda rows, other: [r for r in rows if other(r) or (r["task"], r["seed"]) not in done]  # noqa: E731
    old_evals = read_rows(os.path.join(data, "evals.csv"))
    old_timings = read_rows(os.path.join(data, "timings.csv"))
    old_scratch = read_rows(os.path.join(data, "scratch.csv"))
    write_csv(os.path.join(data, "scratch.csv"), SCRATCH_COLUMNS,
              [r for r in old_scratch if (r["task"], r["seed"]) not in done and "active_heads" in r] + scratch)
    write_csv(os.path.join(data, "evals.csv"), ["task", "seed", "arm", "split", "loss", "accuracy", "bpb"],
              keep(old_evals, lambda r: r["arm"] != "scratch_l0") + evals)
    write_csv(os.path.join(data, "timings.csv"), ["task", "seed", "job", "seconds"],
              keep(old_timings, lambda r: r["job"] != SCRATCH_JOB) + timings)
    path = os.path.join(data, "provenance.csv")
    provenance = {r["key"]: r["value"] for r in read_rows(path)}
    provenance["scratch_jobs_commit"] = os.environ.get("SCRATCH_COMMIT", git("rev-parse", "--short=12", "HEAD"))
    write_csv(path, ["key", "value"], [{"key": k, "value": v} for k, v in provenance.items()])
    print(f"merged {len(scratch)} retrained layouts of {out} into {data}")


DATA_FILES = ("setup", "base_curves", "analyses", "heads", "prune", "evals", "scratch", "timings")
PART_KEYS = ("tasks", "date", "machine", "run_sh_wall_seconds")


def kept_part(data, tasks, commit, files=DATA_FILES, dirty_key="uncommitted_source_changes"):
    """data/'s rows (of `files`, the first naming every task collected) of the tasks not being
    collected, for --merge; None when data/ holds none. A part made at another commit is refused:
    the data must come from one commit. run_beyond.sh's data/beyond/ merges its parts here too."""
    if not os.path.exists(os.path.join(data, f"{files[0]}.csv")):
        return None
    provenance = {r["key"]: r["value"] for r in read_rows(os.path.join(data, "provenance.csv"))}
    rows = {name: [r for r in read_rows(os.path.join(data, f"{name}.csv")) if r["task"] not in tasks]
            for name in files}
    others = list(dict.fromkeys(r["task"] for r in rows[files[0]]))
    if not others:
        return None
    if provenance.get("commit") != commit or provenance.get(dirty_key) == "yes":
        fail(f"{data} holds {' '.join(others)} from commit {provenance.get('commit')} and this part is at {commit}: "
             f"every part of a regeneration must come from one clean commit (check that one out, or regenerate every part)")
    return {"tasks": others, "rows": rows, "provenance": provenance}


def merged_provenance(old, new, keys=PART_KEYS, wall="run_sh_wall_seconds"):
    """One provenance for a regeneration in parts: the commit (the same), the union of tasks, the
    summed wall time, each other part key's distinct values joined, and each part's `keys` as
    part<N>_<key>. A part whose tasks the new one covers is replaced by it."""
    parts = [{k: old.get(f"part{i}_{k}", "") for k in keys} for i in range(1, 100) if f"part{i}_tasks" in old]
    if not parts and old.get("tasks"):  # data/ from one whole run so far
        parts = [{k: old.get(k, "") for k in keys}]
    new_tasks = set(new["tasks"].split())
    parts = [p for p in parts if not set(p["tasks"].split()) <= new_tasks] + [{k: new[k] for k in keys}]
    merged = {k: v for k, v in new.items()}
    merged["tasks"] = " ".join(t for t in TASK_ORDER if any(t in p["tasks"].split() for p in parts))
    walls = [p[wall] for p in parts]
    merged[wall] = f"{sum(float(w) for w in walls):.0f}" if all(walls) else ""
    for k in keys:
        if k not in ("tasks", wall):
            merged[k] = "; ".join(dict.fromkeys(p[k] for p in parts))
    for i, p in enumerate(parts, 1):
        merged.update({f"part{i}_{k}": v for k, v in p.items()})
    return merged


TASK_ORDER = ("grammar", "text", "induction", "classify", "k_relation")

def job_seconds(task, seed, folder, job):
    path = os.path.join(folder, "seconds.txt")
    return [{"task": task, "seed": seed, "job": job, "seconds": open(path).read().strip()}] if os.path.exists(path) else []


if __name__ == "__main__":
    try:
        main()
    except common.CsvError as e:  # a row asked for a column its file does not have
        fail(str(e))
