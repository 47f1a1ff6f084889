"""experiments/head_count: the values of results.template.md's {{placeholders}}, every one built
from data/ (tables, sentences, verdicts, the table of the sources' claims)."""
import os

from common import fmt_p, md_table, mean_std, number, pm, read_csv, signed
from stats import Paired
from verdicts import MIN_SEEDS, PAPER, PRACTICAL, holm_claims, paired_t_test

from .runs import DATA
from .studies import Study
from .sweeps import (
    ACCURACY_THRESHOLD, ALPHA, LR_STUDIES, NO_DIFFERENCE, NOT_RESOLVED, TITLES, Data, Sweep, by_seed, claim, key_label,
    steps_to, values, verdict_word
)

STEPS_THRESHOLD = 0.1  # the practical threshold on steps to 99%: a tenth of the budget


def fields(data):
    f = {}
    prov = data.prov
    f["provenance"] = md_table(["provenance of data/", ""], [
        ["binary built from commit", f"`{prov['binary_built_from_commit']}` (headlab {prov['binary_version']}, sha256 `{prov['binary_sha256'][:16]}…`, BLIS kernels {prov['blis_kernels']})"],
        ["repository HEAD when collected", f"`{prov['repository_head_when_collected']}`"],
        ["collected (UTC)", prov["collected_utc"]],
        ["machine", f"{prov['machine_nproc']} cores, {prov['machine_cpu']}"],
        ["run.sh wall time", f"{int(prov['run_sh_wall_s']) / 60:.0f} min from the first start to the last end, {prov['run_sh_invocations']} invocation(s), up to {prov['jobs']} one-thread runs at a time"],
        ["CPU time of the runs", f"{(float(prov['run_sh_cpu_user_s']) + float(prov['run_sh_cpu_sys_s'])) / 60:.0f} min (user + system, of the sweeps and evaluations each invocation waited for: a sweep stopped by a restart is not counted, so this is a lower bound)"],
        ["runs, their summed wall time", f"{prov['runs']} runs, {float(prov['runs_elapsed_sum_s']) / 60:.0f} min"],
        ["load average while it ran", f"mean {prov['load_average_mean']}, max {prov['load_average_max']} (sampled each minute)"],
    ])
    cpu_min = (float(prov["run_sh_cpu_user_s"]) + float(prov["run_sh_cpu_sys_s"])) / 60
    wall_min = int(prov["run_sh_wall_s"]) / 60
    load = float(prov["load_average_mean"]) if prov["load_average_mean"] else float("nan")
    # Two one-thread runs at a time keep a 2-core machine's load near 2: above that, other work shared it.
    quiet = int(prov["jobs"]) <= 2 and load <= int(prov["machine_nproc"]) + 0.5
    f["regen_time"] = (f"the last regeneration took {wall_min:.0f} min of wall time on {prov['machine_nproc']} cores, "
                       + ("on an otherwise quiet machine" if quiet else "while other work shared the machine")
                       + f" (load average {prov['load_average_mean']} on average; the runs' CPU time at least "
                       f"{cpu_min:.0f} min, {prov['jobs']} one-thread runs at a time)")
    f["n_runs"] = prov["runs"]
    f["rules"] = (f"Two settings of a sweep are compared over the same seeds, and every comparison a sweep makes "
                  f"(each point against the reference and, for head counts, the largest count against the best "
                  f"mean) is **one family**, Holm-corrected at "
                  f"{ALPHA:g}. On the **accuracy tasks** (k-relation, induction) a run either solves the task or "
                  f"stays on a plateau, so the test is on **runs solved** (test accuracy >= {ACCURACY_THRESHOLD:g}): "
                  f"Fisher's exact test, two-sided, with a practical threshold of {PRACTICAL['solve_rate']:g} in the "
                  f"share solved. On the **loss tasks** (grammar, text) it is the two-sided paired t-test, with a "
                  f"practical threshold of {PRACTICAL['relative_loss']:.0%} of the reference's mean loss or bits/byte. "
                  "**better** / **worse**: the adjusted p is below the level *and* the effect is at least the "
                  f"threshold. **{NO_DIFFERENCE}**: the 95% interval lies within ± the threshold, or the effect is "
                  f"significant but smaller than it. **{NOT_RESOLVED}**: neither, with these seeds. Every claim rests "
                  f"on at least {MIN_SEEDS} seeds (fewer: not resolved). A headline names a best setting only when "
                  "another is shown worse than it.")

    sweeps = {}
    for study in ("k_relation_2", "k_relation_3", "induction", "grammar", "grammar_fixed_d_head", "text", "text_fixed_d_head"):
        sweeps[study] = Sweep(data, study)
    for study in ("grammar_kv_heads", "text_kv_heads"):
        sweeps[study] = Sweep(data, study, key="kv_heads", reference=8)
    for study, s in sweeps.items():
        f[f"table {study}"] = s.table()
        f[f"vs_ref {study}"] = s.vs_ref_sentence()
        f[f"best {study}"] = s.best_sentence()
        f[f"pattern {study}"] = s.pattern()
        f[f"Pattern {study}"] = s.pattern()[0].upper() + s.pattern()[1:]
        f[f"seeds {study}"] = str(len(s.seeds))

    # explanations that only fit some outcomes
    if sweeps["induction"].pattern().startswith("splitting hurts"):
        f["note induction"] = (" A plausible reason: the induction head's query-key product must match token identities "
                               "among 64 symbols, and a 4- or 8-dimensional query/key space is small for that match.")
    else:
        f["note induction"] = ""

    # k = 2: speed to 99% (paired over seeds, one head against each other count, one Holm family)
    k2 = sweeps["k_relation_2"]
    budget = int(k2.points[1][0]["steps"])
    reached = {h: {int(r["seed"]): steps_to(data.curve(r)) for r in rows} for h, rows in k2.points.items()}
    all_reached = all(s is not None for h in reached for s in reached[h].values())
    steps = {h: {s: float(v if v is not None else budget + 1) for s, v in d.items()} for h, d in reached.items()}
    cmp = {h: Paired(steps[1], steps[h]) for h in steps if h != 1}
    vd = holm_claims({h: paired_t_test(steps[1], steps[h], threshold=STEPS_THRESHOLD * budget) for h in cmp},
                     level=ALPHA)
    f["k2 speed"] = ("Every run of every head count reached 99% val accuracy" if all_reached else
                     "Not every run reached 99% val accuracy (those that did not count as the budget + 1)") + \
        f"; steps to 99%, each head count minus one head (paired t-test, Holm, threshold {STEPS_THRESHOLD:.0%} of the " \
        f"{budget}-step budget): " + "; ".join(
            f"{h} heads {signed(c.mean, 0)} [{signed(c.lo, 0)}, {signed(c.hi, 0)}], Holm {fmt_p(vd[h].p)} "
            f"({verdict_word(vd[h], -1)})" for h, c in cmp.items()) + "."

    studies = {n: Study(data, n) for n in LR_STUDIES}
    for n, st in studies.items():
        f[f"lr_table {n}"] = st.lr_table()
        f[f"cl_table {n}"] = st.table()
        f[f"cl_verdicts {n}"] = st.verdicts()
        f[f"plateau {n}"] = st.plateau_sentence()
        f[f"long_steps {n}"] = str(st.long_steps)
        f[f"base_steps {n}"] = str(st.base_steps)

    # the 2-layer k = 3 model against one layer (same heads per layer, same seeds)
    two = data.rows("k_relation_3_two_layers")
    one = [r for r in data.rows("k_relation_3", heads=8) if int(r["seed"]) in {int(x["seed"]) for x in two}]
    c = Paired(by_seed(one, "test_accuracy"), by_seed(two, "test_accuracy"))
    f["two_layers table"] = md_table(
        ["model", "params"] + [f"seed {r['seed']}" for r in sorted(two, key=lambda r: int(r["seed"]))] + ["mean ± std"],
        [[f"{len_l} layer{'s' if len_l > 1 else ''} x 8 heads", f"{int(rows[0]['params']):,}"]
         + [f"{number(r['test_accuracy']):.3f}" for r in sorted(rows, key=lambda r: int(r["seed"]))]
         + [pm(*mean_std(values(rows, "test_accuracy")), 3)] for len_l, rows in ((1, one), (2, two))])
    v = holm_claims({0: claim(by_seed(one, "test_accuracy"), by_seed(two, "test_accuracy"), "test_accuracy", 0.0)},
                    level=ALPHA)[0]
    f["two_layers verdict"] = (f"Two layers against one layer: {verdict_word(v, +1)} ({v.test}, {fmt_p(v.p)}; "
                               f"test accuracy {signed(c.mean, 3)} [{signed(c.lo, 3)}, {signed(c.hi, 3)}], paired over "
                               f"{c.n} seeds)")
    f["two_layers steps"] = two[0]["steps"]

    p6 = Sweep(data, "k_relation_3_p6")
    f["p6 table"] = p6.table()
    w = p6.word(3)  # three heads against one head
    f["p6 verdict"] = {"worse": "one wide head beats three narrow ones here too",
                       "better": "three narrow heads beat one wide head here: the opposite of the pair-target note",
                       NO_DIFFERENCE: "one wide head and three narrow ones are within the practical threshold here",
                       }.get(w, "one wide head and three narrow ones are not resolved from each other here") + \
        f" (three heads minus one head: {p6.comparison(3)}, over {len(p6.seeds)} seeds)"

    f["what changed"] = what_changed(sweeps, studies)
    same, both = same_runs(data)
    old_prov = Data(os.path.join(DATA, "before")).prov
    f["rerun"] = (f"The rerun's runs are not the old ones: the val and test metrics are the same in {same} of the {both} "
                  f"runs (study, head count, seed) present in both. The old data came from binary `{old_prov['binary_built_from_commit']}` "
                  f"on {old_prov['machine_cpu']}, the new from `{prov['binary_built_from_commit']}` on {prov['machine_cpu']}")
    f["claims"] = claims_table(sweeps, studies)
    return f


def solved_words(study):
    """', though N of M one-head runs solved it (so: learnability, not capacity)' or ''."""
    solved = study.one_head_solved()
    if not solved or not solved[0]:
        return ""
    return (f", though {len(solved[0])} of {solved[1]} one-head runs at {study.long_steps} steps solved it "
            "(an existence proof that one head can represent it, so the gap is in learnability)")


def too_many_hurt(s):
    """Vaswani's second half: the largest head count is worse than the best (the reference, when
    the reference is best)."""
    return s.top_word() == "worse" if s.top is not None else max(s.points) in s.resolved("worse")


def claims_table(sweeps, studies):
    """Against the sources' claims: the paper's number, ours, and a verdict built from the
    comparisons (the sweeps' families: docs/verdicts.md)."""
    rows = []
    # Vaswani Table 3 (A): more heads help, up to a point
    tasks = ("text", "k_relation_3", "induction", "grammar")
    parts = [f"{TITLES[t]}: {sweeps[t].pattern()}" for t in tasks]
    first = [t for t in tasks if sweeps[t].resolved("better")]  # some count better than one head
    second = [t for t in tasks if too_many_hurt(sweeps[t])]

    def names(ts):
        return ", ".join(TITLES[t] for t in ts) or "no task"
    verdict = (f"both halves hold on {names([t for t in first if t in second])}; more heads better than one on "
               f"{names(first)}; the largest count worse than the best on {names(second)}")
    rows.append(["More heads help, up to a point", PAPER["vaswani_table3a"].text(), "; ".join(parts) + ".", verdict])
    # d_head
    parts = []
    for study in ("text", "induction", "k_relation_3"):
        s = sweeps[study]
        parts.append(f"{TITLES[study]}: best mean at d_head {s.points[s.best][0]['d_head']}")
    rows.append(["d_head around 64-128 at scale", "Vaswani et al. 2017, Table 3 (base model d_head 64)",
                 "; ".join(parts) + ".", "not testable: at d_model 64-128, d_head 64 or 128 leaves one or two heads"])
    # one wide head
    k3, tx = studies["k_relation_3_long"], studies["text_long"]
    top3, toptx = max(k3.heads), min(h for h in tx.heads if h > 1)
    k2 = sweeps["k_relation_2"]
    k2_words = {v: k2.word(v) for v in k2.points if v != 1}
    here = (f"k = 3: {top3} heads against one head: {k3.base.word(top3)} at {k3.base_steps} steps "
            f"({k3.base.comparison(top3)}), {k3.long.word(top3)} at {k3.long_steps} steps with each count's best "
            f"rate ({k3.long.comparison(top3)})" + solved_words(k3) + ". k = 2, against one head: "
            + ", ".join(f"{v} heads {w}" for v, w in k2_words.items())
            + f". Text: {toptx} heads against one: {tx.base.word(toptx)} at {tx.base_steps} steps "
            f"({tx.base.comparison(toptx)}), {tx.long.word(toptx)} at {tx.long_steps} ({tx.long.comparison(toptx)}).")
    better = [f"{name} at {st.long_steps} steps" for name, st, h in (("k = 3", k3, top3), ("text", tx, toptx))
              if st.long.word(h) == "better"]
    rows.append(["One wide head is not equivalent to several (the \"why multi-head\" argument)",
                 "Vaswani et al. 2017, Section 3.2.2 (an argument, no experiment beyond Table 3)", here,
                 "several heads better than one on " + (", ".join(better) or "neither task") + " (at the longer budget)"])
    # MQA / GQA
    for v, paper in ((1, PAPER["mqa"]), (4, PAPER["gqa"])):
        parts, kept = [], []
        for study in ("text_kv_heads", "grammar_kv_heads"):
            s = sweeps[study]
            ref, m = s.means[8], s.means[v]
            w = s.word(v)
            kept.append(w)
            parts.append(f"{TITLES[study].split(',')[0]}: {(m - ref) / ref:+.1%} against MHA, {w} "
                         f"({s.comparison(v)})")
        verdict = ("holds: within the practical threshold of MHA on both" if set(kept) == {NO_DIFFERENCE} else
                   "does not hold: worse than MHA on " + " and ".join(
                       t for t, w in zip(("text", "grammar"), kept) if w == "worse") if "worse" in kept else
                   "not resolved on " + " and ".join(t for t, w in zip(("text", "grammar"), kept) if w != NO_DIFFERENCE))
        rows.append([f"{key_label('kv_heads', v)} keeps MHA's quality with a K/V cache {8 // v}x smaller",
                     paper.text(), "; ".join(parts) + " (relative change of the test metric).", verdict])
    return md_table(["claim", "paper", "here", "verdict"], rows, align="---")


def what_changed(sweeps, studies):
    """Each comparison's verdict before issue 29 (data/before/verdicts.csv: the old data and the old
    rule, a Holm-corrected paired t-test with no threshold, "level" for anything not significant),
    the new rules on the old data (what the rules alone change), and the new rules on this data/."""
    old_data = Data(os.path.join(DATA, "before"))
    rows = []
    for b in read_csv(os.path.join(DATA, "before", "verdicts.csv")):
        study = b["study"]
        if study in studies:
            s, label = studies[study].long, f"{TITLES[study]}, {studies[study].long_steps} steps"
            o = Study(old_data, study).long
        else:
            s, label = sweeps[study], TITLES[study]
            o = Sweep(old_data, study, key=s.key, reference=s.reference)
        if b["kind"] == "headline":
            rows.append([label, "headline", f"{b['word']} ({b['seeds']} seeds)", f"{o.pattern()} ({len(o.seeds)} seeds)",
                         f"{s.pattern()} ({len(s.seeds)} seeds)"])
            continue
        a, v = int(b["a"]), int(b["b"])
        before = (f"{b['word']}: {signed(number(b['mean']), s.digits)} [{signed(number(b['lo']), s.digits)}, "
                  f"{signed(number(b['hi']), s.digits)}], Holm {fmt_p(number(b['p_holm']))} ({b['seeds']} seeds)")
        rows.append([label, f"{key_label(s.key, v)} vs {key_label(s.key, a)}", before,
                     f"{o.word(v)}: {o.comparison(v)}", f"{s.word(v)}: {s.comparison(v)} ({len(s.seeds)} seeds)"])
    return md_table(["sweep", "comparison", "before: old data, old rule", "old data, new rules",
                     "now: new data, new rules"], rows, align="---")


def same_runs(data):
    """(runs in both data/ and data/before/ with identical val and test metrics, runs in both)."""
    old = {(r["study"], r["run"]): r for r in Data(os.path.join(DATA, "before")).runs}
    keys = ("val_loss", "val_accuracy", "val_bpb", "test_loss", "test_accuracy", "test_bpb")
    both = [(old[(r["study"], r["run"])], r) for r in data.runs if (r["study"], r["run"]) in old]
    return sum(all(o[k] == r[k] for k in keys) for o, r in both), len(both)
