#!/usr/bin/python3
"""The encoder_decoder against its PyTorch reference (bench/torch_ref_seq2seq.py), alternately in
one run: training speed and memory, and decoding speed with and without the KV cache (issue 27).

Every point runs its programs back to back --reps times, the order flipping every repetition so
a drifting machine load hits all alike; each run prints one JSON line with its own median (of
timed steps, or of timed decodings), and the report takes the median over the repetitions.
All runs use configs/translate.toml's network (1.95M parameters at max_seq_len 192) with
model.dropout = 0 (the Python network has no dropout) and 2 threads.

  train     target rows of 64 tokens, source rows of 64, batch 48 (3072 target tokens, the
            shipped config's batch_tokens 3000), label smoothing 0.1, AdamW, clip 1:
            tokens/s headlab / torch >= 1.5, peak RSS headlab / torch <= 0.5, same parameters
  decode    32 random sources of 64 tokens, each decoded to exactly 128 target tokens (</s>
            barred until the length limit), greedy and beam 5:
            sentences/s headlab / torch (each with its KV cache) >= 2
  no_cache  the same at 8 sentences (every step of the uncached run re-runs the whole model on
            the prefix, so 32 would take minutes): headlab with / without the cache >= 5

  /usr/bin/python3 bench/compare_seq2seq.py --wait-idle 20 --log bench/results/compare_seq2seq-DATE.jsonl
  /usr/bin/python3 bench/compare_seq2seq.py --from-log bench/results/compare_seq2seq-DATE.jsonl  # report again
  ... --from-log LOG --write-docs   # put the report into bench/RESULTS.md (between its markers)
  ... --from-log LOG --check        # fail unless bench/RESULTS.md shows LOG's report (CTest)
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

from machine import add_log_options, report_from_log, wait_idle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--headlab", default=os.path.join(ROOT, "build", "headlab"))
p.add_argument("--python", default="/usr/bin/python3")
p.add_argument("--config", default=os.path.join(ROOT, "configs", "translate.toml"))
p.add_argument("--reps", type=int, default=3, help="alternating repetitions per point")
p.add_argument("--quick", action="store_true", help="1 repetition, fewer steps (to try the script)")
add_log_options(p, "compare_seq2seq")
args = p.parse_args()

TORCH = os.path.join(ROOT, "bench", "torch_ref_seq2seq.py")
DOCS = os.path.join(ROOT, "bench", "RESULTS.md")
BEGIN, END = "<!-- compare_seq2seq:begin (bench/compare_seq2seq.py --write-docs) -->", "<!-- compare_seq2seq:end -->"
COMMON = ["--set", "model.dropout=0", "--threads", "2"]


def points():
    steps = ["--steps", "4" if args.quick else "10", "--warmup", "2"]
    train = ["--seq", "64", "--source-len", "64", "--batch", "48"] + steps
    out = [("train", "headlab", [args.headlab, "bench", args.config] + COMMON + train),
           ("train", "torch", [args.python, TORCH, args.config] + COMMON + train)]
    for beam in (1, 5):
        for sentences, group in ((32, "decode"), (8, "no_cache")):
            d = ["--decode", "--beam", str(beam), "--sentences", str(sentences), "--source-len", "64",
                 "--target-len", "128", "--reps", "1" if args.quick else "3", "--warmup", "1"]
            name = f"{group} beam {beam}"
            out.append((name, "headlab", [args.headlab, "bench", args.config] + COMMON + d))
            if group == "decode":
                out.append((name, "torch", [args.python, TORCH, args.config] + COMMON + d))
            else:
                out.append((name, "headlab_no_cache", [args.headlab, "bench", args.config] + COMMON + d + ["--no-cache"]))
    return out


def run_all():
    path = args.log or f"/tmp/compare_seq2seq-{datetime.datetime.now():%Y%m%d-%H%M%S}.jsonl"
    print(f"log: {path}", file=sys.stderr)
    records = []
    with open(path, "w") as log:
        pts = points()
        for rep in range(1 if args.quick else args.reps):
            for i in range(0, len(pts), 2):
                pair = pts[i:i + 2] if rep % 2 == 0 else pts[i:i + 2][::-1]
                for point, program, cmd in pair:
                    wait_idle(args.wait_idle)
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    if r.returncode != 0:
                        sys.exit(f"error: {' '.join(cmd)}: {r.stderr.strip()[-400:]}")
                    rec = dict(point=point, program=program, rep=rep, cmd=cmd,
                               result=json.loads(r.stdout.strip().splitlines()[-1]))
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    records.append(rec)
                    print(f"  {point} {program} rep {rep}", file=sys.stderr, flush=True)
    return records


def report(records):
    lines = []
    say = lines.append
    by = {}
    for r in records:
        by.setdefault((r["point"], r["program"]), []).append(r["result"])

    def med(point, program, key):
        return statistics.median(x[key] for x in by[(point, program)])

    def worst(point, key):
        return max(x[key] for (pt, _), xs in by.items() if pt == point for x in xs)

    first = by[("train", "headlab")][0]
    torch_run = by[("train", "torch")][0]
    say(f"headlab {first['headlab_commit']} (BLIS kernels {first['blis_kernels']}), PyTorch {torch_run['torch']} "
        f"({torch_run['cpu_capability']}, BLAS {', '.join(torch_run['blas'])}); "
        f"{len(by[('train', 'headlab')])} alternating repetitions per point, medians")
    say("")
    say("| point | measure | headlab | reference | ratio | peak RSS MB headlab / reference | RSS ratio "
          "| other cores busy (max) |")
    say("|---|---|---:|---:|---:|---:|---:|---:|")
    targets = []
    h, t = ("train", "headlab"), ("train", "torch")
    params = {x["params"] for k in (h, t) for x in by[k]}
    tok = med(*h, "tokens_per_s") / med(*t, "tokens_per_s")
    rss = med(*h, "peak_rss_mb") / med(*t, "peak_rss_mb")
    say(f"| train (torch) | target tokens/s | {med(*h, 'tokens_per_s'):,.0f} | {med(*t, 'tokens_per_s'):,.0f} | "
          f"**{tok:.2f}** | {med(*h, 'peak_rss_mb'):,.0f} / {med(*t, 'peak_rss_mb'):,.0f} | {rss:.2f} | "
          f"{worst('train', 'foreign_cores'):.2f} |")
    targets.append((f"training tokens/s >= 1.5x PyTorch (same network: parameters {sorted(params)})",
                    tok >= 1.5 and len(params) == 1, f"{tok:.2f}x"))
    targets.append(("training peak RSS <= 1/2 of PyTorch's", rss <= 0.5, f"{rss:.2f}"))
    for beam in (1, 5):
        for group, other, label, need in (("decode", "torch", "torch, its KV cache", 2.0),
                                          ("no_cache", "headlab_no_cache", "headlab without cache", 5.0)):
            point = f"{group} beam {beam}"
            a, b = med(point, "headlab", "sentences_per_s"), med(point, other, "sentences_per_s")
            ra, rb = med(point, "headlab", "peak_rss_mb"), med(point, other, "peak_rss_mb")
            say(f"| {point} ({label}) | sentences/s | {a:,.2f} | {b:,.2f} | **{a / b:.2f}** | {ra:,.0f} / {rb:,.0f} | "
                  f"{ra / rb:.2f} | {worst(point, 'foreign_cores'):.2f} |")
            name = "greedy" if beam == 1 else f"beam {beam}"
            targets.append((f"{name} decoding sentences/s >= {need:g}x {label} (128 target tokens)",
                            a / b >= need, f"{a / b:.2f}x"))
    say("")
    say("Targets (medians of this run):")
    for name, ok, value in targets:
        say(f"- {name}: {value} -> {'HOLDS' if ok else 'MISSES'}")
    return "\n".join(lines) + "\n"


if args.from_log:
    report_from_log(args, report, "compare_seq2seq", DOCS, BEGIN, END)
else:
    print(report(run_all()), end="")
