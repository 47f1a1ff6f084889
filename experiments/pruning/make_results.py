#!/usr/bin/env python3
"""Builds experiments/pruning/RESULTS.md and figures/ from data/ alone (no training, no runs/).

RESULTS.md is results.template.md with every `{{NAME}}` or `{{NAME TASK}}` replaced by what
FILLERS[NAME] builds from the data (collect.py describes the files). Every number in it, the
verdicts included, comes from the data; the rules that turn numbers into words are the
constants and functions below.

  python3 experiments/pruning/make_results.py            # RESULTS.md and figures/
  python3 experiments/pruning/make_results.py --check    # exit 0 iff RESULTS.md is what data/ gives
  python3 experiments/pruning/make_results.py --l0-layouts   # run.sh: the L0 layouts to retrain

Statistics, fixed before the final run:
  - one head (Table 1) or one layer's reduction (Table 2) against the full model: a paired
    t-test over evaluation examples (E >= 1024; normal approximation, two-sided), Holm-corrected
    over the heads (or layers) of each model at ALPHA;
  - across seeds (3 per task): mean ± sample std, and the seeds listed where a direction is
    claimed (3 seeds cannot make a significance test);
  - head roles (Voita): the thresholds in ROLE_RULES; L0 survival of specialised heads against
    the rest: a permutation test of the roles within each model (PERMUTATIONS, default_rng(0)).
"""
import argparse
import csv
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import fail, mean_std, number, pm, write_atomically  # noqa: E402  (experiments/common.py)
from common import holm as common_holm  # noqa: E402

# task -> (title, the prune metric: a column of prune.csv)
TASKS = {
    "k_relation": ("k-relation retrieval", "val_accuracy"),
    "induction": ("induction", "val_accuracy"),
    "grammar": ("synthetic grammar", "val_loss"),
    "text": ("real text (KJV bytes)", "val_bpb"),
    "classify": ("classification (encoder)", "val_accuracy"),
}
ALPHA = 0.01
TOLERANCE = 0.05       # the drop that counts as "prunable": relative (loss, bpb) or points (accuracy)
TOLERANCE_LOW = 0.01
RHO_THRESHOLD = 0.9
PERMUTATIONS = 10000
# Voita et al. 2019's criteria; fixed before the final run (issue 12).
POSITIONAL_SHARE = 0.9   # one relative offset holds the head's argmax at least this often
SYNTACTIC_MARGIN = 0.10  # agreement with a relation at least this far above its positional baseline
RARE_SHARE = 0.5         # the argmax is the rarest visible token at least this often
RELATIONS = {  # role -> heads.csv agreement columns whose baselines are analyses.csv's baseline_<column>
    "syntactic": ["syntactic_head_agreement", "dependent_agreement"],
    "coreference": ["antecedent_agreement"],
}
ROLE_ORDER = ["syntactic", "coreference", "rare", "positional", "none"]  # a head's role: the first that holds
SPECIALISED = ("syntactic", "coreference", "rare", "positional")
SCORE_ORDERS = ["importance", "importance_raw", "ablation", "entropy", "confidence", "random"]
ORDER_TITLES = {"importance": "importance (l2 per layer)", "importance_raw": "importance (raw = global norm)",
                "ablation": "ablation score", "entropy": "entropy", "confidence": "confidence", "random": "random"}
# Student t, two-sided 95% critical values by degrees of freedom (for seed intervals).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


# ---- data ----------------------------------------------------------------------------------------


class Data:
    def __init__(self, folder):
        if not os.path.isdir(folder):
            fail(f"{folder} is not a folder: run experiments/pruning/run.sh first")
        self.folder = folder
        self.setup = self.read("setup.csv")
        self.curves = self.read("base_curves.csv")
        self.analyses = self.read("analyses.csv")
        self.heads = self.read("heads.csv")
        self.prune = self.read("prune.csv")
        self.evals = self.read("evals.csv")
        self.scratch = self.read("scratch.csv")
        self.timings = self.read("timings.csv")
        self.provenance = {r["key"]: r["value"] for r in self.read("provenance.csv")}
        self.examples_path = os.path.join(folder, "examples.h5")
        self.tasks = [t for t in TASKS if any(r["task"] == t for r in self.setup)]
        self.seeds = {t: sorted({int(r["seed"]) for r in self.setup if r["task"] == t}) for t in self.tasks}
        self.final_step = {(r["task"], int(r["seed"])): int(r["steps"]) for r in self.setup}
        self._arms = {}
        for r in self.prune:
            key = (r["task"], int(r["seed"]), int(r["checkpoint_step"]), r["arm"])
            self._arms.setdefault(key, []).append(r)

    def read(self, name):
        path = os.path.join(self.folder, name)
        if not os.path.exists(path):
            fail(f"{path} is missing: run experiments/pruning/run.sh (or collect.py) first")
        with open(path, newline="") as f:
            return list(csv.DictReader(f))

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
        import h5py
        with h5py.File(self.examples_path, "r") as f:
            g = f[f"{task}/seed{seed}"]
            return {k: g[k][()] for k in g}

    def eval(self, task, seed, arm, split):
        r = next((r for r in self.evals if r["task"] == task and int(r["seed"]) == seed and r["arm"] == arm
                  and r["split"] == split), None)
        return r

    def scratch_layout(self, task, seed):
        """The heads per layer the from-scratch run had on ("3 0 0 0"), or None."""
        r = next((r for r in self.scratch if r["task"] == task and int(r["seed"]) == seed), None)
        return r["active_heads"] if r else None


# ---- statistics ----------------------------------------------------------------------------------


def paired_t(diffs):
    """diffs [K, E] -> (mean [K], two-sided p [K]) of a paired t-test, normal approximation."""
    mean = diffs.mean(axis=1)
    se = diffs.std(axis=1, ddof=1) / math.sqrt(diffs.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, np.abs(mean) / se, np.where(mean == 0, 0.0, np.inf))
    return mean, np.array([math.erfc(v / math.sqrt(2)) for v in z])


def holm(p, alpha=ALPHA):
    """Holm-Bonferroni: which of the p-values are rejected at family-wise level alpha."""
    return np.array(common_holm([float(x) for x in p])) <= alpha


def significant(diffs):
    """(worse, better) [K] bool: Holm-corrected paired t-tests of masked - full per-example loss."""
    mean, p = paired_t(diffs)
    reject = holm(p)
    return reject & (mean > 0), reject & (mean < 0)


def ranks(values):
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(len(values), dtype=float)
    for v in np.unique(values):
        tied = values == v
        r[tied] = r[tied].mean()
    return r


def spearman(x, y):
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    keep = ~(np.isnan(x) | np.isnan(y))
    if keep.sum() < 3:
        return math.nan
    rx, ry = ranks(x[keep]), ranks(y[keep])
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def interval95(values):
    """Mean and half-width of the t interval over seeds (NaN half-width for one value)."""
    v = [x for x in values if not math.isnan(x)]
    m, s = mean_std(v)
    return m, (T95.get(len(v) - 1, 1.96) * s / math.sqrt(len(v)) if len(v) > 1 else math.nan)


def cell(values, digits):
    return pm(*mean_std(list(values)), digits)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def seeds_list(values, digits):
    return ", ".join("–" if math.isnan(v) else f"{v:.{digits}f}" for v in values)


# ---- pruning curves ------------------------------------------------------------------------------


def drop(metric, base, value):
    """Loss of quality: accuracy in points (fraction), loss and bits/byte relative."""
    return base - value if metric == "val_accuracy" else (value - base) / base


def prunable(metric, rows, tolerance=TOLERANCE, control=None):
    """The largest fraction pruned before the first round whose drop exceeds the tolerance,
    against round 0, or against the control's metric at the same round (fine-tuned arms)."""
    best = 0.0
    for i, r in enumerate(rows[1:], start=1):
        base = number((control[i] if control else rows[0])[metric])
        if drop(metric, base, number(r[metric])) > tolerance:
            break
        best = number(r["fraction_pruned"])
    return best


def at_half(metric, rows):
    xs = [number(r["fraction_pruned"]) for r in rows]
    ys = [number(r[metric]) for r in rows]
    return float(np.interp(0.5, xs, ys)) if xs[-1] >= 0.5 else math.nan


def random_arms(d, task, seed, step=None, finetuned=False):
    pattern = r"random_ft\d+_seed\d+" if finetuned else r"random_seed\d+"
    return [d.arm(task, seed, a, step) for a in d.arms(task, seed, step) if re.fullmatch(pattern, a)]


def order_prunable(d, task, seed, order, tolerance=TOLERANCE, step=None):
    """Fraction prunable of a score order without fine-tuning; random: mean over its seeds."""
    metric = TASKS[task][1]
    if order == "random":
        runs = random_arms(d, task, seed, step)
        return float(np.mean([prunable(metric, r, tolerance) for r in runs])) if runs else math.nan
    rows = d.arm(task, seed, order, step)
    return prunable(metric, rows, tolerance) if rows else math.nan


def ft_name(d, task, seed, base):
    """The fine-tuned arm's folder name (the K in _ft<K> comes from run.sh)."""
    names = [a for a in d.arms(task, seed) if re.fullmatch(base.replace("FT", r"ft\d+"), a)]
    return names[0] if names else None


# ---- L0 --------------------------------------------------------------------------------------------


def l0_points(d, task, seed):
    """[(lambda, fraction pruned, heads per layer, val drop vs control, test drop vs control, last
    row of prune.csv, arm)], the drops against the control (none_l0) on the same batches."""
    metric = TASKS[task][1]
    control = d.arm(task, seed, "none_l0")
    if not control:
        return []
    test_key = {"val_loss": "loss", "val_accuracy": "accuracy", "val_bpb": "bpb"}[metric]
    control_test = d.eval(task, seed, "none_l0", "test")
    points = []
    for arm in d.arms(task, seed):
        if not arm.startswith("l0_lambda"):
            continue
        rows = d.arm(task, seed, arm)
        val_drop = drop(metric, number(control[-1][metric]), number(rows[-1][metric]))
        t = d.eval(task, seed, arm, "test")
        test_drop = drop(metric, number(control_test[test_key]), number(t[test_key])) if t and control_test else math.nan
        points.append((float(rows[0]["lambda"]), number(rows[-1]["fraction_pruned"]),
                       [int(x) for x in rows[-1]["heads_per_layer"].split()], val_drop, test_drop, rows[-1], arm))
    return sorted(points)


def l0_selected(d, task, seed):
    """The lambda chosen on val: most heads pruned with a val drop (vs the control) within the
    tolerance; else the smallest val drop. None without L0 runs."""
    points = l0_points(d, task, seed)
    if not points:
        return None
    ok = [p for p in points if p[3] <= TOLERANCE]
    return max(ok, key=lambda p: (p[1], -p[0])) if ok else min(points, key=lambda p: p[3])


def print_l0_layouts(d):
    for task in d.tasks:
        for seed in d.seeds[task]:
            chosen = l0_selected(d, task, seed)
            if chosen:
                print(task, seed, "[" + ",".join(str(h) for h in chosen[2]) + "]")


# ---- the fillers ---------------------------------------------------------------------------------


def not_run(task):
    return f"*(no data for {task} in data/)*"


def fill_provenance(d, _):
    p = d.provenance
    job_seconds = sum(number(r["seconds"]) for r in d.timings if r["job"] != "base training")
    base_seconds = sum(number(r["seconds"]) for r in d.timings if r["job"] == "base training")
    rows = [["data/ produced at commit", f"`{p.get('commit', '')}`" + (" (with uncommitted source changes)"
                                                                     if p.get("uncommitted_source_changes") == "yes" else "")],
            ["base models trained at commit", f"`{p.get('base_models_commit', '')}`"],
            ["jobs run by", p.get("jobs_commits", "") or "the same commit"],
            ["L0 layouts retrained from scratch at commit", f"`{p['scratch_jobs_commit']}`"
             if p.get("scratch_jobs_commit") else "the same commit"],
            ["date, machine", f"{p.get('date', '')}, {p.get('machine', '')}"],
            ["scale, tasks, seeds", f"{p.get('scale', '')}; {p.get('tasks', '')}; seeds {p.get('seeds', '')}"],
            ["base training, summed over runs", f"{base_seconds / 60:.1f} min"],
            ["analysis, pruning and retraining jobs, summed", f"{job_seconds / 60:.1f} min"],
            ["wall time on 2 cores, estimated", f"{(base_seconds + job_seconds) / 2 / 60:.0f} min (the sums / 2: run.sh "
             f"runs two one-thread jobs at a time; an upper bound, as some jobs were timed while other work shared "
             f"the cores)"]]
    return table(["", ""], rows)


def fill_setup(d, _):
    rows = []
    for task in d.tasks:
        title, metric = TASKS[task]
        seeds = d.seeds[task]
        s = d.setup_of(task, seeds[0])
        finals = [d.analysis(task, seed) for seed in seeds]
        finals = [a for a in finals if a]
        acc = [number(a["accuracy"]) for a in finals if number(a["accuracy"]) >= 0]
        rows.append([f"`{task}`", title, f"{s['kind']}, {s['n_layers']} x {s['n_heads']} heads, d_model {s['d_model']}",
                     f"{s['steps']} x {s['batch_size']}", len(seeds),
                     f"{finals[0]['n_examples']} ({finals[0]['n_batches']} x {finals[0]['batch_size']})" if finals else "–",
                     cell((number(a["loss"]) for a in finals), 4), cell(acc, 4) if acc else "–",
                     metric.replace("val_", "")])
    return table(["task", "data", "model", "steps x batch", "seeds", "val examples analysed", "val loss (nats)",
                  "val accuracy", "pruning metric"], rows)


def table1_counts(d, task, seed):
    h, ex = d.head_table(task, seed), d.examples(task, seed)
    L, H = h["gate"].shape
    diffs = ex["ablation_loss"].reshape(L * H, -1) - ex["loss"][None, :]
    worse, better = significant(diffs)
    return h, worse.reshape(L, H), better.reshape(L, H)


def fill_table1(d, task):
    if task not in d.tasks:
        return not_run(task)
    per_layer, totals = {}, []
    for seed in d.seeds[task]:
        h, worse, better = table1_counts(d, task, seed)
        delta = h["ablation_loss_delta"]
        for layer in range(delta.shape[0]):
            dl = np.sort(delta[layer][~np.isnan(delta[layer])])
            per_layer.setdefault(layer, []).append((dl, int(worse[layer].sum()), int(better[layer].sum())))
        totals.append((int(worse.sum()), int(better.sum()), delta.size))
    rows = [[layer, cell((r[0][-1] for r in runs), 4), cell((float(np.median(r[0])) for r in runs), 4),
             cell((r[0][0] for r in runs), 4), ", ".join(str(r[1]) for r in runs), ", ".join(str(r[2]) for r in runs),
             len(runs[0][0])] for layer, runs in per_layer.items()]
    rows.append(["all", "", "", "", ", ".join(str(t[0]) for t in totals), ", ".join(str(t[1]) for t in totals),
                 totals[0][2]])
    return table(["layer", "largest Δ loss", "median Δ loss", "smallest Δ loss",
                  "heads significantly worse to remove, per seed", "significantly better, per seed", "heads"], rows)


def table2_rows(d, task):
    """Per seed: per layer (best head, loss delta, accuracy delta, worse, better), Holm over layers."""
    result = []
    for seed in d.seeds[task]:
        h, ex = d.head_table(task, seed), d.examples(task, seed)
        delta, acc = h["layer_only_loss_delta"], h["layer_only_accuracy_delta"]
        best = [int(np.nanargmin(delta[layer])) for layer in range(delta.shape[0])]
        diffs = np.stack([ex["layer_only_loss"][layer, b] - ex["loss"] for layer, b in enumerate(best)])
        worse, better = significant(diffs)
        result.append([(b, float(delta[layer, b]), float(acc[layer, b]), bool(worse[layer]), bool(better[layer]))
                       for layer, b in enumerate(best)])
    return result


def fill_table2(d, task):
    if task not in d.tasks:
        return not_run(task)
    runs = table2_rows(d, task)
    rows = []
    for layer in range(len(runs[0])):
        cells = [r[layer] for r in runs]
        rows.append([layer, ", ".join(f"H{c[0]}" for c in cells), cell((c[1] for c in cells), 4),
                     cell((c[2] for c in cells), 4) if not math.isnan(cells[0][2]) else "–",
                     f"{sum(c[3] for c in cells)}/{len(cells)}", f"{sum(c[4] for c in cells)}/{len(cells)}"])
    return table(["layer", "best head, per seed", "Δ loss (layer reduced to it)", "Δ accuracy",
                  "seeds significantly worse", "seeds significantly better"], rows)


def unit(metric):
    return "points" if metric == "val_accuracy" else "relative"


def tol_label(metric, t):
    return f"{t * 100:g}{' points' if metric == 'val_accuracy' else '%'}"


def fill_prune(d, task):
    """Score orders without fine-tuning, against the unpruned model (round 0)."""
    if task not in d.tasks:
        return not_run(task)
    metric = TASKS[task][1]
    digits = 3 if metric == "val_bpb" else 4
    seeds = d.seeds[task]
    rows = []
    for order in SCORE_ORDERS:
        vals = {t: [order_prunable(d, task, s, order, t) for s in seeds] for t in (TOLERANCE_LOW, TOLERANCE)}
        if all(math.isnan(v) for v in vals[TOLERANCE]):
            continue
        half = []
        for s in seeds:
            runs = random_arms(d, task, s) if order == "random" else [d.arm(task, s, order)]
            half.append(float(np.mean([at_half(metric, r) for r in runs if r])) if any(runs) else math.nan)
        rows.append([ORDER_TITLES[order], cell(vals[TOLERANCE_LOW], 2), cell(vals[TOLERANCE], 2),
                     seeds_list(vals[TOLERANCE], 2), cell(half, digits)])
    unpruned = [number(d.arm(task, s, "importance")[0][metric]) for s in seeds if d.arm(task, s, "importance")]
    name = metric.replace("val_", "")
    return (f"Unpruned {name}: {cell(unpruned, digits)}.\n\n" +
            table(["order (no fine-tuning)", f"fraction prunable, drop ≤ {tol_label(metric, TOLERANCE_LOW)}",
                   f"drop ≤ {tol_label(metric, TOLERANCE)}", "per seed", f"{name} at half the heads pruned"], rows))


def fill_finetune(d, task):
    """Re-scoring only, fine-tuning only, both, random + fine-tuning; the fine-tuned arms against
    the control (the same fine-tuning with nothing pruned) at the same round."""
    if task not in d.tasks:
        return not_run(task)
    metric = TASKS[task][1]
    digits = 3 if metric == "val_bpb" else 4
    seeds = d.seeds[task]
    arms = [("importance", "importance, scored once (no fine-tuning)", False),
            ("importance_recompute", "importance, re-scored every round (no fine-tuning)", False),
            ("importance_FT", "importance, fine-tuned every round, scored once", True),
            ("importance_FT_recompute", "importance, fine-tuned and re-scored every round", True)]
    rows = []
    for base, label, tuned in arms:
        fr_round0, fr_control = [], []
        for s in seeds:
            name = ft_name(d, task, s, base) if "FT" in base else base
            rows_ = d.arm(task, s, name) if name else None
            control = d.arm(task, s, ft_name(d, task, s, "none_FT") or "")
            if not rows_:
                fr_round0.append(math.nan)
                fr_control.append(math.nan)
                continue
            fr_round0.append(prunable(metric, rows_))
            fr_control.append(prunable(metric, rows_, control=control) if tuned and control and
                              len(control) >= len(rows_) else math.nan)
        rows.append([label, cell(fr_round0, 2)] + ([cell(fr_control, 2), seeds_list(fr_control, 2)] if tuned else
                                                   ["– (no fine-tuning)", seeds_list(fr_round0, 2)]))
    drift = []
    for s in seeds:
        control = d.arm(task, s, ft_name(d, task, s, "none_FT") or "")
        if control:
            drift.append(drop(metric, number(control[0][metric]), number(control[-1][metric])))
    text = table(["arm", f"fraction prunable (drop ≤ {tol_label(metric, TOLERANCE)}) vs the unpruned model",
                  "vs the control at the same round", "per seed (the column before)"], rows)
    if drift:
        text += (f"\n\nThe control (`{ft_name(d, task, seeds[0], 'none_FT')}`: the same fine-tuning, nothing pruned) "
                 f"ends with a drop of {fmt_drop(metric, *mean_std(drift))} against the unpruned model (negative: "
                 f"better); per seed {seeds_list([x * 100 for x in drift], 2)}.")
    return text


def fmt_drop(metric, m, s):
    scale = 100
    u = " points" if metric == "val_accuracy" else "%"
    return f"{m * scale:+.2f} ± {s * scale:.2f}{u}" if not math.isnan(s) else f"{m * scale:+.2f}{u}"


def fill_l0(d, task):
    if task not in d.tasks:
        return not_run(task)
    metric = TASKS[task][1]
    seeds = d.seeds[task]
    by_lambda = {}
    for s in seeds:
        for lam, frac, layout, vdrop, tdrop, _, _ in l0_points(d, task, s):
            by_lambda.setdefault(lam, []).append((frac, vdrop, tdrop))
    if not by_lambda:
        return "*(no L0 runs)*"
    rows = [[f"{lam:g}", cell((p[0] for p in pts), 2), f"{cell((p[1] * 100 for p in pts), 2)}",
             f"{cell((p[2] * 100 for p in pts), 2)}"] for lam, pts in sorted(by_lambda.items())]
    chosen = [l0_selected(d, task, s) for s in seeds]
    chosen = [c for c in chosen if c]
    u = "points" if metric == "val_accuracy" else "%"
    text = table(["lambda", "fraction pruned", f"val drop vs control ({u})", f"test drop vs control ({u})"], rows)
    text += ("\n\nChosen on val (most heads pruned within a "
             f"{tol_label(metric, TOLERANCE)} val drop against the control), reported on test: lambda per seed "
             f"{', '.join(f'{c[0]:g}' for c in chosen)}; fraction pruned {cell((c[1] for c in chosen), 2)}; "
             f"test drop {cell((c[4] * 100 for c in chosen), 2)} {u}.")
    return text


def fill_orders(d, _):
    """Michel's question: which order prunes best, with the paired difference per seed."""
    rows, wins = [], {}
    for task in d.tasks:
        seeds = d.seeds[task]
        vals = {o: [order_prunable(d, task, s, o) for s in seeds] for o in ("importance", "importance_raw", "ablation", "random")}
        diff = [a - i for a, i in zip(vals["ablation"], vals["importance"])]
        diff_raw = [r - i for r, i in zip(vals["importance_raw"], vals["importance"])]
        wins[task] = (sum(x > 0 for x in diff), sum(x < 0 for x in diff), len(diff))
        rows.append([task] + [cell(vals[o], 2) for o in ("importance", "importance_raw", "ablation", "random")] +
                    [seeds_list(diff, 2), seeds_list(diff_raw, 2)])
    return table(["task", "importance (l2 per layer)", "importance (raw)", "ablation score", "random",
                  "ablation − importance, per seed", "raw − per-layer importance, per seed"], rows)


def orders_verdict(d):
    """Per comparison, the tasks where one order prunes more in every seed. Tasks where neither
    importance nor ablation can prune anything are left out."""
    out = {"spare": [], "ab_better": [], "ab_worse": [], "raw_better": [], "raw_worse": [], "raw_vs_ab": {}}
    for task in d.tasks:
        seeds = d.seeds[task]
        imp = [order_prunable(d, task, s, "importance") for s in seeds]
        abl = [order_prunable(d, task, s, "ablation") for s in seeds]
        raw = [order_prunable(d, task, s, "importance_raw") for s in seeds]
        if max(imp + abl) == 0:
            continue  # nothing can be pruned by either: no comparison
        out["spare"].append(task)
        if all(a > i for a, i in zip(abl, imp)):
            out["ab_better"].append(task)
        if all(a < i for a, i in zip(abl, imp)):
            out["ab_worse"].append(task)
        if all(r > i for r, i in zip(raw, imp)):
            out["raw_better"].append(task)
        if all(r < i for r, i in zip(raw, imp)):
            out["raw_worse"].append(task)
        out["raw_vs_ab"][task] = (float(np.mean(raw)), float(np.mean(abl)))
    return out


def names(tasks):
    return ", ".join(tasks) or "no task"


def claim_orders(d):
    o = orders_verdict(d)
    return (f"tasks with heads to spare: {names(o['spare'])}. In every seed, the ablation order prunes more than "
            f"importance (l2 per layer) on {names(o['ab_better'])}, less on {names(o['ab_worse'])}; raw importance "
            f"prunes more than the per-layer normalised one on {names(o['raw_better'])}, less on "
            f"{names(o['raw_worse'])}")


def verdict_orders(d):
    o = orders_verdict(d)
    better, worse = o["ab_better"], o["ab_worse"]
    if better and not worse:
        words = (f"**Disagrees** with Michel: ordering by each head's ablation score prunes more than the importance "
                 f"order in every seed on {names(better)}, and importance does so on no task")
    elif worse and not better:
        words = (f"**Agrees** with Michel: importance prunes more than the ablation order in every seed on "
                 f"{names(worse)}, and the ablation order does so on no task")
    elif better and worse:
        words = f"**Mixed**: the ablation order wins on {names(better)}, importance on {names(worse)}"
    else:
        words = "**Undecided**: neither order prunes more in every seed on any task"
    if not o["raw_better"]:
        return words + ". Per-layer normalisation is not the cause: the raw order does no better in every seed."
    gap = "; ".join(f"{t} {o['raw_vs_ab'][t][0]:.2f} vs {o['raw_vs_ab'][t][1]:.2f}" for t in better)
    return (words + f". Per-layer l2 normalisation is much of the cause: without it, importance prunes more in every "
            f"seed on {names(o['raw_better'])}" + (f", and comes to (mean fraction, raw importance vs ablation) {gap}"
                                                   if gap else "") + ".")


# ---- Michel Section 6: pruning curves of the checkpoints along training --------------------------


def dynamics_rows(d, task):
    """{fraction of training: ([importance prunable per seed], [random per seed], [unpruned metric])}."""
    metric = TASKS[task][1]
    out = {}
    for s in d.seeds[task]:
        final = d.final_step[(task, s)]
        for step in d.checkpoint_steps(task, s):
            imp = d.arm(task, s, "importance", step)
            rnd = random_arms(d, task, s, step)
            rnd = [r for r in rnd if r]
            if not imp or not rnd:
                continue
            f = round(step / final, 3)
            slot = out.setdefault(f, ([], [], []))
            slot[0].append(prunable(metric, imp))
            slot[1].append(float(np.mean([prunable(metric, r) for r in rnd])))
            slot[2].append(number(imp[0][metric]))
    return out


def fill_dynamics(d, _):
    rows = []
    for task in d.tasks:
        metric = TASKS[task][1]
        digits = 3 if metric == "val_bpb" else 4
        for f, (imp, rnd, base) in sorted(dynamics_rows(d, task).items()):
            gap = [i - r for i, r in zip(imp, rnd)]
            rows.append([task, f"{f:.2f}", cell(base, digits), cell(imp, 2), cell(rnd, 2), seeds_list(gap, 2)])
    if not rows:
        return "*(no checkpoints along training were pruned)*"
    return table(["task", "fraction of training", "unpruned metric", "fraction prunable by importance",
                  "by random order", "importance − random, per seed"], rows)


def spearman_runs(d, task):
    result = []
    for s in d.seeds[task]:
        steps = sorted({int(r["step"]) for r in d.heads if r["task"] == task and int(r["seed"]) == s})
        if len(steps) < 2:
            continue
        final = d.head_table(task, s)["importance_normalized"]
        result.append([(st / steps[-1], spearman(d.head_table(task, s, st)["importance_normalized"], final))
                       for st in steps])
    return result


def fill_spearman(d, _):
    rows = []
    for task in d.tasks:
        runs = spearman_runs(d, task)
        if not runs:
            continue
        first = [next((f for f, rho in run if rho >= RHO_THRESHOLD), math.nan) for run in runs]
        at = {}
        for run in runs:
            for f, rho in run:
                at.setdefault(round(f, 2), []).append(rho)
        rows.append([task, "; ".join(f"{f:.2f}: {cell(v, 2)}" for f, v in sorted(at.items())), cell(first, 2)])
    return table(["task", "Spearman rho with the final importance, at fraction of training",
                  f"first fraction with rho ≥ {RHO_THRESHOLD}"], rows) if rows else "*(no dynamics analyses)*"


def early_verdict(d):
    """Michel Section 6 in their terms: does importance order beat random early in training?"""
    early_ok, total = 0, 0
    for task in d.tasks:
        rows = dynamics_rows(d, task)
        early = [f for f in rows if f <= 0.5]
        if not early:
            continue
        imp, rnd, _ = rows[min(early, key=lambda f: abs(f - 0.25))]
        total += 1
        early_ok += all(i >= r for i, r in zip(imp, rnd)) and np.mean(imp) > np.mean(rnd)
    return early_ok, total


def claim_early(d):
    ok, total = early_verdict(d)
    return (f"tasks where, at the checkpoint nearest a quarter of training, pruning by that checkpoint's importance "
            f"keeps at least as many heads as random order in every seed, and more on average: {ok} of {total}")


def verdict_early(d):
    ok, total = early_verdict(d)
    if total == 0:
        return "–"
    if ok == total:
        return "**Agrees**: by a quarter of training importance already orders the heads better than random"
    if ok == 0:
        return "**Disagrees**: early in training importance order is no better than random"
    return f"**Partly**: on {ok} of {total} tasks"


# ---- Voita -----------------------------------------------------------------------------------------


def head_roles(d, task, seed):
    """[L, H] array of role names by ROLE_ORDER's rules, or None without the columns."""
    h = d.head_table(task, seed)
    a = d.analysis(task, seed)
    if h is None or "positional_share" not in h:
        return None
    L, H = h["gate"].shape
    roles = np.full((L, H), "none", dtype=object)
    holds = {"positional": h["positional_share"] >= POSITIONAL_SHARE,
             "rare": h.get("rare_token_agreement", np.full((L, H), np.nan)) >= RARE_SHARE}
    for role, columns in RELATIONS.items():
        hit = np.zeros((L, H), dtype=bool)
        for c in columns:
            base = number(a.get(f"baseline_{c}", "")) if a else math.nan
            if c in h and not math.isnan(base):
                hit |= h[c] >= base + SYNTACTIC_MARGIN
        holds[role] = hit
    for role in reversed(ROLE_ORDER[:-1]):  # the first rule in ROLE_ORDER wins
        roles[holds[role] & ~np.isnan(h["gate"])] = role
    return roles


def fill_roles(d, _):
    rows = []
    for task in d.tasks:
        counts = {r: [] for r in ROLE_ORDER}
        imp_by, abl_by = {r: [] for r in ROLE_ORDER}, {r: [] for r in ROLE_ORDER}
        n = 0
        for s in d.seeds[task]:
            roles = head_roles(d, task, s)
            if roles is None:
                continue
            n += 1
            h = d.head_table(task, s)
            for r in ROLE_ORDER:
                mask = roles == r
                counts[r].append(int(mask.sum()))
                imp_by[r] += list(h["importance_normalized"][mask])
                abl_by[r] += list(h["ablation_loss_delta"][mask])
        if n == 0:
            continue
        for r in ROLE_ORDER:
            rows.append([task, r, ", ".join(str(c) for c in counts[r]),
                         f"{np.mean(imp_by[r]):.3f}" if imp_by[r] else "–", f"{np.mean(abl_by[r]):.4f}" if abl_by[r] else "–"])
    if not rows:
        return "*(the analyses hold no role columns)*"
    return table(["task", "role", "heads per seed", "importance (normalised), mean", "ablation Δ loss, mean"], rows)


def baselines(d):
    rows = []
    for task in d.tasks:
        for c in sum(RELATIONS.values(), []):
            vals = [number(d.analysis(task, s).get(f"baseline_{c}", "")) for s in d.seeds[task] if d.analysis(task, s)]
            offs = [d.analysis(task, s).get(f"baseline_{c.replace('_agreement', '')}_offset",
                                            d.analysis(task, s).get(f"baseline_{c}_offset", "")) for s in d.seeds[task]]
            if vals and not all(math.isnan(v) for v in vals):
                rows.append([task, c.replace("_agreement", ""), f"{np.nanmean(vals):.3f}", ", ".join(sorted(set(offs)))])
    return table(["task", "relation", "positional baseline (share at the best fixed offset)", "that offset"], rows) \
        if rows else "*(no relation baselines in the analyses)*"


def survival(d, task):
    """Per seed at the val-chosen lambda: (roles [N], kept [N] bool) of the L0 model."""
    out = []
    for s in d.seeds[task]:
        roles, chosen = head_roles(d, task, s), l0_selected(d, task, s)
        if roles is None or chosen is None:
            continue
        gone = {tuple(int(x) for x in p.split(":")) for p in chosen[5]["pruned_heads"].split()}
        L, H = roles.shape
        kept = np.array([(layer, head) not in gone for layer in range(L) for head in range(H)])
        out.append((roles.ravel(), kept))
    return out


def permutation_p(runs):
    """One-sided p that specialised heads survive more often than the rest, roles permuted
    within each model; and the observed survival rates."""
    def stat(rs):
        spec = np.concatenate([k[np.isin(r, SPECIALISED)] for r, k in rs])
        rest = np.concatenate([k[~np.isin(r, SPECIALISED)] for r, k in rs])
        if len(spec) == 0 or len(rest) == 0:
            return math.nan, math.nan, math.nan
        return spec.mean() - rest.mean(), spec.mean(), rest.mean()
    observed, spec_rate, rest_rate = stat(runs)
    if math.isnan(observed):
        return math.nan, spec_rate, rest_rate
    rng = np.random.default_rng(0)
    count = 0
    for _ in range(PERMUTATIONS):
        count += stat([(rng.permutation(r), k) for r, k in runs])[0] >= observed
    return (1 + count) / (1 + PERMUTATIONS), spec_rate, rest_rate


def fill_survival(d, _):
    rows = []
    for task in d.tasks:
        runs = survival(d, task)
        if not runs:
            continue
        p, spec, rest = permutation_p(runs)
        n_spec = sum(int(np.isin(r, SPECIALISED).sum()) for r, _ in runs)
        rows.append([task, len(runs), n_spec, "–" if math.isnan(spec) else f"{spec:.2f}",
                     "–" if math.isnan(rest) else f"{rest:.2f}", "–" if math.isnan(p) else f"{p:.4f}"])
    return table(["task", "seeds", "specialised heads (all seeds)", "share kept by L0 (specialised)",
                  "share kept (the rest)", "permutation p (specialised kept more)"], rows) \
        if rows else "*(no roles or no L0 runs)*"


def fill_scratch(d, _):
    rows = []
    for task in d.tasks:
        metric = TASKS[task][1]
        key = {"val_loss": "loss", "val_accuracy": "accuracy", "val_bpb": "bpb"}[metric]
        digits = 3 if metric == "val_bpb" else 4
        pruned, scratch, control, layouts = [], [], [], []
        for s in d.seeds[task]:
            chosen = l0_selected(d, task, s)
            sc = d.eval(task, s, "scratch_l0", "test")
            if not chosen or not sc:
                continue
            layout = " ".join(str(x) for x in chosen[2])
            trained = d.scratch_layout(task, s)
            if trained != layout:
                raise SystemExit(f"make_results: data/scratch.csv: {task} seed {s} retrained layout '{trained}', "
                                 f"but L0 chose '{layout}' on val: rerun run.sh's scratch stage (ONLY_SCRATCH=1)")
            layouts.append(layout)
            t = d.eval(task, s, chosen[6], "test")
            pruned.append(number(t[key]) if t else math.nan)
            scratch.append(number(sc[key]))
            control.append(number(d.eval(task, s, "none_l0", "test")[key]))
        if not scratch:
            continue
        unit = "points" if metric == "val_accuracy" else "%"
        rows.append([task, "; ".join(layouts), cell(control, digits), cell(pruned, digits), cell(scratch, digits),
                     seeds_list([x * 100 for x in scratch_drops(d, task)], 2) + " " + unit])
    return table(["task", "heads per layer kept (per seed)", "unpruned + fine-tuning (control), test",
                  "L0-pruned, test", "same layout from scratch, test",
                  "drop from scratch against L0-pruned, per seed (> 0: scratch worse)"], rows) \
        if rows else "*(no layouts retrained)*"


# ---- claims ----------------------------------------------------------------------------------------


def claim_single_heads(d):
    parts = []
    for task in d.tasks:
        counts = [int(table1_counts(d, task, s)[1].sum()) for s in d.seeds[task]]
        total = d.head_table(task, d.seeds[task][0])["gate"].size
        parts.append(f"{task}: {', '.join(str(c) for c in counts)} of {total}")
    return "heads significantly worse to remove (Holm), per seed: " + "; ".join(parts)


def claim_layer_one_head(d):
    parts = []
    for task in d.tasks:
        runs = table2_rows(d, task)
        ok = sum(not layer[3] for run in runs for layer in run)
        parts.append(f"{task}: {ok}/{sum(len(r) for r in runs)}")
    return "layers (x seeds) reducible to one head without a significant loss increase: " + "; ".join(parts)


def claim_importance_vs_random(d):
    parts = []
    for task in d.tasks:
        seeds = d.seeds[task]
        parts.append(f"{task}: {cell([order_prunable(d, task, s, 'importance') for s in seeds], 2)} vs "
                     f"{cell([order_prunable(d, task, s, 'random') for s in seeds], 2)}")
    return f"fraction prunable within {TOLERANCE * 100:g}% (points), importance vs random: " + "; ".join(parts)


def claim_finetune(d):
    parts = []
    for task in d.tasks:
        metric = TASKS[task][1]
        vals = []
        for s in d.seeds[task]:
            name, control = ft_name(d, task, s, "importance_FT_recompute"), d.arm(task, s, ft_name(d, task, s, "none_FT") or "")
            rows = d.arm(task, s, name) if name else None
            vals.append(prunable(metric, rows, control=control) if rows and control else math.nan)
        parts.append(f"{task}: {cell(vals, 2)}")
    return "fraction prunable with fine-tuning and re-scoring, against the control: " + "; ".join(parts)


def claim_l0(d):
    parts = []
    for task in d.tasks:
        chosen = [c for c in (l0_selected(d, task, s) for s in d.seeds[task]) if c]
        if chosen:
            parts.append(f"{task}: {cell((c[1] for c in chosen), 2)} pruned, test drop "
                         f"{cell((c[4] * 100 for c in chosen), 2)}")
    return "L0 at the lambda chosen on val, against its control: " + "; ".join(parts)


def claim_voita(d):
    parts = []
    for task in d.tasks:
        runs = survival(d, task)
        if runs:
            p, spec, rest = permutation_p(runs)
            parts.append(f"{task}: kept {spec:.2f} vs {rest:.2f}, p = {p:.3f}" if not math.isnan(p)
                         else f"{task}: no specialised heads")
    return "share of heads kept by L0, specialised vs the rest (permutation p): " + "; ".join(parts) if parts else "–"


def verdict_voita(d):
    sig = total = 0
    for task in d.tasks:
        runs = survival(d, task)
        if runs:
            p = permutation_p(runs)[0]
            if not math.isnan(p):
                total += 1
                sig += p < ALPHA
    if total == 0:
        return "–"
    if sig == total:
        return "**Agrees**: on every task with specialised heads, they survive L0 more often"
    if sig == 0:
        return "**Not supported**: on no task do specialised heads survive L0 significantly more often"
    return f"**Partly**: specialised heads survive L0 significantly more often on {sig} of {total} tasks"


def verdict_single_heads(d):
    agree, disagree = [], []
    for task in d.tasks:
        shares = [table1_counts(d, task, s)[1].mean() for s in d.seeds[task]]
        (agree if max(shares) < 0.5 else disagree if min(shares) >= 0.5 else []).append(task)
    return (f"**Agrees** on {', '.join(agree) or 'no task'} (fewer than half the heads significantly worse to remove, "
            f"every seed); **disagrees** on {', '.join(disagree) or 'no task'} (half or more, every seed)")


def verdict_layer_one_head(d):
    # Michel's claim is that *some* layers can: a seed agrees when at least one of its layers does.
    def seeds_with_one(t):
        return sum(any(not layer[3] for layer in run) for run in table2_rows(d, t)), len(table2_rows(d, t))
    agree = [t for t in d.tasks if seeds_with_one(t)[0] == seeds_with_one(t)[1] > 0]
    never = [t for t in d.tasks if seeds_with_one(t)[0] == 0]
    some = [t for t in d.tasks if t not in agree and t not in never]
    parts = [f"**Agrees** on {', '.join(agree) or 'no task'} (in every seed some layer keeps its loss with one head)"]
    if some:
        parts.append(f"in some seeds only on {', '.join(some)}")
    if never:
        parts.append(f"**disagrees** on {', '.join(never)} (no layer of any seed can)")
    return "; ".join(parts)


def verdict_importance_vs_random(d):
    better = [t for t in d.tasks if all(order_prunable(d, t, s, "importance") > order_prunable(d, t, s, "random")
                                        for s in d.seeds[t])]
    return (f"**Agrees** on {', '.join(better) or 'no task'} (importance prunes more in every seed); "
            f"not shown on {', '.join(t for t in d.tasks if t not in better) or 'any other'}")


def finetune_gain(d, task):
    """Per seed: fraction prunable with fine-tuning + re-scoring (vs control) minus without (vs round 0)."""
    metric = TASKS[task][1]
    out = []
    for s in d.seeds[task]:
        name, control = ft_name(d, task, s, "importance_FT_recompute"), d.arm(task, s, ft_name(d, task, s, "none_FT") or "")
        rows, plain = (d.arm(task, s, name) if name else None), d.arm(task, s, "importance")
        out.append(prunable(metric, rows, control=control) - prunable(metric, plain)
                   if rows and control and plain else math.nan)
    return out


def verdict_finetune(d):
    helps = [t for t in d.tasks if all(g > 0 for g in finetune_gain(d, t))]
    return (f"**Agrees** on {', '.join(helps) or 'no task'} (more heads prunable with fine-tuning, against the control, "
            f"than without, every seed); not shown on {', '.join(t for t in d.tasks if t not in helps) or 'any other'}")


def verdict_l0(d):
    ok = []
    for t in d.tasks:
        chosen = [c for c in (l0_selected(d, t, s) for s in d.seeds[t]) if c]
        if chosen and all(c[4] <= TOLERANCE and c[1] >= 0.5 for c in chosen):
            ok.append(t)
    return (f"**Agrees** on {', '.join(ok) or 'no task'} (half the heads or more pruned within the tolerance on test, "
            f"every seed); not on {', '.join(t for t in d.tasks if t not in ok) or 'any other'}")


def scratch_drops(d, task):
    """Per seed, what training the L0 layout from scratch loses against the L0-pruned model on
    test (drop(): relative for losses, points for accuracy; negative = scratch is better)."""
    metric = TASKS[task][1]
    key = {"val_loss": "loss", "val_accuracy": "accuracy", "val_bpb": "bpb"}[metric]
    out = []
    for s in d.seeds[task]:
        chosen, sc = l0_selected(d, task, s), d.eval(task, s, "scratch_l0", "test")
        pruned = d.eval(task, s, chosen[6], "test") if chosen else None
        if sc and pruned:
            out.append(drop(metric, number(pruned[key]), number(sc[key])))
    return out


def claim_scratch(d):
    parts = [f"{t}: {seeds_list([x * 100 for x in scratch_drops(d, t)], 2)}" for t in d.tasks if scratch_drops(d, t)]
    return ("test drop of the layout trained from scratch against the L0-pruned model, per seed (% or points): "
            + "; ".join(parts)) if parts else "–"


def verdict_scratch(d):
    same, worse, better, mixed = [], [], [], []
    for t in d.tasks:
        drops = scratch_drops(d, t)
        if not drops:
            continue
        if all(abs(x) <= TOLERANCE for x in drops):
            same.append(t)
        elif all(x > TOLERANCE for x in drops):
            worse.append(t)
        elif all(x < -TOLERANCE for x in drops):
            better.append(t)
        else:
            sign = "worse" if all(x > 0 for x in drops) else "better" if all(x < 0 for x in drops) else None
            beyond = sum(abs(x) > TOLERANCE for x in drops)
            mixed.append(f"{t} (from scratch {sign} in every seed, beyond the tolerance in {beyond} of {len(drops)})"
                         if sign else f"{t} (seeds differ in sign)")
    if not (same or worse or better or mixed):
        return "–"
    parts = []
    if same:
        parts.append(f"**the layout is enough** on {', '.join(same)} (within the tolerance, every seed)")
    if worse:
        parts.append(f"**the pruned weights matter** on {', '.join(worse)} (from scratch is worse beyond the "
                     f"tolerance, every seed)")
    if better:
        parts.append(f"from scratch is better on {', '.join(better)}")
    if mixed:
        parts.append(f"unresolved on {', '.join(mixed)}")
    return "; ".join(parts)


CLAIMS = {"single_heads": claim_single_heads, "layer_one_head": claim_layer_one_head,
          "importance_vs_random": claim_importance_vs_random, "orders": claim_orders, "finetune": claim_finetune,
          "l0": claim_l0, "early": claim_early, "voita": claim_voita, "scratch": claim_scratch}
VERDICTS = {"orders": verdict_orders, "early": verdict_early, "voita": verdict_voita,
            "single_heads": verdict_single_heads, "layer_one_head": verdict_layer_one_head,
            "importance_vs_random": verdict_importance_vs_random, "finetune": verdict_finetune, "l0": verdict_l0,
            "scratch": verdict_scratch}


def fill_timings(d, _):
    kinds = {}
    for r in d.timings:
        kinds.setdefault((r["task"], r["job"]), []).append(number(r["seconds"]))
    rows = [[t, j, len(v), f"{sum(v) / len(v):.1f}", f"{sum(v):.0f}"] for (t, j), v in sorted(kinds.items())]
    return table(["task", "job", "jobs", "mean s", "total s"], rows)


FILLERS = {"provenance": fill_provenance, "setup": fill_setup, "table1": fill_table1, "table2": fill_table2,
           "prune": fill_prune, "finetune": fill_finetune, "l0": fill_l0, "orders": fill_orders,
           "dynamics": fill_dynamics, "spearman": fill_spearman, "roles": fill_roles,
           "baselines": lambda d, _: baselines(d), "survival": fill_survival, "scratch": fill_scratch,
           "timings": fill_timings}


def render(d):
    template = open(os.path.join(HERE, "results.template.md")).read()

    def replace(m):
        name, arg = m.group(1), m.group(2)
        if name.startswith("claim_") and name[6:] in CLAIMS:
            return CLAIMS[name[6:]](d)
        if name.startswith("verdict_") and name[8:] in VERDICTS:
            return VERDICTS[name[8:]](d)
        if name not in FILLERS:
            fail(f"unknown placeholder {m.group(0)} in results.template.md")
        if arg is not None and arg not in TASKS:
            fail(f"unknown task in {m.group(0)}")
        return FILLERS[name](d, arg)

    return re.sub(r"\{\{(\w+)(?: (\w+))?\}\}", replace, template)


# ---- figures -----------------------------------------------------------------------------------------


def figures(d):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    folder = os.path.join(HERE, "figures")
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".png"):
            os.remove(os.path.join(folder, name))

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(folder, name), dpi=150, metadata={"Software": None})
        plt.close(fig)

    def mean_curve(runs, metric):
        """Runs of equal rounds -> x (fraction), mean, min, max of the metric over runs."""
        n = min(len(r) for r in runs)
        x = np.array([number(runs[0][i]["fraction_pruned"]) for i in range(n)])
        y = np.array([[number(r[i][metric]) for i in range(n)] for r in runs])
        return x, y.mean(axis=0), y.min(axis=0), y.max(axis=0)

    for task in d.tasks:
        title, metric = TASKS[task]
        seeds = d.seeds[task]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for order, style in zip(SCORE_ORDERS, ["-", "--", "-.", ":", ":", "-"]):
            runs = sum((random_arms(d, task, s) if order == "random" else [d.arm(task, s, order)] for s in seeds), [])
            runs = [r for r in runs if r]
            if runs:
                x, m, lo, hi = mean_curve(runs, metric)
                line, = axes[0].plot(x, m, style, marker=".", label=ORDER_TITLES[order])
                axes[0].fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
        base = np.mean([number(d.arm(task, s, "importance")[0][metric]) for s in seeds if d.arm(task, s, "importance")])
        for ax in axes:
            ax.axhline(base, color="0.4", linestyle=":", linewidth=1, label="unpruned")
        axes[0].set_title(f"{title}: score orders, no fine-tuning", fontsize=10)
        for base_arm, label in [("importance_FT_recompute", "importance, fine-tuned + re-scored"),
                                ("importance_FT", "importance, fine-tuned"),
                                ("none_FT", "control: fine-tuned, nothing pruned")]:
            runs = [d.arm(task, s, ft_name(d, task, s, base_arm) or "") for s in seeds]
            runs = [r for r in runs if r]
            if not runs:
                continue
            if base_arm == "none_FT":  # plot the control against the pruned arms' fractions
                ref = [d.arm(task, s, ft_name(d, task, s, "importance_FT") or "") for s in seeds]
                ref = [r for r in ref if r]
                n = min(len(r) for r in runs + ref)
                x = [number(ref[0][i]["fraction_pruned"]) for i in range(n)]
                y = np.array([[number(r[i][metric]) for i in range(n)] for r in runs])
                axes[1].plot(x, y.mean(axis=0), color="0.2", linestyle="--", label=label)
                axes[1].fill_between(x, y.min(axis=0), y.max(axis=0), color="0.2", alpha=0.1)
                continue
            x, m, lo, hi = mean_curve(runs, metric)
            line, = axes[1].plot(x, m, marker=".", label=label)
            axes[1].fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
        pts = [(p[1], number(p[5][metric])) for s in seeds for p in l0_points(d, task, s)]
        if pts:
            axes[1].scatter(*zip(*pts), marker="x", color="k", label="L0 (each lambda, seed)", zorder=3)
            ctl = [number(d.arm(task, s, "none_l0")[-1][metric]) for s in seeds if d.arm(task, s, "none_l0")]
            axes[1].scatter([0] * len(ctl), ctl, marker="s", facecolors="none", edgecolors="k",
                            label="L0's control (fine-tuned, nothing pruned)", zorder=3)
        axes[1].set_title(f"{title}: with fine-tuning, and L0", fontsize=10)
        for ax in axes:
            ax.set_xlabel("fraction of heads pruned")
            ax.legend(fontsize=7)
        axes[0].set_ylabel(metric.replace("val_", "validation "))
        fig.suptitle(f"mean over {len(seeds)} seeds; bands: min-max over seeds", fontsize=8)
        save(fig, f"{task}_prune.png")

        h = d.head_table(task, seeds[0])
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
        for ax, col, label in [(axes[0], "ablation_loss_delta", "Δ loss, head removed"),
                               (axes[1], "layer_only_loss_delta", "Δ loss, head alone in its layer")]:
            im = ax.imshow(h[col], aspect="auto", cmap="viridis")
            rows, cols = np.shape(h[col])
            ax.set_yticks(range(rows))
            ax.set_xticks(range(cols))
            ax.tick_params(labelsize=7 if cols > 8 else 9)
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(f"{title}, seed {seeds[0]}: {label}", fontsize=9)
            fig.colorbar(im, ax=ax)
        save(fig, f"{task}_heads.png")

    dyn = {t: dynamics_rows(d, t) for t in d.tasks}
    dyn = {t: v for t, v in dyn.items() if v}
    if dyn:
        fig, axes = plt.subplots(1, len(dyn), figsize=(3.4 * len(dyn), 3.4), squeeze=False)
        for ax, task in zip(axes[0], dyn):
            metric = TASKS[task][1]
            s = d.seeds[task][0]
            steps = d.checkpoint_steps(task, s)
            cmap = plt.get_cmap("viridis")
            for i, step in enumerate(steps):
                color = cmap(i / max(1, len(steps) - 1))
                imp = d.arm(task, s, "importance", step)
                rnd = [r for r in random_arms(d, task, s, step) if r]
                if imp:
                    ax.plot([number(r["fraction_pruned"]) for r in imp], [number(r[metric]) for r in imp], color=color,
                            label=f"step {step}")
                if rnd:
                    ax.plot([number(r["fraction_pruned"]) for r in rnd[0]], [number(r[metric]) for r in rnd[0]],
                            color=color, linestyle="--")
            ax.set_title(f"{TASKS[task][0]}, seed {s}", fontsize=9)
            ax.set_xlabel("fraction of heads pruned")
            ax.set_ylabel(metric.replace("val_", ""))
            ax.legend(fontsize=6)
        fig.suptitle("Pruning curves of checkpoints along training (solid: importance, dashed: random)", fontsize=9)
        save(fig, "dynamics_curves.png")


def main():
    ap = argparse.ArgumentParser(description="RESULTS.md and figures from data/")
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--check", action="store_true", help="exit 0 iff RESULTS.md is what data/ regenerates")
    ap.add_argument("--l0-layouts", action="store_true", help="print the val-chosen L0 layouts (run.sh)")
    args = ap.parse_args()
    d = Data(args.data)
    if args.l0_layouts:
        print_l0_layouts(d)
        return
    text = render(d)
    target = os.path.join(HERE, "RESULTS.md")
    if args.check:
        current = open(target).read() if os.path.exists(target) else ""
        if current == text:
            print(f"{target} is what {args.data} regenerates")
            return
        a, b = current.splitlines(), text.splitlines()
        line = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        print(f"make_results: {target} differs from what {args.data} regenerates, first at line {line + 1}: "
              f"run python3 experiments/pruning/make_results.py", file=sys.stderr)
        sys.exit(1)
    write_atomically(target, text)
    figures(d)
    print(f"wrote {target} and figures/")


if __name__ == "__main__":
    main()
