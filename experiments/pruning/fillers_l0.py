"""experiments/pruning: the placeholders of results.template.md about L0 and Voita et al. (the L0
runs on val and test, head roles, their survival under L0, the layouts retrained from scratch)."""
import math

import numpy as np

from common import cell, md_table, number, seeds_list

from .analysis import (
    RELATIONS, ROLE_ORDER, SPECIALISED, TASKS, TEST_KEY, head_roles, l0_points, l0_selected, noticeable_threshold,
    scratch_drops, scratch_pair, survival, survival_claim, unit
)


def table(header, rows):
    """A Markdown table, columns in the default alignment (fillers.py's tables too)."""
    return md_table(header, rows, align="---")


def not_run(task):
    """The cell of a task data/ does not hold (fillers.py's too)."""
    return f"*(no data for {task} in data/)*"


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
    chosen = [c for c in (l0_selected(d, task, s) for s in seeds) if c]
    u = unit(metric)
    text = table(["lambda", "fraction pruned", f"val drop vs control ({u})", f"test drop vs control ({u})"], rows)
    text += ("\n\nChosen on val (most heads pruned with no noticeable val drop against the control: at most "
             f"{noticeable_threshold(metric) * 100:g} {u}), reported on test: lambda per seed "
             f"{', '.join(f'{c[0]:g}' for c in chosen)}; fraction pruned {seeds_list([c[1] for c in chosen], 2)}; "
             f"test drop {seeds_list([c[4] * 100 for c in chosen], 2)} {u}.")
    return text


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
        v, (spec, rest) = survival_claim(runs)
        n_spec = sum(int(np.isin(r, SPECIALISED).sum()) for r, _, _ in runs)
        rows.append([task, len(runs), n_spec, "–" if math.isnan(spec) else f"{spec:.2f}",
                     "–" if math.isnan(rest) else f"{rest:.2f}", "–" if math.isnan(v.p) else f"{v.p:.4f}",
                     v.outcome if n_spec else "–"])
    return table(["task", "seeds", "specialised heads (all seeds)", "share kept by L0 (specialised)",
                  "share kept (the rest)", "permutation p, within layers (specialised kept more)", "verdict"], rows) \
        if rows else "*(no roles or no L0 runs)*"


def fill_scratch(d, _):
    rows, other = [], []
    for task in d.tasks:
        metric = TASKS[task][1]
        key = TEST_KEY[metric]
        digits = 3 if metric == "val_bpb" else 4
        pruned, scratch, control, layouts, steps = [], [], [], [], set()
        for s in d.seeds[task]:
            pair, sc = scratch_pair(d, task, s), d.eval(task, s, "scratch_l0", "test")
            if not pair or not sc:
                continue
            point, now = pair
            layouts.append(" ".join(str(x) for x in point[2]) + ("" if now else " †"))
            if not now:
                other.append(f"{task} seed {s} (lambda {point[0]:g})")
            t = d.eval(task, s, point[6], "test")
            pruned.append(number(t[key]) if t else math.nan)
            scratch.append(number(sc[key]))
            control.append(number(d.eval(task, s, "none_l0", "test")[key]))
            scratch_steps = next((r["steps"] for r in d.scratch if r["task"] == task and int(r["seed"]) == s), "")
            steps.add(f"{d.setup_of(task, s)['steps']} + {point[5]['finetune_steps']} vs {scratch_steps}")
        if not scratch:
            continue
        drops = scratch_drops(d, task)
        rows.append([task, "; ".join(layouts), "; ".join(sorted(steps)), cell(control, digits), cell(pruned, digits),
                     cell(scratch, digits), seeds_list([drops[s] * 100 for s in sorted(drops)], 2) + " " + unit(metric)])
    if not rows:
        return "*(no layouts retrained)*"
    text = table(["task", "heads per layer kept (per seed)", "training steps: L0-pruned (base + L0) vs from scratch",
                  "unpruned + fine-tuning (control), test", "L0-pruned, test", "same layout from scratch, test",
                  "drop from scratch against L0-pruned, per seed (> 0: scratch worse)"], rows)
    if other:
        text += ("\n\n† The layout retrained from scratch is not the one the lambda rule above chooses on val "
                 "now (it was chosen by the rule of the run that trained it); the from-scratch model is compared with "
                 "the L0 model of its own layout: " + ", ".join(other) + ".")
    return text


FILLERS_L0 = {"l0": fill_l0, "roles": fill_roles, "baselines": lambda d, _: baselines(d), "survival": fill_survival,
              "scratch": fill_scratch}
