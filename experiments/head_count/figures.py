"""experiments/head_count: figures/ from data/ (a normal run only: --check never imports
matplotlib)."""
import os

from common import mean_std, number, pyplot, save_figure
from stats import t_half_width

from .runs import HERE
from .studies import Study
from .sweeps import LR_STUDIES, TITLES, VAL_METRIC, Sweep, key_label, values



def figures(data):
    plt = pyplot()
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "svg.hashsalt": "headlab"})
    out = os.path.join(HERE, "figures")
    os.makedirs(out, exist_ok=True)
    written = set()

    def save(fig, name):
        save_figure(fig, os.path.join(out, name), 110, tight_layout=True, strip_software=True)
        written.add(name)

    def setup(r):
        layers = int(r["layers"])
        return f"{layers} layer{'s' if layers > 1 else ''}, d_model {r['d_model']}, {r['steps']} steps"

    def final_plot(ax, study, key="heads", only=None, label_d_head=True):
        s = Sweep(data, study, key=key, reference=8 if key == "kv_heads" else None, only=only)
        xs = list(s.points)
        for i, v in enumerate(xs):
            ys = values(s.points[v], s.metric)
            jitter = [(j - (len(ys) - 1) / 2) * 0.06 for j in range(len(ys))]
            ax.scatter([i + j for j in jitter], ys, s=12, color="0.55", zorder=2, label="one seed" if i == 0 else None)
            m, sd = mean_std(ys)
            half = t_half_width(sd, len(ys)) if len(ys) > 1 else 0.0
            ax.errorbar([i], [m], yerr=[[half], [half]], fmt="o", color="C0", capsize=4, zorder=3,
                        label="mean, 95% t-interval" if i == 0 else None)
        ticks = [f"{v}\n(d_head {s.points[v][0]['d_head']})" if (label_d_head and key == "heads") else str(v) for v in xs]
        ax.set_xticks(range(len(xs)), ticks)
        ax.set_xlabel("KV heads (8 query heads)" if key == "kv_heads" else "heads")
        ax.set_ylabel(s.metric_words)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        return s

    for study in ("k_relation_2", "k_relation_3", "induction", "grammar", "grammar_fixed_d_head", "text",
                  "text_fixed_d_head", "grammar_kv_heads", "text_kv_heads"):
        key = "kv_heads" if study.endswith("kv_heads") else "heads"
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        s = final_plot(ax, study, key=key, label_d_head=not study.endswith("fixed_d_head"))
        ax.set_title(f"{TITLES[study]}: {s.metric_words} of each seed\n({setup(data.rows(study)[0])})")
        save(fig, f"{study}_final.png")

    def curves(ax, study, key="heads", only=None, metric=None, rows_of=None):
        """Mean val curve per point, band = min-max over seeds; colour by the point's rank in
        `only` (so two panels of the same points match), else in the sweep."""
        pts = rows_of if rows_of is not None else data.points(study, key)
        order = sorted(only) if only is not None else list(pts)
        for v, rows in pts.items():
            if v not in order:
                continue
            i = order.index(v)
            m = metric or VAL_METRIC[rows[0]["task"]]
            cs = [data.curve(r) for r in rows]
            steps = [int(c["step"]) for c in cs[0]]
            ys = [[number(c[j][m]) for c in cs] for j in range(len(steps))]
            mean = [sum(y) / len(y) for y in ys]
            ax.plot(steps, mean, color=f"C{i}", label=f"{key_label(key, v)} (d_head {rows[0]['d_head']})" if key == "heads" else key_label(key, v))
            ax.fill_between(steps, [min(y) for y in ys], [max(y) for y in ys], color=f"C{i}", alpha=0.15, lw=0)
        ax.set_xlabel("step")
        ax.set_ylabel({"val_accuracy": "val accuracy", "val_bpb": "val bits/byte", "val_loss": "val loss (nats/token)"}[m])
        ax.grid(alpha=0.3)

    for study in ("k_relation_2", "k_relation_3", "induction", "text"):
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        curves(ax, study)
        n = len({r["seed"] for r in data.rows(study)})
        ax.set_title(f"{TITLES[study]}: validation curves\n(mean over {n} seeds, band = min-max; {setup(data.rows(study)[0])})")
        ax.legend(fontsize=7, ncol=2)
        save(fig, f"{study}_curves.png")

    for name in LR_STUDIES:
        st = Study(data, name)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
        curves(axes[0], st.base.study, only=st.heads)
        axes[0].set_title(f"{st.base_steps} steps, lr {st.base_lr}, seeds {min(st.base.seeds)}-{max(st.base.seeds)}")
        curves(axes[1], st.long.study, rows_of=st.long.points, only=st.heads)
        axes[1].set_title(f"{st.long_steps} steps, each count's chosen lr, seeds {min(st.long.seeds)}-{max(st.long.seeds)}")
        axes[1].legend(fontsize=7)
        fig.suptitle(f"{TITLES[name]}: original against 3x budget (mean, band = min-max over seeds)")
        save(fig, f"{name}_curves.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    two = data.rows("k_relation_3_two_layers")
    seeds = {r["seed"] for r in two}
    one = [r for r in data.rows("k_relation_3", heads=8) if r["seed"] in seeds]
    for i, (label, rows) in enumerate((("1 layer x 8 heads", one), ("2 layers x 8 heads", two))):
        for j, r in enumerate(sorted(rows, key=lambda r: int(r["seed"]))):
            c = data.curve(r)
            axes[0].plot([int(x["step"]) for x in c], [number(x["val_accuracy"]) for x in c], color=f"C{i}", alpha=0.8,
                         label=label if j == 0 else None)
    axes[0].set_title(f"{TITLES['k_relation_3']}: one or two layers\n(each line one seed)")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("val accuracy")
    axes[0].grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    curves(axes[1], "k_relation_3_p6")
    axes[1].set_title(f"{TITLES['k_relation_3_p6']}\n(mean, band = min-max over seeds)")
    axes[1].legend(fontsize=8)
    save(fig, "k_relation_3_extras.png")

    for png in os.listdir(out):  # figures of an earlier layout
        if png.endswith(".png") and png not in written:
            os.remove(os.path.join(out, png))

