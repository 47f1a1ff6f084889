"""experiments/pruning, beyond single heads (issue 32): data/beyond/ (collect_beyond.py describes
it) into RESULTS.md's section and figures/beyond_<task>.png, recovery_<task>.png. The rules are
the rest of the experiment's: the fraction prunable before the first noticeable drop
(analysis.prunable, NOTICEABLE), the seed-level claims of claims.py (fraction_claim: a paired t-test
over seeds at LEVEL_SEEDS with the PRACTICAL prune-fraction threshold), Spearman's rho for orders.

  integrated gradients against Michel's importance and the ablation score: rank correlations per
    seed, and the fraction prunable by each order (random order: the mean of its seeds' orders);
  structured units: FFN hidden units, whole attention layers and whole FFN blocks, each by its
    scores against random order;
  recovery: pruning by importance with fine-tuning or with distillation after every round, each
    against the control at the same round (the unpruned model trained the same steps)."""
import math
import os

import numpy as np

import common
from common import md_table, number
from stats import spearman

from .analysis import TASKS, prunable
from .claims import fraction_claim, mean_sd, per_seed, seed_rule, seed_word

FOLDER = "beyond"  # data/beyond/
IG = "integrated_gradients"
HEAD_ORDERS = [("importance", "importance (Michel's I_h)"), (IG, "integrated gradients"), ("ablation", "ablation")]
# unit -> (title, arm suffix, score orders)
UNITS = {
    "heads": ("attention heads", "", ["importance", IG, "ablation"]),
    "ffn": ("FFN hidden units", "_ffn", ["importance", "magnitude", IG]),
    "attention_layers": ("whole attention layers", "_attention_layers", ["importance", "ablation", IG]),
    "ffn_blocks": ("whole FFN blocks", "_ffn_blocks", ["importance", "ablation", IG]),
}


class BeyondData:
    def __init__(self, folder):
        self.folder = folder
        self.heads = self.read("heads.csv", ("task", "seed", "layer", "head"))
        self.analyses = self.read("analyses.csv", ("task", "seed"))
        self.prune = self.read("prune.csv", ("task", "seed", "arm", "round"))
        self.provenance = {r["key"]: r["value"] for r in self.read("provenance.csv", ("key", "value"))}
        self.tasks = [t for t in TASKS if any(r["task"] == t for r in self.heads)]
        self.seeds = {t: sorted({int(r["seed"]) for r in self.heads if r["task"] == t}) for t in self.tasks}
        self._arms = {}
        for r in self.prune:
            self._arms.setdefault((r["task"], int(r["seed"]), r["arm"]), []).append(r)

    def read(self, name, required=()):
        return common.read_csv(os.path.join(self.folder, name), "run experiments/pruning/run_beyond.sh", required)

    def arm(self, task, seed, arm):
        rows = self._arms.get((task, seed, arm))
        return sorted(rows, key=lambda r: int(r["round"])) if rows else None

    def random_arms(self, task, seed, suffix):
        prefix = f"random{suffix}_seed"
        return [self.arm(task, seed, a) for (t, s, a) in self._arms
                if t == task and s == seed and a.startswith(prefix) and a[len(prefix):].isdigit()]

    def head_scores(self, task, seed):
        """{score: [heads]} in heads.csv's order: importance, -IG (larger = the head helps more)
        and the ablation loss change, each larger for a head that matters more."""
        rows = [r for r in self.heads if r["task"] == task and int(r["seed"]) == seed]
        return {"importance": [number(r["importance"]) for r in rows],
                IG: [-number(r[IG]) for r in rows],
                "ablation": [number(r["ablation_loss_delta"]) for r in rows]}


def load(folder):
    """data/beyond/ of data/ FOLDER, or None before run_beyond.sh has run."""
    path = os.path.join(folder, FOLDER)
    return BeyondData(path) if os.path.exists(os.path.join(path, "provenance.csv")) else None


def order_prunable(b, task, seed, unit, order):
    """Fraction prunable of one unit's order (no fine-tuning); random: the mean over its seeds."""
    metric, suffix = TASKS[task][1], UNITS[unit][1]
    if order == "random":
        runs = [r for r in b.random_arms(task, seed, suffix) if r]
        return float(np.mean([prunable(metric, r) for r in runs])) if runs else math.nan
    rows = b.arm(task, seed, order + suffix)
    return prunable(metric, rows) if rows else math.nan


def recovery_prunable(b, task, seed, unit, recover):
    """Fraction prunable by importance with FINETUNE steps of `recover` (finetune or distill) after
    every round, against the control (nothing pruned, the same steps) at the same round."""
    suffix = UNITS[unit][1]
    name = next((a for (t, s, a) in b._arms if t == task and s == seed and a.startswith(f"importance{suffix}_ft")
                 and a.endswith("_distill") == (recover == "distill") and a[len(f"importance{suffix}_ft"):].split("_")[0]
                 .isdigit()), None)
    control = next((a for (t, s, a) in b._arms if t == task and s == seed and a.startswith(f"none{suffix}_ft")
                    and a[len(f"none{suffix}_ft"):].isdigit()), None)
    rows, ref = (b.arm(task, seed, name) if name else None), (b.arm(task, seed, control) if control else None)
    return prunable(TASKS[task][1], rows, control=ref) if rows and ref else math.nan


def by_seed(b, task, f):
    return {s: f(s) for s in b.seeds[task]}


# ---- the section ------------------------------------------------------------------------------------


def fill_correlations(b):
    rows = []
    pairs = [(IG, "importance"), (IG, "ablation"), ("importance", "ablation")]
    for task in b.tasks:
        rho = {p: by_seed(b, task, lambda s, p=p: spearman(b.head_scores(task, s)[p[0]], b.head_scores(task, s)[p[1]]))
               for p in pairs}
        rows.append([TASKS[task][0]] + [f"{mean_sd(rho[p])} ({per_seed(rho[p])})" for p in pairs]
                    + [completeness(b, task, ""), completeness(b, task, "ffn_")])
    return md_table(["task", "rho(IG, I_h)", "rho(IG, ablation)", "rho(I_h, ablation)",
                     "IG completeness error, heads (largest over seeds, relative to L(g) − L(0))",
                     "the same, FFN units"], rows, align="---")


def completeness(b, task, prefix):
    """The largest relative distance of a seed's attributions (heads: prefix "", FFN units: "ffn_")
    from L(g) − L(0); – where the analysis has none."""
    errors = [number(r[f"{prefix}ig_completeness_error"]) / max(abs(number(r[f"{prefix}ig_loss_change"])), 1e-300)
              for r in b.analyses if r["task"] == task and r.get(f"{prefix}ig_completeness_error", "") != ""]
    return f"{max(errors):.1e}" if errors else "–"


def fill_orders(b, unit):
    """One row per task: each order's fraction prunable (mean ± sd over seeds) and each against
    random, and, for heads, IG against importance and against ablation."""
    title, _, orders = UNITS[unit]
    rows = []
    for task in b.tasks:
        f = {o: by_seed(b, task, lambda s, o=o: order_prunable(b, task, s, unit, o)) for o in orders + ["random"]}
        cells = [TASKS[task][0]] + [mean_sd(f[o]) for o in orders + ["random"]]
        for o in orders:
            v = fraction_claim(f["random"], f[o], direction=+1)
            cells.append(seed_word(v, f"{o} prunes more", "random prunes more"))
        if unit == "heads":
            for other in ("importance", "ablation"):
                v = fraction_claim(f[other], f[IG])
                cells.append(f"{seed_word(v, 'IG prunes more', f'{other} prunes more')} "
                             f"({per_seed({s: f[IG][s] - f[other][s] for s in f[IG]})})")
        rows.append(cells)
    header = ["task"] + [o.replace("_", " ") for o in orders] + ["random"] + [f"{o.replace('_', ' ')} vs random"
                                                                           for o in orders]
    if unit == "heads":
        header += ["IG vs importance (IG − importance per seed)", "IG vs ablation (IG − ablation per seed)"]
    return (f"**{title[0].upper() + title[1:]}**: fraction prunable without a noticeable drop, by order (mean ± sd "
            f"over seeds).\n\n" + md_table(header, rows, align="---"))


def fill_recovery(b):
    rows = []
    for unit in ("heads", "ffn"):
        for task in b.tasks:
            ft = by_seed(b, task, lambda s: recovery_prunable(b, task, s, unit, "finetune"))
            kd = by_seed(b, task, lambda s: recovery_prunable(b, task, s, unit, "distill"))
            plain = by_seed(b, task, lambda s: order_prunable(b, task, s, unit, "importance"))
            v = fraction_claim(ft, kd)
            rows.append([UNITS[unit][0], TASKS[task][0], mean_sd(plain), mean_sd(ft), mean_sd(kd),
                         f"{seed_word(v, 'distillation prunes more', 'fine-tuning prunes more')} "
                         f"({per_seed({s: kd[s] - ft[s] for s in kd})})"])
    return md_table(["unit", "task", "no recovery", "fine-tuning (vs control)", "distillation (vs control)",
                     "distillation vs fine-tuning (distill − fine-tune per seed)"], rows, align="---")


def fill_beyond(d, _arg=None):
    b = load(d.folder)
    if b is None:
        return "*(not run yet: `experiments/pruning/run_beyond.sh` writes data/beyond/)*"
    head = provenance_line(b.provenance)
    rule = seed_rule(f"{common_threshold_words()} (fraction prunable without a noticeable drop)")
    parts = [head, f"Verdicts: {rule}.",
             "**Integrated gradients, Michel's importance and the ablation score.** Spearman's rho between the "
             "three head scores (each larger for a head that matters more: I_h, −IG, the loss change with the "
             "head off), mean ± sd over seeds (per seed), and how far IG's attributions add up from "
             "L(g) − L(0) (completeness):", fill_correlations(b)]
    parts += [fill_orders(b, unit) for unit in UNITS]
    parts += ["**Recovery by distillation.** Heads (FFN units) pruned by importance with the same fine-tuning "
              "steps after every round on the hard targets, or distilled from the unpruned model (train/step.h's "
              "Distillation: (1 − alpha) hard + alpha soft at temperature tau, alpha 0.5, tau 2); each round "
              "judged against the control, the unpruned model trained as many steps:", fill_recovery(b)]
    return "\n\n".join(parts)


def provenance_line(p):
    """Where data/beyond/ came from: the commit, machine and wall time, per part when run in parts."""
    parts = [{k: p.get(f"part{i}_{k}", "") for k in ("tasks", "started_utc", "wall_seconds", "max_load_1min")}
             for i in range(1, 100) if f"part{i}_tasks" in p]
    head = (f"From commit `{p['commit']}`" + (" (uncommitted changes)" if p["uncommitted_changes"] == "yes" else "")
            + f", {p['machine']}; run_beyond.sh took {minutes(p['wall_seconds'])}")
    if not parts:
        return head + f", started {p['started_utc']} (highest 1-minute load {p['max_load_1min'] or '–'})."
    return head + f" in {len(parts)} parts (" + "; ".join(
        f"{q['tasks']}: started {q['started_utc']}, {minutes(q['wall_seconds'])}, highest 1-minute load "
        f"{q['max_load_1min'] or '–'}" for q in parts) + ")."


def minutes(seconds):
    wall = number(seconds)
    return "–" if math.isnan(wall) else f"{wall / 60:.0f} min"


def common_threshold_words():
    from verdicts import PRACTICAL
    return f"{PRACTICAL['prune_fraction']:g} of the units"


# ---- figures ----------------------------------------------------------------------------------------


def figures(d, folder):
    """figures/beyond_<task>.png (curves by unit type) and recovery_<task>.png; nothing without
    data/beyond/."""
    b = load(d.folder)
    if b is None:
        return
    plt = common.pyplot()

    def mean_curve(runs, metric):
        n = min(len(r) for r in runs)
        x = np.array([number(runs[0][i]["fraction_pruned"]) for i in range(n)])
        y = np.array([[number(r[i][metric]) for i in range(n)] for r in runs])
        return x, y.mean(axis=0), y.min(axis=0), y.max(axis=0)

    def band(ax, runs, metric, label, x_of=None, **style):
        """Mean and range over runs; x_of: runs whose fractions the x axis takes (a control, which
        prunes nothing, is drawn at the pruned arm's rounds)."""
        runs = [r for r in runs if r]
        if not runs:
            return
        x, m, lo, hi = mean_curve(runs, metric)
        if x_of:
            x_ref = mean_curve([r for r in x_of if r], "fraction_pruned")[1]
            n = min(len(x), len(x_ref))
            x, m, lo, hi = x_ref[:n], m[:n], lo[:n], hi[:n]
        line, = ax.plot(x, m, marker=".", label=label, **style)
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)

    for task in b.tasks:
        title, metric = TASKS[task]
        seeds = b.seeds[task]
        of_seeds = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}: mean, band = range"
        fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharey=True)
        for ax, (unit, (words, suffix, orders)) in zip(axes.ravel(), UNITS.items()):
            for order in orders:
                band(ax, [b.arm(task, s, order + suffix) for s in seeds], metric, order.replace("_", " "))
            band(ax, sum((b.random_arms(task, s, suffix) for s in seeds), []), metric, "random", color="0.5",
                 linestyle=":")
            first = [b.arm(task, s, orders[0] + suffix) for s in seeds]
            base = [number(r[0][metric]) for r in first if r]
            if base:
                ax.axhline(float(np.mean(base)), color="0.3", linestyle="--", linewidth=1, label="unpruned")
            ax.set_title(f"{words[0].upper() + words[1:]} pruned by each order", fontsize=10)
            ax.set_xlabel(f"fraction of {words} pruned")
            ax.set_ylabel(metric)
            ax.legend(fontsize=7)
        fig.suptitle(f"{title}: {metric.replace('_', ' ')} as units are pruned ({of_seeds})", fontsize=11)
        common.save_figure(fig, os.path.join(folder, f"beyond_{task}.png"), 150, tight_layout=True,
                           strip_software=True)
        plt.close(fig)

        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, unit in zip(axes, ("heads", "ffn")):
            words, suffix, _ = UNITS[unit]
            def runs_of(prefix, distill):
                out = []
                for s in seeds:
                    name = next((a for (t, ss, a) in b._arms if t == task and ss == s and a.startswith(prefix)
                                 and a.endswith("_distill") == distill), None)
                    out.append(b.arm(task, s, name) if name else None)
                return out
            tuned = runs_of(f"importance{suffix}_ft", False)
            band(ax, tuned, metric, "fine-tuning")
            band(ax, runs_of(f"importance{suffix}_ft", True), metric, "distillation")
            band(ax, runs_of(f"none{suffix}_ft", False), metric, "control (nothing pruned, same steps)", x_of=tuned,
                 color="0.2", linestyle="--")
            band(ax, [b.arm(task, s, "importance" + suffix) for s in seeds], metric, "no recovery", color="0.6",
                 linestyle=":")
            ax.set_title(f"{words[0].upper() + words[1:]} pruned by importance", fontsize=10)
            ax.set_xlabel(f"fraction of {words} pruned (control: the same rounds)")
            ax.set_ylabel(metric)
            ax.legend(fontsize=7)
        fig.suptitle(f"{title}: recovery after every round, {metric.replace('_', ' ')} ({of_seeds})", fontsize=11)
        common.save_figure(fig, os.path.join(folder, f"recovery_{task}.png"), 150, tight_layout=True,
                           strip_software=True)
        plt.close(fig)
