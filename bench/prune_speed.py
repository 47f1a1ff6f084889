#!/usr/bin/python3
"""Inference speed of physically removed units (issue 32): build/bench_prune with half of each unit
removed (heads of every layer, FFN units of every block, every other attention layer whole, every
other FFN block whole), in rounds that take the units in turn so that each sees the same machine
state; the table of docs/pruning.md from the JSON lines it logs.

  cmake --build build && /usr/bin/python3 bench/prune_speed.py --rounds 3 \\
      --log bench/results/prune_speed-DATE.jsonl                   # on a quiet machine, clean checkout
  /usr/bin/python3 bench/prune_speed.py --from-log LOG              # the table
  ... --from-log LOG --write-docs   # put it into docs/pruning.md (between its markers)
  ... --from-log LOG --check        # fail unless docs/pruning.md shows it (CTest)

Each line of the log is one bench_prune run: the unit, the round, the commit (the checkout's,
which must be clean and what build/headlab says it was built from), the cores other processes kept
busy just before, the parameter counts and flop ratio, and per batch size the median and minimum
forward ms of the full and the pruned model over the alternated reps.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs", "pruning.md")
BEGIN = "<!-- prune_speed:begin (bench/prune_speed.py --write-docs) -->"
END = "<!-- prune_speed:end -->"
UNITS = {"heads": "half the heads of every layer", "ffn": "half the FFN units of every block",
         "layers": "every other attention layer, whole", "blocks": "every other FFN block, whole"}


def checkout_commit():
    """HEAD of the clean checkout the binaries were built from; exits when either is not so."""
    git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    if git("status", "--porcelain", "--untracked-files=no"):
        sys.exit("prune_speed.py: the checkout has uncommitted changes; measure a clean commit")
    head = git("rev-parse", "--short=7", "HEAD")
    info = subprocess.run([os.path.join(ROOT, "build", "headlab"), "info"], capture_output=True, text=True).stdout
    built = next((line.split()[1] for line in info.splitlines() if line.startswith("commit")), "")
    if built != head:
        sys.exit(f"prune_speed.py: build/ was built from {built or 'an unknown commit'}, the checkout is {head}: "
                 "run cmake --build build first")
    return head


def parse(output):
    """bench_prune's printout as a dict: its header line, parameters, flop ratio and batch rows."""
    lines = output.strip().splitlines()
    params = lines[1].split(";")[0].split()  # "parameters A -> B"
    rows = []
    for line in lines[3:]:
        b, fm, fmin, pm, pmin = line.split()[:5]
        rows.append({"batch": int(b), "full_ms": float(fm), "full_min_ms": float(fmin), "pruned_ms": float(pm),
                     "pruned_min_ms": float(pmin)})
    return {"header": lines[0], "params_full": int(params[1]), "params_pruned": int(params[3]),
            "flop_ratio": float(lines[1].split()[-1]), "rows": rows}


def run(args):
    commit = checkout_commit()
    out = open(args.log, "a")
    env = {**os.environ, "OMP_WAIT_POLICY": "passive", "OMP_NUM_THREADS": str(args.threads)}
    for r in range(1, args.rounds + 1):
        for unit in UNITS:
            machine.wait_idle(args.wait_idle)
            busy = machine.foreign_cores()
            cmd = [os.path.join(ROOT, "build", "bench_prune"), str(args.reps), str(args.threads), "encoder",
                   str(args.seq_len), args.batches, unit]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            record = {"unit": unit, "round": r, "commit": commit, "command": " ".join(cmd[1:]),
                      "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      "foreign_cores": round(busy, 2), **parse(done.stdout)}
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(f"round {r} {unit}: " + ", ".join(f"B={x['batch']} {x['full_ms'] / x['pruned_ms']:.3f}"
                                                   for x in record["rows"]), file=sys.stderr)


def report(records):
    """One row per unit and batch size: the median over rounds of full ms / pruned ms."""
    first = records[0]
    units = [u for u in UNITS if any(r["unit"] == u for r in records)]
    batches = sorted({x["batch"] for r in records for x in r["rows"]})
    rounds = sorted({r["round"] for r in records})
    out = [f"`bench_prune {first['command'].rsplit(' ', 1)[0]} UNIT`, commit `{first['commit']}`, "
           f"{len(rounds)} rounds taking the units in turn, each {first['header'].rsplit(', ', 1)[1]}; speed-up = "
           f"full / pruned median forward ms, the median over rounds (lowest - highest round); other processes "
           f"kept at most {max(r['foreign_cores'] for r in records):.2f} cores busy before a run.", "",
           "| removed | parameters | flop ratio | ideal | " + " | ".join(f"speed-up, batch {b}" for b in batches) + " |",
           "|---|---:|---:|---:|" + "---:|" * len(batches)]
    for u in units:
        mine = [r for r in records if r["unit"] == u]
        cells = []
        for b in batches:
            s = [x["full_ms"] / x["pruned_ms"] for r in mine for x in r["rows"] if x["batch"] == b]
            cells.append(f"**{statistics.median(s):.3f}** ({min(s):.3f} - {max(s):.3f})")
        m = mine[0]
        out.append(f"| {UNITS[u]} | {m['params_full']:,} -> {m['params_pruned']:,} | {m['flop_ratio']:.3f} | "
                   f"{1 / m['flop_ratio']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batches", default="1,16")
    machine.add_log_options(p, "prune_speed")
    args = p.parse_args()
    if args.from_log:
        return machine.report_from_log(args, report, "prune_speed", DOCS, BEGIN, END)
    args.log = args.log or f"/tmp/prune_speed-{datetime.datetime.now():%Y%m%d-%H%M%S}.jsonl"
    run(args)
    print(report([json.loads(line) for line in open(args.log) if line.strip()]), end="")
    print(f"log: {args.log}", file=sys.stderr)


if __name__ == "__main__":
    main()
