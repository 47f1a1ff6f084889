#!/usr/bin/env python3
"""Fills experiments/pruning/RESULTS.md from run.sh's folders (run.sh calls it).

RESULTS.md is results.template.md with every `{{NAME}}` or `{{NAME TASK}}` placeholder replaced
by what FILLERS[NAME] builds from OUT:
  OUT/<task>/seed<N>/heads.h5                 headlab analyze --layer-only of the final checkpoint
  OUT/<task>/seed<N>/dynamics/step_<S>/heads.h5   headlab analyze of checkpoints along training
  OUT/<task>/seed<N>/prune/<name>/prune.csv   headlab prune, one invocation each
  OUT/<task>/seed<N>/**/seconds.txt           each job's wall time (run.sh)
Tasks or seeds without folders are left out (a placeholder of a task that was not run says so),
so a reduced run (SCALE=dev, TASKS=...) fills the same template. Figures go to figures/.

Significance (Table 1, Table 2) is a paired bootstrap over evaluation examples: for each head
the per-example differences d_e = loss_e(masked) - loss_e(full), resampled with replacement
BOOTSTRAP_RESAMPLES times from numpy's default_rng(BOOTSTRAP_SEED) (the same resamples for every
head of a model), two-sided p = (1 + #{|mean* - mean| >= |mean|}) / (1 + resamples): the null
distribution is the bootstrap distribution shifted to mean 0. Deterministic.

  /usr/bin/python3 experiments/pruning/make_results.py runs/pruning
"""
import math
import os
import re
import shutil
import sys
import tomllib

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402  (experiments/common.py)
from common import fail, mean_std, number, pm, write_atomically  # noqa: E402

# task -> (title, prune metric column of prune.csv); in the order of the tables.
TASKS = {
    "k_relation": ("k-relation retrieval", "val_accuracy"),
    "induction": ("induction", "val_accuracy"),
    "grammar": ("synthetic grammar", "val_loss"),
    "text": ("real text (KJV bytes)", "val_bpb"),
    "classify": ("classification (encoder)", "val_accuracy"),
}
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
ALPHA = 0.01
TOLERANCES = (0.01, 0.05)  # metric drop: relative for loss and bits/byte, absolute (points) for accuracy
RHO_THRESHOLD = 0.9  # dynamics: first checkpoint whose importance ranking is this close to the final one
ROLE_THRESHOLD = 0.3  # Voita: a head has a role when its best gold agreement is at least this
ROLES = {  # role -> heads.csv agreement columns (max over them)
    "positional": ["previous_token_agreement"],
    "syntactic": ["syntactic_head_agreement", "dependent_agreement"],
    "coreference": ["antecedent_agreement"],
    "delimiter": ["delimiter_agreement"],
}
STRATEGY_ORDER = ["importance", "ablation", "entropy", "confidence", "random", "L0"]
SPECIALISED = ("positional", "syntactic", "coreference")  # delimiter heads are the usual no-op heads


def read_csv(path):
    return common.read_csv(path, "run experiments/pruning/run.sh first")


# ---- loading ----------------------------------------------------------------------------------


def seed_dirs(out, task):
    base = os.path.join(out, task)
    if not os.path.isdir(base):
        return []
    dirs = sorted((d for d in os.listdir(base) if re.fullmatch(r"seed\d+", d)), key=lambda d: int(d[4:]))
    return [os.path.join(base, d) for d in dirs if os.path.exists(os.path.join(base, d, "heads.h5"))]


class Heads:
    """One heads.h5: per-head columns [L, H], per-example arrays, attributes."""

    def __init__(self, path):
        if not os.path.exists(path):
            fail(f"{path} is missing: run experiments/pruning/run.sh first")
        with h5py.File(path, "r") as f:
            self.columns = {name: f["heads"][name][()] for name in f["heads"]}
            ex = f["examples"] if "examples" in f else {}
            self.example_loss = ex["loss"][()] if "loss" in ex else None
            self.ablation = ex["ablation_loss"][()] if "ablation_loss" in ex else None
            self.layer_only = ex["layer_only_loss"][()] if "layer_only_loss" in ex else None
            self.attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        self.L, self.H = self.columns["gate"].shape
        self.config = tomllib.loads(self.attrs["config"])

    def column(self, name):
        return self.columns[name]


def prune_runs(seed_dir):
    """{folder name: rows of prune.csv} of one seed, finished runs only (pruned.h5 written)."""
    base = os.path.join(seed_dir, "prune")
    runs = {}
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if os.path.exists(os.path.join(base, name, "pruned.h5")):
            runs[name] = read_csv(os.path.join(base, name, "prune.csv"))
    return runs


# ---- statistics --------------------------------------------------------------------------------


def paired_bootstrap(diffs):
    """diffs [K, E] -> (mean [K], two-sided p [K]); the same deterministic resamples for every row."""
    K, E = diffs.shape
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    counts = np.zeros((BOOTSTRAP_RESAMPLES, E))
    rows = np.repeat(np.arange(BOOTSTRAP_RESAMPLES), E)
    np.add.at(counts, (rows, rng.integers(0, E, size=BOOTSTRAP_RESAMPLES * E)), 1.0)
    mean = diffs.mean(axis=1)
    boot = diffs @ counts.T / E  # [K, R]
    extreme = (np.abs(boot - mean[:, None]) >= np.abs(mean)[:, None]).sum(axis=1)
    return mean, (1 + extreme) / (1 + BOOTSTRAP_RESAMPLES)


def significant(diffs):
    """(worse [K] bool, better [K] bool) at p < ALPHA; worse = the masked model's loss is higher."""
    mean, p = paired_bootstrap(diffs)
    return (p < ALPHA) & (mean > 0), (p < ALPHA) & (mean < 0)


def ranks(values):
    """Average ranks (ties share their mean rank), for Spearman's rho."""
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


def cell(values, digits):
    return pm(*mean_std(list(values)), digits)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def not_run(task):
    return f"*(not run: no finished analysis under OUT/{task}/)*"


# ---- the fillers: one per placeholder name -------------------------------------------------------


def fill_setup(out, _):
    rows = []
    for task, (title, metric) in TASKS.items():
        seeds = seed_dirs(out, task)
        if not seeds:
            continue
        heads = [Heads(os.path.join(s, "heads.h5")) for s in seeds]
        c = heads[0].config
        model, train = c["model"], c["train"]
        kind = "encoder" if model.get("kind") == "encoder" else "decoder"
        acc = [h.attrs["accuracy"] for h in heads if h.attrs["accuracy"] >= 0]
        rows.append([f"`{task}`", title, f"{kind}, {model['n_layers']} x {model['n_heads']} heads, d_model {model['d_model']}",
                     f"{train['steps']} x {train['batch_size']}", len(heads),
                     f"{heads[0].attrs['n_examples']} ({heads[0].attrs['n_batches']} x {heads[0].attrs['batch_size']})",
                     cell((h.attrs["loss"] for h in heads), 4), cell(acc, 4) if acc else "–", metric.replace("val_", "")])
    return table(["task", "data", "model", "steps x batch", "seeds", "val examples analysed",
                  "val loss (nats)", "val accuracy", "pruning metric"], rows)


def fill_table1(out, task):
    seeds = seed_dirs(out, task)
    if not seeds:
        return not_run(task)
    per_layer = {}  # layer -> list over seeds of (sorted deltas, worse count, better count)
    totals = []
    for s in seeds:
        h = Heads(os.path.join(s, "heads.h5"))
        if h.ablation is None:
            fail(f"{s}/heads.h5 has no examples/ablation_loss (analyze without --no-ablation)")
        delta = h.column("ablation_loss_delta")
        diffs = h.ablation.reshape(h.L * h.H, -1) - h.example_loss[None, :]
        worse, better = (x.reshape(h.L, h.H) for x in significant(diffs))
        for layer in range(h.L):
            d = np.sort(delta[layer][~np.isnan(delta[layer])])
            per_layer.setdefault(layer, []).append((d, int(worse[layer].sum()), int(better[layer].sum())))
        totals.append((int(worse.sum()), int(better.sum()), h.L * h.H))
    rows = []
    for layer, runs in per_layer.items():
        rows.append([layer, cell((r[0][-1] for r in runs), 4), cell((float(np.median(r[0])) for r in runs), 4),
                     cell((r[0][0] for r in runs), 4), ", ".join(str(r[1]) for r in runs),
                     ", ".join(str(r[2]) for r in runs), len(runs[0][0])])
    rows.append(["all", "", "", "", ", ".join(str(t[0]) for t in totals), ", ".join(str(t[1]) for t in totals),
                 totals[0][2]])
    return table(["layer", "largest Δ loss", "median Δ loss", "smallest Δ loss",
                  f"heads significantly worse (p < {ALPHA}), per seed", "significantly better, per seed", "heads"], rows)


def table2_rows(out, task):
    """Per seed and layer: (best head, its loss delta, accuracy delta, significantly worse?)."""
    result = []
    for s in seed_dirs(out, task):
        h = Heads(os.path.join(s, "heads.h5"))
        if h.layer_only is None:
            fail(f"{s}/heads.h5 has no examples/layer_only_loss (analyze --layer-only)")
        delta, acc = h.column("layer_only_loss_delta"), h.column("layer_only_accuracy_delta")
        layers = []
        for layer in range(h.L):
            best = int(np.nanargmin(delta[layer]))
            diffs = (h.layer_only[layer, best] - h.example_loss)[None, :]
            worse, better = significant(diffs)
            layers.append((best, float(delta[layer, best]), float(acc[layer, best]), bool(worse[0]), bool(better[0])))
        result.append(layers)
    return result


def fill_table2(out, task):
    runs = table2_rows(out, task)
    if not runs:
        return not_run(task)
    rows = []
    for layer in range(len(runs[0])):
        cells = [r[layer] for r in runs]
        rows.append([layer, ", ".join(f"H{c[0]}" for c in cells), cell((c[1] for c in cells), 4),
                     cell((c[2] for c in cells), 4) if not math.isnan(cells[0][2]) else "–",
                     f"{sum(c[3] for c in cells)}/{len(cells)}", f"{sum(c[4] for c in cells)}/{len(cells)}"])
    return table(["layer", "best head, per seed", "Δ loss (layer reduced to it)", "Δ accuracy",
                  f"seeds significantly worse (p < {ALPHA})", "seeds significantly better"], rows)


def drop(metric, base, value):
    """The metric's loss of quality: accuracy in points (fraction), loss and bpb relative."""
    return base - value if metric == "val_accuracy" else (value - base) / base


def prunable(metric, rows, tolerance):
    """The largest fraction pruned before the first round whose drop exceeds the tolerance."""
    base = number(rows[0][metric])
    best = 0.0
    for r in rows[1:]:
        if drop(metric, base, number(r[metric])) > tolerance:
            break
        best = number(r["fraction_pruned"])
    return best


def at_half(metric, rows):
    """The metric at half the heads pruned, interpolated linearly between rounds."""
    xs = [number(r["fraction_pruned"]) for r in rows]
    ys = [number(r[metric]) for r in rows]
    return float(np.interp(0.5, xs, ys)) if xs[-1] >= 0.5 else math.nan


def group_label(rows):
    r = rows[0]
    label = r["strategy"]
    if r["strategy"] == "l0":
        return f"L0 gates, fine-tuned {r['finetune_steps']} steps (best lambda)"
    if int(r["finetune_steps"]) > 0:
        label += f", fine-tuned {r['finetune_steps']} steps/round"
    if r["recompute"] == "1":
        label += ", re-scored every round"
    return label


def prune_groups(out, task):
    """{label: [(seed dir, rows)]} over every seed of the task: the iterative strategies in
    STRATEGY_ORDER (fine-tuned after the plain ones), then L0."""
    groups = {}
    for s in seed_dirs(out, task):
        for name, rows in prune_runs(s).items():
            groups.setdefault(group_label(rows), []).append((s, rows))

    def order(label):
        strategy = label.split(",")[0].split(" ")[0]
        rank = STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)
        return ("," in label, rank, label)
    return {label: groups[label] for label in sorted(groups, key=order)}


def fill_prune(out, task):
    groups = prune_groups(out, task)
    if not groups:
        return not_run(task)
    metric = TASKS[task][1]
    unit = "points" if metric == "val_accuracy" else "relative"
    digits = 4 if metric != "val_bpb" else 3
    rows = []
    for label, runs in groups.items():
        if label.startswith("L0 gates"):
            by_seed = {}  # seed -> (fraction kept-in-tolerance per tolerance)
            for s, r in runs:
                by_seed.setdefault(s, []).append(r)
            fractions = {t: [] for t in TOLERANCES}
            for rs in by_seed.values():
                for t in TOLERANCES:
                    ok = [number(r[1]["fraction_pruned"]) for r in rs
                          if drop(metric, number(r[0][metric]), number(r[1][metric])) <= t]
                    fractions[t].append(max(ok, default=0.0))
            lambdas = sorted({float(r[0]["lambda"]) for _, r in runs})
            rows.append([label + f", lambda in {', '.join(f'{x:g}' for x in lambdas)}", f"{len(by_seed)} seeds"]
                        + [cell(fractions[t], 2) for t in TOLERANCES] + ["–"])
            continue
        rows.append([label, f"{len(runs)}"] + [cell((prunable(metric, r, t) for _, r in runs), 2) for t in TOLERANCES]
                    + [cell((at_half(metric, r) for _, r in runs), digits)])
    unpruned = {s: number(r[0][metric]) for runs in groups.values() for s, r in runs}  # round 0, one per seed
    base = cell(unpruned.values(), digits)
    header = ["strategy", "runs"] + [f"fraction prunable, drop ≤ {t * 100:g}{' points' if unit == 'points' else '%'}"
                                     for t in TOLERANCES] + [f"{metric.replace('val_', '')} at half the heads pruned"]
    return f"Unpruned {metric.replace('val_', '')}: {base}.\n\n" + table(header, rows)


def dynamics(out, task):
    """Per seed: [(step, fraction of training, rho with the final checkpoint's importance)]."""
    result = []
    for s in seed_dirs(out, task):
        base = os.path.join(s, "dynamics")
        steps = sorted(d for d in os.listdir(base) if os.path.exists(os.path.join(base, d, "heads.h5"))) \
            if os.path.isdir(base) else []
        if not steps:
            continue
        vectors = [(int(d.split("_")[1]), Heads(os.path.join(base, d, "heads.h5")).column("importance_normalized"))
                   for d in steps]
        final_step, final = vectors[-1]
        result.append([(step, step / final_step, spearman(v, final)) for step, v in vectors])
    return result


def fill_dynamics(out, _):
    rows = []
    curves = {}
    for task in TASKS:
        runs = dynamics(out, task)
        if not runs:
            continue
        curves[task] = runs
        first = []
        for run in runs:
            hit = [step for step, _, rho in run if rho >= RHO_THRESHOLD]
            first.append(hit[0] / run[-1][0] if hit else math.nan)
        rho_at = {}  # step -> rho of every seed that has the checkpoint
        for run in runs:
            for step, _, rho in run:
                rho_at.setdefault(step, []).append(rho)
        final_step = max(run[-1][0] for run in runs)
        points = "; ".join(f"{step / final_step:.2f}: {pm(*mean_std(v), 2)}" for step, v in sorted(rho_at.items()))
        rows.append([task, len(runs), points, cell(first, 2) + f" ({sum(not math.isnan(x) for x in first)}/{len(first)})"])
    if not rows:
        return "*(not run: no dynamics analyses)*"
    plot_dynamics(curves)
    return table(["task", "seeds", "Spearman rho with the final importance, at fraction of training: mean ± std",
                  f"first fraction with rho ≥ {RHO_THRESHOLD} (seeds that got there)"], rows) \
        + "\n\n![importance dynamics](figures/importance_dynamics.png)"


def plot_dynamics(curves):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for task, runs in curves.items():
        rho_at = {}
        for run in runs:
            for _, f, rho in run:
                rho_at.setdefault(f, []).append(rho)
        x = sorted(rho_at)
        stats = [mean_std(rho_at[f]) for f in x]
        ax.errorbar(x, [m for m, _ in stats], yerr=[0 if math.isnan(s) else s for _, s in stats],
                    marker="o", capsize=3, label=task)
    ax.axhline(RHO_THRESHOLD, color="0.6", linestyle=":")
    ax.set_xlabel("fraction of training (checkpoint step / final step)")
    ax.set_ylabel("Spearman rho with final importance")
    ax.set_title("Head importance ranking along training (mean ± std over seeds)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.join(HERE, "figures"), exist_ok=True)
    fig.savefig(os.path.join(HERE, "figures", "importance_dynamics.png"), dpi=110, metadata={"Software": None})
    plt.close(fig)


def head_roles(h):
    """[L*H] role names: the relation with the highest agreement if >= ROLE_THRESHOLD, else 'none'."""
    best = {role: np.nanmax(np.stack([h.column(c) for c in cols]), axis=0) if any(
        not np.all(np.isnan(h.column(c))) for c in cols) else np.full((h.L, h.H), np.nan)
        for role, cols in ROLES.items()}
    roles = []
    for k in range(h.L * h.H):
        values = {role: v.ravel()[k] for role, v in best.items() if not np.isnan(v.ravel()[k])}
        role = max(values, key=values.get) if values else None
        roles.append(role if role is not None and values[role] >= ROLE_THRESHOLD else "none")
    return roles, np.nanmax(np.stack([best[r] for r in SPECIALISED]), axis=0).ravel()


def fill_voita(out, task):
    seeds = seed_dirs(out, task)
    if not seeds:
        return not_run(task)
    by_role = {}  # role -> lists of importance_normalized, ablation delta
    rho_imp, rho_abl = [], []
    kept = {}  # lambda -> role -> [kept, total]
    for s in seeds:
        h = Heads(os.path.join(s, "heads.h5"))
        roles, agreement = head_roles(h)
        imp, abl = h.column("importance_normalized").ravel(), h.column("ablation_loss_delta").ravel()
        rho_imp.append(spearman(imp, agreement))
        rho_abl.append(spearman(abl, agreement))
        for k, role in enumerate(roles):
            by_role.setdefault(role, ([], []))
            by_role[role][0].append(imp[k])
            by_role[role][1].append(abl[k])
        for name, rows in prune_runs(s).items():
            if rows[0]["strategy"] != "l0":
                continue
            gone = {tuple(int(x) for x in p.split(":")) for p in rows[-1]["pruned_heads"].split()}
            lam = float(rows[0]["lambda"])
            for k, role in enumerate(roles):
                slot = kept.setdefault(lam, {}).setdefault(role, [0, 0])
                slot[0] += (k // h.H, k % h.H) not in gone
                slot[1] += 1
    order = [r for r in list(ROLES) + ["none"] if r in by_role]
    roles_table = table(["role", "heads (all seeds)", "importance (normalised), mean", "ablation Δ loss, mean",
                         "share of the summed ablation Δ"],
                        [[r, len(by_role[r][0]), f"{np.nanmean(by_role[r][0]):.3f}", f"{np.nanmean(by_role[r][1]):.4f}",
                          f"{np.nansum(by_role[r][1]) / sum(np.nansum(v[1]) for v in by_role.values()):.2f}"]
                         for r in order])
    text = (f"Spearman rho between a head's best gold agreement ({', '.join(SPECIALISED)}) and its normalised "
            f"importance: {cell(rho_imp, 2)}; and its ablation Δ loss: {cell(rho_abl, 2)} (over {len(seeds)} seeds).\n\n"
            + roles_table)
    if kept:
        text += "\n\nHeads kept by the L0 gates, by role (kept / heads, summed over seeds):\n\n" + table(
            ["lambda"] + order, [[f"{lam:g}"] + [f"{kept[lam].get(r, [0, 0])[0]}/{kept[lam].get(r, [0, 0])[1]}"
                                                for r in order] for lam in sorted(kept)])
    return text


def fill_figures(out, task):
    """Copies seed 0's heatmaps and prune curves (headlab plot) to figures/ and links them."""
    seeds = seed_dirs(out, task)
    if not seeds:
        return not_run(task)
    plots = os.path.join(seeds[0], "plots")
    metric = TASKS[task][1]
    links = []
    for png, caption in [(f"prune_{metric}.png", "prune curves"), ("heads_ablation_loss_delta.png", "single-head ablation"),
                         ("heads_layer_only_loss_delta.png", "each head alone in its layer")]:
        if os.path.exists(os.path.join(plots, png)):
            os.makedirs(os.path.join(HERE, "figures"), exist_ok=True)
            shutil.copyfile(os.path.join(plots, png), os.path.join(HERE, "figures", f"{task}_{png}"))
            links.append(f"![{task}: {caption}, {os.path.basename(seeds[0])}](figures/{task}_{png})")
    return "\n".join(links)


def fill_timings(out, _):
    """Wall time of every job (seconds.txt), by kind: what the regeneration cost."""
    kinds = {}
    for task in TASKS:
        for s in seed_dirs(out, task):
            for root, _, files in os.walk(s):
                if "seconds.txt" not in files:
                    continue
                rel = os.path.relpath(root, s)
                kind = "analyze (final, ablation + layer-only)" if rel == "." else \
                    "analyze (dynamics, per checkpoint)" if rel.startswith("dynamics") else \
                    "prune " + re.sub(r"lambda[\d.e-]+$", "lambda", re.sub(r"_seed\d+$", "", os.path.basename(root)))
                kinds.setdefault((task, kind), []).append(float(open(os.path.join(root, "seconds.txt")).read()))
    if not kinds:
        return "*(no timings)*"
    rows = [[task, kind, len(v), f"{sum(v) / len(v):.1f}", f"{sum(v):.0f}"] for (task, kind), v in sorted(kinds.items())]
    total = sum(sum(v) for v in kinds.values())
    rows.append(["all", "", sum(len(v) for v in kinds.values()), "", f"{total:.0f}"])
    return table(["task", "job", "jobs", "mean s", "total s"], rows) + \
        f"\n\nJob time summed: {total / 60:.1f} min, i.e. about {total / 120:.1f} min of wall time at two jobs at a time."


FILLERS = {"setup": fill_setup, "table1": fill_table1, "table2": fill_table2, "prune": fill_prune,
           "dynamics": fill_dynamics, "voita": fill_voita, "figures": fill_figures, "timings": fill_timings}


def fill_claim(out, name):
    """{{claim_NAME}}: the measured numbers the claim is judged on (the verdict is the reader's)."""
    return CLAIMS[name](out) if name in CLAIMS else fail(f"unknown placeholder {{{{claim_{name}}}}}")


def claim_single_heads(out):
    parts = []
    for task in TASKS:
        seeds = seed_dirs(out, task)
        if seeds:
            counts = []
            for s in seeds:
                h = Heads(os.path.join(s, "heads.h5"))
                worse, _ = significant(h.ablation.reshape(h.L * h.H, -1) - h.example_loss[None, :])
                counts.append(int(worse.sum()))
            parts.append(f"{task}: {cell(counts, 1)} of {h.L * h.H}")
    return "heads whose removal is significantly worse: " + "; ".join(parts) if parts else "–"


def claim_layer_one_head(out):
    parts = []
    for task in TASKS:
        runs = table2_rows(out, task)
        if runs:
            ok = sum(not layer[3] for run in runs for layer in run)
            parts.append(f"{task}: {ok}/{sum(len(r) for r in runs)}")
    return "layers (x seeds) reducible to one head without a significant loss increase: " + "; ".join(parts) \
        if parts else "–"


def claim_importance_vs_random(out):
    parts = []
    for task, (_, metric) in TASKS.items():
        groups = prune_groups(out, task)
        if "importance" in groups and "random" in groups:
            t = TOLERANCES[1]
            parts.append(f"{task}: {cell((prunable(metric, r, t) for _, r in groups['importance']), 2)} vs "
                         f"{cell((prunable(metric, r, t) for _, r in groups['random']), 2)}")
    return (f"fraction prunable within a {TOLERANCES[1] * 100:g}% / {TOLERANCES[1] * 100:g}-point drop, importance vs "
            "random: " + "; ".join(parts)) if parts else "–"


def claim_early(out):
    parts = []
    for task in TASKS:
        runs = dynamics(out, task)
        if runs:
            first = [next((f for _, f, rho in r if rho >= RHO_THRESHOLD), math.nan) for r in runs]
            parts.append(f"{task}: {cell(first, 2)}")
    return f"fraction of training at which rho ≥ {RHO_THRESHOLD}: " + "; ".join(parts) if parts else "–"


def claim_voita_specialised(out):
    return fill_voita(out, "grammar").split("\n\n")[0] if seed_dirs(out, "grammar") else "–"


CLAIMS = {"single_heads": claim_single_heads, "layer_one_head": claim_layer_one_head,
          "importance_vs_random": claim_importance_vs_random, "early": claim_early,
          "voita_specialised": claim_voita_specialised}


def main():
    if len(sys.argv) != 2:
        fail("usage: make_results.py OUT (run.sh's output folder, e.g. runs/pruning)")
    out = sys.argv[1]
    if not os.path.isdir(out):
        fail(f"{out} is not a folder: run experiments/pruning/run.sh first")
    if not any(seed_dirs(out, t) for t in TASKS):
        fail(f"{out} holds no finished analysis (OUT/<task>/seed<N>/heads.h5): run experiments/pruning/run.sh first")
    template = open(os.path.join(HERE, "results.template.md")).read()

    def replace(m):
        name, arg = m.group(1), m.group(2)
        if name.startswith("claim_"):
            return fill_claim(out, name[len("claim_"):])
        if name not in FILLERS:
            fail(f"unknown placeholder {m.group(0)} in results.template.md")
        if arg is not None and arg not in TASKS:
            fail(f"unknown task in {m.group(0)}")
        return FILLERS[name](out, arg)

    text = re.sub(r"\{\{(\w+)(?: (\w+))?\}\}", replace, template)
    target = os.path.join(HERE, "RESULTS.md")
    write_atomically(target, text)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
