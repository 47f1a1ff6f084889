"""experiments/translation: Michel et al. 2019 in BLEU, from data/michel/ (collect.py): Table 1
(each head masked alone), Table 2 (each site, one kind of attention in one layer, reduced to its
best head), classed by the shared rules (verdicts.removal_class: the paired bootstrap over test
sentences at p < LEVEL_MICHEL, uncorrected as Michel's, with PRACTICAL["bleu"]), and the pruning
curves of Figures 3 and 4 and Section 6 (BLEU after every round of `headlab prune`).

The bootstrap interval that can show a removal small must be at confidence 1 - LEVEL_MICHEL:
bleu_ablation.csv's bleu_low99/bleu_high99 (its bleu_low/bleu_high are the 95% interval). Data
without them leave a removal that is not significant "unresolved" rather than calling it small
on a narrower interval than the level."""
import math

from common import number
from verdicts import LEVEL_MICHEL, PRACTICAL, removal_class, removal_counts

KINDS = ("enc", "dec", "cross")
KIND_WORDS = {"enc": "Enc-Enc", "dec": "Dec-Dec", "cross": "Enc-Dec"}  # Michel et al.'s names
INTERVALS = {0.99: ("bleu_low99", "bleu_high99"), 0.95: ("bleu_low", "bleu_high")}  # bleu_ablation.csv's


def _interval(r, prefix):
    """The paired bootstrap's interval at confidence 1 - LEVEL_MICHEL, None when the row has none."""
    columns = next((c for conf, c in INTERVALS.items() if math.isclose(conf, 1 - LEVEL_MICHEL)), None)
    if columns is None or r.get(prefix + columns[0], "") == "":
        return None
    return number(r[prefix + columns[0]]), number(r[prefix + columns[1]])


def head_class(r, prefix=""):
    """The removal class of one bleu_ablation.csv row: prefix "" (masked alone, Table 1) or
    "layer_only_" (kept alone in its site, Table 2)."""
    return removal_class(number(r[prefix + "bleu_p"]), number(r[prefix + "bleu_delta"]), level=LEVEL_MICHEL,
                         threshold=PRACTICAL["bleu"], higher_is_better=True, interval=_interval(r, prefix))


def seeds_of(rows):
    return sorted({int(r["seed"]) for r in rows})


def table1(rows, kind):
    """{seed: (class counts, heads, heads not significant by Michel's criterion)} of one kind's heads,
    each masked alone."""
    out = {}
    for seed in seeds_of(rows):
        mine = [r for r in rows if int(r["seed"]) == seed and r["attention"] == kind]
        out[seed] = (removal_counts([head_class(r) for r in mine]), len(mine), not_significant(mine))
    return out


def not_significant(rows, prefix=""):
    """How many of rows (bleu_ablation.csv's) change BLEU not significantly at p < LEVEL_MICHEL:
    Michel et al.'s own criterion, with no practical threshold, for the paper's number beside ours."""
    return sum(number(r[prefix + "bleu_p"]) >= LEVEL_MICHEL for r in rows)


def best_heads(rows, seed):
    """Table 2: per site (kind, layer) of one seed, the row of the head whose BLEU alone in its site
    is highest (chosen on the same sentences it is tested on, as Michel et al.: it favours it)."""
    sites = {}
    for r in rows:
        if int(r["seed"]) == seed:
            sites.setdefault((r["attention"], int(r["layer"])), []).append(r)
    order = sorted(sites, key=lambda site: (KINDS.index(site[0]), site[1]))  # enc, dec, cross; by layer
    return {site: max(sites[site], key=lambda r: number(r["layer_only_bleu"])) for site in order}


def table2_not_significant(sites):
    """Michel's own criterion on one seed's table2 sites: those whose best head alone changes BLEU
    not significantly."""
    return not_significant([r for r, _ in sites.values()], "layer_only_")


def table2(rows):
    """{seed: {site: (best row, class)}}."""
    return {seed: {site: (r, head_class(r, "layer_only_")) for site, r in best_heads(rows, seed).items()}
            for seed in seeds_of(rows)}


# ---- pruning curves (Figures 3 and 4, Section 6) --------------------------------------------------------


def final_step(prune_rows):
    """{seed: its final checkpoint's step}: Section 6's earlier checkpoints share the importance
    arm's name, so every reader of the final model's curves must pick its step."""
    out = {}
    for r in prune_rows:
        out[int(r["seed"])] = max(out.get(int(r["seed"]), 0), int(r["checkpoint_step"]))
    return out


def dynamics_points(prune_rows):
    """Section 6's earlier checkpoints as points [{seed: step}, ...]: the k-th earlier checkpoint of
    every seed (its steps in order, the analysed model's aside) is point k. The seeds' analysed
    models (best.h5) need not share a step, so neither need their earlier checkpoints."""
    final, by_seed = final_step(prune_rows), {}
    for r in prune_rows:
        seed, step = int(r["seed"]), int(r["checkpoint_step"])
        if step != final[seed]:
            by_seed.setdefault(seed, set()).add(step)
    n = max((len(steps) for steps in by_seed.values()), default=0)
    return [{seed: sorted(steps)[k] for seed, steps in sorted(by_seed.items()) if k < len(steps)} for k in range(n)]


def kind_sizes(heads_rows):
    """{seed: {kind: its heads}} from heads.csv's rows (one per head)."""
    out = {}
    for r in heads_rows:
        sizes = out.setdefault(int(r["seed"]), {})
        sizes[r["attention"]] = sizes.get(r["attention"], 0) + 1
    return out


def curves(prune_rows, arm, step=None, sizes=None):
    """{seed: [(fraction pruned, BLEU), ...]} of one arm at the final checkpoint, or at `step` (one
    step for every seed, or {seed: step} as dynamics_points gives; seeds not in it are left out). The
    fraction is of all heads (prune.csv's), but of the kind's own heads in a run pruning one kind
    alone (prune --only; Figure 4's x-axis, as Michel et al. drew it), which needs `sizes`
    (kind_sizes of the same models)."""
    final, out = final_step(prune_rows), {}
    for r in prune_rows:
        seed = int(r["seed"])
        want = final[seed] if step is None else step.get(seed) if isinstance(step, dict) else step
        if r["arm"] != arm or int(r["checkpoint_step"]) != want:
            continue
        fraction = number(r["fraction_pruned"])
        if r.get("only", ""):
            if sizes is None:
                raise ValueError(f"michel.curves: arm {arm} prunes {r['only']} alone; its fraction needs kind_sizes")
            fraction = int(r["heads_pruned"]) / sizes[seed][r["only"]]
        out.setdefault(seed, []).append((fraction, number(r["val_bleu"])))
    return {s: sorted(c) for s, c in sorted(out.items())}


def prunable(curve, threshold=PRACTICAL["bleu"]):
    """The largest fraction pruned before the first round whose BLEU is more than `threshold`
    below round 0's (Michel's "without noticeable impact", NOTICEABLE["bleu"] = 0.5)."""
    full = curve[0][1]
    best = 0.0
    for fraction, bleu in curve:
        if full - bleu > threshold:
            break
        best = fraction
    return best


def retained_prunable(curve, share):
    """Section 6's measure: the largest fraction pruned before BLEU first falls below `share` of
    the unpruned checkpoint's (Michel et al. read 85-90% of it at 40% pruned)."""
    full = curve[0][1]
    best = 0.0
    for fraction, bleu in curve:
        if bleu < share * full:
            break
        best = fraction
    return best


# ---- alignment heads --------------------------------------------------------------------------------------


def cross_site(n_encoder_layers, layer):
    """prune.csv's site number of decoder layer `layer`'s cross-attention: the encoder's layers come
    first, then each decoder layer's self- and cross-attention (docs/pruning-verb.md)."""
    return n_encoder_layers + 2 * layer + 1


def pruned_at(prune_rows, seed, arm, site, head):
    """The fraction pruned at the round where site:head was masked in the final checkpoint's run,
    None if it never was."""
    label, final = f"{site}:{head}", final_step(prune_rows)
    for r in sorted((r for r in prune_rows if int(r["seed"]) == seed and r["arm"] == arm
                     and int(r["checkpoint_step"]) == final[seed]), key=lambda r: int(r["round"])):
        if label in r["pruned_heads"].split():
            return number(r["fraction_pruned"])
    return None
