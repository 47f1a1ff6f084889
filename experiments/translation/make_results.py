#!/usr/bin/env python3
"""experiments/translation (issue 30): RESULTS.md and figures/ from data/, whatever arms it holds.

  python3 experiments/translation/make_results.py           RESULTS.md and figures/ from data/
  python3 experiments/translation/make_results.py --data D  D/../RESULTS.md and D/../figures/ (a dev run)
  python3 experiments/translation/make_results.py --check   exit 0 iff RESULTS.md is what data/ gives

data/<arm>/ is one arm of run.sh (collect.py describes the files); an arm not in data/ is listed
as not run. The verdicts use the shared rules of experiments/verdicts.py (docs/verdicts.md).
"""
import argparse
import copy
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common, stats, verdicts
from common import (  # noqa: E402
    CsvError, cell, check_results, fail, md_table, number, read_csv, read_text, save_figure, pyplot,
    write_atomically
)
from verdicts import PAPER, PAPER_NUMBERS, PLATEAU_TAIL, PRACTICAL, last_quarter_gain, plateaued, \
    steps_to_plateau  # noqa: E402
from translation.collect import (  # noqa: E402
    ARMS, EQUALS_DATA_BASE, HEAD_COUNT_STUDIES as HEAD_COUNT_ARMS, RETRAINS_BASE, SETTINGS_SEED, SETTINGS_STEPS, SETUP_KEYS,
    base_machines, base_value, setup_changes)


class Data:
    def __init__(self, folder):
        self.folder = folder
        # RESULTS.md and figures/ go beside data/: experiments/translation/ for the committed data,
        # elsewhere for a dev run's (run.sh with DATA=/tmp/t/data writes /tmp/t/RESULTS.md)
        self.out = os.path.dirname(os.path.abspath(folder))
        self.arms = [a for a in ARMS if os.path.exists(os.path.join(folder, a, "provenance.csv"))]

    def read(self, arm, name):
        return read_csv(os.path.join(self.folder, arm, name), "run experiments/translation/run.sh " + arm)

    def parts(self, arm):
        """data/<arm>/provenance.csv: one row per part of the arm (collect.py merge_provenance)."""
        return self.read(arm, "provenance.csv")


def not_run(arm):
    return f"*(arm `{arm}` not run yet: `experiments/translation/run.sh {arm}`)*"


def retrained_elsewhere(d, machines, arm, part):
    """The base seeds a part of an arm that retrains base models (RETRAINS_BASE) analysed as
    retrained there, other than data/base/'s: those its base_setup.csv records as not equal to
    data/base/'s digit for digit; for a part that did not record it, those data/base/ trained on
    another kind of machine (machines: collect.base_machines), whose numerics may round otherwise."""
    if arm not in RETRAINS_BASE or not machines:
        return []
    seeds = [int(s) for s in (part["part"].split() if part["part"] != "all" else sorted(machines))]
    path = os.path.join(d.folder, arm, "base_setup.csv")
    equal = {int(r["seed"]): r.get(EQUALS_DATA_BASE, "") for r in d.read(arm, "base_setup.csv")} \
        if os.path.exists(path) else {}
    return [s for s in seeds if equal.get(s) == "no" or
            (not equal.get(s) and machines.get(s, part["machine"]) != part["machine"])]


def fill_arms(d):
    """One row per part of every arm (run.sh's SEEDS), the arms not run yet included."""
    rows, machines, other_models = [], base_machines(d.folder), arms_on_other_base_models(d)
    for arm, what in ARMS.items():
        if arm not in d.arms:
            rows.append([f"`{arm}`", what, "", "not run yet", "", "", ""])
            continue
        for p in d.parts(arm):
            wall = number(p["wall_seconds"])
            # an arm on another configuration's base models: the verdicts' note says so instead
            elsewhere = [] if arm in other_models else retrained_elsewhere(d, machines, arm, p)
            rows.append([f"`{arm}`", what, p["part"], f"`{p['commit']}`" +
                         (" (uncommitted changes)" if p["uncommitted_changes"] == "yes" else ""),
                         p["started_utc"], "–" if math.isnan(wall) else f"{wall / 60:.0f} min",
                         f"{p['machine']}; highest 1-min load {p['max_load_1min'] or '–'}" +
                         (f"; base seed {', '.join(map(str, elsewhere))} retrained here, not data/base/'s model "
                          "(trained on another kind of machine)" if elsewhere else "")])
            what = ""
    return md_table(["arm", "what", "part", "commit", "started (UTC)", "wall time", "machine"], rows, align="---")


def base_curves(d):
    curves = {}
    for r in d.read("base", "curves.csv"):
        curves.setdefault(int(r["seed"]), []).append((int(r["step"]), number(r["val_bleu"]), number(r["val_loss"])))
    return curves


def fill_base_setup(d):
    if "base" not in d.arms:
        return not_run("base")
    setup = d.read("base", "setup.csv")
    s = setup[0]
    keys = [k for k in s if k != "seed" and k != "train.seed"]
    differing = [k for k in keys if len({r[k] for r in setup}) > 1]
    if differing:
        fail(f"data/base/setup.csv: the seeds differ in {', '.join(differing)}")
    return stale_base_note(d) + md_table(["key", "value"], [[f"`{k}`", s[k]] for k in keys], align="---") + \
        f"\n\nSeeds: {', '.join(r['seed'] for r in setup)}."


def base_config_changes(d):
    """["key: data/base/'s value -> base.toml's"] for every setup.csv column (the seed aside) whose
    committed value is not what base.toml now trains: data/base/ holds an earlier configuration's
    models until the base arm runs again ([] when they agree or before the base arm)."""
    if "base" not in d.arms:
        return []
    row = d.read("base", "setup.csv")[0]
    changes = []
    recorded = [f"{section}.{k}" for section, keys in SETUP_KEYS.items() for k in keys]
    for key in dict.fromkeys([*row, *recorded]):
        old = row.get(key, "")
        if key in ("seed", "train.seed") or (old == "" and key in row):
            continue
        new = base_value(os.path.join(HERE, "base.toml"), key)
        if key not in row:  # a column added to setup.csv after the base arm ran
            changes.append(f"`{key}` (not recorded) → {new}")
            continue
        same = number(old) == float(new) if isinstance(new, (int, float)) and not isinstance(new, bool) else old == str(new)
        if not same:
            changes.append(f"`{key}` {old} → {new}")
    return changes


def stale_base_note(d):
    """A paragraph when data/base/ is not base.toml's configuration ("" otherwise)."""
    changes = base_config_changes(d)
    if not changes:
        return ""
    return ("**The committed base models are of an earlier base configuration**: base.toml has changed since "
            "the base arm ran (" + "; ".join(changes) + "). The base arm and the arms built on its models "
            "(michel, voita, voita_scratch) describe the earlier models until they run again.\n\n")


def arms_on_other_base_models(d):
    """{arm: why} for the arms built on the base models that analysed other models than data/base/'s
    configuration: michel and voita by the base_setup.csv they record (none: analysed before it was
    recorded), voita_scratch when its layouts are not the ones data/voita/ now chooses or voita is
    itself listed ({} before the base arm)."""
    if "base" not in d.arms:
        return {}
    base = d.read("base", "setup.csv")[0]
    stale = {}
    for arm in ("michel", "voita"):
        if arm not in d.arms:
            continue
        if not os.path.exists(os.path.join(d.folder, arm, "base_setup.csv")):
            stale[arm] = "which base models it analysed was not recorded (it ran before that was)"
            continue
        changes = sorted({c for r in d.read(arm, "base_setup.csv") for c in setup_changes(r, base)})
        if changes:
            stale[arm] = "its base models had " + "; ".join(changes).replace(" -> ", " where data/base/ has ")
    if "voita_scratch" in d.arms and "voita" in d.arms:
        from translation import voita as V
        prune = d.read("voita", "prune.csv")
        moved = []
        for r in d.read("voita_scratch", "scratch.csv"):
            chosen = V.chosen(prune, int(r["seed"]))
            if chosen is None or V.layout(chosen[1]) != "[" + r["active_heads"].replace(" ", ",") + "]":
                moved.append(r["seed"])
        if "voita" in stale:
            stale["voita_scratch"] = "its layouts come from the voita arm's data"
        elif moved:
            stale["voita_scratch"] = f"data/voita/ now chooses other layouts for seeds {', '.join(moved)}"
    return stale


def stale_arms_note(d):
    """A paragraph naming the arms on other base models than data/base/'s ("" when there are none)."""
    stale = arms_on_other_base_models(d)
    if not stale:
        return ""
    return ("**Arms not known to be on data/base/'s base models**: " +
            "; ".join(f"{arm} ({why})" for arm, why in stale.items()) +
            ". Their sections and verdicts describe those models until they run again.\n\n")


def fill_base_test(d):
    if "base" not in d.arms:
        return not_run("base")
    test = d.read("base", "test.csv")
    rows = [[r["seed"], r["step"], f"{number(r['bleu']):.2f}", f"{number(r['chrf']):.2f}", f"{number(r['loss']):.3f}"]
            for r in test]
    rows.append(["mean ± sd", "", cell((number(r["bleu"]) for r in test), 2), cell((number(r["chrf"]) for r in test), 2),
                 cell((number(r["loss"]) for r in test), 3)])
    return (f"{test[0]['sentences']} test verses, beam {test[0]['beam']}, each seed's base checkpoint (its lowest "
            "val loss, `best.h5`; the final one while val loss still falls):\n\n"
            + md_table(["seed", "step", "BLEU", "chrF", "loss (nats/token)"], rows))


def lowest_val_loss(curve):
    """The (step, val BLEU, val loss) of a curve's lowest val loss (best.h5's evaluation)."""
    return min(curve, key=lambda c: c[2])


def val_bleu_gain(curve):
    """The last quarter's val BLEU gain of a curve [(step, val BLEU, val loss)] (None: too short)."""
    return last_quarter_gain([(s, b) for s, b, _ in curve], higher_is_better=True, relative=False)


def fill_base_plateau(d):
    if "base" not in d.arms:
        return not_run("base")
    rows, past, disagree = [], 0, []
    analysed = {int(r["seed"]): int(r["step"]) for r in d.read("base", "test.csv")}
    for seed, curve in sorted(base_curves(d).items()):
        bleu = val_bleu_gain(curve)
        loss = last_quarter_gain([(s, v) for s, _, v in curve], higher_is_better=False, relative=True)
        at_plateau = plateaued(loss, threshold=PRACTICAL["relative_loss"])
        needed = None if at_plateau else steps_to_plateau([(s, v) for s, _, v in curve],
                                                          threshold=PRACTICAL["relative_loss"])
        lowest = lowest_val_loss(curve)
        past += lowest[0] < curve[-1][0]
        bleu_flat = plateaued(bleu, threshold=PRACTICAL["bleu"])
        if bleu is not None and loss is not None and bleu_flat != at_plateau:
            disagree.append(f"seed {seed} (val loss gain {loss * 100:+.2f}%, greedy val BLEU gain {bleu:+.2f})")
        rows.append([seed, "–" if bleu is None else f"{bleu:+.2f}",
                     "yes" if bleu_flat else "no",
                     "–" if loss is None else f"{loss * 100:+.2f}%", "yes" if at_plateau else "no",
                     "–" if at_plateau else "beyond 1e9" if needed is None else f"{needed[0]:,} ({needed[1]:.2f})",
                     f"{lowest[2]:.3f} (step {lowest[0]:,} of {curve[-1][0]:,})", f"{analysed.get(seed, '–'):,}"])
    return (md_table(["seed", "val BLEU gain, last quarter", f"< {PRACTICAL['bleu']:g} BLEU",
                      "val loss gain, last quarter", f"< {PRACTICAL['relative_loss']:.0%}",
                      "steps the loss rule would need (alpha)", "lowest val loss", "analysed checkpoint (step)"], rows) +
            f"\n\nVal loss passed its lowest before the last evaluation in {past} of {len(rows)} seeds: those seeds "
            "trained past their plateau, and every arm on the base models analyses each seed at its lowest val loss "
            "(`best.h5`; its step is the last column). The steps column, for a seed whose loss misses the rule: "
            "where a power law a + b t^-alpha fitted to its val loss curve (verdicts.steps_to_plateau) puts a last "
            f"quarter gaining less than {PRACTICAL['relative_loss']:.0%}; an extrapolation over a curve its schedule "
            "shapes too, read as an order of magnitude." + (
                "\n\nThe two rules disagree on " + ", ".join(disagree) + ": over the last quarter one measure stopped "
                "improving while the other did not. The verdicts' plateau rule reads BLEU (the papers' measure) but the "
                "analysed checkpoint is the one of lowest val loss, so such a seed is analysed where its loss, not its "
                "greedy BLEU, stopped improving." if disagree else ""))


def settings_curves(d):
    """{(lr, dropout): [(step, val BLEU, val loss)]} of the settings arm ({} before it ran)."""
    if "settings" not in d.arms:
        return {}
    curves = {}
    for r in d.read("settings", "curves.csv"):
        curves.setdefault((number(r["lr"]), number(r["dropout"])), []).append(
            (int(r["step"]), number(r["val_bleu"]), number(r["val_loss"])))
    return curves


def base_repeats_settings(d):
    """Words on whether base seed SETTINGS_SEED repeats the settings arm's run at the base
    configuration's rate and dropout (the same config and seed when base.toml trains SETTINGS_STEPS
    steps) digit for digit ("" when the base arm has not run or trains another configuration)."""
    if "base" not in d.arms:
        return ""
    setup = next((r for r in d.read("base", "setup.csv") if int(r["seed"]) == SETTINGS_SEED), None)
    if setup is None or not setup.get("model.dropout") or int(setup["train.steps"]) != SETTINGS_STEPS:
        return ""
    key = (number(setup["train.lr"]), number(setup["model.dropout"]))
    columns = ("step", "train_loss", "val_loss", "val_bleu")
    ours = [tuple(r[c] for c in columns) for r in d.read("settings", "curves.csv")
            if (number(r["lr"]), number(r["dropout"])) == key]
    base = [tuple(r[c] for c in columns) for r in d.read("base", "curves.csv") if int(r["seed"]) == SETTINGS_SEED]
    if not ours or not base:
        return ""
    words = f" The run at the base configuration's settings (lr {key[0]:g}, dropout {key[1]:g}) is base seed {SETTINGS_SEED}"
    machines = {p["machine"] for p in d.parts("settings")}
    if machines != {base_machines(d.folder).get(SETTINGS_SEED)}:
        return words + (" trained on another kind of machine (the native build rounds differently): not compared "
                        "digit for digit.")
    return words + (": its evaluations equal the base arm's digit for digit." if ours == base else
                    ": its evaluations differ from the base arm's (numerics changed between the two arms' commits).")


def fill_settings(d):
    """The base config at twice its steps under each rate and dropout: which reaches the plateau."""
    curves = settings_curves(d)
    if not curves:
        return not_run("settings")
    rows = []
    for (lr, dropout), curve in sorted(curves.items()):
        gain = val_bleu_gain(curve)
        best = max(curve, key=lambda c: c[1])
        lowest = lowest_val_loss(curve)
        rows.append([f"{lr:g}", f"{dropout:g}", f"{curve[-1][1]:.2f}", f"{best[1]:.2f} (step {best[0]:,})",
                     "–" if gain is None else f"{gain:+.2f}", "yes" if plateaued(gain, threshold=PRACTICAL["bleu"])
                     else "no", f"{curve[-1][2]:.3f}", f"{lowest[2]:.3f} (step {lowest[0]:,})"])
    steps = max(s for curve in curves.values() for s, _, _ in curve)
    return (md_table(["lr", "dropout", "final val BLEU", "best val BLEU", "val BLEU gain, last quarter",
                      f"< {PRACTICAL['bleu']:g} BLEU", "final val loss", "lowest val loss"], rows) +
            f"\n\nSeed {SETTINGS_SEED}, {steps:,} steps each, the cosine schedule over "
            "them; val BLEU greedy over the verses `train.eval_bleu_sentences` allows. One seed per setting: a "
            "description that chooses the next base configuration, not a test." +
            base_repeats_settings(d) + "\n\n![settings curves](figures/settings_curves.png)")


def settings_figure(d):
    """Val BLEU and val loss of every setting on one step axis, the last quarter shaded."""
    curves = settings_curves(d)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, ((lr, dropout), curve) in enumerate(sorted(curves.items())):
        for ax, column in zip(axes, (1, 2)):
            ax.plot([c[0] for c in curve], [c[column] for c in curve], marker=".", color=f"C{i}",
                    label=f"lr {lr:g}, dropout {dropout:g}")
    final = max(s for curve in curves.values() for s, _, _ in curve)
    for ax, label in zip(axes, ("val BLEU (greedy)", "val loss (nats/token)")):
        ax.axvspan((1 - PLATEAU_TAIL) * final, final, color="0.92", zorder=0)
        ax.set_xlabel("step")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Translation (KJV -> RV1909): the base config at {final:,} steps, seed {SETTINGS_SEED}, by rate "
                 "and dropout; shaded: the last quarter, where the plateau is judged", fontsize=9)
    save_figure(fig, os.path.join(d.out, "figures", "settings_curves.png"), dpi=110, tight_layout=True,
                strip_software=True)


def band(ax, c, color, label, style="-"):
    """Mean over seeds of curves {seed: [(x, y), ...]} that share their x (rounds), min-max band."""
    n = min(len(v) for v in c.values())
    xs = [next(iter(c.values()))[i][0] for i in range(n)]
    ys = [[v[i][1] for v in c.values()] for i in range(n)]
    ax.plot(xs, [sum(y) / len(y) for y in ys], style, color=color, label=label)
    ax.fill_between(xs, [min(y) for y in ys], [max(y) for y in ys], color=color, alpha=0.15, linewidth=0)


def michel_figure(d):
    """Figures 3 and 4 side by side, one y-scale, the unpruned level dotted."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, arms, title, xlabel in (
            (axes[0], MICHEL_ARMS[:3], "Figure 3: all kinds, by order", "fraction of all heads masked"),
            (axes[1], MICHEL_ARMS[3:], "Figure 4: one kind at a time, by importance",
             "fraction of the pruned kind's heads masked")):
        for i, (arm, words) in enumerate(arms):
            c = arm_curves(d, arm)
            if c:
                band(ax, c, f"C{i}", words)
        full = [curve[0][1] for curve in arm_curves(d, "importance").values()]
        if full:
            ax.axhline(sum(full) / len(full), color="0.5", linestyle=":", label="unpruned")
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("test BLEU (beam 5)")
    fig.suptitle("Translation (KJV -> RV1909): BLEU as heads are pruned, mean over seeds, min-max band", fontsize=9)
    save_figure(fig, os.path.join(d.out, "figures", "michel_pruning.png"), dpi=110, tight_layout=True,
                strip_software=True)


def figures(d):
    if "michel" in d.arms:
        michel_figure(d)
    if "voita" in d.arms:
        voita_figure(d)
    if settings_curves(d):
        settings_figure(d)
    if "base" not in d.arms:
        return
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for seed, curve in sorted(base_curves(d).items()):
        steps = [s for s, _, _ in curve]
        axes[0].plot(steps, [b for _, b, _ in curve], marker=".", label=f"seed {seed}")
        axes[1].plot(steps, [v for _, _, v in curve], marker=".", label=f"seed {seed}")
    final = max(s for curve in base_curves(d).values() for s, _, _ in curve)
    for ax, label in zip(axes, ("val BLEU (greedy)", "val loss (nats/token)")):
        ax.axvspan((1 - PLATEAU_TAIL) * final, final, color="0.92", zorder=0)
        ax.set_xlabel("step")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.suptitle("Translation (KJV -> RV1909) base models: validation curves; shaded: the last quarter, "
                 "where the plateau is judged", fontsize=9)
    save_figure(fig, os.path.join(d.out, "figures", "base_curves.png"), dpi=110, tight_layout=True,
                strip_software=True)


# ---- head count (Vaswani Table 3 A) -------------------------------------------------------------------

# What each head-count study holds fixed (HEAD_COUNT_ARMS: arm -> study, as collect.py collects them).
HEAD_COUNT_STUDIES = {"seeds": "d_model fixed (d_head = d_model / heads), as in Vaswani et al. Table 3 A",
                      "d_head": "d_head fixed at the base model's (the attention width grows with the heads)"}


def head_count_sweeps(d):
    """The head-count arms' runs as one head_count.sweeps.Data, and a Sweep per study present."""
    from head_count.sweeps import Data as RunsData, Sweep
    parts = [RunsData(os.path.join(d.folder, arm), with_provenance=False) for arm in HEAD_COUNT_ARMS if arm in d.arms]
    runs = parts[0]
    for p in parts[1:]:
        runs.runs += p.runs
        runs.curves.update(p.curves)
    return runs, {study: Sweep(runs, study) for study in HEAD_COUNT_STUDIES if runs.rows(study)}


def head_count_budget(d, runs):
    """The head-count arms' fixed step budget against the base models' (and where the base curve
    stands at it)."""
    steps = sorted({int(r["steps"]) for r in runs.runs})
    words = (f"Every head-count run trains {' or '.join(map(str, steps))} steps with the base config's warmup and "
             f"schedule (Vaswani et al. trained every Table 3 row for their base model's steps, 100K); a fixed "
             f"budget, so the counts are compared at equal steps, not each at its plateau.")
    if "base" not in d.arms or len(steps) != 1:
        return words
    curves = base_curves(d)
    at = [dict((st, b) for st, b, _ in c).get(steps[0], math.nan) for c in curves.values()]
    final = [c[-1][1] for c in curves.values()]
    if any(math.isnan(x) for x in at):
        return words
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return (words + f" The base models (trained {curves[min(curves)][-1][0]} steps) had reached a mean val BLEU "
            f"of {mean(at):.2f} at step {steps[0]} (under their own, longer schedule), against {mean(final):.2f} at "
            f"their end.")


def head_count_rates(rows):
    """The rate sweep: every count's final val loss and val BLEU at each rate, the rate the rule
    chose (val BLEU) beside the one the earlier rule (val loss) would have chosen."""
    from head_count.runs import DEFAULT_RATE_CRITERION, choose_rates, rate_rule_words
    from head_count.sweeps import key_label
    chosen, by_loss = choose_rates(rows), choose_rates(rows, criterion=DEFAULT_RATE_CRITERION)
    rates = sorted({float(r["lr"]) for r in rows})
    table = []
    for h in sorted(chosen):
        cells = {float(r["lr"]): r for r in rows if int(r["heads"]) == h}
        table.append([key_label("heads", h)] +
                     [f"{number(cells[lr]['val_loss']):.3f} / {number(cells[lr]['val_bleu']):.2f}" if lr in cells else "–"
                      for lr in rates] + [f"{chosen[h]:g}", f"{by_loss[h]:g}"])
    differ = [key_label("heads", h) for h in chosen if chosen[h] != by_loss[h]]
    lowest = [key_label("heads", h) for h in chosen if chosen[h] == rates[0]]
    return (md_table(["seed 0, val loss / val BLEU"] + [f"lr {lr:g}" for lr in rates] +
                     ["chosen (val BLEU)", "by val loss"], table)
            + f"\n\nEach count's rate: {rate_rule_words(rows)} of its seed-0 runs. The two rules disagree at "
            f"{len(differ)} of {len(chosen)} counts{' (' + ', '.join(differ) + ')' if differ else ''}. The chosen rate "
            f"is the grid's lowest ({rates[0]:g}) at {len(lowest)} of {len(chosen)} counts"
            f"{': there the grid does not bracket the best rate' if lowest else ''}.")


def head_count_rate_check(d, runs, sweeps):
    """The counts also trained at their runner-up rates (arm head_count_rate_check, RATE_CHECK_HEADS;
    one head, every comparison's reference, first): each such count keeps the rate whose runs on the
    fresh seeds ended with the better mean of the rate rule's val metric (test plays no part), and
    the fixed-d_model family is redone with the kept runs: a sensitivity check stated beside the
    verdicts, not a replacement of them."""
    from head_count.fields import too_many_hurt
    from head_count.runs import RATE_COLUMN_WORDS
    from head_count.sweeps import Sweep, key_label
    s = sweeps.get("seeds")
    if "head_count_rate_check" not in d.arms or s is None:
        return "**The rates checked**: " + not_run("head_count_rate_check" if s else "head_count")
    a, kept, runner_up, column, better = rate_checked(runs, s)
    words = RATE_COLUMN_WORDS[column]
    lr = lambda rows: float(rows[0]["lr"])  # noqa: E731
    table = []
    for h, second in sorted(runner_up.items()):
        # the count's two rates as the points 0 (chosen on seed 0) and 1 (runner-up)
        pair = Sweep(study_of(runs, [dict(r, heads=str(i)) for i, rows in enumerate((s.points[h], second))
                                     for r in rows]), "study", reference=0)
        table.append([key_label("heads", h), f"{lr(s.points[h]):g}", pair.ms(0, column, 2), pair.ms(0),
                      f"{lr(second):g}", pair.ms(1, column, 2), pair.ms(1), pair.comparison(1), f"{lr(kept[h]):g}"])
    table = md_table(["heads", "lr (seed 0's choice)", words, "test BLEU", "runner-up lr", words, "test BLEU",
                      "Δ test BLEU, runner-up − chosen [95% CI], p", "kept"], table)
    ref = a.reference
    ref_label = key_label("heads", ref) + ("" if kept[ref] is s.points[ref] else f" at lr {lr(kept[ref]):g}")
    changed = [f"{key_label('heads', v)} ({s.word(v)} -> {a.word(v)})" for v in a.points
               if v != ref and a.word(v) != s.word(v)]
    metric, leads = rate_leads(runs.rows("lr"))
    leads = "; ".join(f"{key_label('heads', h)} {lead:.2f}" for h, lead in leads.items())
    return (f"**The rates checked.** Every count is compared with one head, so its rate weighs on every verdict, "
            f"and every rate was chosen on one seed: each count's chosen rate led its runner-up by (final {metric}) "
            f"{leads}. The arm `head_count_rate_check` trains {count_words(sorted(runner_up))} at the runner-up rate "
            f"for the same fresh seeds; a count run at both rates keeps the one with the {rate_rule_word(better)} mean "
            f"final {words} over those seeds (test plays no part), and the family above is redone with the kept "
            f"runs: a sensitivity check stated beside the verdicts above, not a second chance at them.\n\n{table}\n\n"
            f"{a.vs_ref_sentence(ref_label)} {a.best_sentence()} "
            f"Verdicts against one head that change: {', '.join(changed) if changed else 'none'}. "
            f"The first half of Vaswani et al.'s finding (more heads better than one) "
            f"{survives(s.resolved('better'), a.resolved('better'))} this check (better than {ref_label}: "
            f"{a.unit_list(a.resolved('better'))}). The second half (the largest count worse than the best) "
            f"{survives(too_many_hurt(s), too_many_hurt(a))} this check.")


def count_words(counts):
    """'1 head', '1, 2, 4 heads'."""
    return ", ".join(map(str, counts)) + (" head" if counts == [1] else " heads")


def rate_rule_word(better):
    return "lower" if better is min else "higher"


def rate_checked(runs, s):
    """The fixed-d_model family redone with every count the rate check trained at its runner-up rate
    kept at whichever of its two rates ended with the better mean of the rate rule's val metric over
    the fresh seeds (a tie keeps seed 0's choice): (that Sweep, {count: kept runs}, {count: runner-up
    runs}, the metric's column, min or max)."""
    from head_count.runs import RATE_COLUMN_WORDS, rate_criterion
    from head_count.sweeps import Sweep, key_label, values
    from stats import mean_std
    column, better = rate_criterion(runs.rows("lr"))
    runner_up = {}
    for r in runs.rows("rate_check"):
        runner_up.setdefault(int(r["heads"]), []).append(r)

    def kept_runs(h, rows):
        if h not in runner_up:
            return rows
        chosen, second = (mean_std(values(x, column))[0] for x in (rows, runner_up[h]))
        if math.isnan(chosen) or math.isnan(second):
            fail(f"{key_label('heads', h)}: a run without its final {RATE_COLUMN_WORDS[column]} in head_count or "
                 "head_count_rate_check")
        return runner_up[h] if (second < chosen if better is min else second > chosen) else rows
    kept = {h: kept_runs(h, rows) for h, rows in s.points.items()}
    return Sweep(study_of(runs, [r for rows in kept.values() for r in rows]), "study"), kept, runner_up, column, better


def study_of(runs, rows):
    """A copy of the head-count runs holding just ROWS, as one study named "study"."""
    out = copy.copy(runs)
    out.runs = [dict(r, study="study") for r in rows]
    return out


def survives(shown, shown_in_check):
    if not shown:
        return "was not shown before"
    return "survives" if shown_in_check else "does not survive"


def rate_leads(rows):
    """(the rate rule's metric in words, {head count: how far its chosen rate's seed-0 final value
    led its runner-up's})."""
    from head_count.runs import RATE_COLUMN_WORDS, rate_criterion, ranked_rates
    column, _ = rate_criterion(rows)
    value = {(int(r["heads"]), float(r["lr"])): number(r[column]) for r in rows}
    # ranked_rates puts the better value first, so the lead is the distance between the first two.
    return RATE_COLUMN_WORDS[column], {h: abs(value[(h, lrs[0])] - value[(h, lrs[1])])
                                       for h, lrs in ranked_rates(rows).items() if len(lrs) > 1}


def fill_head_count(d):
    if "head_count_lr" not in d.arms:
        return not_run("head_count_lr")
    from head_count.fields import too_many_hurt
    runs, sweeps = head_count_sweeps(d)
    parts = [head_count_budget(d, runs), head_count_rates(runs.rows("lr"))]
    vaswani = PAPER_NUMBERS["vaswani_table3a"]
    for study, words in HEAD_COUNT_STUDIES.items():
        s = sweeps.get(study)
        if s is None:
            arm = next(a for a, st in HEAD_COUNT_ARMS.items() if st == study)
            parts.append(f"**{words}**: {not_run(arm)}")
            continue
        paper = "; ".join(f"{h}: {vaswani[h]:g}" for h in s.points if h in vaswani)
        parts += [f"**{words}.** {s.pattern()}.", s.table(), s.vs_ref_sentence() + " " + s.best_sentence(),
                  f"Vaswani et al.'s dev BLEU at the same counts (d_model 512, WMT En-De): {paper}. "
                  f"Both halves of their finding: more heads better than one here: "
                  f"{'yes (' + s.unit_list(s.resolved('better')) + ')' if s.resolved('better') else 'not shown'}; "
                  f"the largest count worse than the best: {'yes' if too_many_hurt(s) else 'not shown'} "
                  f"(paper: {PAPER['vaswani_table3a'].text()})."]
        if study == "seeds":
            parts.append(head_count_rate_check(d, runs, sweeps))
    return "\n\n".join(parts)


# ---- Michel et al. in BLEU --------------------------------------------------------------------------------


def fill_michel_table1(d):
    if "michel" not in d.arms:
        return not_run("michel")
    from verdicts import HELPS, HURTS, NO_CHANGE, UNRESOLVED
    from translation import michel as M
    rows = d.read("michel", "bleu_ablation.csv")
    out = []
    for kind in M.KINDS:
        for seed, (counts, n, calm) in M.table1(rows, kind).items():
            out.append([M.KIND_WORDS[kind], seed, n, counts[HURTS], counts[HELPS], counts[NO_CHANGE], counts[UNRESOLVED],
                        calm])
    return (md_table(["attention", "seed", "heads", "hurts", "helps", "no practical change", "unresolved",
                      "not significant (Michel's criterion)"], out)
            + f"\n\nMichel et al. (Table 1, WMT En-Fr, 6 layers x 16 heads): {PAPER['michel_table1'].text()}.")


def fill_michel_table2(d):
    if "michel" not in d.arms:
        return not_run("michel")
    from verdicts import HELPS, HURTS
    from translation import michel as M
    t2 = M.table2(d.read("michel", "bleu_ablation.csv"))
    out = []
    for seed, sites in t2.items():
        changed = sum(c in (HURTS, HELPS) for _, c in sites.values())
        calm = M.table2_not_significant(sites)
        worst = min(sites.items(), key=lambda kv: number(kv[1][0]["layer_only_bleu_delta"]))
        out.append([seed, len(sites), changed, calm, ", ".join(f"{M.KIND_WORDS[k]} {layer}: {c}" for (k, layer), (_, c)
                                                          in sites.items()),
                    f"{M.KIND_WORDS[worst[0][0]]} layer {worst[0][1]}: "
                    f"{number(worst[1][0]['layer_only_bleu_delta']):+.2f}"])
    return (md_table(["seed", "sites", "changed (hurts or helps)", "not significant (Michel's criterion)",
                      "each site's class", "largest drop"], out,
                     align="---") + f"\n\nMichel et al. (Table 2): {PAPER['michel_table2'].text()}.")


def fill_alignment(d):
    if "michel" not in d.arms:
        return not_run("michel")
    from translation import michel as M
    aligned, prune = d.read("michel", "alignment.csv"), d.read("michel", "prune.csv")
    n_enc = {}  # encoder layers per seed: where the cross-attention sites start in prune.csv's numbering
    for r in d.read("michel", "heads.csv"):
        if r["attention"] == "enc":
            n_enc[int(r["seed"])] = max(n_enc.get(int(r["seed"]), 0), int(r["layer"]) + 1)
    out = []
    for seed in sorted(n_enc):
        rows = [r for r in aligned if int(r["seed"]) == seed]
        aer = {r["method"]: number(r["aer"]) for r in rows}
        heads = [r for r in rows if r["head"] != ""]
        best = min(heads, key=lambda r: number(r["aer"]))
        winners = [r for r in heads if r["alignment_head"] == "1"]
        fates = []
        for r in winners or [best]:  # without an alignment head, the best aligner's fate
            at = M.pruned_at(prune, seed, "importance", M.cross_site(n_enc[seed], int(r["layer"])), int(r["head"]))
            fates.append(f"{r['method']}{'' if winners else ' (best head)'} "
                         + ("kept to the end" if at is None else f"pruned at {at:.2f}"))
        out.append([seed, f"{best['method']} {number(best['aer']):.3f}", f"{aer['diagonal']:.3f}", f"{aer['ibm1']:.3f}",
                    f"{len(winners)} of {len(heads)}", "; ".join(fates) or "–"])
    return md_table(["seed", "best head, AER", "diagonal", "IBM Model 1", "alignment heads (below both)",
                     "importance pruning: each alignment head (else the best)"], out, align="---")


MICHEL_ARMS = (("importance", "importance (Michel's I_h)"), ("ablation", "ablation score"),
               ("random", "random order (3 seeds, averaged)"), ("importance_enc", "importance, Enc-Enc alone"),
               ("importance_dec", "importance, Dec-Dec alone"), ("importance_cross", "importance, Enc-Dec alone"))


def arm_curves(d, arm, step=None):
    """{seed: curve} of data/michel/; random averages its seeded orders round by round."""
    from translation import michel as M
    rows, sizes = d.read("michel", "prune.csv"), M.kind_sizes(d.read("michel", "heads.csv"))
    if arm != "random":
        return M.curves(rows, arm, step, sizes)
    runs = [M.curves(rows, a, step, sizes)
            for a in sorted({r["arm"] for r in rows if r["arm"].startswith("random_seed")})]
    out = {}
    for seed in sorted(set().union(*runs)) if runs else []:
        curves = [c[seed] for c in runs if seed in c]
        n = min(len(c) for c in curves)
        out[seed] = [(curves[0][i][0], sum(c[i][1] for c in curves) / len(curves)) for i in range(n)]
    return out


def fill_michel_pruning(d):
    if "michel" not in d.arms:
        return not_run("michel")
    from translation import michel as M
    out = []
    for arm, words in MICHEL_ARMS:
        c = arm_curves(d, arm)
        if not c:
            continue
        fractions = [M.prunable(curve) for curve in c.values()]
        out.append([words, ", ".join(f"{f:.2f}" for f in fractions), cell(fractions, 2),
                    cell((curve[0][1] for curve in c.values()), 2)])
    return md_table(["order", "fraction prunable per seed", "mean ± sd", "unpruned BLEU"], out)


# ---- Voita et al. ----------------------------------------------------------------------------------------


def voita_evals(d):
    return {(int(r["seed"]), r["arm"], r["split"]): r for r in d.read("voita", "evals.csv")}


def fill_voita_l0(d):
    if "voita" not in d.arms:
        return not_run("voita")
    from translation import voita as V
    prune, evals = d.read("voita", "prune.csv"), voita_evals(d)
    out = []
    for only, words in (("enc", "encoder heads gated"), ("all", "every kind gated")):
        for seed in sorted({int(r["seed"]) for r in prune}):
            got = V.chosen(prune, seed, only)
            control = V.last_rows(prune).get((seed, "none_l0"))
            if got is None or control is None:
                out.append([words, seed, "none within the threshold", "", "", "", ""])
                continue
            arm, r = got
            test, ctest = evals.get((seed, arm, "test")), evals.get((seed, "none_l0", "test"))
            drop = number(ctest["bleu"]) - number(test["bleu"]) if test and ctest else math.nan
            out.append([words, seed, f"{V.lambda_of(arm):g}", r["heads_pruned"], r["heads_per_layer"],
                        f"{number(control['val_bleu']) - number(r['val_bleu']):+.2f}", f"{drop:+.2f}"])
    return (md_table(["L0", "seed", "lambda (val)", "heads pruned", "heads per site (enc, then dec and cross by layer)",
                      "val BLEU drop vs control",
                      "test BLEU drop vs control"], out)
            + f"\n\nVoita et al. (Figure 7): {PAPER['voita_figure7'].text()}.")


def voita_sites(d):
    """[(kind, layer)] of the voita arm's prune.csv sites, from the base models' layer counts."""
    from translation import voita as V
    setup = d.read("base", "setup.csv")[0]
    return V.site_names(int(setup["model.n_encoder_layers"]), int(setup["model.n_layers"]))


VOITA_FAMILIES = (("enc", "encoder heads"), ("all", "every kind"))


def voita_kept(row, control, sites, only):
    """(heads an L0 run kept, heads it gated) over the sites of the family `only`."""
    from translation import voita as V
    idx = [i for i, (kind, _) in enumerate(sites) if only == "all" or kind == only]
    return (sum(V.kept_per_site(row)[i] for i in idx), sum(V.kept_per_site(control)[i] for i in idx))


def fill_voita_curve(d):
    """Voita Figure 7 in BLEU: every lambda's heads kept and BLEU, mean ± sd over seeds, against the
    control (the same steps, nothing gated)."""
    if "voita" not in d.arms:
        return not_run("voita")
    from translation import voita as V
    prune, evals, sites = d.read("voita", "prune.csv"), voita_evals(d), voita_sites(d)
    last = V.last_rows(prune)
    control = {s: r for (s, arm), r in last.items() if arm == "none_l0"}
    test = lambda s, arm: number(evals[(s, arm, "test")]["bleu"]) if (s, arm, "test") in evals else math.nan  # noqa: E731
    rows = [["control (nothing gated)", "–", "–", "+0.00", cell((test(s, "none_l0") for s in control), 2), "+0.00"]]
    for only, words in VOITA_FAMILIES:
        for lam, by_seed in V.lambda_runs(prune, only).items():
            kept = {s: voita_kept(r, control[s], sites, only) for s, r in by_seed.items() if s in control}
            gated = {n for _, n in kept.values()}
            rows.append([words, f"{lam:g}", f"{cell((k for k, _ in kept.values()), 1)} of {'/'.join(map(str, sorted(gated)))}",
                         cell((number(r["val_bleu"]) - number(control[s]["val_bleu"]) for s, r in by_seed.items()
                               if s in control), 2),
                         cell((test(s, r["arm"]) for s, r in by_seed.items()), 2),
                         cell((test(s, r["arm"]) - test(s, "none_l0") for s, r in by_seed.items()), 2)])
    return (md_table(["gated", "lambda", "heads kept", "val BLEU − control", "test BLEU", "test BLEU − control"],
                     rows, align="---")
            + f"\n\nMean ± sd over {len(control)} seeds. Voita et al. (Figure 7): {PAPER['voita_figure7'].text()}."
            "\n\n![Voita Figure 7](figures/voita_l0.png)")


def voita_figure(d):
    """Test BLEU against heads kept, one line per seed through its lambdas, each family a panel on
    one y-scale, the control dotted."""
    from translation import voita as V
    prune, evals, sites = d.read("voita", "prune.csv"), voita_evals(d), voita_sites(d)
    last = V.last_rows(prune)
    control = {s: r for (s, arm), r in last.items() if arm == "none_l0"}
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, (only, words) in zip(axes, VOITA_FAMILIES):
        runs = V.lambda_runs(prune, only)
        for i, seed in enumerate(sorted(control)):
            points = sorted((voita_kept(by_seed[seed], control[seed], sites, only)[0],
                             number(evals[(seed, by_seed[seed]["arm"], "test")]["bleu"]))
                            for by_seed in runs.values() if seed in by_seed and (seed, by_seed[seed]["arm"], "test") in evals)
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, color=f"C{i}", label=f"seed {seed}")
            if (seed, "none_l0", "test") in evals:
                ax.axhline(number(evals[(seed, "none_l0", "test")]["bleu"]), color=f"C{i}", linestyle=":", linewidth=1)
        ax.set_title(f"L0 gates on {words}", fontsize=9)
        ax.set_xlabel("heads kept (of those gated)")
    axes[0].set_ylabel("test BLEU (beam 5)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Translation (KJV -> RV1909): test BLEU against heads kept, one point per lambda; dotted: each "
                 "seed's control (the same steps, nothing gated)", fontsize=9)
    save_figure(fig, os.path.join(d.out, "figures", "voita_l0.png"), dpi=110, tight_layout=True,
                strip_software=True)


def voita_gated_runs(d, only):
    """(sites, {seed: the control's last row}, {lambda: {seed: the last row of l0_<only>_lambda<X>}})
    of the seeds that have a control."""
    from translation import voita as V
    prune = d.read("voita", "prune.csv")
    control = {s: r for (s, arm), r in V.last_rows(prune).items() if arm == "none_l0"}
    runs = {lam: {s: r for s, r in by_seed.items() if s in control} for lam, by_seed in V.lambda_runs(prune, only).items()}
    return voita_sites(d), control, runs


def fill_voita_kinds(d):
    """Voita Figures 9 and 10 with every kind gated: the share of each kind's (each site's) heads
    kept at every lambda, mean over seeds (the papers' orders are tested in the verdicts table:
    claims.voita_kinds)."""
    if "voita" not in d.arms:
        return not_run("voita")
    from translation import voita as V
    sites, control, runs = voita_gated_runs(d, "all")
    if not runs:
        return "*(no L0 run gating every kind)*"
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    by_kind = [[f"{lam:g}"] + [f"{mean([V.kind_shares(r, control[s], sites)[k] for s, r in by_seed.items()]):.2f}"
                               for k in ("enc", "dec", "cross")] for lam, by_seed in runs.items()]
    by_site = [[f"{kind} L{layer}"] + [f"{mean([V.site_shares(r, control[s])[i] for s, r in by_seed.items()]):.2f}"
                                       for by_seed in runs.values()] for i, (kind, layer) in enumerate(sites)]
    return ("Share of each kind's heads kept (mean over seeds):\n\n"
            + md_table(["lambda", "encoder self-attention", "decoder self-attention", "cross-attention"], by_kind)
            + "\n\nShare of each site's heads kept (mean over seeds):\n\n"
            + md_table(["site"] + [f"lambda {lam:g}" for lam in runs], by_site)
            + "\n\nThe orders Voita et al. report (Figures 9 and 10) are tested in the verdicts table at the top.")


def voita_survival_runs(d):
    """(survival_claim's runs: each seed's encoder heads' roles, kept by its val-chosen encoder L0 run,
    layers; one table row per seed: the lambda and the heads kept by role)."""
    from translation import voita as V
    prune, roles = d.read("voita", "prune.csv"), d.read("voita", "roles.csv")
    runs, table = [], []
    for seed in sorted({int(r["seed"]) for r in prune}):
        got = V.chosen(prune, seed)
        if got is None:
            continue
        run = V.encoder_survival(roles, got[1], seed)
        runs.append(run)
        r, kept, layer = run
        # by layer, the permutation test's strata: a share over all layers mixes in which layer pruned most
        counts = []
        for li in sorted(set(layer)):
            here = layer == li
            counts.append(f"L{li} " + ", ".join(f"{role} {int(kept[here & (r == role)].sum())} of "
                                               f"{int((here & (r == role)).sum())}" for role in sorted(set(r[here]))))
        table.append([seed, got[0].rsplit("lambda", 1)[1], "; ".join(counts)])
    return runs, table


def fill_voita_survival(d):
    """Voita Section 5: the encoder heads L0 keeps are the specialised ones: pruning's stratified
    permutation test (roles permuted within each layer of each model) over the seeds' val-chosen
    encoder L0 runs."""
    if "voita" not in d.arms:
        return not_run("voita")
    import numpy as np
    from pruning.analysis import SPECIALISED, survival_claim
    runs, table = voita_survival_runs(d)
    if not runs:
        return "*(no seed has an L0 run within the threshold)*"
    v, (spec, rest) = survival_claim(runs)
    n_spec = sum(int(np.isin(r, SPECIALISED).sum()) for r, _, _ in runs)
    return (md_table(["seed", "lambda", "encoder heads kept, by layer and role"], table, align="---")
            + f"\n\nShare kept by L0: the specialised heads (positional or rare-token; the Bible data have no "
            f"syntactic gold), {n_spec} over all seeds, {'–' if math.isnan(spec) else f'{spec:.2f}'}; the rest "
            f"{'–' if math.isnan(rest) else f'{rest:.2f}'}. {v.test}: {v.words()}.")


def fill_voita_scratch(d):
    if "voita_scratch" not in d.arms:
        return not_run("voita_scratch")
    if "voita" not in d.arms:
        return "*(needs the voita arm's data: the layouts and the L0-pruned models to compare with)*"
    from translation import voita as V
    prune = d.read("voita", "prune.csv")
    evals = {**voita_evals(d), **{(int(r["seed"]), r["arm"], r["split"]): r for r in d.read("voita_scratch", "evals.csv")}}
    out = []
    for r in d.read("voita_scratch", "scratch.csv"):
        seed = int(r["seed"])
        arm, row = V.chosen(prune, seed) or (None, None)
        pruned = evals.get((seed, arm, "test"))
        scratch = evals.get((seed, "scratch", "test"))
        out.append([seed, f"[{r['active_heads'].replace(' ', ',')}]", f"{r['steps']} ({r.get('checkpoint_step') or '–'})",
                    f"{number(pruned['bleu']):.2f}" if pruned else "–",
                    f"{number(scratch['bleu']):.2f}" if scratch else "–",
                    f"{number(scratch['bleu']) - number(pruned['bleu']):+.2f}" if pruned and scratch else "–"])
    return (md_table(["seed", "layout (active heads per site)", "steps from scratch (analysed checkpoint)", "L0-pruned test BLEU",
                      "from scratch test BLEU", "scratch - pruned"], out)
            + f"\n\nVoita et al.: {PAPER['voita_scratch'].text()}.")


# ---- MQA / GQA ------------------------------------------------------------------------------------------


def kv_family(d):
    """(the query heads, {K/V heads: {seed: test BLEU}}, {K/V heads: Verdict against MHA}): every
    K/V count against multi-head attention, paired over seeds, Holm over the counts."""
    from verdicts import LEVEL_SEEDS, holm_claims, paired_t_test
    heads = int({r["key"]: number(r["value"]) for r in d.read("kv_heads", "config.csv")}["n_heads"])
    bleu, rates = {}, set()
    for r in d.read("kv_heads", "runs.csv"):
        bleu.setdefault(int(r["kv_heads"]), {})[int(r["seed"])] = number(r["bleu"])
        rates.add(r.get("lr", ""))
    if len(rates) > 1:  # parts trained at different rates compare nothing
        fail(f"data/kv_heads/runs.csv mixes rates {sorted(rates)}: rerun the kv_heads arm at one")
    if heads not in bleu:
        return heads, bleu, {}
    return heads, bleu, holm_claims({k: paired_t_test(bleu[heads], bleu[k], threshold=PRACTICAL["bleu"])
                                     for k in bleu if k != heads}, level=LEVEL_SEEDS)


def kv_claim(v):
    """The claim "fewer K/V heads keep MHA's quality" from the family's difference test v (not_below)."""
    from verdicts import not_below
    return not_below(v, "MHA")


def fill_kv_heads(d):
    if "kv_heads" not in d.arms:
        return not_run("kv_heads")
    from statistics import median
    config = {r["key"]: number(r["value"]) for r in d.read("kv_heads", "config.csv")}
    d_head = int(config["d_head"])
    heads, bleu, family = kv_family(d)
    speed, busy = {}, []
    for r in d.read("kv_heads", "bench.csv"):
        speed.setdefault(int(r["kv_heads"]), []).append(number(r["sentences_per_s"]))
        busy.append(number(r["foreign_cores"]))
    rows = []
    for k in sorted(bleu):
        # K and V of every decoder layer's self-attention per target token, of every cross-attention
        # per source token (float32)
        per_token = 2 * int(config["n_layers"]) * k * d_head * 4
        s = median(speed[k]) if k in speed else math.nan
        ref = median(speed[heads]) if heads in speed else math.nan
        v = family.get(k)
        rows.append([("MHA" if k == heads else "MQA" if k == 1 else "GQA") + f" ({k} K/V)", cell(bleu[k].values(), 2),
                     "reference" if v is None else f"{v.effect:+.2f} BLEU: {kv_claim(v).words()}",
                     f"{per_token:,} B", f"{heads // k}x smaller" if k != heads else "–",
                     "–" if math.isnan(s) else f"{s:.1f}", "–" if math.isnan(s / ref) or k == heads else f"{s / ref:.2f}x"])
    if heads not in bleu:
        return "*(data/kv_heads/runs.csv has no multi-head attention runs, the reference)*"
    rate = (f"lr {config['lr']:g}, the rate the head-count sweep chose for {heads} heads at that budget (the base "
            "rate was tuned for the base models' steps)" if "lr" in config else "the base rate")
    return (f"Every setting trains the head-count arms' {config.get('steps', math.nan):.0f} steps (the base models' "
            f"budget would not fit the arm) at {rate}, seeds as the base models'.\n\n"
            + md_table(["attention", "test BLEU (beam 5)", "keeps MHA's quality? (paired t over seeds, Holm over "
                      f"the K/V counts, threshold {PRACTICAL['bleu']:g} BLEU)", "KV cache per token (self; cross likewise per source token)",
                      "cache vs MHA", "beam-5 sentences/s (median of rounds)", "speed vs MHA"], rows)
            + f"\n\nOther processes' use of the cores during the timings (headlab bench's foreign_cores), at most: "
            f"{max(busy, default=math.nan):.2f} cores."
            + f"\n\nShazeer 2019: {PAPER['mqa'].text()}. Ainslie et al. 2023: {PAPER['gqa'].text()}.")


def fill_michel_dynamics(d):
    """Section 6: each earlier checkpoint pruned by its own importance; Figure 5's measure (the
    fraction pruned while BLEU keeps 85% of the checkpoint's own) beside the paper's 40%."""
    if "michel" not in d.arms:
        return not_run("michel")
    from translation import michel as M
    figure5 = PAPER_NUMBERS["michel_figure5"]
    rows = d.read("michel", "prune.csv")
    final = M.final_step(rows)
    out = []
    for point in M.dynamics_points(rows) + [final]:  # each seed's k-th earlier checkpoint, then its model
        c = M.curves(rows, "importance", point)
        if not c:
            continue
        share = figure5["retained"][0]
        kept = [M.retained_prunable(curve, share) for curve in c.values()]
        steps = sorted({point[s] for s in c})
        out.append([steps[0] if len(steps) == 1 else ", ".join(str(point[s]) for s in c),
                    ", ".join(f"{point[s] / final[s]:.2f}" for s in c), cell((curve[0][1] for curve in c.values()), 2),
                    cell(kept, 2), cell((M.prunable(curve) for curve in c.values()), 2)])
    return (md_table(["checkpoint step", "share of the model's steps (per seed)", "its unpruned BLEU",
                      f"fraction pruned keeping {figure5['retained'][0]:.0%} of it", "fraction prunable (0.5 BLEU)"], out)
            + f"\n\nMichel et al.: {PAPER['michel_figure5'].text()}.")


def plateau_caveat(d):
    """What the verdicts on the base models rest on: how many seeds are at the plateau rule, and how
    many passed their lowest val loss before the end; "" before the base arm."""
    if "base" not in d.arms:
        return ""
    curves = base_curves(d).values()
    flat = sum(plateaued(val_bleu_gain(c), threshold=PRACTICAL["bleu"]) for c in curves)
    past = sum(lowest_val_loss(c)[0] < c[-1][0] for c in curves)
    text = stale_base_note(d) + stale_arms_note(d) + (
        f"**Read with this.** The base models, which the michel, voita and voita_scratch arms build on, are at "
        f"the plateau rule above in {flat} of {len(curves)} seeds, and passed their lowest val loss before the end "
        f"of training in {past} of {len(curves)} (each is analysed at that checkpoint)")
    if flat * 2 > len(curves):
        return text + ".\n\n"
    return text + (": their verdicts are of models still learning, not of converged ones. The "
                   "head-count and MQA/GQA arms compare models at one fixed budget by design.\n\n")


def fill_verdicts(d):
    """Every paper claim whose arms are in data/ (claims.py), one row each: ours, the paper's, the
    test, the level and threshold, the verdict; first what the base models' verdicts rest on."""
    from translation import claims
    from verdicts import paper_row, paper_table
    rows, missing = claims.rows(d)
    text = plateau_caveat(d) + (paper_table([paper_row(*r) for r in rows]) if rows
                                else "*(no arm with a paper's claim has run yet)*")
    if missing:
        text += ("\n\nNot in this table yet (their arms have not run): the claims of " +
                 ", ".join(f"`{a}`" for a in missing) + ".")
    return text


FILLERS = {"bleu_threshold": lambda d: f"{PRACTICAL['bleu']:g}",
           "fraction_threshold": lambda d: f"{PRACTICAL['prune_fraction']:g}", "arms": fill_arms, "base_setup": fill_base_setup, "base_test": fill_base_test,
           "base_plateau": fill_base_plateau, "settings": fill_settings, "head_count": fill_head_count, "michel_table1": fill_michel_table1,
           "michel_table2": fill_michel_table2, "michel_pruning": fill_michel_pruning, "voita_l0": fill_voita_l0,
           "voita_curve": fill_voita_curve, "voita_kinds": fill_voita_kinds, "verdicts": fill_verdicts,
           "voita_scratch": fill_voita_scratch, "voita_survival": fill_voita_survival, "kv_heads": fill_kv_heads,
           "alignment": fill_alignment, "michel_dynamics": fill_michel_dynamics,
           # figures/ has a figure only for an arm in data/
           "base_figure": lambda d: "![base curves](figures/base_curves.png)" if "base" in d.arms else "",
           "michel_figure": lambda d: "![Michel Figures 3 and 4](figures/michel_pruning.png)" if "michel" in d.arms
           else ""}


def render(d):
    template = read_text(os.path.join(HERE, "results.template.md"))

    def replace(m):
        if m.group(1) not in FILLERS:
            fail(f"unknown placeholder {m.group(0)} in results.template.md")
        return FILLERS[m.group(1)](d)

    return re.sub(r"\{\{(\w+)\}\}", replace, template)


def main():
    ap = argparse.ArgumentParser(description="RESULTS.md and figures from data/")
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--check", action="store_true", help="exit 0 iff RESULTS.md is what data/ regenerates")
    args = ap.parse_args()
    d = Data(args.data)
    text = render(d)
    target = os.path.join(d.out, "RESULTS.md")
    if args.check:
        return check_results(target, text, args.data, "experiments/translation/make_results.py")
    write_atomically(target, text)
    figures(d)
    print(f"wrote {target}")


if __name__ == "__main__":
    try:
        main()
    except CsvError as e:
        fail(str(e))
