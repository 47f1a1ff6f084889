#!/usr/bin/env python3
"""experiments/head_count: from the runs to data/, and from data/ to RESULTS.md and figures/.

  make_results.py                  RESULTS.md and figures/ from data/ alone (no runs needed)
  make_results.py --check          exit 0 when the committed RESULTS.md is what data/ gives, else
                                   a one-line hint and exit 1 (no matplotlib, no figures)
  make_results.py collect OUT [--binary PATH]   OUT (run.sh's sweep folders) -> data/
  make_results.py seeds-sweeps LR.toml LR_OUT SEEDS_OUT [--set=KEY=VALUE ...] [--heads=H,H]
                  [--runner-up]    (run.sh) one sweep file per head count at the rate its seed-0
                                   run did best with on val (LR_OUT: the rate sweep's folder or its
                                   collected runs.csv; --set: more settings in each; --heads: those
                                   counts only; --runner-up: each count's second-best rate); prints
                                   them
  make_results.py eval-jobs HEADLAB OUT   (run.sh) the test-split evaluations still to run

The run-side commands read the runs' config.toml (tomllib, Python >= 3.11); rendering reads only
the CSV files in data/ (see data/README.md for their columns). The work is in the package next to
this script: runs.py (the run side), sweeps.py and studies.py (the comparisons), fields.py (the
placeholders of results.template.md), figures.py; the statistics are experiments/stats.py's.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common, stats, and this folder as head_count
from common import CsvError, fail, first_difference, read_text, write_atomically  # noqa: E402
from head_count.fields import fields  # noqa: E402
from head_count.runs import REPO, cmd_collect, cmd_eval_jobs, cmd_seeds_sweeps  # noqa: E402
from head_count.sweeps import Data  # noqa: E402


def render(check):
    data = Data()
    f = fields(data)
    template = read_text(os.path.join(HERE, "results.template.md"))
    used = set()

    def fill(m):
        name = m.group(1)
        if name not in f:
            fail(f"results.template.md: unknown placeholder {{{{{name}}}}}")
        used.add(name)
        return f[name]

    text = re.sub(r"\{\{([^{}]+)\}\}", fill, template)
    target = os.path.join(HERE, "RESULTS.md")
    if check:
        old = read_text(target)
        if old == text:
            return
        print(f"make_results --check: RESULTS.md differs from what data/ gives, first at line "
              f"{first_difference(old, text)}; regenerate with python3 experiments/head_count/make_results.py",
              file=sys.stderr)
        sys.exit(1)
    from head_count.figures import figures  # matplotlib: not for --check

    figures(data)
    write_atomically(target, text)
    print(f"wrote {target}")


def seeds_sweeps(paths, options):
    extra, heads, rank = [], None, 0
    for a in options:
        if a.startswith("--set="):
            extra.append(a[len("--set="):])
        elif re.fullmatch(r"--heads=\d+(,\d+)*", a):
            heads = [int(h) for h in a[len("--heads="):].split(",")]
        elif a == "--runner-up":
            rank = 1
        else:
            fail(f"seeds-sweeps: unknown option '{a}' (--set=KEY=VALUE, --heads=H,H, --runner-up)")
    return cmd_seeds_sweeps(*paths, extra=extra, heads=heads, rank=rank)


def main():
    args = sys.argv[1:]
    if args[:1] == ["seeds-sweeps"] and len(args) >= 4:
        return seeds_sweeps(args[1:4], args[4:])
    if args[:1] == ["eval-jobs"] and len(args) == 3:
        return cmd_eval_jobs(*args[1:])
    if args[:1] == ["collect"] and len(args) in (2, 4) and (len(args) == 2 or args[2] == "--binary"):
        return cmd_collect(args[1], args[3] if len(args) == 4 else os.path.join(REPO, "build", "headlab"))
    if args in ([], ["--check"]):
        return render(check=bool(args))
    fail("usage: make_results.py [--check] | collect OUT [--binary PATH] | seeds-sweeps LR.toml LR_OUT SEEDS_OUT "
         "[--set=KEY=VALUE ...] [--heads=H,H] [--runner-up]"
         " | eval-jobs HEADLAB OUT")


if __name__ == "__main__":
    try:
        main()
    except CsvError as e:  # a row asked for a column its file does not have
        fail(str(e))
