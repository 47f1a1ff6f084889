"""experiments/pruning's section beyond single heads (beyond.py) on made-up data/beyond/ files:
rank correlations, the fraction prunable per order and unit against random, IG against importance,
and recovery judged against the control at the same round. Run: python3 -m pytest experiments/tests."""
import math
import os
import sys

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXPERIMENTS)
from common import write_csv  # noqa: E402
from pruning import beyond as B  # noqa: E402

SEEDS = range(5)


def curve(fractions, accuracies):
    """prune.csv rows of one arm (an accuracy task: the metric is val_accuracy)."""
    return [{"round": i, "fraction_pruned": f, "val_accuracy": a, "val_loss": 1.0, "val_bpb": ""}
            for i, (f, a) in enumerate(zip(fractions, accuracies))]


def made_up(tmp_path):
    """induction, 5 seeds, 2 layers x 2 heads. Heads: IG orders heads as importance does, and
    ablation in reverse. Curves (accuracy; NOTICEABLE's drop is 1 point): importance and IG keep
    the accuracy to 0.5 of the heads pruned, ablation and random to 0.25; distillation to 0.75
    against its control, fine-tuning to 0.5."""
    folder = tmp_path / "beyond"
    heads, analyses, prune = [], [], []
    for s in SEEDS:
        for k, (layer, head) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
            heads.append({"task": "induction", "seed": s, "layer": layer, "head": head, "importance": k + 1,
                          "importance_normalized": k + 1, "ablation_loss_delta": 4 - k,
                          "integrated_gradients": -(k + 1) * 0.1})
        analyses.append({"task": "induction", "seed": s, "loss": 0.5, "ig_loss_change": -1.0,
                         "ig_completeness_error": 1e-4, "ig_steps": 20, "ffn_ig_loss_change": -0.5,
                         "ffn_ig_completeness_error": 2e-4 * (s + 1) / len(SEEDS), "ffn_ig_steps": 20})
        x = [0, 0.25, 0.5, 0.75]
        good, bad = [0.99, 0.99, 0.985, 0.5], [0.99, 0.985, 0.6, 0.4]
        arms = {"importance": good, "integrated_gradients": good, "ablation": bad, "random_seed1": bad,
                "importance_ffn": good, "magnitude_ffn": bad, "integrated_gradients_ffn": good, "random_ffn_seed1": bad,
                "importance_ft20": good, "importance_ft20_distill": [0.99, 0.99, 0.985, 0.985],
                "none_ft20": [0.99, 0.99, 0.99, 0.99]}
        for unit in ("attention_layers", "ffn_blocks"):
            for order in ("importance", "ablation", "integrated_gradients"):
                arms[f"{order}_{unit}"] = good
            arms[f"random_{unit}_seed1"] = bad
        for arm, acc in arms.items():
            fr = [0] * 4 if arm.startswith("none") else x
            prune += [{"task": "induction", "seed": s, "arm": arm, **r} for r in curve(fr, acc)]
    write_csv(str(folder / "heads.csv"), list(heads[0]), heads) if folder.mkdir() is None else None
    write_csv(str(folder / "analyses.csv"), list(analyses[0]), analyses)
    write_csv(str(folder / "prune.csv"), list(prune[0]), prune)
    write_csv(str(folder / "provenance.csv"), ["key", "value"],
              [{"key": k, "value": v} for k, v in (("commit", "abc1234"), ("uncommitted_changes", "no"),
                                                  ("started_utc", "x"), ("machine", "m"), ("wall_seconds", "600"),
                                                  ("max_load_1min", "2.0"))])
    return B.load(str(tmp_path))


def test_rank_correlations_and_completeness(tmp_path):
    b = made_up(tmp_path)
    table = B.fill_correlations(b)
    row = table.splitlines()[2]
    # -IG and I_h agree exactly; ablation is the reverse of both.
    assert row.startswith("| induction | 1.00 ± 0.00")
    assert "-1.00 ± 0.00" in row
    # each kind's largest relative error over seeds: heads 1e-4 / 1, FFN units 2e-4 / 0.5
    assert row.endswith("| 1.0e-04 | 4.0e-04 |")


def test_orders_against_random_and_ig_against_importance(tmp_path):
    b = made_up(tmp_path)
    for s in SEEDS:
        assert B.order_prunable(b, "induction", s, "heads", "importance") == 0.5
        assert B.order_prunable(b, "induction", s, "heads", "ablation") == 0.25
        assert B.order_prunable(b, "induction", s, "heads", "random") == 0.25
        assert B.order_prunable(b, "induction", s, "ffn_blocks", "importance") == 0.5
    text = B.fill_orders(b, "heads")
    # identical differences over seeds give a zero spread: the claims are judged as stats.Paired does
    assert "importance prunes more" in text or "not resolved" in text
    assert "IG vs importance" in text


def test_recovery_is_judged_against_the_control(tmp_path):
    b = made_up(tmp_path)
    assert B.recovery_prunable(b, "induction", 0, "heads", "finetune") == 0.5
    assert B.recovery_prunable(b, "induction", 0, "heads", "distill") == 0.75
    assert math.isnan(B.recovery_prunable(b, "induction", 0, "ffn", "distill"))  # no FFN recovery arms here
    text = B.fill_recovery(b)
    assert "| attention heads | induction |" in text


def test_the_section_says_when_it_has_not_run(tmp_path):
    class D:
        folder = str(tmp_path)
    assert "not run yet" in B.fill_beyond(D())
    made_up(tmp_path)
    assert "From commit `abc1234`" in B.fill_beyond(D())


def part_rows(task, seeds=(0, 1)):
    """One part's data/beyond/ rows: one head, one analysis, one prune round and one timing per seed."""
    return {"heads": [{"task": task, "seed": s, "layer": 0, "head": 0, "importance": 1, "importance_normalized": 1,
                       "ablation_loss_delta": 1, "integrated_gradients": -1} for s in seeds],
            "analyses": [{"task": task, "seed": s, "loss": 1, "ig_loss_change": -1, "ig_completeness_error": 0,
                          "ig_steps": 20} for s in seeds],
            "prune": [{"task": task, "seed": s, "arm": "importance", "round": 0} for s in seeds],
            "timings": [{"task": task, "seed": s, "job": "analyze", "seconds": 1} for s in seeds]}


def part_provenance(tasks, wall, commit="abc1234", seeds="0 1", scale="full"):
    return {"commit": commit, "uncommitted_changes": "no", "started_utc": f"t{wall}", "machine": "m",
            "wall_seconds": str(wall), "max_load_1min": "2.10", "scale": scale, "tasks": tasks, "seeds": seeds}


def test_run_beyond_in_parts_keeps_the_other_tasks_and_each_part(tmp_path):
    from common import read_csv
    from pruning import collect_beyond as CB
    data = str(tmp_path / "beyond")
    assert CB.write_part(data, part_rows("text"), part_provenance("text", 600)) == []
    assert CB.write_part(data, part_rows("grammar"), part_provenance("grammar", 1200)) == ["text"]
    # The rows in the tasks' order (grammar before text) whatever the parts' order.
    assert [r["task"] for r in read_csv(os.path.join(data, "heads.csv"))] == ["grammar"] * 2 + ["text"] * 2
    p = {r["key"]: r["value"] for r in read_csv(os.path.join(data, "provenance.csv"))}
    assert p["tasks"] == "grammar text" and p["wall_seconds"] == "1800"
    assert (p["part1_tasks"], p["part2_tasks"]) == ("text", "grammar")
    # A part collected again replaces its own rows and its provenance part.
    CB.write_part(data, part_rows("grammar", seeds=(0, 1)), part_provenance("grammar", 900))
    assert len(read_csv(os.path.join(data, "prune.csv"))) == 4
    p = {r["key"]: r["value"] for r in read_csv(os.path.join(data, "provenance.csv"))}
    assert "part3_tasks" not in p and p["wall_seconds"] == "1500"
    assert "took 25 min in 2 parts (text: started t600, 10 min" in B.provenance_line(p)


def test_run_beyond_refuses_a_part_from_another_commit_or_seeds(tmp_path):
    import pytest
    from pruning import collect_beyond as CB
    data = str(tmp_path / "beyond")
    CB.write_part(data, part_rows("text"), part_provenance("text", 600))
    with pytest.raises(SystemExit):
        CB.write_part(data, part_rows("grammar"), part_provenance("grammar", 600, commit="def5678"))
    with pytest.raises(SystemExit):
        CB.write_part(data, part_rows("grammar"), part_provenance("grammar", 600, seeds="0 1 2"))
    # The same tasks again from another commit replace all there was: nothing of another commit is kept.
    CB.write_part(data, part_rows("text"), part_provenance("text", 600, commit="def5678"))


def test_the_run_scripts_refuse_an_unknown_task_in_one_line_before_any_work(tmp_path):
    import subprocess
    root = os.path.dirname(EXPERIMENTS)
    for script in ("run.sh", "run_beyond.sh"):
        out = tmp_path / script
        env = dict(os.environ, SCALE="dev", TASKS="grammar bogus", OUT=str(out), DATA=str(out / "data"),
                   HEADLAB="/nonexistent/headlab")
        r = subprocess.run(["bash", os.path.join(EXPERIMENTS, "pruning", script)], cwd=root, env=env,
                           capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stderr) == (2, f"{script}: unknown task 'bogus'\n")
        assert not out.exists()
