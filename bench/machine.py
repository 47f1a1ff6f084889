"""What the PyTorch references record about the machine around a measurement (the keys
`headlab bench` prints, src/cli/bench_machine.cpp): the BLAS mapped in, machine-wide busy CPU
seconds, the CPU capability torch uses; and what the bench/compare_*.py drivers share: how busy
the other cores are, waiting for a quiet machine, and a report between markers of a document."""
import os
import sys
import time


def blas_library():
    """Real path of the BLAS shared object mapped into this process (follows alternatives)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path)
            if "blas" in name or "blis" in name:
                libs.add(path)
    return sorted(libs)


def cpu_busy_seconds():
    """Machine-wide busy CPU seconds (all cores) and steal seconds, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq) / hz, steal / hz


def cpu_capability():
    import torch

    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            return line.split(":", 1)[1].strip()
    return None


def foreign_cores(window=1.0):
    """Cores busy over `window` seconds while the caller sleeps (so: other processes' load)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v[:3]) + v[5] + v[6]
    a = sample()
    time.sleep(window)
    return (sample() - a) / os.sysconf("SC_CLK_TCK") / window


def wait_idle(seconds, busy_at=0.3):
    """Wait up to `seconds` for fewer than busy_at other cores busy (0: do not wait)."""
    deadline = time.time() + seconds
    while seconds > 0:
        busy = foreign_cores()
        if busy < busy_at or time.time() > deadline:
            return
        print(f"  (machine busy: {busy:.2f} other cores; waiting)", file=sys.stderr, flush=True)


def docs_with(text, rendered, begin, end, where):
    """`text` with what lies between its markers begin and end replaced by `rendered`."""
    if begin not in text or end not in text:
        sys.exit(f"{where} has no {begin} ... {end} section")
    head, rest = text.split(begin, 1)
    return head + begin + "\n" + rendered + end + rest.split(end, 1)[1]


def add_log_options(parser, name):
    """The options every compare_*.py driver shares: waiting for a quiet machine, the raw log, and
    reporting an earlier log (printed, written into bench/RESULTS.md, or checked against it)."""
    parser.add_argument("--wait-idle", type=float, default=0,
                        help="before each run wait up to this many s for an idle machine")
    parser.add_argument("--log", default=None, help=f"raw JSON lines (default /tmp/{name}-<time>.jsonl)")
    parser.add_argument("--from-log", default=None, help="print the report of an earlier --log, run nothing")
    parser.add_argument("--write-docs", action="store_true",
                        help="with --from-log: write the report into bench/RESULTS.md")
    parser.add_argument("--check", action="store_true", help="with --from-log: fail unless bench/RESULTS.md shows it")


def report_from_log(args, report, name, docs, begin, end):
    """--from-log: report(records) of the log, printed, or written into (--write-docs) or checked
    against (--check) the section of `docs` between the markers begin and end."""
    import json

    with open(args.from_log) as f:
        rendered = report([json.loads(line) for line in f if line.strip()])
    if not (args.write_docs or args.check):
        print(rendered, end="")
        return
    with open(docs) as f:
        text = f.read()
    if args.check and docs_with(text, rendered, begin, end, docs) != text:
        sys.exit(f"{name}: {docs} does not show {args.from_log}'s report: "
                 f"run bench/{name}.py --from-log {args.from_log} --write-docs")
    if args.write_docs:
        with open(docs, "w") as f:
            f.write(docs_with(text, rendered, begin, end, docs))
