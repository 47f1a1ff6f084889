"""Figures of a sweep folder: curves per grid point, final metrics against the swept keys."""
import os

from matplotlib.lines import Line2D

from plot_common import (
    LINE_STYLES, METRICS, SEED_KEYS, X_AXES, describe_config, fail, figure_title, has_values, key_label,
    metric_label, number, plural, plt, points, read_config, read_csv, read_metrics, save, unique
)
from plot_run import plot_analysis

# ----------------------------------------------------------------------------------------------
# A sweep folder.

GRID_COLUMNS = ("run", "params", "steps")  # grid.csv: run,<grid keys>,params,steps


def sweep_name(sweep_dir):
    """The sweep file's name (its `name`, else its stem), which headlab sweep records in
    DIR/sweep_name.txt; the folder's name for a folder without one (src/sweep/aggregate.cpp reads
    it the same way for summary.md)."""
    try:
        with open(os.path.join(sweep_dir, "sweep_name.txt"), encoding="utf-8", errors="replace") as f:
            name = f.readline().strip()
    except OSError:
        name = ""
    return name or os.path.basename(os.path.normpath(sweep_dir))


class Sweep:
    """grid.csv and results.csv, plus which key plays which part in the figures:
    panel_key  data.task when it is swept: one panel per task (losses differ in scale per task)
    color_key  the swept key the curves are coloured by and the final metrics are plotted against
               (model.n_heads when swept, else the first numeric swept key, else the first)
    style_keys the other swept non-seed keys: line styles, one series each
    Seed keys are never drawn as separate series: seeds of one point share a colour."""

    def __init__(self, sweep_dir):
        self.dir = sweep_dir
        self.name = sweep_name(sweep_dir)
        grid_path = os.path.join(sweep_dir, "grid.csv")
        self.runs = read_csv(grid_path, required=GRID_COLUMNS)
        if not self.runs:
            fail(f"{grid_path} lists no runs")
        self.keys = [k for k in self.runs.columns if k not in GRID_COLUMNS]
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

    def seeds(self):
        """'2 seeds (train.seed)', '6 seeds (2 train.seed x 3 data.seed)'; '' without a seed key."""
        counts = [(len(self.values[k]), k) for k in self.seed_keys]
        if not counts:
            return ""
        if len(counts) == 1:
            return f"{plural(counts[0][0], 'seed')} ({counts[0][1]})"
        total = 1
        for n, _ in counts:
            total *= n
        return f"{plural(total, 'seed')} ({' x '.join(f'{n} {k}' for n, k in counts)})"

    def subtitle(self):
        fixed = ", ".join(f"{k}={v}" for k, v in self.fixed.items() if k not in SEED_KEYS)
        parts = [p for p in (self.context, fixed, self.seeds()) if p]
        return "\n" + "; ".join(parts) if parts else ""


def seed_spread(n_seeds):
    """What a final-metric point is, from results.csv's n_seeds per point: 'mean ± sample std over
    2 seeds', 'over 1-3 seeds' where points differ (unfinished runs), or one seed and no bars."""
    finished = [n for n in n_seeds if n > 0] or [0]
    lo, hi = min(finished), max(finished)
    if hi <= 1:
        return "one seed per point, no error bars"
    return f"mean ± sample std over {plural(hi, 'seed') if lo == hi else f'{lo}-{hi} seeds'}"


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
    spread = seed_spread([int(r["n_seeds"]) for r in sweep.results])
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
