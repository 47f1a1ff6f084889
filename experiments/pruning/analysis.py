"""experiments/pruning: the rules that turn the data into numbers and words (the constants, fixed
before the final run) and what the tables and verdicts are computed from: pruning curves and the
fraction prunable, the L0 lambda chosen on val, the per-head and per-layer tests, the dynamics,
Voita's head roles and their survival under L0, the layouts retrained from scratch."""
import math
import re

import numpy as np

from common import number
from stats import permutation_p, significant, spearman

# task -> (title, the prune metric: a column of prune.csv)
TASKS = {
    "k_relation": ("k-relation retrieval", "val_accuracy"),
    "induction": ("induction", "val_accuracy"),
    "grammar": ("synthetic grammar", "val_loss"),
    "text": ("real text (KJV bytes)", "val_bpb"),
    "classify": ("classification (encoder)", "val_accuracy"),
}
ALPHA = 0.01           # family-wise level of the Holm-corrected per-head and per-layer tests
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


# ---- Michel: single heads, layers reduced to one head, score orders, dynamics ------------------------


def table1_counts(d, task, seed):
    h, ex = d.head_table(task, seed), d.examples(task, seed)
    L, H = h["gate"].shape
    diffs = ex["ablation_loss"].reshape(L * H, -1) - ex["loss"][None, :]
    worse, better = significant(diffs, ALPHA)
    return h, worse.reshape(L, H), better.reshape(L, H)


def table2_rows(d, task):
    """Per seed: per layer (best head, loss delta, accuracy delta, worse, better), Holm over layers."""
    result = []
    for seed in d.seeds[task]:
        h, ex = d.head_table(task, seed), d.examples(task, seed)
        delta, acc = h["layer_only_loss_delta"], h["layer_only_accuracy_delta"]
        best = [int(np.nanargmin(delta[layer])) for layer in range(delta.shape[0])]
        diffs = np.stack([ex["layer_only_loss"][layer, b] - ex["loss"] for layer, b in enumerate(best)])
        worse, better = significant(diffs, ALPHA)
        result.append([(b, float(delta[layer, b]), float(acc[layer, b]), bool(worse[layer]), bool(better[layer]))
                       for layer, b in enumerate(best)])
    return result


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


# ---- Voita: head roles, their survival under L0; the layouts retrained from scratch --------------------


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


def survival_p(runs):
    """One-sided permutation p that specialised heads (SPECIALISED roles) survive L0 more often than
    the rest, roles permuted within each model; and the two observed survival rates."""
    return permutation_p(runs, SPECIALISED, PERMUTATIONS)


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
