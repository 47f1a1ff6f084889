"""experiments/pruning: the tables and paragraphs of results.template.md's {{NAME}} and
{{NAME TASK}} placeholders (FILLERS[NAME](data, TASK)), every number from data/."""
import math

import numpy as np

from common import cell, md_table, mean_std, number, seeds_list

from .analysis import (
    ORDER_TITLES, RELATIONS, RHO_THRESHOLD, ROLE_ORDER, SCORE_ORDERS, SPECIALISED, TASKS, TOLERANCE, TOLERANCE_LOW,
    at_half, drop, dynamics_rows, ft_name, head_roles, l0_points, l0_selected, order_prunable, prunable,
    random_arms, scratch_drops, spearman_runs, survival, survival_p, table1_counts, table2_rows
)


def table(header, rows):
    """A Markdown table, columns in the default alignment."""
    return md_table(header, rows, align="---")


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


def fill_survival(d, _):
    rows = []
    for task in d.tasks:
        runs = survival(d, task)
        if not runs:
            continue
        p, spec, rest = survival_p(runs)
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
