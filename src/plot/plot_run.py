"""Figures of one run folder: training curves, then whatever analysis and prune files it holds."""
import os

from plot_common import (
    METRICS, X_AXES, describe_config, fail, figure_title, has_values, metric_label, plt, points,
    read_config, read_metrics, save
)
from plot_circuits import plot_circuits
from plot_heads import plot_attention_examples, plot_head_similarity, plot_heads, plot_units
from plot_prune import plot_prune

def plot_analysis(run_dir, out_dir, title_prefix, chosen_heads, written):
    """Every figure of headlab analyze's and headlab prune's files in a run folder; returns the
    number of attention examples found (for --heads)."""
    plot_heads(run_dir, out_dir, title_prefix, written)
    plot_units(run_dir, out_dir, title_prefix, written)
    plot_head_similarity(run_dir, out_dir, title_prefix, written)
    examples = plot_attention_examples(run_dir, out_dir, title_prefix, chosen_heads, written)
    plot_prune(run_dir, out_dir, title_prefix, written)
    plot_circuits(run_dir, out_dir, title_prefix, written)
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
             "nor heads.csv, attention_example_<I>.csv, prune.csv or headlab circuits files")
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

    for metric in ("val_accuracy", "val_bpb", "val_bleu"):
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
