"""The machinery of headlab's generated tasks in Python (tasks.py, grammar_task.py): the
counter-based randomness (include/headlab/common/hash.h, RowRng in include/headlab/data/batch.h),
the Batch, and SyntheticTask (src/data/synthetic.cpp: example draws, the content-hash split,
the fixed training set, eval rows past the eval set).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

SPLITS = {"train": 0, "val": 1, "test": 2}  # headlab::Split
OPTIONAL_FIELDS = ("labels", "key_padding", "gold_head", "gold_antecedent", "is_delimiter")
EVAL_EXAMPLES = 2048  # TaskOptions::eval_examples: val and test hold this many examples each

_MASK = (1 << 64) - 1
_MAX_DRAWS = 1 << 16            # synthetic.cpp kMaxDraws
_PICK_SALT = 0x7F4A7C159E3779B9  # synthetic.cpp kPickSalt
_HASH_START = 0x686561646C616273  # synthetic.cpp content_hash's first key


# ---- randomness: include/headlab/common/hash.h and RowRng (include/headlab/data/batch.h) --------

def splitmix64(x: int) -> int:
    """headlab::splitmix64 on a Python int, modulo 2^64."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class RowRng:
    """headlab's RowRng: a splitmix64 stream keyed by (seed, split, batch_index, row)."""

    __slots__ = ("state",)

    def __init__(self, seed: int, split: int, batch_index: int, row: int):
        h = splitmix64(seed & _MASK)
        h = splitmix64(h ^ split)
        h = splitmix64(h ^ (batch_index & _MASK))
        self.state = splitmix64(h ^ (row & _MASK))

    def next(self) -> int:
        r = splitmix64(self.state)
        self.state = (self.state + 1) & _MASK
        return r

    def below(self, n: int) -> int:
        """Uniform in [0, n): the high 64 bits of next() * n."""
        return (self.next() * n) >> 64

    def uniform(self) -> float:
        """[0, 1): the top 53 bits of next() times 2^-53 (exact in a double, as in C++)."""
        return (self.next() >> 11) * 2.0 ** -53


def content_hash(tokens, targets, label=None) -> int:
    """synthetic.cpp's content_hash: splitmix64 over the tokens, the targets (as uint32, so -1 is
    0xFFFFFFFF) and, for tasks with labels, the label."""
    h = splitmix64(_HASH_START)
    for t in tokens:
        h = splitmix64(h ^ (t & 0xFFFFFFFF))
    for t in targets:
        h = splitmix64(h ^ (t & 0xFFFFFFFF))
    if label is not None:
        h = splitmix64(h ^ (label & 0xFFFFFFFF))
    return h


def split_of_example(h: int) -> str:
    """The split an example with content hash h belongs to: h mod 16 == 0 val, 1 test, else train."""
    return {0: "val", 1: "test"}.get(h % 16, "train")


# ---- the batch -----------------------------------------------------------------------------

@dataclass
class Batch:
    """headlab::Batch as numpy arrays. Fields the task does not write are None."""
    tokens: np.ndarray                       # [B, T] int32
    targets: np.ndarray                      # [B, T] int32, -1 = not scored
    labels: np.ndarray | None = None         # [B] int32 (classify), -1 past the eval set
    key_padding: np.ndarray | None = None    # [B, T] uint8, 1 = real token (classify)
    gold_head: np.ndarray | None = None      # [B, T] int32 (grammar), -1 = none
    gold_antecedent: np.ndarray | None = None  # [B, T] int32 (grammar, classify), -1 = none
    is_delimiter: np.ndarray | None = None   # [B, T] uint8 (grammar)
    source_tokens: np.ndarray | None = None  # [B, S] int32 (translate: the encoder's input)
    source_padding: np.ndarray | None = None  # [B, S] uint8, 1 = real source token (translate)

    def present(self) -> dict:
        """The fields the task writes, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def eval_tuple(self):
        """(tokens, targets, labels, key_padding), what split_loss and head_scores read, and
        (source_tokens, source_padding) after them for a task with a source side (translate)."""
        if self.source_tokens is not None:
            return self.tokens, self.targets, self.labels, self.key_padding, self.source_tokens, self.source_padding
        return self.tokens, self.targets, self.labels, self.key_padding


_INT_FIELDS = ("tokens", "targets", "labels", "gold_head", "gold_antecedent")


def _empty_batch(B: int, T: int, layout: tuple, pad: int) -> Batch:
    b = Batch(tokens=np.full((B, T), pad, np.int32), targets=np.full((B, T), -1, np.int32))
    for name in layout:
        shape = (B,) if name == "labels" else (B, T)
        dtype = np.int32 if name in _INT_FIELDS else np.uint8
        setattr(b, name, np.full(shape, -1 if dtype == np.int32 else 0, dtype))
    return b


class _Row:
    """One example under construction: what ExampleView points at, reset (tokens = pad, targets,
    label and gold fields -1, flags 0)."""

    def __init__(self, T: int, layout: tuple, pad: int):
        self.tokens = [pad] * T
        self.targets = [-1] * T
        self.label = -1 if "labels" in layout else None
        for name in ("key_padding", "is_delimiter"):
            setattr(self, name, [0] * T if name in layout else None)
        for name in ("gold_head", "gold_antecedent"):
            setattr(self, name, [-1] * T if name in layout else None)


# ---- the shared machinery: synthetic.cpp ------------------------------------------------------

class SyntheticTask:
    """What every generated task shares (SyntheticTask in include/headlab/data/tasks.h): example
    ids, the split of an example by its content hash, fixed val/test sets of 2048 examples."""

    layout: tuple = ()  # the optional Batch fields the task writes (BatchLayout), in OPTIONAL_FIELDS

    def __init__(self, task: str, seq_len: int, seed: int, train_examples: int = 0,
                 eval_examples: int = EVAL_EXAMPLES):
        if seq_len <= 0:
            raise ValueError(f"{task}: data.seq_len={seq_len} must be positive")
        if train_examples < 0:
            raise ValueError(f"{task}: data.train_examples={train_examples} must be >= 0")
        self.task, self.seq_len, self.seed = task, seq_len, seed & _MASK
        self.train_examples, self.eval_examples = train_examples, eval_examples
        self.vocab_size = 0  # set by each task
        self.pad_token = 0   # what fills a reset row: 0, or V - 1 for reverse, sort and classify

    def token_label(self, token: int) -> str:
        """A readable label for a token (Dataset::token_label): the id unless the task names it."""
        return str(token)

    def eval_batch_count(self, split: str, batch_size: int) -> int:
        """Dataset::eval_batches: batches of batch_size that cover val/test once (0 for train)."""
        if batch_size <= 0:
            raise ValueError(f"batch_size={batch_size} must be positive")
        return 0 if split == "train" else -(-self.eval_examples // batch_size)

    def _generate(self, rng: RowRng, example_id: int, row: _Row) -> None:
        raise NotImplementedError

    def _draw(self, split: str, example_id: int) -> _Row:
        """write_example: draw from RowRng(seed, split, id, 0) until the example is one of `split`."""
        rng = RowRng(self.seed, SPLITS[split], example_id, 0)
        for _ in range(_MAX_DRAWS):
            row = _Row(self.seq_len, self.layout, self.pad_token)
            self._generate(rng, example_id, row)
            if split_of_example(content_hash(row.tokens, row.targets, row.label)) == split:
                return row
        raise ValueError(f"{self.task}: found no {split} example in {_MAX_DRAWS} draws: the example space "
                         "is too small to split three ways")

    def example(self, split: str, example_id: int) -> Batch:
        """Example `example_id` of `split` (its content hash puts it there), as a one-row Batch."""
        out = _empty_batch(1, self.seq_len, self.layout, self.pad_token)
        self._put(out, 0, self._draw(split, example_id))
        return out

    def batch(self, split: str, batch_index: int, batch_size: int) -> Batch:
        """Dataset::fill_batch(split, batch_index, batch of batch_size): row r is example
        batch_index * B + r (train with data.train_examples = N > 0: a seeded pick in [0, N));
        val/test rows past the 2048 examples are reset (every target and label -1)."""
        if split not in SPLITS:
            raise ValueError(f"split must be train, val or test, got {split!r}")
        if batch_index < 0 or batch_size <= 0:
            raise ValueError(f"{self.task}: batch_index={batch_index} must be >= 0 and batch_size={batch_size} "
                             "positive")
        out = _empty_batch(batch_size, self.seq_len, self.layout, self.pad_token)
        for r in range(batch_size):
            example_id = batch_index * batch_size + r
            if split == "train" and self.train_examples > 0:
                pick = RowRng(self.seed ^ _PICK_SALT, SPLITS[split], batch_index, r)
                example_id = pick.below(self.train_examples)
            if split != "train" and example_id >= self.eval_examples:
                continue  # past the fixed eval set: the reset row
            self._put(out, r, self._draw(split, example_id))
        return out

    @staticmethod
    def _put(out: Batch, r: int, row: _Row) -> None:
        out.tokens[r] = row.tokens
        out.targets[r] = row.targets
        if out.labels is not None:
            out.labels[r] = row.label
        for name in ("key_padding", "gold_head", "gold_antecedent", "is_delimiter"):
            if getattr(out, name) is not None:
                getattr(out, name)[r] = getattr(row, name)
