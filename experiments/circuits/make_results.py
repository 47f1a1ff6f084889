#!/usr/bin/env python3
"""experiments/circuits: RESULTS.md and figures/ from data/ (what run.sh wrote), beside data/.

  make_results.py            RESULTS.md and figures/induction_phase_change.png from data/ alone
  make_results.py --check    exit 0 when the committed RESULTS.md is what data/ gives, else one
                             line and exit 1 (no figure is drawn)
  DATA=/tmp/c/data make_results.py    another data folder (RESULTS.md goes beside it)

data/: provenance.csv (commit, start, wall time, cores, the highest 1-minute load average sampled) and per seed seed<N>/ with the run's
metrics.csv and `headlab circuits --detectors --composition`'s detectors.csv, composition.csv and
ov_copying.csv over every checkpoint (docs/circuits.md defines the columns).

The rules, fixed here and stated at the top of RESULTS.md:
  an induction head has formed at the first checkpoint where some head's prefix-matching score is
  at least INDUCTION_SCORE (half its attention, on the second copy of repeated random tokens, on
  the token after the earlier copy of its own); a previous-token head likewise with its
  previous-token score; the accuracy jump is the first evaluation whose val accuracy is at least
  half-way from the first evaluation's to the last one's.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common
from common import (check_results, fail, fill_template, md_table, number, pyplot, read_csv,  # noqa: E402
                    save_figure, write_atomically)

DATA = os.environ.get("DATA") or os.path.join(HERE, "data")
OUT = os.path.dirname(os.path.abspath(DATA))
INDUCTION_SCORE = 0.5
PREVIOUS_SCORE = 0.5


def seeds():
    found = sorted(int(m.group(1)) for name in os.listdir(DATA) if (m := re.fullmatch(r"seed(\d+)", name)))
    if not found:
        fail(f"{DATA} holds no seed<N>/ folder: run experiments/circuits/run.sh first")
    return found


def per_step(rows, column):
    """step -> (best score over heads, its head's label)."""
    best = {}
    for r in rows:
        step, v = int(r["step"]), number(r[column])
        if step not in best or v > best[step][0]:
            best[step] = (v, r["label"])
    return dict(sorted(best.items()))


def first_step(curve, threshold):
    return next((s for s, (v, _) in curve.items() if v >= threshold), None)


def seed_summary(seed):
    folder = os.path.join(DATA, f"seed{seed}")
    metrics = [r for r in read_csv(os.path.join(folder, "metrics.csv"), required=("step", "val_accuracy"))
               if r["val_accuracy"] != ""]
    detectors = read_csv(os.path.join(folder, "detectors.csv"), required=("step", "label", "prefix_matching",
                                                                          "previous_token"))
    composition = read_csv(os.path.join(folder, "composition.csv"), required=("step", "sender", "receiver", "k"))
    accuracy = [(int(r["step"]), number(r["val_accuracy"])) for r in metrics]
    first, last = accuracy[0][1], accuracy[-1][1]
    jump = next(s for s, a in accuracy if a >= (first + last) / 2)
    induction, previous = per_step(detectors, "prefix_matching"), per_step(detectors, "previous_token")
    final_step = max(induction)
    # K-composition at the last checkpoint: the pair (top previous-token head -> top induction head)
    # against every pair.
    sender, receiver = previous[final_step][1], induction[final_step][1]
    last_pairs = sorted(((number(r["k"]), r["sender"], r["receiver"]) for r in composition
                         if int(r["step"]) == final_step and r["k"] != ""), reverse=True)
    rank = next((i + 1 for i, (_, s, r) in enumerate(last_pairs) if (s, r) == (sender, receiver)), None)
    return {
        "seed": seed, "accuracy": accuracy, "induction": induction, "previous": previous, "jump": jump,
        "first_accuracy": first, "last_accuracy": last,
        "induction_step": first_step(induction, INDUCTION_SCORE), "previous_step": first_step(previous, PREVIOUS_SCORE),
        "final_step": final_step, "final_induction": induction[final_step], "final_previous": previous[final_step],
        "pair": (sender, receiver), "pair_k": dict(((s, r), k) for k, s, r in last_pairs).get((sender, receiver)),
        "rank": rank, "pairs": len(last_pairs), "checkpoint_every": sorted(induction)[1] - sorted(induction)[0],
    }


def step_text(step):
    return "never" if step is None else str(step)


def fields(summaries):
    prov = read_csv(os.path.join(DATA, "provenance.csv"), required=("commit", "started_utc", "wall_s", "cores",
                                                                        "max_load_1min"))[0]
    rows = []
    for s in summaries:
        lag = "" if s["induction_step"] is None else f"{s['induction_step'] - s['jump']:+d}"
        rows.append([s["seed"], f"{s['first_accuracy']:.3f} → {s['last_accuracy']:.3f}", s["jump"],
                     step_text(s["previous_step"]), step_text(s["induction_step"]), lag,
                     f"{s['final_previous'][1]} {s['final_previous'][0]:.3f}",
                     f"{s['final_induction'][1]} {s['final_induction'][0]:.3f}",
                     f"{s['pair_k']:.3f} ({s['rank']} of {s['pairs']})" if s["rank"] else "–"])
    table = md_table(["seed", "val accuracy (first → last eval)", "accuracy jump (step)",
                      f"previous-token head ≥ {PREVIOUS_SCORE} (step)", f"induction head ≥ {INDUCTION_SCORE} (step)",
                      "induction step − jump step", "top previous-token head at the end",
                      "top induction head at the end", "its K-composition (rank among pairs)"], rows)
    formed = [s for s in summaries if s["induction_step"] is not None]
    interval = summaries[0]["checkpoint_every"]
    together = [s for s in formed if abs(s["induction_step"] - s["jump"]) <= 2 * interval]
    top_pair = [s for s in summaries if s["rank"] == 1]
    before = [s for s in formed if s["previous_step"] is not None and s["previous_step"] <= s["induction_step"]]
    n = len(summaries)
    return {
        "commit": prov["commit"], "started": prov["started_utc"], "wall_min": f"{float(prov['wall_s']) / 60:.1f}",
        "cores": prov["cores"], "max_load": prov["max_load_1min"], "seeds": str(n), "seed_list": ", ".join(str(s["seed"]) for s in summaries),
        "interval": str(interval), "final_step": str(summaries[0]["final_step"]),
        "induction_score": f"{INDUCTION_SCORE}", "previous_score": f"{PREVIOUS_SCORE}",
        "table": table,
        "formed": f"{len(formed)} of {n}",
        "together": f"{len(together)} of {len(formed)}",
        "together_window": str(2 * interval),
        "before": f"{len(before)} of {len(formed)}",
        "never_previous": f"{sum(s['previous_step'] is None for s in summaries)} of {n}",
        "top_pair": f"{len(top_pair)} of {n}",
        "induction_steps": ", ".join(step_text(s["induction_step"]) for s in summaries),
        "jump_steps": ", ".join(str(s["jump"]) for s in summaries),
    }


def figure(summaries, path):
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, s in enumerate(summaries):
        c = colours[i % len(colours)]
        top.plot(*zip(*s["accuracy"]), color=c, marker="o", markersize=2, label=f"seed {s['seed']}")
        steps = list(s["induction"])
        bottom.plot(steps, [s["induction"][k][0] for k in steps], color=c, marker="o", markersize=2)
        bottom.plot(steps, [s["previous"][k][0] for k in steps], color=c, linestyle=":", linewidth=1)
    top.set_ylabel("val accuracy (fraction correct)")
    top.legend(fontsize=8, loc="lower right")
    top.grid(alpha=0.3)
    bottom.axhline(INDUCTION_SCORE, color="0.5", linewidth=0.8, linestyle="--")
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_ylabel("best head's score")
    bottom.set_xlabel("optimizer steps (checkpoint)")
    bottom.grid(alpha=0.3)
    bottom.plot([], [], color="black", marker="o", markersize=2, label="prefix matching (induction head)")
    bottom.plot([], [], color="black", linestyle=":", label="previous token")
    bottom.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Induction task (configs/induction.toml, 2 layers x 2 heads), {len(summaries)} seeds:\n"
                 "val accuracy and the best head's detector scores at every checkpoint")
    save_figure(fig, path, 110, tight_layout=True, strip_software=True)


def render(check):
    summaries = [seed_summary(s) for s in seeds()]
    f = fields(summaries)
    text = fill_template(os.path.join(HERE, "results.template.md"), f)
    target = os.path.join(OUT, "RESULTS.md")
    if check:
        check_results(target, text, DATA, "experiments/circuits/make_results.py")
        return
    figure(summaries, os.path.join(OUT, "figures", "induction_phase_change.png"))
    write_atomically(target, text)
    print(f"wrote {target} and {OUT}/figures/induction_phase_change.png")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args not in ([], ["--check"]):
        fail("usage: make_results.py [--check]")
    render(args == ["--check"])
