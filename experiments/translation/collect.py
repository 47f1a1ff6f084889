#!/usr/bin/env python3
"""experiments/translation: one arm's run folders (OUT, written by run.sh ARM) into the compact
data/<arm>/ folder that make_results.py reads. Nothing here trains, decodes or analyses.

  python3 experiments/translation/collect.py ARM runs/translation experiments/translation/data \\
      [--binary build/headlab] [--started UTC] [--wall-seconds S] [--load FILE]
  python3 experiments/translation/collect.py base-d-head experiments/translation/base.toml
      prints the base model's head width (run.sh's fixed-d_head arm); base-heads: its head count
  python3 experiments/translation/collect.py arms      prints the arms (run.sh checks ARM against them)
  python3 experiments/translation/collect.py checkpoint-step CKPT   prints the step a checkpoint holds

data/base/
  setup.csv        seed,<the model and training facts of the run's config.toml>
  curves.csv       seed,step,train_loss,val_loss,val_bleu: the evaluation rows of metrics.csv
                   (val BLEU: greedy, over the first train.eval_bleu_sentences val verses)
  test.csv         seed,step,bleu,chrf,loss,sentences,beam: the final checkpoint on test, beam 5
data/head_count_lr/, data/head_count/, data/head_count_d_head/, data/head_count_rate_check/
                   runs.csv, curves.csv: experiments/head_count's columns (head_count/runs.py
                   collect_runs), one row per run of one study of OUT/head_count/: lr (seed 0 of
                   every count at each rate of head_count_lr.toml), seeds (5 fresh seeds per count at its rate,
                   d_model fixed), d_head (the same with d_head fixed at the base model's) and
                   rate_check (counts at their runner-up rates, one head first, the same fresh seeds)
data/michel/       per base seed's analysed checkpoint (best.h5; headlab analyze --split test --bleu
                   --layer-only --alignment): heads.csv (seed + heads.csv's columns),
                   bleu_ablation.csv (seed + its columns: each head's BLEU/chrF change masked and
                   alone in its site, the paired bootstrap's p and 95% interval), alignment.csv
                   (seed + its columns); prune.csv: seed,checkpoint_step,arm + every round of every
                   prune run (that checkpoint: importance, ablation, random_seed<N>,
                   importance_<kind>; dynamics: importance of earlier checkpoints); timings.csv:
                   seed,job,seconds
data/voita/        prune.csv: seed,arm + every round of each L0 run (l0_enc_lambda<X>: encoder heads
                   gated; l0_all_lambda<X>: every kind) and of the control none_l0, on val;
                   evals.csv: seed,arm,split,bleu,chrf,loss (those models on test); roles.csv:
                   seed + heads.csv of headlab analyze on val (Voita's roles); timings.csv:
                   seed,job,seconds
                   michel's and voita's base_setup.csv: setup.csv's columns for the base models
                   the arm analysed (make_results flags the arm when data/base/ has other ones)
data/voita_scratch/  scratch.csv: seed,arm,active_heads,steps,checkpoint_step (each seed's val-chosen
                   encoder layout trained from scratch, the step of its analysed best.h5);
                   evals.csv (as voita's: arm scratch on val and test); timings.csv
data/kv_heads/     runs.csv: kv_heads,seed,lr,step,bleu,chrf,loss,sentences,beam (every K/V count,
                   multi-head attention included, at the head-count arms' step budget and the rate
                   their sweep chose for the base head count, on test); config.csv: key,value
                   (n_layers, n_encoder_layers, n_heads, d_head: the KV cache's size follows from
                   them; steps, lr); bench.csv: kv_heads,round,sentences_per_s,ms_median,
                   foreign_cores,params (headlab bench --decode --beam 5 of each setting, in turn)
data/settings/     curves.csv: lr,dropout,seed,step,train_loss,val_loss,val_bleu: the evaluations of the
                   base config at SETTINGS_STEPS steps, seed SETTINGS_SEED, at every rate and dropout of
                   SETTINGS_GRID
data/<arm>/provenance.csv  part,commit,uncommitted_changes,started_utc,machine,wall_seconds,
                   max_load_1min: one row per part of the arm: "all" for a whole arm, its seeds
                   ("0 1", run.sh's SEEDS) or its rates ("lr=0.0005", head_count_lr's RATES), the
                   binary's commit (headlab info), whether the checkout had
                   uncommitted changes, the start (UTC), the machine, the part's wall time and the
                   highest 1-minute load average sampled while it ran
Every table is merged into data/<arm>/ by its part key (the seed; the run for the head-count arms):
a part adds its seeds' (or rates') rows and replaces its own earlier ones. A part of base, michel
or voita on base models of another configuration than data/<arm>/'s starts data/<arm>/ afresh.
"""
import argparse
import json
import os
import re
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common
import common  # noqa: E402
from common import write_csv  # noqa: E402
from sweep_part import parse_values  # noqa: E402

# run.sh's arms, in RESULTS.md's order: data/<arm>/ -> what it runs (the arms table's words).
ARMS = {"base": "base models: 5 seeds, every checkpoint kept, test BLEU/chrF by beam 5",
        "settings": "the base config at 16000 steps, seed 0, at 2 rates x 2 dropouts: which reaches a plateau",
        "head_count_lr": "head count (Vaswani Table 3 A): each count's rate, seed 0, the arms' fixed steps",
        "head_count": "head count at fixed d_model, 5 fresh seeds per count at its rate",
        "head_count_d_head": "head count with d_head fixed at the base model's, 5 fresh seeds per count",
        "head_count_rate_check": "counts at their runner-up rates (one head first), the same fresh seeds: the rates "
                                 "checked",
        "michel": "Michel Tables 1 and 2, Figures 3 and 4, Section 6; the alignment heads",
        "voita": "Voita: L0 on encoder heads and on all kinds, roles",
        "voita_scratch": "Voita: each seed's L0 layout trained from scratch",
        "kv_heads": "MQA/GQA: BLEU, KV cache, beam-search sentences/s"}
# The settings arm's grid over the base config at SETTINGS_STEPS steps (seed SETTINGS_SEED): the
# first base models' rate and dropout (lr 0.002, dropout 0.1, at twice their 8000 steps) and each
# changed toward faster fitting. Its steps are fixed here, not read from base.toml, so that its
# data regenerate after base.toml took its choice (one of the grid's settings: base seed
# SETTINGS_SEED is that run again).
SETTINGS_GRID = {"train.lr": [0.002, 0.004], "model.dropout": [0.1, 0.0]}
SETTINGS_SEED = 0
SETTINGS_STEPS = 16000
RETRAINS_BASE = ("michel", "voita")  # the arms whose run.sh part retrains its seeds' base models
SETUP_KEYS = {"model": ("n_layers", "n_encoder_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "vocab_size",
                        "dropout"),
              "train": ("steps", "lr", "warmup_steps", "seed"),
              "data": ("source_module", "target_module", "val_book", "test_book", "tokenizer", "batch_tokens")}


def fail(message):
    common.fail(message, "collect")


def read_rows(path):
    return common.read_csv(path, hint="run experiments/translation/run.sh first")


def seed_runs(root, seeds=None, arm="base"):
    """(seed, run folder) of the sweep runs train.seed=<N> in ROOT (the base runs: OUT/base), by
    seed: those of `seeds` (all there are when None)."""
    runs = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if name.startswith("train.seed=") and (seeds is None or int(name.split("=")[1]) in seeds):
            runs.append((int(name.split("=")[1]), os.path.join(root, name)))
    if not runs:
        fail(f"{root} holds no run folder train.seed=<N>" + ("" if seeds is None else f" of seeds {sorted(seeds)}") +
             f": run experiments/translation/run.sh {arm} first")
    return sorted(runs)


def base_setup_row(seed, run):
    """setup.csv's row of one base run folder: the SETUP_KEYS of its config.toml."""
    config = tomllib.load(open(os.path.join(run, "config.toml"), "rb"))
    return {"seed": seed, **{f"{section}.{k}": config[section].get(k, "") for section, keys in SETUP_KEYS.items()
                             for k in keys}}


def analysed_base_setup(out, seeds):
    """base_setup.csv of an arm that analyses the base models (michel, voita): the setup rows of
    the base runs it analysed, so that make_results can tell when data/base/ has since been
    retrained with another configuration (main adds EQUALS_DATA_BASE)."""
    return ("base_setup.csv", [base_setup_row(seed, run) for seed, run in seed_runs(os.path.join(out, "base"), set(seeds))],
            SEED)


# base_setup.csv's column saying whether the analysed base model equals data/base/'s digit for digit
# (yes, no, or empty when data/base/ lacks that seed or holds another configuration).
EQUALS_DATA_BASE = "equals_data_base"


def mark_equal_to_data_base(rows, out, data):
    """Adds EQUALS_DATA_BASE to an analysis arm's base_setup rows (base_differences)."""
    differences = base_differences(out, data, {r["seed"] for r in rows})
    for r in rows:
        r[EQUALS_DATA_BASE] = "" if r["seed"] not in differences else "no" if differences[r["seed"]] else "yes"


def collect_base(out, seeds, _sweeps):
    setup, curves, test = [], [], []
    for seed, run in seed_runs(os.path.join(out, "base"), seeds):
        setup.append(base_setup_row(seed, run))
        for r in read_rows(os.path.join(run, "metrics.csv")):
            if r["val_loss"]:
                curves.append({"seed": seed, **{k: r[k] for k in ("step", "train_loss", "val_loss", "val_bleu")}})
        path = os.path.join(run, "test_beam5.json")
        if not os.path.exists(path):
            fail(f"{path} is missing: run experiments/translation/run.sh base to the end")
        e = json.load(open(path))
        test.append({"seed": seed, "step": e["step"], "bleu": e["bleu"], "chrf": e["chrf"], "loss": e["loss"],
                     "sentences": e["sentences"], "beam": e["beam"]})
    return [("setup.csv", setup, SEED), ("curves.csv", curves, SEED), ("test.csv", test, SEED)]


# The head-count arms, each one study of OUT/head_count/: the rate sweep, the fresh seeds at fixed
# d_model, the fresh seeds at fixed d_head, the reference count at its runner-up rate (run.sh runs
# them as arms, each within a session).
HEAD_COUNT_STUDIES = {"head_count_lr": "lr", "head_count": "seeds", "head_count_d_head": "d_head",
                      "head_count_rate_check": "rate_check"}


def collect_head_count_study(arm):
    def collect(out, seeds, _sweeps):
        from head_count.runs import RUN_COLUMNS, gather_runs
        runs, curves = gather_runs(os.path.join(out, "head_count"), studies={HEAD_COUNT_STUDIES[arm]}, seeds=seeds)
        runs = [{c: r.get(c, "") for c in RUN_COLUMNS} for r in runs]
        return [("runs.csv", runs, RUN), ("curves.csv", curves, RUN)]
    return collect


def seed_folders(root, seeds, arm):
    """The seeds of ROOT's seed<N> folders (of `seeds` only, when given), sorted."""
    found = sorted(int(n[len("seed"):]) for n in os.listdir(root) if n.startswith("seed")) if os.path.isdir(root) else []
    found = [s for s in found if seeds is None or s in seeds]
    if not found:
        fail(f"{root} holds no seed<N> folder" + ("" if seeds is None else f" of seeds {sorted(seeds)}") +
             f": run experiments/translation/run.sh {arm} first")
    return found


def checkpoint_step(path):
    """The training step a headlab checkpoint holds (its root attribute `step`)."""
    import h5py
    if not os.path.exists(path):
        fail(f"{path} is missing: run experiments/translation/run.sh base first")
    with h5py.File(path, "r") as f:
        return int(f.attrs["step"])


def collect_michel(out, seeds, _sweeps):
    heads, ablation, alignment, prune, timings = [], [], [], [], []
    root = os.path.join(out, "michel")
    part = seed_folders(root, seeds, "michel")
    for seed in part:
        d = os.path.join(root, f"seed{seed}")
        a = os.path.join(d, "analyze")
        for name, rows in (("heads.csv", heads), ("bleu_ablation.csv", ablation), ("alignment.csv", alignment)):
            rows += [{"seed": seed, **r} for r in read_rows(os.path.join(a, name))]
        timings += job_seconds(seed, a, "analyze")
        arms = [(None, os.path.join(d, "prune", arm), arm) for arm in sorted(os.listdir(os.path.join(d, "prune")))]
        dyn = os.path.join(d, "dynamics")
        arms += [(int(c.split("_")[1]), os.path.join(dyn, c), "importance") for c in
                 (sorted(os.listdir(dyn)) if os.path.isdir(dyn) else [])]
        model_step = checkpoint_step(os.path.join(out, "base", f"train.seed={seed}", "checkpoints", "best.h5"))
        for step, folder, arm in arms:
            if not os.path.exists(os.path.join(folder, "pruned.h5")):
                fail(f"{folder} has not finished: run experiments/translation/run.sh michel to the end")
            for r in read_rows(os.path.join(folder, "prune.csv")):
                r["prune_seed"] = r.pop("seed")  # "seed" is the base model's here
                prune.append({"seed": seed, "checkpoint_step": model_step if step is None else step, "arm": arm, **r})
            timings += job_seconds(seed, folder, "prune " + arm + ("" if step is None else " dynamics"))
    return [("heads.csv", heads, SEED), ("bleu_ablation.csv", ablation, SEED), ("alignment.csv", alignment, SEED),
            ("prune.csv", prune, SEED), ("timings.csv", timings, SEED), analysed_base_setup(out, part)]


def voita_prune_rows(out, seeds=None):
    """Every round of every prune run under OUT/voita/seed<N>/ (L0 arms and the control), of
    `seeds` only when given."""
    root, rows = os.path.join(out, "voita"), []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not name.startswith("seed") or (seeds is not None and int(name[len("seed"):]) not in seeds):
            continue
        for arm in sorted(os.listdir(os.path.join(root, name))):
            path = os.path.join(root, name, arm, "prune.csv")
            if os.path.exists(os.path.join(root, name, arm, "pruned.h5")):
                for r in read_rows(path):
                    r["prune_seed"] = r.pop("seed")
                    rows.append({"seed": int(name[len("seed"):]), "arm": arm, **r})
    return rows


def print_layouts(data, seeds):
    """run.sh voita_scratch: "SEED [n,n,...]" for each seed's val-chosen encoder layout, read from
    the voita arm's committed data (DATA/voita/prune.csv), of `seeds` only when given."""
    from translation import voita as V
    rows = read_rows(os.path.join(data, "voita", "prune.csv"))
    for seed in sorted({int(r["seed"]) for r in rows}):
        got = V.chosen(rows, seed) if seeds is None or seed in seeds else None
        if got:
            print(seed, V.layout(got[1]))


def voita_evals(seed, d, arm):
    """headlab eval --json files of one run folder: test.json of a gated model or its control,
    val.json and test.json of a from-scratch layout."""
    rows = []
    for split in ("test",) if arm != "scratch" else ("val", "test"):
        path = os.path.join(d, arm, f"{split}.json")
        if os.path.exists(path):
            e = json.load(open(path))
            rows.append({"seed": seed, "arm": arm, "split": split, "bleu": e["bleu"], "chrf": e["chrf"], "loss": e["loss"]})
    return rows


def collect_voita(out, seeds, _sweeps):
    prune = voita_prune_rows(out, seeds)
    if not prune:
        fail(f"{os.path.join(out, 'voita')} holds no finished prune run: run experiments/translation/run.sh voita")
    evals, roles, timings = [], [], []
    for seed in sorted({r["seed"] for r in prune}):
        d = os.path.join(out, "voita", f"seed{seed}")
        for arm in sorted(a for a in os.listdir(d) if a != "scratch"):
            evals += voita_evals(seed, d, arm)
            timings += job_seconds(seed, os.path.join(d, arm), arm)
        roles += [{"seed": seed, **r} for r in read_rows(os.path.join(d, "roles", "heads.csv"))]
    return [("prune.csv", prune, SEED), ("evals.csv", evals, SEED), ("roles.csv", roles, SEED),
            ("timings.csv", timings, SEED), analysed_base_setup(out, {r["seed"] for r in prune})]


def collect_voita_scratch(out, seeds, _sweeps):
    evals, scratch, timings = [], [], []
    root = os.path.join(out, "voita")
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        sc = os.path.join(root, name, "scratch")
        if not (name.startswith("seed") and os.path.exists(os.path.join(sc, "done"))):
            continue
        seed = int(name[len("seed"):])
        if seeds is not None and seed not in seeds:
            continue
        c = tomllib.load(open(os.path.join(sc, "config.toml"), "rb"))
        test = os.path.join(sc, "test.json")  # of best.h5, the checkpoint chosen as the base models'
        scratch.append({"seed": seed, "arm": "scratch", "active_heads": " ".join(str(h) for h in c["model"]["active_heads"]),
                        "steps": c["train"]["steps"],
                        "checkpoint_step": json.load(open(test))["step"] if os.path.exists(test) else ""})
        evals += voita_evals(seed, os.path.join(root, name), "scratch")
        timings += job_seconds(seed, sc, "scratch")
    if not scratch:
        fail(f"{root} holds no finished scratch run: run experiments/translation/run.sh voita_scratch")
    return [("scratch.csv", scratch, SEED), ("evals.csv", evals, SEED), ("timings.csv", timings, SEED)]


def parse_seeds(text):
    """run.sh's SEEDS ("0 1", or empty for all) as a set, None for all."""
    return parse_values(text, "train.seed")


def base_train_args(sweep_path, extra_steps):
    """run.sh: the base sweep's training as `headlab train` arguments, its grid aside, with
    extra_steps more steps: "CONFIG --set KEY=VALUE ...". run.sh splits the line on spaces and
    xargs strips quotes, so every value goes plain: a string as the bare word `--set` takes for a
    string key (one without spaces, quotes or backslashes), numbers and arrays as TOML."""
    sweep = tomllib.load(open(sweep_path, "rb"))
    config_path = os.path.normpath(os.path.join(os.path.dirname(sweep_path), sweep["base"]))
    steps = base_value(sweep_path, "train.steps")
    args = [config_path]
    for key, value in sweep.get("set", {}).items():
        if key != "train.steps":
            if isinstance(value, str) and not re.fullmatch(r"[\w.,:/+-]+", value):
                fail(f"{sweep_path}: [set] {key} = {value!r}: base-train-args passes a string as a bare word, "
                     "so it must not hold spaces, quotes or backslashes")
            args.append(f"--set {key}={value if isinstance(value, str) else json.dumps(value, separators=(',', ':'))}")
    args.append(f"--set train.steps={steps + extra_steps}")
    return " ".join(args)


def job_seconds(seed, folder, job):
    path = os.path.join(folder, "seconds.txt")
    return [{"seed": seed, "job": job, "seconds": open(path).read().strip()}] if os.path.exists(path) else []


def base_model(sweep_path):
    """The base model's shape (base_value of each key), the model's own fallbacks resolved:
    n_encoder_layers 0 means n_layers, d_head 0 means d_model / n_heads."""
    m = {k: base_value(sweep_path, f"model.{k}") for k in ("n_layers", "n_encoder_layers", "n_heads", "d_model", "d_head")}
    return {**m, "n_encoder_layers": m["n_encoder_layers"] or m["n_layers"],
            "d_head": m["d_head"] or m["d_model"] // m["n_heads"]}


def kv_values(sweep_path):
    """The K/V head counts of the kv_heads arm: every divisor of the base model's head count
    (MQA = 1, GQA between, MHA = all)."""
    heads = base_model(sweep_path)["n_heads"]
    return [k for k in range(1, heads + 1) if heads % k == 0]


def derived_sweep(sweep_path, path, what, changes, seeds=None, grid=None):
    """Writes the sweep file `path`: the sweep `sweep_path` (base.toml, or head_count_lr.toml for
    kv_heads) with `changes` ({key: value}) over its [set] and `seeds` (default: its own) as its
    grid, `grid` ({key: [values]}) beside them; prints the path."""
    sweep = tomllib.load(open(sweep_path, "rb"))
    base = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(sweep_path)), sweep["base"]))
    name = os.path.splitext(os.path.basename(path))[0]
    settings = {**sweep.get("set", {}), **changes}
    lines = [f"# Generated by collect.py from {sweep_path}: {what}.", f'base = "{base}"',
             f'name = "translation_{name}"', "", "[set]"]
    lines += [f'"{key}" = {json.dumps(value)}' for key, value in settings.items()]
    lines += ["", "[grid]"] + [f'"{key}" = {json.dumps(values)}' for key, values in (grid or {}).items()]
    lines += [f'"train.seed" = {json.dumps(seeds or sweep["grid"]["train.seed"])}', ""]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(path)


def head_count_steps(sweep_path):
    """The head-count arms' fixed step budget: head_count_lr.toml's train.steps, beside base.toml."""
    path = os.path.join(os.path.dirname(sweep_path), "head_count_lr.toml")
    return tomllib.load(open(path, "rb"))["set"]["train.steps"]


def kv_rate(sweep_path, lr_runs):
    """The kv_heads arm's rate: the one the head-count rate sweep (LR_RUNS, data/head_count_lr's
    runs.csv) chose for the base model's head count at the same step budget. The base rate was
    tuned for the base models' 8000 steps; at 2000 the sweep found it worse for that count."""
    from head_count.runs import choose_rates
    heads = base_model(sweep_path)["n_heads"]
    rates = choose_rates(common.read_csv(lr_runs, hint="run experiments/translation/run.sh head_count_lr first"))
    if heads not in rates:
        fail(f"{lr_runs} has no run of {heads} heads, the base model's count: the kv_heads arm takes its rate")
    return rates[heads]


def kv_sweeps(sweep_path, out, lr_runs):
    """One sweep file per K/V count (OUT/kv=<K>.toml), multi-head attention (K = the head count)
    included: the head-count arms' config (head_count_lr.toml: the base architecture at their fixed
    step budget, where the base models' would not fit the arm, and dropout) with the base model's
    head count, every kind's K/V heads set to K and the rate the head-count sweep chose for that
    count (kv_rate), base.toml's seeds, only the final checkpoint kept; prints their paths."""
    lr, heads = kv_rate(sweep_path, lr_runs), base_model(sweep_path)["n_heads"]
    head_count = os.path.join(os.path.dirname(sweep_path), "head_count_lr.toml")
    seeds = tomllib.load(open(sweep_path, "rb"))["grid"]["train.seed"]
    for k in kv_values(sweep_path):
        derived_sweep(head_count, os.path.join(out, f"kv={k}.toml"), f"every kind with {k} K/V heads",
                      {"model.n_heads": heads, "train.lr": lr,
                       **{f"model.{key}": k for key in ("n_kv_heads", "enc_n_kv_heads", "cross_n_kv_heads")}}, seeds)


def base_value(sweep_path, key):
    """The dotted config key's value in base.toml: its [set] value, else its base config's, else
    the default (configs/default.toml, beside the base config)."""
    sweep = tomllib.load(open(sweep_path, "rb"))
    config_path = os.path.join(os.path.dirname(sweep_path), sweep["base"])
    section, _, name = key.partition(".")
    if key in sweep.get("set", {}):
        return sweep["set"][key]
    for path in (config_path, os.path.join(os.path.dirname(config_path), "default.toml")):
        value = tomllib.load(open(path, "rb")).get(section, {}).get(name)
        if value is not None:
            return value
    fail(f"{sweep_path}: no value for {key} in it, its base config or configs/default.toml")


def base_steps(sweep_path):
    return base_value(sweep_path, "train.steps")


def settings_sweep(sweep_path, out):
    """OUT/steps=<SETTINGS_STEPS>.toml: base.toml at SETTINGS_STEPS steps over SETTINGS_GRID, seed
    SETTINGS_SEED, only the final checkpoint kept; prints its path."""
    steps = SETTINGS_STEPS
    derived_sweep(sweep_path, os.path.join(out, f"steps={steps}.toml"),
                  f"the base config at {steps} steps, at each rate and dropout of SETTINGS_GRID",
                  {"train.steps": steps, "train.keep_checkpoints": 1}, [SETTINGS_SEED], SETTINGS_GRID)


def collect_settings(out, seeds, sweeps):
    """Every settings run's evaluations (curves.csv: lr,dropout,seed,step,train_loss,val_loss,
    val_bleu), its rate and dropout read from its config.toml."""
    if seeds is not None:
        fail("the settings arm has one seed (SETTINGS_SEED); it takes no SEEDS")
    root = os.path.join(out, "settings", f"steps={SETTINGS_STEPS}")
    curves = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        folder = os.path.join(root, name)
        if not os.path.exists(os.path.join(folder, "config.toml")):
            continue
        config = tomllib.load(open(os.path.join(folder, "config.toml"), "rb"))
        rows = [r for r in read_rows(os.path.join(folder, "metrics.csv")) if r["val_loss"]]
        if not rows or int(rows[-1]["step"]) != config["train"]["steps"]:
            fail(f"{folder} has not finished: run experiments/translation/run.sh settings to the end")
        curves += [{"lr": config["train"]["lr"], "dropout": config["model"]["dropout"], "seed": config["train"]["seed"],
                    **{k: r[k] for k in ("step", "train_loss", "val_loss", "val_bleu")}} for r in rows]
    if not curves:
        fail(f"{root} holds no run: run experiments/translation/run.sh settings first")
    return [("curves.csv", curves, ("lr", "dropout", "seed"))]


def collect_kv_heads(out, seeds, sweeps):
    root = os.path.join(out, "kv_heads")
    runs, bench = [], []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not (name.startswith("kv=") and os.path.isdir(os.path.join(root, name))):
            continue
        k = int(name[len("kv="):])
        for seed, run in seed_runs(os.path.join(root, name), seeds, "kv_heads"):
            e = json.load(open(os.path.join(run, "test_beam5.json")))
            lr = tomllib.load(open(os.path.join(run, "config.toml"), "rb"))["train"]["lr"]
            runs.append({"kv_heads": k, "seed": seed, "lr": lr, "step": e["step"], "bleu": e["bleu"], "chrf": e["chrf"],
                         "loss": e["loss"], "sentences": e["sentences"], "beam": e["beam"]})
    bench_dir = os.path.join(root, "bench")
    for name in sorted(os.listdir(bench_dir)) if os.path.isdir(bench_dir) else []:
        if name.endswith(".json"):
            k, rnd = name[len("kv="):-len(".json")].split("_round")
            b = json.loads(open(os.path.join(bench_dir, name)).readline())
            bench.append({"kv_heads": int(k), "round": int(rnd), "sentences_per_s": b["sentences_per_s"],
                          "ms_median": b["ms_median"], "foreign_cores": b.get("foreign_cores", ""),
                          "params": b["params"]})
    if not runs:
        fail(f"{root} holds no finished kv=<K> run: run experiments/translation/run.sh kv_heads first")
    rates = {r["lr"] for r in runs}
    if len(rates) > 1:
        fail(f"{root}: runs at rates {sorted(rates)}; every setting of the kv_heads arm trains at one")
    m = base_model(os.path.join(sweeps, "base.toml"))
    config = {**{k: m[k] for k in ("n_layers", "n_encoder_layers", "n_heads", "d_head")},
              "steps": head_count_steps(os.path.join(sweeps, "base.toml")), "lr": rates.pop()}
    return [("runs.csv", runs, ("kv_heads", "seed")), ("bench.csv", bench, ("kv_heads", "round")),
            ("config.csv", [{"key": k, "value": v} for k, v in config.items()], ("key",))]


SEED, RUN = ("seed",), ("run",)  # a table's part key: the columns whose values one part owns
PROVENANCE_COLUMNS = ["part", "commit", "uncommitted_changes", "started_utc", "machine", "wall_seconds",
                      "max_load_1min"]


def merge_table(path, rows, key):
    """Writes PATH: its old rows but those whose `key` values occur in `rows`, then `rows`, sorted
    by key (stable). An arm run in parts (run.sh's SEEDS) so adds each part's seeds to data/ and a
    rerun of a part replaces its own rows; columns are the old file's, then any new ones."""
    old = common.read_csv(path) if os.path.exists(path) else []
    owned = {tuple(str(r[k]) for k in key) for r in rows}
    kept = [r for r in old if tuple(str(r[k]) for k in key) not in owned]
    merged = sorted(kept + [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows],
                    key=lambda r: tuple(int(r[k]) if str(r[k]).lstrip("-").isdigit() else str(r[k]) for k in key))
    columns = list(dict.fromkeys([*(old[0] if old else []), *(k for r in rows for k in r)])) or list(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_csv(path, columns, merged)


def merge_provenance(path, row):
    """One row per part: a part replaces the earlier parts whose seeds or rates it covers ("all":
    every part)."""
    def covers(new, old):
        return new == "all" or (old != "all" and set(old.split()) <= set(new.split()))
    old = common.read_csv(path) if os.path.exists(path) else []
    write_csv(path, PROVENANCE_COLUMNS, [r for r in old if not covers(row["part"], r["part"])] + [row])


def part_label(seeds, rates, heads=""):
    """provenance.csv's part: "all", the seeds ("0 1") or the rates ("lr=0.0005 lr=0.001"), after the
    head counts of a rate check run for some counts ("heads=2,4 1 2": those counts, seeds 1 and 2)."""
    if rates:
        return " ".join(f"lr={r!r}" for r in sorted(rates))
    label = " ".join(str(s) for s in sorted(seeds)) if seeds else ""
    return " ".join(x for x in (f"heads={heads}" if heads else "", label) if x) or "all"


def base_machines(data):
    """{seed: the machine data/base/'s model of that seed was trained on} (its provenance.csv parts;
    {} before the base arm has run)."""
    path = os.path.join(data, "base", "provenance.csv")
    if not os.path.exists(path):
        return {}
    all_seeds = sorted({int(r["seed"]) for r in common.read_csv(os.path.join(data, "base", "test.csv"))})
    return {int(x): p["machine"] for p in common.read_csv(path)
            for x in (all_seeds if p["part"] == "all" else p["part"].split())}


def setup_changes(old, new):
    """["key old -> new"] for the setup.csv columns (the seed and EQUALS_DATA_BASE aside) in which
    row NEW's configuration differs from row OLD's; a column one row lacks counts as a change (its
    value is not known)."""
    return [f"{k} {old.get(k, '(not recorded)')} -> {new.get(k, '(not recorded)')}"
            for k in dict.fromkeys([*old, *new]) if k not in ("seed", "train.seed", EQUALS_DATA_BASE)
            and str(old.get(k, "(not recorded)")) != str(new.get(k, "(not recorded)"))]


def committed_setup_changes(data, setup):
    """How the configuration of the retrained base models (collect_base's setup rows) differs from
    data/base/'s ([] when it is the same, or before the base arm has run)."""
    path = os.path.join(data, "base", "setup.csv")
    if not os.path.exists(path) or not setup:
        return []
    return setup_changes(common.read_csv(path)[0], setup[0])


# The table in which an arm records the configuration of the base models it trained or analysed.
RECORDED_SETUP = {"base": "setup.csv", "michel": "base_setup.csv", "voita": "base_setup.csv"}


def replace_other_configuration(data, arm, setup):
    """A part of ARM (base, michel, voita) whose base models are of another configuration than those
    data/ARM/ holds (base.toml changed) starts data/ARM/ afresh: its files are removed before the
    part's rows are merged, so that data/ARM/ never mixes two configurations' seeds (the parts still
    to run fill it again). An analysis arm that did not record its base models counts as another
    configuration: which models its rows describe is not known."""
    folder = os.path.join(data, arm)
    if not setup or not os.path.isdir(folder) or not os.listdir(folder):
        return
    path = os.path.join(folder, RECORDED_SETUP[arm])
    changes = setup_changes(common.read_csv(path)[0], setup[0]) if os.path.exists(path) else \
        [f"{RECORDED_SETUP[arm]} not recorded"]
    if not changes:
        return
    for name in sorted(os.listdir(folder)):
        os.remove(os.path.join(folder, name))
    print(f"collect: data/{arm}/ held another base configuration's models ({'; '.join(changes)}): replaced by "
          f"this part's; run the {arm} arm's other seeds again", file=sys.stderr)


def base_differences(out, data, seeds):
    """{seed: '' when the base model retrained in OUT/base equals data/base/'s digit for digit (its
    val curve and test row), else where it first differs} for the seeds of `seeds` (None: all)
    that data/base/ holds; {} when data/base/ is of another configuration or not there yet."""
    committed = {name: common.read_csv(os.path.join(data, "base", name)) for name in ("curves.csv", "test.csv")
                 if os.path.exists(os.path.join(data, "base", name))}
    (_, setup, _), *tables = collect_base(out, seeds, None)
    if not committed or committed_setup_changes(data, setup):
        return {}
    differences = {}
    for name, rows, _ in tables:
        for seed in sorted({r["seed"] for r in rows} & {int(r["seed"]) for r in committed["test.csv"]}):
            new = [{k: str(v) for k, v in r.items()} for r in rows if r["seed"] == seed]
            old = [r for r in committed[name] if int(r["seed"]) == seed]
            if differences.get(seed) or old == new:
                differences.setdefault(seed, "")
                continue
            differences[seed] = next((f"{name} at step {o.get('step', '')}: committed {o}, retrained {n}"
                                      for o, n in zip(old, new) if o != n),
                                     f"{name} in its number of rows: committed {len(old)}, retrained {len(new)}")
    return differences


def check_base(out, data, seeds):
    """run.sh, after (re)training base models: each seed's curve and test row are compared with the
    base arm's committed ones (data/base/), digit for digit, so that the arms that retrain the base
    models are known to analyse the very models the base arm measured. A seed that differs fails
    when its part of the base arm ran on a machine like this one (common.machine()): the numerics
    changed. On another kind of machine (the build compiles for its CPU, and the vector code rounds
    differently) a difference is expected: a note says so, and the arm analyses the model retrained
    here (the arm's base_setup.csv records which seeds equal data/base/'s)."""
    (_, setup, _), *_ = collect_base(out, seeds, None)
    changes = committed_setup_changes(data, setup)
    if changes:
        print(f"collect: data/base/ holds models of another base configuration ({'; '.join(changes)}): the "
              "retrained base models are not compared with them; the base arm replaces them", file=sys.stderr)
        return
    here = common.machine()
    made_here = {seed for seed, machine in base_machines(data).items() if machine == here}
    for seed, diff in sorted(base_differences(out, data, seeds).items()):
        if not diff:
            print(f"collect: base seed {seed} retrained here equals data/base/'s digit for digit", file=sys.stderr)
        elif seed in made_here:
            fail(f"base seed {seed} differs from data/base/{diff}: the retrained model is not the committed one "
                 "(numerics changed since the base arm's commit?)")
        else:
            print(f"collect: base seed {seed} was trained for data/base/ on another kind of machine than this one "
                  f"({here}) and differs from it ({diff.split(':')[0]}): this arm analyses the model retrained here",
                  file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("arm", choices=ARMS)
    ap.add_argument("out")
    ap.add_argument("data")
    ap.add_argument("--binary", default="build/headlab")
    ap.add_argument("--sweeps", default=HERE, help="the folder of base.toml (run.sh's SWEEPS)")
    ap.add_argument("--started", default="")
    ap.add_argument("--wall-seconds", default="")
    ap.add_argument("--load", help="run.sh's load samples (epoch seconds, 1-minute load average)")
    ap.add_argument("--seeds", default="", help="the part's seeds (run.sh's SEEDS; empty: all)")
    ap.add_argument("--rates", default="", help="head_count_lr: the part's rates (run.sh's RATES; empty: all)")
    ap.add_argument("--heads", default="", help="head_count_rate_check: the counts checked (run.sh's "
                    "RATE_CHECK_HEADS, H,H; empty: one head)")
    if sys.argv[1:2] == ["base-train-args"]:
        if len(sys.argv) != 4:
            fail("usage: collect.py base-train-args BASE.toml EXTRA_STEPS")
        print(base_train_args(sys.argv[2], int(sys.argv[3])))
        return
    if sys.argv[1:2] == ["voita-layouts"] and len(sys.argv) in (3, 4):
        print_layouts(sys.argv[2], parse_seeds(sys.argv[3] if len(sys.argv) == 4 else ""))
        return
    if sys.argv[1:2] == ["checkpoint-step"] and len(sys.argv) == 3:
        print(checkpoint_step(sys.argv[2]))
        return
    if sys.argv[1:] == ["arms"]:
        print(" ".join(ARMS))
        return
    if sys.argv[1:2] == ["check-base"] and len(sys.argv) in (4, 5):
        check_base(sys.argv[2], sys.argv[3], parse_seeds(sys.argv[4] if len(sys.argv) == 5 else ""))
        return
    if sys.argv[1:2] == ["kv-values"] and len(sys.argv) == 3:
        print(" ".join(str(k) for k in kv_values(sys.argv[2])))
        return
    if sys.argv[1:2] == ["kv-sweeps"] and len(sys.argv) == 5:
        kv_sweeps(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if sys.argv[1:2] == ["settings-sweep"] and len(sys.argv) == 4:
        settings_sweep(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1:2] in (["base-d-head"], ["base-heads"]):
        if len(sys.argv) != 3:
            fail(f"usage: collect.py {sys.argv[1]} BASE.toml")
        print(base_model(sys.argv[2])["d_head" if sys.argv[1] == "base-d-head" else "n_heads"])
        return
    args = ap.parse_args()
    data = os.path.join(args.data, args.arm)
    os.makedirs(data, exist_ok=True)
    collectors = {"base": collect_base, "settings": collect_settings, "michel": collect_michel, "voita": collect_voita,
                  "voita_scratch": collect_voita_scratch, "kv_heads": collect_kv_heads}
    collectors.update({arm: collect_head_count_study(arm) for arm in HEAD_COUNT_STUDIES})
    seeds, rates = parse_seeds(args.seeds), parse_values(args.rates, "train.lr")
    if rates is not None and args.arm != "head_count_lr":
        fail(f"--rates is for the head_count_lr arm, not {args.arm}")
    if args.heads and args.arm != "head_count_rate_check":
        fail(f"--heads is for the head_count_rate_check arm, not {args.arm}")
    # Whether the checkout changed while the arm ran (run.sh starts only from a clean one): asked
    # before this part's rows are merged, which modify data/ itself once an arm has committed data.
    dirty = common.checkout_dirty()
    tables = collectors[args.arm](args.out, seeds, args.sweeps)
    if args.arm in RECORDED_SETUP:
        setup = next(rows for name, rows, _ in tables if name == RECORDED_SETUP[args.arm])
        if args.arm != "base":
            mark_equal_to_data_base(setup, args.out, args.data)
        replace_other_configuration(args.data, args.arm, setup)
    for name, rows, key in tables:
        merge_table(os.path.join(data, name), rows, key)
    merge_provenance(os.path.join(data, "provenance.csv"), {
        "part": part_label(seeds, rates, args.heads), "commit": common.binary_commit(args.binary),
        "uncommitted_changes": "yes" if dirty else "no", "started_utc": args.started, "machine": common.machine(),
        "wall_seconds": args.wall_seconds, "max_load_1min": common.max_load(args.load, args.started)})
    print(f"collected {args.arm}: {args.out} -> {data}")


if __name__ == "__main__":
    try:
        main()
    except common.CsvError as e:
        fail(str(e))
