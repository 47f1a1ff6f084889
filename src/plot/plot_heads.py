"""Figures of headlab analyze's files in a run folder: heads.csv, heads_similarity.csv and the
attention examples."""
import math
import os
import re
import textwrap

from plot_common import (
    HEAD_COLUMNS, NOTES, Rectangle, cell_ticks, fail, figure_title, heatmap, np, number, plural, plt, read_csv, save
)

# ----------------------------------------------------------------------------------------------
# headlab analyze's files in a run folder: heads.csv, heads_similarity.csv, attention_example_I.csv,
# units.csv.


def plot_units(run_dir, out_dir, title_prefix, written):
    """units.png: one panel per score of units.csv (headlab analyze --ffn): every FFN unit's score
    as a dot at its MLP block, the block's median as a bar, so blocks compare at a glance."""
    path = os.path.join(run_dir, "units.csv")
    if not os.path.exists(path):
        return
    rows = read_csv(path, required=("block", "label", "unit"))
    if not rows:
        fail(f"{path}: no rows")
    blocks = sorted({int(r["block"]) for r in rows})
    labels = {int(r["block"]): r["label"] for r in rows}
    scores = [c for c in ("importance_normalized", "importance", "magnitude", "integrated_gradients") if c in rows[0]]
    fig, axes = plt.subplots(1, len(scores), figsize=(3.2 * len(scores) + 1, 3.6), squeeze=False)
    rng = np.random.default_rng(0)  # the dots' horizontal jitter only
    for ax, column in zip(axes[0], scores):
        for i, b in enumerate(blocks):
            ys = [number(r[column]) for r in rows if int(r["block"]) == b and number(r["gate"]) != 0]
            ys = [y for y in ys if y is not None]
            if not ys:
                continue
            ax.scatter(i + rng.uniform(-0.25, 0.25, len(ys)), ys, s=5, alpha=0.5, color="tab:blue", linewidth=0)
            ax.hlines(float(np.median(ys)), i - 0.35, i + 0.35, color="black", linewidth=1.5)
        ax.set_xticks(range(len(blocks)), [labels[b] for b in blocks], rotation=45 if len(blocks) > 6 else 0)
        ax.set_xlabel("MLP block")
        ax.set_title(column.replace("_", " "), fontsize=9)
        if column == "integrated_gradients":
            ax.axhline(0, color="grey", linewidth=0.8)
        ax.grid(alpha=0.3, axis="y")
    figure_title(fig, f"{title_prefix}FFN units' scores per MLP block ({len(rows)} units; bar = the block's "
                      f"median, units gated off left out)", fontsize=10)
    save(fig, os.path.join(out_dir, "units"), written)


def plot_heads(run_dir, out_dir, title_prefix, written):
    """heads_<column>.png: a layer x head heatmap per column of heads.csv that varies."""
    path = os.path.join(run_dir, "heads.csv")
    if not os.path.exists(path):
        return
    rows = read_csv(path)
    if not rows or "layer" not in rows[0] or "head" not in rows[0]:
        fail(f"{path}: expected a header layer,head,<metric columns> and at least one row")
    # A row per attention site: the layers, or an encoder_decoder's grouped by kind (enc, dec, cross).
    kind_order = ["enc", "dec", "cross"]
    site_of = lambda r: (r.get("attention") or "dec", int(r["layer"]))
    sites = sorted({site_of(r) for r in rows}, key=lambda s: (kind_order.index(s[0]) if s[0] in kind_order else 3, s[1]))
    by_kind = len({s[0] for s in sites}) > 1
    layers = [f"{k}.L{l}" if by_kind else str(l) for k, l in sites]
    heads = sorted({int(r["head"]) for r in rows})
    skipped = []
    # Not per-head measures: the names (role: a word per head) and the rows counted (a data property).
    names = ("layer", "head", "role", "attention", "label")
    for column in [c for c in rows[0] if c not in names and not c.endswith("_rows")]:
        values = [[math.nan] * len(heads) for _ in layers]
        for r in rows:
            v = number(r[column])
            if v is not None:
                values[sites.index(site_of(r))][heads.index(int(r["head"]))] = v
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
        cell_ticks(ax, [str(h) for h in heads], layers)
        ax.set_xlabel("head")
        ax.set_ylabel("attention site" if by_kind else "layer")
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
    label = r"(?:(?:enc|dec|cross)\.)?L\d+H\d+"  # heads.csv's label: L0H1, or cross.L0H1 in an encoder_decoder
    if not rows or list(rows[0].keys())[1:] != labels or not all(re.fullmatch(label, l or "") for l in labels):
        fail(f"{path}: expected a header head,L0H0,L0H1,... and one row per head in the same order")
    values = [[number(r[l]) if number(r[l]) is not None else math.nan for l in labels] for r in rows]
    ticks = [re.sub(r"^L(\d+)H(\d+)$", r"\1:\2", l) for l in labels]  # labels with a kind stay whole
    n = len(labels)
    size = min(max(5.0, 3 + 0.45 * n), 16)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = heatmap(ax, values, vmin=0.0, vmax=1.0, annotate=n <= 16, fmt="{:.2f}")
    fig.colorbar(image, ax=ax, label="Jensen-Shannon distance\n(0 = same attention, 1 = disjoint)")
    cell_ticks(ax, ticks, ticks, rotate_x=True)
    site = [l[:l.rindex("H")] for l in labels]  # "L0", or "cross.L0"
    for boundary in [i for i in range(1, n) if site[i] != site[i - 1]]:  # lines between layers (sites)
        ax.axhline(boundary - 0.5, color="white", linewidth=1.5)
        ax.axvline(boundary - 0.5, color="white", linewidth=1.5)
    axis = "head" if "." in labels[0] else "head (layer:head)"
    ax.set_xlabel(axis)
    ax.set_ylabel(axis)
    figure_title(ax, f"{title_prefix}how differently pairs of heads attend\n" + textwrap.fill(
        "(JS distance of their attention rows, averaged over query rows; dark = redundant pair)", int(11 * size)),
                 fontsize=10)
    save(fig, os.path.join(out_dir, "heads_similarity"), written)


def read_attention_example(path, n_queries=None):
    """{(layer, head): Tq x Tk rows} from attention_example_I.csv (layer,head,query,k0..k{Tk-1});
    Tq = Tk unless given (an encoder_decoder's _cross.csv: target queries, source keys)."""
    rows = read_csv(path)
    columns = rows.columns or []
    keys = [c for c in columns if c not in ("layer", "head", "query")]
    if len(keys) + 3 != len(columns) or not keys or keys != [f"k{s}" for s in range(len(keys))]:
        fail(f"{path}: expected the columns layer,head,query,k0,...,k<T-1> (headlab analyze --dump-example)")
    maps = {}
    for line, r in enumerate(rows, start=2):
        values = [number(r[c]) for c in columns]
        if None in r or any(v is None for v in values):
            fail(f"{path}: line {line} does not have {len(columns)} numbers")
        maps.setdefault((int(number(r["layer"])), int(number(r["head"]))), []).append([number(r[k]) for k in keys])
    n_queries = len(keys) if n_queries is None else n_queries
    if not maps or any(len(queries) != n_queries for queries in maps.values()):
        fail(f"{path}: expected {n_queries} query rows for every (layer, head)")
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


def read_gold_alignment(path, n_queries, n_keys):
    """The (target row, source token) cells of attention_example_I_gold_alignment.csv (a Bible
    verse's gold word alignment on its tokens), or None when the dump has none."""
    if not os.path.exists(path):
        return None
    cells = set()
    for line, r in enumerate(read_csv(path), start=2):
        t, s = number(r.get("target_position")), number(r.get("source_position"))
        if t is None or s is None or not (0 <= t < n_queries and 0 <= s < n_keys):
            fail(f"{path}: line {line} is not a cell (target_position,source_position) of the "
                 f"{n_queries} x {n_keys} cross-attention")
        cells.add((int(t), int(s)))
    return cells


def layer_means(maps):
    """{(layer, "mean"): the mean of the layer's heads' maps, cell by cell}."""
    means = {}
    for layer in sorted({l for l, _ in maps}):
        heads = [m for (l, _), m in sorted(maps.items()) if l == layer]
        means[(layer, "mean")] = np.mean(np.array(heads, dtype=float), axis=0).tolist()
    return means


def token_ticks(keep, text, most):
    """Ticks for an attention map over the positions `keep`: (tick indices, labels, k). Every
    position's token when there are at most `most`, else every k-th position (k = ceil(n / most))
    labelled "position token", so a long sequence still shows which token sits where."""
    k = max(1, math.ceil(len(keep) / most))
    ticks = list(range(0, len(keep), k))
    if k == 1:
        return ticks, [text[t] for t in keep], k
    return ticks, [f"{keep[i]} {text[keep[i]]}" for i in ticks], k


# An encoder_decoder's dump adds these beside attention_example_I.csv (its decoder's):
# (file suffix, query tokens, key tokens, what the figure calls the map).
GOLD_COLOUR, GOLD_COLOUR_NAME = "#00e5ff", "cyan"  # stands out on magma's black to yellow
EXAMPLE_KINDS = [("", "_tokens", "_tokens", "attention"),
                 ("_encoder", "_source_tokens", "_source_tokens", "encoder self-attention"),
                 ("_cross", "_tokens", "_source_tokens", "cross-attention (target queries, source keys)")]


def plot_attention_examples(run_dir, out_dir, title_prefix, chosen, written):
    """attention_example_I.png: per dumped example, every head's (or the chosen heads') attention map;
    attention_example_I_encoder.png and _cross.png for an encoder_decoder's other two kinds, the
    cross maps with each layer's mean over its heads and the verse's gold alignment when dumped."""
    # Dataset examples in index order, then the --prompt one.
    found = sorted(((not m.group(1).isdigit(), int(m.group(1)) if m.group(1).isdigit() else 0), m.group(1), name)
                   for name in os.listdir(run_dir) if (m := re.fullmatch(r"attention_example_(\d+|prompt)\.csv", name)))
    for _, example, _ in found:
        stem = os.path.join(run_dir, f"attention_example_{example}")
        n_targets = None
        for suffix, query_tokens, key_tokens, what in EXAMPLE_KINDS:
            if not os.path.exists(stem + suffix + ".csv"):
                continue
            maps = read_attention_example(stem + suffix + ".csv", n_targets if suffix == "_cross" else None)
            if suffix == "":
                n_targets = len(next(iter(maps.values())))
            gold = None
            if suffix == "_cross":
                first = next(iter(maps.values()))
                gold = read_gold_alignment(stem + "_gold_alignment.csv", len(first), len(first[0]))
            plot_attention_maps(maps, stem + suffix + ".csv", stem + query_tokens + ".csv", stem + key_tokens + ".csv",
                                os.path.join(out_dir, f"attention_example_{example}{suffix}"), example, what,
                                title_prefix, chosen, written, means=suffix == "_cross", gold=gold)
    return len(found)


def plot_attention_maps(maps, path, query_tokens, key_tokens, out, example, what, title_prefix, chosen, written,
                        means=False, gold=None):
    """One figure of one kind of an example's maps: a panel per head, padding left out; with `means`
    a panel per layer for the mean of its heads too, and `gold` cells (t, s) outlined on every panel."""
    n_queries, n_keys = len(next(iter(maps.values()))), len(next(iter(maps.values()))[0])
    q_text, q_keep = read_example_tokens(query_tokens, n_queries)
    k_text, k_keep = read_example_tokens(key_tokens, n_keys)
    n_layers, n_heads = max(l for l, _ in maps) + 1, max(h for _, h in maps) + 1
    for layer, head in chosen or []:
        if (layer, head) not in maps:
            fail(f"--heads {layer}:{head}: {path} has layers 0-{n_layers - 1} and heads 0-{n_heads - 1}")
    panels = chosen or sorted(maps)
    if means:  # each layer's row ends with the mean of its heads
        maps = {**maps, **layer_means(maps)}
        panels = [p for layer in sorted({l for l, _ in panels}) for p in
                  [q for q in panels if q[0] == layer] + [(layer, "mean")]]
    n_cols = (n_heads + means) if not chosen else min(len(panels), 4)
    n_rows = math.ceil(len(panels) / n_cols)
    side = 4.2 if len(panels) <= 2 else 2.6
    most = 40 if side > 4 else 24
    q_ticks, q_labels, q_every = token_ticks(q_keep, q_text, most)
    k_ticks, k_labels, k_every = token_ticks(k_keep, k_text, most)
    # Single bytes fit under their columns (an occasional "\\n" too); words and "12 s" do not.
    rotate = k_every > 1 or sum(len(label) > 2 for label in k_labels) > len(k_labels) / 4
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(side * n_cols + 1.2, side * n_rows + 1.0),
                             squeeze=False, constrained_layout=True)
    q_rows, k_cols = {t: i for i, t in enumerate(q_keep)}, {s: i for i, s in enumerate(k_keep)}
    for i, (layer, head) in enumerate(panels):
        ax = axes[i // n_cols][i % n_cols]
        grid = [[maps[(layer, head)][q][k] for k in k_keep] for q in q_keep]
        image = heatmap(ax, grid, cmap="magma", vmin=0.0, vmax=1.0)
        ax.set_xticks(k_ticks, k_labels, fontsize=7, rotation=90 if rotate else 0)
        ax.set_yticks(q_ticks, q_labels, fontsize=7)
        ax.tick_params(length=0)
        ax.set_title(f"layer {layer}, {'mean of its heads' if head == 'mean' else f'head {head}'}", fontsize=9)
        for t, s in sorted(gold or ()):
            if t in q_rows and s in k_cols:
                ax.add_patch(Rectangle((k_cols[s] - 0.5, q_rows[t] - 0.5), 1, 1, fill=False, edgecolor=GOLD_COLOUR,
                                       linewidth=1.0))
        if i % n_cols == 0 or len(panels) <= 2:
            ax.set_ylabel("query position")
        if i // n_cols == n_rows - 1 or len(panels) <= 2 or i + n_cols >= len(panels):
            ax.set_xlabel("key position (attended to)")
    for j in range(len(panels), n_rows * n_cols):
        axes[j // n_cols][j % n_cols].set_visible(False)
    fig.colorbar(image, ax=axes.ravel().tolist(), label="attention probability", shrink=0.9)
    words = [q_text[t].replace("\u2423", " ") for t in q_keep]
    shown = ("" if all(len(w) == 1 for w in words) else " ").join(words)  # bytes, or words
    snippet = shown if len(shown) <= 70 else shown[:67] + "..."
    left_out = n_queries - len(q_keep) + (n_keys - len(k_keep) if key_tokens != query_tokens else 0)
    padding = f"; {plural(left_out, 'padding position')} left out" if left_out else ""
    thinned = f"; ticks every {max(q_every, k_every)} positions: position and token" if max(q_every, k_every) > 1 else ""
    which = ("chosen heads" if chosen else "every head") + (" and each layer's mean" if means else "")
    where = "the prompt" if example == "prompt" else f"example {example}"
    legend = "" if gold is None else (
        f"\n{GOLD_COLOUR_NAME} squares: the gold alignment ({plural(len(gold), 'cell')}): the word a row's query predicts "
        "(the target token after its own) and the source word share a Strong's number")
    figure_title(fig, f"{title_prefix}{what} of {which} on {where}{padding}\n\"{snippet}\"\n"
                 f"row = query position, column = the key it attends to; each row sums to 1{thinned}{legend}",
                 fontsize=10)
    save(fig, out, written)
