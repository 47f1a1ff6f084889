"""experiments/head_count, the run side (run.sh's commands): reading run folders, the rate choice,
the seed sweep files, the test-split evaluations still to run, and collect: OUT -> data/."""
import datetime
import hashlib
import math
import os
import re
import subprocess

import common
from common import fail, number, write_atomically, write_csv

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")
FRESH_SEEDS = [1, 2, 3, 4, 5]  # the seeds trained at each head count's chosen rate (seed 0 chose it)
EVAL_EXAMPLES = 2048  # generated tasks: the whole test set (datasets/README.md)
# OUT/regeneration.csv, one line per run.sh invocation, no header (run.sh's record_time)
REGENERATION_COLUMNS = ["started_utc", "wall_s", "cpu_user_s", "cpu_sys_s", "jobs", "cores", "ended"]


def read_csv(path, required=()):
    return common.read_csv(path, "run experiments/head_count/run.sh first", required)


# ---- the rate choice (shared by run.sh's seeds-sweeps and the rendering) ------------------------


# What chooses a count's rate, by task: the metric the task's verdicts use. Translation is judged in
# BLEU (the papers' metric), and its val loss and val BLEU disagree about the rate (RESULTS.md of
# experiments/translation); every other task by val loss.
RATE_CRITERION = {"translate": ("val_bleu", max)}
DEFAULT_RATE_CRITERION = ("val_loss", min)
RATE_COLUMN_WORDS = {"val_loss": "val loss", "val_bleu": "val BLEU"}


def rate_criterion(rows):
    """(column, min or max) that choose_rates uses for these rows (one task)."""
    tasks = {r.get("task", "") for r in rows}
    if len(tasks) > 1:
        fail(f"the rate sweep mixes tasks {sorted(tasks)}: one rule per sweep")
    return RATE_CRITERION.get(tasks.pop() if tasks else "", DEFAULT_RATE_CRITERION)


def ranked_rates(rows, criterion=None):
    """rows: dicts with task, heads, lr and the criterion's column (strings) of one study's seed-0
    runs. Per head count, its rates from best to worst by the final val metric (rate_criterion:
    lowest val loss, highest val BLEU for translation; or `criterion`, (column, min or max)); a tie
    goes to the lower rate."""
    column, better = criterion or rate_criterion(rows)
    sign = 1 if better is min else -1
    scored = {}
    for r in rows:
        h, lr, value = int(r["heads"]), float(r["lr"]), number(r.get(column, ""))
        if math.isnan(value):
            fail(f"no final {column} for {h} heads at lr {lr}: the rate sweep has not finished")
        scored.setdefault(h, []).append((sign * value, lr))
    return {h: [lr for _, lr in sorted(s)] for h, s in sorted(scored.items())}


def choose_rates(rows, criterion=None):
    """Per head count, its best rate (ranked_rates' first)."""
    return {h: lrs[0] for h, lrs in ranked_rates(rows, criterion).items()}


def rate_rule_words(rows):
    """The rule choose_rates applied to these rows, in words."""
    column, better = rate_criterion(rows)
    return f"the {'lowest' if better is min else 'highest'} final {RATE_COLUMN_WORDS[column]}"


# ---- run side: reading run folders --------------------------------------------------------------


def load_toml(path):
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def final_row(metrics):
    """The last row with a validation value (the evaluation after the last step)."""
    rows = [m for m in metrics if m["val_loss"] != ""]
    return rows[-1] if rows else None


def run_facts(run_dir):
    """Config facts and final metrics of one finished run folder; None if it has not finished."""
    config = load_toml(os.path.join(run_dir, "config.toml"))
    metrics = read_csv(os.path.join(run_dir, "metrics.csv"))
    m, d, t = config["model"], config["data"], config["train"]
    last = final_row(metrics)
    if last is None or int(last["step"]) != t["steps"]:
        return None
    heads = m["n_heads"]
    return {
        "task": d["task"],
        "heads": heads,
        "kv_heads": m["n_kv_heads"] or heads,
        "d_head": m["d_head"] or m["d_model"] // heads,
        "d_model": m["d_model"],
        "layers": m["n_layers"],
        "lr": repr(t["lr"]),
        "steps": t["steps"],
        "batch": t["batch_size"],
        "seq_len": d["seq_len"],
        "vocab": d["vocab_size"] or m["vocab_size"],
        "offsets": "_".join(str(o) for o in d["offsets"]) if d["task"] == "k_relation" else "",
        "batch_tokens": d.get("batch_tokens", "") if d["task"] == "translate" else "",
        "seed": t["seed"],
        "val_loss": last["val_loss"],
        "val_accuracy": last["val_accuracy"],
        "val_bpb": last["val_bpb"],
        "val_bleu": last.get("val_bleu", ""),
        "elapsed_s": metrics[-1]["elapsed_s"],
    }, metrics, config


def final_checkpoint(run_dir, steps):
    return os.path.join(run_dir, "checkpoints", f"step_{steps:08d}.h5")


def run_dirs(out):
    """(sweep name, run folder) of every run under OUT: OUT/<sweep>/<run>/ and, for the
    generated seed sweeps, OUT/<study>_seeds/heads=<H>/<run>/."""
    found = []
    for sweep in sorted(os.listdir(out)):
        top = os.path.join(out, sweep)
        if not os.path.isdir(top):
            continue
        for sub in [top] + [os.path.join(top, s) for s in sorted(os.listdir(top)) if s.startswith("heads=")]:
            grid = os.path.join(sub, "grid.csv")
            if os.path.exists(grid):
                for g in read_csv(grid):
                    found.append((sweep, os.path.join(sub, g["run"])))
    return found


RANK_WORDS = ("the rate whose seed-0 run ended with", "the runner-up rate by")


def cmd_seeds_sweeps(lr_toml, lr_out, seeds_out, extra=(), heads=None, rank=0):
    """One sweep file per head count in SEEDS_OUT: the rate sweep's [set], the count, its chosen
    rate and fresh seeds; LR_OUT: the rate sweep's folder, or its runs.csv as collected; `extra`:
    more "KEY=VALUE" settings (TOML values), e.g. model.d_head=16 for experiments/translation's
    second arm; `heads`: these counts only; rank 1: each count's runner-up rate instead of its
    chosen one (experiments/translation's check of the reference count's rate)."""
    sweep = load_toml(lr_toml)
    base = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(lr_toml)), sweep["base"]))
    if lr_out.endswith(".csv"):  # the rate sweep's collected runs.csv (a committed data/ file)
        rows = read_csv(lr_out, required=("task", "heads", "lr"))
    else:
        rows = []
        for g in read_csv(os.path.join(lr_out, "grid.csv")):
            facts = run_facts(os.path.join(lr_out, g["run"]))
            if facts is None:
                fail(f"{os.path.join(lr_out, g['run'])} has not finished")
            rows.append({k: str(v) for k, v in facts[0].items()})
    os.makedirs(seeds_out, exist_ok=True)
    study = os.path.basename(os.path.normpath(seeds_out))
    rule = rate_rule_words(rows)
    ranked = ranked_rates(rows)
    for h in heads or ():
        if h not in ranked:
            fail(f"{lr_out} has no {h}-head runs")
    for count, rates in ranked.items():
        if heads and count not in heads:
            continue
        if rank >= len(rates):
            fail(f"{count} heads ran at {len(rates)} rate(s): no rate of rank {rank + 1}")
        lr = rates[rank]
        lines = [
            f"# Generated by make_results.py seeds-sweeps from {os.path.relpath(lr_toml, REPO)}: {count} heads at",
            f"# lr {lr!r}, {RANK_WORDS[rank]} {rule}; fresh seeds.",
            f'base = "{base}"',
            f'name = "{study}_heads={count}"',
            "",
            "[set]",
        ]
        for key, value in sweep["set"].items():
            lines.append(f'"{key}" = {toml_value(value)}')
        for setting in extra:
            key, _, value = setting.partition("=")
            lines.append(f'"{key}" = {value}')
        lines += [f'"model.n_heads" = {count}', f'"train.lr" = {lr!r}', "", "[grid]", f'"train.seed" = {FRESH_SEEDS}', ""]
        path = os.path.join(seeds_out, f"heads={count}.toml")
        write_atomically(path, "\n".join(lines))
        print(path)


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    fail(f"cannot write {v!r} to a sweep file")


# `headlab eval` options per task beyond the split: generated tasks score all EVAL_EXAMPLES test
# examples; text and translation the whole split, translation decoded by beam 5 as the papers
# report (BLEU and chrF).
TEST_BEAM = 5


def eval_options(facts):
    if facts["task"] == "translate":
        return f" --beam {TEST_BEAM}"
    return "" if facts["task"] == "text" else f" --batches {-(-EVAL_EXAMPLES // facts['batch'])}"


def cmd_eval_jobs(headlab, out):
    """One shell line per finished run without RUN/test.txt: headlab eval of its final checkpoint
    on the test split (eval_options)."""
    for _, run in run_dirs(out):
        if os.path.exists(os.path.join(run, "test.txt")) or not os.path.exists(os.path.join(run, "metrics.csv")):
            continue
        got = run_facts(run)
        if got is None:
            continue
        facts, _, config = got
        batches = eval_options(facts)
        ckpt = final_checkpoint(run, facts["steps"])
        q = lambda p: "'" + p.replace("'", "'\\''") + "'"  # noqa: E731
        print(f"{q(headlab)} eval {q(ckpt)} --split test{batches} > {q(run + '/test.txt.tmp')} && mv {q(run + '/test.txt.tmp')} {q(run + '/test.txt')}")


def read_test(run):
    """RUN/test.txt (headlab eval's output) -> test_loss, test_accuracy, test_bpb strings."""
    path = os.path.join(run, "test.txt")
    if not os.path.exists(path):
        fail(f"{path} is missing: run.sh evaluates every final checkpoint on the test split")
    got = {"test_loss": "", "test_accuracy": "", "test_bpb": "", "test_bleu": "", "test_chrf": ""}
    names = {"loss": "test_loss", "accuracy": "test_accuracy", "bits_per_byte": "test_bpb", "bleu": "test_bleu",
             "chrf": "test_chrf"}
    for line in open(path):
        parts = line.split()
        # "bleu 21.6777 (674 sentences, ...)": the number is the second word
        if len(parts) >= 2 and parts[0] in names and (len(parts) == 2 or parts[0] == "bleu"):
            got[names[parts[0]]] = parts[1]
    if got["test_loss"] == "":
        fail(f"{path} has no loss line")
    return got



RUN_COLUMNS = ["study", "run", "task", "heads", "kv_heads", "d_head", "d_model", "layers", "params", "lr", "steps",
               "batch", "batch_tokens", "seq_len", "vocab", "offsets", "seed", "val_loss", "val_accuracy", "val_bpb",
               "val_bleu", "test_loss", "test_accuracy", "test_bpb", "test_bleu", "test_chrf", "elapsed_s"]
CURVE_COLUMNS = ["study", "run", "step", "tokens", "lr", "train_loss", "val_loss", "val_accuracy", "val_bpb",
                 "val_bleu"]


def started(r):
    return datetime.datetime.strptime(r["started_utc"], "%Y-%m-%dT%H:%M:%SZ").timestamp()


def overlapping(regen):
    """The invocations (rows of regeneration.csv) running at the busiest moment (their jobs add up)."""
    spans = [(started(r), r) for r in regen]
    best = []
    for t, _ in spans:
        now = [r for s, r in spans if s <= t < s + int(r["wall_s"])]
        if sum(int(r["jobs"]) for r in now) > sum(int(r["jobs"]) for r in best):
            best = now
    return best or regen[-1:]


def wall_span(regen):
    """From the first invocation's start to the last one's end (invocations may overlap)."""
    starts = [started(r) for r in regen]
    return int(max(s + int(r["wall_s"]) for s, r in zip(starts, regen)) - min(starts))


def gather_runs(out, studies=None, seeds=None):
    """(runs, curves): the rows of every finished run under OUT, of STUDIES and SEEDS only when
    given. experiments/translation's head-count arms collect their runs through this, one study
    (and one part's seeds) at a time."""
    runs, curves = [], []
    for study, run in run_dirs(out):
        if studies is not None and study not in studies:
            continue
        got = run_facts(run) if os.path.exists(os.path.join(run, "metrics.csv")) else None
        if got is None:
            fail(f"{run} has not finished: run run.sh to the end first")
        facts, metrics, _ = got
        if seeds is not None and facts["seed"] not in seeds:
            continue
        sweep_dir = os.path.dirname(run)
        grid = {g["run"]: g for g in read_csv(os.path.join(sweep_dir, "grid.csv"))}
        name = os.path.relpath(run, os.path.join(out, study))
        row = {"study": study, "run": name, "params": grid[os.path.basename(run)]["params"], **facts, **read_test(run)}
        runs.append(row)
        for m in metrics:
            if m["val_loss"] != "":
                curves.append({"study": study, "run": name, **{c: m.get(c, "") for c in CURVE_COLUMNS[2:]}})
    return runs, curves


def collect_runs(out, data, studies=None):
    """Every finished run under OUT (of STUDIES only, when given) -> DATA/runs.csv and
    DATA/curves.csv; returns the runs' rows."""
    runs, curves = gather_runs(out, studies)
    os.makedirs(data, exist_ok=True)
    write_csv(os.path.join(data, "runs.csv"), RUN_COLUMNS, runs)
    write_csv(os.path.join(data, "curves.csv"), CURVE_COLUMNS, curves)
    print(f"wrote {data}/runs.csv ({len(runs)} runs), curves.csv ({len(curves)} rows)")
    return runs


def cmd_collect(out, binary, data=DATA):
    """OUT -> data/runs.csv, data/curves.csv, data/provenance.csv."""
    runs = collect_runs(out, data)

    regen = common.read_csv(os.path.join(out, "regeneration.csv"), "run.sh writes it as it ends",
                            fieldnames=REGENERATION_COLUMNS)
    loads = [float(line.split()[1]) for line in open(os.path.join(out, "load.txt"))] if os.path.exists(
        os.path.join(out, "load.txt")) else []
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    info = subprocess.run([binary, "info"], capture_output=True, text=True).stdout.split("\n")
    version = " ".join(info[0].split()[1:]) if info and info[0].startswith("headlab") else ""
    kernels = next((" ".join(x.split()[2:]) for x in info if x.startswith("blis kernels")), "")
    sha = hashlib.sha256(open(binary, "rb").read()).hexdigest()
    # the commit the binary says it was built from ("-dirty": from a tree with uncommitted changes)
    built_from = next((x.split()[1] for x in info if x.startswith("commit") and len(x.split()) > 1), "")
    m = re.search(r"headlab-([0-9a-f]{7,40})$", os.path.basename(binary))
    built_from = built_from or (m.group(1) if m else os.environ.get("HEADLAB_COMMIT", commit))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    # every run.sh invocation that contributed (a resumed regeneration has several)
    prov = [
        ("binary_built_from_commit", built_from),
        ("binary_version", version),
        ("binary_sha256", sha),
        ("blis_kernels", kernels),
        ("repository_head_when_collected", commit),
        ("collected_utc", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")),
        ("machine_nproc", str(os.cpu_count())),
        ("machine_cpu", cpu),
        ("run_sh_invocations", str(len(regen))),
        ("run_sh_wall_s", str(wall_span(regen))),
        ("run_sh_cpu_user_s", f"{sum(float(r['cpu_user_s']) for r in regen):.0f}"),
        ("run_sh_cpu_sys_s", f"{sum(float(r['cpu_sys_s']) for r in regen):.0f}"),
        ("jobs", str(sum(int(r["jobs"]) for r in overlapping(regen)))),
        ("load_average_mean", f"{sum(loads) / len(loads):.2f}" if loads else ""),
        ("load_average_max", f"{max(loads):.2f}" if loads else ""),
        ("runs", str(len(runs))),
        ("runs_elapsed_sum_s", f"{sum(float(r['elapsed_s']) for r in runs):.0f}"),
    ]
    write_csv(os.path.join(data, "provenance.csv"), ["key", "value"], [{"key": k, "value": v} for k, v in prov])
    print(f"wrote {data}/provenance.csv")

