#!/usr/bin/env python3
"""headlab plot: figures of a run folder or a sweep folder, written to PATH/plots/.

Usually run by `headlab plot PATH` (which first rewrites a sweep's results.csv); it can also be
run by hand: python3 src/plot/headlab_plot.py PATH [--x tokens|step] [--heads L:H,...]
[--format png|pdf|svg] [--dpi N] [--no-title].
docs/sweeps.md lists the figures. Inputs, all written by headlab:
  run folder:   metrics.csv (step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,...),
                config.toml (optional, for titles); from headlab analyze (optional): heads.csv
                (layer,head,<metrics>), heads_similarity.csv, attention_example_I.csv (+ _tokens.csv);
                from headlab prune (optional): prune/<name>/prune.csv
  sweep folder: grid.csv (run,<grid keys>,params,steps), results.csv, and the run folders
A folder without metrics.csv is drawn for whatever analysis or prune files it holds (a folder of
prune invocations, or one invocation's folder with prune.csv).
Each figure is drawn by one function below; a new figure is a new function plus one call in
plot_run, plot_analysis or plot_sweep. Bad input prints one line on stderr and exits with code 2.
"""
import argparse
import csv
import math
import os
import re
import sys
import textwrap


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(2)


try:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt
    import numpy as np  # a dependency of matplotlib
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle
except ImportError:
    fail(f"matplotlib is not installed for {sys.executable}: apt-get install python3-matplotlib")

try:
    import tomllib  # Python 3.11+ (Debian 12); titles only, so it is optional
except ImportError:
    tomllib = None

SEED_KEYS = ("train.seed", "data.seed")
NOTES = []  # lines for stdout, printed only when every figure was drawn (an error stays one line)
FIGURES = {"format": "png", "dpi": 110, "titles": True}  # from the command line, for save()

# What each logged quantity is, with its unit, for axis labels and titles.
METRICS = {
    "train_loss": ("training loss", "nats/token"),
    "val_loss": ("validation loss", "nats/token"),
    "val_accuracy": ("validation accuracy", "fraction correct"),
    "val_bpb": ("validation bits per byte", "bits/byte"),
}
X_AXES = {"tokens": "training tokens seen", "step": "optimizer steps"}
KEY_NAMES = {
    "model.n_heads": "number of heads",
    "model.n_kv_heads": "key/value heads",
    "model.d_head": "head width d_head",
    "model.d_model": "model width d_model",
    "model.n_layers": "number of layers",
    "model.mlp_ratio": "MLP width ratio",
    "data.task": "task",
    "data.k": "task size k",
    "train.lr": "peak learning rate",
    "train.batch_size": "batch size",
    "train.steps": "training steps",
}
LINE_STYLES = ["-", "--", ":", "-."]


def key_label(key):
    return f"{KEY_NAMES[key]} ({key})" if key in KEY_NAMES else key


def metric_label(name):
    what, unit = METRICS.get(name, (name.replace("_", " "), ""))
    return f"{what} ({unit})" if unit else what


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_metrics(path):
    """Columns of a metrics.csv as lists of floats (None where a row has no value)."""
    rows = read_csv(path)
    if rows and "step" not in rows[0]:
        fail(f"{path}: not a headlab metrics file (no step column)")
    columns = {}
    for row in rows:
        for name, value in row.items():
            columns.setdefault(name, []).append(number(value))
    return columns


def read_config(run_dir):
    path = os.path.join(run_dir, "config.toml")
    if tomllib is None or not os.path.exists(path):
        return {}
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return {}


def describe_config(config, swept=()):
    """'d_model 128, 4 heads x d_head 32, 2 layers; task text, 1000 steps' from what config.toml
    holds, leaving out what the swept keys vary (the legend and the axes show those)."""
    model, data, train = config.get("model", {}), config.get("data", {}), config.get("train", {})
    head_keys = ("model.n_heads", "model.d_head", "model.n_kv_heads", "model.d_model")
    parts, rest = [], []
    if "d_model" in model and "model.d_model" not in swept:
        parts.append(f"d_model {model['d_model']}")
    if "n_heads" in model and not any(k in swept for k in head_keys):
        heads = f"{model['n_heads']} head{'s' if model['n_heads'] != 1 else ''}"
        d_head = model.get("d_head") or (model["d_model"] // model["n_heads"] if "d_model" in model else 0)
        if d_head:
            heads += f" x d_head {d_head}"
        if model.get("n_kv_heads"):
            heads += f" ({model['n_kv_heads']} kv heads)"
        parts.append(heads)
    if "n_layers" in model and "model.n_layers" not in swept:
        parts.append(f"{model['n_layers']} layer{'s' if model['n_layers'] != 1 else ''}")
    if "task" in data and "data.task" not in swept:
        rest.append(f"task {data['task']}")
    if "steps" in train and "train.steps" not in swept:
        rest.append(f"{train['steps']} steps")
    return ", ".join(parts) + ("; " if parts and rest else "") + ", ".join(rest)


def points(xs, ys):
    """The (x, y) pairs where both are present."""
    pairs = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def has_values(columns, name):
    return any(v is not None for v in columns.get(name, []))


def figure_title(owner, text, **style):
    """The figure's title (what was run, its config, the seeds): fig.suptitle over panels, else the
    one axes' title. --no-title leaves it out, for a paper's caption; panel titles stay, since they
    say which panel is which."""
    if FIGURES["titles"]:
        (owner.set_title if hasattr(owner, "set_title") else owner.suptitle)(text, **style)


def save(fig, stem, written):
    """Writes PATH/plots/<stem>.<format>."""
    path = f"{stem}.{FIGURES['format']}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=FIGURES["dpi"], bbox_inches="tight")
    plt.close(fig)
    written.append(path)


# ----------------------------------------------------------------------------------------------
# Heatmaps: one helper for every cell grid (heads.csv columns, the similarity matrix, attention
# maps, heads left per layer), so colours, blank cells and annotations read the same everywhere.

HEAD_COLUMNS = {  # heads.csv column -> colourbar label with unit (docs/analysis.md)
    "gate": "gate value (0 = pruned)",
    "importance": "importance E|dL/dgate| (nats)",
    "importance_normalized": "importance / l2 norm of the layer's importances",
    "ablation_loss_delta": "loss with the head masked - loss (nats/token)",
    "ablation_accuracy_delta": "accuracy with the head masked - accuracy (fraction)",
    "layer_only_loss_delta": "loss with the head alone in its layer - loss (nats/token)",
    "layer_only_accuracy_delta": "accuracy with the head alone in its layer - accuracy (fraction)",
    "entropy": "attention entropy (nats)",
    "distance": "attention distance sum_s A[t,s] |t-s| (tokens)",
    "confidence": "confidence: mean max_s A[t,s] (probability)",
    "delimiter_mass": "attention on delimiters (probability)",
    "previous_token_agreement": "fraction of rows whose argmax is t-1",
    "positional_offset": "most frequent t - argmax (1 = previous token, < 0 = a later key)",
    "positional_share": "fraction of rows whose argmax is at the positional offset",
    "syntactic_head_agreement": "fraction of rows whose argmax is the gold head",
    "dependent_agreement": "fraction of rows whose argmax is a gold dependent",
    "antecedent_agreement": "fraction of rows whose argmax is the gold antecedent",
    "delimiter_agreement": "fraction of rows whose argmax is a delimiter",
    "rare_token_agreement": "fraction of rows whose argmax is the rarest visible token (training counts)",
    "js_nearest": "JS distance to the nearest other head (0 = same attention)",
}


def heatmap(ax, values, cmap="viridis", vmin=None, vmax=None, centre_zero=False, annotate=False, fmt="{:.3g}"):
    """Draws a grid of values (rows top to bottom); NaN cells are left white and hatched. With
    centre_zero the colormap is diverging (blue < 0 < red, white at 0, symmetric limits). Returns
    the image for a colourbar."""
    grid = np.ma.masked_invalid(np.array(values, dtype=float))
    if centre_zero:
        limit = float(np.abs(grid).max()) if grid.count() else 1.0
        cmap, vmin, vmax = "RdBu_r", -(limit or 1.0), limit or 1.0
    colormap = plt.get_cmap(cmap).copy()
    colormap.set_bad("white")
    image = ax.imshow(grid, cmap=colormap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    for r, c in zip(*np.nonzero(grid.mask)) if np.ndim(grid.mask) else ():
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.7", linewidth=0))
    if annotate:
        for r, c in zip(*np.nonzero(~np.ma.getmaskarray(grid))):
            v = float(grid[r, c])
            red, green, blue, _ = image.cmap(image.norm(v))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            ax.text(c, r, fmt.format(v), ha="center", va="center", fontsize=7, color="white" if dark else "black")
    return image


def cell_ticks(ax, x_labels, y_labels, rotate_x=False):
    ax.set_xticks(range(len(x_labels)), x_labels, rotation=90 if rotate_x else 0)
    ax.set_yticks(range(len(y_labels)), y_labels)
    ax.tick_params(length=0)


# ----------------------------------------------------------------------------------------------
# headlab analyze's files in a run folder: heads.csv, heads_similarity.csv, attention_example_I.csv.


def plot_heads(run_dir, out_dir, title_prefix, written):
    """heads_<column>.png: a layer x head heatmap per column of heads.csv that varies."""
    path = os.path.join(run_dir, "heads.csv")
    if not os.path.exists(path):
        return
    rows = read_csv(path)
    if not rows or "layer" not in rows[0] or "head" not in rows[0]:
        fail(f"{path}: expected a header layer,head,<metric columns> and at least one row")
    layers = sorted({int(r["layer"]) for r in rows})
    heads = sorted({int(r["head"]) for r in rows})
    skipped = []
    for column in [c for c in rows[0] if c not in ("layer", "head")]:
        values = [[math.nan] * len(heads) for _ in layers]
        for r in rows:
            v = number(r[column])
            if v is not None:
                values[layers.index(int(r["layer"]))][heads.index(int(r["head"]))] = v
        finite = [v for row in values for v in row if not math.isnan(v)]
        if not finite:
            skipped.append(f"{column} (no values)")
            continue
        if min(finite) == max(finite):
            skipped.append(f"{column} (every head {finite[0]:g})")
            continue
        signed = column.endswith("_delta") or (min(finite) < 0 < max(finite))
        fig, ax = plt.subplots(figsize=(2.2 + 0.6 * len(heads), 1.6 + 0.5 * len(layers)))
        image = heatmap(ax, values, centre_zero=signed, annotate=len(layers) <= 8 and len(heads) <= 16)
        label = HEAD_COLUMNS.get(column, column.replace("_", " "))
        fig.colorbar(image, ax=ax, label=textwrap.fill(label, 4 * len(layers) + 22))
        cell_ticks(ax, [str(h) for h in heads], [str(l) for l in layers])
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        notes = ["red > 0 > blue"] if signed else []
        if len(finite) < len(layers) * len(heads):
            notes.append("hatched = no value")
        note = f"\n({', '.join(notes)})" if notes else ""
        figure_title(ax, f"{title_prefix}{column.replace('_', ' ')} per head{note}", fontsize=10)
        save(fig, os.path.join(out_dir, f"heads_{column}"), written)
    if skipped:
        NOTES.append(f"{path}: no heatmap for {', '.join(skipped)}")


def plot_head_similarity(run_dir, out_dir, title_prefix, written):
    """heads_similarity.png: the (L*H) x (L*H) Jensen-Shannon distance matrix."""
    path = os.path.join(run_dir, "heads_similarity.csv")
    if not os.path.exists(path):
        return
    rows = read_csv(path)
    labels = [r.get("head") for r in rows]
    if not rows or list(rows[0].keys())[1:] != labels or not all(re.fullmatch(r"L\d+H\d+", l or "") for l in labels):
        fail(f"{path}: expected a header head,L0H0,L0H1,... and one row per head in the same order")
    values = [[number(r[l]) if number(r[l]) is not None else math.nan for l in labels] for r in rows]
    ticks = [re.sub(r"L(\d+)H(\d+)", r"\1:\2", l) for l in labels]
    n = len(labels)
    size = min(max(5.0, 3 + 0.45 * n), 16)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = heatmap(ax, values, vmin=0.0, vmax=1.0, annotate=n <= 16, fmt="{:.2f}")
    fig.colorbar(image, ax=ax, label="Jensen-Shannon distance\n(0 = same attention, 1 = disjoint)")
    cell_ticks(ax, ticks, ticks, rotate_x=True)
    per_layer = sum(1 for l in labels if l.startswith("L0H"))
    for boundary in range(per_layer, n, per_layer or n):  # lines between layers
        ax.axhline(boundary - 0.5, color="white", linewidth=1.5)
        ax.axvline(boundary - 0.5, color="white", linewidth=1.5)
    ax.set_xlabel("head (layer:head)")
    ax.set_ylabel("head (layer:head)")
    figure_title(ax, f"{title_prefix}how differently pairs of heads attend\n" + textwrap.fill(
        "(JS distance of their attention rows, averaged over query rows; dark = redundant pair)", int(11 * size)),
                 fontsize=10)
    save(fig, os.path.join(out_dir, "heads_similarity"), written)


def read_attention_example(path):
    """{(layer, head): T x T rows} from attention_example_I.csv (layer,head,query,k0..k{T-1})."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        keys = header[3:]
        if header[:3] != ["layer", "head", "query"] or not keys or keys != [f"k{s}" for s in range(len(keys))]:
            fail(f"{path}: expected a header layer,head,query,k0,...,k<T-1> (headlab analyze --dump-example)")
        maps = {}
        for line in reader:
            values = [number(v) for v in line]
            if len(values) != len(header) or any(v is None for v in values):
                fail(f"{path}: line {reader.line_num} does not have {len(header)} numbers")
            maps.setdefault((int(values[0]), int(values[1])), []).append(values[3:])
    if not maps or any(len(rows) != len(keys) for rows in maps.values()):
        fail(f"{path}: expected {len(keys)} query rows for every (layer, head)")
    return maps


def read_example_tokens(path, length):
    """The text of each position, and which positions are real (not padding), from _tokens.csv."""
    if not os.path.exists(path):
        return [str(t) for t in range(length)], list(range(length))
    rows = read_csv(path)
    if len(rows) != length or not rows or "text" not in rows[0] or "real" not in rows[0]:
        fail(f"{path}: expected position,token,text,real,... and {length} rows, one per position")
    text = [r["text"].replace(" ", "\u2423") for r in rows]  # a visible space
    return text, [t for t, r in enumerate(rows) if r["real"] != "0"]


def plot_attention_examples(run_dir, out_dir, title_prefix, chosen, written):
    """attention_example_I.png: per dumped example, every head's (or the chosen heads') attention map."""
    # Dataset examples in index order, then the --prompt one.
    found = sorted(((not m.group(1).isdigit(), int(m.group(1)) if m.group(1).isdigit() else 0), m.group(1), name)
                   for name in os.listdir(run_dir) if (m := re.fullmatch(r"attention_example_(\d+|prompt)\.csv", name)))
    for _, example, name in found:
        path = os.path.join(run_dir, name)
        maps = read_attention_example(path)
        length = len(next(iter(maps.values())))
        text, keep = read_example_tokens(os.path.join(run_dir, f"attention_example_{example}_tokens.csv"), length)
        n_layers, n_heads = max(l for l, _ in maps) + 1, max(h for _, h in maps) + 1
        for layer, head in chosen or []:
            if (layer, head) not in maps:
                fail(f"--heads {layer}:{head}: {path} has layers 0-{n_layers - 1} and heads 0-{n_heads - 1}")
        panels = chosen or sorted(maps)
        n_cols = n_heads if not chosen else min(len(panels), 4)
        n_rows = math.ceil(len(panels) / n_cols)
        side = 4.2 if len(panels) <= 2 else 2.6
        show_tokens = len(keep) <= (40 if side > 4 else 24)
        fig, axes = plt.subplots(n_rows, n_cols, figsize=(side * n_cols + 1.2, side * n_rows + 1.0),
                                 squeeze=False, constrained_layout=True)
        for i, (layer, head) in enumerate(panels):
            ax = axes[i // n_cols][i % n_cols]
            grid = [[maps[(layer, head)][q][k] for k in keep] for q in keep]
            image = heatmap(ax, grid, cmap="magma", vmin=0.0, vmax=1.0)
            labels = [text[t] for t in keep] if show_tokens else [str(t) for t in keep]
            step = 1 if show_tokens else max(1, math.ceil(len(keep) / 8))
            ax.set_xticks(range(0, len(keep), step), labels[::step], fontsize=7 if show_tokens else 8)
            ax.set_yticks(range(0, len(keep), step), labels[::step], fontsize=7 if show_tokens else 8)
            ax.tick_params(length=0)
            ax.set_title(f"layer {layer}, head {head}", fontsize=9)
            if i % n_cols == 0 or len(panels) <= 2:
                ax.set_ylabel("query position")
            if i // n_cols == n_rows - 1 or len(panels) <= 2 or i + n_cols >= len(panels):
                ax.set_xlabel("key position (attended to)")
        for j in range(len(panels), n_rows * n_cols):
            axes[j // n_cols][j % n_cols].set_visible(False)
        fig.colorbar(image, ax=axes.ravel().tolist(), label="attention probability", shrink=0.9)
        words = [text[t].replace("\u2423", " ") for t in keep]
        shown = ("" if all(len(w) == 1 for w in words) else " ").join(words)  # bytes, or words
        snippet = shown if len(shown) <= 70 else shown[:67] + "..."
        padding = f"; {length - len(keep)} padding positions left out" if len(keep) < length else ""
        which = "chosen heads" if chosen else "every head"
        where = "the prompt" if example == "prompt" else f"example {example}"
        figure_title(fig, f"{title_prefix}attention of {which} on {where}{padding}\n\"{snippet}\"\n"
                     "row = query position, column = the key it attends to; each row sums to 1", fontsize=10)
        save(fig, os.path.join(out_dir, f"attention_example_{example}"), written)
    return len(found)


# ----------------------------------------------------------------------------------------------
# headlab prune's prune.csv files: one per invocation, in PATH/prune/<name>/ of a run folder.

PRUNE_HEADER = ["strategy", "seed", "finetune_steps", "recompute", "lambda", "round", "heads_pruned",
                "fraction_pruned", "heads_kept", "heads_per_layer", "val_loss", "val_accuracy", "val_bpb",
                "pruned_heads"]
PRUNE_STRATEGIES = {  # strategy -> (legend name, colour)
    "importance": ("importance (Michel et al.)", "tab:blue"),
    "ablation": ("ablation loss", "tab:purple"),
    "entropy": ("attention entropy", "tab:green"),
    "confidence": ("confidence (Voita et al.)", "tab:orange"),
    "random": ("random", "tab:gray"),
    "l0": ("L0 gates (lambda sweep)", "tab:red"),
}
PRUNE_METRICS = ("val_accuracy", "val_bpb", "val_loss")


def find_prune_files(folder):
    """prune.csv of FOLDER itself (one invocation), of its sub-folders (a folder of invocations),
    and of FOLDER/prune/*/ (a run folder)."""
    candidates = [os.path.join(folder, "prune.csv")]
    for parent in (folder, os.path.join(folder, "prune")):
        if os.path.isdir(parent):
            candidates += [os.path.join(parent, d, "prune.csv") for d in sorted(os.listdir(parent))]
    return [p for p in unique(candidates) if os.path.isfile(p)]


def read_prune(path):
    """One prune.csv: its rows, sorted by round, with numbers parsed."""
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    if header != PRUNE_HEADER:
        fail(f"{path}: not a headlab prune.csv: the header must be {','.join(PRUNE_HEADER)}")
    rows = read_csv(path)
    if not rows:
        fail(f"{path}: no rows")
    parsed = []
    for i, r in enumerate(rows, start=2):
        try:
            row = {k: int(r[k]) for k in ("seed", "finetune_steps", "recompute", "round", "heads_pruned", "heads_kept")}
            row.update({k: float(r[k]) for k in ("fraction_pruned", "val_loss")})
            row.update({k: number(r[k]) for k in ("lambda", "val_accuracy", "val_bpb")})
            row["heads_per_layer"] = [int(n) for n in r["heads_per_layer"].split()]
        except (TypeError, ValueError):
            fail(f"{path}: line {i} has a malformed number")
        if sum(row["heads_per_layer"]) != row["heads_kept"] or len(r["pruned_heads"].split()) != row["heads_pruned"]:
            fail(f"{path}: line {i}: heads_per_layer must sum to heads_kept and pruned_heads list heads_pruned heads")
        if r["strategy"] not in PRUNE_STRATEGIES:
            fail(f"{path}: line {i}: unknown strategy '{r['strategy']}' (expected {'|'.join(PRUNE_STRATEGIES)})")
        if r["strategy"] != rows[0]["strategy"] or row["seed"] != int(rows[0]["seed"]):
            fail(f"{path}: line {i}: one file holds one strategy and seed")
        row["strategy"] = r["strategy"]
        parsed.append(row)
    return sorted(parsed, key=lambda r: r["round"])


def prune_series(files):
    """Groups the files into curves: (strategy, finetune_steps, recompute) -> files (the seeds of
    random, or repeated invocations); the l0 files of one finetune_steps form one lambda sweep."""
    series = {}
    for rows in files:
        first = rows[0]
        recompute = 0 if first["strategy"] in ("random", "l0") else first["recompute"]
        series.setdefault((first["strategy"], first["finetune_steps"], recompute), []).append(rows)
    order = list(PRUNE_STRATEGIES)
    return dict(sorted(series.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1], kv[0][2])))


def series_label(key, files, band=True):
    strategy, finetune_steps, recompute = key
    label = PRUNE_STRATEGIES[strategy][0]
    if strategy not in ("random", "l0"):
        label += ", re-scored every round" if recompute else ", scored once"
    if finetune_steps:
        label += f", fine-tuned {finetune_steps} steps"
    if strategy != "l0" and len(files) > 1:
        label += f" (mean of {len(files)} seeds{', band = min-max' if band else ''})"
    return label


def by_round(files, value):
    """Per round present in every file: (mean fraction pruned, mean, min, max of value(row))."""
    rounds = sorted(set.intersection(*({r["round"] for r in rows} for rows in files)))
    out = []
    for n in rounds:
        rows = [next(r for r in f if r["round"] == n) for f in files]
        ys = [value(r) for r in rows]
        if any(y is None for y in ys):
            continue
        out.append((sum(r["fraction_pruned"] for r in rows) / len(rows), sum(ys) / len(ys), min(ys), max(ys)))
    return out


def plot_prune_curves(series, out_dir, title_prefix, subtitle, n_files, written):
    """prune_<metric>.png: the metric against the fraction of heads pruned, one curve per strategy."""
    all_rows = [r for files in series.values() for rows in files for r in rows]
    total_heads = all_rows[0]["heads_pruned"] + all_rows[0]["heads_kept"]
    for metric in PRUNE_METRICS:
        if not any(r[metric] is not None for r in all_rows):
            continue
        fig, ax = plt.subplots(figsize=(9.5, 5))
        baseline = [r[metric] for r in all_rows if r["round"] == 0 and r[metric] is not None]
        if baseline:
            ax.axhline(sum(baseline) / len(baseline), color="black", linestyle=":", linewidth=1,
                       label="unpruned model")
        for key, files in series.items():
            strategy, finetune_steps, recompute = key
            color = PRUNE_STRATEGIES[strategy][1]
            style = "--" if finetune_steps else "-"
            if strategy == "l0":  # one point per lambda: the gated model (round 1), in lambda order
                ends = sorted(((rows[-1]["lambda"] or 0.0, rows[-1]) for rows in files if rows[-1]["round"] > 0),
                              key=lambda p: p[0])
                ends = [(lam, r) for lam, r in ends if r[metric] is not None]
                ax.plot([r["fraction_pruned"] for _, r in ends], [r[metric] for _, r in ends], color=color,
                        linestyle=style, marker="D", markersize=6, label=series_label(key, files))
                for lam, r in ends:
                    ax.annotate(f"\u03bb={lam:g}", (r["fraction_pruned"], r[metric]), textcoords="offset points",
                                xytext=(6, 6), fontsize=8, color=color,
                                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))
                continue
            points = by_round(files, lambda r: r[metric])
            xs, means = [p[0] for p in points], [p[1] for p in points]
            ax.plot(xs, means, color=color, linestyle=style, marker="o", markersize=4,
                    markerfacecolor=color if recompute or strategy == "random" else "white",
                    label=series_label(key, files))
            if len(files) > 1:
                ax.fill_between(xs, [p[2] for p in points], [p[3] for p in points], color=color, alpha=0.2,
                                linewidth=0)
        ax.set_xlim(-0.02, 1.0)
        ax.set_xlabel("fraction of heads pruned")
        ax.set_ylabel(metric_label(metric))
        top = ax.secondary_xaxis("top", functions=(lambda f: f * total_heads, lambda n: n / total_heads))
        top.set_xlabel(f"heads pruned (of {total_heads})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  title="solid: no fine-tuning, dashed: fine-tuned\nfilled: re-scored, hollow: scored once",
                  title_fontsize=7)
        figure_title(ax, f"{title_prefix}{METRICS[metric][0]} as heads are pruned ({n_files} prune.csv files){subtitle}",
                     fontsize=10)
        save(fig, os.path.join(out_dir, f"prune_{metric}"), written)


def plot_prune_heads_per_layer(series, out_dir, title_prefix, subtitle, written):
    """prune_heads_per_layer.png: per strategy, a layer x round grid of the heads left (l0: x lambda)."""
    keys = list(series)
    n_cols = min(3, len(keys))
    n_rows = math.ceil(len(keys) / n_cols)
    n_layers = max(len(r["heads_per_layer"]) for files in series.values() for rows in files for r in rows)
    most = max(max(r["heads_per_layer"]) for files in series.values() for rows in files for r in rows)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(5.2 * n_cols, 0.5 * n_layers * n_rows + 1.3 * n_rows + 1),
                             squeeze=False, constrained_layout=True)
    for i, key in enumerate(keys):
        ax = axes[i // n_cols][i % n_cols]
        files = series[key]
        if key[0] == "l0":
            ends = sorted((rows[-1] for rows in files), key=lambda r: r["lambda"] or 0.0)
            columns = [r["heads_per_layer"] for r in ends]
            x_labels = [f"\u03bb={r['lambda']:g}\n{100 * r['fraction_pruned']:.0f}%" for r in ends]
            ax.set_xlabel("gate penalty lambda / % of heads pruned")
        else:
            columns = []
            for layer in range(n_layers):
                columns.append(by_round(files, lambda r: r["heads_per_layer"][layer]))
            x_labels = [f"{n}\n{100 * p[0]:.0f}%" for n, p in enumerate(columns[0])]
            columns = [[columns[layer][n][1] for layer in range(n_layers)] for n in range(len(columns[0]))]
            ax.set_xlabel("pruning round / % of heads pruned")
        values = [[column[layer] for column in columns] for layer in range(n_layers)]
        image = heatmap(ax, values, cmap="Blues", vmin=0, vmax=most, annotate=True, fmt="{:.2g}")
        cell_ticks(ax, x_labels, [str(l) for l in range(n_layers)])
        ax.tick_params(axis="x", labelsize=7)
        ax.set_ylabel("layer")
        label = series_label(key, files, band=False).replace(" (mean", "\n(mean")
        ax.set_title(label, fontsize=8)
    for j in range(len(keys), n_rows * n_cols):
        axes[j // n_cols][j % n_cols].set_visible(False)
    fig.colorbar(image, ax=axes.ravel().tolist(), label="heads left in the layer", shrink=0.8)
    figure_title(fig, f"{title_prefix}heads left per layer as pruning proceeds, by strategy{subtitle}", fontsize=10)
    save(fig, os.path.join(out_dir, "prune_heads_per_layer"), written)


def plot_prune(folder, out_dir, title_prefix, written):
    paths = find_prune_files(folder)
    if not paths:
        return
    files = [read_prune(p) for p in paths]
    shapes = {(len(r["heads_per_layer"]), r["heads_kept"] + r["heads_pruned"]) for rows in files for r in rows}
    if len(shapes) > 1:
        fail(f"{folder}: its prune.csv files are of different models (layers, heads): {sorted(shapes)}")
    series = prune_series(files)
    context = describe_config(read_config(folder))
    subtitle = f"\n{context}" if context else ""
    plot_prune_curves(series, out_dir, title_prefix, subtitle, len(paths), written)
    plot_prune_heads_per_layer(series, out_dir, title_prefix, subtitle, written)


def plot_analysis(run_dir, out_dir, title_prefix, chosen_heads, written):
    """Every figure of headlab analyze's and headlab prune's files in a run folder; returns the
    number of attention examples found (for --heads)."""
    plot_heads(run_dir, out_dir, title_prefix, written)
    plot_head_similarity(run_dir, out_dir, title_prefix, written)
    examples = plot_attention_examples(run_dir, out_dir, title_prefix, chosen_heads, written)
    plot_prune(run_dir, out_dir, title_prefix, written)
    return examples


# ----------------------------------------------------------------------------------------------
# A run folder (or a folder holding only analysis or prune results).


def plot_run(run_dir, x_axis, chosen_heads):
    name = os.path.basename(os.path.normpath(run_dir))
    out = os.path.join(run_dir, "plots")
    written = []
    metrics_path = os.path.join(run_dir, "metrics.csv")
    if os.path.exists(metrics_path):
        plot_training(run_dir, metrics_path, name, x_axis, out, written)
    examples = plot_analysis(run_dir, out, f"Run {name}: ", chosen_heads, written)
    if chosen_heads and not examples:
        fail(f"--heads: {run_dir} has no attention_example_<I>.csv (headlab analyze --dump-example I writes one)")
    if not written:
        fail(f"{run_dir} holds neither metrics.csv (a run folder) nor grid.csv (a sweep folder), "
             "nor heads.csv, attention_example_<I>.csv or prune.csv files")
    return written


def plot_training(run_dir, metrics_path, name, x_axis, out, written):
    m = read_metrics(metrics_path)
    if not m.get("step"):
        fail(f"{metrics_path} has no rows yet: nothing to plot")
    context = describe_config(read_config(run_dir))
    subtitle = f"\n{context}" if context else ""

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs, ys = points(m[x_axis], m["train_loss"])
    ax.plot(xs, ys, color="tab:blue", label="training (mean over the logging window)")
    if has_values(m, "val_loss"):
        xs, ys = points(m[x_axis], m["val_loss"])
        ax.plot(xs, ys, color="tab:orange", marker="o", markersize=3, label="validation")
    ax.set_xlabel(X_AXES[x_axis])
    ax.set_ylabel("cross-entropy loss (nats/token)")
    figure_title(ax, f"Loss of run {name}{subtitle}")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, os.path.join(out, "loss"), written)

    for metric in ("val_accuracy", "val_bpb"):
        if not has_values(m, metric):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.2))
        xs, ys = points(m[x_axis], m[metric])
        ax.plot(xs, ys, color="tab:orange", marker="o", markersize=3)
        ax.set_xlabel(X_AXES[x_axis])
        ax.set_ylabel(metric_label(metric))
        figure_title(ax, f"{METRICS[metric][0].capitalize()} of run {name}{subtitle}")
        ax.grid(alpha=0.3)
        save(fig, os.path.join(out, metric), written)


# ----------------------------------------------------------------------------------------------
# A sweep folder.


class Sweep:
    """grid.csv and results.csv, plus which key plays which part in the figures:
    panel_key  data.task when it is swept: one panel per task (losses differ in scale per task)
    color_key  the swept key the curves are coloured by and the final metrics are plotted against
               (model.n_heads when swept, else the first numeric swept key, else the first)
    style_keys the other swept non-seed keys: line styles, one series each
    Seed keys are never drawn as separate series: seeds of one point share a colour."""

    def __init__(self, sweep_dir):
        self.dir = sweep_dir
        self.name = os.path.basename(os.path.normpath(sweep_dir))
        grid_path = os.path.join(sweep_dir, "grid.csv")
        self.runs = read_csv(grid_path)
        if not self.runs:
            fail(f"{grid_path} lists no runs")
        header = list(self.runs[0].keys())
        self.keys = header[1:-2]
        self.values = {k: unique([r[k] for r in self.runs]) for k in self.keys}
        swept = [k for k in self.keys if len(self.values[k]) > 1 and k not in SEED_KEYS]
        self.seed_keys = [k for k in self.keys if k in SEED_KEYS]
        self.panel_key = "data.task" if "data.task" in swept else None
        rest = [k for k in swept if k != self.panel_key]
        numeric = [k for k in rest if is_numeric(self.values[k])]
        self.color_key = ("model.n_heads" if "model.n_heads" in rest else (numeric or rest or [None])[0])
        self.style_keys = [k for k in rest if k != self.color_key]
        self.fixed = {k: self.values[k][0] for k in self.keys if len(self.values[k]) == 1}
        results_path = os.path.join(sweep_dir, "results.csv")
        self.results = read_csv(results_path) if os.path.exists(results_path) else []
        first = os.path.join(sweep_dir, self.runs[0]["run"])
        self.context = describe_config(read_config(first), [k for k in self.keys if len(self.values[k]) > 1])

    def panels(self):
        return self.values[self.panel_key] if self.panel_key else [None]

    def runs_in(self, panel, rows=None):
        """The rows of grid.csv (or of `rows`) that belong to a panel."""
        rows = self.runs if rows is None else rows
        return [r for r in rows if panel is None or r[self.panel_key] == panel]

    def colors(self):
        """Colour per value of color_key: an ordered colormap for numbers, distinct hues otherwise."""
        if self.color_key is None:
            return {None: "tab:blue"}
        values = self.values[self.color_key]
        if is_numeric(values):
            values = sorted(values, key=float)
            cmap = plt.get_cmap("viridis")
            n = len(values)
            return {v: cmap(0.8 * i / max(n - 1, 1)) for i, v in enumerate(values)}  # 0.8: no pale yellow
        cmap = plt.get_cmap("tab10")
        return {v: cmap(i % 10) for i, v in enumerate(values)}

    def styles(self):
        combos = unique([style_combo(r, self.style_keys) for r in self.runs])
        return {c: LINE_STYLES[i % len(LINE_STYLES)] for i, c in enumerate(combos)}

    def subtitle(self):
        seeds = " x ".join(f"{len(self.values[k])} {k}" for k in self.seed_keys)
        fixed = ", ".join(f"{k}={v}" for k, v in self.fixed.items() if k not in SEED_KEYS)
        parts = [p for p in (self.context, fixed, f"seeds: {seeds}" if seeds else "") if p]
        return "\n" + "; ".join(parts) if parts else ""


def unique(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def is_numeric(values):
    return all(number(v) is not None for v in values)


def min_gap(values):
    xs = sorted({float(v) for v in values})
    return min((b - a for a, b in zip(xs, xs[1:])), default=1.0)


def style_combo(row, keys):
    return ", ".join(f"{k}={row[k]}" for k in keys)


def panel_grid(n_rows, n_cols, width=6.0, height=3.8):
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows), squeeze=False)
    return fig, axes


def legend_handles(sweep):
    handles = []
    for value, color in sweep.colors().items():
        label = f"{sweep.color_key} = {value}" if sweep.color_key else "all runs"
        handles.append(Line2D([], [], color=color, label=label))
    styles = sweep.styles()
    if len(styles) > 1:
        for combo, style in styles.items():
            handles.append(Line2D([], [], color="grey", linestyle=style, label=combo))
    return handles


def plot_sweep_curves(sweep, run_metrics, x_axis, written):
    """Curves of every run, overlaid: loss.png (training | validation), val_accuracy.png, val_bpb.png."""
    colors, styles = sweep.colors(), sweep.styles()
    figures = [("loss", ["train_loss", "val_loss"])]
    for metric in ("val_accuracy", "val_bpb"):
        if any(has_values(m, metric) for m in run_metrics.values()):
            figures.append((metric, [metric]))
    for file_name, metrics in figures:
        # loss: a row per task, training and validation side by side; others: a column per task
        # that has the metric (accuracy is for generated tasks, bits per byte for text).
        panels = [p for p in sweep.panels() if any(
            has_values(run_metrics.get(r["run"], {}), metrics[-1]) for r in sweep.runs_in(p))]
        if len(metrics) == 2:
            fig, axes = panel_grid(len(panels), 2)
            cells = [(axes[p][c], panel, metrics[c]) for p, panel in enumerate(panels) for c in range(2)]
        else:
            fig, axes = panel_grid(1, len(panels))
            cells = [(axes[0][p], panel, metrics[0]) for p, panel in enumerate(panels)]
        for ax, panel, metric in cells:
            for row in sweep.runs_in(panel):
                m = run_metrics.get(row["run"])
                if not m or not has_values(m, metric):
                    continue
                xs, ys = points(m[x_axis], m[metric])
                color = colors[row[sweep.color_key]] if sweep.color_key else colors[None]
                ax.plot(xs, ys, color=color, linestyle=styles[style_combo(row, sweep.style_keys)], linewidth=1.2,
                        alpha=0.85, marker="o" if metric != "train_loss" else None, markersize=2.5)
            what = METRICS[metric][0]
            ax.set_title(f"{what}, {sweep.panel_key} = {panel}" if panel is not None else what)
            ax.set_xlabel(X_AXES[x_axis])
            ax.set_ylabel(metric_label(metric))
            ax.grid(alpha=0.3)
        axes[0][-1].legend(handles=legend_handles(sweep), fontsize=8, loc="upper right")
        by = f", coloured by {key_label(sweep.color_key)}" if sweep.color_key else ""
        what = "Training and validation loss" if file_name == "loss" else METRICS[metrics[0]][0].capitalize()
        figure_title(fig, f"{what} of every run in sweep {sweep.name}{by}{sweep.subtitle()}", fontsize=10)
        fig.tight_layout()
        save(fig, os.path.join(sweep.dir, "plots", file_name), written)


def plot_sweep_finals(sweep, written):
    """final_<metric>.png: the final metric (mean ± std over seeds) against color_key, a panel per task."""
    if not sweep.results:
        return
    x_key = sweep.color_key
    styles = sweep.styles()
    n_seeds = max(int(r["n_seeds"]) for r in sweep.results)
    for metric in ("val_loss", "val_accuracy", "val_bpb"):
        panels = [p for p in sweep.panels()
                  if any(number(r[f"{metric}_mean"]) is not None for r in sweep.runs_in(p, sweep.results))]
        if not panels:
            continue
        fig, axes = panel_grid(1, len(panels), width=5.5, height=4.2)
        for p, panel in enumerate(panels):
            ax = axes[0][p]
            rows = sweep.runs_in(panel, sweep.results)
            categories = unique([r[x_key] for r in rows]) if x_key else ["all runs"]
            numeric_x = x_key is not None and is_numeric(categories)
            log_x = numeric_x and min(float(c) for c in categories) > 0 and \
                max(float(c) for c in categories) / min(float(c) for c in categories) >= 4
            for s, (combo, style) in enumerate(styles.items()):
                series = [r for r in rows if style_combo(r, sweep.style_keys) == combo]
                series = [r for r in series if number(r[f"{metric}_mean"]) is not None]
                if not series:
                    continue
                # Series side by side, a little apart, so their error bars do not hide each other.
                shift = (s - (len(styles) - 1) / 2) * 0.06
                if numeric_x:
                    series.sort(key=lambda r: float(r[x_key]))
                    xs = [float(r[x_key]) * 2 ** shift if log_x else float(r[x_key]) + shift * min_gap(categories)
                          for r in series]
                else:
                    xs = [(categories.index(r[x_key]) if x_key else 0) + shift for r in series]
                ys = [number(r[f"{metric}_mean"]) for r in series]
                errors = [number(r[f"{metric}_std"]) or 0.0 for r in series]
                ax.errorbar(xs, ys, yerr=errors, linestyle=style, marker="o", capsize=4, label=combo or None)
            if numeric_x:
                xs = sorted(float(c) for c in categories)
                if log_x:  # head counts 1, 2, 4, ...: evenly spaced
                    ax.set_xscale("log", base=2)
                ax.set_xticks(xs, [c for c in sorted(categories, key=float)])
                ax.minorticks_off()
            else:
                ax.set_xticks(range(len(categories)), categories)
            ax.set_xlabel(key_label(x_key) if x_key else "")
            ax.set_ylabel(f"final {metric_label(metric)}")
            ax.set_title(f"{sweep.panel_key} = {panel}" if panel is not None else METRICS[metric][0])
            ax.grid(alpha=0.3)
            if len(styles) > 1 and ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        against = f" against {key_label(x_key)}" if x_key else ""
        spread = (f"mean ± sample std over {n_seeds} seeds" if n_seeds > 1 else "one seed per point, no error bars")
        figure_title(fig, f"Final {METRICS[metric][0]}{against}, sweep {sweep.name} ({spread}){sweep.subtitle()}",
                     fontsize=10)
        fig.tight_layout()
        save(fig, os.path.join(sweep.dir, "plots", f"final_{metric}"), written)


def plot_sweep(sweep_dir, x_axis, chosen_heads):
    sweep = Sweep(sweep_dir)
    run_metrics = {}
    for row in sweep.runs:
        path = os.path.join(sweep_dir, row["run"], "metrics.csv")
        if os.path.exists(path):
            m = read_metrics(path)
            if m.get("step"):
                run_metrics[row["run"]] = m
    if not run_metrics:
        fail(f"no run in {sweep_dir} has metrics yet: nothing to plot (run headlab sweep first)")
    written = []
    plot_sweep_curves(sweep, run_metrics, x_axis, written)
    plot_sweep_finals(sweep, written)
    for row in sweep.runs:
        run_dir = os.path.join(sweep_dir, row["run"])
        if os.path.isdir(run_dir):
            plot_analysis(run_dir, os.path.join(sweep_dir, "plots", row["run"]), f"{row['run']}: ", chosen_heads,
                          written)
    return written


def parse_heads(text):
    """'0:1,2:3' -> [(0, 1), (2, 3)]."""
    if not re.fullmatch(r"\d+:\d+(,\d+:\d+)*", text):
        fail(f"--heads: expected layer:head pairs like 0:1,2:3, got '{text}'")
    return unique([tuple(int(n) for n in pair.split(":")) for pair in text.split(",")])


def main():
    parser = argparse.ArgumentParser(description="Figures of a headlab run or sweep folder, into PATH/plots/.")
    parser.add_argument("path", help="run folder (metrics.csv), sweep folder (grid.csv), or prune results")
    parser.add_argument("--x", choices=sorted(X_AXES), default="tokens", help="x axis of the curves")
    parser.add_argument("--heads", help="attention maps of these heads only: layer:head,layer:head,...")
    parser.add_argument("--format", choices=["png", "pdf", "svg"], default="png", help="file format of the figures")
    parser.add_argument("--dpi", type=int, default=110, help="resolution of PNGs (and of images in PDF/SVG)")
    parser.add_argument("--no-title", action="store_true", help="leave out each figure's title")
    args = parser.parse_args()
    if not 10 <= args.dpi <= 2400:
        fail(f"--dpi must be between 10 and 2400, got {args.dpi}")
    FIGURES.update(format=args.format, dpi=args.dpi, titles=not args.no_title)
    if not os.path.isdir(args.path):
        fail(f"no such folder: {args.path}")
    chosen_heads = parse_heads(args.heads) if args.heads is not None else None
    if os.path.exists(os.path.join(args.path, "grid.csv")):
        written = plot_sweep(args.path, args.x, chosen_heads)
    else:
        written = plot_run(args.path, args.x, chosen_heads)
    for line in NOTES + written:
        print(line)


if __name__ == "__main__":
    main()
