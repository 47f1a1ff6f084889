"""The Python model against the headlab binary, on checkpoints the binary trained: the loss of a
whole split, greedy continuations, attention probabilities, per-head importance and ablation,
and checkpoints written from Python read back by the binary.

Whole-split losses: the `loss` attribute (a double) of `headlab analyze`'s heads.h5, and
`headlab eval --json`'s loss (full precision; its lines print 4 decimals), the same forward over
the same batches of the same split.

Tolerances: headlab computes in float32, the Python model here in float64, so agreement is
limited by float32 rounding (about 1e-7 relative per operation; measured on these models: losses
agree to 5e-7 relative or better, importance to 5e-6 relative, ablation deltas to 4e-7 nats).
Losses must agree to 1e-5 relative, importance to 1e-5 relative (+1e-8 absolute), ablation
deltas (differences of two losses) to 5e-6 nats + 1e-5 relative. Integrated gradients (means of
gate gradients along a path, each a float32 backward) to 1e-4 relative + 1e-7 nats.
"""
import csv
import glob
import json
import os
import re

import h5py
import numpy as np
import pytest
import torch

import headlab
from headlab.analysis import ffn_unit_scores, head_scores, integrated_gradients, split_loss
from headlab.data import classify_examples, eval_batches

from conftest import DECODERS, ENCODERS, run_headlab

torch.set_num_threads(1)

LOSS_RTOL = 1e-5
SCORE_RTOL = 1e-5
SCORE_ATOL = {"importance": 1e-8, "importance_normalized": 1e-8, "ablation_loss_delta": 5e-6}


def checkpoint_of(run):
    best = os.path.join(run, "checkpoints", "best.h5")
    return best if os.path.exists(best) else sorted(glob.glob(os.path.join(run, "checkpoints", "step_*.h5")))[-1]


def eval_loss(path):
    return json.loads(run_headlab("eval", path, "--json"))["loss"]


def analyze(path, out_dir, *extra):
    run_headlab("analyze", path, "--out", out_dir, "--no-similarity", "--threads", "1", *extra)
    with h5py.File(os.path.join(out_dir, "heads.h5"), "r") as f:
        return dict(loss=float(f.attrs["loss"]), n_targets=int(f.attrs["n_targets"]),
                    **{k: np.array(f["heads"][k]) for k in ("gate", "importance", "importance_normalized",
                                                             "ablation_loss_delta")})


_batches = {}


def batches_for(ckpt):
    d = ckpt.config["data"]
    key = (d.get("task"), d.get("path"), d.get("seq_len"), d.get("seed"), ckpt.config["train"]["batch_size"])
    if key not in _batches:
        _batches[key] = eval_batches(ckpt.config, "val")
    return _batches[key]


def check_scores(py, binary, heads):
    assert py["n_targets"] == binary["n_targets"]
    assert abs(py["loss"] - binary["loss"]) <= LOSS_RTOL * abs(binary["loss"])
    for column in ("importance", "importance_normalized", "ablation_loss_delta"):
        for l, n in enumerate(heads):
            got, want = np.array(py[column][l]), binary[column][l, :n]
            assert np.all(np.abs(got - want) <= SCORE_ATOL[column] + SCORE_RTOL * np.abs(want)), \
                f"{column} layer {l}: python {got} headlab {want}"
        # heads a pruned layer lacks are NaN in heads.h5
        for l, n in enumerate(heads):
            assert np.all(np.isnan(binary[column][l, n:]))


@pytest.mark.parametrize("variant", list(DECODERS) + list(ENCODERS))
def test_loss_importance_and_ablation_match_the_binary(variant, train_variant, tmp_path):
    path = checkpoint_of(train_variant(variant))
    ckpt = headlab.load_checkpoint(path)
    model = headlab.Model.from_checkpoint(ckpt).double()
    binary = analyze(path, tmp_path / "analysis")
    py = head_scores(model, batches_for(ckpt))
    check_scores(py, binary, ckpt.spec["heads"])
    # `headlab eval` scores the same split
    assert abs(eval_loss(path) - py["loss"]) <= LOSS_RTOL * py["loss"]
    if variant == "physically_pruned":
        assert ckpt.config["model"]["layer_heads"] == [1, 1] and "optimizer" not in ckpt.attrs
        assert ckpt.params["blocks/0/attn/qkv/weight"].shape == (3 * 8, 32)
    if variant == "mqa_active_heads":  # the heads switched off in training have gate 0 and no effect
        assert [g.tolist() for g in ckpt.gates()] == [[1, 1, 1, 0], [1, 1, 0, 0]]
        assert py["ablation_loss_delta"][0][3] == 0 and binary["ablation_loss_delta"][0, 3] == 0


@pytest.mark.parametrize("variant", ["mha", "mqa_active_heads", "enc_first_gqa"])
def test_integrated_gradients_match_the_binary(variant, train_variant, tmp_path):
    # Gated-off heads (mqa_active_heads) get 0 on both sides; an encoder's labels too.
    path = checkpoint_of(train_variant(variant))
    ckpt = headlab.load_checkpoint(path)
    run_headlab("analyze", path, "--out", tmp_path, "--no-similarity", "--no-ablation", "--threads", "1",
                "--ig-steps", 8)
    with h5py.File(tmp_path / "heads.h5", "r") as f:
        binary = np.array(f["heads"]["integrated_gradients"])
        change, error, steps = f.attrs["ig_loss_change"], f.attrs["ig_completeness_error"], f.attrs["ig_steps"]
    assert steps == 8
    py = integrated_gradients(headlab.Model.from_checkpoint(ckpt).double(), batches_for(ckpt), steps=8)
    for l, n in enumerate(ckpt.spec["heads"]):
        np.testing.assert_allclose(py["attribution"][l], binary[l, :n], rtol=1e-4, atol=1e-7, err_msg=f"site {l}")
    py_change = py["loss"] - py["baseline_loss"]
    assert abs(py_change - change) <= LOSS_RTOL * (abs(py["loss"]) + abs(py["baseline_loss"]))
    # The same midpoint sum on both sides: the same distance from completeness, to float32 rounding.
    py_error = abs(sum(sum(a) for a in py["attribution"]) - py_change)
    assert abs(py_error - error) <= 1e-4 * abs(change) + 1e-7


@pytest.mark.parametrize("variant", ["mha", "gqa_tied_sin_nobias_relu", "enc_first_gqa"])
def test_ffn_unit_scores_match_the_binary(variant, train_variant, tmp_path):
    # units.csv of `headlab analyze --ffn --ig-steps 8` against forward passes in torch.
    path = checkpoint_of(train_variant(variant))
    ckpt = headlab.load_checkpoint(path)
    run_headlab("analyze", path, "--out", tmp_path, "--no-similarity", "--no-ablation", "--threads", "1", "--ffn",
                "--ig-steps", 8)
    with open(tmp_path / "units.csv") as f:
        rows = list(csv.DictReader(f))
    py = ffn_unit_scores(headlab.Model.from_checkpoint(ckpt).double(), batches_for(ckpt), ig_steps=8)
    flat = {k: [x for block in py[k] for x in block] for k in ("importance", "magnitude", "integrated_gradients")}
    assert len(rows) == len(flat["importance"])
    for k, row in enumerate(rows):
        for column, rtol, atol in (("importance", 1e-4, 1e-8), ("magnitude", 1e-6, 1e-9),
                                   ("integrated_gradients", 1e-4, 1e-7)):
            assert abs(float(row[column]) - flat[column][k]) <= atol + rtol * abs(flat[column][k]), (row, column)
    # heads.h5 keeps how the units' attributions add up: L(g) - L(every unit off), and the sum's distance.
    with h5py.File(tmp_path / "heads.h5", "r") as f:
        change, error, steps = (f.attrs[k] for k in ("ffn_ig_loss_change", "ffn_ig_completeness_error", "ffn_ig_steps"))
    assert steps == 8
    py_change = py["loss"] - py["ig_baseline_loss"]
    assert abs(py_change - change) <= LOSS_RTOL * (abs(py["loss"]) + abs(py["ig_baseline_loss"]))
    py_error = abs(sum(flat["integrated_gradients"]) - py_change)
    assert abs(py_error - error) <= 1e-4 * abs(change) + 1e-7


def test_float32_model_matches_too(train_variant):
    path = checkpoint_of(train_variant("mha"))
    ckpt = headlab.load_checkpoint(path)
    batches = batches_for(ckpt)
    want = split_loss(headlab.Model.from_checkpoint(ckpt).double(), batches)
    got = split_loss(headlab.Model.from_checkpoint(ckpt), batches)
    assert abs(got - want) <= LOSS_RTOL * want


@pytest.mark.parametrize("variant", list(DECODERS))
def test_greedy_continuations_match_byte_for_byte(variant, train_variant):
    path = checkpoint_of(train_variant(variant))
    model = headlab.load_model(path, torch.float64)
    for prompt in (b"And the lord said", b"\n"):
        out = run_headlab("sample", path, "--prompt", prompt.decode(), "--tokens", 60, "--temperature", 0)
        assert out == prompt + model.generate(prompt, 60) + b"\n"


@pytest.mark.parametrize("variant", ["mha", "gqa_tied_sin_nobias_relu", "pruned_layer_heads", "physically_pruned"])
def test_attention_probabilities_match_the_binary(variant, train_variant, tmp_path):
    path = checkpoint_of(train_variant(variant))
    model = headlab.load_model(path, torch.float64)
    prompt = "Behold, the dust of the earth"
    run_headlab("analyze", path, "--prompt", prompt, "--out", tmp_path)
    with h5py.File(tmp_path / "attention_example_prompt.h5", "r") as f:
        want = np.array(f["attention"])  # [L, H, T, T], NaN for heads a layer lacks
    out = model(torch.tensor([list(prompt.encode())]), return_attention=True)
    for l, probs in enumerate(out.attention):
        got = probs[0].detach().numpy()
        # The binary's float32 scores (|score| up to ~50 in sharp heads) carry ~1e-6 rounding, which
        # moves a probability by up to p (1 - p) times that: 1e-5 still catches any wrong term.
        np.testing.assert_allclose(got, want[l, :got.shape[0]], atol=1e-5, rtol=0)


@pytest.mark.parametrize("variant", list(ENCODERS))
def test_classify_examples_are_the_binarys(variant, train_variant, tmp_path):
    path = checkpoint_of(train_variant(variant))
    ckpt = headlab.load_checkpoint(path)
    examples = [0, 1, 7, 2047]
    run_headlab("analyze", path, "--out", tmp_path, "--no-similarity", "--no-ablation", "--batches", 1,
                *[a for e in examples for a in ("--dump-example", e)])
    tokens, labels, key_padding = batches_for(ckpt) and classify_examples(ckpt.config, "val")
    model = headlab.load_model(path, torch.float64)
    for e in examples:
        with h5py.File(tmp_path / f"attention_example_{e}.h5", "r") as f:
            np.testing.assert_array_equal(np.array(f["tokens"]), tokens[e])
            np.testing.assert_array_equal(np.array(f["labels"]), [labels[e]])
            np.testing.assert_array_equal(np.array(f["key_padding"]), key_padding[e])
            want = np.array(f["attention"])
        out = model(torch.tensor(tokens[e:e + 1]), key_padding=torch.tensor(key_padding[e:e + 1]),
                    return_attention=True)
        for l, probs in enumerate(out.attention):
            np.testing.assert_allclose(probs[0].detach().numpy(), want[l], atol=1e-5, rtol=0)  # float32, as above


@pytest.mark.parametrize("variant", ["mha", "gqa_tied_sin_nobias_relu", "pruned_layer_heads", "physically_pruned",
                                     "enc_mean_nobias_sin_relu"])
def test_a_checkpoint_written_from_python_evaluates_in_headlab_to_the_same_loss(variant, train_variant, tmp_path):
    path = checkpoint_of(train_variant(variant))
    model = headlab.load_model(path)
    # change the model in Python: a head off, and one weight matrix scaled
    model.set_head_mask([(1, 0)])
    with torch.no_grad():
        model.blocks[0].mlp.fc.weight.mul_(1.5)
    edited = str(tmp_path / "edited.h5")
    model.save_checkpoint(edited)
    ckpt = headlab.load_checkpoint(edited)
    assert ckpt.gates()[1][0] == 0
    py = split_loss(headlab.Model.from_checkpoint(ckpt).double(), batches_for(ckpt))
    binary = analyze(edited, tmp_path / "analysis", "--no-ablation")
    assert abs(py - binary["loss"]) <= LOSS_RTOL * binary["loss"]
    assert abs(eval_loss(edited) - py) <= LOSS_RTOL * py
    assert "model" in run_headlab("info", edited).decode()


@pytest.mark.parametrize("variant", ["mha", "gqa_tied_sin_nobias_relu", "enc_mean_nobias_sin_relu"])
def test_ffn_units_gated_and_cut_out_score_as_the_binary(variant, train_variant, tmp_path):
    # headlab prune --unit ffn: pruned.h5 holds the FFN gates (some 0), pruned_small.h5 has the
    # units cut out (model.mlp_units); both score the same in Python as in headlab.
    path = checkpoint_of(train_variant(variant))
    out = tmp_path / "prune"
    run_headlab("prune", path, "--unit", "ffn", "--strategy", "magnitude", "--step-frac", "0.3", "--batches", "2",
                "--score-batches", "2", "--out", out, "--set", "train.threads=1")
    for name in ("pruned.h5", "pruned_small.h5"):
        ckpt = headlab.load_checkpoint(str(out / name))
        model = headlab.Model.from_checkpoint(ckpt).double()
        if name == "pruned.h5":
            gates = [ckpt.params[f"blocks/{l}/mlp/gates"] for l in range(ckpt.spec["n_layers"])]
            assert all(int((g != 0).sum()) == 1 for g in gates)  # every block down to one unit
        else:
            assert ckpt.config["model"]["mlp_units"] == [1] * ckpt.spec["n_layers"]
        py = split_loss(model, batches_for(ckpt))
        assert abs(eval_loss(str(out / name)) - py) <= LOSS_RTOL * py, name
        again = str(tmp_path / f"rewritten_{name}")
        model.float().save_checkpoint(again)  # Python writes the gates back as headlab does
        assert abs(eval_loss(again) - py) <= LOSS_RTOL * py, name


@pytest.mark.parametrize("unit", ["attention_layers", "ffn_blocks"])
def test_layers_and_blocks_removed_whole_score_as_the_binary(unit, train_variant, tmp_path):
    # headlab prune --unit attention_layers|ffn_blocks down to nothing: pruned_small.h5 has every
    # layer's attention (FFN block) cut out (model.layer_heads / mlp_units all 0); Python loads it
    # and scores what headlab does, the projections' biases alone added.
    path = checkpoint_of(train_variant("mha"))
    out = tmp_path / "prune"
    run_headlab("prune", path, "--unit", unit, "--strategy", "random", "--step-frac", "0.5", "--batches", "2",
                "--out", out, "--set", "train.threads=1")
    ckpt = headlab.load_checkpoint(str(out / "pruned_small.h5"))
    key = "layer_heads" if unit == "attention_layers" else "mlp_units"
    assert ckpt.config["model"][key] == [0] * ckpt.spec["n_layers"]
    model = headlab.Model.from_checkpoint(ckpt).double()
    py = split_loss(model, batches_for(ckpt))
    for name in ("pruned.h5", "pruned_small.h5"):
        assert abs(eval_loss(str(out / name)) - py) <= LOSS_RTOL * py, name


def test_rewriting_a_checkpoint_keeps_every_tensor_bit_for_bit(train_variant, tmp_path):
    path = checkpoint_of(train_variant("pruned_layer_heads"))
    ckpt = headlab.load_checkpoint(path)
    out = str(tmp_path / "copy.h5")
    headlab.save_checkpoint(out, ckpt)
    again = headlab.load_checkpoint(out)
    assert again.config == ckpt.config
    assert again.params.keys() == ckpt.params.keys()
    for k in ckpt.params:
        assert again.params[k].dtype == np.float32
        assert again.params[k].tobytes() == ckpt.params[k].tobytes()
    for k in ("step", "headlab_commit", "headlab_version"):
        assert again.attrs[k] == ckpt.attrs[k]
    with h5py.File(out, "r") as f:  # headlab's layout: one checksummed chunk per dataset
        d = f["model/blocks/0/attn/qkv/weight"]
        assert d.chunks == d.shape and d.fletcher32


def test_state_dict_export_round_trips(train_variant, tmp_path):
    path = checkpoint_of(train_variant("gqa_tied_sin_nobias_relu"))
    state = headlab.export_state_dict(path, str(tmp_path / "state.pt"))
    loaded = torch.load(tmp_path / "state.pt")
    assert set(loaded) == set(state) and "blocks.0.attn.qkv.weight" in loaded and "lm_head.weight" not in loaded
    model = headlab.Model(headlab.load_checkpoint(path).config)
    model.load_state_dict(loaded)
    tokens = torch.tensor([list(b"Arise, walk through the land")])
    torch.testing.assert_close(model(tokens).logits, headlab.load_model(path)(tokens).logits, rtol=0, atol=0)


def test_loading_needs_numpy_and_h5py_only(train_variant):
    import subprocess
    import sys
    path = checkpoint_of(train_variant("mha"))
    code = ("import sys; sys.modules['torch'] = None; import headlab; "
            f"c = headlab.load_checkpoint({path!r}); print(c.spec['d_head'], len(c.params))")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(__file__))))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "8"


def test_the_readme_example_runs(train_variant):
    """The README's "Using checkpoints from Python" example, on a tiny checkpoint instead of
    runs/default (its max_seq_len is 32, so generate() slides its window as sample does)."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    readme = open(os.path.join(root, "README.md")).read()
    section = readme[readme.index("## Using checkpoints from Python"):]
    code = section[section.index("```python\n") + 10:section.index("```\n", section.index("```python\n") + 10)]
    assert len(code.strip().splitlines()) == 5
    path = checkpoint_of(train_variant("mha"))
    code = code.replace("runs/default/checkpoints/best.h5", path)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr
    assert "torch.Size([1, 12, 256]) torch.Size([1, 4, 12, 12]) b'" in r.stdout


def test_forward_hooks_see_each_heads_output_and_attention(train_variant):
    model = headlab.load_model(checkpoint_of(train_variant("mqa_active_heads")), torch.float64)
    seen = {}
    model.blocks[1].attn.register_forward_hook(lambda m, inputs, out: seen.update(heads=out[0], probs=out[1]))
    out = model(torch.tensor([list(b"so that if a man")]), return_attention=True, return_head_outputs=True)
    torch.testing.assert_close(seen["probs"], out.attention[1], rtol=0, atol=0)
    torch.testing.assert_close(seen["heads"], out.head_outputs[1], rtol=0, atol=0)
    assert seen["heads"].shape == (1, 16, 4, 6) and float(seen["heads"][:, :, 2:].abs().max()) == 0  # gates 0
    rows = out.attention[1].sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))
    assert float(out.attention[1][0, :, 0, 1:].abs().max()) == 0  # causal


def test_a_mismatched_checkpoint_is_refused(train_variant, tmp_path):
    ckpt = headlab.load_checkpoint(checkpoint_of(train_variant("mha")))
    ckpt.config["model"]["n_heads"] = 2
    with pytest.raises(ValueError, match="shape"):
        headlab.save_checkpoint(str(tmp_path / "bad.h5"), ckpt)
    assert not os.listdir(tmp_path)


def test_a_heads_file_is_refused_as_a_checkpoint(train_variant, tmp_path):
    analyze(checkpoint_of(train_variant("mha")), str(tmp_path))
    heads = str(tmp_path / "heads.h5")
    with pytest.raises(ValueError, match=re.escape(f"{heads}: a heads file (written by headlab analyze), "
                                                   "not a checkpoint")):
        headlab.load_checkpoint(heads)
