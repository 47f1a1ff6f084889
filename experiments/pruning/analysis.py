"""experiments/pruning: the rules that turn the data into numbers (the constants, fixed before the
final run, and the shared verdict rules' thresholds of experiments/verdicts.py) and what the tables
and verdicts are computed from: pruning curves and the fraction prunable without a noticeable drop,
the L0 lambda chosen on val, the score orders per seed, the dynamics (Michel's Figure 5 measure),
Voita's head roles and their survival under L0, the layouts retrained from scratch. Michel's Tables
1 and 2 are michel.py's."""
import math
import re

import numpy as np

from common import number
from stats import spearman
from verdicts import NOTICEABLE, PAPER_NUMBERS, PERMUTATIONS, PRACTICAL, noticeable, stratified_permutation_claim

# task -> (title, the prune metric: a column of prune.csv)
TASKS = {
    "k_relation": ("k-relation retrieval", "val_accuracy"),
    "induction": ("induction", "val_accuracy"),
    "grammar": ("synthetic grammar", "val_loss"),
    "text": ("real text (KJV bytes)", "val_bpb"),
    "classify": ("classification (encoder)", "val_accuracy"),
}
TEST_KEY = {"val_loss": "loss", "val_accuracy": "accuracy", "val_bpb": "bpb"}  # evals.csv's column of a metric
LEVEL_SURVIVAL = 0.01  # level of the one-sided permutation test of Voita's specialised heads (as before issue 29)
RHO_THRESHOLD = 0.9
FIGURE5 = PAPER_NUMBERS["michel_figure5"]
EARLY = FIGURE5["epoch"] / FIGURE5["epochs"]  # Michel's Figure 5 checkpoint, as a fraction of training
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


def noticeable_threshold(metric):
    """NOTICEABLE's threshold for a prune metric: accuracy points, or relative loss / bits per byte."""
    return NOTICEABLE["accuracy"] if metric == "val_accuracy" else NOTICEABLE["relative_loss"]


def practical_threshold(metric):
    """PRACTICAL's threshold for a difference of a prune metric (drop() units)."""
    return PRACTICAL["accuracy"] if metric == "val_accuracy" else PRACTICAL["relative_loss"]


def unit(metric):
    return "points" if metric == "val_accuracy" else "%"


# ---- pruning curves ------------------------------------------------------------------------------


def drop(metric, base, value):
    """Loss of quality: accuracy in points (fraction), loss and bits/byte relative."""
    return base - value if metric == "val_accuracy" else (value - base) / base


def relative_drop(metric, base, value):
    """Loss of quality relative to the base, accuracy too (Michel's Figure 5: "85-90% of BLEU")."""
    return (base - value) / base if metric == "val_accuracy" else (value - base) / base


def prunable(metric, rows, control=None, worse=None):
    """The largest fraction pruned before the first round whose drop is noticeable (NOTICEABLE;
    Michel's "without noticeable impact"), against round 0, or against the control's metric at
    the same round (fine-tuned arms). worse(base, value) -> bool replaces the rule (Figure 5)."""
    if worse is None:
        worse = lambda b, v: noticeable(drop(metric, b, v), threshold=noticeable_threshold(metric))  # noqa: E731
    best = 0.0
    for i, r in enumerate(rows[1:], start=1):
        base = number((control[i] if control else rows[0])[metric])
        if worse(base, number(r[metric])):
            break
        best = number(r["fraction_pruned"])
    return best


def retained_prunable(metric, rows, retained):
    """Michel's Figure 5 measure: the fraction pruned before the metric first falls below
    `retained` of the unpruned (relative_drop > 1 - retained)."""
    return prunable(metric, rows, worse=lambda b, v: relative_drop(metric, b, v) > 1 - retained + 1e-12)


def at_half(metric, rows):
    xs = [number(r["fraction_pruned"]) for r in rows]
    ys = [number(r[metric]) for r in rows]
    return float(np.interp(0.5, xs, ys)) if xs[-1] >= 0.5 else math.nan


def random_arms(d, task, seed, step=None, finetuned=False):
    pattern = r"random_ft\d+_seed\d+" if finetuned else r"random_seed\d+"
    return [d.arm(task, seed, a, step) for a in d.arms(task, seed, step) if re.fullmatch(pattern, a)]


def order_prunable(d, task, seed, order, step=None):
    """Fraction prunable of a score order without fine-tuning; random: mean over its seeds."""
    metric = TASKS[task][1]
    if order == "random":
        runs = random_arms(d, task, seed, step)
        return float(np.mean([prunable(metric, r) for r in runs])) if runs else math.nan
    rows = d.arm(task, seed, order, step)
    return prunable(metric, rows) if rows else math.nan


def by_seed(d, task, f):
    """{seed: f(seed)} over the task's seeds."""
    return {s: f(s) for s in d.seeds[task]}


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
    test_key = TEST_KEY[metric]
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
    """The lambda chosen on val: most heads pruned with no noticeable val drop against the control
    (NOTICEABLE, as prunable()); else the smallest val drop. None without L0 runs."""
    points = l0_points(d, task, seed)
    if not points:
        return None
    threshold = noticeable_threshold(TASKS[task][1])
    ok = [p for p in points if not noticeable(p[3], threshold=threshold)]
    return max(ok, key=lambda p: (p[1], -p[0])) if ok else min(points, key=lambda p: p[3])


# ---- Michel Section 4 and 6: score orders per seed, dynamics ------------------------------------------


def orders_by_seed(d, task, orders=("importance", "importance_raw", "ablation", "random")):
    """{order: {seed: fraction prunable}} without fine-tuning."""
    return {o: by_seed(d, task, lambda s, o=o: order_prunable(d, task, s, o)) for o in orders}


def dynamics_rows(d, task, retained=None):
    """{fraction of training: ({seed: importance prunable}, {seed: random}, {seed: unpruned metric})};
    prunable without a noticeable drop, or (retained: a share, Figure 5) keeping that share of the
    checkpoint's own unpruned metric."""
    metric = TASKS[task][1]

    def fraction(rows):
        return prunable(metric, rows) if retained is None else retained_prunable(metric, rows, retained)
    out = {}
    for s in d.seeds[task]:
        final = d.final_step[(task, s)]
        for step in d.checkpoint_steps(task, s):
            imp = d.arm(task, s, "importance", step)
            rnd = [r for r in random_arms(d, task, s, step) if r]
            if not imp or not rnd:
                continue
            slot = out.setdefault(round(step / final, 3), ({}, {}, {}))
            slot[0][s] = fraction(imp)
            slot[1][s] = float(np.mean([fraction(r) for r in rnd]))
            slot[2][s] = number(imp[0][metric])
    return out


def vacuous_seeds(d, task, fraction, retained):
    """Seeds whose checkpoint at `fraction` of training has nothing for pruning to lose: the
    importance order and every random order prune to the end of their curves keeping `retained` of
    the checkpoint's own metric (a model at chance). Michel's Figure 5 measure is trivially at its
    maximum there, so such a seed says nothing about when important heads are determined."""
    metric = TASKS[task][1]
    out = set()
    for s in d.seeds[task]:
        final = d.final_step[(task, s)]
        for step in d.checkpoint_steps(task, s):
            if round(step / final, 3) != fraction:
                continue
            arms = [d.arm(task, s, "importance", step)] + random_arms(d, task, s, step)
            if all(a and retained_prunable(metric, a, retained) >= number(a[-1]["fraction_pruned"]) for a in arms):
                out.add(s)
    return out


def early_fraction(d, task):
    """The checkpoint fraction of training nearest EARLY (Michel's epoch 10 of 40), or None."""
    rows = dynamics_rows(d, task)
    early = [f for f in rows if f < 1.0]
    return min(early, key=lambda f: (abs(f - EARLY), f)) if early else None


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


def finetuned_prunable(d, task, seed):
    """Fraction prunable with fine-tuning + re-scoring every round, against the control at the same
    round (NaN without the arms)."""
    metric = TASKS[task][1]
    name, control = ft_name(d, task, seed, "importance_FT_recompute"), d.arm(task, seed, ft_name(d, task, seed, "none_FT") or "")
    rows = d.arm(task, seed, name) if name else None
    return prunable(metric, rows, control=control) if rows and control else math.nan


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
    """Per seed at the val-chosen lambda: (roles [N], kept [N] bool, layer [N]) of the L0 model."""
    out = []
    for s in d.seeds[task]:
        roles, chosen = head_roles(d, task, s), l0_selected(d, task, s)
        if roles is None or chosen is None:
            continue
        gone = {tuple(int(x) for x in p.split(":")) for p in chosen[5]["pruned_heads"].split()}
        L, H = roles.shape
        kept = np.array([(layer, head) not in gone for layer in range(L) for head in range(H)])
        out.append((roles.ravel(), kept, np.repeat(np.arange(L), H)))
    return out


_survival_cache = {}


def survival_claim(runs):
    """Voita: specialised heads (SPECIALISED roles) are kept by L0 more often than the other heads
    of their layer: stratified_permutation_claim (roles permuted within each layer of each model,
    one-sided) at LEVEL_SURVIVAL with PRACTICAL["kept_rate"] on the kept-rate difference; and the
    two observed kept rates (specialised, the rest; NaN where a side is empty)."""
    key = tuple((tuple(r), tuple(k), tuple(layer)) for r, k, layer in runs)
    if key in _survival_cache:
        return _survival_cache[key]
    pairs = [(r, k.astype(float)) for r, k, _ in runs]
    inside = np.concatenate([k[np.isin(r, SPECIALISED)] for r, k in pairs]) if pairs else np.array([])
    rest = np.concatenate([k[~np.isin(r, SPECIALISED)] for r, k in pairs]) if pairs else np.array([])
    rates = (float(inside.mean()) if len(inside) else math.nan, float(rest.mean()) if len(rest) else math.nan)
    v = stratified_permutation_claim(pairs, [layer for _, _, layer in runs], SPECIALISED, level=LEVEL_SURVIVAL,
                                     threshold=PRACTICAL["kept_rate"], permutations=PERMUTATIONS, seed=0)
    _survival_cache[key] = v, rates
    return v, rates


def scratch_pair(d, task, seed):
    """(the L0 point whose layout was retrained from scratch, whether it is the lambda chosen on val
    now) or None. The layouts were retrained for the choice run.sh made when it ran (make_results.py
    --l0-layouts); a rule changed since may choose another lambda, and then the from-scratch model
    is compared with the L0 model it was trained to match, said so where it is printed."""
    trained = d.scratch_layout(task, seed)
    if trained is None:
        return None
    chosen = l0_selected(d, task, seed)
    layout = lambda p: " ".join(str(x) for x in p[2])  # noqa: E731
    if chosen and layout(chosen) == trained:
        return chosen, True
    same = [p for p in l0_points(d, task, seed) if layout(p) == trained]
    return (min(same, key=lambda p: p[0]), False) if same else None


def scratch_drops(d, task):
    """{seed: what training the L0 layout from scratch loses against the L0-pruned model of that
    layout, on test} (drop(): relative for losses, points for accuracy; negative = scratch is
    better); seeds without both left out."""
    metric = TASKS[task][1]
    key = TEST_KEY[metric]
    out = {}
    for s in d.seeds[task]:
        pair, sc = scratch_pair(d, task, s), d.eval(task, s, "scratch_l0", "test")
        pruned = d.eval(task, s, pair[0][6], "test") if pair else None
        if sc and pruned:
            out[s] = drop(metric, number(pruned[key]), number(sc[key]))
    return out
