#!/usr/bin/env python3
"""Data-parallel speed on this machine, and a model of it on a cluster (docs/distributed.md).

Measures, side by side in one run and alternating, the same training (train.grad_accum = 2, so
every step is two micro-batches) as 1 rank x 2 threads and as `mpirun -np 2` x 1 thread, and
`headlab bench --phases` for the step's compute time and the parameter count. Raw results go to
bench/results/mpi_scaling.json; the tables in docs/distributed.md are rendered from that file:

    /usr/bin/python3 bench/mpi_scaling.py --reps 5               # measure (quiet machine!)
    /usr/bin/python3 bench/mpi_scaling.py --write-docs           # tables from the JSON
    /usr/bin/python3 bench/mpi_scaling.py --check                # docs match the JSON (CTest)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "mpi_scaling.json"
DOCS = ROOT / "docs" / "distributed.md"
BEGIN, END = "<!-- mpi_scaling:begin (bench/mpi_scaling.py --write-docs) -->", "<!-- mpi_scaling:end -->"
MODELS = {"bench": "configs/bench.toml", "default": "configs/default.toml"}
BANDWIDTHS_GBIT = [10, 25, 100]
RANKS = [2, 4, 8, 16, 32, 64]
LATENCY_S = 5e-6  # per message of the ring (an assumption: a typical MPI latency over Ethernet/IB)

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def run(cmd, env=None):
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env)
    if proc.returncode != 0:
        sys.exit(f"mpi_scaling: {' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def steady_tokens_per_s(run_dir, skip_rows):
    """Tokens per second between metrics row `skip_rows` and the one before the last: the warm-up
    is left out, and so is the last step, which includes the final evaluation (on rank 0 alone
    under mpirun, with all threads in one process)."""
    import csv
    with open(run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    first, last = rows[skip_rows - 1], rows[-2]
    return (int(last["tokens"]) - int(first["tokens"])) / (float(last["elapsed_s"]) - float(first["elapsed_s"]))


def measure(args):
    binary = str(Path(args.binary).resolve())
    mpirun = shutil.which("mpirun") or sys.exit("mpi_scaling: mpirun not found (apt-get install openmpi-bin)")
    result = {"command": " ".join(sys.argv), "reps": args.reps, "steps": args.steps, "skip_rows": args.skip,
              "headlab_version": run([binary, "--version"]).strip(), "models": {}}
    common = ["--set", f"train.steps={args.steps}", "--set", "train.warmup_steps=0", "--set", "train.eval_every=0", "--set", "train.checkpoint_every=0",
              "--set", "train.log_every=1", "--set", "train.grad_accum=2", "--set", "train.prefetch=true"]
    with tempfile.TemporaryDirectory(prefix="headlab_mpi_scaling_") as tmp:
        for name, config in MODELS.items():
            config = str(ROOT / config)
            bench = json.loads(run([binary, "bench", config, "--threads", "2", "--steps", "20", "--phases"]).strip())
            entry = {"config": MODELS[name], "params": bench["params"], "bench_step_ms_median": bench["step_ms_median"],
                     "bench_phase_ms_median": bench.get("phase_ms_median", {}), "bench_batch": bench["config"]["batch"],
                     "bench_seq": bench["config"]["seq"], "bench_foreign_cores": bench["foreign_cores"],
                     "one_rank_two_threads": [], "two_ranks_one_thread": []}
            for rep in range(args.reps):
                one = Path(tmp) / f"{name}_one_{rep}"
                run([binary, "train", config, "--out", str(one), "--set", "train.threads=2"] + common)
                entry["one_rank_two_threads"].append(steady_tokens_per_s(one, args.skip))
                two = Path(tmp) / f"{name}_two_{rep}"
                run([mpirun, "-np", "2", binary, "train", config, "--out", str(two), "--set", "train.threads=1"] + common,
                    env=MPI_ENV)
                entry["two_ranks_one_thread"].append(steady_tokens_per_s(two, args.skip))
                print(f"{name} rep {rep}: 1x2 {entry['one_rank_two_threads'][-1]:.0f} tok/s, "
                      f"2x1 {entry['two_ranks_one_thread'][-1]:.0f} tok/s", file=sys.stderr)
            result["models"][name] = entry
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {RESULTS}", file=sys.stderr)


def ring_allreduce_s(grad_bytes, ranks, gbit):
    """Ring all-reduce: 2 (P-1) steps, each sending 1/P of the gradient and paying one latency."""
    return 2 * (ranks - 1) / ranks * grad_bytes / (gbit * 1e9 / 8) + 2 * (ranks - 1) * LATENCY_S


def render(result):
    version = "; ".join(" ".join(line.split()) for line in result["headlab_version"].splitlines()[:2])
    out = [f"Measured by `{result['command']}` ({version}; "
           f"{result['reps']} alternating repetitions of {result['steps']} steps, tokens/s from step "
           f"{result['skip_rows']} to step {result['steps'] - 1}: warm-up and the final evaluation left out).", "",
           "| model | params | 1 rank x 2 threads, tok/s (median, min-max) | 2 ranks x 1 thread, tok/s | ratio 2x1 / 1x2 (median of paired reps) |",
           "|---|---:|---:|---:|---:|"]
    for name, m in result["models"].items():
        a, b = m["one_rank_two_threads"], m["two_ranks_one_thread"]
        ratios = [y / x for x, y in zip(a, b)]
        out.append(f"| {name} (`{m['config']}`) | {m['params']:,} | {statistics.median(a):,.0f} ({min(a):,.0f}-{max(a):,.0f}) "
                   f"| {statistics.median(b):,.0f} ({min(b):,.0f}-{max(b):,.0f}) | {statistics.median(ratios):.2f} "
                   f"({min(ratios):.2f}-{max(ratios):.2f}) |")
    out += ["", "The model, per rank and step: compute *C* = `headlab bench --phases` median step time here "
            "(2 threads, one micro-batch); gradient *G* = 4 bytes x parameters; ring all-reduce "
            f"*R(P)* = 2 (P-1)/P x G / bandwidth + 2 (P-1) x {LATENCY_S * 1e6:.0f} us. Without overlap a step takes "
            "C + R(P); overlapping the all-reduce with the backward hides up to the backward's time *B*: "
            "C + max(0, R(P) - B). Efficiency = C / step time. Break-even = C / R(P): how many times "
            "faster than this 2-core machine a rank would have to compute for the all-reduce to take as "
            "long as the compute (a many-core node is that much faster; communication dominates beyond it).", ""]
    for name, m in result["models"].items():
        compute = m["bench_step_ms_median"] / 1e3
        backward = m["bench_phase_ms_median"].get("backward", 0.0) / 1e3
        grad_bytes = 4 * m["params"]
        out += [f"**{name}**: C = {compute * 1e3:.1f} ms (batch {m['bench_batch']} x {m['bench_seq']} tokens), "
                f"B = {backward * 1e3:.1f} ms, G = {grad_bytes / 1e6:.2f} MB.", "",
                "| P | " + " | ".join(f"{g} Gb/s: R (ms) | efficiency, no overlap / overlap | break-even" for g in BANDWIDTHS_GBIT)
                + " |",
                "|---:|" + "---:|---:|---:|" * len(BANDWIDTHS_GBIT)]
        for p in RANKS:
            cells = []
            for g in BANDWIDTHS_GBIT:
                r = ring_allreduce_s(grad_bytes, p, g)
                plain, hidden = compute / (compute + r), compute / (compute + max(0.0, r - backward))
                cells.append(f"{r * 1e3:.2f} | {plain:.2f} / {hidden:.2f} | {compute / r:.0f}x")
            out.append(f"| {p} | " + " | ".join(cells) + " |")
        for g in BANDWIDTHS_GBIT:
            dominated = [p for p in range(2, 65) if ring_allreduce_s(grad_bytes, p, g) > compute]
            out.append(f"- {g} Gb/s: at this machine's speed, communication exceeds compute "
                       + (f"from P = {dominated[0]}" if dominated else "at no P up to 64")
                       + f"; at P = 64 it does on ranks more than {compute / ring_allreduce_s(grad_bytes, 64, g):.0f}x faster.")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def docs_with_tables(result):
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"mpi_scaling: {DOCS} has no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + render(result) + END + tail


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / "build" / "headlab"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip", type=int, default=5, help="warm-up rows of metrics.csv left out of tokens/s")
    parser.add_argument("--write-docs", action="store_true", help="render the tables into docs/distributed.md")
    parser.add_argument("--check", action="store_true", help="fail unless docs/distributed.md shows the JSON's tables")
    args = parser.parse_args()
    if args.write_docs or args.check:
        result = json.loads(RESULTS.read_text())
        expected = docs_with_tables(result)
        if args.check:
            if DOCS.read_text() != expected:
                sys.exit(f"{DOCS} differs from what bench/mpi_scaling.py --write-docs renders from {RESULTS}")
            return
        DOCS.write_text(expected)
        return
    measure(args)


if __name__ == "__main__":
    main()
