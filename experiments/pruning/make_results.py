#!/usr/bin/env python3
"""Builds experiments/pruning/RESULTS.md and figures/ from data/ alone (no training, no runs/).

RESULTS.md is results.template.md with every `{{NAME}}` or `{{NAME TASK}}` replaced by what
FILLERS[NAME] builds from the data (collect.py describes the files; data/before/ holds the
verdicts of the code before issue 29, for "What changed"). Every number in it, the verdicts
included, comes from the data; the rules that turn numbers into verdicts are the shared ones of
experiments/verdicts.py (docs/verdicts.md), with the thresholds and levels named there.

  python3 experiments/pruning/make_results.py            # RESULTS.md and figures/
  python3 experiments/pruning/make_results.py --check    # exit 0 iff RESULTS.md is what data/ gives
  python3 experiments/pruning/make_results.py --l0-layouts   # run.sh: the L0 layouts to retrain

Statistics (experiments/stats.py computes them, experiments/verdicts.py decides; RESULTS.md's
"Verdict rules" prints them with their constants):
  - one head (Table 1) or one layer's reduction (Table 2) against the full model: a paired test
    over evaluation examples (E about 1024; normal approximation, two-sided) on the task metric
    (per-example accuracy where examples.h5 holds it, else loss), at LEVEL_MICHEL uncorrected, and
    removal_class with a practical threshold (PRACTICAL);
  - fraction prunable: no noticeable() drop (NOTICEABLE); L0's lambda on val by the same rule;
  - across seeds: seed_claim / reaches_claim (paired t-test, LEVEL_SEEDS, at least MIN_SEEDS);
  - head roles (Voita): the thresholds POSITIONAL_SHARE, SYNTACTIC_MARGIN, RARE_SHARE and the
    precedence ROLE_ORDER (analysis.py); L0 survival of specialised heads: the permutation test
    with roles permuted within each layer (stratified_permutation_claim, default_rng(0)).

The modules next to this script: loading.py (data/), analysis.py (curves, L0, dynamics, roles),
michel.py (Tables 1 and 2), claims.py (the claims, judged), claims_text.py (the rules, the claims
and "What changed" in Markdown), fillers.py and fillers_l0.py (the tables), figures.py.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common, stats, and this folder as pruning
from common import CsvError, check_results, fail, read_text, write_atomically  # noqa: E402
from pruning.analysis import TASKS, l0_selected  # noqa: E402
from pruning.fillers import FILLERS  # noqa: E402
from pruning.loading import Data  # noqa: E402


def print_l0_layouts(d):
    for task in d.tasks:
        for seed in d.seeds[task]:
            chosen = l0_selected(d, task, seed)
            if chosen:
                print(task, seed, "[" + ",".join(str(h) for h in chosen[2]) + "]")


def render(d):
    template = read_text(os.path.join(HERE, "results.template.md"))

    def replace(m):
        name, arg = m.group(1), m.group(2)
        if name not in FILLERS:
            fail(f"unknown placeholder {m.group(0)} in results.template.md")
        if arg is not None and arg not in TASKS:
            fail(f"unknown task in {m.group(0)}")
        return FILLERS[name](d, arg)

    return re.sub(r"\{\{(\w+)(?: (\w+))?\}\}", replace, template)


def main():
    ap = argparse.ArgumentParser(description="RESULTS.md and figures from data/")
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--check", action="store_true", help="exit 0 iff RESULTS.md is what data/ regenerates")
    ap.add_argument("--l0-layouts", action="store_true", help="print the val-chosen L0 layouts (run.sh)")
    args = ap.parse_args()
    d = Data(args.data)
    if args.l0_layouts:
        print_l0_layouts(d)
        return
    text = render(d)
    target = os.path.join(HERE, "RESULTS.md")
    if args.check:
        return check_results(target, text, args.data, "experiments/pruning/make_results.py")
    write_atomically(target, text)
    from pruning import beyond
    from pruning.figures import figures  # matplotlib: not for --check

    figures(d)
    beyond.figures(d, os.path.join(HERE, "figures"))
    print(f"wrote {target} and figures/")


if __name__ == "__main__":
    try:
        main()
    except CsvError as e:  # a row asked for a column its file does not have
        fail(str(e))
