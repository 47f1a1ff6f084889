#!/usr/bin/python3
"""headlab vs the PyTorch reference (bench/torch_ref.py), alternately in one run.

The reference is the repository's own: bench/torch_ref.py trains python/headlab's Model (the
network of configs/bench.toml, plain matmul + masked-softmax attention) with torch.optim.AdamW,
so this script needs nothing outside a clone but Debian's python3-torch and a built headlab.

For every configuration it runs torch_ref.py and `headlab bench configs/bench.toml` back to
back, `--reps` times (torch, headlab, torch, headlab, ...; the order flips every repetition so
a drifting machine load hits both alike), takes the median of each program's per-run median step
time, and prints tokens/s of both and their ratio. Then it checks the speed targets of issue 5:

  grid      d_model {128,256,512} x heads {1,2,4,8,16}, 4 layers, T 128, batch 16, 2 threads:
            headlab/torch tokens/s >= 2 at d256/h8, >= 1.5 everywhere, >= 1.2 at d512/h1-4
  heads     step time at 16 heads / step time at 1 head, d_model 256 (<= 1.2)
  threads   tokens/s at 2 threads / 1 thread, d_model 256, 8 heads (>= 1.8)
  seq       tokens/s at T 512 / T 64, d_model 256, 8 heads, batch 16 (>= 0.6)
  memory    peak RSS headlab / torch (<= 0.5) and allocations per steady-state step (== 0)
  gemm      achieved training GFLOP/s at d_model 512 / BLIS sgemm 2048^3 GFLOP/s, the latter
            measured by `headlab bench --gemm` next to every d512 pair (>= 0.7)

Ratios between two headlab configurations (heads, threads, seq) come from points run
interleaved in their own group, paired run by run. The report also gives tokens per CPU-second
(robust to other load for 1-thread runs: use --threads 1 when the machine is shared), the number
of cores other processes used meanwhile ("other cores busy": above ~0.1 the 2-thread figures are
contended), and for misses the "ceiling": the ratio headlab would reach if its whole step ran at
BLIS's 2048^3 sgemm rate measured in the same run.

Nothing is installed: it assumes `apt-get install -y python3-torch` and a built headlab.
Raw JSON lines of every run go to --log (default /tmp/compare_torch-<time>.jsonl).

  /usr/bin/python3 bench/compare_torch.py                    # full run (about 30 min idle)
  /usr/bin/python3 bench/compare_torch.py --quick            # 5 grid points + targets, ~4 min idle
  /usr/bin/python3 bench/compare_torch.py --headlab build-bench/headlab --headlab-b /tmp/fix/headlab
  /usr/bin/python3 bench/compare_torch.py --from-log /tmp/compare_torch-....jsonl   # report again
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

from machine import wait_idle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--headlab", default=None, help="headlab binary (default: $HEADLAB, build/headlab, build-bench/headlab)")
p.add_argument("--headlab-b", default=None,
               help="a second headlab binary (e.g. a branch with a fix), run in the same alternation; "
                    "reported as its own table and targets")
p.add_argument("--torch-ref", default=os.path.join(ROOT, "bench", "torch_ref.py"),
               help="the PyTorch side (default: bench/torch_ref.py, python/headlab's model)")
p.add_argument("--python", default="/usr/bin/python3", help="interpreter for torch_ref.py (Debian's torch)")
p.add_argument("--config", default=os.path.join(ROOT, "configs", "bench.toml"))
p.add_argument("--quick", action="store_true", help="fewer points, steps and repetitions (iteration)")
p.add_argument("--reps", type=int, default=None, help="alternating repetitions per configuration (3; quick 2)")
p.add_argument("--steps", type=int, default=None, help="timed steps per run (10; quick 6)")
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--seq", type=int, default=128)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--only", default="", help="comma list of parts to run: grid,heads,threads,seq (default all)")
p.add_argument("--wait-idle", type=float, default=0.0,
               help="before each pair, wait up to this many seconds for other processes to use < 0.3 cores")
p.add_argument("--from-log", default=None, help="print the report of an earlier run's --log, run nothing")
p.add_argument("--log", default=None, help="JSON lines of every run (default /tmp/compare_torch-<time>.jsonl)")
args = p.parse_args()

reps = args.reps or (2 if args.quick else 3)
steps = args.steps or (6 if args.quick else 10)
parts = set(args.only.split(",")) if args.only else {"grid", "heads", "threads", "seq"}


def find_headlab():
    if args.headlab:
        return args.headlab
    if os.environ.get("HEADLAB"):
        return os.environ["HEADLAB"]
    for cand in ("build/headlab", "build-bench/headlab"):
        path = os.path.join(ROOT, cand)
        if os.access(path, os.X_OK):
            return path
    sys.exit("compare_torch: no headlab binary found (build it, or pass --headlab)")


HEADLAB = args.headlab if args.from_log else find_headlab()
LOG = args.from_log or args.log or f"/tmp/compare_torch-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
log_file = None if args.from_log else open(LOG, "w")


def note(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, kind, point):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    try:
        out = json.loads(line)
    except json.JSONDecodeError:
        out = {"error": (r.stderr.strip() or line or f"exit {r.returncode}")[-400:]}
    if r.returncode != 0 and "error" not in out:
        out["error"] = r.stderr.strip()[-400:] or f"exit {r.returncode}"
    rec = dict(kind=kind, point=point, wall_s=round(time.time() - t0, 2), cmd=cmd, result=out)
    log_file.write(json.dumps(rec) + "\n")
    log_file.flush()
    if "error" in out:
        note(f"  {kind} FAILED: {out['error']}")
    return out


def torch_cmd(pt, steps_):
    return [args.python, args.torch_ref, "--d_model", str(pt["d"]), "--n_layers", str(args.layers), "--n_heads",
            str(pt["h"]), "--seq", str(pt["T"]), "--batch", str(args.batch), "--steps", str(steps_), "--warmup",
            str(args.warmup), "--threads", str(pt["threads"]), "--tag", pt["key"]]


def headlab_cmd(pt, steps_, binary=None):
    return [binary or HEADLAB, "bench", args.config, "--set", f"model.d_model={pt['d']}", "--set", f"model.n_heads={pt['h']}",
            "--set", f"model.n_layers={args.layers}", "--seq", str(pt["T"]), "--batch", str(args.batch), "--threads",
            str(pt["threads"]), "--steps", str(steps_), "--warmup", str(args.warmup), "--tag", pt["key"]]


def gemm_cmd():
    return [HEADLAB, "bench", "--gemm", "--size", "2048", "--reps", "5", "--threads", str(args.threads)]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


results = {}  # name -> dict(torch=[json...], headlab=[json...], gemm=[json...])


def measure(pts, steps_=None, with_gemm=False):
    """Alternates torch and headlab on each point of `pts` (interleaved), `reps` times."""
    steps_ = steps_ or steps
    for pt in pts:
        results.setdefault(pt["key"], dict(pt=pt, torch=[], headlab=[], headlab_b=[], gemm=[]))
    for rep in range(reps):
        wait_idle(args.wait_idle)
        order = ["torch", "headlab"] + (["headlab_b"] if args.headlab_b else [])
        if rep % 2:
            order.reverse()
        for pt in pts:
            res = results[pt["key"]]
            for kind in order:
                cmd = (torch_cmd(pt, steps_) if kind == "torch" else
                       headlab_cmd(pt, steps_, args.headlab_b if kind == "headlab_b" else None))
                out = run(cmd, kind, pt["key"])
                if "error" not in out:
                    res[kind].append(out)
            if with_gemm:
                out = run(gemm_cmd(), "gemm", pt["key"])
                if "error" not in out:
                    res["gemm"].append(out)
    for pt in pts:
        s = summary(pt["key"])
        b = summary(pt["key"], "headlab_b") if args.headlab_b else None
        note(f"{pt['key']:<28} torch {fmt(s['torch_tps'], 0):>8} tok/s  headlab {fmt(s['headlab_tps'], 0):>8} tok/s  "
             f"ratio {fmt(s['ratio'], 2):>5}" + (f"  B {fmt(b['headlab_tps'], 0)} tok/s ratio {fmt(b['ratio'], 2)}" if b else "")
             + f"  (per CPU-s ratio {fmt(s['cpu_ratio'], 2)}; other cores busy: {fmt(s['foreign'], 2)})")


def cpu_tps(o):
    """Tokens per CPU-second of the program itself: tokens/step / (own_cores x mean step time).
    On a shared machine a 1-thread run's CPU time barely depends on the other load, so this is
    the contention-robust speed for --threads 1 (with 2 threads it also counts spin-waiting)."""
    ms, own = o.get("step_ms_all"), o.get("own_cores")
    if not ms or not own:
        return None
    cfg = o.get("config", {})
    return cfg.get("batch", args.batch) * cfg.get("seq", args.seq) / (own * statistics.mean(ms) / 1e3)


def summary(name, hk="headlab"):
    """Medians of one point; hk picks the headlab binary ("headlab" or "headlab_b")."""
    r = results.get(name)
    if r is None:
        return None
    r = dict(r, headlab=r[hk])
    def stat(kind, key):
        return med([o.get(key) for o in r[kind]])
    s = dict(name=name, pt=r["pt"], torch_tps=stat("torch", "tokens_per_s"), headlab_tps=stat("headlab", "tokens_per_s"),
             torch_ms=stat("torch", "step_ms_median"), headlab_ms=stat("headlab", "step_ms_median"),
             torch_rss=stat("torch", "peak_rss_mb"), headlab_rss=stat("headlab", "peak_rss_mb"),
             torch_gflops=stat("torch", "gflops"), headlab_gflops=stat("headlab", "gflops"),
             allocs=max([o.get("allocations_per_step", 0) for o in r["headlab"]], default=None),
             gemm_gflops=stat("gemm", "gflops"), n=(len(r["torch"]), len(r["headlab"])),
             params=(stat("torch", "params"), stat("headlab", "params")),
             foreign=med([o.get("foreign_cores") for o in r["torch"] + r["headlab"]]),
             torch_cpu_tps=med([cpu_tps(o) for o in r["torch"]]), headlab_cpu_tps=med([cpu_tps(o) for o in r["headlab"]]))
    s["cpu_ratio"] = (s["headlab_cpu_tps"] / s["torch_cpu_tps"]
                      if s["torch_cpu_tps"] and s["headlab_cpu_tps"] else None)
    s["ratio"] = s["headlab_tps"] / s["torch_tps"] if s["torch_tps"] and s["headlab_tps"] else None
    s["rss_ratio"] = s["headlab_rss"] / s["torch_rss"] if s["torch_rss"] and s["headlab_rss"] else None
    return s


def fmt(x, digits):
    return "n/a" if x is None else f"{x:,.{digits}f}"


def point(d, h, T=None, threads=None, group="grid"):
    T = T or args.seq
    threads = threads or args.threads
    name = f"d{d}/h{h}/T{T}/t{threads}"
    return dict(d=d, h=h, T=T, threads=threads, name=name, group=group, key=f"{group}:{name}")


def parse_key(k):
    """"seq:d256/h8/T512/t2" -> the point() it names."""
    group, name = k.split(":", 1)
    d, h, T, t = (int(part[1:]) for part in name.split("/"))
    return point(d, h, T=T, threads=t, group=group)


def main_from_log():
    global HEADLAB
    grid_points = []
    for line in open(args.from_log):
        rec = json.loads(line)
        pt = parse_key(rec["point"])
        res = results.setdefault(pt["key"], dict(pt=pt, torch=[], headlab=[], headlab_b=[], gemm=[]))
        if "error" not in rec["result"]:
            res[rec["kind"]].append(rec["result"])
        if rec["kind"] == "headlab" and HEADLAB is None:
            HEADLAB = rec["cmd"][0]
        if rec["kind"] == "headlab_b":
            args.headlab_b = rec["cmd"][0]
        if pt["group"] == "grid" and (pt["d"], pt["h"]) not in grid_points:
            grid_points.append((pt["d"], pt["h"]))
    info = f"blis kernels {next((o['blis_kernels'] for r in results.values() for o in r['headlab']), '?')}"
    report(grid_points, info, 0.0)
    if args.headlab_b:
        print("\n\nB (--headlab-b), from the same runs of torch:\n")
        report(grid_points, info, 0.0, "headlab_b", args.headlab_b)


def main():
    if args.from_log:
        return main_from_log()
    start = time.time()
    if args.quick:
        grid = [(128, 8), (256, 1), (256, 8), (256, 16), (512, 8)]
    else:
        grid = [(d, h) for d in (128, 256, 512) for h in (1, 2, 4, 8, 16)]
    note(f"compare_torch: headlab {HEADLAB}, torch_ref {os.path.normpath(args.torch_ref)}, reps {reps}, "
         f"steps {steps} (+{args.warmup} warm-up), log {LOG}")
    head = subprocess.run([HEADLAB, "info"], capture_output=True, text=True).stdout
    # Ratios between two headlab configurations (heads, threads, seq) come from points measured
    # interleaved in one group, so both sides see the same machine load.
    if "grid" in parts:
        for d, h in grid:
            measure([point(d, h)], with_gemm=(d == 512))
    if "heads" in parts:
        measure([point(256, 1, group="heads"), point(256, 16, group="heads")])
    if "threads" in parts:
        measure([point(256, 8, threads=2, group="threads"), point(256, 8, threads=1, group="threads")])
    if "seq" in parts:
        measure([point(256, 8, T=64, group="seq"), point(256, 8, T=512, group="seq")], steps_=max(4, steps // 2))
    elapsed = time.time() - start
    report(grid, head, elapsed)
    if args.headlab_b:
        print("\n\nB (--headlab-b), from the same runs of torch:\n")
        head_b = subprocess.run([args.headlab_b, "info"], capture_output=True, text=True).stdout
        report(grid, head_b, elapsed, "headlab_b", args.headlab_b)


def target(ok):
    return "n/a" if ok is None else ("HOLDS" if ok else "MISSES")


def pair_ratio(key_a, key_b, field, kind="headlab"):
    """Median over repetitions of field(a) / field(b), pairing run i of a with run i of b
    (measured back to back in one group), so load drift cancels."""
    a, b = results.get(key_a), results.get(key_b)
    if not a or not b:
        return None
    xs = [x.get(field) for x in a[kind]]
    ys = [y.get(field) for y in b[kind]]
    rs = [x / y for x, y in zip(xs, ys) if x and y]
    return statistics.median(rs) if rs else None


def report(grid, info, elapsed, hk="headlab", binary=None):
    out = []
    w = out.append
    def summary(name):  # this report's headlab binary
        return globals()["summary"](name, hk)
    w(f"compare_torch: {datetime.datetime.now().isoformat(timespec='seconds')}, "
      f"{elapsed / 60:.1f} min, reps {reps}, steps {steps} (+{args.warmup} warm-up), "
      f"{args.layers} layers, batch {args.batch}")
    blis = [l.split()[-1] for l in info.splitlines() if l.startswith("blis kernels")]
    w(f"headlab: {binary or HEADLAB} (BLIS kernels {blis[0] if blis else '?'}); torch_ref forces BLIS_ARCH_TYPE=0 (skx)")
    w(f"raw runs: {LOG}")
    w("")
    w("| group | d_model | heads | T | threads | torch tok/s | headlab tok/s | ratio | torch ms | headlab ms "
      "| torch GFLOP/s | headlab GFLOP/s | peak RSS MB torch / headlab | RSS ratio | allocs/step "
      "| tok per CPU-s torch / headlab (ratio) | other cores busy | runs |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key in results:
        s = summary(key)
        pt = s["pt"]
        w(f"| {pt['group']} | {pt['d']} | {pt['h']} | {pt['T']} | {pt['threads']} | {fmt(s['torch_tps'], 0)} | "
          f"{fmt(s['headlab_tps'], 0)} | **{fmt(s['ratio'], 2)}** | {fmt(s['torch_ms'], 1)} | {fmt(s['headlab_ms'], 1)} | "
          f"{fmt(s['torch_gflops'], 1)} | {fmt(s['headlab_gflops'], 1)} | {fmt(s['torch_rss'], 0)} / "
          f"{fmt(s['headlab_rss'], 0)} | {fmt(s['rss_ratio'], 2)} | {fmt(s['allocs'], 2)} | "
          f"{fmt(s['torch_cpu_tps'], 0)} / {fmt(s['headlab_cpu_tps'], 0)} ({fmt(s['cpu_ratio'], 2)}) | "
          f"{fmt(s['foreign'], 2)} | {s['n'][0]}+{s['n'][1]} |")
        if s["params"][0] and s["params"][1] and s["params"][0] != s["params"][1]:
            w(f"|  | PARAMETER COUNTS DIFFER: torch {s['params'][0]} headlab {s['params'][1]} |")
    w("")
    w("Targets (ratios from this run; medians):")
    key = lambda *a, **k: point(*a, **k)["key"]
    gemm_all = med([o.get("gflops") for k in results for o in results[k]["gemm"]])

    def ceiling(s):
        """The ratio headlab would reach if its whole step ran at BLIS's 2048^3 sgemm rate."""
        return gemm_all / s["torch_gflops"] if gemm_all and s and s["torch_gflops"] else None

    c = summary(key(256, 8))
    if c and c["ratio"]:
        w(f"- tokens/s >= 2x PyTorch at d256/h8: {c['ratio']:.2f}x -> {target(c['ratio'] >= 2)}"
          + (f" (ceiling at the sgemm rate: {ceiling(c):.2f}x)" if ceiling(c) else ""))
    misses, worst, n = [], None, 0
    for d, h in grid:
        s = summary(key(d, h))
        if not s or s["ratio"] is None:
            continue
        n += 1
        need = 1.2 if (d == 512 and h <= 4) else 1.5
        if worst is None or s["ratio"] / need < worst[0]:
            worst = (s["ratio"] / need, f"d{d}/h{h} {s['ratio']:.2f}x (needs {need})")
        if s["ratio"] < need:
            cl = ceiling(s)
            misses.append(f"d{d}/h{h} {s['ratio']:.2f}x" + (f" (ceiling {cl:.2f}x)" if cl else ""))
    if worst:
        w(f"- >= 1.5x PyTorch at every grid point (1.2x at d512/h1-4), {n} points: {target(not misses)}; "
          f"tightest {worst[1]}" + (f"; misses: {', '.join(misses)}" if misses else ""))
    for group in ("heads", "grid"):
        a, b = key(256, 16, group=group), key(256, 1, group=group)
        r = pair_ratio(a, b, "step_ms_median", hk)
        if r is not None:
            rt = pair_ratio(a, b, "step_ms_median", "torch")
            w(f"- step(16 heads) / step(1 head) at d256 <= 1.2 ({group} points): headlab {r:.2f} "
              f"(torch {fmt(rt, 2)}) -> {target(r <= 1.2)}")
            break
    gem = [summary(key(512, h)) for h in (1, 2, 4, 8, 16)]
    gem = [s for s in gem if s and s["headlab_gflops"]]
    gemm_runs = [o.get("gflops") for k in results for o in results[k]["gemm"]]
    if gem and gemm_all:
        fr = [(s["pt"]["h"], s["headlab_gflops"] / gemm_all, s["torch_gflops"] / gemm_all if s["torch_gflops"] else None)
              for s in gem]
        w(f"- training GFLOP/s at d512 >= 70% of BLIS sgemm 2048^3 (median {gemm_all:.0f} GFLOP/s over "
          f"{len(gemm_runs)} runs next to the d512 pairs): "
          + ", ".join(f"h{h} {f:.0%} (torch {fmt(t * 100 if t else None, 0)}%)" for h, f, t in fr)
          + f" -> {target(min(f for _, f, _ in fr) >= 0.7)}")
    rss = [summary(k) for k in results]
    rss = [s for s in rss if s["rss_ratio"] is not None]
    if rss:
        worst_rss = max(rss, key=lambda s: s["rss_ratio"])
        allocs = max(s["allocs"] or 0 for s in rss)
        w(f"- peak RSS <= half of PyTorch's: d256/h8 {fmt(c['rss_ratio'] if c else None, 2)}, worst "
          f"{worst_rss['pt']['name']} {worst_rss['rss_ratio']:.2f} -> {target(worst_rss['rss_ratio'] <= 0.5)}; "
          f"allocations per steady-state step: max {allocs:g} -> {target(allocs == 0)}")
    r = pair_ratio(key(256, 8, threads=2, group="threads"), key(256, 8, threads=1, group="threads"), "tokens_per_s", hk)
    if r is not None:
        rt = pair_ratio(key(256, 8, threads=2, group="threads"), key(256, 8, threads=1, group="threads"), "tokens_per_s",
                        "torch")
        w(f"- 2 threads >= 1.8x 1 thread at d256/h8: headlab {r:.2f}x (torch {fmt(rt, 2)}x) -> {target(r >= 1.8)}")
    r = pair_ratio(key(256, 8, T=512, group="seq"), key(256, 8, T=64, group="seq"), "tokens_per_s", hk)
    if r is not None:
        rt = pair_ratio(key(256, 8, T=512, group="seq"), key(256, 8, T=64, group="seq"), "tokens_per_s", "torch")
        w(f"- tokens/s at T512 >= 60% of T64 (d256/h8, batch {args.batch}): headlab {r:.0%} "
          f"(torch {fmt(rt * 100 if rt else None, 0)}%) -> {target(r >= 0.6)}")
    print("\n".join(out), flush=True)


if __name__ == "__main__":
    main()
