"""experiments/pruning: figures/ from data/ (a normal run only: --check never imports matplotlib)."""
import os

import numpy as np

from common import number, pyplot, save_figure

from .analysis import (
    ORDER_TITLES, SCORE_ORDERS, TASKS, TEST_KEY, dynamics_rows, ft_name, l0_points, l0_selected, random_arms
)

HERE = os.path.dirname(os.path.abspath(__file__))


def figures(d):
    plt = pyplot()
    folder = os.path.join(HERE, "figures")
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".png"):
            os.remove(os.path.join(folder, name))

    def save(fig, name):
        save_figure(fig, os.path.join(folder, name), 150, tight_layout=True, strip_software=True)

    def mean_curve(runs, metric):
        """Runs of equal rounds -> x (fraction), mean, min, max of the metric over runs."""
        n = min(len(r) for r in runs)
        x = np.array([number(runs[0][i]["fraction_pruned"]) for i in range(n)])
        y = np.array([[number(r[i][metric]) for i in range(n)] for r in runs])
        return x, y.mean(axis=0), y.min(axis=0), y.max(axis=0)

    for task in d.tasks:
        title, metric = TASKS[task]
        seeds = d.seeds[task]
        fig, axes = plt.subplots(2, 2, figsize=(11, 8))
        (ax_orders, ax_random), (ax_ft, ax_l0) = axes
        shown = []  # the y values of the val curves that set the shared y-limits (random order is not one)
        for order, style in zip(SCORE_ORDERS, ["-", "--", "-.", ":", ":", "-"]):
            runs = sum((random_arms(d, task, s) if order == "random" else [d.arm(task, s, order)] for s in seeds), [])
            runs = [r for r in runs if r]
            if not runs:
                continue
            x, m, lo, hi = mean_curve(runs, metric)
            targets = [ax_random] if order == "random" else [ax_orders] + ([ax_random] if order == "importance" else [])
            for ax in targets:
                line, = ax.plot(x, m, style, marker=".", label=ORDER_TITLES[order])
                ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
            if order != "random":
                shown += list(lo) + list(hi)
        base = np.mean([number(d.arm(task, s, "importance")[0][metric]) for s in seeds if d.arm(task, s, "importance")])
        for ax in (ax_orders, ax_random, ax_ft):
            ax.axhline(base, color="0.4", linestyle=":", linewidth=1, label="unpruned")
        ax_orders.set_title(f"{title}: score orders, no fine-tuning (val)", fontsize=10)
        ax_random.set_title("random order (own y-axis), importance for scale (val)", fontsize=10)
        for base_arm, label in [("importance_FT_recompute", "importance, fine-tuned + re-scored"),
                                ("importance_FT", "importance, fine-tuned"),
                                ("none_FT", "control: fine-tuned, nothing pruned")]:
            runs = [d.arm(task, s, ft_name(d, task, s, base_arm) or "") for s in seeds]
            runs = [r for r in runs if r]
            if not runs:
                continue
            if base_arm == "none_FT":  # plot the control against the pruned arms' fractions
                ref = [d.arm(task, s, ft_name(d, task, s, "importance_FT") or "") for s in seeds]
                ref = [r for r in ref if r]
                n = min(len(r) for r in runs + ref)
                x = [number(ref[0][i]["fraction_pruned"]) for i in range(n)]
                y = np.array([[number(r[i][metric]) for i in range(n)] for r in runs])
                ax_ft.plot(x, y.mean(axis=0), color="0.2", linestyle="--", label=label)
                ax_ft.fill_between(x, y.min(axis=0), y.max(axis=0), color="0.2", alpha=0.1)
                shown += list(y.min(axis=0)) + list(y.max(axis=0))
                continue
            x, m, lo, hi = mean_curve(runs, metric)
            line, = ax_ft.plot(x, m, marker=".", label=label)
            ax_ft.fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
            shown += list(lo) + list(hi)
        ax_ft.set_title(f"{title}: with fine-tuning, against its control (val)", fontsize=10)
        if shown:
            lo_y, hi_y = min(shown + [base]), max(shown + [base])
            pad = 0.05 * (hi_y - lo_y or abs(hi_y) or 1.0)
            for ax in (ax_orders, ax_ft):
                ax.set_ylim(lo_y - pad, hi_y + pad)
        l0_panel(ax_l0, d, task, seeds, title)
        limit = 1 - int(d.setup_of(task, seeds[0])["n_layers"]) / (
            int(d.setup_of(task, seeds[0])["n_layers"]) * int(d.setup_of(task, seeds[0])["n_heads"]))
        for ax in axes.ravel():
            ax.axvline(limit, color="0.6", linewidth=0.8, linestyle="-.",
                       label=f"iterative pruning stops here ({limit:.3f}: one head per layer)")
            ax.set_xlim(-0.02, 1.0)
            ax.set_xlabel("fraction of heads pruned")
            ax.legend(fontsize=6)
        ax_orders.set_ylabel(metric.replace("val_", "validation "))
        ax_ft.set_ylabel(metric.replace("val_", "validation "))
        fig.suptitle(f"mean over {len(seeds)} seeds; bands: min-max over seeds", fontsize=8)
        save(fig, f"{task}_prune.png")

        h = d.head_table(task, seeds[0])
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
        for ax, col, label in [(axes[0], "ablation_loss_delta", "Δ loss, head removed"),
                               (axes[1], "layer_only_loss_delta", "Δ loss, head alone in its layer")]:
            im = ax.imshow(h[col], aspect="auto", cmap="viridis")
            rows, cols = np.shape(h[col])
            ax.set_yticks(range(rows))
            ax.set_xticks(range(cols))
            ax.tick_params(labelsize=7 if cols > 8 else 9)
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(f"{title}, seed {seeds[0]}: {label}", fontsize=9)
            fig.colorbar(im, ax=ax)
        save(fig, f"{task}_heads.png")

    dyn = {t: dynamics_rows(d, t) for t in d.tasks}
    dyn = {t: v for t, v in dyn.items() if v}
    if dyn:
        fig, axes = plt.subplots(1, len(dyn), figsize=(3.4 * len(dyn), 3.4), squeeze=False)
        for ax, task in zip(axes[0], dyn):
            metric = TASKS[task][1]
            s = d.seeds[task][0]
            steps = d.checkpoint_steps(task, s)
            cmap = plt.get_cmap("viridis")
            shown = []
            for i, step in enumerate(steps):
                color = cmap(i / max(1, len(steps) - 1))
                imp = d.arm(task, s, "importance", step)
                rnd = [r for r in random_arms(d, task, s, step) if r]
                if imp:
                    shown += [number(r[metric]) for r in imp]
                    ax.plot([number(r["fraction_pruned"]) for r in imp], [number(r[metric]) for r in imp], color=color,
                            label=f"step {step}")
                if rnd:
                    ax.plot([number(r["fraction_pruned"]) for r in rnd[0]], [number(r[metric]) for r in rnd[0]],
                            color=color, linestyle="--")
            if shown:
                pad = 0.05 * (max(shown) - min(shown) or 1.0)
                ax.set_ylim(min(shown) - pad, max(shown) + pad)
            ax.set_title(f"{TASKS[task][0]}, seed {s}", fontsize=9)
            ax.set_xlim(-0.02, 1.0)
            ax.set_xlabel("fraction of heads pruned")
            ax.set_ylabel(metric.replace("val_", ""))
            ax.legend(fontsize=6)
        fig.suptitle("Pruning curves of checkpoints along training (solid: importance, dashed: random; the y-axis "
                     "fits the importance curves, random ones beyond it are clipped)", fontsize=9)
        save(fig, "dynamics_curves.png")


def l0_panel(ax, d, task, seeds, title):
    """L0 on the test split: every lambda and seed (x: fraction pruned), the val-chosen ones ringed,
    the control's test metric at 0 (squares)."""
    key = TEST_KEY[TASKS[task][1]]
    pts, chosen = [], []
    for s in seeds:
        pick = l0_selected(d, task, s)
        for p in l0_points(d, task, s):
            t = d.eval(task, s, p[6], "test")
            if t:
                pts.append((p[1], number(t[key])))
                if pick and p[6] == pick[6]:
                    chosen.append(pts[-1])
    ctl = [number(d.eval(task, s, "none_l0", "test")[key]) for s in seeds if d.eval(task, s, "none_l0", "test")]
    if pts:
        ax.scatter(*zip(*pts), marker="x", color="k", label="L0 (each lambda, seed)", zorder=3)
    if chosen:
        ax.scatter(*zip(*chosen), s=120, facecolors="none", edgecolors="tab:red", label="lambda chosen on val", zorder=4)
    if ctl:
        ax.scatter([0] * len(ctl), ctl, marker="s", facecolors="none", edgecolors="k",
                   label="control (fine-tuned, nothing pruned)", zorder=3)
        ax.axhline(float(np.mean(ctl)), color="0.4", linestyle=":", linewidth=1)
    ax.set_title(f"{title}: L0 gates (test)", fontsize=10)
    ax.set_ylabel(key.replace("bpb", "bits/byte") + " (test)")
