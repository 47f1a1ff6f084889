"""Fixtures: the headlab binary, a small text corpus, and tiny checkpoints trained by the binary
(one per model variant, trained once per test session in a temporary folder)."""
import os
import random
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

# One thread everywhere: the tests run beside others (ctest -j) on few cores.
ENV = dict(os.environ, OMP_NUM_THREADS="1", BLIS_NUM_THREADS="1", OMP_WAIT_POLICY="passive")


def headlab_binary():
    path = os.environ.get("HEADLAB_BINARY") or os.path.join(ROOT, "build", "headlab")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no headlab binary at {path} (build it, or set HEADLAB_BINARY)")
    return path


def run_headlab(*args, cwd=None):
    r = subprocess.run([headlab_binary(), *map(str, args)], capture_output=True, env=ENV, cwd=cwd)
    if r.returncode != 0:
        raise AssertionError(f"headlab {' '.join(map(str, args))} failed ({r.returncode}):\n"
                             f"{r.stdout.decode(errors='replace')}\n{r.stderr.decode(errors='replace')}")
    return r.stdout


WORDS = ("and the lord said unto him behold i will make thy seed as the dust of earth so that if a man "
         "can number dust then shall thy seed also be numbered arise walk through land in length "
         "breadth for i give it unto thee").split()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """About 24 KB of word-salad text with punctuation and newlines, fixed by a seed."""
    rng = random.Random(14)
    lines = []
    while sum(len(l) + 1 for l in lines) < 24000:
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
        words[0] = words[0].capitalize()
        lines.append(" ".join(words) + rng.choice([".", ",", ";", ":", "."]))
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


TRAIN = dict(steps=100, batch_size=8, lr=3e-3, warmup_steps=5, eval_every=40, eval_batches=2, log_every=20,
             checkpoint_every=0, keep_checkpoints=1, threads=1)

# Every variant the issue names: MHA/GQA/MQA, d_head decoupled, tied/untied, learned/sinusoidal,
# bias on/off, GELU/ReLU, heads switched off (active_heads, zero gates), physically pruned
# layer_heads, and encoders with first/mean pooling.
DECODERS = {
    "mha": dict(n_heads=4),
    "gqa_tied_sin_nobias_relu": dict(n_heads=4, n_kv_heads=2, d_head=12, tie_embeddings=True,
                                     positions="sinusoidal", bias=False, activation="relu"),
    "mqa_active_heads": dict(n_heads=4, n_kv_heads=1, d_head=6, active_heads=[3, 2]),
    "pruned_layer_heads": dict(n_heads=4, layer_heads=[3, 1], d_head=8, tie_embeddings=True),
    # `headlab prune` of the "mha" run, its heads physically removed (pruned_small.h5: layer_heads
    # [1, 1], no optimizer state, written by save_pruned_checkpoint)
    "physically_pruned": None,
}
ENCODERS = {
    "enc_first_gqa": dict(n_heads=4, n_kv_heads=2, pooling="first"),
    "enc_mean_nobias_sin_relu": dict(n_heads=2, d_head=10, pooling="mean", bias=False, positions="sinusoidal",
                                     activation="relu"),
}


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return repr(v)


def write_config(path, model, data, train):
    text = ""
    for name, section in (("model", model), ("data", data), ("train", train)):
        text += f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in section.items()) + "\n"
    path.write_text(text)


_trained = {}


def trained(name, tmp_path_factory, corpus):
    """The run folder of variant `name`, trained on first use."""
    if name in _trained:
        return _trained[name]
    root = tmp_path_factory.mktemp(name)
    if name == "physically_pruned":
        run_headlab("prune", trained("mha", tmp_path_factory, corpus), "--strategy", "importance", "--step-frac", 0.25,
                    "--out", root / "prune")
        os.makedirs(root / "run" / "checkpoints")
        os.rename(root / "prune" / "pruned_small.h5", root / "run" / "checkpoints" / "best.h5")
    elif name in DECODERS:
        model = dict(kind="decoder", vocab_size=256, d_model=32, n_layers=2, max_seq_len=32, **DECODERS[name])
        data = dict(task="text", path=corpus, seq_len=32)
        train = TRAIN
    else:
        model = dict(kind="encoder", vocab_size=16, d_model=32, n_layers=2, max_seq_len=12, n_classes=2,
                     **ENCODERS[name])
        data = dict(task="classify", seq_len=12, vocab_size=16, min_len=2, max_len=5)
        # the encoders need more steps to learn the task at all (loss ~0.39 against 0.69 at chance)
        train = dict(TRAIN, batch_size=64, steps=800, lr=4e-3, warmup_steps=20, weight_decay=0.0)
    if name != "physically_pruned":
        write_config(root / "config.toml", model, data, train)
        run_headlab("train", root / "config.toml", "--out", root / "run")
    _trained[name] = str(root / "run")
    return _trained[name]


@pytest.fixture(scope="session")
def train_variant(tmp_path_factory, corpus):
    return lambda name: trained(name, tmp_path_factory, corpus)


# ---- translation (model.kind = "encoder_decoder", data.task = "translate") ----------------------

# The target side: each source word's "translation" (a fixed word map), word for word, so that a
# hundred steps teach the model enough to end its translations with </s> at varying lengths.
LEXICON = {w: w[::-1] + ("a" if len(w) % 2 else "o") for w in WORDS}


@pytest.fixture(scope="session")
def parallel_corpus(tmp_path_factory):
    """Two line-aligned files (source, target) of 600 pairs with what the loader must handle: a
    blank pair, a CRLF line, and a val/test source equal to a training source (dropped)."""
    rng = random.Random(27)
    source, target = [], []
    for i in range(600):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 5))]
        source.append(" ".join(words))
        target.append(" ".join(LEXICON[w] for w in words))
    source[5], target[5] = "   ", "and"      # a blank side: the pair is skipped
    source[575] = source[10]                 # a test source seen in training: dropped
    target[20] += "\r"                       # a CRLF line end: the \r is not part of it
    root = tmp_path_factory.mktemp("parallel")
    (root / "src.txt").write_bytes(("\n".join(source) + "\n").encode())
    (root / "tgt.txt").write_bytes(("\n".join(target) + "\n").encode())
    return str(root / "src.txt"), str(root / "tgt.txt")


SEQ2SEQ_TRAIN = dict(steps=100, lr=1e-2, warmup_steps=5, eval_every=50, eval_batches=2, log_every=50,
                     checkpoint_every=0, keep_checkpoints=1, threads=1)

# Every layout the C++ model supports: MHA with learned positions and an untied head; GQA in the
# decoder, MQA in encoder and cross, each kind its own head count and width, sinusoids, tied
# embeddings, no biases, ReLU; and a sentencepiece vocabulary.
SEQ2SEQ = {
    "s2s_mha_learned": dict(model=dict(n_heads=4, n_layers=2, n_encoder_layers=1), data=dict(tokenizer="bytes")),
    "s2s_gqa_mqa_sin_tied": dict(model=dict(n_heads=4, n_kv_heads=2, d_head=10, n_layers=1, n_encoder_layers=2,
                                            enc_n_heads=2, enc_n_kv_heads=1, enc_d_head=12, cross_n_heads=4,
                                            cross_n_kv_heads=1, cross_d_head=6, positions="sinusoidal",
                                            tie_embeddings=True, bias=False, activation="relu"),
                                 data=dict(tokenizer="bytes")),
    "s2s_sentencepiece": dict(model=dict(n_heads=2, n_layers=1, n_encoder_layers=1, vocab_size=160,
                                         cross_n_heads=4, tie_embeddings=True),
                              data=dict(tokenizer="sentencepiece", vocab_size=150)),
}


def trained_seq2seq(name, tmp_path_factory, parallel_corpus):
    if name in _trained:
        return _trained[name]
    root = tmp_path_factory.mktemp(name)
    v = SEQ2SEQ[name]
    model = dict(dict(kind="encoder_decoder", vocab_size=259, d_model=32, max_seq_len=64), **v["model"])
    data = dict(dict(task="translate", path=parallel_corpus[0], target_path=parallel_corpus[1], seq_len=64,
                     batch_tokens=600), **v["data"])
    write_config(root / "config.toml", model, data, SEQ2SEQ_TRAIN)
    run_headlab("train", root / "config.toml", "--out", root / "run")
    _trained[name] = str(root / "run")
    return _trained[name]


@pytest.fixture(scope="session")
def train_seq2seq(tmp_path_factory, parallel_corpus):
    return lambda name: trained_seq2seq(name, tmp_path_factory, parallel_corpus)
