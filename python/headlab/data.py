"""headlab's data in numpy, row for row as the binary builds it (src/data/): any batch of any
split of any task, so what a model sees in training, and a split's loss computed in Python, are
exactly the binary's.

    b = batch(ckpt.config, "train", 7)             # Batch: tokens, targets [B, T] int32, ...
    ds = make_dataset(ckpt.config)                 # many batches of one config
    ds.batch("val", 0, 32).gold_head
    batches = eval_batches(ckpt.config, "val")     # [(tokens, targets, labels, key_padding), ...]

    text      a byte-level corpus (text.cpp): contiguous blocks [0, train) [train, train+val)
              [train+val, n) of the file; training windows start at RowRng offsets in the train
              block; val/test hold W = (block - 1) // T non-overlapping windows, window k of the
              split at tile (k * stride) mod W;
    k_relation, induction, reverse, sort, grammar, classify
              the generated tasks (tasks.py; src/data/<family>.cpp, synthetic.cpp);
    translate sentence pairs in token-budget batches (translation.py; translation.cpp), with the
              checkpoint's tokenizer: make_dataset(ckpt), eval_batches(ckpt, "val").
"""
from __future__ import annotations

import math
import os

import numpy as np

from .tasks import EVAL_EXAMPLES, SPLITS, Batch, RowRng, make_task


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


class TextData:
    """The byte-level text dataset (text.cpp) of a config: train windows at RowRng offsets in the
    train block, val/test windows the fixed tiles of text_windows."""

    layout = ()
    pad_token = 0

    def __init__(self, config: dict):
        d = config.get("data", {})
        if d.get("tokenizer", "bytes") != "bytes":  # headlab's sentencepiece tokens are not rebuilt here yet
            raise ValueError(f"data.tokenizer = {d['tokenizer']!r}: python/headlab reads byte-level text only")
        self.seq_len, self.seed = int(d.get("seq_len", 128)), int(d.get("seed", 0))
        self.vocab_size = 256
        with open(corpus_path(d.get("path", "bible")), "rb") as f:
            self.data = f.read()
        self.train_fraction = float(d.get("train_fraction", 0.9))
        self.val_fraction = float(d.get("val_fraction", 0.05))
        self._windows = {}

    def eval_windows(self, split: str):
        """tokens, targets [W, T] of a val/test split, in headlab's order."""
        if split not in self._windows:
            self._windows[split] = text_windows(self.data, self.seq_len, self.train_fraction, self.val_fraction,
                                                split)
        return self._windows[split]

    def eval_batch_count(self, split: str, batch_size: int) -> int:
        if batch_size <= 0:
            raise ValueError(f"batch_size={batch_size} must be positive")
        return 0 if split == "train" else -(-self.eval_windows(split)[0].shape[0] // batch_size)

    def token_label(self, token: int) -> str:
        """The byte as a character; \\n for a newline, \\xHH outside printable ASCII (text.cpp)."""
        if token == 10:
            return "\\n"
        return chr(token) if 32 <= token < 127 else f"\\x{token & 0xFF:02x}"

    def batch(self, split: str, batch_index: int, batch_size: int) -> Batch:
        """TextDataset::fill_batch(split, batch_index, batch of batch_size)."""
        if split not in SPLITS:
            raise ValueError(f"split must be train, val or test, got {split!r}")
        if batch_index < 0 or batch_size <= 0:
            raise ValueError(f"text: batch_index={batch_index} must be >= 0 and batch_size={batch_size} positive")
        B, T = batch_size, self.seq_len
        out = Batch(tokens=np.zeros((B, T), np.int32), targets=np.full((B, T), -1, np.int32))
        if split == "train":
            end = math.floor(float(len(self.data)) * self.train_fraction)
            arr = np.frombuffer(self.data, dtype=np.uint8)
            for r in range(B):
                start = RowRng(self.seed, SPLITS["train"], batch_index, r).below(end - T)
                out.tokens[r] = arr[start:start + T]
                out.targets[r] = arr[start + 1:start + T + 1]
            return out
        tokens, targets = self.eval_windows(split)
        rows = tokens[batch_index * B:(batch_index + 1) * B]  # rows past the last window stay padding
        out.tokens[:len(rows)] = rows
        out.targets[:len(rows)] = targets[batch_index * B:(batch_index + 1) * B]
        return out


def make_dataset(config, tokenizer=None):
    """The dataset a run config describes (make_dataset in src/train/setup.cpp): a TextData for
    data.task = "text", a translation.TranslationData for "translate", else the generated task
    (tasks.make_task). Each has .batch(split, batch_index, batch_size),
    .eval_batch_count(split, batch_size), .vocab_size, .seq_len, .layout and .token_label(token).
    `config` may be a Checkpoint, whose tokenizer translate then uses (else pass `tokenizer`, a
    headlab.tokenizer one: translate needs the run's, which Python does not train)."""
    if hasattr(config, "params"):  # a Checkpoint
        if tokenizer is None and config.config.get("data", {}).get("task") == "translate":
            from .tokenizer import tokenizer_of
            tokenizer = tokenizer_of(config)
        config = config.config
    task = config.get("data", {}).get("task", "text")
    if task == "text":
        return TextData(config)
    if task == "translate":
        from .translation import TranslationData
        if tokenizer is None:
            d = config.get("data", {})
            if d.get("tokenizer", "bytes") != "bytes":
                raise ValueError("translate with data.tokenizer = sentencepiece needs the run's tokenizer "
                                 "(pass the Checkpoint, or tokenizer=headlab.tokenizer.tokenizer_of(ckpt))")
            from .tokenizer import ByteTokenizer
            tokenizer = ByteTokenizer(True)
        return TranslationData(config, tokenizer)
    return make_task(config)


def batch(config, split: str, batch_index: int, batch_size: int | None = None, tokenizer=None) -> Batch:
    """Batch `batch_index` of `split` ("train", "val" or "test") exactly as the binary's
    Dataset::fill_batch gives it for this config (or Checkpoint), every field included;
    batch_size defaults to train.batch_size (translate's batches have their own shapes). For many
    batches of one config, make_dataset(config).batch(...) once."""
    cfg = config.config if hasattr(config, "params") else config
    B = batch_size or int(cfg.get("train", {}).get("batch_size", 16))
    return make_dataset(config, tokenizer).batch(split, batch_index, B)


def classify_examples(config: dict, split: str, count: int = EVAL_EXAMPLES):
    """tokens [N,T], labels [N], key_padding [N,T] of the classify task's fixed val/test set."""
    task = make_task(config)
    rows = [task.example(split, i) for i in range(count)]
    return (np.concatenate([r.tokens for r in rows]), np.concatenate([r.labels for r in rows]),
            np.concatenate([r.key_padding for r in rows]))


def eval_batches(config, split: str = "val", batch_size: int | None = None, tokenizer=None):
    """The batches `headlab eval --split SPLIT` scores (the whole split), as (tokens, targets,
    labels, key_padding) numpy tuples, labels and key_padding None where the task has none, and
    translate's with (source_tokens, source_padding) after them. The loss over a split is the
    sum of per-target losses over all batches / the number of targets; rows past the end of the
    split have every target (and label) -1. `config` may be a Checkpoint (translate: its tokenizer)."""
    cfg = config.config if hasattr(config, "params") else config
    B = batch_size or int(cfg.get("train", {}).get("batch_size", 16))
    dataset = make_dataset(config, tokenizer)
    return [dataset.batch(split, i, B).eval_tuple() for i in range(dataset.eval_batch_count(split, B))]
