"""experiments/pruning: the Markdown of the verdicts: the rules (from verdicts.py's constants), the
claims against the papers (claims.py), and "What changed" against data/before/verdicts.csv (the
verdicts the code before issue 29 reached: data/before/README.md)."""
import os

from common import md_table, number, read_csv
from verdicts import LEVEL_MICHEL, LEVEL_SEEDS, MIN_SEEDS, NOTICEABLE, PERMUTATIONS, PRACTICAL, smallest_p

from .analysis import EARLY, FIGURE5, LEVEL_SURVIVAL, TASKS
from .claims import SEED_TEST, all_claims

SHORT = {"single_heads": "Michel Table 1", "layer_one_head": "Michel Table 2", "orders": "importance vs ablation",
         "normalisation": "per-layer normalisation", "importance_vs_random": "importance vs random",
         "finetune": "fine-tuning", "l0": "L0 (Voita)", "early": "early (Michel Section 6)",
         "voita": "specialised heads kept (Voita)", "scratch": "from scratch (Voita)"}


def pct(x):
    return f"{x * 100:g}%"


def fill_rules(d, _):
    kinds = {t: d.metric_kind(t) for t in d.tasks}
    acc = [t for t, k in kinds.items() if k == "accuracy"]
    fallback = [t for t, k in kinds.items() if k == "loss" and TASKS[t][1] == "val_accuracy"]
    metric_words = ("accuracy on " + ", ".join(acc) if acc else "") + \
        ("; " if acc and fallback else "") + \
        (f"**loss** on the accuracy tasks {', '.join(fallback)}, whose per-example accuracy data/examples.h5 does not "
         "hold (collected before collect.py stored it)" if fallback else "")
    lines = [
        f"- **Michel Tables 1 and 2** (one head removed; one head left in a layer): per head or layer, a two-sided "
        f"paired test over the analysed examples (normal approximation) on the **task metric** ({metric_words}; loss "
        f"on grammar, bits/byte, as loss, on text), at p < {LEVEL_MICHEL:g} **uncorrected**, as Michel et al. Each is "
        f"**hurts** / **helps** (p below the level and the effect at least the practical threshold: "
        f"{PRACTICAL['accuracy'] * 100:g} accuracy point, or {pct(PRACTICAL['relative_loss'])} of the full model's "
        f"loss), **no practical change** (the {1 - LEVEL_MICHEL:.0%} interval of the effect within ± the threshold, "
        f"or significant but smaller), or **unresolved** (neither). \"Most\" is more than half, counted per seed "
        f"(each seed is its own model).",
        f"- **Fraction prunable**: the largest fraction pruned before the first round with a **noticeable** drop "
        f"(Michel's \"without noticeable impact\"): more than {NOTICEABLE['accuracy'] * 100:g} accuracy point or "
        f"{pct(NOTICEABLE['relative_loss'])} of the loss or bits/byte. L0's lambda is chosen on val by the same "
        f"threshold and reported on test.",
        f"- **Seed-level claims** (one order against another, with or without fine-tuning, from scratch against "
        f"pruned, ours against a paper's number): the two-sided paired {SEED_TEST}-test over seeds at level "
        f"{LEVEL_SEEDS:g}, with a practical threshold ({PRACTICAL['prune_fraction']:g} of the heads for fractions "
        f"prunable; {PRACTICAL['accuracy'] * 100:g} point or {pct(PRACTICAL['relative_loss'])} for the metric), "
        f"over at least {MIN_SEEDS} paired seeds: fewer give **inconclusive**, whatever the seeds show.",
        f"- **Voita's specialised heads under L0**: a one-sided permutation test ({PERMUTATIONS} draws) with the roles "
        f"permuted **within each layer** of each model, at {LEVEL_SURVIVAL:g}, and a threshold of "
        f"{PRACTICAL['kept_rate']:g} on the difference of the shares kept.",
        f"- **Michel's Section 6** (Figure 5): the checkpoint nearest {EARLY:.0%} of training (their epoch "
        f"{FIGURE5['epoch']} of {FIGURE5['epochs']}), pruned by its own importance: the fraction pruned while the "
        f"metric keeps {FIGURE5['retained'][0]:.0%} (and {FIGURE5['retained'][1]:.0%}) of that checkpoint's own, "
        f"against the paper's {FIGURE5['fraction_pruned']:.0%}.",
        "- Every verdict is **holds** / **does not hold** / **inconclusive** with its test, level and threshold "
        "(experiments/verdicts.py; docs/verdicts.md lists the rules and the papers' criteria they follow).",
    ]
    return "\n".join(lines)


def fill_claims_summary(d, _):
    claims = all_claims(d)
    rows = []
    for key, c in claims.items():
        words = {r.task: r.word for r in c.rows}
        rows.append([c.title, c.paper] + [words.get(t, "–") for t in d.tasks])
    return md_table(["claim", "the paper"] + d.tasks, rows, align="---")


def fill_claims_details(d, _):
    parts = []
    for key, c in all_claims(d).items():
        table = md_table(["task", "measured here", "verdict"], [[r.task, r.ours, r.verdict] for r in c.rows],
                         align="---")
        parts.append(f"### {c.title}\n\n**The paper:** {c.paper}. **Rule:** {c.rule}.\n\n{table}")
    return "\n\n".join(parts)


def fill_what_changed(d, _):
    """Three columns per claim and task: the old data with the old rules (data/before/verdicts.csv),
    the old data with the new rules (data/before/verdicts_new_rules.csv: the rules of docs/verdicts.md
    run on the 3-seed data, dumped before the regeneration), and data/ now with the new rules, so a
    change can be read as the rule's or the data's."""
    path = os.path.join(d.folder, "before", "verdicts.csv")
    if not os.path.exists(path):
        return f"*({os.path.relpath(path, d.folder)} is missing: no record of the verdicts before issue 29)*"
    middle_path = os.path.join(d.folder, "before", "verdicts_new_rules.csv")
    middle = {(r["claim"], r["task"]): r for r in read_csv(middle_path)} if os.path.exists(middle_path) else {}
    now = {(k, r.task): r for k, c in all_claims(d).items() for r in c.rows}
    rows = []
    for b in read_csv(path):
        key = (b["claim"], b["task"])
        m, r = middle.get(key), now.get(key)
        rows.append([SHORT.get(b["claim"], b["claim"]), b["task"], f"{b['word']}: {b['measured']}",
                     f"{m['word']}: {m['measured']}" if m else "–",
                     f"{r.word}: {r.ours}" if r else ("–" if b["task"] in d.tasks else "*(not in data/ yet)*")])
    return md_table(["claim", "task", "old data, old rules (code at 7cb9853)", "old data, new rules",
                     "new data, new rules (docs/verdicts.md)"], rows, align="---")


def fill_few_seeds(d, _):
    n = min(len(d.seeds[t]) for t in d.tasks)
    return f"with {n} seeds, the fewest of any task here, the exact two-sided sign test cannot go below " \
           f"p = {smallest_p('sign', n):g}"


def fill_figure5(d, _):
    lo, hi = FIGURE5["retained"]
    return (f"from epoch {FIGURE5['epoch']} of {FIGURE5['epochs']} on, about {FIGURE5['fraction_pruned']:.0%} of the "
            f"heads can be pruned keeping {lo:.0%}-{hi:.0%} of it")


def fill_old_rules(d, _):
    """The rules before issue 29, from the old code's constants (data/before/rules.csv)."""
    path = os.path.join(d.folder, "before", "rules.csv")
    if not os.path.exists(path):
        return ""
    old = {r["key"]: number(r["value"]) for r in read_csv(path)}
    return (f"Before: each example's loss with Holm's correction at {old['ALPHA']:g} and no practical threshold for "
            f"Tables 1 and 2, \"some layer\" of each seed for Table 2, a drop within {old['TOLERANCE'] * 100:g}% (or "
            f"points) for \"prunable\" and for L0's lambda, and \"every seed\" for a direction.")
