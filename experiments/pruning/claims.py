"""experiments/pruning: {{claim_NAME}} (what the data say against each source's claim) and
{{verdict_NAME}} (agrees or not, by the rules in analysis.py) of results.template.md."""
import math

from common import cell, seeds_list

from .analysis import (
    ALPHA, TASKS, TOLERANCE, early_verdict, finetune_gain, ft_name, l0_selected, order_prunable, orders_verdict,
    prunable, scratch_drops, survival, survival_p, table1_counts, table2_rows
)


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
            p, spec, rest = survival_p(runs)
            parts.append(f"{task}: kept {spec:.2f} vs {rest:.2f}, p = {p:.3f}" if not math.isnan(p)
                         else f"{task}: no specialised heads")
    return "share of heads kept by L0, specialised vs the rest (permutation p): " + "; ".join(parts) if parts else "–"


def verdict_voita(d):
    sig = total = 0
    for task in d.tasks:
        runs = survival(d, task)
        if runs:
            p = survival_p(runs)[0]
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
