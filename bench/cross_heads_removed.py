#!/usr/bin/python3
"""Decoding with cross-attention heads removed, against masking them (issue 28): the table in
bench/RESULTS.md from the JSON lines `headlab bench --decode --cross-heads-removed K` printed.

Each line times three models on the same sentences, one after another in every repetition: the
config's model (random weights), the same with the last K cross heads of every decoder layer
masked (gate 0), and with those heads physically removed (nn/prune.h); the bench checks that the
masked and the removed model decode the same tokens.

  for b in 1 5; do build/headlab bench configs/translate.toml --decode --beam $b --cross-heads-removed 2 \\
      --reps 9 --warmup 2 --threads 1 --tag cross-removed-beam$b; done > LOG      # on a quiet machine
  /usr/bin/python3 bench/cross_heads_removed.py --from-log LOG                # the table
  ... --from-log LOG --write-docs   # put it into bench/RESULTS.md (between its markers)
  ... --from-log LOG --check        # fail unless bench/RESULTS.md shows it (CTest)
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "bench", "RESULTS.md")
BEGIN = "<!-- cross_heads_removed:begin (bench/cross_heads_removed.py --write-docs) -->"
END = "<!-- cross_heads_removed:end -->"


def report(lines):
    first = lines[0]
    out = [f"headlab {first['headlab_commit']} (BLIS kernels {first['blis_kernels']}), {first['threads']} thread; "
           f"{first['config']['reps']} repetitions per model, medians", "",
           "| decoding | cross heads removed per layer | parameters full / removed | sentences/s full | masked "
           "| removed | removed / full | removed / masked | masked / full | other cores busy |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for d in lines:
        c, v = d["config"], d["variants"]
        beam = "greedy" if c["beam"] == 1 else f"beam {c['beam']}"
        out.append(f"| {beam}, {c['sentences']} sentences of {c['source_len']} -> {c['target_len']} tokens "
                   f"| {c['cross_heads_removed']} of {c['cross_n_heads']} | {v['full']['params']:,} / "
                   f"{v['removed']['params']:,} | {v['full']['sentences_per_s']:.2f} | "
                   f"{v['masked']['sentences_per_s']:.2f} | {v['removed']['sentences_per_s']:.2f} | "
                   f"**{d['removed_vs_full']:.2f}** | {d['removed_vs_masked']:.2f} | {d['masked_vs_full']:.2f} | "
                   f"{d['foreign_cores']:.2f} |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from-log", required=True, help="the bench's JSON lines")
    p.add_argument("--write-docs", action="store_true", help="write the table into bench/RESULTS.md")
    p.add_argument("--check", action="store_true", help="fail unless bench/RESULTS.md shows the table")
    args = p.parse_args()
    with open(args.from_log) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or any("variants" not in d for d in lines):
        sys.exit(f"cross_heads_removed.py: {args.from_log} holds no --cross-heads-removed bench lines")
    table = report(lines)
    if not (args.write_docs or args.check):
        print(table)
        return
    with open(DOCS) as f:
        docs = f.read()
    if BEGIN not in docs or END not in docs:
        sys.exit(f"cross_heads_removed.py: {DOCS} has no {BEGIN} ... {END} markers")
    head, rest = docs.split(BEGIN, 1)
    new = head + BEGIN + "\n" + table + "\n" + END + rest.split(END, 1)[1]
    if args.check:
        if new != docs:
            sys.exit("cross_heads_removed.py --check: bench/RESULTS.md does not show this log's table; rerun with "
                     "--write-docs")
        return
    with open(DOCS + ".tmp", "w") as f:
        f.write(new)
    os.replace(DOCS + ".tmp", DOCS)
    print(f"wrote the table into {DOCS}")


if __name__ == "__main__":
    main()
