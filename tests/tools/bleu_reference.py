#!/usr/bin/env python3
"""Reference scores for tests/data/test_bleu_reference.cpp, from NLTK (python3-nltk) and, where
it can be imported, sacreBLEU itself (it is not packaged in Debian 12, so CI has NLTK only).

usage: bleu_reference.py INPUT OUTPUT
INPUT lines:  pair<TAB>hypothesis<TAB>reference   (UTF-8; tokens are the str.split() words)
              subset<TAB>i j k ...                 (indices of pairs)
OUTPUT lines, one group per subset s (floats as repr, so that they read back exactly):
  nltk_bleu s SCORE        corpus_bleu on the split tokens, SmoothingFunction().method3
                           (NIST geometric smoothing = sacreBLEU's 'exp'), weights 0.25 x 4
  nltk_bleu_plain s SCORE  the same without smoothing (only where every order has a match)
  nltk_chrf s SCORE        corpus_chrf(beta=2): NLTK's macro average of per-sentence F
  sacrebleu_bleu s SCORE   sacrebleu BLEU() on the raw strings (13a), if sacrebleu imports
  sacrebleu_chrf s SCORE   sacrebleu CHRF() on the raw strings, if sacrebleu imports
and for every pair i and char order n: nltk_chrf_order i n TP PRECISION RECALL
"""
import sys
import warnings

from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu
from nltk.translate.chrf_score import _preprocess, chrf_precision_recall_fscore_support, corpus_chrf

try:
    from sacrebleu.metrics import BLEU, CHRF
except ImportError:
    BLEU = CHRF = None


def main(input_path, output_path):
    pairs, subsets = [], []
    with open(input_path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if not line:
                continue
            kind, *fields = line.split("\t")
            if kind == "pair":
                pairs.append((fields[0], fields[1]))
            else:
                subsets.append([int(i) for i in fields[0].split()])
    out = []
    warnings.simplefilter("ignore")  # NLTK warns of every order without a match when unsmoothed
    method3 = SmoothingFunction().method3
    for s, subset in enumerate(subsets):
        hyps = [pairs[i][0] for i in subset]
        refs = [pairs[i][1] for i in subset]
        hyp_tokens = [h.split() for h in hyps]
        ref_tokens = [[r.split()] for r in refs]
        out.append(f"nltk_bleu {s} {corpus_bleu(ref_tokens, hyp_tokens, smoothing_function=method3)!r}")
        out.append(f"nltk_bleu_plain {s} {corpus_bleu(ref_tokens, hyp_tokens)!r}")
        out.append(f"nltk_chrf {s} {corpus_chrf(refs, hyps, beta=2)!r}")
        if BLEU is not None:
            out.append(f"sacrebleu_bleu {s} {BLEU().corpus_score(hyps, [refs]).score!r}")
            out.append(f"sacrebleu_chrf {s} {CHRF().corpus_score(hyps, [refs]).score!r}")
    for i, (hyp, ref) in enumerate(pairs):
        hyp, ref = _preprocess(hyp, True), _preprocess(ref, True)
        for n in range(1, 7):
            prec, rec, _, tp = chrf_precision_recall_fscore_support(ref, hyp, n, beta=2)
            out.append(f"nltk_chrf_order {i} {n} {tp} {prec!r} {rec!r}")
    with open(output_path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
