"""Reading and writing headlab checkpoints with h5py and numpy only (no torch).

A checkpoint (docs/checkpoint-format.md) is an HDF5 file with root attributes (`config`, a TOML
string holding the resolved run config, `step`, ...) and one float32 dataset per parameter under
`model/`, named by module path: `model/blocks/0/attn/qkv/weight`.

    ckpt = load_checkpoint("runs/x/checkpoints/best.h5")
    ckpt.config["model"]["n_heads"], ckpt.spec["d_head"], ckpt.params["blocks/0/attn/qkv/weight"]
    save_checkpoint("edited.h5", ckpt)       # `headlab eval edited.h5` reads it
"""
from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field

import h5py
import numpy as np

FORMAT_VERSION = 1
# What a headlab .h5 file holds (its headlab_kind), as include/headlab/io/file_kind.h lists them;
# files written before kinds were told apart say "checkpoint" whatever they hold.
FILE_KINDS = {
    "checkpoint": "a checkpoint (written by headlab train or prune)",
    "heads": "a heads file (written by headlab analyze)",
    "attention": "an attention dump (written by headlab analyze --dump-example or --prompt)",
    "bleu_ablation": "a BLEU ablation file (written by headlab analyze's BLEU ablation)",
}
MODEL_PREFIX = "model/"
MODEL_KINDS = ("decoder", "encoder", "encoder_decoder")  # model.kind (include/headlab/nn/model_kinds.h)
TOKENIZER_MODEL = "tokenizer/model"  # the text tokenizer's model bytes; attribute "tokenizer" is its kind

# The run attributes headlab's reader requires (load_training_checkpoint), with the values a
# checkpoint without training progress carries (a pruned one: save_pruned_checkpoint).
_INT_ATTRS = {"step": 0, "has_best": 0, "log_loss_steps": 0, "tokens_seen": 0}
_FLOAT_ATTRS = {"best_val_loss": 0.0, "elapsed_s": 0.0, "log_loss_sum": 0.0}


def model_spec(config: dict) -> dict:
    """The architecture a resolved config describes, with headlab's derived values filled in
    (src/train/setup.cpp model_spec): n_kv_heads 0 -> n_heads, d_head 0 -> d_model / n_heads,
    d_mlp = mlp_ratio * d_model, and per-layer head counts."""
    m = dict(config.get("model", {}))
    get = m.get
    n_heads = int(get("n_heads", 4))
    d_model = int(get("d_model", 128))
    n_layers = int(get("n_layers", 2))
    layer_heads = [int(h) for h in get("layer_heads", [])]
    n_kv = int(get("n_kv_heads", 0)) or n_heads
    spec = dict(
        kind=get("kind", "decoder"),
        vocab_size=int(get("vocab_size", 256)),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        d_head=int(get("d_head", 0)) or d_model // n_heads,
        n_layers=n_layers,
        d_mlp=int(get("mlp_ratio", 4)) * d_model,
        max_seq_len=int(get("max_seq_len", 256)),
        positions=get("positions", "learned"),
        activation=get("activation", "gelu"),
        norm_eps=float(get("norm_eps", 1e-5)),
        tie_embeddings=bool(get("tie_embeddings", False)),
        bias=bool(get("bias", True)),
        n_classes=int(get("n_classes", 2)),
        pooling=get("pooling", "first"),
        layer_heads=layer_heads,
        active_heads=[int(h) for h in get("active_heads", [])],
        mlp_units=[int(u) for u in get("mlp_units", [])],
    )
    # Layer l's query heads and K/V heads (a pruned layer keeps MHA: as many K/V heads as query heads).
    spec["heads"] = layer_heads if layer_heads else [n_heads] * n_layers
    spec["kv_heads"] = layer_heads if layer_heads else [n_kv] * n_layers
    if spec["kind"] not in MODEL_KINDS:
        raise ValueError(f"model.kind must be one of {', '.join(MODEL_KINDS)}, got {spec['kind']!r}")
    if spec["kind"] == "encoder_decoder":
        # The encoder and the cross-attention default to the decoder's head count, their K/V heads
        # to their own head count, their width to d_model / their head count (config_schema.cpp).
        spec["n_encoder_layers"] = int(get("n_encoder_layers", 0)) or n_layers
        for kind in ("enc", "cross"):
            h = int(get(f"{kind}_n_heads", 0)) or n_heads
            spec[kind] = dict(heads=h, kv_heads=int(get(f"{kind}_n_kv_heads", 0)) or h,
                              d_head=int(get(f"{kind}_d_head", 0)) or d_model // h)
            if spec[kind]["heads"] % spec[kind]["kv_heads"]:
                raise ValueError(f"model.{kind}_n_kv_heads={spec[kind]['kv_heads']} does not divide "
                                 f"model.{kind}_n_heads={spec[kind]['heads']}")
        _check_site_lists(spec)
        if layer_heads:  # the decoder's self-attention sites: E + 2 l
            E = spec["n_encoder_layers"]
            spec["heads"] = spec["kv_heads"] = [layer_heads[E + 2 * l] for l in range(n_layers)]
    for l, (h, hkv) in enumerate(zip(spec["heads"], spec["kv_heads"])):
        if hkv and h % hkv:  # 0 and 0: the layer's attention removed whole
            raise ValueError(f"layer {l}: n_kv_heads={hkv} does not divide n_heads={h}")
    blocks = mlp_blocks(spec)
    if spec["mlp_units"] and len(spec["mlp_units"]) != blocks:
        raise ValueError(f"model.mlp_units has {len(spec['mlp_units'])} entries but the model has {blocks} MLP blocks "
                         "(an encoder_decoder's encoder blocks, then the decoder's), or [] for d_mlp units in each")
    return spec


def mlp_blocks(spec: dict) -> int:
    """Blocks with an MLP (ModelSpec::mlp_blocks): an encoder_decoder's encoder blocks, then the
    decoder's; otherwise the stack's."""
    return spec["n_layers"] + (spec["n_encoder_layers"] if spec["kind"] == "encoder_decoder" else 0)


def mlp_units(spec: dict, encoder: bool, layer: int) -> int:
    """Hidden units of a block's MLP (ModelSpec::units_at_block): mlp_units, or d_mlp."""
    if not spec["mlp_units"]:
        return spec["d_mlp"]
    block = layer if encoder or spec["kind"] != "encoder_decoder" else spec["n_encoder_layers"] + layer
    return spec["mlp_units"][block]


def ffn_gate_shapes(spec: dict) -> dict:
    """The FFN unit gates ("enc/<l>/mlp/gates", "blocks/<l>/mlp/gates": [units]), in MLP block
    order. A checkpoint holds all of them or none (none: every gate 1)."""
    shapes = {}
    if spec["kind"] == "encoder_decoder":
        for l in range(spec["n_encoder_layers"]):
            shapes[f"enc/{l}/mlp/gates"] = (mlp_units(spec, True, l),)
    for l in range(spec["n_layers"]):
        shapes[f"blocks/{l}/mlp/gates"] = (mlp_units(spec, False, l),)
    return shapes


def _check_site_lists(spec: dict) -> None:
    """An encoder_decoder's layer_heads and active_heads: one entry per attention site, and
    layer_heads only with multi-head attention in every kind (ModelSpec's spec_problem)."""
    n_sites = spec["n_encoder_layers"] + 2 * spec["n_layers"]
    for key in ("layer_heads", "active_heads"):
        if spec[key] and len(spec[key]) != n_sites:
            raise ValueError(f"model.{key} has {len(spec[key])} entries but an encoder_decoder has {n_sites} "
                             f"attention sites ({spec['n_encoder_layers']} encoder layers, then self and cross "
                             "per decoder layer), or [] for all heads")
    if spec["layer_heads"]:
        shapes = {"": (spec["n_heads"], spec["n_kv_heads"]), "enc_": (spec["enc"]["heads"], spec["enc"]["kv_heads"]),
                  "cross_": (spec["cross"]["heads"], spec["cross"]["kv_heads"])}
        for prefix, (h, hkv) in shapes.items():
            if h != hkv:
                raise ValueError(f"model.layer_heads needs multi-head attention (model.{prefix}n_kv_heads = "
                                 f"model.{prefix}n_heads), got model.{prefix}n_kv_heads={hkv}, "
                                 f"model.{prefix}n_heads={h}; mask GQA/MQA heads with gates instead")


def site_index(spec: dict, kind: str, layer: int) -> int:
    """A site's position in attention_sites() (and in layer_heads, active_heads, the gates)."""
    if spec["kind"] != "encoder_decoder" or kind == "enc":
        return layer
    return spec["n_encoder_layers"] + 2 * layer + (kind == "cross")


def attention_shape(spec: dict, kind: str, layer: int) -> tuple:
    """(heads, kv_heads, d_head) of one attention site (ModelSpec::attention_shape): its kind's,
    or, in a physically pruned model, its layer_heads entry as query and K/V heads (MHA)."""
    if kind == "dec":
        return spec["heads"][layer], spec["kv_heads"][layer], spec["d_head"]
    k = spec[kind]
    if spec["layer_heads"]:
        h = spec["layer_heads"][site_index(spec, kind, layer)]
        return h, h, k["d_head"]
    return k["heads"], k["kv_heads"], k["d_head"]


def attention_sites(spec: dict) -> list:
    """The attention layers in gate order (ModelSpec::attention_sites): (kind, layer, gate name,
    heads). A decoder's or encoder's is ("dec", l, "blocks/<l>/attn/gates", H_l) per layer; an
    encoder_decoder has the encoder's first ("enc", l, "enc/<l>/attn/gates"), then per decoder
    layer its self-attention ("dec") and its cross-attention ("cross", l, "blocks/<l>/cross/gates")."""
    if spec["kind"] != "encoder_decoder":
        return [("dec", l, f"blocks/{l}/attn/gates", spec["heads"][l]) for l in range(spec["n_layers"])]
    sites = [("enc", l, f"enc/{l}/attn/gates", attention_shape(spec, "enc", l)[0])
             for l in range(spec["n_encoder_layers"])]
    for l in range(spec["n_layers"]):
        sites.append(("dec", l, f"blocks/{l}/attn/gates", spec["heads"][l]))
        sites.append(("cross", l, f"blocks/{l}/cross/gates", attention_shape(spec, "cross", l)[0]))
    return sites


def parameter_shapes(spec: dict) -> dict:
    """Every model tensor of a spec, name -> shape, in headlab's declaration order
    (src/nn/model.cpp parameter_layout), gates included ("blocks/<l>/attn/gates"; an
    encoder_decoder's also "enc/<l>/attn/gates" and "blocks/<l>/cross/gates")."""
    C, Dh, V = spec["d_model"], spec["d_head"], spec["vocab_size"]
    shapes = {"tok_emb/weight": (V, C)}
    if spec["positions"] == "learned":
        shapes["pos_emb/weight"] = (spec["max_seq_len"], C)

    def linear(name, out, inp):
        shapes[name + "/weight"] = (out, inp)
        if spec["bias"]:
            shapes[name + "/bias"] = (out,)

    def norm(name):
        shapes[name + "/weight"] = (C,)
        shapes[name + "/bias"] = (C,)

    def block(prefix, H, Hkv, Dh, F, cross=None):
        norm(f"{prefix}/ln1")
        linear(f"{prefix}/attn/qkv", (H + 2 * Hkv) * Dh, C)
        linear(f"{prefix}/attn/proj", C, H * Dh)
        if cross is not None:  # an encoder_decoder's decoder block: LN_c, q, kv, proj
            XH, XHkv, XDh = cross
            norm(f"{prefix}/cross/ln")
            linear(f"{prefix}/cross/q", XH * XDh, C)
            linear(f"{prefix}/cross/kv", 2 * XHkv * XDh, C)
            linear(f"{prefix}/cross/proj", C, XH * XDh)
        norm(f"{prefix}/ln2")
        linear(f"{prefix}/mlp/fc", F, C)
        linear(f"{prefix}/mlp/proj", C, F)

    seq2seq = spec["kind"] == "encoder_decoder"
    if seq2seq:
        if spec["positions"] == "learned":
            shapes["enc/pos_emb/weight"] = (spec["max_seq_len"], C)
        for l in range(spec["n_encoder_layers"]):
            block(f"enc/{l}", *attention_shape(spec, "enc", l), mlp_units(spec, True, l))
        norm("enc/ln_f")
    for l in range(spec["n_layers"]):
        block(f"blocks/{l}", spec["heads"][l], spec["kv_heads"][l], Dh, mlp_units(spec, False, l),
              attention_shape(spec, "cross", l) if seq2seq else None)
    norm("ln_f")
    if spec["kind"] in ("decoder", "encoder_decoder"):
        if not spec["tie_embeddings"]:
            shapes["lm_head/weight"] = (V, C)
    else:
        linear("cls_head", spec["n_classes"], C)
    for _, _, name, heads in attention_sites(spec):
        shapes[name] = (heads,)
    return shapes


@dataclass
class Checkpoint:
    """A headlab checkpoint in memory.

    config: the resolved run config, {section: {key: value}} (parsed from the `config` attribute);
    spec:   the architecture with derived values (model_spec(config));
    params: model tensors by name without the "model/" prefix, float32 numpy arrays, gates included;
    attrs:  the root attributes (strings, ints, floats), `config` among them;
    optim:  the optimizer datasets (optim/...), kept only when load_checkpoint(optimizer=True);
    tokenizer: the text tokenizer's model (dataset tokenizer/model, of kind attrs["tokenizer"]:
            a sentencepiece model proto, or b"bytes"), None when the file stores none.
    """
    config: dict
    params: dict
    attrs: dict = field(default_factory=dict)
    optim: dict = field(default_factory=dict)
    tokenizer: bytes | None = None

    @property
    def spec(self) -> dict:
        return model_spec(self.config)

    def gates(self) -> list:
        """Per-layer head gates [H_l] (1 = on, 0 = off); an encoder_decoder's per attention site,
        in attention_sites() order (encoder layers, then each decoder layer's self and cross)."""
        return [self.params[name] for _, _, name, _ in attention_sites(self.spec)]


def _attr_value(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.generic):
        return v.item()
    return v


def load_checkpoint(path: str, optimizer: bool = False) -> Checkpoint:
    """Reads a headlab checkpoint (any model: decoder, encoder or encoder_decoder, pruned
    `layer_heads` ones too).
    Checks what headlab's reader checks: the kind and format attributes, and that the model
    tensors are exactly those the config describes, with their shapes."""
    with h5py.File(path, "r") as f:
        attrs = {k: _attr_value(f.attrs[k]) for k in f.attrs}
        kind = attrs.get("headlab_kind")
        if kind in FILE_KINDS and kind != "checkpoint":
            raise ValueError(f"{path}: {FILE_KINDS[kind]}, not a checkpoint")
        if kind != "checkpoint":
            raise ValueError(f"{path}: not a headlab checkpoint (headlab_kind is {kind!r})")
        if attrs.get("headlab_format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported checkpoint format version {attrs.get('headlab_format_version')} "
                             f"(this reader reads {FORMAT_VERSION})")
        if "config" not in attrs:
            raise ValueError(f"{path}: not a training checkpoint (no config attribute)")
        tensors = {}
        f.visititems(lambda name, obj: tensors.__setitem__(name, np.array(obj))
                     if isinstance(obj, h5py.Dataset) else None)
    config = tomllib.loads(attrs["config"])
    params = {k[len(MODEL_PREFIX):]: v for k, v in tensors.items() if k.startswith(MODEL_PREFIX)}
    optim = {k: v for k, v in tensors.items() if k.startswith("optim/")} if optimizer else {}
    tokenizer = tensors[TOKENIZER_MODEL].tobytes() if TOKENIZER_MODEL in tensors else None
    ckpt = Checkpoint(config=config, params=params, attrs=attrs, optim=optim, tokenizer=tokenizer)
    check_params(ckpt.spec, params, path)
    return ckpt


def check_params(spec: dict, params: dict, where: str = "checkpoint") -> None:
    want = parameter_shapes(spec)
    ffn = ffn_gate_shapes(spec)
    if next(iter(ffn)) in params:  # FFN gates: all or none
        want.update(ffn)
    missing = [k for k in want if k not in params]
    extra = [k for k in params if k not in want]
    if missing or extra:
        raise ValueError(f"{where}: the model tensors do not match the config (missing {missing}, unexpected {extra})")
    for k, shape in want.items():
        if tuple(params[k].shape) != tuple(shape):
            raise ValueError(f"{where}: model/{k} has shape {list(params[k].shape)}, the config gives {list(shape)}")


# ---- writing -------------------------------------------------------------------------------

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        s = repr(v)
        return s if any(c in s for c in ".en") else s + ".0"
    if isinstance(v, str):
        out = '"'
        for c in v:
            if c in '"\\':
                out += "\\" + c
            elif c == "\n":
                out += "\\n"
            elif c == "\t":
                out += "\\t"
            elif ord(c) < 32 or ord(c) == 127:
                out += f"\\u{ord(c):04x}"
            else:
                out += c
        return out + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} as a TOML value")


def to_toml(config: dict) -> str:
    """The config as TOML: one [section] per table, as headlab writes it."""
    lines = []
    for section, table in config.items():
        if not isinstance(table, dict):
            lines.append(f"{section} = {_toml_value(table)}")
            continue
        lines.append(f"[{section}]")
        for key, value in table.items():
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def save_checkpoint(path: str, ckpt: Checkpoint, optimizer: bool = False) -> None:
    """Writes `ckpt` in headlab's layout (HDF5 1.10 format, one chunk per dataset with a
    Fletcher-32 checksum, float32 tensors under model/, the run attributes), so `headlab eval`,
    `analyze`, `sample`, `info` and `train --init` read it. The provenance attributes of the file
    it came from are kept. Optimizer state is written only with optimizer=True and ckpt.optim
    loaded (and only if the shapes still match); without it the file is like a pruned checkpoint:
    it evaluates, and `headlab train --init` starts a new run from it.
    Written to a temporary name and renamed, as headlab does."""
    spec = ckpt.spec
    check_params(spec, ckpt.params, path)
    attrs = dict(ckpt.attrs)
    attrs["config"] = to_toml(ckpt.config)
    attrs["headlab_kind"] = "checkpoint"
    attrs["headlab_format_version"] = FORMAT_VERSION
    for k, v in _INT_ATTRS.items():
        attrs.setdefault(k, v)
    for k, v in _FLOAT_ATTRS.items():
        attrs.setdefault(k, v)
    attrs.setdefault("rng", "counter")
    optim = ckpt.optim if optimizer else {}
    if not optim:
        attrs.pop("optimizer", None)
        attrs.pop("optimizer_steps", None)
    datasets = {MODEL_PREFIX + k: np.ascontiguousarray(v, dtype=np.float32) for k, v in ckpt.params.items()}
    datasets.update(optim)
    if ckpt.tokenizer is not None and "tokenizer" in attrs:
        datasets[TOKENIZER_MODEL] = np.frombuffer(ckpt.tokenizer, dtype=np.uint8)
    else:  # the kind without its model would be refused
        attrs.pop("tokenizer", None)
    tmp = f"{path}.tmp.{os.getpid()}"  # headlab's temp name: prune_checkpoints clears it if we die
    try:
        with h5py.File(tmp, "w", libver=("v110", "v110")) as f:
            for k, v in attrs.items():
                if isinstance(v, bool):
                    v = int(v)
                if isinstance(v, str):
                    f.attrs.create(k, v, dtype=h5py.string_dtype("utf-8"))
                elif isinstance(v, (int, np.integer)):
                    f.attrs.create(k, np.int64(v), dtype="<i8")
                elif isinstance(v, (float, np.floating)):
                    f.attrs.create(k, np.float64(v), dtype="<f8")
                else:
                    raise TypeError(f"attribute {k}: cannot write {type(v).__name__}")
            for name in sorted(datasets):
                a = np.ascontiguousarray(datasets[name])
                if a.size:
                    f.create_dataset(name, data=a, chunks=a.shape if a.ndim else None,
                                     fletcher32=a.ndim > 0)
                else:
                    f.create_dataset(name, data=a)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
