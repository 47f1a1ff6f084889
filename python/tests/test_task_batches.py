"""headlab.batch against the binary: every field of every row of the batches Python builds equals
the binary's Dataset::fill_batch, for every generated task (and text), in train, val and test.

The binary's batches come from `headlab analyze --dump-example I --batch-size B --split S`, which
writes row I % B of batch I // B of split S (fill_batch, every Batch field the task has) into
attention_example_I.h5, and each token's label into attention_example_I_tokens.csv. A tiny model
is trained for one step per configuration (analyze needs a checkpoint; the model's weights do not
matter here), and Python rebuilds the batches from the checkpoint's config.

Per configuration and split, four whole batches of B = 12 rows are compared: train batches 0, 1,
1000 and 987654321 (row-keyed and large-index randomness, and the seeded pick of a fixed training
set); val and test batches 0, 1, 85 and 170, the last holding examples 2040..2047 and four rows
past the 2048-example set. Ten configurations cover every task and key the tasks read (offsets,
k, min_len/max_len, train_examples, a data.vocab_size below model.vocab_size, a generated grammar
lexicon, seeds up to 2^63 - 1), plus a text corpus.
"""
import csv
import os

import h5py
import numpy as np
import pytest

import headlab

from conftest import run_headlab, write_config

B = 12
TRAIN_BATCHES = (0, 1, 1000, 987654321)
EVAL_BATCHES = (0, 1, 85, 170)  # 170 * 12 + 8 = 2048: the last batch ends with 4 rows past the set

DECODER = dict(kind="decoder", vocab_size=64, d_model=16, n_heads=2, n_layers=1, max_seq_len=32)
ENCODER = dict(DECODER, kind="encoder", vocab_size=16, n_classes=2, pooling="first")
CASES = {
    "k_relation": (DECODER, dict(task="k_relation", seq_len=8, vocab_size=5, offsets=[1, 3], seed=3)),
    "k_relation_3_offsets_fixed_set": (DECODER, dict(task="k_relation", seq_len=12, vocab_size=7, offsets=[2, 1, 5],
                                                     train_examples=50, seed=2 ** 63 - 1)),
    "induction_k1": (DECODER, dict(task="induction", seq_len=16, vocab_size=24, k=1, seed=1)),
    "induction_k2": (DECODER, dict(task="induction", seq_len=24, vocab_size=0, k=2)),  # vocab: model's 64
    "reverse": (DECODER, dict(task="reverse", seq_len=12, vocab_size=10, min_len=2, max_len=6, seed=2 ** 40 + 7)),
    "sort": (DECODER, dict(task="sort", seq_len=10, vocab_size=6)),  # 4 items: val and test redraw a lot
    "grammar": (DECODER, dict(task="grammar", seq_len=32, vocab_size=51, seed=5)),
    "grammar_generated_words_fixed_set": (DECODER, dict(task="grammar", seq_len=20, vocab_size=60,
                                                        train_examples=100, seed=11)),
    "classify": (ENCODER, dict(task="classify", seq_len=12, vocab_size=16, min_len=2, max_len=5)),
    "classify_fixed_set": (ENCODER, dict(task="classify", seq_len=16, vocab_size=12, min_len=3, train_examples=30,
                                         seed=2)),
}
TRAIN = dict(steps=1, batch_size=B, warmup_steps=0, eval_every=0, eval_batches=1, checkpoint_every=0, threads=1)


def binary_batches(checkpoint, split, batches, out_dir):
    """{batch index: {field: [B, ...] array}, and the token labels [B][T]} as the binary dumps them."""
    examples = [b * B + r for b in batches for r in range(B)]
    run_headlab("analyze", checkpoint, "--split", split, "--batch-size", B, "--batches", 1, "--no-ablation",
                "--no-similarity", "--threads", 1, "--out", out_dir,
                *[a for e in examples for a in ("--dump-example", e)])
    got = {}
    for b in batches:
        rows = []
        for r in range(B):
            stem = os.path.join(out_dir, f"attention_example_{b * B + r}")
            with h5py.File(stem + ".h5", "r") as f:
                row = {k: np.array(f[k]) for k in f.keys() if k != "attention"}
            with open(stem + "_tokens.csv", newline="") as f:
                row["text"] = [line["text"] for line in csv.DictReader(f)]
            rows.append(row)
        got[b] = {k: np.stack([row[k] for row in rows]) for k in rows[0]}
    return got


def check_batches(dataset, checkpoint, split, batches, out_dir):
    binary = binary_batches(checkpoint, split, batches, out_dir)
    rows = 0
    for b in batches:
        py = dataset.batch(split, b, B)
        want = binary[b]
        fields = py.present()
        assert set(fields) == set(want) - {"text"}, f"{split} batch {b}: fields {sorted(fields)} vs {sorted(want)}"
        for name, value in fields.items():
            expected = want[name].reshape(value.shape)  # labels: one per row
            assert value.dtype == (np.uint8 if name in ("key_padding", "is_delimiter") else np.int32)
            mismatch = np.argwhere(value != expected)
            assert mismatch.size == 0, (f"{split} batch {b} {name}: first difference at {mismatch[0].tolist()}, "
                                        f"python {value[tuple(mismatch[0])]} binary {expected[tuple(mismatch[0])]}")
        assert [[dataset.token_label(int(t)) for t in row] for row in py.tokens] == want["text"].tolist()
        rows += B
    return rows


@pytest.mark.parametrize("case", list(CASES))
def test_generated_task_batches_are_the_binarys(case, tmp_path):
    model, data = CASES[case]
    write_config(tmp_path / "config.toml", model, data, TRAIN)
    run_headlab("train", tmp_path / "config.toml", "--out", tmp_path / "run")
    checkpoint = str(tmp_path / "run" / "checkpoints" / "best.h5")
    config = headlab.load_checkpoint(checkpoint).config  # the run's resolved config, as a user has it
    dataset = headlab.make_dataset(config)
    assert dataset.layout == {"grammar": ("gold_head", "gold_antecedent", "is_delimiter"),
                              "classify": ("labels", "key_padding", "gold_antecedent")}.get(data["task"], ())
    for split, batches in (("train", TRAIN_BATCHES), ("val", EVAL_BATCHES), ("test", EVAL_BATCHES)):
        assert check_batches(dataset, checkpoint, split, batches, tmp_path / split) == len(batches) * B
    # the last eval batch's rows past the 2048 examples: nothing scored, padding tokens
    last = dataset.batch("val", 170, B)
    assert (last.targets[8:] == -1).all() and (last.tokens[8:] == dataset.pad_token).all()
    assert (last.targets[:8] != -1).any() or data["task"] == "classify"
    # the module-level call and the eval batches agree with the dataset's
    one = headlab.batch(config, "train", 1000)
    assert all(np.array_equal(v, getattr(dataset.batch("train", 1000, B), k)) for k, v in one.present().items())
    assert dataset.eval_batch_count("val", B) == 171 and dataset.eval_batch_count("train", B) == 0


def test_text_batches_are_the_binarys(corpus, tmp_path):
    model = dict(DECODER, vocab_size=256)
    write_config(tmp_path / "config.toml", model, dict(task="text", path=corpus, seq_len=32, seed=9), TRAIN)
    run_headlab("train", tmp_path / "config.toml", "--out", tmp_path / "run")
    checkpoint = str(tmp_path / "run" / "checkpoints" / "best.h5")
    dataset = headlab.make_dataset(headlab.load_checkpoint(checkpoint).config)
    last = dataset.eval_batch_count("val", B) - 1  # 37 windows in the val block: the last batch is part padding
    assert check_batches(dataset, checkpoint, "train", TRAIN_BATCHES, tmp_path / "train") == 4 * B
    for split in ("val", "test"):
        assert check_batches(dataset, checkpoint, split, (0, 1, last), tmp_path / split) == 3 * B
    assert (dataset.batch("val", last, B).targets[-1] == -1).all()


def test_rows_are_pure_functions_of_the_key():
    """No state between calls: a batch rebuilt alone, or after others, is the same; a fixed
    training set only ever shows its train_examples examples."""
    config = dict(model=DECODER, data=CASES["grammar_generated_words_fixed_set"][1], train=dict(batch_size=B))
    task = headlab.make_task(config)
    first = task.batch("train", 5, B)
    for i in range(3):
        task.batch("val", i, B)
    again = headlab.make_task(config).batch("train", 5, B)
    assert all(np.array_equal(v, getattr(again, k)) for k, v in first.present().items())
    pool = {task.example("train", i).tokens.tobytes() for i in range(100)}
    assert all(row.tobytes() in pool for b in range(10) for row in task.batch("train", b, B).tokens)
    with pytest.raises(ValueError, match="not a generated task"):
        headlab.make_task(dict(data=dict(task="text")))
