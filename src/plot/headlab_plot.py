#!/usr/bin/env python3
"""headlab plot: PNG figures of a run folder or a sweep folder, written to PATH/plots/.

Usually run by `headlab plot PATH` (which first rewrites a sweep's results.csv); it can also be
run by hand: python3 src/plot/headlab_plot.py PATH [--x tokens|step]. docs/sweeps.md lists the
figures. Inputs, all written by headlab:
  run folder:   metrics.csv (step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,...),
                config.toml (optional, for titles), heads.csv (optional: layer,head,<metrics>)
  sweep folder: grid.csv (run,<grid keys>,params,steps), results.csv, and the run folders
Each figure is drawn by one function below; a new figure is a new function plus one call in
plot_run or plot_sweep. Bad input prints one line on stderr and exits with code 2.
"""
import argparse
import csv
import math
import os
import sys


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(2)


try:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
except ImportError:
    fail(f"matplotlib is not installed for {sys.executable}: apt-get install python3-matplotlib")

try:
    import tomllib  # Python 3.11+ (Debian 12); titles only, so it is optional
except ImportError:
    tomllib = None

SEED_KEYS = ("train.seed", "data.seed")

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


def save(fig, path, written):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    written.append(path)


# ----------------------------------------------------------------------------------------------
# Per-head heatmaps (heads.csv: layer,head,<one column per metric>), for the analysis commands.


def plot_heads(run_dir, out_dir, title_prefix, written):
    path = os.path.join(run_dir, "heads.csv")
    if not os.path.exists(path):
        return
    rows = read_csv(path)
    if not rows or "layer" not in rows[0] or "head" not in rows[0]:
        fail(f"{path}: expected a header layer,head,<metric columns> and at least one row")
    layers = sorted({int(r["layer"]) for r in rows})
    heads = sorted({int(r["head"]) for r in rows})
    for column in [c for c in rows[0] if c not in ("layer", "head")]:
        values = [[math.nan] * len(heads) for _ in layers]
        numeric = False
        for r in rows:
            v = number(r[column])
            if v is not None:
                values[layers.index(int(r["layer"]))][heads.index(int(r["head"]))] = v
                numeric = True
        if not numeric:
            continue
        fig, ax = plt.subplots(figsize=(1.2 + 0.55 * len(heads), 1.4 + 0.5 * len(layers)))
        image = ax.imshow(values, cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax, label=column.replace("_", " "))
        ax.set_xticks(range(len(heads)), [str(h) for h in heads])
        ax.set_yticks(range(len(layers)), [str(l) for l in layers])
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        if len(heads) * len(layers) <= 64:
            finite = [v for row in values for v in row if not math.isnan(v)]
            middle = (min(finite) + max(finite)) / 2
            for li, row in enumerate(values):
                for hi, v in enumerate(row):
                    if not math.isnan(v):
                        ax.text(hi, li, f"{v:.3g}", ha="center", va="center", fontsize=7,
                                color="white" if v < middle else "black")
        ax.set_title(f"{title_prefix}{column.replace('_', ' ')} per head")
        save(fig, os.path.join(out_dir, f"heads_{column}.png"), written)


# ----------------------------------------------------------------------------------------------
# A run folder.


def plot_run(run_dir, x_axis):
    metrics_path = os.path.join(run_dir, "metrics.csv")
    m = read_metrics(metrics_path)
    if not m.get("step"):
        fail(f"{metrics_path} has no rows yet: nothing to plot")
    name = os.path.basename(os.path.normpath(run_dir))
    context = describe_config(read_config(run_dir))
    subtitle = f"\n{context}" if context else ""
    out = os.path.join(run_dir, "plots")
    written = []

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs, ys = points(m[x_axis], m["train_loss"])
    ax.plot(xs, ys, color="tab:blue", label="training (mean over the logging window)")
    if has_values(m, "val_loss"):
        xs, ys = points(m[x_axis], m["val_loss"])
        ax.plot(xs, ys, color="tab:orange", marker="o", markersize=3, label="validation")
    ax.set_xlabel(X_AXES[x_axis])
    ax.set_ylabel("cross-entropy loss (nats/token)")
    ax.set_title(f"Loss of run {name}{subtitle}")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, os.path.join(out, "loss.png"), written)

    for metric in ("val_accuracy", "val_bpb"):
        if not has_values(m, metric):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.2))
        xs, ys = points(m[x_axis], m[metric])
        ax.plot(xs, ys, color="tab:orange", marker="o", markersize=3)
        ax.set_xlabel(X_AXES[x_axis])
        ax.set_ylabel(metric_label(metric))
        ax.set_title(f"{METRICS[metric][0].capitalize()} of run {name}{subtitle}")
        ax.grid(alpha=0.3)
        save(fig, os.path.join(out, f"{metric}.png"), written)

    plot_heads(run_dir, out, f"Run {name}: ", written)
    return written


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
        fig.suptitle(f"{what} of every run in sweep {sweep.name}{by}{sweep.subtitle()}", fontsize=10)
        fig.tight_layout()
        save(fig, os.path.join(sweep.dir, "plots", f"{file_name}.png"), written)


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
        fig.suptitle(f"Final {METRICS[metric][0]}{against}, sweep {sweep.name} ({spread}){sweep.subtitle()}",
                     fontsize=10)
        fig.tight_layout()
        save(fig, os.path.join(sweep.dir, "plots", f"final_{metric}.png"), written)


def plot_sweep(sweep_dir, x_axis):
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
        plot_heads(run_dir, os.path.join(sweep_dir, "plots", row["run"]), f"{row['run']}: ", written)
    return written


def main():
    parser = argparse.ArgumentParser(description="PNG figures of a headlab run or sweep folder, into PATH/plots/.")
    parser.add_argument("path", help="run folder (metrics.csv) or sweep folder (grid.csv)")
    parser.add_argument("--x", choices=sorted(X_AXES), default="tokens", help="x axis of the curves")
    args = parser.parse_args()
    if not os.path.isdir(args.path):
        fail(f"no such folder: {args.path}")
    if os.path.exists(os.path.join(args.path, "grid.csv")):
        written = plot_sweep(args.path, args.x)
    elif os.path.exists(os.path.join(args.path, "metrics.csv")):
        written = plot_run(args.path, args.x)
    else:
        fail(f"{args.path} holds neither metrics.csv (a run folder) nor grid.csv (a sweep folder)")
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
