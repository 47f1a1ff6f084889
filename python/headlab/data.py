"""headlab's evaluation data in numpy, row for row as the binary builds it (src/data/), so a
split's loss computed in Python is the loss `headlab eval` reports:

    text      the val/test windows of a byte-level corpus (text.cpp): contiguous blocks
              [0, train) [train, train+val) [train+val, n) of the file, W = (block - 1) // T
              non-overlapping windows per block, window k of the split at tile (k * stride) mod W;
    classify  the fixed val/test examples of the encoder task (classify.cpp, synthetic.cpp).

    batches = eval_batches(ckpt.config, "val")      # [(tokens, targets, labels, key_padding), ...]
Other generated tasks are not reimplemented here.
"""
from __future__ import annotations

import math
import os

import numpy as np

SPLITS = {"train": 0, "val": 1, "test": 2}
_MASK = (1 << 64) - 1


def corpus_path(path: str) -> str:
    """data.path as headlab resolves it: "bible" is the KJV export in the user cache."""
    if path == "bible" or os.path.normpath(path) == os.path.normpath("datasets/bible-kjv.txt"):
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = os.path.join(xdg, "headlab") if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.cache/headlab")
        return os.path.join(base, "bible-kjv.txt")
    return path


def text_windows(data: bytes, seq_len: int, train_fraction: float, val_fraction: float, split: str):
    """tokens, targets [W, T] (uint8 as int64) of a text split's eval windows, in headlab's order."""
    n = len(data)
    train_end = math.floor(float(n) * train_fraction)
    val_end = math.floor(float(n) * (train_fraction + val_fraction))
    begin, end = {"val": (train_end, val_end), "test": (val_end, n)}[split]
    w = (end - begin - 1) // seq_len
    stride = max(1, math.floor(w * 0.6180339887498949 + 0.5))  # llround of a positive number
    while math.gcd(stride, w) != 1:
        stride += 1
    arr = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    starts = begin + ((np.arange(w, dtype=np.int64) * stride) % w) * seq_len
    idx = starts[:, None] + np.arange(seq_len)[None, :]
    return arr[idx], arr[idx + 1]


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class RowRng:
    """headlab's RowRng (include/headlab/data/batch.h): a splitmix64 stream keyed by
    (seed, split, batch_index, row)."""

    def __init__(self, seed: int, split: int, batch_index: int, row: int):
        h = _splitmix64(seed & _MASK)
        h = _splitmix64(h ^ split)
        h = _splitmix64(h ^ (batch_index & _MASK))
        self.state = _splitmix64(h ^ (row & _MASK))

    def next(self) -> int:
        r = _splitmix64(self.state)
        self.state = (self.state + 1) & _MASK
        return r

    def below(self, n: int) -> int:
        return (self.next() * n) >> 64


def _content_hash(tokens, targets, label) -> int:
    h = _splitmix64(0x686561646C616273)
    for t in tokens:
        h = _splitmix64(h ^ (t & 0xFFFFFFFF))
    for t in targets:
        h = _splitmix64(h ^ (t & 0xFFFFFFFF))
    if label is not None:
        h = _splitmix64(h ^ (label & 0xFFFFFFFF))
    return h


def classify_examples(config: dict, split: str, count: int = 2048):
    """tokens [N,T], labels [N], key_padding [N,T] of the classify task's fixed val/test set."""
    d, m = config["data"], config["model"]
    T, seed = int(d["seq_len"]), int(d.get("seed", 0))
    vocab = int(d.get("vocab_size", 0)) or int(m.get("vocab_size", 0)) or 16
    items = vocab - 3
    max_len = int(d.get("max_len", 0)) or (T - 2) // 2
    min_len = int(d.get("min_len", 0)) or max_len
    cls, sep, pad = vocab - 3, vocab - 2, vocab - 1
    want = SPLITS[split]
    tokens = np.full((count, T), pad, dtype=np.int64)
    labels = np.zeros(count, dtype=np.int64)
    key_padding = np.zeros((count, T), dtype=np.uint8)

    def draw_item(rng, a):
        while True:
            item = rng.below(items)
            if item not in a:
                return item

    for example in range(count):
        rng = RowRng(seed, want, example, 0)
        for _ in range(1 << 16):
            n = min_len + rng.below(max_len - min_len + 1)
            a = []
            for _i in range(n):
                a.append(draw_item(rng, a))
            b = list(a)
            for i in range(n - 1, 0, -1):
                j = rng.below(i + 1)
                b[i], b[j] = b[j], b[i]
            consistent = example % 2 == 1
            if not consistent:  # C++17: the right side of `b[below(n)] = draw_item(...)` runs first
                item = draw_item(rng, a)
                b[rng.below(n)] = item
            row = [cls] + a + [sep] + b + [pad] * (T - 2 * n - 2)
            label = 1 if consistent else 0
            h = _content_hash(row, [-1] * T, label)
            if {0: 1, 1: 2}.get(h % 16, 0) == want:
                break
        else:
            raise RuntimeError(f"classify: no {split} example found for id {example}")
        tokens[example] = row
        labels[example] = label
        key_padding[example, :2 * n + 2] = 1
    return tokens, labels, key_padding


def eval_batches(config: dict, split: str = "val", batch_size: int | None = None):
    """The batches `headlab eval --split SPLIT` scores, as (tokens, targets, labels, key_padding)
    numpy tuples (targets or labels, key_padding None where the task has none). The loss over a
    split is the sum of per-target losses over all batches / the number of targets; rows past
    the end of the split have every target -1."""
    d = config["data"]
    B = batch_size or int(config["train"]["batch_size"])
    task = d.get("task", "text")
    if task == "text":
        with open(corpus_path(d["path"]), "rb") as f:
            data = f.read()
        tokens, targets = text_windows(data, int(d["seq_len"]), float(d.get("train_fraction", 0.9)),
                                       float(d.get("val_fraction", 0.05)), split)
        labels = key_padding = None
    elif task == "classify":
        tokens, labels, key_padding = classify_examples(config, split)
        targets = None
    else:
        raise NotImplementedError(f"eval_batches: data.task = {task} is not reimplemented in Python "
                                  "(text and classify are)")
    n = tokens.shape[0]
    out = []
    for start in range(0, n, B):
        stop = min(start + B, n)
        pad_rows = B - (stop - start)

        def rows(x, fill):
            if x is None:
                return None
            if pad_rows == 0:
                return x[start:stop]
            extra = np.full((pad_rows,) + x.shape[1:], fill, dtype=x.dtype)
            return np.concatenate([x[start:stop], extra])

        pad_token = (int(config["model"]["vocab_size"]) - 1) if task == "classify" else 0
        out.append((rows(tokens, pad_token), rows(targets, -1), rows(labels, -1), rows(key_padding, 0)))
    return out
