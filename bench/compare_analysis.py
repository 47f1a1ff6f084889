#!/usr/bin/python3
"""Analysis and pruning speed: two headlab binaries on the pruning experiment's own jobs.

Takes jobs from `experiments/pruning/run.sh` (its LIST_JOBS=1 job list, so the command lines
are exactly the experiment's): per task and seed, the final `analyze` (ablation and
--layer-only) and the prune jobs named by --prune. Runs each job with the --before and the
--after binary alternately, --reps times (before, after, after, before, ...: a drifting machine
load hits both alike), each into its own scratch folder, and reports per job the median wall
time of each binary, their ratio, the peak RSS, and whether the two binaries' output files are
byte-identical (every file the job writes; both must hold the same names). The base models
must exist (run.sh's step 1, or `BASE=...` of an earlier run).

Also reported: "other cores busy", the CPU time of every other process on the machine during
the runs divided by the wall time (from /proc/stat minus the job's own rusage). Above ~0.1 the
machine was not quiet and the times are suspect.

  /usr/bin/python3 bench/compare_analysis.py --before /tmp/old/headlab --base runs/pruning
  /usr/bin/python3 bench/compare_analysis.py ... --tasks grammar,text --prune ablation,random_seed1
  /usr/bin/python3 bench/compare_analysis.py --from-log bench/results/compare_analysis-....jsonl
"""
import argparse
import datetime
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--before", help="the baseline headlab binary")
p.add_argument("--after", default=os.path.join(ROOT, "build", "headlab"), help="the new binary (build/headlab)")
p.add_argument("--base", default=os.path.join(ROOT, "runs", "pruning"), help="run.sh's BASE (base sweeps)")
p.add_argument("--tasks", default="grammar,text,induction,classify,k_relation")
p.add_argument("--seed", default="0", help="the base model's training seed")
p.add_argument("--prune", default="ablation,random_seed1",
               help="comma list of prune job names (folders under prune/ in run.sh's layout)")
p.add_argument("--reps", type=int, default=3)
p.add_argument("--scratch", default=None, help="folder for the jobs' outputs (default: a temporary one)")
p.add_argument("--log", default=None, help="JSON lines of every run (default /tmp/compare_analysis-<time>.jsonl)")
p.add_argument("--from-log", default=None, help="print the report of an earlier run's --log, run nothing")
args = p.parse_args()


def list_jobs(task):
    env = dict(os.environ, LIST_JOBS="1", TASKS=task, SEEDS=args.seed, BASE=args.base, OUT="OUT",
               HEADLAB="HEADLAB")
    out = subprocess.run(["bash", os.path.join(ROOT, "experiments", "pruning", "run.sh")], env=env, cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_analysis: run.sh LIST_JOBS=1 failed for {task}: {out.stderr.strip()}")
    wanted = {f"OUT/{task}/seed{args.seed}": "analyze"}
    for name in args.prune.split(","):
        wanted[f"OUT/{task}/seed{args.seed}/prune/{name}"] = f"prune {name}"
    jobs = []
    for line in out.stdout.splitlines():
        folder, _marker, *command = line.split()
        if folder in wanted:
            jobs.append((wanted.pop(folder), folder, command))
    if wanted:
        sys.exit(f"compare_analysis: run.sh lists no job for {', '.join(wanted)}")
    return jobs


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def busy_jiffies():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return user + nice + system + irq + softirq + steal


def run_job(binary, folder, command, out_dir):
    """Runs one job into out_dir; returns (seconds, peak RSS in KiB, CPU seconds of others)."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    argv = [binary if a == "HEADLAB" else a.replace(folder, out_dir) for a in command]
    tick = os.sysconf("SC_CLK_TCK")
    busy0 = busy_jiffies()
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive"))
    _pid, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    others = (busy_jiffies() - busy0) / tick - (usage.ru_utime + usage.ru_stime)
    if status != 0:
        sys.exit(f"compare_analysis: {' '.join(argv)} failed: {child.stderr.read().strip()}")
    return seconds, usage.ru_maxrss, max(others, 0.0)


def outputs(folder):
    files = {}
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = f.read()
    return files


def report(records):
    rows = {}
    for r in records:
        rows.setdefault((r["task"], r["job"]), []).append(r)
    print("| task | job | before s (median) | after s (median) | before / after | peak RSS after / before"
          " | outputs identical | other cores busy |")
    print("|---|---|---|---|---|---|---|---|")
    total_before = total_after = 0.0
    for (task, job), rs in rows.items():
        before = statistics.median(r["seconds"] for r in rs if r["binary"] == "before")
        after = statistics.median(r["seconds"] for r in rs if r["binary"] == "after")
        rss_b = statistics.median(r["max_rss_kib"] for r in rs if r["binary"] == "before")
        rss_a = statistics.median(r["max_rss_kib"] for r in rs if r["binary"] == "after")
        identical = all(r["identical"] for r in rs if r["binary"] == "after")
        busy = max(r["other_cpu_s"] / r["seconds"] for r in rs)
        total_before += before
        total_after += after
        print(f"| {task} | {job} | {before:.2f} | {after:.2f} | {before / after:.2f}x | {rss_a / rss_b:.2f} |"
              f" {'yes' if identical else '**no**'} | {busy:.2f} |")
    print(f"| all | sum of medians | {total_before:.1f} | {total_after:.1f} | {total_before / total_after:.2f}x | | | |")
    # Issue 11's target: analyze and a prune job >= 2x faster, outputs byte-identical.
    print("\n| target (issue 11) | jobs at >= 2x | ratios | outputs identical |")
    print("|---|---|---|---|")
    for kind in ("analyze", "prune"):
        ratios = []
        for (task, job), rs in rows.items():
            if not job.startswith(kind):
                continue
            before = statistics.median(r["seconds"] for r in rs if r["binary"] == "before")
            after = statistics.median(r["seconds"] for r in rs if r["binary"] == "after")
            ratios.append((before / after, all(r["identical"] for r in rs)))
        if ratios:
            held = sum(r >= 2 for r, _ in ratios)
            print(f"| `{kind}` >= 2x faster | {held} of {len(ratios)} | {min(r for r, _ in ratios):.2f}-"
                  f"{max(r for r, _ in ratios):.2f}x | {'all' if all(i for _, i in ratios) else '**not all**'} |")
    meta = next((r for r in records if "before_binary" in r), None)
    if meta:
        print(f"\nbefore: {meta['before_binary']}  after: {meta['after_binary']}  reps: {meta['reps']}"
              f"  started {meta['started']}")


if args.from_log:
    with open(args.from_log) as f:
        report([json.loads(line) for line in f if line.strip()])
    sys.exit(0)

if not args.before:
    sys.exit("compare_analysis: give --before BINARY (the baseline build)")
for binary in (args.before, args.after):
    if not os.access(binary, os.X_OK):
        sys.exit(f"compare_analysis: {binary} is not an executable")
log_path = args.log or f"/tmp/compare_analysis-{datetime.datetime.now():%Y%m%d-%H%M%S}.jsonl"
scratch = args.scratch or tempfile.mkdtemp(prefix="compare_analysis-")
records = []
with open(log_path, "w") as log:
    meta = {"before_binary": args.before, "after_binary": args.after, "reps": args.reps,
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "before_sha256": sha256(args.before), "after_sha256": sha256(args.after)}
    for task in args.tasks.split(","):
        for job, folder, command in list_jobs(task):
            for rep in range(args.reps):
                order = ("before", "after") if rep % 2 == 0 else ("after", "before")
                dirs = {}
                for which in order:
                    binary = args.before if which == "before" else args.after
                    dirs[which] = os.path.join(scratch, which, task, job.replace(" ", "_"))
                    seconds, rss, others = run_job(binary, folder, command, dirs[which])
                    records.append({"task": task, "job": job, "binary": which, "rep": rep, "seconds": seconds,
                                    "max_rss_kib": rss, "other_cpu_s": others, **meta})
                    print(f"{task:10s} {job:22s} {which:6s} {seconds:7.2f} s", flush=True)
                identical = outputs(dirs["before"]) == outputs(dirs["after"])
                for r in records[-2:]:
                    r["identical"] = identical
                    log.write(json.dumps(r) + "\n")
                log.flush()
print(f"\nlog: {log_path}\n")
report(records)
if not args.scratch:
    shutil.rmtree(scratch)
