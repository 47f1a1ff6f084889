"""experiments/pruning: Michel et al. 2019's Tables 1 and 2 on the task metric, by the shared rules
(docs/verdicts.md): each head removed alone (Table 1), each layer reduced to its best head (Table
2), a paired test over the analysed examples at LEVEL_MICHEL, uncorrected as Michel's, and
removal_class with a practical threshold: hurts / helps / no practical change /
unresolved."""
import math
from statistics import NormalDist

import numpy as np

from stats import paired_t
from verdicts import HELPS, HURTS, LEVEL_MICHEL, NO_CHANGE, PRACTICAL, UNRESOLVED, removal_class, \
    removal_counts

CLASSES = (HURTS, HELPS, NO_CHANGE, UNRESOLVED)


def threshold_of(kind):
    """The practical threshold of a task metric: accuracy points, or loss relative to the full model's."""
    return PRACTICAL["accuracy"] if kind == "accuracy" else PRACTICAL["relative_loss"]


def effects(diffs, full, kind, level=LEVEL_MICHEL):
    """diffs [K, E] (metric with the mask - without, per example), full [E] -> (effect [K], p [K],
    lo [K], hi [K]): the mean difference (accuracy: in points as a fraction; loss: relative to the
    full model's mean loss), the two-sided paired test's p (normal approximation: E is about 1024),
    and its (1 - level) interval, on the effect's scale."""
    diffs = np.asarray(diffs, dtype=float)
    mean, p = paired_t(diffs)
    se = diffs.std(axis=1, ddof=1) / math.sqrt(diffs.shape[1])
    z = NormalDist().inv_cdf(1 - level / 2)
    scale = 1.0 if kind == "accuracy" else float(np.mean(full))
    if not scale > 0:
        scale = math.nan  # a loss of 0: no relative effect
    return mean / scale, p, (mean - z * se) / scale, (mean + z * se) / scale


def classify(effect, p, lo, hi, kind, level=LEVEL_MICHEL):
    """[K] removal classes of removal_class at `level` with the task metric's threshold."""
    return [removal_class(float(pi), float(e), level=level, threshold=threshold_of(kind),
                          higher_is_better=kind == "accuracy", interval=(float(a), float(b)))
            for e, pi, a, b in zip(effect, p, lo, hi)]


class Table1:
    """One model's heads, each removed alone: kind, effect/p/lo/hi [L, H], cls [L, H] (object)."""

    def __init__(self, d, task, seed):
        self.kind, full, ablated, _ = d.task_examples(task, seed)
        L, H, E = ablated.shape
        e, p, lo, hi = effects(ablated.reshape(L * H, E) - full[None, :], full, self.kind)
        self.effect, self.p, self.lo, self.hi = (x.reshape(L, H) for x in (e, p, lo, hi))
        self.cls = np.array(classify(e, p, lo, hi, self.kind), dtype=object).reshape(L, H)
        self.counts = removal_counts(self.cls.ravel().tolist())
        self.total = L * H


class Table2:
    """One model's layers, each reduced to its best head (the best mean task metric alone in the
    layer, on the same examples it is tested on, as Michel: it favours the head): best [L], and
    effect/p/lo/hi/cls [L]."""

    def __init__(self, d, task, seed):
        self.kind, full, _, alone = d.task_examples(task, seed)
        means = alone.mean(axis=2)
        self.best = [int(np.argmax(m) if self.kind == "accuracy" else np.argmin(m)) for m in means]
        diffs = np.stack([alone[layer, b] - full for layer, b in enumerate(self.best)])
        self.effect, self.p, self.lo, self.hi = effects(diffs, full, self.kind)
        self.cls = classify(self.effect, self.p, self.lo, self.hi, self.kind)
        self.counts = removal_counts(self.cls)
        self.total = len(self.best)


_cache = {}


def table1(d, task, seed):
    key = (id(d), "t1", task, seed)
    if key not in _cache:
        _cache[key] = Table1(d, task, seed)
    return _cache[key]


def table2(d, task, seed):
    key = (id(d), "t2", task, seed)
    if key not in _cache:
        _cache[key] = Table2(d, task, seed)
    return _cache[key]


def effect_unit(kind):
    """The unit of an effect in words."""
    return "accuracy points (as a fraction)" if kind == "accuracy" else "loss relative to the full model's"
