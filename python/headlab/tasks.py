"""headlab's generated tasks in Python, row for row as the binary builds them (src/data/, the rules
in datasets/README.md): k_relation, induction, reverse, sort, grammar and classify.

    task = make_task(ckpt.config)                    # from a resolved run config ([data], [model])
    b = task.batch("train", 7, 32)                   # = Dataset::fill_batch(train, 7, batch of 32)
    b.tokens, b.targets, b.gold_head                 # numpy arrays, None where the task has none
    task.example("val", 0)                           # example 0 of val, as a one-row Batch

Everything here is exact: the randomness is headlab's counter-based RowRng (splitmix64 over
Python ints masked to 64 bits; `below` by the multiply-high method, `uniform` from the top 53
bits, as include/headlab/data/batch.h), and each generator draws in the C++ order, so a batch
equals the binary's in every token and field (python/tests/test_task_batches.py checks it).
"""
from __future__ import annotations

from .grammar_task import GrammarTask, grammar_lexicon
from .task_base import EVAL_EXAMPLES, OPTIONAL_FIELDS, SPLITS, Batch, RowRng, SyntheticTask

__all__ = ["EVAL_EXAMPLES", "OPTIONAL_FIELDS", "SPLITS", "TASKS", "Batch", "RowRng", "grammar_lexicon", "make_task"]

# ---- k_relation: k_relation.cpp ----------------------------------------------------------------

class KRelationTask(SyntheticTask):
    """target[t] = (a_1 - 1*a_2 - 2*a_3 - ...) mod p, a_i = x[t - o_i], for t >= max(o_i)."""

    def __init__(self, seq_len, seed, vocab_size, offsets, train_examples=0):
        super().__init__("k_relation", seq_len, seed, train_examples)
        self.vocab_size = vocab_size or 16
        self.offsets = [int(o) for o in offsets]
        if not self.offsets or any(o <= 0 or o >= seq_len for o in self.offsets) \
                or len(set(self.offsets)) != len(self.offsets):
            raise ValueError(f"k_relation: data.offsets={self.offsets} must be distinct, in [1, {seq_len})")
        self.first_scored = max(self.offsets)

    def _generate(self, rng, example_id, row):
        p, o = self.vocab_size, self.offsets
        x = row.tokens
        for t in range(self.seq_len):
            x[t] = rng.below(p)
        for t in range(self.first_scored, self.seq_len):
            s = x[t - o[0]] - sum(i * x[t - o[i]] for i in range(1, len(o)))
            row.targets[t] = s % p  # Python's % is C++'s (s % p + p) % p


# ---- induction: induction.cpp ------------------------------------------------------------------

class InductionTask(SyntheticTask):
    """A random prefix, then copies of earlier stretches; target[t] = x[t+1] where every earlier
    occurrence of the last k tokens was followed by it (and -1 elsewhere)."""

    def __init__(self, seq_len, seed, vocab_size, k, train_examples=0):
        super().__init__("induction", seq_len, seed, train_examples)
        self.vocab_size, self.k = vocab_size or 32, k
        if k < 1 or 4 * (k + 1) > seq_len:
            raise ValueError(f"induction: data.k={k} needs data.seq_len >= {4 * (k + 1)}, got {seq_len}")
        self.prefix_min = max(k + 1, seq_len // 4)
        self.prefix_max = max(self.prefix_min, seq_len // 2)
        self.copy_max = max(k + 1, seq_len // 2)

    def _generate(self, rng, example_id, row):
        T, k, V = self.seq_len, self.k, self.vocab_size
        x = [0] * (T + 1)  # x[T] only ever appears as a target

        def draw(lo, hi):
            return lo + rng.below(hi - lo + 1)

        t = draw(self.prefix_min, self.prefix_max)
        for i in range(t):
            x[i] = rng.below(V)
        while t <= T:
            length = min(draw(k + 1, self.copy_max), t)
            source = draw(0, t - length)
            j = 0
            while j < length and t <= T:
                x[t] = x[source + j]
                t += 1
                j += 1
            gap = draw(1, 2)  # drawn even when the row is full, as the C++ loop's initializer
            while gap > 0 and t <= T:
                x[t] = rng.below(V)
                t += 1
                gap -= 1
        row.tokens[:] = x[:T]
        for i in range(k - 1, T):
            nxt = self._determined_next(x, i)
            if nxt >= 0 and nxt == x[i + 1]:
                row.targets[i] = nxt

    def _determined_next(self, x, t):
        k, nxt = self.k, -1
        for s in range(k - 1, t):
            j = 0
            while j < k and x[s - j] == x[t - j]:
                j += 1
            if j < k:
                continue
            if nxt >= 0 and x[s + 1] != nxt:
                return -1
            nxt = x[s + 1]
        return nxt


# ---- reverse and sort: algorithmic.cpp -----------------------------------------------------------

class AlgorithmicTask(SyntheticTask):
    """a_1 .. a_n SEP y_1 .. y_n PAD ...; y = a reversed (reverse) or ascending (sort); only the
    n outputs are scored (SEP predicts y_1)."""

    def __init__(self, task, seq_len, seed, vocab_size, min_len=0, max_len=0, train_examples=0):
        super().__init__(task, seq_len, seed, train_examples)
        self.sort = task == "sort"
        self.vocab_size = vocab_size or 16
        if self.vocab_size < 3:
            raise ValueError(f"{task}: data.vocab_size={self.vocab_size} leaves no items")
        self.max_len = max_len or seq_len // 2
        self.min_len = min_len or self.max_len
        if not (1 <= self.max_len and 2 * self.max_len <= seq_len and 1 <= self.min_len <= self.max_len):
            raise ValueError(f"{task}: data.min_len={self.min_len}, max_len={self.max_len} need "
                             f"1 <= min_len <= max_len and 2*max_len <= data.seq_len={seq_len}")
        self.pad_token = self.vocab_size - 1

    def _generate(self, rng, example_id, row):
        T, V = self.seq_len, self.vocab_size
        n = self.min_len + rng.below(self.max_len - self.min_len + 1)
        x = row.tokens
        for i in range(n):
            x[i] = rng.below(V - 2)
        x[n] = V - 2
        y = sorted(x[:n]) if self.sort else x[n - 1::-1]
        for i in range(1, n + 1):  # y_i is the target at n-1+i and the token at n+i
            row.targets[n - 1 + i] = y[i - 1]
            if n + i < T:
                x[n + i] = y[i - 1]


# ---- classify: classify.cpp ----------------------------------------------------------------------

class ClassifyTask(SyntheticTask):
    """CLS a_1 .. a_n SEP b_1 .. b_n PAD ...; label 1 when b is a permutation of a (odd example
    ids), 0 when one b_j was then replaced by an item not in a (even ids)."""

    layout = ("labels", "key_padding", "gold_antecedent")

    def __init__(self, seq_len, seed, vocab_size, min_len=0, max_len=0, train_examples=0, n_classes=2):
        super().__init__("classify", seq_len, seed, train_examples)
        if n_classes != 2:
            raise ValueError(f"classify: the task has 2 classes but model.n_classes={n_classes}")
        self.vocab_size = vocab_size or 16
        self.items = self.vocab_size - 3
        self.max_len = max_len or (seq_len - 2) // 2
        self.min_len = min_len or self.max_len
        if not (1 <= self.max_len and 2 * self.max_len + 2 <= seq_len and 1 <= self.min_len <= self.max_len
                and self.items >= self.max_len + 1):
            raise ValueError(f"classify: data.min_len={self.min_len}, max_len={self.max_len}, "
                             f"vocab_size={self.vocab_size} need 1 <= min_len <= max_len, 2*max_len + 2 <= "
                             f"data.seq_len={seq_len} and vocab_size >= max_len + 4")
        self.pad_token = self.vocab_size - 1

    def token_label(self, token):
        V = self.vocab_size
        return {V - 3: "CLS", V - 2: "SEP", V - 1: "PAD"}.get(token, str(token))

    def _draw_item(self, rng, a):
        while True:  # by rejection: an item not in a
            item = rng.below(self.items)
            if item not in a:
                return item

    def _generate(self, rng, example_id, row):
        n = self.min_len + rng.below(self.max_len - self.min_len + 1)
        a = []
        for _ in range(n):
            a.append(self._draw_item(rng, a))
        b = list(a)
        for i in range(n - 1, 0, -1):
            j = rng.below(i + 1)
            b[i], b[j] = b[j], b[i]
        consistent = example_id % 2 == 1
        if not consistent:  # C++17 runs the right side of `b[below(n)] = draw_item(...)` first
            item = self._draw_item(rng, a)
            b[rng.below(n)] = item
        row.tokens[:2 * n + 2] = [self.vocab_size - 3] + a + [self.vocab_size - 2] + b
        row.label = 1 if consistent else 0
        row.key_padding[:2 * n + 2] = [1] * (2 * n + 2)
        for j in range(n):
            for i in range(n):
                if a[i] == b[j]:
                    row.gold_antecedent[n + 2 + j] = 1 + i


# ---- from a config: make_dataset in src/train/setup.cpp -----------------------------------------

TASKS = ("k_relation", "induction", "reverse", "sort", "grammar", "classify")


def make_task(config: dict) -> SyntheticTask:
    """The generated task a resolved run config describes (data.task one of TASKS), with the
    binary's defaults for keys a hand-written config leaves out."""
    d, m = config.get("data", {}), config.get("model", {})
    task = d.get("task", "text")
    seq_len, seed = int(d.get("seq_len", 128)), int(d.get("seed", 0))
    vocab = int(d.get("vocab_size", 0)) or int(m.get("vocab_size", 256))  # data.vocab_size 0 = model's
    min_len, max_len = int(d.get("min_len", 0)), int(d.get("max_len", 0))
    n_train = int(d.get("train_examples", 0))
    if task == "k_relation":
        t = KRelationTask(seq_len, seed, vocab, d.get("offsets", [1, 3]), n_train)
    elif task == "induction":
        t = InductionTask(seq_len, seed, vocab, int(d.get("k", 2)), n_train)
    elif task in ("reverse", "sort"):
        t = AlgorithmicTask(task, seq_len, seed, vocab, min_len, max_len, n_train)
    elif task == "grammar":
        t = GrammarTask(seq_len, seed, vocab, n_train)
    elif task == "classify":
        t = ClassifyTask(seq_len, seed, vocab, min_len, max_len, n_train, int(m.get("n_classes", 2)))
    else:
        raise ValueError(f"data.task = {task!r} is not a generated task (one of {', '.join(TASKS)})")
    model_vocab = int(m.get("vocab_size", 256))
    if t.vocab_size > model_vocab:
        raise ValueError(f"data.task {task} uses {t.vocab_size} token ids but model.vocab_size = {model_vocab}")
    return t
