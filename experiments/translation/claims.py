"""experiments/translation: the papers' claims judged on the translation model, one row each of
RESULTS.md's verdict table, by the rules stated at its top (experiments/verdicts.py,
docs/verdicts.md). Written, and tested on made-up data, before the michel and voita arms ran: the
rules are fixed before their data exist. A claim whose arm is not in data/ is left out of the table,
which says which arms are missing.

Each claim function takes make_results.Data and returns [(claim, ours, paper, Verdict)]:
  counts (Michel Tables 1 and 2, Voita Figure 7's share pruned): per seed most_claim, and the claim
    holds when it holds in most seeds (majority, at least MIN_SEEDS seeds);
  seed-level comparisons: the paired t-test over seeds at LEVEL_SEEDS with a practical threshold,
    Holm over the tests that answer one claim;
  "not worse" claims (a paper's "without noticeable loss"): holds when the drop is shown smaller
    than the threshold (verdicts.not_below_claim)."""
import math

from common import number
from verdicts import (
    DOES_NOT_HOLD, HELPS, HOLDS, HURTS, INCONCLUSIVE, LEVEL_MICHEL, LEVEL_SEEDS, MIN_SEEDS, NO_CHANGE, PAPER, PAPER_NUMBERS,
    PRACTICAL, UNRESOLVED, PaperValue, Verdict, holm_claims, most, most_claim, not_below_claim, paired_t_test,
    reaches_claim, seed_claim, significant_with_effect
)

SEED_TEST = "t"  # the rules: the paired t-test over seeds
MICHEL_TABLE1_ONLY = "Michel et al.'s Table 1 is the encoder's (Enc-Enc) only"


# ---- combining verdicts ------------------------------------------------------------------------------


def majority(verdicts):
    """Per-seed verdicts (one per seed) as one: holds (does not hold) when it holds (does not) in
    more than half of at least MIN_SEEDS seeds; else inconclusive."""
    n, held = len(verdicts), sum(v.holds for v in verdicts)
    failed = sum(v.outcome == DOES_NOT_HOLD for v in verdicts)
    reason = f"holds in {held} of {n} seeds, does not in {failed}"
    kw = dict(test="per seed, then most seeds", n=n)
    if n < MIN_SEEDS:
        return Verdict(INCONCLUSIVE, f"only {n} seed{'' if n == 1 else 's'}: a claim needs at least {MIN_SEEDS}", **kw)
    if most(held, n):
        return Verdict(HOLDS, reason, **kw)
    return Verdict(DOES_NOT_HOLD if most(failed, n) else INCONCLUSIVE, reason, **kw)


def all_of(verdicts, test):
    """A claim that needs every one of its tests: holds when all hold, does not hold when any does
    not, else inconclusive; the reasons joined."""
    reason = "; ".join(f"{name}: {v.outcome} ({v.reason})" for name, v in verdicts.items())
    vs = list(verdicts.values())
    outcome = HOLDS if all(v.holds for v in vs) else DOES_NOT_HOLD if any(
        v.outcome == DOES_NOT_HOLD for v in vs) else INCONCLUSIVE
    return Verdict(outcome, reason, test=test, level=LEVEL_SEEDS, threshold=vs[0].threshold, n=min(v.n for v in vs))


def directed(v, claim):
    """A Holm-family verdict (either sign) read as the one-sided claim B - A > 0 (a claim on too few
    seeds stays inconclusive, as holm_claims made it)."""
    if v.n < MIN_SEEDS:
        return v
    return significant_with_effect(v.p, claim.effect, level=LEVEL_SEEDS, threshold=claim.threshold, direction=+1,
                                   interval=claim.interval, test=v.test, n=v.n)


def values_text(values, digits=2):
    """'0.20 ± 0.05 (0.15, 0.25, ...)' of {seed: value}."""
    xs = [values[s] for s in sorted(values)]
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else math.nan
    spread = "" if math.isnan(sd) else f" ± {sd:.{digits}f}"
    return f"{mean:.{digits}f}{spread} ({', '.join(f'{x:.{digits}f}' for x in xs)})"


# ---- Michel et al. -----------------------------------------------------------------------------------------


def michel_table1(d):
    from translation import michel as M
    rows, out = d.read("michel", "bleu_ablation.csv"), []
    for kind in M.KINDS:
        t = M.table1(rows, kind)
        if not t:
            continue
        vs = [most_claim(counts[NO_CHANGE], n, what="heads with no practical change", unresolved=counts[UNRESOLVED])
              for counts, n, _ in t.values()]
        per = lambda c: ", ".join(str(counts[c]) for counts, _, _ in t.values())  # noqa: E731
        n = next(iter(t.values()))[1]
        ours = (f"of {n} heads per seed: no practical change {per(NO_CHANGE)}; hurt {per(HURTS)}; help "
                f"{per(HELPS)}; unresolved {per(UNRESOLVED)}; not significant at p < {LEVEL_MICHEL} (Michel's "
                f"criterion) {', '.join(str(calm) for _, _, calm in t.values())}")
        p = PAPER["michel_table1"]
        paper = (PaperValue(f"{p.total - p.count} of {p.total} Enc-Enc heads with no significant change; "
                            f"{PAPER['michel_table1_better'].value}", p.citation)
                 if kind == "enc" else MICHEL_TABLE1_ONLY)
        out.append((f"Most {M.KIND_WORDS[kind]} heads can be removed alone without a practical change (Michel "
                    "Table 1)", ours, paper, majority(vs)))
    return out


def michel_table2(d):
    from translation import michel as M
    t2 = M.table2(d.read("michel", "bleu_ablation.csv"))
    if not t2:
        return []
    def count(sites, cls):
        return sum(c == cls for _, c in sites.values())
    vs = [most_claim(count(sites, NO_CHANGE), len(sites), what="sites with no practical change",
                     unresolved=count(sites, UNRESOLVED)) for sites in t2.values()]
    per = lambda cls: ", ".join(str(count(sites, cls)) for sites in t2.values())  # noqa: E731
    calm = ", ".join(str(M.table2_not_significant(sites)) for sites in t2.values())
    ours = (f"of {len(next(iter(t2.values())))} sites per seed, with their best head alone: no practical change "
            f"{per(NO_CHANGE)}; unresolved {per(UNRESOLVED)}; not significant at p < {LEVEL_MICHEL} (Michel's "
            f"criterion) {calm}")
    p = PAPER["michel_table2"]
    paper = PaperValue(f"{p.total - p.count} of {p.total} layers with no significant change; {p.value}", p.citation)
    return [("For most layers (sites), one head is enough (Michel Table 2)", ours, paper, majority(vs))]


def michel_prunable(d, arm, step=None):
    """{seed: fraction prunable without a noticeable drop} of one pruning order (make_results'
    MICHEL_ARMS; random: its seeded orders averaged round by round)."""
    from translation import michel as M
    from translation.make_results import arm_curves
    return {s: M.prunable(c) for s, c in arm_curves(d, arm, step).items()}


def michel_figure3(d):
    importance, random = michel_prunable(d, "importance"), michel_prunable(d, "random")
    if not importance:
        return []
    target = PAPER_NUMBERS["michel_figure3"]["fraction_pruned"]
    out = [(f"By importance, about {target:.0%} of heads prunable without a noticeable BLEU drop (Michel Figure 3)",
            f"fraction prunable {values_text(importance)}", PAPER["michel_figure3"],
            reaches_claim(importance, target, level=LEVEL_SEEDS, threshold=PRACTICAL["prune_fraction"],
                          test=SEED_TEST))]
    if random:
        c = paired_t_test(random, importance, threshold=PRACTICAL["prune_fraction"])
        v = directed(holm_claims({"r": c}, level=LEVEL_SEEDS)["r"], c)
        out.append(("Pruning by importance keeps BLEU to more heads pruned than a random order (a control this "
                    "project adds)", f"importance {values_text(importance)}; random {values_text(random)}",
                    "Michel et al. compare with the ablation oracle, not random (Figure 3)", v))
    return out


def michel_figure4(d):
    frac = {kind: michel_prunable(d, f"importance_{kind}") for kind in ("enc", "dec", "cross")}
    if not all(frac.values()):
        return []
    threshold = PRACTICAL["prune_fraction"]
    claims = {k: paired_t_test(frac["cross"], frac[k], threshold=threshold) for k in ("enc", "dec")}
    family = holm_claims(claims, level=LEVEL_SEEDS)
    v = all_of({f"{k} − cross": directed(family[k], claims[k]) for k in claims},
               "two-sided paired t-test over seeds, Holm over 2, read one-sided")
    ours = "; ".join(f"{w} alone {values_text(frac[k])}" for k, w in (("enc", "Enc-Enc"), ("dec", "Dec-Dec"),
                                                                        ("cross", "Enc-Dec")))
    return [("Enc-Dec heads are the most sensitive: pruned kind by kind, Enc-Enc and Dec-Dec keep BLEU to a larger "
             "fraction pruned than Enc-Dec (Michel Figure 4)", ours, PAPER["michel_figure4"], v)]


def michel_section6(d):
    """Michel Section 6 as pruning's claim_early: at the checkpoint nearest the paper's epoch share,
    the fraction pruned keeping the paper's share of that checkpoint's BLEU reaches its 40%."""
    from translation import michel as M
    figure5 = PAPER_NUMBERS["michel_figure5"]
    rows = d.read("michel", "prune.csv")
    final = M.final_step(rows)
    early = figure5["epoch"] / figure5["epochs"]
    points = M.dynamics_points(rows)
    if not points:
        return []
    # the point whose mean share of the analysed model's steps is nearest the paper's epoch share
    point = min(points, key=lambda p: abs(sum(p[s] / final[s] for s in p) / len(p) - early))
    steps = sorted(set(point.values()))
    shares = sorted({f"{point[s] / final[s]:.2f}" for s in point})
    share, target = figure5["retained"][0], figure5["fraction_pruned"]
    kept = {s: M.retained_prunable(c, share) for s, c in M.curves(rows, "importance", point).items()}
    where = (f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}") + \
        f" ({'-'.join(dict.fromkeys([shares[0], shares[-1]]))} of training)"
    return [(f"Important heads are determined early: at {early:.0%} of training about {target:.0%} of heads "
             f"prunable keeping {share:.0%} of that checkpoint's BLEU (Michel Section 6)",
             f"{where}: {values_text(kept)}",
             PAPER["michel_figure5"],
             reaches_claim(kept, target, level=LEVEL_SEEDS, threshold=PRACTICAL["prune_fraction"], test=SEED_TEST))]


# ---- Voita et al. ------------------------------------------------------------------------------------------


def voita_figure7(d):
    """Most encoder heads pruned by L0 at the val-chosen lambda, and its test BLEU not noticeably
    below the control's."""
    from translation import voita as V
    from translation.make_results import voita_evals, voita_kept, voita_sites
    prune, evals, sites = d.read("voita", "prune.csv"), voita_evals(d), voita_sites(d)
    last = V.last_rows(prune)
    seeds = sorted(s for (s, arm) in last if arm == "none_l0")
    if not seeds:
        return []
    pruned, vs, control, chosen = {}, [], {}, {}
    for s in seeds:
        got = V.chosen(prune, s)
        kept, total = voita_kept(got[1] if got else last[(s, "none_l0")], last[(s, "none_l0")], sites, "enc")
        pruned[s] = total - kept
        vs.append(most_claim(total - kept, total, what="encoder heads pruned"))
        if got and (s, got[0], "test") in evals and (s, "none_l0", "test") in evals:
            chosen[s] = number(evals[(s, got[0], "test")]["bleu"])
            control[s] = number(evals[(s, "none_l0", "test")]["bleu"])
    out = [("Most encoder heads can be pruned by L0 at the val-chosen lambda (Voita Figure 7)",
            f"encoder heads pruned per seed {', '.join(str(pruned[s]) for s in seeds)} of {total}",
            PaperValue(f"{PAPER['voita_figure7'].count} of {PAPER['voita_figure7'].total} encoder heads pruned",
                       PAPER["voita_figure7"].citation), majority(vs))]
    if chosen:
        drops = {s: chosen[s] - control[s] for s in chosen}
        out.append(("… without a noticeable test BLEU drop against the control (Voita Figure 7)",
                    f"test BLEU − control {values_text(drops)}", PAPER["voita_figure7"],
                    not_below_claim(control, chosen, level=LEVEL_SEEDS, threshold=PRACTICAL["bleu"], test=SEED_TEST,
                                    what="the control")))
    return out


def voita_kinds(d):
    """Voita Figures 9 and 10 with every kind gated: per seed, each unit's share of heads kept
    averaged over the lambdas (lower: pruned earlier along the lambda path); the orders the paper
    reports, B − A > 0, by the paired t-test over seeds (Figure 10's two tests Holm-corrected)."""
    from translation import voita as V
    from translation.make_results import voita_gated_runs
    sites, control, runs = voita_gated_runs(d, "all")
    if not runs:
        return []
    seeds = sorted(set.intersection(*(set(by_seed) for by_seed in runs.values())))

    def path(share):  # {seed: a unit's share kept, averaged over the lambdas}
        return {s: sum(share(runs[lam][s], control[s]) for lam in runs) / len(runs) for s in seeds}
    kind = lambda k: path(lambda r, c: V.kind_shares(r, c, sites)[k])  # noqa: E731
    site = lambda k, layer: path(lambda r, c: V.site_shares(r, c)[sites.index((k, layer))])  # noqa: E731
    top = max(layer for _, layer in sites)
    threshold = PRACTICAL["prune_fraction"]
    words = f"share kept, averaged over {len(runs)} lambdas"
    fig9 = paired_t_test(kind("enc"), kind("cross"), threshold=threshold)
    fig10 = {"dec": paired_t_test(site("dec", top), site("dec", 0), threshold=threshold),
             "cross": paired_t_test(site("cross", 0), site("cross", top), threshold=threshold)}
    family = holm_claims(fig10, level=LEVEL_SEEDS)
    ours = lambda a, b, wa, wb: f"{words}: {wb} {values_text(b)}; {wa} {values_text(a)}"  # noqa: E731
    out = [("With every kind gated, encoder self-attention heads are pruned before cross-attention heads (Voita "
            "Figure 9)", ours(kind("enc"), kind("cross"), "encoder", "cross"), PAPER["voita_figure9"],
            directed(holm_claims({"e": fig9}, level=LEVEL_SEEDS)["e"], fig9))]
    if top == 0:  # one decoder layer: no lower and higher layers to compare (Figure 10)
        return out
    return out + [(f"… decoder self-attention survives in the lower layers (layer 0 over layer {top}), "
                   f"cross-attention in the higher (layer {top} over layer 0) (Voita Figure 10)",
                   ours(site("dec", top), site("dec", 0), f"dec L{top}", "dec L0") + "; "
                   + ours(site("cross", 0), site("cross", top), "cross L0", f"cross L{top}"), PAPER["voita_figure10"],
                   all_of({k: directed(family[k], fig10[k]) for k in fig10},
                          "two-sided paired t-test over seeds, Holm over 2, read one-sided"))]


def share_words(x):
    return "–" if math.isnan(x) else f"{x:.2f}"


def voita_survival(d):
    from translation.make_results import voita_survival_runs
    runs, _ = voita_survival_runs(d)
    if not runs:
        return []
    from pruning.analysis import survival_claim
    v, (spec, rest) = survival_claim(runs)
    return [("The encoder heads L0 keeps are the specialised ones: positional and rare-token heads kept more often "
             "than the rest of their layer (Voita Section 6.2)",
             f"share kept over {len(runs)} seeds: specialised {share_words(spec)}, the rest {share_words(rest)}",
             "specialised (positional, syntactic, rare-token) heads are the last to be pruned (Voita et al. 2019, "
             "Section 6.2, Figure 8)", v)]


def voita_scratch(d):
    from translation import voita as V
    from translation.make_results import voita_evals
    prune = d.read("voita", "prune.csv")
    evals = {**voita_evals(d), **{(int(r["seed"]), r["arm"], r["split"]): r for r in d.read("voita_scratch", "evals.csv")}}
    pruned, scratch = {}, {}
    for r in d.read("voita_scratch", "scratch.csv"):
        s = int(r["seed"])
        arm = (V.chosen(prune, s) or (None,))[0]
        if (s, arm, "test") in evals and (s, "scratch", "test") in evals:
            pruned[s], scratch[s] = number(evals[(s, arm, "test")]["bleu"]), number(evals[(s, "scratch", "test")]["bleu"])
    if not pruned:
        return []
    v = seed_claim(pruned, scratch, level=LEVEL_SEEDS, threshold=PRACTICAL["bleu"], test=SEED_TEST, direction=-1)
    return [("The L0 layout trained from scratch does worse than the L0-pruned model (Voita Section 6.2)",
             f"scratch − pruned test BLEU {values_text({s: scratch[s] - pruned[s] for s in pruned})}",
             PAPER["voita_scratch"], v)]


# ---- Vaswani et al., and MQA / GQA (their sections' families, read as the papers' claims) --------------


def _sweep_claims(s, label):
    """Vaswani's two halves from one head-count family (head_count.sweeps.Sweep)."""
    from head_count.fields import too_many_hurt
    from head_count.sweeps import NO_DIFFERENCE, NOT_RESOLVED, key_label
    kw = dict(test=f"{s.threshold_words()}, Holm over the family's {len(s.verdicts)}", level=LEVEL_SEEDS,
              threshold=PRACTICAL["bleu"], n=len(s.seeds))
    others = [v for v in s.points if v != s.reference]
    words = "; ".join(f"{key_label('heads', v)} {s.ms(v)} ({s.word(v)})" for v in others)
    ref = f"{key_label('heads', s.reference)} {s.ms(s.reference)}"
    better = s.resolved("better")
    first = (Verdict(HOLDS, f"better than one head: {s.unit_list(better)}", **kw) if better else
             Verdict(DOES_NOT_HOLD, "no count better than one head, none unresolved", **kw)
             if all(s.word(v) in ("worse", NO_DIFFERENCE) for v in others) else
             Verdict(INCONCLUSIVE, f"none shown better; not resolved: {s.unit_list(s.resolved(NOT_RESOLVED))}", **kw))
    largest = max(s.points)
    # the largest count against the best: the family's pair, or against the reference when that is the best
    word = s.top_word() if s.top is not None else None if s.best == largest else s.word(largest)
    if too_many_hurt(s):
        second = Verdict(HOLDS, f"{largest} heads worse than the best ({key_label('heads', s.best)})", **kw)
    elif word == NOT_RESOLVED:
        second = Verdict(INCONCLUSIVE, f"{largest} heads against the best ({key_label('heads', s.best)}): not resolved",
                         **kw)
    else:
        second = Verdict(DOES_NOT_HOLD, f"{largest} heads are the best" if word is None else
                         f"{largest} heads against the best ({key_label('heads', s.best)}): {word}", **kw)
    paper = PAPER["vaswani_table3a"]
    return [(f"More heads are better than one at fixed d_model (Vaswani Table 3 A){label}", f"{ref}; {words}", paper,
             first),
            (f"… and too many heads hurt: the largest count worse than the best (Vaswani Table 3 A){label}",
             f"best {key_label('heads', s.best)} {s.ms(s.best)}; {key_label('heads', max(s.points))} "
             f"{s.ms(max(s.points))}", paper, second)]


def vaswani(d):
    from translation.make_results import head_count_sweeps, rate_checked
    runs, sweeps = head_count_sweeps(d)
    s = sweeps.get("seeds")
    if s is None:
        return []
    out = _sweep_claims(s, "")
    if "head_count_rate_check" in d.arms:
        out += _sweep_claims(rate_checked(runs, s)[0], ", with the rates checked")
    return out


def kv_heads(d):
    """MQA and GQA "keep most of MHA's quality": each K/V count's test BLEU not worse than MHA's by
    the threshold, read from the section's family (Holm over every K/V count against MHA)."""
    from translation.make_results import kv_claim, kv_family
    heads, bleu, family = kv_family(d)
    out = []
    for k, v in sorted(family.items()):
        verdict = kv_claim(v)
        name = "MQA" if k == 1 else "GQA"
        out.append((f"{name} ({k} K/V head{'s' if k > 1 else ''} for {heads} query heads) keeps MHA's quality "
                    f"({'Shazeer 2019' if k == 1 else 'Ainslie et al. 2023'})",
                    f"test BLEU {values_text(bleu[k])} against MHA {values_text(bleu[heads])}",
                    PAPER["mqa" if k == 1 else "gqa"], verdict))
    return out


# ---- the table ---------------------------------------------------------------------------------------------

# (arms a claim needs, its functions), in RESULTS.md's order
CLAIMS = ((("head_count_lr", "head_count"), (vaswani,)),
          (("michel",), (michel_table1, michel_table2, michel_figure3, michel_figure4, michel_section6)),
          (("voita",), (voita_figure7, voita_kinds, voita_survival)),
          (("voita", "voita_scratch"), (voita_scratch,)),
          (("kv_heads",), (kv_heads,)))


def rows(d):
    """[(claim, ours, paper, Verdict)] of every claim whose arms are in data/, and the arms missing."""
    out, missing = [], []
    for arms, functions in CLAIMS:
        if not all(a in d.arms for a in arms):
            missing += [a for a in arms if a not in d.arms and a not in missing]
            continue
        for f in functions:
            out += f(d)
    return out, missing
