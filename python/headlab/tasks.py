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

    def present(self) -> dict:
        """The fields the task writes, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def eval_tuple(self):
        """(tokens, targets, labels, key_padding), what split_loss and head_scores read."""
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


# ---- grammar: grammar.cpp ----------------------------------------------------------------------

@dataclass(frozen=True)
class GrammarWord:
    """One lexicon entry (headlab::GrammarWord)."""
    text: str
    word_class: str          # pad, delimiter, determiner, complementizer, preposition, pronoun, noun, verb
    number: int = 0          # 1 singular, 2 plural, 0 unmarked
    gender: str = "none"     # none, masculine, feminine, neuter
    transitive: bool = False
    other_number: int = -1   # nouns and verbs: the id of the same word in the other number


_FUNCTION_WORDS = [
    GrammarWord("<pad>", "pad"), GrammarWord(".", "delimiter"), GrammarWord("the", "determiner", 0),
    GrammarWord("a", "determiner", 1), GrammarWord("that", "complementizer"), GrammarWord("near", "preposition"),
    GrammarWord("with", "preposition"), GrammarWord("behind", "preposition"),
    GrammarWord("he", "pronoun", 1, "masculine"), GrammarWord("she", "pronoun", 1, "feminine"),
    GrammarWord("it", "pronoun", 1, "neuter"), GrammarWord("they", "pronoun", 2),
    GrammarWord("him", "pronoun", 1, "masculine"), GrammarWord("her", "pronoun", 1, "feminine"),
    GrammarWord("them", "pronoun", 2),
]
_PAD, _DOT, _THE, _A, _THAT, _NEAR = 0, 1, 2, 3, 4, 5
_HE, _SHE, _IT, _THEY, _HIM, _HER, _THEM = 8, 9, 10, 11, 12, 13, 14
_CONTENT = [  # singular, plural, class, gender, transitive: added in this order as V grows
    ("man", "men", "noun", "masculine", False), ("woman", "women", "noun", "feminine", False),
    ("dog", "dogs", "noun", "neuter", False), ("runs", "run", "verb", "none", False),
    ("sees", "see", "verb", "none", True), ("boy", "boys", "noun", "masculine", False),
    ("girl", "girls", "noun", "feminine", False), ("cat", "cats", "noun", "neuter", False),
    ("sleeps", "sleep", "verb", "none", False), ("likes", "like", "verb", "none", True),
    ("king", "kings", "noun", "masculine", False), ("queen", "queens", "noun", "feminine", False),
    ("bird", "birds", "noun", "neuter", False), ("sings", "sing", "verb", "none", False),
    ("follows", "follow", "verb", "none", True), ("horse", "horses", "noun", "neuter", False),
    ("falls", "fall", "verb", "none", False), ("helps", "help", "verb", "none", True),
]
_GENDERS = ("none", "masculine", "feminine", "neuter")
_MAX_SENTENCE = 16
# production probabilities (grammar.cpp)
_P_PRONOUN, _P_SUBJECT_MODIFIER, _P_OBJECT_MODIFIER, _P_TRANSITIVE = 0.3, 0.6, 0.25, 0.5


def grammar_lexicon(vocab_size: int = 0) -> list:
    """headlab::grammar_lexicon: one GrammarWord per token id (0 = the default 51 words; >= 25)."""
    V = vocab_size or len(_FUNCTION_WORDS) + 2 * len(_CONTENT)
    if V < len(_FUNCTION_WORDS) + 10:
        raise ValueError(f"grammar: data.vocab_size={V} is below the {len(_FUNCTION_WORDS) + 10} words the grammar "
                         "needs")
    lex = list(_FUNCTION_WORDS)
    for i in range((V - len(_FUNCTION_WORDS)) // 2):
        if i < len(_CONTENT):
            singular, plural, word_class, gender, transitive = _CONTENT[i]
        else:  # beyond the named words: nouns cycling through the genders, alternating with verbs
            j = i - len(_CONTENT)
            is_noun = j % 2 == 0
            word_class = "noun" if is_noun else "verb"
            gender = _GENDERS[1 + (j // 2) % 3] if is_noun else "none"
            transitive = not is_noun and (j // 2) % 2 == 1
            singular, plural = (f"noun{i}", f"noun{i}s") if is_noun else (f"verb{i}s", f"verb{i}")
        at = len(lex)
        lex.append(GrammarWord(singular, word_class, 1, gender, transitive, at + 1))
        lex.append(GrammarWord(plural, word_class, 2, gender, transitive, at))
    return lex


class _Sentence:
    """One sentence under construction; heads are positions within it (-1: none)."""

    def __init__(self):
        self.word, self.head, self.antecedent = [], [], []

    def append(self, w, h=-1):
        self.word.append(w)
        self.head.append(h)
        self.antecedent.append(-1)
        return len(self.word) - 1


class GrammarTask(SyntheticTask):
    """Rows of whole sentences of a small English-like grammar (datasets/README.md), with gold
    dependency heads, pronoun antecedents and delimiters."""

    layout = ("gold_head", "gold_antecedent", "is_delimiter")

    def __init__(self, seq_len, seed, vocab_size, train_examples=0):
        super().__init__("grammar", seq_len, seed, train_examples)
        if seq_len < _MAX_SENTENCE:
            raise ValueError(f"grammar: data.seq_len={seq_len} is below {_MAX_SENTENCE}, the longest sentence")
        self.lexicon = grammar_lexicon(vocab_size)
        self.vocab_size = len(self.lexicon)
        singular = [(i, w) for i, w in enumerate(self.lexicon) if w.number == 1]
        self.nouns = [i for i, w in singular if w.word_class == "noun"]
        self.transitive = [i for i, w in singular if w.word_class == "verb" and w.transitive]
        self.intransitive = [i for i, w in singular if w.word_class == "verb" and not w.transitive]

    def token_label(self, token):
        return self.lexicon[token].text if 0 <= token < len(self.lexicon) else str(token)

    # The draws, each in grammar.cpp's order.
    @staticmethod
    def _number(rng):
        return 1 + rng.below(2)

    def _noun(self, rng, num):
        return self.nouns[rng.below(len(self.nouns))] + (num == 2)

    def _verb(self, rng, num, transitive):
        ids = self.transitive if transitive else self.intransitive
        return ids[rng.below(len(ids))] + (num == 2)

    @staticmethod
    def _determiner(rng, num):
        return _A if num == 1 and rng.below(2) else _THE  # no draw for a plural

    def _simple_np(self, rng, num, s):
        d = s.append(self._determiner(rng, num))
        n = s.append(self._noun(rng, num))
        s.head[d] = n
        return n

    def _full_np(self, rng, num, modifier, s):
        n = self._simple_np(rng, num, s)
        if not rng.uniform() < modifier:
            return n
        kind = rng.below(3)
        if kind == 0:  # P Det N
            p = s.append(_NEAR + rng.below(3))
            m = self._simple_np(rng, self._number(rng), s)
            s.head[p] = m
            s.head[m] = n
        elif kind == 1:  # "that" V[num] (Det N): subject relative
            c = s.append(_THAT)
            transitive = rng.uniform() < _P_TRANSITIVE
            v = s.append(self._verb(rng, num, transitive), n)
            s.head[c] = v
            if transitive:
                s.head[self._simple_np(rng, self._number(rng), s)] = v
        else:  # "that" Det N[m] Vt[m]: object relative
            c = s.append(_THAT)
            rc_num = self._number(rng)
            m = self._simple_np(rng, rc_num, s)
            v = s.append(self._verb(rng, rc_num, True), n)
            s.head[c] = v
            s.head[m] = v
        return n

    def _pronoun(self, rng, previous, subject, s):
        """A pronoun for a random noun of the previous sentence: (its position, its number)."""
        chosen = self.lexicon[previous[rng.below(len(previous))][1]]
        num = chosen.number
        w = _THEY if subject else _THEM
        if num == 1:
            w = {"masculine": _HE if subject else _HIM, "feminine": _SHE if subject else _HER}.get(chosen.gender, _IT)
        at = s.append(w)
        for position, word in reversed(previous):  # the last noun with its number (and gender)
            candidate = self.lexicon[word]
            if candidate.number == num and (num == 2 or candidate.gender == chosen.gender):
                s.antecedent[at] = position
                break
        return at, num

    def _sentence(self, rng, previous):
        s = _Sentence()
        if previous and rng.uniform() < _P_PRONOUN:
            subj, num = self._pronoun(rng, previous, True, s)
        else:
            num = self._number(rng)
            subj = self._full_np(rng, num, _P_SUBJECT_MODIFIER, s)
        transitive = rng.uniform() < _P_TRANSITIVE
        v = s.append(self._verb(rng, num, transitive))  # the root: head -1
        s.head[subj] = v
        if transitive:
            if previous and rng.uniform() < _P_PRONOUN:
                obj, _ = self._pronoun(rng, previous, False, s)
            else:
                obj = self._full_np(rng, self._number(rng), _P_OBJECT_MODIFIER, s)
            s.head[obj] = v
        s.append(_DOT, v)
        return s

    def _generate(self, rng, example_id, row):
        T = self.seq_len
        previous = []  # (position, word) of the previous sentence's nouns inside the row
        start = 0
        while True:
            s = self._sentence(rng, previous)
            n = len(s.word)
            if start + n > T + 1:
                break  # whole sentences only: the rest of the row is padding
            previous = []
            for i, w in enumerate(s.word):
                at = start + i
                if at >= 1:
                    row.targets[at - 1] = w
                if at >= T:
                    continue
                row.tokens[at] = w
                row.gold_head[at] = -1 if s.head[i] < 0 else start + s.head[i]
                row.gold_antecedent[at] = s.antecedent[i]
                row.is_delimiter[at] = int(w == _DOT)
                if self.lexicon[w].word_class == "noun":
                    previous.append((at, w))
            start += n


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
