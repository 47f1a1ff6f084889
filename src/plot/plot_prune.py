"""Figures of headlab prune's prune.csv files: metric against heads (or FFN units) pruned, heads
(units) left per layer (MLP block). A folder with runs of both draws each apart (prune_ffn_*.png)."""
import math
import os

from plot_common import (
    METRICS, cell_ticks, describe_config, fail, figure_title, heatmap, metric_label, number, plural, plt,
    read_config, read_csv, save, unique
)
from plot_shared import CsvError

# ----------------------------------------------------------------------------------------------
# headlab prune's prune.csv files: one per invocation, in PATH/prune/<name>/ of a run folder.

PRUNE_HEADER = ["strategy", "seed", "finetune_steps", "recompute", "lambda", "round", "heads_pruned",
                "fraction_pruned", "heads_kept", "heads_per_layer", "val_loss", "val_accuracy", "val_bpb",
                "pruned_heads"]
PRUNE_STRATEGIES = {  # strategy -> (legend name, colour)
    "importance": ("importance (Michel et al.)", "tab:blue"),
    "importance_raw": ("importance, not normalised per layer", "tab:cyan"),
    "integrated_gradients": ("integrated gradients", "tab:brown"),
    "magnitude": ("weight magnitude (FFN units)", "tab:olive"),
    "ablation": ("ablation loss", "tab:purple"),
    "entropy": ("attention entropy", "tab:green"),
    "confidence": ("confidence (Voita et al.)", "tab:orange"),
    "random": ("random", "tab:gray"),
    "l0": ("L0 gates (lambda sweep)", "tab:red"),
    "none": ("nothing pruned, fine-tuned only (the control)", "black"),
}
UNSCORED = ("random", "l0", "none")  # strategies without a score to recompute
# The words and file names of what a prune.csv pruned (its unit column).
# A whole-table unit counts its tables' heads (units) in the same columns as heads (ffn) and its
# fraction_pruned in tables.
# grid: the file of the per-table grid (plot_prune_heads_per_layer).
UNIT_WORDS = {"heads": dict(what="heads", one="head", table="layer", prefix="prune_", gates="heads",
                            grid="prune_heads_per_layer"),
              "ffn": dict(what="FFN units", one="unit", table="MLP block", prefix="prune_ffn_", gates="ffn",
                          grid="prune_ffn_units_per_block"),
              "attention_layers": dict(what="whole attention layers", one="layer", table="layer",
                                       prefix="prune_layers_", gates="heads", grid="prune_layers_heads_per_layer",
                                       whole=True),
              "ffn_blocks": dict(what="whole FFN blocks", one="block", table="MLP block", prefix="prune_blocks_",
                                 gates="ffn", grid="prune_blocks_units_per_block", whole=True)}
PRUNE_METRICS = ("val_accuracy", "val_bpb", "val_loss", "val_bleu", "val_chrf")  # BLEU, chrF: translation only


def find_prune_files(folder):
    """prune.csv of FOLDER itself (one invocation), of its sub-folders (a folder of invocations),
    and of FOLDER/prune/*/ (a run folder)."""
    candidates = [os.path.join(folder, "prune.csv")]
    for parent in (folder, os.path.join(folder, "prune")):
        if os.path.isdir(parent):
            candidates += [os.path.join(parent, d, "prune.csv") for d in sorted(os.listdir(parent))]
    return [p for p in unique(candidates) if os.path.isfile(p)]


def read_prune(path):
    """One prune.csv: its rows, sorted by round, with numbers parsed. Columns are read by name."""
    try:
        rows = read_csv(path, required=PRUNE_HEADER)
    except CsvError as e:
        fail(f"{path}: not a headlab prune.csv: it has no column '{e.column}' (headlab prune writes "
             f"{','.join(PRUNE_HEADER)})")
    if not rows:
        fail(f"{path}: no rows")
    parsed = []
    for i, r in enumerate(rows, start=2):
        unit = r.get("unit") or "heads"  # absent before FFN units could be pruned
        if unit not in UNIT_WORDS:
            fail(f"{path}: line {i}: unknown unit '{unit}' (expected {'|'.join(UNIT_WORDS)})")
        # What was pruned, whichever unit: n_pruned, n_kept and per_table (kept per layer or block).
        pruned_col, kept_col, per_col, list_col = (("heads_pruned", "heads_kept", "heads_per_layer", "pruned_heads")
                                                   if UNIT_WORDS[unit]["gates"] == "heads" else
                                                   ("units_pruned", "units_kept", "units_per_block", "pruned_units"))
        try:
            row = {k: int(r[k]) for k in ("seed", "finetune_steps", "recompute", "round")}
            row.update({"n_pruned": int(r[pruned_col]), "n_kept": int(r[kept_col])})
            row.update({k: float(r[k]) for k in ("fraction_pruned", "val_loss")})
            row.update({k: number(r[k]) for k in ("lambda", "val_accuracy", "val_bpb")})
            row.update({k: number(r.get(k)) for k in ("val_bleu", "val_chrf")})  # absent before translation
            row["per_table"] = [int(n) for n in r[per_col].split()]
        except (TypeError, ValueError, KeyError):
            fail(f"{path}: line {i} has a malformed number")
        if sum(row["per_table"]) != row["n_kept"] or len(r[list_col].split()) != row["n_pruned"]:
            fail(f"{path}: line {i}: {per_col} must sum to {kept_col} and {list_col} list {pruned_col}")
        row["unit"] = unit
        row["recover"] = r.get("recover") or "finetune"  # absent before distillation
        if r["strategy"] not in PRUNE_STRATEGIES:
            fail(f"{path}: line {i}: unknown strategy '{r['strategy']}' (expected {'|'.join(PRUNE_STRATEGIES)})")
        if r["strategy"] != rows[0]["strategy"] or row["seed"] != int(rows[0]["seed"]) or \
                unit != (rows[0].get("unit") or "heads"):
            fail(f"{path}: line {i}: one file holds one strategy, seed and unit")
        row["strategy"] = r["strategy"]
        parsed.append(row)
    return sorted(parsed, key=lambda r: r["round"])


def prune_series(files):
    """Groups the files into curves: (strategy, finetune_steps, recompute, recover) -> files (the
    seeds of random, or repeated invocations); the l0 files of one finetune_steps form one lambda
    sweep."""
    series = {}
    for rows in files:
        first = rows[0]
        recompute = 0 if first["strategy"] in UNSCORED else first["recompute"]
        series.setdefault((first["strategy"], first["finetune_steps"], recompute, first["recover"]), []).append(rows)
    order = list(PRUNE_STRATEGIES)
    return dict(sorted(series.items(), key=lambda kv: (order.index(kv[0][0]), *kv[0][1:])))


def series_label(key, files, band=True):
    strategy, finetune_steps, recompute, recover = key
    label = PRUNE_STRATEGIES[strategy][0]
    if strategy not in UNSCORED:
        label += ", re-scored every round" if recompute else ", scored once"
    if finetune_steps:
        label += f", {'distilled' if recover == 'distill' else 'fine-tuned'} {plural(finetune_steps, 'step')}"
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


def prunable_limit(rows):
    """(limit, end) for the x axis of the prune curves. limit: the largest fraction of heads (units)
    the files' strategies can prune; the round-based ones stop at (heads - layers) / heads, since
    every layer (block) keeps one (src/prune/prune_loop.cpp), while L0 alone may close every gate
    (1), and whole layers (blocks) may all go (1). end: where the axis ends, the larger of limit
    and the largest fraction any row reached."""
    heads = rows[0]["n_pruned"] + rows[0]["n_kept"]
    rounds = any(r["strategy"] != "l0" for r in rows) and not UNIT_WORDS[rows[0]["unit"]].get("whole")
    limit = (heads - len(rows[0]["per_table"])) / heads if rounds else 1.0
    return limit, max([limit] + [r["fraction_pruned"] for r in rows])


def plot_prune_curves(series, out_dir, title_prefix, subtitle, n_files, written):
    """prune_<metric>.png (prune_ffn_<metric>.png): the metric against the fraction of heads (FFN
    units) pruned, one curve per strategy."""
    all_rows = [r for files in series.values() for rows in files for r in rows]
    w = UNIT_WORDS[all_rows[0]["unit"]]
    # what the x axis counts: the heads (units), or the tables for whole ones
    first = all_rows[0]
    total_heads = len(first["per_table"]) if w.get("whole") else first["n_pruned"] + first["n_kept"]
    for metric in PRUNE_METRICS:
        if not any(r[metric] is not None for r in all_rows):
            continue
        fig, ax = plt.subplots(figsize=(9.5, 5))
        baseline = [r[metric] for r in all_rows if r["round"] == 0 and r[metric] is not None]
        if baseline:
            ax.axhline(sum(baseline) / len(baseline), color="black", linestyle=":", linewidth=1,
                       label="unpruned model")
        for key, files in series.items():
            strategy, finetune_steps, recompute, recover = key
            color = PRUNE_STRATEGIES[strategy][1]
            style = ("-." if recover == "distill" else "--") if finetune_steps else "-"
            if strategy == "none":  # the control prunes nothing: its metric after its last round of fine-tuning
                ends = [rows[-1] for rows in files if rows[-1][metric] is not None]
                if ends:
                    rounds = min(rows[-1]["round"] for rows in files)
                    ax.axhline(sum(r[metric] for r in ends) / len(ends), color=color, linestyle="--", linewidth=1,
                               label=f"{series_label(key, files)}, after {plural(rounds, 'round')}")
                continue
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
        limit, end = prunable_limit(all_rows)
        ax.set_xlim(-0.02, end + 0.02)
        ax.set_xlabel(f"fraction of {w['what']} pruned (at most {limit:.3g}: every {w['table']} keeps one "
                      f"{w['one']})" if end == limit < 1 else f"fraction of {w['what']} pruned")
        ax.set_ylabel(metric_label(metric))
        top = ax.secondary_xaxis("top", functions=(lambda f: f * total_heads, lambda n: n / total_heads))
        top.set_xlabel(f"{w['what']} pruned (of {total_heads})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  title="solid: no fine-tuning, dashed: fine-tuned, dash-dot: distilled\n"
                        "filled: re-scored, hollow: scored once",
                  title_fontsize=7)
        figure_title(ax, f"{title_prefix}{METRICS[metric][0]} as {w['what']} are pruned "
                         f"({plural(n_files, 'prune.csv file')}){subtitle}", fontsize=10)
        save(fig, os.path.join(out_dir, f"{w['prefix']}{metric}"), written)


def plot_prune_heads_per_layer(series, out_dir, title_prefix, subtitle, written):
    """prune_heads_per_layer.png: per strategy, a layer x round grid of the heads left (l0: x lambda);
    prune_ffn_units_per_block.png the same of FFN units. The control (none) keeps every head: it
    has no grid."""
    keys = [key for key in series if key[0] != "none"]
    if not keys:
        return
    w = UNIT_WORDS[series[keys[0]][0][0]["unit"]]
    n_cols = min(3, len(keys))
    n_rows = math.ceil(len(keys) / n_cols)
    n_layers = max(len(r["per_table"]) for files in series.values() for rows in files for r in rows)
    most = max(max(r["per_table"]) for files in series.values() for rows in files for r in rows)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(5.2 * n_cols, 0.5 * n_layers * n_rows + 1.3 * n_rows + 1),
                             squeeze=False, constrained_layout=True)
    for i, key in enumerate(keys):
        ax = axes[i // n_cols][i % n_cols]
        files = series[key]
        if key[0] == "l0":
            ends = sorted((rows[-1] for rows in files), key=lambda r: r["lambda"] or 0.0)
            columns = [r["per_table"] for r in ends]
            x_labels = [f"\u03bb={r['lambda']:g}\n{100 * r['fraction_pruned']:.0f}%" for r in ends]
            ax.set_xlabel(f"gate penalty lambda / % of {w['what']} pruned")
        else:
            columns = []
            for layer in range(n_layers):
                columns.append(by_round(files, lambda r: r["per_table"][layer]))
            x_labels = [f"{n}\n{100 * p[0]:.0f}%" for n, p in enumerate(columns[0])]
            columns = [[columns[layer][n][1] for layer in range(n_layers)] for n in range(len(columns[0]))]
            ax.set_xlabel(f"pruning round / % of {w['what']} pruned")
        values = [[column[layer] for column in columns] for layer in range(n_layers)]
        image = heatmap(ax, values, cmap="Blues", vmin=0, vmax=most, annotate=True, fmt="{:.2g}")
        cell_ticks(ax, x_labels, [str(l) for l in range(n_layers)])
        ax.tick_params(axis="x", labelsize=7)
        ax.set_ylabel(w["table"])
        label = series_label(key, files, band=False).replace(" (mean", "\n(mean")
        ax.set_title(label, fontsize=8)
    for j in range(len(keys), n_rows * n_cols):
        axes[j // n_cols][j % n_cols].set_visible(False)
    fig.colorbar(image, ax=axes.ravel().tolist(), label=f"{w['what']} left in the {w['table']}", shrink=0.8)
    figure_title(fig, f"{title_prefix}{w['what']} left per {w['table']} as pruning proceeds, by strategy{subtitle}",
                 fontsize=10)
    save(fig, os.path.join(out_dir, w["grid"]), written)


def plot_prune(folder, out_dir, title_prefix, written):
    paths = find_prune_files(folder)
    if not paths:
        return
    context = describe_config(read_config(folder))
    subtitle = f"\n{context}" if context else ""
    all_files = [read_prune(p) for p in paths]
    for unit in UNIT_WORDS:
        files = [rows for rows in all_files if rows[0]["unit"] == unit]
        if not files:
            continue
        shapes = {(len(r["per_table"]), r["n_kept"] + r["n_pruned"]) for rows in files for r in rows}
        if len(shapes) > 1:
            fail(f"{folder}: its prune.csv files of {UNIT_WORDS[unit]['what']} are of different models "
                 f"({UNIT_WORDS[unit]['table']}s, {UNIT_WORDS[unit]['what']}): {sorted(shapes)}")
        series = prune_series(files)
        plot_prune_curves(series, out_dir, title_prefix, subtitle, len(files), written)
        plot_prune_heads_per_layer(series, out_dir, title_prefix, subtitle, written)
