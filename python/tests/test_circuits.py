"""`headlab circuits` against python/headlab/circuits.py on the models the binary trained (MHA,
GQA, MQA with heads switched off, pruned layers, a physically pruned model; composition also on
the encoders): the detectors on the very random sequences the binary used (detectors.h5's
tokens), the composition scores from C x C circuits formed in full in torch.

Detector tolerance: scores are sums of attention probabilities over a sequence, divided by the rows; the
binary's float32 probabilities differ from the float64 ones here by up to ~1e-5 each (see
test_attention_probabilities_match_the_binary), so scores agree to 1e-5, which a wrong cell of a
pattern (a shift by one key, a missing row) exceeds by orders of magnitude.
"""
import csv

import h5py
import numpy as np
import pytest
import torch

import headlab
from headlab.circuits import (DETECTORS, activation_patching, composition_scores, detection_pattern, detector_scores,
                              logit_attribution, ov_copying_scores, path_patching)
from headlab.data import eval_batches

from conftest import DECODERS, ENCODERS, run_headlab
from test_against_binary import checkpoint_of

torch.set_num_threads(1)


@pytest.mark.parametrize("variant", list(DECODERS))
def test_detector_scores_match_the_binary(variant, train_variant, tmp_path):
    path = checkpoint_of(train_variant(variant))
    run_headlab("circuits", path, "--detectors", "--rows", 4, "--half", 9, "--seed", 5, "--out", tmp_path)
    with h5py.File(tmp_path / "detectors.h5", "r") as f:
        assert f.attrs["headlab_kind"] == "circuits"
        tokens = np.array(f["tokens"])
        want = {name: np.array(f["scores"][name])[0] for name in DETECTORS}  # the one checkpoint
    assert tokens.shape == (4, 18) and np.array_equal(tokens[:, :9], tokens[:, 9:])
    got = detector_scores(headlab.load_model(path, torch.float64), tokens)
    for name in DETECTORS:
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, rtol=0, err_msg=name)


SEQ2SEQ_VARIANTS = ["s2s_mha_learned", "s2s_gqa_mqa_sin_tied"]  # MHA; GQA self, MQA enc and cross, no biases


def trained_checkpoint(variant, train_variant, train_seq2seq):
    return checkpoint_of(train_seq2seq(variant) if variant in SEQ2SEQ_VARIANTS else train_variant(variant))


@pytest.mark.parametrize("variant", list(DECODERS) + list(ENCODERS) + SEQ2SEQ_VARIANTS)
def test_composition_scores_match_the_binary(variant, train_variant, train_seq2seq, tmp_path):
    path = trained_checkpoint(variant, train_variant, train_seq2seq)
    run_headlab("circuits", path, "--composition", "--out", tmp_path)
    got = composition_scores(headlab.load_model(path, torch.float64))
    with open(tmp_path / "composition.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(got) > 0
    for row in rows:
        want = got[(row["sender"], row["receiver"])]
        assert {kind for kind in ("q", "k", "v") if row[kind] != ""} == set(want), (row, want)
        for kind, value in want.items():
            # the CSV's 6 significant digits (5e-6 relative at most) over float32 weights summed in
            # double on both sides (~1e-7): 1e-5 relative
            assert abs(float(row[kind]) - value) <= 1e-5 * value, (row, want)
    if variant in SEQ2SEQ_VARIANTS:  # the encoder's heads reach the cross-attention by keys and values
        assert any(s.startswith("enc.") and r.startswith("cross.") and set(k) == {"k", "v"} for (s, r), k in got.items())


@pytest.mark.parametrize("variant", list(DECODERS) + SEQ2SEQ_VARIANTS)
def test_ov_copying_scores_match_the_binary(variant, train_variant, train_seq2seq, tmp_path):
    path = trained_checkpoint(variant, train_variant, train_seq2seq)
    run_headlab("circuits", path, "--composition", "--out", tmp_path)
    want = ov_copying_scores(headlab.load_model(path, torch.float64))
    with open(tmp_path / "ov_copying.csv", newline="") as f:
        got = [float(row["copying_score"] or "nan") for row in csv.DictReader(f)]
    # the binary solves the d_head x d_head product, this the V x V circuit (256 x 256): the same
    # nonzero eigenvalues; the CSV's 6 significant digits: 1e-5 absolute on a score in [-1, 1]
    # (NaN, an empty cell, for an encoder_decoder's encoder heads on both sides)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check_dla_against_the_binary(path, tmp_path):
    """`headlab circuits --dla` over 2 val batches against logit_attribution on the same batches;
    returns the binary's rows."""
    run_headlab("circuits", path, "--dla", "--batches", 2, "--out", tmp_path)
    ckpt = headlab.load_checkpoint(path)
    got = logit_attribution(headlab.load_model(path, torch.float64), eval_batches(ckpt, "val")[:2])
    rows = read_rows(tmp_path / "dla.csv")
    assert {row["label"] for row in rows} == set(got) - {"lens"}
    for row in rows:
        # float32 against float64: terms of a few units agree to ~1e-5 (the sum check's scale)
        assert abs(float(row["mean_dla"]) - got[row["label"]]) <= 2e-5 * (1 + abs(got[row["label"]])), row
    for row, want in zip(read_rows(tmp_path / "logit_lens.csv"), got["lens"]):
        for column, value in zip(("loss", "accuracy", "mean_logit", "mean_prob"), want):
            assert abs(float(row[column]) - value) <= 2e-5 * (1 + abs(value)), (row, column, value)
    return rows


@pytest.mark.parametrize("variant", list(DECODERS))
def test_direct_logit_attribution_matches_the_binary(variant, train_variant, tmp_path):
    check_dla_against_the_binary(checkpoint_of(train_variant(variant)), tmp_path)


@pytest.mark.parametrize("variant", SEQ2SEQ_VARIANTS)
def test_direct_logit_attribution_of_a_translation_model_matches_the_binary(variant, train_seq2seq, tmp_path):
    # The decoder stream's self- and cross-attention heads (MHA; GQA self, MQA cross, no biases).
    rows = check_dla_against_the_binary(checkpoint_of(train_seq2seq(variant)), tmp_path)
    kinds = {row["attention"] for row in rows if row["kind"] == "head"}
    assert kinds == {"dec", "cross"}


PROMPT, CORRUPT = "and the lord said unto", "and the lord sent unto"


def check_patching_against_the_binary(tmp_path, model, clean, corrupt, targets, **sources):
    """patching_heads.csv, patching_resid.csv and path_patching.csv against the forward hooks."""
    want = activation_patching(model, clean, corrupt, targets, **sources)
    tol = lambda v: 1e-5 * (1 + abs(v))  # noqa: E731  losses of float32 runs against float64
    heads = read_rows(tmp_path / "patching_heads.csv")
    assert [row["label"] for row in heads] == want["labels"]
    for k, row in enumerate(heads):
        for column in ("head_out", "q", "k", "v"):
            assert abs(float(row[column]) - want[column][k]) <= tol(want[column][k]), (row, column)
    resid = read_rows(tmp_path / "patching_resid.csv")
    assert len(resid) == len(want["resid"])
    for row in resid:
        v = want["resid"][(row["stack"], int(row["layer"]), int(row["position"]))]
        assert abs(float(row["metric"]) - v) <= tol(v), row
    paths = path_patching(model, clean, corrupt, targets, **sources)
    rows = read_rows(tmp_path / "path_patching.csv")
    assert len(rows) == len(paths)
    for row in rows:
        scores = paths[(row["sender"], row["receiver"])]
        for site in ("q", "k", "v"):
            if site not in scores:
                assert row[site] == "nan", (row, site)
                continue
            assert abs(float(row[site]) - scores[site]) <= tol(scores[site]), (row, site)
    return heads, rows


@pytest.mark.parametrize("variant", list(DECODERS))
def test_activation_and_path_patching_match_the_binary(variant, train_variant, tmp_path):
    path = checkpoint_of(train_variant(variant))
    run_headlab("circuits", path, "--patch", "--path-patch", "--prompt", PROMPT, "--corrupt", CORRUPT, "--out", tmp_path)
    model = headlab.load_model(path, torch.float64)
    clean, corrupt = [list(PROMPT.encode())], [list(CORRUPT.encode())]
    check_patching_against_the_binary(tmp_path, model, clean, corrupt, [clean[0][1:] + [-1]])


SOURCE, CORRUPT_SOURCE, TARGET = "the king saw", "the lord saw", "el rey vio"


@pytest.mark.parametrize("variant", SEQ2SEQ_VARIANTS)
def test_patching_of_a_translation_model_matches_the_binary(variant, train_seq2seq, tmp_path):
    # Encoder, decoder self- and cross-attention heads; the encoder's reach the cross-attention's
    # keys and values through LN_enc, the decoder's its queries (MHA; GQA self, MQA enc and cross).
    path = checkpoint_of(train_seq2seq(variant))
    run_headlab("circuits", path, "--patch", "--path-patch", "--prompt", SOURCE, "--corrupt", CORRUPT_SOURCE,
                "--target", TARGET, "--out", tmp_path)
    model = headlab.load_model(path, torch.float64)
    tok = model.tokenizer()
    source, corrupt_source = [tok.encode(SOURCE) + [tok.eos]], [tok.encode(CORRUPT_SOURCE) + [tok.eos]]
    target = [[tok.bos] + tok.encode(TARGET)]
    heads, paths = check_patching_against_the_binary(tmp_path, model, target, target, [tok.encode(TARGET) + [tok.eos]],
                                                     clean_source=source, corrupt_source=corrupt_source)
    assert {row["attention"] for row in heads} == {"enc", "dec", "cross"}
    kinds = {(row["sender"].split(".")[0], row["receiver"].split(".")[0]) for row in paths}
    want = {("enc", "cross"), ("dec", "cross")}
    want |= {("enc", "enc")} if model.enc.n_layers > 1 else set()
    want |= {("dec", "dec"), ("cross", "dec"), ("cross", "cross")} if len(model.blocks) > 1 else set()
    assert kinds == want


def test_patterns_are_transformer_lens_s():
    x = [5, 7, 9, 5, 7, 5]
    assert np.argwhere(detection_pattern("duplicate_token", x)).tolist() == [[3, 0], [4, 1], [5, 0], [5, 3]]
    assert np.argwhere(detection_pattern("induction", x)).tolist() == [[3, 1], [4, 2], [5, 1], [5, 4]]
    assert np.argwhere(detection_pattern("previous_token", x)).tolist() == [[i, i - 1] for i in range(1, 6)]
