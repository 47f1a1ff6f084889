"""experiments/pruning: each source's claim judged by the shared rules (experiments/verdicts.py,
docs/verdicts.md), per task: CLAIMS[key](d) -> Claim (the claim, the paper's number, one Row per
task: our numbers, the verdict and its short word). claims_text.py renders them."""
from dataclasses import dataclass, field

from common import cell, seeds_list
from verdicts import (
    DOES_NOT_HOLD, HOLDS, LEVEL_SEEDS, NO_CHANGE, PAPER, PRACTICAL, UNRESOLVED, PaperValue, Verdict, most,
    most_claim, noticeable, reaches_claim, seed_claim, share_text
)

from .analysis import (
    EARLY, FIGURE5, TASKS, dynamics_rows, early_fraction, finetuned_prunable, l0_selected, noticeable_threshold,
    order_prunable, orders_by_seed, practical_threshold, scratch_drops, scratch_pair, survival, survival_claim,
    unit, vacuous_seeds
)
from .michel import table1, table2

SEED_TEST = "t"  # seed-level claims: the paired t-test over seeds (docs/verdicts.md: 5 seeds can pass it)
NOT_A_PAPER = "not a paper's claim: a control this project adds"
OWN_QUESTION = "this project's question (Michel et al. do no fine-tuning; Voita et al. fine-tune with L0 only)"


@dataclass
class Row:
    task: str
    ours: str
    verdict: str  # Markdown: the verdict and its reason
    word: str     # the verdict in a few words (summary and "What changed" tables)


@dataclass
class Claim:
    title: str
    paper: str
    rule: str
    rows: list = field(default_factory=list)


def per_seed(values, digits=2, scale=1.0):
    """'0.25, 0.50, 0.31' from {seed: value}, in seed order."""
    return seeds_list([values[s] * scale for s in sorted(values)], digits)


def mean_sd(values, digits=2, scale=1.0):
    return cell((v * scale for v in values.values()), digits)


def seed_word(v, positive, negative, *, small="no practical difference"):
    """A seed_claim verdict in a few words: `positive` / `negative` by the effect's sign when it
    holds, or when it does not hold because the effect is significant and large the other way;
    `small` when it does not hold otherwise (shown within the threshold); 'not resolved' when
    inconclusive."""
    other_way = v.outcome == DOES_NOT_HOLD and v.p < v.level and abs(v.effect) >= v.threshold
    if v.outcome == HOLDS or other_way:
        return positive if v.effect > 0 else negative
    return small if v.outcome == DOES_NOT_HOLD else "not resolved"


def count_word(verdicts):
    """Per-model verdicts, one per seed, counted: 'holds in 2 of 3 seeds'."""
    k = sum(v.holds for v in verdicts)
    return f"holds in {k} of {len(verdicts)} seeds"


def seed_verdicts_text(verdicts, seeds):
    return "; ".join(f"seed {s}: {v.outcome} ({v.reason})" for s, v in zip(seeds, verdicts))


# ---- Michel Tables 1 and 2 ----------------------------------------------------------------------------


def unchanged_paper(key, what):
    """Michel's count turned to ours: the units whose removal changes nothing significantly."""
    p = PAPER[key]
    return PaperValue(f"{p.total - p.count} of {p.total} {what} with no significant change", p.citation,
                      count=p.total - p.count, total=p.total)


def classes_text(t):
    c = t.counts
    return (f"{c['hurts']} hurt, {c['helps']} help, {c[NO_CHANGE]} no practical change, {c['unresolved']} unresolved "
            f"of {t.total}")


def most_unchanged_claim(d, title, paper_key, units, rule, what, table_of):
    """Michel's Tables 1 and 2 as one rule: per seed, most_claim on the units (heads removed alone,
    or layers reduced to their best head) whose removal_class is 'no practical change'."""
    paper = unchanged_paper(paper_key, units)
    c = Claim(title, PAPER[paper_key].text(),
              f"per seed, most_claim: {rule}, more than half")
    for task in d.tasks:
        seeds = d.seeds[task]
        ts = [table_of(d, task, s) for s in seeds]
        vs = [most_claim(t.counts[NO_CHANGE], t.total, what=what, unresolved=t.counts[UNRESOLVED]) for t in ts]
        ours = "; ".join(f"seed {s}: {classes_text(t)}" for s, t in zip(seeds, ts)) + \
            f" (on {ts[0].kind}); Michel: {share_text(paper.count, paper.total)} unchanged"
        c.rows.append(Row(task, ours, f"**{count_word(vs)}**: " + seed_verdicts_text(vs, seeds), count_word(vs)))
    return c


def claim_single_heads(d):
    return most_unchanged_claim(d, "Most heads can be removed alone without a practical change (Michel Table 1)",
                                "michel_table1", "Enc-Enc heads", "heads whose removal_class is 'no practical change'",
                                "heads with no practical change", table1)


def claim_layer_one_head(d):
    return most_unchanged_claim(d, "For most layers, one head is enough (Michel Table 2)", "michel_table2", "layers",
                                "layers reduced to their best head with 'no practical change'",
                                "layers with no practical change", table2)


# ---- score orders, fine-tuning (seed-level claims) ---------------------------------------------------


def seed_rule(threshold_words):
    return (f"seed_claim: {SEED_TEST}-test over seeds, level {LEVEL_SEEDS:g}, at least the seeds verdicts.py asks for, "
            f"threshold {threshold_words}")


def fraction_claim(a, b, direction=0):
    return seed_claim(a, b, level=LEVEL_SEEDS, threshold=PRACTICAL["prune_fraction"], test=SEED_TEST,
                      direction=direction)


def order_pair_claim(d, c, a, b, labels, words, direction=0):
    """One row per task: the fraction prunable by order b against order a (fraction_claim over the
    seeds), their means (in the order of `labels`: pairs of (key, words)), b - a per seed, and the
    verdict's word (words: b more, a more)."""
    for task in d.tasks:
        o = orders_by_seed(d, task)
        v = fraction_claim(o[a], o[b], direction=direction)
        diff = {s: o[b][s] - o[a][s] for s in o[a]}
        names = dict(labels)
        ours = (", ".join(f"{name} {mean_sd(o[key])}" for key, name in labels) +
                f"; {names[b]} − {names[a]} per seed {per_seed(diff)}")
        c.rows.append(Row(task, ours, v.words(), seed_word(v, *words)))
    return c


def claim_orders(d):
    c = Claim("Importance-ordered pruning does at least as well as the ablation-score order (Michel Section 4)",
              "I_h as a cheap proxy of each head's ablation effect (Michel et al. 2019, Section 4)",
              seed_rule(f"{PRACTICAL['prune_fraction']:g} of the heads (fraction prunable without a noticeable "
                        "drop)"))
    return order_pair_claim(d, c, "importance", "ablation", (("importance", "importance"), ("ablation", "ablation")),
                            ("ablation order prunes more", "importance prunes more"))


def claim_normalisation(d):
    c = Claim("Michel's per-layer l2 normalisation of I_h does not cost prunable heads", OWN_QUESTION.split(" (")[0],
              seed_rule(f"{PRACTICAL['prune_fraction']:g} of the heads"))
    return order_pair_claim(d, c, "importance", "importance_raw", (("importance", "per-layer"), ("importance_raw", "raw")),
                            ("raw prunes more", "per-layer prunes more"))


def claim_importance_vs_random(d):
    c = Claim("Importance-ordered pruning beats random order", NOT_A_PAPER,
              seed_rule(f"{PRACTICAL['prune_fraction']:g} of the heads; importance − random, direction +1"))
    return order_pair_claim(d, c, "random", "importance", (("importance", "importance"), ("random", "random")),
                            ("importance prunes more", "random prunes more"), direction=+1)


def claim_finetune(d):
    c = Claim("Fine-tuning and re-scoring let more heads be pruned, against the fine-tuned control", OWN_QUESTION,
              seed_rule(f"{PRACTICAL['prune_fraction']:g} of the heads; with − without fine-tuning, direction +1"))
    for task in d.tasks:
        plain = {s: order_prunable(d, task, s, "importance") for s in d.seeds[task]}
        tuned = {s: finetuned_prunable(d, task, s) for s in d.seeds[task]}
        v = fraction_claim(plain, tuned, direction=+1)
        ours = (f"without {mean_sd(plain)}, with fine-tuning + re-scoring (against the control) {mean_sd(tuned)}; "
                f"difference per seed {per_seed({s: tuned[s] - plain[s] for s in plain})}")
        c.rows.append(Row(task, ours, v.words(), seed_word(v, "more prunable with fine-tuning",
                                                              "fewer prunable with fine-tuning")))
    return c


# ---- L0, Figure 5 (early), Voita ------------------------------------------------------------------------


def claim_l0(d):
    paper = PAPER["voita_figure7"]
    c = Claim("L0 gates prune most heads without a noticeable cost on test (Voita)", paper.text(),
              "per seed at the lambda chosen on val: most() of the heads pruned and no noticeable() test drop "
              "against the control")
    for task in d.tasks:
        metric = TASKS[task][1]
        threshold = noticeable_threshold(metric)
        seeds = [s for s in d.seeds[task] if l0_selected(d, task, s)]
        if not seeds:
            continue
        vs = []
        for s in seeds:
            ch = l0_selected(d, task, s)
            pruned, total = int(ch[5]["heads_pruned"]), int(ch[5]["heads_pruned"]) + int(ch[5]["heads_kept"])
            ok_most, ok_drop = most(pruned, total), not noticeable(ch[4], threshold=threshold)
            vs.append(Verdict(HOLDS if ok_most and ok_drop else DOES_NOT_HOLD,
                              f"{pruned} of {total} pruned ({'more' if ok_most else 'not more'} than half), test drop "
                              f"{ch[4] * 100:+.2f} {unit(metric)} ({'not ' if ok_drop else ''}above {threshold * 100:g})",
                              test="most() and noticeable()", threshold=threshold))
        ours = (f"fraction pruned per seed {seeds_list([l0_selected(d, task, s)[1] for s in seeds], 2)}; test drop vs "
                f"control ({unit(metric)}) {seeds_list([l0_selected(d, task, s)[4] * 100 for s in seeds], 2)}")
        c.rows.append(Row(task, ours, f"**{count_word(vs)}**: " + seed_verdicts_text(vs, seeds), count_word(vs)))
    return c


def claim_early(d):
    lo, hi = FIGURE5["retained"]
    target = FIGURE5["fraction_pruned"]
    c = Claim(f"Important heads are determined early: at {FIGURE5['epoch']} of {FIGURE5['epochs']} epochs about "
              f"{target:.0%} of heads prunable keeping {lo:.0%}-{hi:.0%} of the metric (Michel Section 6)",
              PAPER["michel_figure5"].text(),
              f"at the checkpoint nearest {EARLY:.0%} of training, importance order, that checkpoint's own unpruned "
              f"metric: reaches_claim of the fraction prunable keeping {lo:.0%} of it against {target:g}, threshold "
              f"{PRACTICAL['prune_fraction']:g}, {SEED_TEST}-test, level {LEVEL_SEEDS:g}")
    for task in d.tasks:
        f = early_fraction(d, task)
        if f is None:
            continue
        keep_lo, keep_hi = dynamics_rows(d, task, lo)[f], dynamics_rows(d, task, hi)[f]
        vacuous = vacuous_seeds(d, task, f, lo)
        assessed = {s: v for s, v in keep_lo[0].items() if s not in vacuous}
        v = reaches_claim(assessed, target, level=LEVEL_SEEDS, threshold=PRACTICAL["prune_fraction"], test=SEED_TEST)
        ours = (f"checkpoint at {f:.2f} of training: importance keeping {lo:.0%}: {mean_sd(keep_lo[0])} (per seed "
                f"{per_seed(keep_lo[0])}), keeping {hi:.0%}: {mean_sd(keep_hi[0])}; random order keeping {lo:.0%} "
                f"({NOT_A_PAPER.split(':')[0]}): {mean_sd(keep_lo[1])}")
        if vacuous:
            ours += (f"; left out, nothing to lose at this checkpoint (every order prunes to the end keeping "
                     f"{lo:.0%}): seed{'s' if len(vacuous) > 1 else ''} "
                     f"{', '.join(map(str, sorted(vacuous)))}")
        word = {HOLDS: f"reaches {target:.0%}", DOES_NOT_HOLD: f"below {target:.0%}"}.get(v.outcome, "not resolved")
        c.rows.append(Row(task, ours, v.words(), word))
    return c


def claim_voita(d):
    c = Claim("The specialised heads are the last to be pruned by L0 gates (Voita Section 6, Figure 8)",
              "specialised (positional, syntactic, rare-token) heads are the last to be pruned (Voita et al. 2019, "
              "Section 6.2, Figure 8)",
              "stratified_permutation_claim: roles permuted within each layer of each model; kept-rate difference")
    for task in d.tasks:
        runs = survival(d, task)
        if not runs:
            continue
        v, (spec, rest) = survival_claim(runs)
        n_spec = sum(int(sum(r != "none" for r in roles)) for roles, _, _ in runs)
        if n_spec == 0:
            c.rows.append(Row(task, "no specialised heads", "–", "no specialised heads"))
            continue
        ours = f"{n_spec} specialised heads over {len(runs)} seeds; kept {spec:.2f} vs {rest:.2f} for the rest"
        word = {HOLDS: "kept more", DOES_NOT_HOLD: "not kept more"}.get(v.outcome, "not resolved")
        c.rows.append(Row(task, ours, v.words(), word))
    return c


def claim_scratch(d):
    c = Claim("The L0 layout trained from scratch does worse than the L0-pruned model (Voita)",
              PAPER["voita_scratch"].text(),
              f"seed_claim on the test drop of the from-scratch model against the L0-pruned one (> 0: scratch worse), "
              f"{SEED_TEST}-test, level {LEVEL_SEEDS:g}, either direction reported")
    for task in d.tasks:
        drops = scratch_drops(d, task)
        if not drops:
            continue
        metric = TASKS[task][1]
        v = seed_claim({s: 0.0 for s in drops}, drops, level=LEVEL_SEEDS, threshold=practical_threshold(metric),
                       test=SEED_TEST)
        worse, better = sum(x > 0 for x in drops.values()), sum(x < 0 for x in drops.values())
        ours = (f"drop per seed ({unit(metric)}) {per_seed(drops, 2, 100)}: from scratch worse in {worse}, better in "
                f"{better} of {len(drops)} seeds; mean {sum(drops.values()) / len(drops) * 100:+.2f} {unit(metric)}")
        stale = [s for s in drops if not scratch_pair(d, task, s)[1]]
        if stale:
            ours += (f" (seeds {', '.join(map(str, stale))}: against the L0 model of the retrained layout, not the "
                     "lambda chosen on val now)")
        word = seed_word(v, "scratch worse (as Voita)", "scratch better (the opposite of Voita)",
                         small="within the threshold")
        if word == "not resolved":
            word += (f" (scratch {'better' if better > worse else 'worse'} in {max(worse, better)} of {len(drops)} "
                     "seeds)" if worse != better else f" (scratch better in {better}, worse in {worse} of {len(drops)} seeds)")
        c.rows.append(Row(task, ours, v.words(), word))
    return c


CLAIMS = {"single_heads": claim_single_heads, "layer_one_head": claim_layer_one_head, "orders": claim_orders,
          "normalisation": claim_normalisation, "importance_vs_random": claim_importance_vs_random,
          "finetune": claim_finetune, "l0": claim_l0, "early": claim_early, "voita": claim_voita,
          "scratch": claim_scratch}


def all_claims(d):
    """{key: Claim}, computed once per Data."""
    if getattr(d, "_claims", None) is None:
        d._claims = {k: f(d) for k, f in CLAIMS.items()}
    return d._claims
