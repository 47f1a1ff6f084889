#!/usr/bin/env python3
"""headlab plot: figures of a run folder or a sweep folder, written to PATH/plots/.

Usually run by `headlab plot PATH` (which first rewrites a sweep's results.csv); it can also be
run by hand: python3 src/plot/headlab_plot.py PATH [--x tokens|step] [--heads L:H,...]
[--format png|pdf|svg] [--dpi N] [--no-title].
docs/sweeps.md lists the figures. Inputs, all written by headlab:
  run folder:   metrics.csv (step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,val_bleu,...),
                config.toml (optional, for titles); from headlab analyze (optional): heads.csv
                (layer,head,<metrics>), heads_similarity.csv, attention_example_I.csv (+ _tokens.csv;
                an encoder_decoder's _encoder.csv, _cross.csv, _source_tokens.csv, _gold_alignment.csv);
                from headlab prune (optional): prune/<name>/prune.csv
  sweep folder: grid.csv (run,<grid keys>,params,steps), results.csv, and the run folders
A folder without metrics.csv is drawn for whatever analysis or prune files it holds (a folder of
prune invocations, or one invocation's folder with prune.csv).
The figures are drawn by the modules next to this script, one per subject: plot_run.py (a run's
curves), plot_heads.py (headlab analyze), plot_prune.py (headlab prune), plot_sweep.py (a sweep),
all on plot_common.py; a new figure is a new function plus one call in plot_run, plot_analysis or
plot_sweep. plot_shared.py holds what the experiments' make_results.py scripts use too (CSV files
by column name, saving a figure). Bad input, a CSV file without a column a figure needs included,
prints one line on stderr and exits with code 2.
"""
import argparse
import os
import re

from plot_common import FIGURES, NOTES, X_AXES, fail, unique
from plot_shared import CsvError
from plot_run import plot_run
from plot_sweep import plot_sweep


def parse_heads(text):
    """'0:1,2:3' -> [(0, 1), (2, 3)]."""
    if not re.fullmatch(r"\d+:\d+(,\d+:\d+)*", text):
        fail(f"--heads: expected layer:head pairs like 0:1,2:3, got '{text}'")
    return unique([tuple(int(n) for n in pair.split(":")) for pair in text.split(",")])


def main():
    parser = argparse.ArgumentParser(description="Figures of a headlab run or sweep folder, into PATH/plots/.")
    parser.add_argument("path", help="run folder (metrics.csv), sweep folder (grid.csv), or prune results")
    parser.add_argument("--x", choices=sorted(X_AXES), default="tokens", help="x axis of the curves")
    parser.add_argument("--heads", help="attention maps of these heads only: layer:head,layer:head,...")
    parser.add_argument("--format", choices=["png", "pdf", "svg"], default="png", help="file format of the figures")
    parser.add_argument("--dpi", type=int, default=110, help="resolution of PNGs (and of images in PDF/SVG)")
    parser.add_argument("--no-title", action="store_true", help="leave out each figure's title")
    args = parser.parse_args()
    if not 10 <= args.dpi <= 2400:
        fail(f"--dpi must be between 10 and 2400, got {args.dpi}")
    FIGURES.update(format=args.format, dpi=args.dpi, titles=not args.no_title)
    if not os.path.isdir(args.path):
        fail(f"no such folder: {args.path}")
    chosen_heads = parse_heads(args.heads) if args.heads is not None else None
    try:
        if os.path.exists(os.path.join(args.path, "grid.csv")):
            written = plot_sweep(args.path, args.x, chosen_heads)
        else:
            written = plot_run(args.path, args.x, chosen_heads)
    except CsvError as e:  # a file without a column a figure needs: one line naming both
        fail(str(e))
    for line in NOTES + written:
        print(line)


if __name__ == "__main__":
    main()
