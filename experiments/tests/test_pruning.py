"""experiments/pruning's verdict logic against hand-computed cases: the verdicts.py additions it
uses (removal_class, reaches_claim), Michel's per-head classes (michel.py), the fraction
prunable without a noticeable drop and Figure 5's retained share (analysis.py), the task metric's
fallback to loss (loading.py) and the words of claims.py. Run: python3 -m pytest experiments/tests."""
import math
import os
import sys

import numpy as np
import pytest

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXPERIMENTS)
import verdicts as V  # noqa: E402
from pruning import analysis as A  # noqa: E402
from pruning import claims as C  # noqa: E402
from pruning import michel as M  # noqa: E402
from pruning.loading import Data  # noqa: E402


# ---- verdicts.py additions ----------------------------------------------------------------------------


def test_removal_class_by_hand():
    kw = dict(level=0.01, threshold=0.01)
    # Significant, at least the threshold: by the sign and the metric's direction.
    assert V.removal_class(0.001, -0.02, interval=(-0.03, -0.01), higher_is_better=True, **kw) == V.HURTS
    assert V.removal_class(0.001, +0.02, interval=(0.01, 0.03), higher_is_better=True, **kw) == V.HELPS
    assert V.removal_class(0.001, +0.02, interval=(0.01, 0.03), higher_is_better=False, **kw) == V.HURTS
    # Not significant, the interval inside ±0.01: shown small (removal_class, without it, cannot say).
    assert V.removal_class(0.5, 0.001, interval=(-0.004, 0.006), higher_is_better=True, **kw) == V.NO_CHANGE
    assert V.removal_class(0.5, 0.001, higher_is_better=True, **kw) == V.UNRESOLVED
    # Not significant, the interval reaching the threshold: unresolved.
    assert V.removal_class(0.5, 0.001, interval=(-0.02, 0.02), higher_is_better=True, **kw) == V.UNRESOLVED
    # Significant, below the threshold, the interval inside: no practical change; reaching it: unresolved.
    assert V.removal_class(0.001, 0.005, interval=(0.002, 0.008), higher_is_better=True, **kw) == V.NO_CHANGE
    assert V.removal_class(0.001, 0.005, interval=(0.001, 0.012), higher_is_better=True, **kw) == V.UNRESOLVED


def test_reaches_claim_by_hand():
    kw = dict(level=0.05, threshold=0.05, test="t")
    # 3 seeds: inconclusive whatever they show.
    v = V.reaches_claim({0: 0.1, 1: 0.1, 2: 0.1}, 0.4, **kw)
    assert v.outcome == V.INCONCLUSIVE and "only 3 paired seeds" in v.reason
    # 5 seeds all 0.1, against 0.4: below by 0.3 (no spread: p = 0): does not hold.
    assert V.reaches_claim({s: 0.1 for s in range(5)}, 0.4, **kw).outcome == V.DOES_NOT_HOLD
    # 5 seeds well above 0.4: holds (significantly the other way from "below").
    assert V.reaches_claim({s: 0.6 + 0.01 * s for s in range(5)}, 0.4, **kw).outcome == V.HOLDS
    # 5 seeds around 0.4 with a tight interval (mean 0.40, sd 0.0071, half-width 2.776 * 0.0032 = 0.0088): holds.
    v = V.reaches_claim({0: 0.39, 1: 0.40, 2: 0.41, 3: 0.40, 4: 0.40}, 0.4, **kw)
    assert v.outcome == V.HOLDS
    # Wide spread: inconclusive.
    assert V.reaches_claim({0: 0.0, 1: 0.8, 2: 0.1, 3: 0.7, 4: 0.4}, 0.4, **kw).outcome == V.INCONCLUSIVE


def test_pruning_constants_are_added_not_changed():
    assert V.PRACTICAL["prune_fraction"] == 0.05 and V.PRACTICAL["accuracy"] == 0.01
    assert (V.PAPER["voita_figure7"].count, V.PAPER["voita_figure7"].total) == (38, 48)
    f5 = V.PAPER_NUMBERS["michel_figure5"]
    assert f5["epoch"] / f5["epochs"] == 0.25 and f5["fraction_pruned"] == 0.4


# ---- michel.py: per-head effects and classes -------------------------------------------------------


def test_effects_by_hand():
    # One row of differences: mean 0.5, sample sd sqrt(1/3) over 4 examples: se = sqrt(1/3) / 2.
    diffs = np.array([[0.0, 1.0, 0.0, 1.0]])
    e, p, lo, hi = M.effects(diffs, np.ones(4), "accuracy", level=0.01)
    se = math.sqrt(1 / 3) / 2
    assert e[0] == pytest.approx(0.5)
    assert p[0] == pytest.approx(math.erfc(0.5 / se / math.sqrt(2)))
    assert hi[0] - e[0] == pytest.approx(2.5758293 * se, rel=1e-6)
    # Loss: relative to the full model's mean loss (2.0): effect 0.25.
    e, _, lo, hi = M.effects(diffs, np.full(4, 2.0), "loss", level=0.01)
    assert e[0] == pytest.approx(0.25) and hi[0] - e[0] == pytest.approx(2.5758293 * se / 2, rel=1e-6)
    # A full-model loss of 0: no relative effect.
    assert math.isnan(M.effects(diffs, np.zeros(4), "loss")[0][0])


def test_classify_loss_and_accuracy():
    # A head whose removal raises the loss by 5% everywhere (no spread): hurts; one with no change: no change.
    full = np.full(8, 2.0)
    diffs = np.stack([np.full(8, 0.1), np.zeros(8)])
    e, p, lo, hi = M.effects(diffs, full, "loss")
    assert M.classify(e, p, lo, hi, "loss") == [V.HURTS, V.NO_CHANGE]
    # Accuracy: removal raising accuracy by 2 points everywhere helps.
    e, p, lo, hi = M.effects(np.full((1, 8), 0.02), np.ones(8), "accuracy")
    assert M.classify(e, p, lo, hi, "accuracy") == [V.HELPS]


# ---- loading.py: the task metric, accuracy when stored, else loss ---------------------------------------


def fake_data(examples):
    d = Data.__new__(Data)
    d._examples = examples
    d.seeds = {"induction": sorted({s for _, s in examples}), "grammar": sorted({s for _, s in examples})}
    return d


def test_metric_kind_falls_back_to_loss():
    L, H, E = 1, 2, 3
    loss = {"loss": np.ones(E), "ablation_loss": np.ones((L, H, E)), "layer_only_loss": np.ones((L, H, E))}
    acc = {"example_accuracy": np.zeros(E), "ablation_accuracy": np.zeros((L, H, E)),
           "layer_only_accuracy": np.zeros((L, H, E))}
    d = fake_data({("induction", 0): dict(loss, **acc), ("induction", 1): dict(loss, **acc)})
    assert d.metric_kind("induction") == "accuracy"
    assert d.task_examples("induction", 0)[1].tolist() == [0.0, 0.0, 0.0]
    # One seed without the accuracy datasets: the whole task falls back to loss.
    d = fake_data({("induction", 0): dict(loss, **acc), ("induction", 1): dict(loss)})
    assert d.metric_kind("induction") == "loss" and d.task_examples("induction", 0)[1].tolist() == [1.0, 1.0, 1.0]
    # A loss task stays on loss, accuracy stored or not.
    d = fake_data({("grammar", 0): dict(loss, **acc)})
    assert d.metric_kind("grammar") == "loss"


# ---- analysis.py: noticeable drops, Figure 5's retained share -----------------------------------------------


def rows(metric, values, step=0.25):
    return [{"fraction_pruned": str(i * step), metric: str(v)} for i, v in enumerate(values)]


def test_prunable_stops_at_the_first_noticeable_drop():
    # Accuracy: drops 0.005, 0.02 points: the second is above 1 point.
    assert A.prunable("val_accuracy", rows("val_accuracy", [0.9, 0.895, 0.88, 0.9])) == 0.25
    # Loss: +0.9% then +1.5% (relative): the second is noticeable; +0.5% then +50%.
    assert A.prunable("val_loss", rows("val_loss", [2.0, 2.018, 2.03])) == 0.25
    assert A.prunable("val_loss", rows("val_loss", [1.0, 1.005, 1.5])) == 0.25
    # Against a control at the same round.
    control = rows("val_loss", [2.0, 2.5, 2.5])
    assert A.prunable("val_loss", rows("val_loss", [2.0, 2.51, 2.52]), control=control) == 0.5


def test_retained_prunable_is_relative_for_accuracy_too():
    # Accuracy 0.8 -> 0.70 keeps 87.5%: within 85%, not within 90%.
    r = rows("val_accuracy", [0.8, 0.75, 0.70, 0.6])
    assert A.retained_prunable("val_accuracy", r, 0.85) == 0.5
    assert A.retained_prunable("val_accuracy", r, 0.90) == 0.25
    # Loss 2.0 -> 2.2 is a 10% drop: kept at 90% exactly, not beyond.
    assert A.retained_prunable("val_loss", rows("val_loss", [2.0, 2.2, 2.4]), 0.90) == 0.25


class DynamicsStub:
    """The Data methods vacuous_seeds reads: one task, two seeds, a checkpoint at step 100 of 400."""

    def __init__(self, arms):
        self.seeds = {"k_relation": [0, 1]}
        self.final_step = {("k_relation", 0): 400, ("k_relation", 1): 400}
        self._arms = arms  # {(seed, arm): rows}

    def checkpoint_steps(self, task, seed):
        return [100, 400]

    def arm(self, task, seed, arm, step=None):
        return self._arms.get((seed, arm)) if step == 100 else None

    def arms(self, task, seed, step=None):
        return sorted(a for (s, a) in self._arms if s == seed) if step == 100 else []


def test_a_checkpoint_with_nothing_to_lose_is_vacuous():
    flat = rows("val_accuracy", [0.2, 0.2, 0.21, 0.2])      # at chance: every round keeps 85% of 0.2
    learned = rows("val_accuracy", [0.9, 0.88, 0.5, 0.3])   # pruning costs it
    d = DynamicsStub({(0, "importance"): flat, (0, "random_seed1"): flat, (0, "random_seed2"): flat,
                      (1, "importance"): learned, (1, "random_seed1"): flat})
    assert A.vacuous_seeds(d, "k_relation", 0.25, 0.85) == {0}
    # One order with something to lose is enough to keep the seed.
    d = DynamicsStub({(0, "importance"): flat, (0, "random_seed1"): learned})
    assert A.vacuous_seeds(d, "k_relation", 0.25, 0.85) == set()


# ---- claims.py: words ------------------------------------------------------------------------------------


def test_seed_word_and_count_word():
    holds_up = V.Verdict(V.HOLDS, "", effect=0.1)
    holds_down = V.Verdict(V.HOLDS, "", effect=-0.1)
    assert C.seed_word(holds_up, "worse", "better") == "worse"
    assert C.seed_word(holds_down, "worse", "better") == "better"
    assert C.seed_word(V.Verdict(V.DOES_NOT_HOLD, ""), "a", "b", small="within") == "within"
    # Claimed +1, significant and large the other way: the negative word, never "within".
    other = V.seed_claim({s: 0.5 for s in range(5)}, {s: 0.2 + 0.01 * s for s in range(5)}, level=0.05,
                         threshold=0.05, test="t", direction=+1)
    assert other.outcome == V.DOES_NOT_HOLD and C.seed_word(other, "more", "fewer") == "fewer"
    assert C.seed_word(V.Verdict(V.INCONCLUSIVE, ""), "a", "b") == "not resolved"
    assert C.count_word([holds_up, V.Verdict(V.DOES_NOT_HOLD, ""), holds_down]) == "holds in 2 of 3 seeds"


def test_survival_claim_is_stratified_by_layer():
    # Two layers of 4 heads in each of 3 models: L0 keeps layer 0 only; the specialised head sits in layer 0.
    # Across layers it is always kept while 4 of the other 7 are not; within its layer all 4 are kept.
    roles = np.array(["positional", "none", "none", "none", "none", "none", "none", "none"], dtype=object)
    kept = np.array([True, True, True, True, False, False, False, False])
    layer = np.repeat(np.arange(2), 4)
    v, (spec, rest) = A.survival_claim([(roles, kept, layer)] * 3)
    assert (spec, rest) == (1.0, pytest.approx(3 / 7))
    # Within layer 0 every head is kept: no permutation can differ, p = 1, nothing shown.
    assert v.p == 1.0 and v.outcome == V.INCONCLUSIVE


def test_merged_provenance_keeps_each_part_and_sums_the_wall_time():
    from pruning import collect
    whole = {"commit": "abc", "tasks": "grammar induction", "date": "2026-12-05", "machine": "Xeon, 2 cores",
             "run_sh_wall_seconds": "3600"}
    second = {"commit": "abc", "tasks": "text", "date": "2026-12-06", "machine": "EPYC, 2 cores",
              "run_sh_wall_seconds": "1800"}
    m = collect.merged_provenance(whole, second)
    assert m["tasks"] == "grammar text induction"  # the studies' order, not the parts'
    assert m["run_sh_wall_seconds"] == "5400"
    assert m["date"] == "2026-12-05; 2026-12-06"
    assert (m["part1_tasks"], m["part2_tasks"]) == ("grammar induction", "text")
    # Collecting a part again replaces it instead of adding a third part.
    again = collect.merged_provenance(m, {**second, "run_sh_wall_seconds": "2000"})
    assert "part3_tasks" not in again and again["part2_run_sh_wall_seconds"] == "2000"
    assert again["run_sh_wall_seconds"] == "5600"
    # A part without a measured wall time leaves the total unknown rather than too small.
    assert collect.merged_provenance(whole, {**second, "run_sh_wall_seconds": ""})["run_sh_wall_seconds"] == ""


def test_a_part_from_another_commit_is_refused(tmp_path):
    from pruning import collect
    for name in collect.DATA_FILES:
        (tmp_path / f"{name}.csv").write_text("task,seed\ngrammar,0\ntext,0\n")
    (tmp_path / "provenance.csv").write_text("key,value\ncommit,abc\nuncommitted_source_changes,no\n")
    kept = collect.kept_part(str(tmp_path), ["text"], "abc")
    assert kept["tasks"] == ["grammar"] and all(r["task"] == "grammar" for r in kept["rows"]["setup"])
    with pytest.raises(SystemExit):
        collect.kept_part(str(tmp_path), ["text"], "def")
    assert collect.kept_part(str(tmp_path), ["grammar", "text"], "def") is None  # nothing else to keep
