"""The grammar task in Python, as src/data/grammar.cpp builds it: sentences over a generated
lexicon with number and gender agreement, and the gold heads and antecedents the analysis scores.
"""
from __future__ import annotations

from dataclasses import dataclass

from .task_base import SyntheticTask

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
