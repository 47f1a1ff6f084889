"""headlab's translation data (data.task = "translate", src/data/translation.cpp) in numpy, batch
for batch as the binary builds it, given the checkpoint's tokenizer:

    data = TranslationData(ckpt.config, tokenizer_of(ckpt))
    b = data.batch("val", 0)      # Batch: source_tokens, source_padding [B,S]; tokens, targets,
                                  # key_padding [B,T]; the shape varies from batch to batch
    data.sentences("val")         # [(source ids, target ids)], corpus order

A pair with ids x1..xm (source) and y1..yn (target) is the row source = x1..xm </s>,
tokens = <s> y1..yn, targets = y1..yn </s>, <pad> (padding 0, target -1) past them. Pairs come
from two line-aligned files (data.path, data.target_path; blank pairs skipped; the leading
floor(n * train_fraction) pairs train, the next floor(n * val_fraction) val, the rest test; a
val/test pair whose source equals a training source dropped) or from the Bible export in the
user cache (data.path = "bible": <cache>/bible-pairs-<src>-<tgt>-val-<book>-test-<book>/<split>.tsv).
Training pairs longer than the caps (seq_len targets + 1, source_len sources + 1) are dropped,
val/test ones cut to them. Each split's rows are sorted by max(S, T) (ties: corpus order for
val/test, a seeded hash for train) and cut greedily into batches of rows x width <= batch_tokens;
train batch i is batch permuted(i mod n) of epoch i // n.
"""
from __future__ import annotations

import os

import numpy as np

from .task_base import SPLITS, Batch, splitmix64

_MASK = (1 << 64) - 1
_TIE_SALT = 0x7472616E736C61    # translation.cpp: the training sort's tie-break salt
_EPOCH_SALT = 0x65706F6368      # translation.cpp: the epoch permutation's key salt


def hash_combine(seed: int, value: int) -> int:
    """headlab::hash_combine."""
    return splitmix64(splitmix64(seed & _MASK) ^ (value & _MASK))


def permuted(i: int, n: int, key: int) -> int:
    """translation.cpp's permuted: a 4-round Feistel bijection of [0, n), cycle-walked."""
    half = 1
    while (1 << (2 * half)) < n:
        half += 1
    mask = (1 << half) - 1
    x = i
    while True:
        left, right = x >> half, x & mask
        for rnd in range(4):
            left, right = right, left ^ (hash_combine(key, (rnd << 32) | right) & mask)
        x = (left << half) | right
        if x < n:
            return x


def _split_lines(data: bytes) -> list:
    """Lines at b"\\n", a b"\\r" before it dropped, none after a final newline."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [l[:-1] if l.endswith(b"\r") else l for l in lines]


def _blank(line: bytes) -> bool:
    return line.strip(b" \t\v\f") == b""


def cache_dir() -> str:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg, "headlab") if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.cache/headlab")


def read_pairs(data: dict) -> dict:
    """split -> [(source text, target text)] of a translate [data] table, in corpus order."""
    path = data.get("path", "bible")
    out = {s: [] for s in SPLITS}
    if path == "bible":
        name = (f"bible-pairs-{data.get('source_module', 'engKJV2006eb')}-{data.get('target_module', 'spaRV1909eb')}"
                f"-val-{data.get('val_book', 'Ruth')}-test-{data.get('test_book', 'Mark')}")
        folder = os.path.join(cache_dir(), name)
        for split in SPLITS:
            with open(os.path.join(folder, f"{split}.tsv"), "rb") as f:
                for line in f.read().split(b"\n"):
                    if line:
                        fields = line.split(b"\t")
                        out[split].append((fields[1].decode("utf-8"), fields[2].decode("utf-8")))
        return out
    with open(path, "rb") as f:
        source = _split_lines(f.read())
    with open(data["target_path"], "rb") as f:
        target = _split_lines(f.read())
    if len(source) != len(target):
        raise ValueError(f"translate: {path} has {len(source)} lines but {data['target_path']} has {len(target)}")
    pairs = [(s, t) for s, t in zip(source, target) if not (_blank(s) or _blank(t))]
    n = len(pairs)
    n_train = int(n * float(data.get("train_fraction", 0.9)))
    n_val = int(n * float(data.get("val_fraction", 0.05)))
    train_sources = set()
    for i, (s, t) in enumerate(pairs):
        split = "train" if i < n_train else "val" if i < n_train + n_val else "test"
        if split == "train":
            train_sources.add(s)
        elif s in train_sources:
            continue
        out[split].append((s.decode("utf-8"), t.decode("utf-8")))
    return out


class TranslationData:
    """TranslationDataset of a config, with the tokenizer the checkpoint stores."""

    layout = ("key_padding",)

    def __init__(self, config: dict, tokenizer):
        d = config.get("data", {})
        self.tokenizer = tokenizer
        self.seq_len = int(d.get("seq_len", 128))
        self.source_len = int(d.get("source_len", 0)) or self.seq_len
        self.batch_tokens = int(d.get("batch_tokens", 3000))
        self.seed = int(d.get("seed", 0))
        self.vocab_size = tokenizer.vocab_size
        self.pad_token = tokenizer.pad
        if min(tokenizer.pad, tokenizer.bos, tokenizer.eos) < 0:
            raise ValueError(f"translate: the {tokenizer.kind} tokenizer has no <pad>, <s> and </s>")
        self._sentences, self._order, self._plans = {}, {}, {}
        for split, pairs in read_pairs(d).items():
            self._cut(split, pairs)

    def _cut(self, split, pairs):
        kept = []
        for source, target in pairs:
            x, y = self.tokenizer.encode(source), self.tokenizer.encode(target)
            if len(x) + 1 > self.source_len or len(y) + 1 > self.seq_len:
                if split == "train":
                    continue
                x, y = x[:self.source_len - 1], y[:self.seq_len - 1]
            if x and y:
                kept.append((x, y))
        if not kept:
            raise ValueError(f"translate: the {split} split has no usable pair")
        salt = hash_combine(self.seed, _TIE_SALT)

        def key(i):
            x, y = kept[i]
            return max(len(x), len(y)) + 1, hash_combine(salt, i) if split == "train" else 0, i

        order = sorted(range(len(kept)), key=key)
        plans = []  # [begin, rows, T, S]
        for k, i in enumerate(order):
            S, T = len(kept[i][0]) + 1, len(kept[i][1]) + 1
            if not plans or (plans[-1][1] + 1) * max(plans[-1][2], plans[-1][3], S, T) > self.batch_tokens:
                plans.append([k, 0, 0, 0])
            p = plans[-1]
            p[1] += 1
            p[2], p[3] = max(p[2], T), max(p[3], S)
        self._sentences[split], self._order[split], self._plans[split] = kept, order, plans

    def sentences(self, split: str) -> list:
        """The split's (source ids, target ids) pairs, no specials, in corpus order."""
        return self._sentences[split]

    def eval_batch_count(self, split: str, batch_size: int = 0) -> int:
        return 0 if split == "train" else len(self._plans[split])

    def batch_count(self, split: str) -> int:
        """The split's batches (for train: one epoch's)."""
        return len(self._plans[split])

    def _plan(self, split, batch_index):
        plans = self._plans[split]
        n = len(plans)
        if split != "train":
            if not 0 <= batch_index < n:
                raise ValueError(f"translate: {split} batch {batch_index} is outside the split's {n} batches")
            return plans[batch_index]
        key = hash_combine(hash_combine(self.seed, _EPOCH_SALT), batch_index // n)
        return plans[permuted(batch_index % n, n, key)]

    def batch_sentences(self, split: str, batch_index: int) -> list:
        """The sentence index each row of a batch holds."""
        begin, rows, _, _ = self._plan(split, batch_index)
        return self._order[split][begin:begin + rows]

    def batch(self, split: str, batch_index: int, batch_size: int = 0) -> Batch:
        """TranslationDataset::fill_batch(split, batch_index); batch_size is not used (the
        token budget sets each batch's shape)."""
        if split not in SPLITS:
            raise ValueError(f"split must be train, val or test, got {split!r}")
        _, rows, T, S = self._plan(split, batch_index)
        tok = self.tokenizer
        b = Batch(tokens=np.full((rows, T), tok.pad, np.int32), targets=np.full((rows, T), -1, np.int32),
                  key_padding=np.zeros((rows, T), np.uint8), source_tokens=np.full((rows, S), tok.pad, np.int32),
                  source_padding=np.zeros((rows, S), np.uint8))
        for r, i in enumerate(self.batch_sentences(split, batch_index)):
            x, y = self._sentences[split][i]
            m, n = len(x), len(y)
            b.tokens[r, :n + 1] = [tok.bos] + y
            b.targets[r, :n + 1] = y + [tok.eos]
            b.key_padding[r, :n + 1] = 1
            b.source_tokens[r, :m + 1] = x + [tok.eos]
            b.source_padding[r, :m + 1] = 1
        return b

    def token_label(self, token: int) -> str:
        if token in (self.tokenizer.pad, self.tokenizer.bos, self.tokenizer.eos):
            return {self.tokenizer.pad: "<pad>", self.tokenizer.bos: "<s>", self.tokenizer.eos: "</s>"}[token]
        if self.tokenizer.kind == "sentencepiece":
            return self.tokenizer.sp.id_to_piece(token)
        return chr(token) if 32 <= token < 127 else "\\n" if token == 10 else f"\\x{token:02x}"
