"""experiments/pruning: the tables and paragraphs of results.template.md's {{NAME}} and
{{NAME TASK}} placeholders (FILLERS[NAME](data, TASK)), every number from data/. Michel's tables
and the pruning curves here; L0 and Voita's in fillers_l0.py; the rules, the claims and "What
changed" in claims_text.py."""
import math

import numpy as np

from common import cell, mean_std, number, seeds_list
from verdicts import PAPER, PRACTICAL, last_quarter_gain, plateaued, share_text, steps_to_plateau

from .analysis import (
    EARLY, FIGURE5, ORDER_TITLES, RHO_THRESHOLD, SCORE_ORDERS, TASKS, at_half, drop, dynamics_rows, ft_name,
    noticeable_threshold, order_prunable, prunable, random_arms, spearman_runs
)
from .claims_text import (
    fill_claims_details, fill_claims_summary, fill_few_seeds, fill_figure5, fill_old_rules, fill_rules, fill_what_changed
)
from .beyond import fill_beyond
from .fillers_l0 import FILLERS_L0, not_run, table
from .michel import CLASSES, effect_unit, table1, table2


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
            ["wall time on 2 cores, estimated", f"{(base_seconds + job_seconds) / 2 / 60:.0f} min (the sums / 2, as run.sh "
             f"runs two one-thread jobs at a time; the measured time below is longer where one job was left to run "
             f"alone)"]]
    if p.get("run_sh_wall_seconds"):
        rows.append(["run.sh wall time, measured", f"{number(p['run_sh_wall_seconds']) / 60:.0f} min"])
    for i in range(1, 100):  # a regeneration in parts (collect.py --merge), every part at the commit above
        if f"part{i}_tasks" not in p:
            break
        wall = p[f"part{i}_run_sh_wall_seconds"]
        rows.append([f"part {i}: tasks; date, machine; run.sh wall time",
                     f"{p[f'part{i}_tasks']}; {p[f'part{i}_date']}, {p[f'part{i}_machine']}; "
                     + (f"{number(wall) / 60:.0f} min" if wall else "–")])
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


def fill_plateau(d, _):
    """Base models at a plateau: each seed's val curve (the pruning metric) over the last quarter of
    training gained less than the practical threshold (verdicts.plateaued)."""
    rows, far = [], []
    for task in d.tasks:
        metric = TASKS[task][1]
        accuracy = metric == "val_accuracy"
        threshold = PRACTICAL["accuracy" if accuracy else "relative_loss"]
        gains, needed = [], []
        for seed in d.seeds[task]:
            curve = [(int(r["step"]), number(r[metric])) for r in d.curves
                     if r["task"] == task and int(r["seed"]) == seed and r[metric] != ""]
            gains.append(last_quarter_gain(curve, higher_is_better=accuracy, relative=not accuracy) if curve else None)
            if curve and not accuracy and not plateaued(gains[-1], threshold=threshold):
                needed.append((steps_to_plateau(curve, threshold=threshold), curve[-1][0] if curve else 0))
        if needed:
            far.append(plateau_extrapolation(task, needed, threshold))
        shown = [g for g in gains if g is not None]
        scale, unit = (100, " points") if accuracy else (100, "%")
        rows.append([f"`{task}`", metric.replace("val_", ""),
                     ", ".join("–" if g is None else f"{g * scale:+.2f}" for g in gains) + unit,
                     f"{threshold * scale:g}" + (unit if threshold * scale != 1 or not accuracy else " point"),
                     f"{sum(plateaued(g, threshold=threshold) for g in gains)} of {len(gains)}"
                     + ("" if len(shown) == len(gains) else " (– : no evaluation at 3/4 of training)")])
    return table(["task", "val metric", "gain over the last quarter of training, per seed", "threshold",
                  "seeds at a plateau"], rows) + "".join("\n\n" + f for f in far)


def plateau_extrapolation(task, needed, threshold):
    """How far a loss task's seeds that missed the rule are from it: verdicts.steps_to_plateau per seed."""
    fits = [n for n, _ in needed if n]
    budget = max(b for _, b in needed)
    if not fits:
        return (f"`{task}`: a power law fitted to the val curves of the {len(needed)} seeds below the rule "
                f"(verdicts.steps_to_plateau) does not reach a last quarter gaining < {threshold:.0%} within 1e9 steps.")
    steps = sorted(s for s, _ in fits)
    alphas = sorted(a for _, a in fits)

    def span(lo, hi, fmt):
        return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + "-" + fmt.format(hi)

    seeds = f"{len(needed)} seed" + ("s" if len(needed) > 1 else "")
    return (f"`{task}`: a power law L(t) = a + b t^-alpha fitted to the val curves of the {seeds} below "
            f"the rule (verdicts.steps_to_plateau; alpha {span(alphas[0], alphas[-1], '{:.2f}')}"
            + (f", {len(needed) - len(fits)} fits out of reach" if len(fits) < len(needed) else "")
            + f") puts a last quarter gaining < {threshold:.0%} at {span(steps[0], steps[-1], '{:,}')} steps, "
            f"{span(steps[0] / budget, steps[-1] / budget, '{:.0f}')} times the {budget:,} trained. An extrapolation "
            f"over a curve shaped by its schedule too, so read only its order of magnitude: where it is far beyond the "
            f"budget, these base models are still learning and their verdicts are those of such models.")


def effect_scale(kind):
    """Effects as printed: accuracy points, or loss in % of the full model's."""
    return 100.0, ("points" if kind == "accuracy" else "%")


def fill_table1(d, task):
    if task not in d.tasks:
        return not_run(task)
    seeds = d.seeds[task]
    ts = [table1(d, task, s) for s in seeds]
    scale, u = effect_scale(ts[0].kind)
    worst = np.argmin if ts[0].kind == "accuracy" else np.argmax
    rows = []
    for layer in range(ts[0].effect.shape[0]):
        rows.append([layer, cell((float(np.median(t.effect[layer])) * scale for t in ts), 2),
                     cell((float(t.effect[layer][worst(t.effect[layer])]) * scale for t in ts), 2)] +
                    [", ".join(str(int((t.cls[layer] == c).sum())) for t in ts) for c in CLASSES])
    rows.append(["all", "", ""] + [", ".join(str(t.counts[c]) for t in ts) for c in CLASSES])
    paper = PAPER["michel_table1"]
    text = table(["layer", f"Δ {ts[0].kind}, median head ({u})", f"Δ, the head that matters most ({u})"] +
                 [f"{c}, per seed" for c in CLASSES], rows)
    return text + ("\n\nHeads with no practical change when removed, per seed: "
                   + "; ".join(share_text(t.counts["no practical change"], t.total) for t in ts)
                   + f". Michel et al.: {paper.total - paper.count} of {paper.total} unchanged, {paper.count} "
                   f"significant ({PAPER['michel_table1_better'].count} of them for the better), {paper.citation}. "
                   f"Δ is in {effect_unit(ts[0].kind)}.")


def fill_table2(d, task):
    if task not in d.tasks:
        return not_run(task)
    seeds = d.seeds[task]
    ts = [table2(d, task, s) for s in seeds]
    scale, u = effect_scale(ts[0].kind)
    rows = []
    for layer in range(ts[0].total):
        rows.append([layer, ", ".join(f"H{t.best[layer]}" for t in ts), cell((t.effect[layer] * scale for t in ts), 2),
                     ", ".join(t.cls[layer] for t in ts)])
    paper = PAPER["michel_table2"]
    return table(["layer", "best head, per seed", f"Δ {ts[0].kind}, layer reduced to it ({u})", "class, per seed"],
                 rows) + ("\n\nLayers with no practical change, per seed: "
                          + "; ".join(share_text(t.counts["no practical change"], t.total) for t in ts)
                          + f". Michel et al.: {paper.total - paper.count} of {paper.total} layers without a "
                          f"significant change, {paper.citation}.")


def tol_label(metric):
    return f"{noticeable_threshold(metric) * 100:g}{' points' if metric == 'val_accuracy' else '%'}"


def fill_prune(d, task):
    """Score orders without fine-tuning, against the unpruned model (round 0)."""
    if task not in d.tasks:
        return not_run(task)
    metric = TASKS[task][1]
    digits = 3 if metric == "val_bpb" else 4
    seeds = d.seeds[task]
    rows = []
    for order in SCORE_ORDERS:
        vals = [order_prunable(d, task, s, order) for s in seeds]
        if all(math.isnan(v) for v in vals):
            continue
        half = []
        for s in seeds:
            runs = random_arms(d, task, s) if order == "random" else [d.arm(task, s, order)]
            half.append(float(np.mean([at_half(metric, r) for r in runs if r])) if any(runs) else math.nan)
        rows.append([ORDER_TITLES[order], cell(vals, 2), seeds_list(vals, 2), cell(half, digits)])
    unpruned = [number(d.arm(task, s, "importance")[0][metric]) for s in seeds if d.arm(task, s, "importance")]
    name = metric.replace("val_", "")
    return (f"Unpruned {name}: {cell(unpruned, digits)}.\n\n" +
            table(["order (no fine-tuning)", f"fraction prunable, drop ≤ {tol_label(metric)}", "per seed",
                   f"{name} at half the heads pruned"], rows))


def fill_finetune(d, task):
    """Re-scoring only, fine-tuning only, both, random + fine-tuning; the fine-tuned arms against
    the control (the same fine-tuning with nothing pruned) at the same round."""
    if task not in d.tasks:
        return not_run(task)
    metric = TASKS[task][1]
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
    text = table(["arm", f"fraction prunable (drop ≤ {tol_label(metric)}) vs the unpruned model",
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


def fill_orders(d, _):
    """Michel's question: which order prunes best, with the paired difference per seed."""
    rows = []
    for task in d.tasks:
        seeds = d.seeds[task]
        vals = {o: [order_prunable(d, task, s, o) for s in seeds] for o in ("importance", "importance_raw", "ablation", "random")}
        diff = [a - i for a, i in zip(vals["ablation"], vals["importance"])]
        diff_raw = [r - i for r, i in zip(vals["importance_raw"], vals["importance"])]
        rows.append([task] + [cell(vals[o], 2) for o in ("importance", "importance_raw", "ablation", "random")] +
                    [seeds_list(diff, 2), seeds_list(diff_raw, 2)])
    return table(["task", "importance (l2 per layer)", "importance (raw)", "ablation score", "random",
                  "ablation − importance, per seed", "raw − per-layer importance, per seed"], rows)


def fill_dynamics(d, _):
    lo, hi = FIGURE5["retained"]
    rows = []
    for task in d.tasks:
        metric = TASKS[task][1]
        digits = 3 if metric == "val_bpb" else 4
        plain, keep_lo, keep_hi = dynamics_rows(d, task), dynamics_rows(d, task, lo), dynamics_rows(d, task, hi)
        for f, (imp, rnd, base) in sorted(plain.items()):
            rows.append([task, f"{f:.2f}", cell(base.values(), digits), cell(imp.values(), 2), cell(rnd.values(), 2),
                         cell(keep_hi[f][0].values(), 2), cell(keep_lo[f][0].values(), 2),
                         cell(keep_lo[f][1].values(), 2)])
    if not rows:
        return "*(no checkpoints along training were pruned)*"
    return table(["task", "fraction of training", "unpruned metric", "prunable by importance, no noticeable drop",
                  "by random order", f"importance, keeping {hi:.0%} (Figure 5)", f"importance, keeping {lo:.0%}",
                  f"random, keeping {lo:.0%}"], rows)


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


def fill_timings(d, _):
    kinds = {}
    for r in d.timings:
        kinds.setdefault((r["task"], r["job"]), []).append(number(r["seconds"]))
    rows = [[t, j, len(v), f"{sum(v) / len(v):.1f}", f"{sum(v):.0f}"] for (t, j), v in sorted(kinds.items())]
    return table(["task", "job", "jobs", "mean s", "total s"], rows)


def fill_prune_figures(d, _):
    """The pruning figure of each task in data/ (figures.py draws only those)."""
    return "\n".join(f"![{TASKS[t][0]}](figures/{t}_prune.png)" for t in d.tasks)


FILLERS = {"prune_figures": fill_prune_figures, "provenance": fill_provenance, "setup": fill_setup, "plateau": fill_plateau, "table1": fill_table1, "table2": fill_table2,
           "prune": fill_prune, "finetune": fill_finetune, "orders": fill_orders, "dynamics": fill_dynamics,
           "spearman": fill_spearman, "timings": fill_timings, "rules": fill_rules,
           "claims_summary": fill_claims_summary, "claims_details": fill_claims_details,
           "what_changed": fill_what_changed, "early": lambda d, _: f"{EARLY:.0%}", "few_seeds": fill_few_seeds,
           "figure5": fill_figure5, "old_rules": fill_old_rules, "beyond": fill_beyond, **FILLERS_L0}
