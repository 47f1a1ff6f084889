"""Figures of headlab circuits' files in a run folder: detectors.csv (the head detector scores of
the run's checkpoints) as curves against the step, under the run's validation curve, so that a
phase change (the induction heads' forming) shows beside the loss it comes with; the patching
heatmaps (patching_heads.csv, patching_resid.csv) and path patching as a sender x receiver grid;
composition.csv (the last checkpoint) as a sender x receiver grid per kind."""
import os

from plot_common import (METRICS, cell_ticks, figure_title, has_values, heatmap, number, plt, points, read_csv,
                         read_metrics, save)

DETECTORS = {  # detectors.csv column -> panel label (docs/circuits.md defines each)
    "previous_token": "previous token",
    "duplicate_token": "duplicate token",
    "induction": "induction (TL)",
    "prefix_matching": "prefix matching",
}
NAMED_HEADS = 4  # heads drawn in colour per panel (the highest at the last step); the rest in grey


def plot_detectors(run_dir, out_dir, title_prefix, written):
    path = os.path.join(run_dir, "detectors.csv")
    if not os.path.exists(path):
        return
    scores = {}  # head label -> detector -> [(step, score)]
    for row in read_csv(path):
        for name in DETECTORS:
            scores.setdefault(row["label"], {}).setdefault(name, []).append((int(row["step"]), number(row[name])))
    metrics_path = os.path.join(run_dir, "metrics.csv")
    m = read_metrics(metrics_path) if os.path.exists(metrics_path) else {}
    curves = [k for k in ("val_loss", "val_accuracy") if has_values(m, k)]

    fig, axes = plt.subplots(len(curves) + len(DETECTORS), 1, figsize=(7, 2.0 * (len(curves) + len(DETECTORS))),
                             sharex=True)
    for ax, metric in zip(axes, curves):
        xs, ys = points(m["step"], m[metric])
        ax.plot(xs, ys, color="black", marker="o", markersize=2)
        ax.set_ylabel(METRICS[metric][0])
        ax.grid(alpha=0.3)
    for ax, (name, label) in zip(axes[len(curves):], DETECTORS.items()):
        last = {head: s[name][-1][1] for head, s in scores.items()}
        named = sorted(last, key=lambda h: -(last[h] if last[h] is not None else -1))[:NAMED_HEADS]
        for head, s in scores.items():
            xs, ys = points(*zip(*s[name]))
            if head in named:
                ax.plot(xs, ys, marker="o", markersize=2, label=head)
            else:
                ax.plot(xs, ys, color="0.75", linewidth=0.8)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", ncol=2)
    axes[-1].set_xlabel("optimizer steps (checkpoint)")
    fig.subplots_adjust(top=0.92)
    figure_title(fig, f"{title_prefix}head detector scores along training (headlab circuits --detectors);\n"
                      f"the {NAMED_HEADS} highest at the last checkpoint in colour, other heads grey")
    save(fig, os.path.join(out_dir, "detectors"), written)


def plot_circuits(run_dir, out_dir, title_prefix, written):
    plot_detectors(run_dir, out_dir, title_prefix, written)
    plot_patching(run_dir, out_dir, title_prefix, written)
    plot_pairs(run_dir, out_dir, title_prefix, written, "path_patching.csv", ["q_restored", "k_restored", "v_restored"],
               "path patching: fraction of the clean metric restored through the receiver's q, k, v", True)
    plot_pairs(run_dir, out_dir, title_prefix, written, "composition.csv", ["q", "k", "v"],
               "Q-, K- and V-composition scores (weights, last checkpoint)", False)


def site_of(row, key, kinds):
    """A row's grid row: its layer, or in an encoder_decoder its kind (or stack) and layer."""
    return f"{row[key]}.L{row['layer']}" if len(kinds) > 1 else f"L{row['layer']}"


def site_head_grid(rows, column):
    """A per-head CSV as an attention layers x heads grid (NaN where a layer has fewer), with the
    rows' labels in file order (an encoder_decoder's: enc.L0, ..., dec.L0, cross.L0, ...)."""
    kinds = {r.get("attention", "dec") for r in rows}
    cells = {}
    for r in rows:
        cells.setdefault(site_of(r, "attention", kinds), {})[int(r["head"])] = number(r[column])
    heads = 1 + max(h for layer in cells.values() for h in layer)
    return [[layer.get(h, float("nan")) for h in range(heads)] for layer in cells.values()], heads, list(cells)


def plot_patching(run_dir, out_dir, title_prefix, written):
    heads_path, resid_path = (os.path.join(run_dir, f) for f in ("patching_heads.csv", "patching_resid.csv"))
    if not os.path.exists(heads_path) or not os.path.exists(resid_path):
        return
    heads = read_csv(heads_path)
    resid = read_csv(resid_path)
    columns = ["head_out_restored", "q_restored", "k_restored", "v_restored"]
    grids = [site_head_grid(heads, column) for column in columns]
    stacks = {r.get("stack", "dec") for r in resid}
    blocks = list(dict.fromkeys(site_of(r, "stack", stacks) for r in resid))
    positions = 1 + max(int(r["position"]) for r in resid)
    resid_grid = [[float("nan")] * positions for _ in blocks]
    for r in resid:
        resid_grid[blocks.index(site_of(r, "stack", stacks))][int(r["position"])] = number(r["restored"])
    # One colour scale for every panel, symmetric around 0 (white: the patch changes nothing).
    values = [v for g, _, _ in grids for row in g for v in row] + [v for row in resid_grid for v in row]
    limit = max([abs(v) for v in values if v == v] + [1e-12])
    scale = dict(cmap="RdBu_r", vmin=-limit, vmax=limit)
    fig, axes = plt.subplots(1, len(columns) + 1, figsize=(4 + 3 * len(columns), 4.2),
                             gridspec_kw={"width_ratios": [1] * len(columns) + [2]})
    for ax, column, (grid, n_heads, sites) in zip(axes, columns, grids):
        heatmap(ax, grid, annotate=len(grid) * n_heads <= 64, fmt="{:.2f}", **scale)
        cell_ticks(ax, [str(h) for h in range(n_heads)], sites)
        ax.set_title(column.replace("_restored", "").replace("head_out", "head output"), fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
    image = heatmap(axes[-1], resid_grid, **scale)
    axes[-1].set_title("residual stream entering the block", fontsize=9)
    axes[-1].set_xlabel("position")
    axes[-1].set_ylabel("block")
    axes[-1].set_yticks(range(len(blocks)), blocks)
    fig.colorbar(image, ax=axes[-1], label="fraction of the clean metric restored")
    figure_title(fig, f"{title_prefix}activation patching, clean into corrupted (headlab circuits --patch):\n"
                      "(patched - corrupted) / (clean - corrupted); 1 = the clean run's metric fully back")
    fig.subplots_adjust(top=0.78)
    save(fig, os.path.join(out_dir, "patching"), written)


def plot_pairs(run_dir, out_dir, title_prefix, written, name, columns, what, centred):
    path = os.path.join(run_dir, name)
    if not os.path.exists(path):
        return
    rows = read_csv(path)
    if "step" in (rows.columns or []):  # composition.csv: the last checkpoint
        last = max(int(r["step"]) for r in rows)
        rows = [r for r in rows if int(r["step"]) == last]
    if not rows:
        return
    senders = list(dict.fromkeys(r["sender"] for r in rows))
    receivers = list(dict.fromkeys(r["receiver"] for r in rows))
    fig, axes = plt.subplots(1, len(columns), figsize=(1.5 + 0.35 * len(receivers) * len(columns) + 2,
                                                        1.5 + 0.3 * len(senders)), squeeze=False)
    grids = []
    for column in columns:
        grid = [[float("nan")] * len(receivers) for _ in senders]
        for r in rows:
            v = number(r[column])  # empty: the composition does not apply (an encoder_decoder's pairs)
            grid[senders.index(r["sender"])][receivers.index(r["receiver"])] = float("nan") if v is None else v
        grids.append(grid)
    values = [abs(v) for g in grids for row in g for v in row if v == v]
    limit = max(values + [1e-12])
    scale = dict(cmap="RdBu_r", vmin=-limit, vmax=limit) if centred else dict(vmin=0, vmax=limit)
    for ax, column, grid in zip(axes[0], columns, grids):
        image = heatmap(ax, grid, annotate=len(senders) * len(receivers) <= 64, fmt="{:.2f}", **scale)
        cell_ticks(ax, receivers, senders, rotate_x=True)
        ax.set_title(column.split("_")[0], fontsize=9)
        ax.set_xlabel("receiver")
        ax.set_ylabel("sender")
    fig.colorbar(image, ax=axes[0][-1])
    figure_title(fig, f"{title_prefix}{what}")
    fig.subplots_adjust(top=0.8)
    save(fig, os.path.join(out_dir, os.path.splitext(name)[0]), written)
