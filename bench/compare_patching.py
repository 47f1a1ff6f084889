#!/usr/bin/python3
"""Activation and path patching: `headlab circuits` against python/headlab's forward hooks (issue 31).

Both do the same work on the same checkpoint and inputs: every head's output, queries, keys and
values and the residual stream at every block and position patched from a clean run into a
corrupted one (--patch), and every sender head into every later receiver's q, k and v (--path-patch);
the metric is the loss of the clean text's next tokens. headlab reruns a patched forward only from
the patched block on (the layers below are kept); the hooks rerun the whole model every time, as a
TransformerLens-style hook loop does. The model is configs/default.toml's (2 layers x 4 heads, d_model
128, bytes) trained TRAIN_STEPS steps here, the inputs two 126-byte texts that differ in a few
words; one thread each, the model in float32 on both sides.

Each point runs the two programs --reps times, the order flipping every repetition, and the report
takes the median of each program's own timing (the analysis alone, no loading); it also shows the
largest difference between the two programs' patched metrics (they compute the same numbers, to
float32 precision) and how busy the other cores were.

  /usr/bin/python3 bench/compare_patching.py --wait-idle 20 --log bench/results/compare_patching-DATE.jsonl
  /usr/bin/python3 bench/compare_patching.py --from-log LOG                # the report again
  ... --from-log LOG --write-docs   # put the report into bench/RESULTS.md (between its markers)
  ... --from-log LOG --check        # fail unless bench/RESULTS.md shows LOG's report (CTest)
"""
import argparse
import csv
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from machine import add_log_options, foreign_cores, report_from_log, wait_idle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "bench", "RESULTS.md")
BEGIN, END = "<!-- compare_patching:begin (bench/compare_patching.py --write-docs) -->", "<!-- compare_patching:end -->"
TRAIN_STEPS = 300
CLEAN = "And God said, Let there be light: and there was light. And God saw the light, that it was good: " \
        "and God divided the light from"
CORRUPT = "And Man said, Let there be night: and there was light. And Man saw the light, that it was good: " \
          "and Man divided the light from"
assert len(CLEAN) == len(CORRUPT)
ANALYSES = {"patch": "activation patching", "path-patch": "path patching"}

# The hook side: load the checkpoint, time the analysis alone, print one JSON line.
TORCH_SCRIPT = r"""
import json, sys, time
import torch
sys.path.insert(0, sys.argv[1])
import headlab
from headlab.circuits import activation_patching, path_patching
checkpoint, analysis, clean, corrupt = sys.argv[2:6]
torch.set_num_threads(1)
model = headlab.load_model(checkpoint, torch.float32)
c, k = [list(clean.encode())], [list(corrupt.encode())]
targets = [c[0][1:] + [-1]]
t0 = time.perf_counter()
if analysis == "patch":
    out = activation_patching(model, c, k, targets)
    values = {"head_out": out["head_out"], "q": out["q"], "k": out["k"], "v": out["v"]}
else:
    out = path_patching(model, c, k, targets)
    values = {f"{s}>{r}:{site}": v for (s, r), d in out.items() for site, v in d.items()}
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "values": values, "torch": torch.__version__}))
"""


def headlab_run(analysis, checkpoint, out):
    cmd = [args.headlab, "circuits", checkpoint, "--" + analysis, "--prompt", CLEAN, "--corrupt", CORRUPT,
           "--out", out, "--threads", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare_patching: {' '.join(cmd)}: {r.stderr.strip()[-400:]}")
    m = re.search(rf"{ANALYSES[analysis]}: .*; (\d+) forwards in ([0-9.]+) s", r.stdout)
    if not m:
        sys.exit(f"compare_patching: no timing line in headlab's output:\n{r.stdout}")
    if analysis == "patch":
        with open(os.path.join(out, "patching_heads.csv")) as f:
            rows = list(csv.DictReader(f))
        values = {site: [float(x[site]) for x in rows] for site in ("head_out", "q", "k", "v")}
    else:
        with open(os.path.join(out, "path_patching.csv")) as f:
            values = {f"{x['sender']}>{x['receiver']}:{site}": float(x[site])
                      for x in csv.DictReader(f) for site in ("q", "k", "v")}
    return {"seconds": float(m.group(2)), "forwards": int(m.group(1)), "values": values}


def torch_run(analysis, checkpoint):
    cmd = [args.python, "-c", TORCH_SCRIPT, os.path.join(ROOT, "python"), checkpoint, analysis, CLEAN, CORRUPT]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        sys.exit(f"compare_patching: the torch hooks failed: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_all():
    path = args.log or f"/tmp/compare_patching-{datetime.datetime.now():%Y%m%d-%H%M%S}.jsonl"
    print(f"log: {path}", file=sys.stderr)
    scratch = tempfile.mkdtemp(prefix="compare_patching-")
    run = os.path.join(scratch, "run")
    train = [args.headlab, "train", os.path.join(ROOT, "configs", "default.toml"), "--out", run,
             "--set", f"train.steps={TRAIN_STEPS}", "--set", "train.threads=1", "--set", "train.eval_every=0"]
    if subprocess.run(train, capture_output=True).returncode != 0:
        sys.exit(f"compare_patching: {' '.join(train)} failed")
    checkpoint = sorted(glob.glob(os.path.join(run, "checkpoints", "step_*.h5")))[-1]
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    records = []
    with open(path, "w") as log:
        for rep in range(args.reps):
            for analysis in ANALYSES:
                programs = ["headlab", "torch"] if rep % 2 == 0 else ["torch", "headlab"]
                for program in programs:
                    wait_idle(args.wait_idle)
                    busy = foreign_cores(0.5)
                    result = (headlab_run(analysis, checkpoint, os.path.join(scratch, f"out-{rep}"))
                              if program == "headlab" else torch_run(analysis, checkpoint))
                    rec = dict(analysis=analysis, program=program, rep=rep, commit=commit, foreign_cores=busy,
                               result=result)
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    records.append(rec)
                    print(f"  {analysis} {program} rep {rep}: {result['seconds']:.3f} s", file=sys.stderr, flush=True)
    return records


def largest_difference(a, b):
    """The largest |a - b| over the metrics both runs patched (lists by head, or scalars by key)."""
    def flat(values):
        return {(k, i): v for k, vs in values.items() for i, v in enumerate(vs if isinstance(vs, list) else [vs])}
    fa, fb = flat(a), flat(b)
    if fa.keys() != fb.keys():
        sys.exit("compare_patching: the two programs patched different heads or pairs")
    return max(abs(fa[k] - fb[k]) for k in fa)


def report(records):
    by = {}
    for r in records:
        by.setdefault((r["analysis"], r["program"]), []).append(r)
    lines = [f"headlab {records[0]['commit']}, PyTorch {by[('patch', 'torch')][0]['result']['torch']}; "
             f"configs/default.toml's model after {TRAIN_STEPS} steps, two {len(CLEAN)}-byte texts, one thread each; "
             f"{len(by[('patch', 'headlab')])} alternating repetitions, medians", "",
             "| analysis | forwards (headlab) | headlab s | torch hooks s | ratio torch / headlab "
             "| largest metric difference | other cores busy (max) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for analysis, name in ANALYSES.items():
        h, t = by[(analysis, "headlab")], by[(analysis, "torch")]
        hs = statistics.median(x["result"]["seconds"] for x in h)
        ts = statistics.median(x["result"]["seconds"] for x in t)
        diff = max(largest_difference(a["result"]["values"], b["result"]["values"]) for a, b in zip(h, t))
        busy = max(x["foreign_cores"] for x in h + t)
        lines.append(f"| {name} | {h[0]['result']['forwards']} | {hs:.4f} | {ts:.4f} | **{ts / hs:.1f}** | "
                     f"{diff:.1e} | {busy:.2f} |")
    return "\n".join(lines) + "\n"


p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--headlab", default=os.path.join(ROOT, "build", "headlab"))
p.add_argument("--python", default="/usr/bin/python3")
p.add_argument("--reps", type=int, default=5, help="alternating repetitions per analysis")
add_log_options(p, "compare_patching")
args = p.parse_args()

if args.from_log:
    report_from_log(args, report, "compare_patching", DOCS, BEGIN, END)
else:
    print(report(run_all()), end="")
