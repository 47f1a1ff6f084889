"""experiments/pruning: figures/ from data/ (a normal run only: --check never imports matplotlib)."""
import os

import numpy as np

from common import number, pyplot, save_figure

from .analysis import ORDER_TITLES, SCORE_ORDERS, TASKS, dynamics_rows, ft_name, l0_points, random_arms

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
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for order, style in zip(SCORE_ORDERS, ["-", "--", "-.", ":", ":", "-"]):
            runs = sum((random_arms(d, task, s) if order == "random" else [d.arm(task, s, order)] for s in seeds), [])
            runs = [r for r in runs if r]
            if runs:
                x, m, lo, hi = mean_curve(runs, metric)
                line, = axes[0].plot(x, m, style, marker=".", label=ORDER_TITLES[order])
                axes[0].fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
        base = np.mean([number(d.arm(task, s, "importance")[0][metric]) for s in seeds if d.arm(task, s, "importance")])
        for ax in axes:
            ax.axhline(base, color="0.4", linestyle=":", linewidth=1, label="unpruned")
        axes[0].set_title(f"{title}: score orders, no fine-tuning", fontsize=10)
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
                axes[1].plot(x, y.mean(axis=0), color="0.2", linestyle="--", label=label)
                axes[1].fill_between(x, y.min(axis=0), y.max(axis=0), color="0.2", alpha=0.1)
                continue
            x, m, lo, hi = mean_curve(runs, metric)
            line, = axes[1].plot(x, m, marker=".", label=label)
            axes[1].fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
        pts = [(p[1], number(p[5][metric])) for s in seeds for p in l0_points(d, task, s)]
        if pts:
            axes[1].scatter(*zip(*pts), marker="x", color="k", label="L0 (each lambda, seed)", zorder=3)
            ctl = [number(d.arm(task, s, "none_l0")[-1][metric]) for s in seeds if d.arm(task, s, "none_l0")]
            axes[1].scatter([0] * len(ctl), ctl, marker="s", facecolors="none", edgecolors="k",
                            label="L0's control (fine-tuned, nothing pruned)", zorder=3)
        axes[1].set_title(f"{title}: with fine-tuning, and L0", fontsize=10)
        for ax in axes:
            ax.set_xlabel("fraction of heads pruned")
            ax.legend(fontsize=7)
        axes[0].set_ylabel(metric.replace("val_", "validation "))
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
            for i, step in enumerate(steps):
                color = cmap(i / max(1, len(steps) - 1))
                imp = d.arm(task, s, "importance", step)
                rnd = [r for r in random_arms(d, task, s, step) if r]
                if imp:
                    ax.plot([number(r["fraction_pruned"]) for r in imp], [number(r[metric]) for r in imp], color=color,
                            label=f"step {step}")
                if rnd:
                    ax.plot([number(r["fraction_pruned"]) for r in rnd[0]], [number(r[metric]) for r in rnd[0]],
                            color=color, linestyle="--")
            ax.set_title(f"{TASKS[task][0]}, seed {s}", fontsize=9)
            ax.set_xlabel("fraction of heads pruned")
            ax.set_ylabel(metric.replace("val_", ""))
            ax.legend(fontsize=6)
        fig.suptitle("Pruning curves of checkpoints along training (solid: importance, dashed: random)", fontsize=9)
        save(fig, "dynamics_curves.png")
