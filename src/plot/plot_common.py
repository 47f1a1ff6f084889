"""headlab plot's shared pieces: reading headlab's CSV files by column name, labels with units,
titles, saving figures, and the one heatmap helper. Imported by the plot_* modules. What the
experiments' make_results.py scripts use as well (CSV by column name, matplotlib setup, saving a
figure) is in plot_shared.py."""
import os
import sys

from plot_shared import pyplot, read_csv, save_figure  # read_csv: for the plot_* modules too


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(2)


try:
    plt = pyplot()
    import numpy as np  # a dependency of matplotlib
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
    "val_bleu": ("validation BLEU", "BLEU"),  # metrics.csv: greedy; prune.csv: the prune run's --beam
    "val_chrf": ("validation chrF", "chrF"),
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


def plural(n, word, words=None):
    """'1 seed', '2 seeds': the count and the word, plural unless the count is 1 (`words` for a
    plural other than word + 's')."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def key_label(key):
    return f"{KEY_NAMES[key]} ({key})" if key in KEY_NAMES else key


def metric_label(name):
    what, unit = METRICS.get(name, (name.replace("_", " "), ""))
    return f"{what} ({unit})" if unit else what


def number(text):
    """The float in a CSV cell; None where it is empty, absent or not a number (headlab plot draws
    what it can: the experiments' number() in experiments/common.py is strict instead)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_metrics(path):
    """Columns of a metrics.csv as lists of floats (None where a row has no value)."""
    rows = read_csv(path)
    if rows.columns is not None and "step" not in rows.columns:
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
        heads = plural(model["n_heads"], "head")
        d_head = model.get("d_head") or (model["d_model"] // model["n_heads"] if "d_model" in model else 0)
        if d_head:
            heads += f" x d_head {d_head}"
        if model.get("n_kv_heads"):
            heads += f" ({plural(model['n_kv_heads'], 'kv head')})"
        parts.append(heads)
    if "n_layers" in model and "model.n_layers" not in swept:
        parts.append(plural(model["n_layers"], "layer"))
    if "task" in data and "data.task" not in swept:
        rest.append(f"task {data['task']}")
    if "steps" in train and "train.steps" not in swept:
        rest.append(plural(train["steps"], "step"))
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
    save_figure(fig, path, FIGURES["dpi"], bbox_inches="tight")
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
    "alignment_aer": "alignment error rate against the Strong's gold (cross heads)",
    "alignment_precision": "alignment precision against the Strong's gold (cross heads)",
    "alignment_recall": "alignment recall against the Strong's gold (cross heads)",
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



def unique(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen
