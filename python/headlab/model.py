"""headlab's transformer in PyTorch: the same forward as src/nn/model.cpp, written the plain way
(matmul + masked softmax attention), so a checkpoint gives the same logits and loss as the
binary (docs/checkpoint-format.md, "The forward pass", states every step).

    model = Model.from_checkpoint("runs/x/checkpoints/best.h5")   # float32; .double() for a reference
    out = model(tokens, targets=targets, return_attention=True)
    out.logits [B,T,V] (encoder [B,n_classes]), out.loss, out.attention[l] [B,H_l,T,T]

Parameter names are the checkpoint's with "." for "/": blocks.0.attn.qkv.weight. The head gates
are buffers (blocks.<l>.attn.gates, 1 = on, 0 = off), not trained; forward(gates=[...]) takes
other gate tensors (e.g. ones with requires_grad, whose gradient is Michel et al.'s importance).
A forward hook on model.blocks[l].attn receives (head outputs [B,T,H,Dh] gated, probabilities
[B,H,T,T]) as its output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .checkpoint import (Checkpoint, ffn_gate_shapes, load_checkpoint, mlp_units, model_spec, parameter_shapes,
                         save_checkpoint)


@dataclass
class ModelOutput:
    logits: torch.Tensor                      # decoder [B,T,V]; encoder [B,n_classes]
    loss: Optional[torch.Tensor] = None       # mean cross-entropy over targets != -1
    attention: Optional[list] = None          # per layer [B,H_l,T,T] (return_attention=True)
    head_outputs: Optional[list] = None       # per layer [B,T,H_l,Dh], gates applied (return_head_outputs=True)


def sinusoid_table(max_seq_len: int, d_model: int) -> torch.Tensor:
    """pe[t, 2i] = sin(t / 10000^(2i/d_model)), pe[t, 2i+1] = cos(the same), in float64."""
    t = np.arange(max_seq_len, dtype=np.float64)[:, None]
    i = np.arange(d_model // 2, dtype=np.float64)[None, :]
    angle = t / np.power(10000.0, 2.0 * i / d_model)
    pe = np.zeros((max_seq_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return torch.from_numpy(pe)


class Linear(nn.Module):
    """y = x W^T (+ b), W [out, in] as headlab stores it."""

    def __init__(self, inp, out, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(out, inp))
        self.bias = nn.Parameter(torch.zeros(out)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * w + b, var the biased variance over the last axis."""

    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


def attend(q, k, v, hidden, padded, gates):
    """Scaled dot-product attention of q [B,H,T,Dh] over k, v [B,Hkv,S,Dh], query head h reading
    K/V head h // (H / Hkv): per-head outputs [B,H,T,Dh] (times gates, [H] or [B,H], unless
    None) and probabilities [B,H,T,S]. hidden: bool mask of the scores no query may see
    (broadcast to [B,H,T,S]) or None; padded: whether some row may see no key at all."""
    H, Hkv, Dh = q.shape[1], k.shape[1], q.shape[-1]
    if Hkv != H:
        k = k.repeat_interleave(H // Hkv, dim=1)
        v = v.repeat_interleave(H // Hkv, dim=1)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(Dh))
    if hidden is not None:
        scores = scores.masked_fill(hidden, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if padded:  # a query that sees no key at all: probabilities (and output) 0, not NaN
        probs = torch.nan_to_num(probs, nan=0.0)
    out = probs @ v
    if gates is not None:
        g = gates.to(out.dtype)
        # one gate per head [H], or per example and head [B,H] (per-example gate gradients)
        out = out * (g[None, :, None, None] if g.dim() == 1 else g[:, :, None, None])
    return out, probs


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, d_head, bias):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_head
        self.qkv = Linear(d_model, (n_heads + 2 * n_kv_heads) * d_head, bias)
        self.proj = Linear(n_heads * d_head, d_model, bias)
        self.register_buffer("gates", torch.ones(n_heads))
        self.gated = True  # False: skip the multiplication by the model's gates (all ones: the speed reference)

    def forward(self, x, hidden, padded, gates):
        """Per-head outputs [B,T,H,Dh] (gated) and probabilities [B,H,T,T]. hidden: bool mask of
        the scores no query may see ([T,T] or [B,1,T,T]) or None; padded: whether some row may
        see no key at all."""
        B, T, _ = x.shape
        H, Hkv, Dh = self.n_heads, self.n_kv_heads, self.d_head
        qkv = self.qkv(x).view(B, T, H + 2 * Hkv, Dh)
        q = qkv[:, :, :H].transpose(1, 2)                  # [B,H,T,Dh]
        k = qkv[:, :, H:H + Hkv].transpose(1, 2)           # [B,Hkv,T,Dh]
        v = qkv[:, :, H + Hkv:].transpose(1, 2)
        g = gates if gates is not None else self.gates if self.gated else None
        out, probs = attend(q, k, v, hidden, padded, g)    # [B,H,T,Dh], [B,H,T,T]
        return out.transpose(1, 2), probs


class Block(nn.Module):
    def __init__(self, spec, n_heads, n_kv_heads, d_head=None, d_mlp=None):
        super().__init__()
        C, eps, units = spec["d_model"], spec["norm_eps"], spec["d_mlp"] if d_mlp is None else d_mlp
        self.ln1 = LayerNorm(C, eps)
        self.attn = Attention(C, n_heads, n_kv_heads, d_head or spec["d_head"], spec["bias"])
        self.ln2 = LayerNorm(C, eps)
        self.mlp = nn.Module()
        self.mlp.fc = Linear(C, units, spec["bias"])
        self.mlp.proj = Linear(units, C, spec["bias"])
        self.mlp.register_buffer("gates", torch.ones(units))  # FFN unit gates (1 = on, 0 = pruned)
        self.activation = spec["activation"]

    def forward(self, x, hidden, padded, gates):
        x, a, probs = self.self_attention(x, hidden, padded, gates)
        return self.add_mlp(x), a, probs

    def self_attention(self, x, hidden, padded, gates):
        """x + proj(Attn(LN1(x))), the head outputs and the probabilities."""
        a, probs = self.attn(self.ln1(x), hidden, padded, gates)  # a [B,T,H,Dh]; forward hooks see both
        B, T = a.shape[:2]
        # H Dh, not -1: a layer removed whole has 0 heads
        return x + self.attn.proj(a.reshape(B, T, a.shape[2] * a.shape[3])), a, probs

    def add_mlp(self, x):
        h = self.mlp.fc(self.ln2(x))
        h = F.gelu(h, approximate="tanh") if self.activation == "gelu" else F.relu(h)
        g = self.mlp.gates  # all 1 and no gradient asked of them: the ungated MLP, as headlab skips it
        if self.attn.gated and (g.requires_grad or not bool((g == 1).all())):
            h = h * g
        return x + self.mlp.proj(h)


class CheckpointModule(nn.Module):
    """What every headlab torch model shares: parameters and gates named as in a checkpoint
    ("blocks/0/attn/qkv/weight" is the tensor blocks.0.attn.qkv.weight), read and written."""

    spec: dict
    config: dict

    @classmethod
    def from_checkpoint(cls, ckpt) -> "CheckpointModule":
        """A model holding a checkpoint's weights and gates (float32, as stored); Model's gives an
        EncoderDecoder for an encoder_decoder checkpoint."""
        if not isinstance(ckpt, Checkpoint):
            ckpt = load_checkpoint(str(ckpt))
        if cls is Model and ckpt.spec["kind"] == "encoder_decoder":
            from .seq2seq import EncoderDecoder
            cls = EncoderDecoder
        model = cls(ckpt.config)
        model.load_arrays(ckpt.params)
        model.checkpoint_attrs = dict(ckpt.attrs)
        model.checkpoint_tokenizer = ckpt.tokenizer
        return model

    def load_arrays(self, params: dict) -> None:
        """Copies checkpoint-named arrays ("blocks/0/attn/qkv/weight") into the model; FFN gates
        a checkpoint does not hold are all 1."""
        state = self.state_dict()
        for name in list(parameter_shapes(self.spec)) + list(ffn_gate_shapes(self.spec)):
            key = name.replace("/", ".")
            value = params[name] if name in params else np.ones(tuple(state[key].shape), np.float32)
            state[key].copy_(torch.from_numpy(np.asarray(value)).to(state[key].dtype))

    def arrays(self) -> dict:
        """The model's tensors by checkpoint name, float32 numpy arrays (gates included; the FFN
        gates only when one is not 1, as headlab writes them)."""
        state = self.state_dict()
        names = list(parameter_shapes(self.spec))
        ffn = list(ffn_gate_shapes(self.spec))
        if any(bool((state[n.replace("/", ".")] != 1).any()) for n in ffn):
            names += ffn
        return {name: state[name.replace("/", ".")].detach().cpu().float().numpy().copy() for name in names}

    def to_checkpoint(self) -> Checkpoint:
        attrs = dict(getattr(self, "checkpoint_attrs", {}))
        return Checkpoint(config=self.config, params=self.arrays(), attrs=attrs,
                          tokenizer=getattr(self, "checkpoint_tokenizer", None))

    def save_checkpoint(self, path: str) -> None:
        """Writes the model as a headlab checkpoint (no optimizer state): `headlab eval PATH`.
        The checkpoint's tokenizer goes with it (a model built from a config has none: give it
        one with use_tokenizer_of)."""
        save_checkpoint(path, self.to_checkpoint())

    def use_tokenizer_of(self, ckpt: Checkpoint) -> None:
        """Stores `ckpt`'s tokenizer (kind and model) with this model's checkpoints."""
        self.checkpoint_attrs = dict(getattr(self, "checkpoint_attrs", {}))
        self.checkpoint_tokenizer = ckpt.tokenizer
        if "tokenizer" in ckpt.attrs:
            self.checkpoint_attrs["tokenizer"] = ckpt.attrs["tokenizer"]


def add_embeddings(module, spec):
    """The token embedding tok_emb.weight [V, C], and learned positions pos_emb.weight or a
    sinusoid table, on `module` (Model and EncoderDecoder share them by name)."""
    C, V = spec["d_model"], spec["vocab_size"]
    module.tok_emb = nn.Module()
    module.tok_emb.weight = nn.Parameter(torch.zeros(V, C))
    if spec["positions"] == "learned":
        module.pos_emb = nn.Module()
        module.pos_emb.weight = nn.Parameter(torch.zeros(spec["max_seq_len"], C))
    else:
        module.sinusoid = sinusoid_table(spec["max_seq_len"], C)  # float64, cast at use: not a buffer


class Model(CheckpointModule):
    """A headlab decoder (causal LM) or encoder (classifier), built from a config or spec
    (an encoder_decoder is seq2seq.EncoderDecoder; Model.from_checkpoint and load_model pick it)."""

    def __init__(self, config: dict, gated: bool = True):
        """gated=False leaves the multiplication by the model's own gates out of the forward
        (they must all be 1 then: a plain PyTorch transformer, as bench/torch_ref.py times it);
        gates passed to forward() are applied either way."""
        super().__init__()
        self.config = config
        spec = self.spec = model_spec(config)
        if spec["kind"] == "encoder_decoder":
            raise ValueError("model.kind = encoder_decoder is headlab.EncoderDecoder, not Model "
                             "(Model.from_checkpoint and load_model choose it themselves)")
        C, V = spec["d_model"], spec["vocab_size"]
        add_embeddings(self, spec)
        self.blocks = nn.ModuleList(Block(spec, spec["heads"][l], spec["kv_heads"][l], d_mlp=mlp_units(spec, False, l))
                                    for l in range(spec["n_layers"]))
        for blk in self.blocks:
            blk.attn.gated = gated
        self._causal = {}  # T -> [T,T] bool, True above the diagonal (key s > query t)
        self.ln_f = LayerNorm(C, spec["norm_eps"])
        if spec["kind"] == "decoder":
            if not spec["tie_embeddings"]:
                self.lm_head = nn.Module()
                self.lm_head.weight = nn.Parameter(torch.zeros(V, C))
        else:
            self.cls_head = Linear(C, spec["n_classes"], spec["bias"])

    # ---- gates -------------------------------------------------------------------------------

    def gates(self) -> list:
        """The per-layer gate buffers [H_l]; assign into them to switch heads off or on:
        model.gates()[layer][head] = 0."""
        return [blk.attn.gates for blk in self.blocks]

    def set_head_mask(self, heads, value: float = 0.0) -> None:
        """Sets the gates of (layer, head) pairs, e.g. [(0, 1), (1, 3)], to value."""
        with torch.no_grad():
            for layer, head in heads:
                self.blocks[layer].attn.gates[head] = value

    # ---- forward -----------------------------------------------------------------------------

    def embed(self, tokens):
        T = tokens.shape[1]
        if T > self.spec["max_seq_len"]:
            raise ValueError(f"sequence length {T} is outside [1, max_seq_len={self.spec['max_seq_len']}]")
        w = self.tok_emb.weight
        pos = self.pos_emb.weight[:T] if hasattr(self, "pos_emb") else self.sinusoid[:T].to(w.dtype)
        return F.embedding(tokens, w) + pos

    def forward(self, tokens, targets=None, labels=None, key_padding=None, gates=None,
                return_attention=False, return_head_outputs=False) -> ModelOutput:
        """tokens [B,T] int; decoder targets [B,T] (-1 = ignore), encoder labels [B] (-1 = ignore);
        key_padding [B,T] (1 = real token, 0 = padding: no query attends to it); gates: None (the
        model's) or one tensor per layer, [H_l] or [B,H_l]."""
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        if key_padding is not None:
            key_padding = torch.as_tensor(key_padding)
        decoder = self.spec["kind"] == "decoder"
        x = self.embed(tokens)
        T = tokens.shape[1]
        hidden = None  # the scores no query sees: causal (decoder) and padded keys
        if decoder:
            if T not in self._causal:
                self._causal[T] = torch.ones(T, T, dtype=torch.bool).triu(1)
            hidden = self._causal[T].to(x.device)
        if key_padding is not None:
            pad = ~key_padding.bool()[:, None, None, :]  # [B,1,1,T]
            hidden = pad if hidden is None else (hidden | pad)
        attention, head_outputs = [], []
        for l, blk in enumerate(self.blocks):
            x, a, probs = blk(x, hidden, key_padding is not None, None if gates is None else gates[l])
            if return_attention:
                attention.append(probs)
            if return_head_outputs:
                head_outputs.append(a)
        x = self.ln_f(x)
        loss = None
        if decoder:
            head = self.lm_head.weight if hasattr(self, "lm_head") else self.tok_emb.weight
            logits = x @ head.t()
            if targets is not None:
                targets = torch.as_tensor(targets, dtype=torch.long)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)
        else:
            if self.spec["pooling"] == "first":
                pooled = x[:, 0]
            else:  # the mean over real tokens
                w = (torch.ones(tokens.shape, dtype=x.dtype) if key_padding is None else key_padding.to(x.dtype))
                pooled = (w[:, :, None] * x).sum(1) / w.sum(1, keepdim=True)
            logits = self.cls_head(pooled)
            if labels is not None:
                labels = torch.as_tensor(labels, dtype=torch.long)
                loss = F.cross_entropy(logits, labels, ignore_index=-1)
        return ModelOutput(logits=logits, loss=loss, attention=attention if return_attention else None,
                           head_outputs=head_outputs if return_head_outputs else None)

    @torch.no_grad()
    def generate(self, prompt: bytes, n_tokens: int) -> bytes:
        """Greedy continuation of a byte prompt, as `headlab sample --temperature 0` (a full
        forward over the last max_seq_len tokens per step; the first maximum wins ties)."""
        tokens = list(prompt)
        for _ in range(n_tokens):
            window = tokens[-self.spec["max_seq_len"]:]
            logits = self(torch.tensor([window])).logits[0, -1]
            tokens.append(int(torch.argmax(logits)))
        return bytes(tokens[len(prompt):])


def load_model(path: str, dtype=torch.float32) -> CheckpointModule:
    """Model.from_checkpoint(path), in `dtype` (torch.float64 for a reference computation): a
    Model, or a seq2seq.EncoderDecoder for an encoder_decoder checkpoint."""
    return Model.from_checkpoint(path).to(dtype)


def export_state_dict(checkpoint_path: str, out_path: str) -> dict:
    """Saves a checkpoint's weights as a PyTorch state_dict file (torch.save), keys as
    Model.state_dict(): load it with Model(config).load_state_dict(torch.load(out_path))."""
    model = Model.from_checkpoint(checkpoint_path)  # an EncoderDecoder for that kind
    state = model.state_dict()
    torch.save(state, out_path)
    return state
