"""experiments/pruning: data/ (collect.py describes the files), read by column name; the
per-example task metric of examples.h5 (accuracy where collect.py stored it, else loss)."""
import os

import numpy as np

import common
from common import fail, number

from .analysis import TASKS


# examples.h5's datasets of one seed, per kind of task metric: (the full model [E], one head removed
# [L, H, E], one head alone in its layer [L, H, E]); each a list of the names accepted, first found wins.
EXAMPLE_DATASETS = {
    "accuracy": (["example_accuracy", "accuracy"], ["ablation_accuracy"], ["layer_only_accuracy"]),
    "loss": (["loss"], ["ablation_loss"], ["layer_only_loss"]),
}


def _pick(examples, names):
    return next((examples[n] for n in names if n in examples), None)


class Data:
    def __init__(self, folder):
        if not os.path.isdir(folder):
            fail(f"{folder} is not a folder: run experiments/pruning/run.sh first")
        self.folder = folder
        self.setup = self.read("setup.csv", ("task", "seed", "steps"))
        self.curves = self.read("base_curves.csv")
        self.analyses = self.read("analyses.csv")
        self.heads = self.read("heads.csv")
        self.prune = self.read("prune.csv", ("task", "seed", "checkpoint_step", "arm", "round"))
        self.evals = self.read("evals.csv")
        self.scratch = self.read("scratch.csv")
        self.timings = self.read("timings.csv")
        self.provenance = {r["key"]: r["value"] for r in self.read("provenance.csv", ("key", "value"))}
        self.examples_path = os.path.join(folder, "examples.h5")
        self.tasks = [t for t in TASKS if any(r["task"] == t for r in self.setup)]
        self.seeds = {t: sorted({int(r["seed"]) for r in self.setup if r["task"] == t}) for t in self.tasks}
        self.final_step = {(r["task"], int(r["seed"])): int(r["steps"]) for r in self.setup}
        self._examples = {}
        self._arms = {}
        for r in self.prune:
            key = (r["task"], int(r["seed"]), int(r["checkpoint_step"]), r["arm"])
            self._arms.setdefault(key, []).append(r)

    def read(self, name, required=()):
        """data/NAME's rows by column name; `required`: the columns Data itself indexes by."""
        path = os.path.join(self.folder, name)
        return common.read_csv(path, "run experiments/pruning/run.sh (or collect.py) first", required)

    def setup_of(self, task, seed):
        return next(r for r in self.setup if r["task"] == task and int(r["seed"]) == seed)

    def arm(self, task, seed, arm, step=None):
        """Rounds of one prune run (sorted), or None; step = the checkpoint's (default: final)."""
        step = self.final_step[(task, seed)] if step is None else step
        rows = self._arms.get((task, seed, step, arm))
        return sorted(rows, key=lambda r: int(r["round"])) if rows else None

    def arms(self, task, seed, step=None):
        step = self.final_step[(task, seed)] if step is None else step
        return sorted(a for (t, s, st, a) in self._arms if t == task and s == seed and st == step)

    def checkpoint_steps(self, task, seed):
        return sorted({st for (t, s, st, _) in self._arms if t == task and s == seed})

    def head_table(self, task, seed, step=None):
        """{column: [L, H] array} of the analysis of one checkpoint (default: the final one)."""
        step = self.final_step[(task, seed)] if step is None else step
        rows = [r for r in self.heads if r["task"] == task and int(r["seed"]) == seed and int(r["step"]) == step]
        if not rows:
            return None
        L, H = 1 + max(int(r["layer"]) for r in rows), 1 + max(int(r["head"]) for r in rows)
        out = {}
        for c in rows[0]:
            if c in ("task", "seed", "step", "layer", "head"):
                continue
            a = np.full((L, H), np.nan)
            for r in rows:
                a[int(r["layer"]), int(r["head"])] = number(r[c])
            out[c] = a
        return out

    def analysis(self, task, seed, step=None):
        step = self.final_step[(task, seed)] if step is None else step
        return next((r for r in self.analyses if r["task"] == task and int(r["seed"]) == seed
                     and int(r["step"]) == step), None)

    def examples(self, task, seed):
        """examples.h5's datasets of one seed ({name: array}), read once."""
        if (task, seed) not in self._examples:
            import h5py
            with h5py.File(self.examples_path, "r") as f:
                g = f[f"{task}/seed{seed}"]
                self._examples[(task, seed)] = {k: g[k][()] for k in g}
        return self._examples[(task, seed)]

    def metric_kind(self, task):
        """'accuracy' when the task's prune metric is accuracy and every seed's examples hold the
        per-example accuracy datasets (EXAMPLE_DATASETS); else 'loss' (the LM tasks' metric, and
        the fallback of accuracy tasks collected before collect.py stored per-example accuracy)."""
        if TASKS[task][1] != "val_accuracy":
            return "loss"
        ok = all(all(_pick(self.examples(task, s), names) is not None for names in EXAMPLE_DATASETS["accuracy"])
                 for s in self.seeds[task])
        return "accuracy" if ok else "loss"

    def task_examples(self, task, seed):
        """(kind, full [E], one head removed [L, H, E], one head alone in its layer [L, H, E]) of the
        task metric metric_kind() names, as float64."""
        kind = self.metric_kind(task)
        ex = self.examples(task, seed)
        full, ablated, alone = (np.asarray(_pick(ex, names), dtype=float) for names in EXAMPLE_DATASETS[kind])
        return kind, full, ablated, alone

    def eval(self, task, seed, arm, split):
        r = next((r for r in self.evals if r["task"] == task and int(r["seed"]) == seed and r["arm"] == arm
                  and r["split"] == split), None)
        return r

    def scratch_layout(self, task, seed):
        """The heads per layer the from-scratch run had on ("3 0 0 0"), or None."""
        r = next((r for r in self.scratch if r["task"] == task and int(r["seed"]) == seed), None)
        return r["active_heads"] if r else None
