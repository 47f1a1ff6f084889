"""experiments/head_count: the values of results.template.md's {{placeholders}}, every one built
from data/ (tables, sentences, verdicts, the table of the sources' claims)."""
from common import fmt_p, md_table, mean_std, number, pm, signed
from stats import Paired, holm_paired

from .studies import Study
from .sweeps import LR_STUDIES, TITLES, Sweep, by_seed, key_label, steps_to, values, word


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
    f["regen_time"] = (f"about {cpu_min / 2:.0f} minutes on 2 idle cores (the runs' CPU time, at least "
                       f"{cpu_min:.0f} min, over two one-thread runs at a time); the last regeneration took "
                       f"{int(prov['run_sh_wall_s']) / 60:.0f} min of wall time while other work shared the machine "
                       f"(load average {prov['load_average_mean']} on average)")
    f["n_runs"] = prov["runs"]

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
    if sweeps["induction"].pattern() in ("one wide head is best", "splitting too finely hurts"):
        f["note induction"] = (" A plausible reason: the induction head's query-key product must match token identities "
                               "among 64 symbols, and a 4- or 8-dimensional query/key space is small for that match.")
    else:
        f["note induction"] = ""

    # k = 2: speed to 99% (paired over seeds, one head against each other count)
    k2 = sweeps["k_relation_2"]
    reached = {h: {int(r["seed"]): steps_to(data.curve(r)) for r in rows} for h, rows in k2.points.items()}
    all_reached = all(s is not None for h in reached for s in reached[h].values())
    steps = {h: {s: float(v if v is not None else int(k2.points[h][0]["steps"]) + 1) for s, v in d.items()} for h, d in reached.items()}
    cmp = {h: Paired(steps[1], steps[h]) for h in steps if h != 1}
    holm_paired(list(cmp.values()))
    f["k2 speed"] = ("Every run of every head count reached 99% val accuracy" if all_reached else
                     "Not every run reached 99% val accuracy (those that did not count as the budget + 1)") + \
        "; steps to 99%, each head count minus one head (paired, Holm): " + "; ".join(
            f"{h} heads {signed(c.mean, 0)} [{signed(c.lo, 0)}, {signed(c.hi, 0)}], {fmt_p(c.p_holm)} ({word(c, -1)})"
            for h, c in cmp.items()) + "."

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
    w = {"better": "better than", "worse": "worse than", "level": "level with"}[word(c, +1)]
    f["two_layers verdict"] = (f"Two layers are {w} one layer in test accuracy "
                               f"({signed(c.mean, 3)} [{signed(c.lo, 3)}, {signed(c.hi, 3)}], paired t-test over {c.n} seeds, {fmt_p(c.p)})")
    f["two_layers steps"] = two[0]["steps"]

    p6 = Sweep(data, "k_relation_3_p6")
    c = p6.vs_ref[3]
    f["p6 table"] = p6.table()
    w = word(c, +1)  # three heads against one head
    f["p6 verdict"] = {"worse": "one wide head beats three narrow ones here too",
                       "better": "three narrow heads beat one wide head here: the opposite of the pair-target note",
                       "level": "one wide head and three narrow ones are not distinguishable here"}[w] + \
        f" (three heads minus one head: {p6.comparison(3)}, paired over {c.n} seeds)"

    f["claims"] = claims_table(sweeps, studies)
    return f


def solved_words(study):
    """', though N of M one-head runs solved it (so: learnability, not capacity)' or ''."""
    solved = study.one_head_solved()
    if not solved or not solved[0]:
        return ""
    return (f", though {len(solved[0])} of {solved[1]} one-head runs at {study.long_steps} steps solved it "
            "(one head can represent it: the gap is learnability, not capacity)")


def claims_table(sweeps, studies):
    """Against the sources' claims: every cell built from the comparisons."""
    rows = []
    # Vaswani Table 3 (A): more heads help, up to a point
    parts = []
    for study in ("text", "k_relation_3", "induction", "grammar"):
        s = sweeps[study]
        parts.append(f"{TITLES[study]}: {s.pattern()} (best {key_label('heads', s.best)}; worse than it: "
                     + (", ".join(str(v) for v in s.worse_than_best()) or "none") + ")")
    agree = [st for st in ("text", "k_relation_3", "induction", "grammar")
             if sweeps[st].pattern() == "more heads help up to a point, then hurt"]
    head = ("**Agrees on " + ", ".join(TITLES[a] for a in agree) + "**" if agree else "**Not reproduced on any task**")
    rows.append(["More heads help, up to a point (Vaswani et al. 2017, Table 3 rows A: 1 head 0.9 BLEU worse than 8, "
                 "16 heads level with 8, 32 heads 0.4 worse)", head + ". " + "; ".join(parts) + "."])
    # d_head
    parts = []
    for study in ("text", "induction", "k_relation_3"):
        s = sweeps[study]
        ok = [s.best] + s.level_with_best()
        dh = {v: int(s.points[v][0]["d_head"]) for v in s.points}
        parts.append(f"{TITLES[study]}: best d_head {dh[s.best]}, smallest d_head not distinguishable from the best "
                     f"{min(dh[v] for v in ok)}")
    rows.append(["d_head around 64-128 at scale", "; ".join(parts) + ". At d_model 64-128 we cannot test 64 against 128 "
                 "with more than one or two heads."])
    # one wide head
    k3, tx = studies["k_relation_3_long"], studies["text_long"]
    top3, toptx = max(k3.heads), min(h for h in tx.heads if h > 1)
    k2 = sweeps["k_relation_2"]
    k2_word = [k2.word(v) for v in k2.vs_ref]
    rows.append(["One wide head is not equivalent to several (the \"why multi-head\" argument)",
                 f"k = 3: {top3} heads against one head are {k3.base.word(top3)} at {k3.base_steps} steps "
                 f"({k3.base.comparison(top3)}) and {k3.long.word(top3)} at {k3.long_steps} steps with each count's best rate "
                 f"({k3.long.comparison(top3)})" + solved_words(k3) + ". k = 2: more heads are "
                 + ("level with one head in test accuracy at every count" if set(k2_word) == {"level"} else
                    ", ".join(f"{v}: {w}" for v, w in zip(k2.vs_ref, k2_word)))
                 + f". Text: {toptx} heads against one are {tx.base.word(toptx)} at {tx.base_steps} steps ({tx.base.comparison(toptx)}) "
                 f"and {tx.long.word(toptx)} at {tx.long_steps} ({tx.long.comparison(toptx)})."])
    # MQA / GQA
    parts = []
    for study in ("text_kv_heads", "grammar_kv_heads"):
        s = sweeps[study]
        ref = mean_std(values(s.points[8], s.metric))[0]
        for v in (1, 4):
            m = mean_std(values(s.points[v], s.metric))[0]
            w = {"better": "better than", "worse": "worse than", "level": "level with"}[s.word(v)]
            parts.append(f"{TITLES[study].split(',')[0]}, {key_label('kv_heads', v)}: {(m - ref) / ref:+.1%} "
                         f"({w} MHA, {s.comparison(v)})")
    rows.append(["MQA/GQA keep most of MHA's quality with a much smaller KV cache (Shazeer 2019; Ainslie et al. 2023)",
                 "; ".join(parts) + " (relative change of the test metric against MHA; the cache is 8x and 2x smaller)."])
    return md_table(["claim", "here"], rows)

