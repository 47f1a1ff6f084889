"""The helpers the experiments and headlab plot share (src/plot/plot_shared.py), the experiments'
formatting (experiments/common.py), and what headlab plot's modules compute from their CSV files.
Run: python3 -m pytest experiments/tests (CTest runs it as experiments_python)."""
import math
import os
import sys

import pytest

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXPERIMENTS)
import common  # noqa: E402  (puts src/plot on sys.path)
import plot_shared  # noqa: E402
from plot_shared import CsvError  # noqa: E402


def write(path, text):
    path.write_text(text)
    return str(path)


# ---- plot_shared: CSV by column name --------------------------------------------------------------


def test_read_csv_reads_by_column_name_and_names_a_missing_column(tmp_path):
    path = write(tmp_path / "a.csv", "x,y\n1,2\n3,\n")
    rows = plot_shared.read_csv(path, required=("y", "x"))
    assert rows.columns == ["x", "y"] and [dict(r) for r in rows] == [{"x": "1", "y": "2"}, {"x": "3", "y": ""}]
    assert rows[0].get("z") is None and "z" not in rows[0]
    with pytest.raises(CsvError, match=r"a\.csv: no column 'z' \(its columns: x, y\)") as e:
        rows[1]["z"]
    assert (e.value.path, e.value.column) == (path, "z")
    with pytest.raises(CsvError, match=r"a\.csv: no column 'z'") as e:
        plot_shared.read_csv(path, required=("x", "z"))
    assert e.value.column == "z"


def test_read_csv_missing_empty_and_headerless_files(tmp_path):
    with pytest.raises(CsvError, match=r"nope\.csv is missing: run it first") as e:
        plot_shared.read_csv(str(tmp_path / "nope.csv"), hint="run it first")
    assert e.value.column is None
    empty = plot_shared.read_csv(write(tmp_path / "empty.csv", ""), required=("x",))
    assert list(empty) == [] and empty.columns is None
    header_only = plot_shared.read_csv(write(tmp_path / "h.csv", "x,y\n"))
    assert list(header_only) == [] and header_only.columns == ["x", "y"]
    bare = plot_shared.read_csv(write(tmp_path / "bare.csv", "2026-01-01T00:00:00Z,60,done\n"),
                                fieldnames=["started", "seconds", "ended"])
    assert bare[0]["seconds"] == "60" and bare.columns == ["started", "seconds", "ended"]


def test_csv_text_quotes_only_what_needs_it_and_reads_back(tmp_path):
    rows = [{"key": "machine", "value": "AMD EPYC, 2 cores"}, {"key": "n", "value": 3}, {"key": "x", "value": None},
            {"key": "f", "value": 0.1}, {"key": "q", "value": 'say "hi"'}]
    text = plot_shared.csv_text(["key", "value"], rows)
    assert text == 'key,value\nmachine,"AMD EPYC, 2 cores"\nn,3\nx,\nf,0.1\nq,"say ""hi"""\n'
    back = plot_shared.read_csv(write(tmp_path / "p.csv", text))
    assert [r["value"] for r in back] == ["AMD EPYC, 2 cores", "3", "", "0.1", 'say "hi"']


def test_every_committed_data_file_is_what_csv_text_writes():
    """The data/ files were written by the scripts' earlier writers: the shared one writes them back
    byte for byte (so collecting again changes no byte of what did not change)."""
    for experiment in ("head_count", "pruning"):
        folder = os.path.join(EXPERIMENTS, experiment, "data")
        for name in sorted(os.listdir(folder)):
            if name.endswith(".csv"):
                path = os.path.join(folder, name)
                rows = plot_shared.read_csv(path)
                with open(path) as f:
                    assert plot_shared.csv_text(rows.columns, rows) == f.read(), path


def test_save_figure_without_software_is_reproducible(tmp_path):
    plt = plot_shared.pyplot()
    paths = []
    for i in range(2):
        fig, ax = plt.subplots(figsize=(2, 1.5))
        ax.plot([0, 1, 2], [1, 0, 2])
        paths.append(str(tmp_path / "sub" / f"f{i}.png"))
        plot_shared.save_figure(fig, paths[-1], 50, tight_layout=True, strip_software=True)
    first, second = (open(p, "rb").read() for p in paths)
    assert first == second and first.startswith(b"\x89PNG") and b"matplotlib" not in first
    assert not plt.get_fignums()  # closed


# ---- experiments/common: failures, numbers and formatting -----------------------------------------


def test_common_read_csv_fails_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        common.read_csv(str(tmp_path / "gone.csv"), "run run.sh first")
    assert e.value.code == 2
    assert capsys.readouterr().err == f"make_results: {tmp_path / 'gone.csv'} is missing: run run.sh first\n"
    with pytest.raises(SystemExit):
        common.read_csv(write(tmp_path / "a.csv", "x\n1\n"), required=("y",))
    assert "a.csv: no column 'y'" in capsys.readouterr().err


def test_max_load_keeps_only_the_parts_own_samples(tmp_path):
    # 2026-12-07T20:00:00Z is epoch 1796673600; an earlier part's peak of 2.63 sits before it.
    path = write(tmp_path / "load.txt", "1796670000 2.63\n1796673540 1.90\n1796673660 1.02\n1796673720 0.98\n")
    assert common.max_load(path, "2026-12-07T20:00:00Z") == "1.02"
    assert common.max_load(path) == "2.63"
    assert common.max_load(path, "2026-12-08T00:00:00Z") == ""
    assert common.max_load(str(tmp_path / "none.txt"), "2026-12-07T20:00:00Z") == ""


def test_machine_names_the_cpu_family_and_model():
    """Two CPUs GCC resolves to the same -march (a Zen 3 and a Zen 5: 'znver3') round differently;
    the machine string that gates bit-for-bit comparisons must tell them apart."""
    cpuinfo = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if "cpu family" not in cpuinfo:
        pytest.skip("no /proc/cpuinfo with the CPU family here")
    family = next(line.split(":")[1].strip() for line in cpuinfo.splitlines() if line.startswith("cpu family"))
    text = common.machine()
    assert f", family {family} model " in text and text.endswith(" avx512") == ("avx512f" in cpuinfo.split())


def test_number_and_formatting():
    assert common.number("1.5") == 1.5 and math.isnan(common.number("")) and math.isnan(common.number(None))
    with pytest.raises(ValueError):
        common.number("abc")  # machine-written data: garbage is an error, not a gap
    assert common.pm(1.23456, 0.1, 2) == "1.23 ± 0.10"
    assert common.pm(1.0, math.nan, 1) == "1.0" and common.pm(math.nan, 1.0, 1) == "–"
    assert common.cell([1.0, 2.0, 3.0, math.nan], 1) == "2.0 ± 1.0"
    assert common.cell(iter([]), 2) == "–"
    assert (common.signed(0.0123, 3), common.signed(-2, 0), common.signed(math.nan, 1)) == ("+0.012", "-2", "–")
    assert (common.fmt_p(0.0123), common.fmt_p(0.0004), common.fmt_p(math.nan)) == ("p = 0.012", "p < 0.001", "p –")
    assert common.seeds_list([0.25, math.nan, 1], 2) == "0.25, –, 1.00"


def test_md_table_and_first_difference():
    assert common.md_table(["a", "b"], [[1, "x"]]) == "| a | b |\n|---:|---:|\n| 1 | x |"
    assert common.md_table(["a"], [[1], [2]], align="---") == "| a |\n|---|\n| 1 |\n| 2 |"
    assert common.first_difference("a\nb\nc", "a\nB\nc") == 2
    assert common.first_difference("a\nb", "a\nb\nc") == 3
    assert common.first_difference("", "x") == 1


# ---- headlab plot's modules: what they compute from their files ------------------------------------


@pytest.fixture(scope="module")
def plot():
    import headlab_plot
    import plot_common
    import plot_heads
    import plot_prune

    return headlab_plot, plot_common, plot_heads, plot_prune


def test_plot_common_helpers(plot):
    headlab_plot, plot_common, _, _ = plot
    assert plot_common.number("2.5") == 2.5 and plot_common.number("") is None and plot_common.number("x") is None
    assert plot_common.points([1, 2, None, 4], [None, 5, 6, 7]) == ([2, 4], [5, 7])
    assert plot_common.unique([3, 1, 3, 2, 1]) == [3, 1, 2]
    config = {"model": {"d_model": 128, "n_heads": 4, "n_layers": 2}, "data": {"task": "text"}, "train": {"steps": 1000}}
    assert plot_common.describe_config(config) == "d_model 128, 4 heads x d_head 32, 2 layers; task text, 1000 steps"
    assert plot_common.describe_config(config, ["model.n_heads", "train.steps"]) == "d_model 128, 2 layers; task text"
    assert headlab_plot.parse_heads("0:1,2:3,0:1") == [(0, 1), (2, 3)]


def test_read_metrics_by_column_name(plot, tmp_path):
    _, plot_common, _, _ = plot
    path = write(tmp_path / "metrics.csv", "val_loss,step,train_loss\n,1,2.5\n1.9,2,2.0\n")
    assert plot_common.read_metrics(path) == {"val_loss": [None, 1.9], "step": [1.0, 2.0], "train_loss": [2.5, 2.0]}


PRUNE_ROW = {"strategy": "random", "seed": "1", "finetune_steps": "0", "recompute": "0", "lambda": "", "round": "0",
             "heads_pruned": "0", "fraction_pruned": "0", "heads_kept": "4", "heads_per_layer": "2 2",
             "val_loss": "1.2", "val_accuracy": "0.5", "val_bpb": "", "pruned_heads": ""}


def test_read_prune_by_column_name(plot, tmp_path, capsys):
    _, _, _, plot_prune = plot
    columns = list(reversed(plot_prune.PRUNE_HEADER))  # any order: read by name
    second = dict(PRUNE_ROW, round="1", heads_pruned="1", fraction_pruned="0.25", heads_kept="3",
                  heads_per_layer="1 2", pruned_heads="0:1", val_loss="1.4")
    path = write(tmp_path / "prune.csv", plot_shared.csv_text(columns, [second, PRUNE_ROW]))
    rows = plot_prune.read_prune(path)
    assert [r["round"] for r in rows] == [0, 1] and rows[1]["per_table"] == [1, 2] and rows[1]["n_pruned"] == 1
    assert rows[0]["lambda"] is None and rows[1]["val_loss"] == 1.4
    means = plot_prune.by_round([rows, rows], lambda r: r["val_loss"])
    assert means == [(0.0, 1.2, 1.2, 1.2), (0.25, 1.4, 1.4, 1.4)]
    without = write(tmp_path / "bad.csv", plot_shared.csv_text([c for c in columns if c != "lambda"], [PRUNE_ROW]))
    with pytest.raises(SystemExit):
        plot_prune.read_prune(without)
    assert "bad.csv: not a headlab prune.csv: it has no column 'lambda'" in capsys.readouterr().err


def test_read_attention_example_by_column_name(plot, tmp_path, capsys):
    _, _, plot_heads, _ = plot
    text = "head,layer,query,k0,k1\n0,0,0,1,0\n0,0,1,0.25,0.75\n"
    maps = plot_heads.read_attention_example(write(tmp_path / "attention_example_0.csv", text))
    assert maps == {(0, 0): [[1.0, 0.0], [0.25, 0.75]]}
    with pytest.raises(SystemExit):
        plot_heads.read_attention_example(write(tmp_path / "short.csv", "layer,head,query,k0,k1\n0,0,0,1\n"))
    assert "short.csv: line 2 does not have 5 numbers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        plot_heads.read_attention_example(write(tmp_path / "nokeys.csv", "layer,head,query,k1\n0,0,0,1\n"))
    assert "expected the columns layer,head,query,k0,...,k<T-1>" in capsys.readouterr().err


def test_plural_seed_phrases_and_the_sweep_name(plot, tmp_path):
    _, plot_common, _, _ = plot
    import plot_sweep

    assert [plot_common.plural(n, "prune.csv file") for n in (1, 2)] == ["1 prune.csv file", "2 prune.csv files"]
    assert plot_common.plural(1, "head") == "1 head" and plot_common.plural(0, "head") == "0 heads"
    assert plot_sweep.seed_spread([2, 1, 2]) == "mean ± sample std over 1-2 seeds"
    assert plot_sweep.seed_spread([3, 3, 0]) == "mean ± sample std over 3 seeds"  # a point with none finished
    assert plot_sweep.seed_spread([1, 1]) == "one seed per point, no error bars"
    sweep = tmp_path / "folder"
    sweep.mkdir()
    grid = "run,model.n_heads,train.seed,data.seed,params,steps\n" + "".join(
        f"r{h}{s}{d},{h},{s},{d},10,6\n" for h in (1, 2) for s in (0, 1) for d in (0, 1, 2))
    write(sweep / "grid.csv", grid)
    assert plot_sweep.sweep_name(str(sweep)) == "folder" and plot_sweep.sweep_name(str(sweep) + "/") == "folder"
    write(sweep / "sweep_name.txt", "head_count\n")
    both = plot_sweep.Sweep(str(sweep))
    assert both.name == "head_count" and both.seeds() == "6 seeds (2 train.seed x 3 data.seed)"
    write(sweep / "grid.csv", "run,model.n_heads,train.seed,params,steps\na,1,0,10,6\nb,1,1,10,6\n")
    assert plot_sweep.Sweep(str(sweep)).seeds() == "2 seeds (train.seed)"


def test_attention_ticks_label_every_kth_position_with_its_token(plot):
    _, _, plot_heads, _ = plot
    text = list("abcdefghij")
    assert plot_heads.token_ticks(list(range(10)), text, 10) == (list(range(10)), text, 1)
    keep = [0, 1, 2, 3, 4, 5, 6, 7, 8]  # position 9 is padding
    assert plot_heads.token_ticks(keep, text, 4) == ([0, 3, 6], ["0 a", "3 d", "6 g"], 3)


def test_prune_axis_ends_where_every_layer_keeps_one_head(plot):
    _, _, _, plot_prune = plot

    def row(strategy, pruned, per_layer):  # read_prune's row: the pruned unit's counts, whichever unit
        kept = sum(per_layer)
        return {"strategy": strategy, "unit": "heads", "n_pruned": pruned, "n_kept": kept, "per_table": per_layer,
                "fraction_pruned": pruned / (pruned + kept)}

    rounds = [row("importance", 0, [4, 4, 4, 4]), row("importance", 8, [2, 2, 2, 2])]
    assert plot_prune.prunable_limit(rounds) == (0.75, 0.75)  # 12 of 16: one head left per layer
    l0 = [row("l0", 0, [4, 4, 4, 4]), row("l0", 14, [1, 1, 0, 0])]
    assert plot_prune.prunable_limit(rounds + l0) == (0.75, 0.875)  # L0 closed two layers
    assert plot_prune.prunable_limit(l0) == (1.0, 1.0)  # L0 alone may close every gate
