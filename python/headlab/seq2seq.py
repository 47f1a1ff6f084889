"""headlab's encoder_decoder (model.kind = "encoder_decoder", src/nn/model.cpp) in PyTorch, the
same math as the binary's forward:

    m = LN_enc(encoder blocks over embed_enc(source)), bidirectional, source padding hidden
    x = embed(tokens); per decoder block:  x += SelfAttn(LN1(x)) (causal, target padding hidden)
                                           x += Cross(LN_c(x), m)  (q from x, k/v from m)
                                           x += MLP(LN2(x))
    logits = LN_f(x) W^T, W = lm_head or tok_emb (tied); loss = mean CE over targets != -1

One token table embeds source and target (a joint vocabulary); positions are learned (pos_emb for
the target, enc/pos_emb for the source) or the same sinusoids for both. Each attention kind has
its own heads, K/V heads (GQA/MQA) and d_head (model_spec: spec["heads"], spec["enc"],
spec["cross"]); a physically pruned one has model.layer_heads per attention site (attention_shape).

    model = headlab.load_model("runs/t/checkpoints/best.h5", torch.float64)  # an EncoderDecoder
    out = model(tokens, source=src, source_padding=sp, key_padding=kp, targets=y, return_attention=True)
    out.attention["enc"][l] [B,H,S,S], ["dec"][l] [B,H,T,T], ["cross"][l] [B,H,T,S]
    model.translate(["In the beginning"])      # greedy, as headlab's decode/search.h with beam 1
    model.translate(["In the beginning"], beam=5)  # beam search, as `headlab translate --beam 5`

Parameter names are the checkpoint's with "." for "/": enc.0.attn.qkv.weight,
blocks.1.cross.kv.weight; the gates are buffers enc.<l>.attn.gates, blocks.<l>.attn.gates and
blocks.<l>.cross.gates. forward(gates=[...]) takes one tensor per attention site in the binary's
order (checkpoint.attention_sites: the encoder's layers, then each decoder layer's self and cross).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checkpoint import attention_shape, attention_sites, mlp_units, model_spec
from .model import Block, CheckpointModule, LayerNorm, Linear, add_embeddings, attend


@dataclass
class Seq2SeqOutput:
    logits: torch.Tensor                    # [B,T,V]
    loss: Optional[torch.Tensor] = None     # mean cross-entropy over targets != -1
    attention: Optional[dict] = None        # {"enc", "dec", "cross"}: per layer [B,H,Tq,Tk]
    head_outputs: Optional[dict] = None     # the same keys: per layer [B,Tq,H,Dh], gates applied


class CrossAttention(nn.Module):
    """LN_c, the query projection of the target stream, the fused K/V projection of the
    encoder's output (K/V heads first, then V), the output projection, the gates."""

    def __init__(self, d_model, n_heads, n_kv_heads, d_head, bias, eps):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_head
        self.ln = LayerNorm(d_model, eps)
        self.q = Linear(d_model, n_heads * d_head, bias)
        self.kv = Linear(d_model, 2 * n_kv_heads * d_head, bias)
        self.proj = Linear(n_heads * d_head, d_model, bias)
        self.register_buffer("gates", torch.ones(n_heads))

    def forward(self, x, memory, hidden, gates):
        """Per-head outputs [B,T,H,Dh] (gated) and probabilities [B,H,T,S]."""
        B, T, _ = x.shape
        S = memory.shape[1]
        H, Hkv, Dh = self.n_heads, self.n_kv_heads, self.d_head
        q = self.q(self.ln(x)).view(B, T, H, Dh).transpose(1, 2)
        kv = self.kv(memory).view(B, S, 2 * Hkv, Dh)
        k, v = kv[:, :, :Hkv].transpose(1, 2), kv[:, :, Hkv:].transpose(1, 2)
        out, probs = attend(q, k, v, hidden, hidden is not None, self.gates if gates is None else gates)
        return out.transpose(1, 2), probs


class DecoderBlock(Block):
    """Self-attention, cross-attention to the encoder's output, MLP."""

    def __init__(self, spec, layer):
        super().__init__(spec, spec["heads"][layer], spec["kv_heads"][layer], d_mlp=mlp_units(spec, False, layer))
        self.cross = CrossAttention(spec["d_model"], *attention_shape(spec, "cross", layer), spec["bias"],
                                    spec["norm_eps"])

    def forward(self, x, hidden, padded, gates, memory, cross_hidden, cross_gates):
        x, a, probs = self.self_attention(x, hidden, padded, gates)
        c, cross_probs = self.cross(x, memory, cross_hidden, cross_gates)
        B, T = c.shape[:2]
        x = x + self.cross.proj(c.reshape(B, T, c.shape[2] * c.shape[3]))
        return self.add_mlp(x), (a, probs), (c, cross_probs)


class Encoder(nn.Module):
    """enc/: pos_emb (learned positions), blocks "0" .. "n-1", ln_f."""

    def __init__(self, spec):
        super().__init__()
        if spec["positions"] == "learned":
            self.pos_emb = nn.Module()
            self.pos_emb.weight = nn.Parameter(torch.zeros(spec["max_seq_len"], spec["d_model"]))
        for l in range(spec["n_encoder_layers"]):
            self.add_module(str(l), Block(spec, *attention_shape(spec, "enc", l), d_mlp=mlp_units(spec, True, l)))
        self.ln_f = LayerNorm(spec["d_model"], spec["norm_eps"])
        self.n_layers = spec["n_encoder_layers"]

    def layer(self, l) -> Block:
        return self._modules[str(l)]


def _padding_mask(padding):
    """[B,1,1,S] True where a key is padding (hidden), or None without padding."""
    if padding is None:
        return None
    return ~torch.as_tensor(padding).bool()[:, None, None, :]


class EncoderDecoder(CheckpointModule):
    """A headlab encoder_decoder (translation model), built from a config."""

    def __init__(self, config: dict, gated: bool = True):
        super().__init__()
        self.config = config
        spec = self.spec = model_spec(config)
        if spec["kind"] != "encoder_decoder":
            raise ValueError(f"EncoderDecoder needs model.kind = encoder_decoder, got {spec['kind']!r}")
        C, V = spec["d_model"], spec["vocab_size"]
        add_embeddings(self, spec)
        self.enc = Encoder(spec)
        self.blocks = nn.ModuleList(DecoderBlock(spec, l) for l in range(spec["n_layers"]))
        self.ln_f = LayerNorm(C, spec["norm_eps"])
        if not spec["tie_embeddings"]:
            self.lm_head = nn.Module()
            self.lm_head.weight = nn.Parameter(torch.zeros(V, C))
        for blk in self.attention_modules():
            if hasattr(blk, "gated"):
                blk.gated = gated

    # ---- gates -------------------------------------------------------------------------------

    def attention_modules(self) -> list:
        """The attention module of every site, in attention_sites() order."""
        mods = []
        for kind, l, _, _ in attention_sites(self.spec):
            mods.append(self.enc.layer(l).attn if kind == "enc" else
                        self.blocks[l].attn if kind == "dec" else self.blocks[l].cross)
        return mods

    def gates(self) -> list:
        """The gate buffers [H] of every attention site (attention_sites() order); assign into
        them to switch heads off or on."""
        return [m.gates for m in self.attention_modules()]

    def set_head_mask(self, heads, value: float = 0.0) -> None:
        """Sets the gates of (kind, layer, head) triples, kind "enc", "dec" or "cross", to value."""
        sites = {(kind, l): i for i, (kind, l, _, _) in enumerate(attention_sites(self.spec))}
        gates = self.gates()
        with torch.no_grad():
            for kind, layer, head in heads:
                gates[sites[(kind, layer)]][head] = value

    # ---- forward -----------------------------------------------------------------------------

    def embed(self, tokens, encoder: bool):
        T = tokens.shape[1]
        if T > self.spec["max_seq_len"]:
            raise ValueError(f"sequence length {T} is outside [1, max_seq_len={self.spec['max_seq_len']}]")
        w = self.tok_emb.weight
        if self.spec["positions"] == "learned":
            pos = (self.enc.pos_emb if encoder else self.pos_emb).weight[:T]
        else:
            pos = self.sinusoid[:T].to(w.dtype)
        return F.embedding(tokens, w) + pos

    def encode(self, source, source_padding=None, gates=None):
        """The encoder's output m [B,S,C], its probabilities and head outputs per layer. gates:
        None (the model's) or one tensor per encoder layer."""
        source = torch.as_tensor(source, dtype=torch.long)
        hidden = _padding_mask(source_padding)
        x = self.embed(source, encoder=True)
        probs, heads = [], []
        for l in range(self.enc.n_layers):
            x, a, p = self.enc.layer(l)(x, hidden, hidden is not None, None if gates is None else gates[l])
            probs.append(p)
            heads.append(a)
        return self.enc.ln_f(x), probs, heads

    def forward(self, tokens, targets=None, key_padding=None, source=None, source_padding=None, gates=None,
                return_attention=False, return_head_outputs=False, memory=None) -> Seq2SeqOutput:
        """tokens [B,T] the decoder's input (<s> y1 ..), targets [B,T] (-1 = ignore), key_padding
        [B,T] and source_padding [B,S] (1 = real token, 0 = padding no query attends to), source
        [B,S]; gates: None (the model's) or one tensor per site ([H] or [B,H]); memory: an
        encode() output to reuse instead of running the encoder on source."""
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        n_enc = self.enc.n_layers
        attention = {"enc": [], "dec": [], "cross": []}
        head_outputs = {"enc": [], "dec": [], "cross": []}
        if memory is None:
            if source is None:
                raise ValueError("an encoder_decoder needs a source (source tokens [B,S])")
            memory, attention["enc"], head_outputs["enc"] = self.encode(source, source_padding,
                                                                        None if gates is None else gates[:n_enc])
        T = tokens.shape[1]
        hidden = torch.ones(T, T, dtype=torch.bool).triu(1)  # causal: key s > query t hidden
        if key_padding is not None:
            hidden = hidden | _padding_mask(key_padding)
        cross_hidden = _padding_mask(source_padding)
        x = self.embed(tokens, encoder=False)
        for l, blk in enumerate(self.blocks):
            g = (None, None) if gates is None else (gates[n_enc + 2 * l], gates[n_enc + 2 * l + 1])
            x, (a, p), (c, cp) = blk(x, hidden, key_padding is not None, g[0], memory, cross_hidden, g[1])
            attention["dec"].append(p)
            attention["cross"].append(cp)
            head_outputs["dec"].append(a)
            head_outputs["cross"].append(c)
        x = self.ln_f(x)
        head = self.lm_head.weight if hasattr(self, "lm_head") else self.tok_emb.weight
        logits = x @ head.t()
        loss = None
        if targets is not None:
            targets = torch.as_tensor(targets, dtype=torch.long)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)
        return Seq2SeqOutput(logits=logits, loss=loss, attention=attention if return_attention else None,
                             head_outputs=head_outputs if return_head_outputs else None)

    # ---- decoding ----------------------------------------------------------------------------

    def tokenizer(self):
        """The tokenizer the checkpoint stores (headlab.tokenizer)."""
        from .tokenizer import load_tokenizer
        attrs = getattr(self, "checkpoint_attrs", {})
        return load_tokenizer(attrs.get("tokenizer", self.config.get("data", {}).get("tokenizer", "bytes")),
                              getattr(self, "checkpoint_tokenizer", None))

    def max_target_tokens(self, source_tokens: int, max_len_a: float = 1.5, max_len_b: int = 10) -> int:
        """decode/search.h max_target_tokens: int(a * source tokens (with </s>) + b), clamped to
        [1, max_seq_len]; the last of them can only be </s>."""
        return min(max(int(max_len_a * source_tokens + max_len_b), 1), self.spec["max_seq_len"])

    def greedy(self, sources, bos: int, eos: int, pad: int, max_len_a: float = 1.5, max_len_b: int = 10) -> list:
        """Greedy decoding as headlab's translate() with beam 1: beam_search with beam = 1."""
        return self.beam_search(sources, bos, eos, pad, 1, 1.0, max_len_a, max_len_b)

    @torch.no_grad()
    def beam_search(self, sources, bos: int, eos: int, pad: int, beam: int = 5, length_penalty: float = 1.0,
                    max_len_a: float = 1.5, max_len_b: int = 10, min_len: int = 0) -> list:
        """headlab's translate() (src/decode/search.cpp, fairseq's rules): for each source row (its
        ids and </s>, unpadded) the target ids without <s> and </s>. The sources decode side by
        side, beam rows each, with cached keys and values (decode_step); each step the 2 x beam
        best continuations of a sentence (sum of log p in double) are taken in order: one ending
        in </s> among the first beam finishes (score / length^length_penalty, length counting
        </s>), others continue until beam do; the sentence stops with beam finished hypotheses or
        at its length limit, where </s> is forced. </s> is barred before min_len target tokens.
        The best finished hypothesis wins (the first finished among equals). Candidates are
        ranked by torch.topk, which breaks exact ties in its own order (the binary: lower beam,
        then lower id); with float logits such ties do not occur in practice."""
        sources = [list(s) for s in sources]
        if not sources:
            return []
        if beam < 1:
            raise ValueError(f"the beam size must be at least 1, got {beam}")
        N, S = len(sources), max(len(s) for s in sources)
        src = torch.full((N, S), pad, dtype=torch.long)
        src_pad = torch.zeros((N, S), dtype=torch.uint8)
        for i, s in enumerate(sources):
            src[i, :len(s)] = torch.tensor(s)
            src_pad[i, :len(s)] = 1
        cache = self.start_decoding(src, src_pad)
        rows = torch.arange(N).repeat_interleave(beam)  # row i * beam + b decodes sentence i
        cache["cross"] = [(k[rows], v[rows]) for k, v in cache["cross"]]
        cache["cross_hidden"] = cache["cross_hidden"][rows]
        limits = [self.max_target_tokens(len(s), max_len_a, max_len_b) for s in sources]
        R, dead = N * beam, float("-inf")
        scores = torch.full((R,), dead, dtype=torch.float64)
        scores[::beam] = 0.0  # only beam 0 is live at the first step, so beams do not repeat
        histories = [[] for _ in range(R)]
        finished = [[] for _ in range(N)]  # (tokens, normalized score) in the order they finish
        done = [False] * N
        tokens = torch.full((R,), bos, dtype=torch.long)
        step = 0
        while not all(done):
            logp = torch.log_softmax(self.decode_step(tokens, cache).double(), -1)
            V = logp.shape[1]
            total = scores[:, None] + logp  # [R,V]; dead rows stay -inf
            ending = total[:, eos].tolist()
            if step < min_len:
                total[:, eos] = dead
            top_scores, top_index = total.view(N, beam * V).topk(min(2 * beam, beam * V), dim=1)
            top_scores, top_index = top_scores.tolist(), top_index.tolist()
            parents = list(range(R))
            next_scores = [dead] * R
            next_histories = [[] for _ in range(R)]
            tokens = torch.full((R,), pad, dtype=torch.long)
            for i in range(N):
                if done[i]:
                    continue
                first = i * beam
                if step + 1 >= limits[i]:  # only </s> is left
                    cands = sorted(((ending[first + b], b, eos) for b in range(beam) if ending[first + b] != dead),
                                   key=lambda c: (-c[0], c[1]))
                else:
                    cands = [(sc, ix // V, ix % V) for sc, ix in zip(top_scores[i], top_index[i]) if sc != dead]
                live = 0
                for rank, (score, b, token) in enumerate(cands[:2 * beam]):
                    history = histories[first + b]
                    if token == eos:
                        if rank >= beam:  # as fairseq: only the top beam may end
                            continue
                        finished[i].append((history, score / float(len(history) + 1) ** length_penalty))
                        if len(finished[i]) >= beam:
                            break
                        continue
                    if live == beam:
                        continue
                    row = first + live
                    live += 1
                    parents[row] = first + b
                    tokens[row] = token
                    next_scores[row] = score
                    next_histories[row] = history + [token]
                if len(finished[i]) >= beam or live == 0:
                    done[i] = True
            scores = torch.tensor(next_scores, dtype=torch.float64)
            histories = next_histories
            index = torch.tensor(parents)
            cache["self"] = [(k[index], v[index]) for k, v in cache["self"]]
            step += 1
        out = []
        for f in finished:
            best = 0
            for j in range(1, len(f)):
                if f[j][1] > f[best][1]:
                    best = j
            out.append(f[best][0])
        return out

    @torch.no_grad()
    def start_decoding(self, source, source_padding=None) -> dict:
        """A decoding cache for source rows [N,S]: the encoder's output projected to every
        decoder layer's cross K/V, empty self-attention K/V, position 0."""
        memory = self.encode(source, source_padding)[0]
        N, S, _ = memory.shape
        cross = []
        for blk in self.blocks:
            c = blk.cross
            kv = c.kv(memory).view(N, S, 2 * c.n_kv_heads, c.d_head)
            cross.append((kv[:, :, :c.n_kv_heads].transpose(1, 2), kv[:, :, c.n_kv_heads:].transpose(1, 2)))
        return dict(cross=cross, self=[None] * len(self.blocks), length=0,
                    cross_hidden=_padding_mask(source_padding))

    @torch.no_grad()
    def decode_step(self, tokens, cache: dict) -> torch.Tensor:
        """The logits [N,V] of one new token per row (tokens [N]) at position cache["length"],
        as forward() computes them for that position of the whole sequence; advances the cache."""
        t = cache["length"]
        tokens = torch.as_tensor(tokens, dtype=torch.long)[:, None]
        w = self.tok_emb.weight
        if t >= self.spec["max_seq_len"]:
            raise ValueError(f"position {t} is outside max_seq_len={self.spec['max_seq_len']}")
        pos = self.pos_emb.weight[t:t + 1] if self.spec["positions"] == "learned" else self.sinusoid[t:t + 1].to(w.dtype)
        x = F.embedding(tokens, w) + pos
        N = x.shape[0]
        for l, blk in enumerate(self.blocks):
            a = blk.attn
            H, Hkv, Dh = a.n_heads, a.n_kv_heads, a.d_head
            qkv = a.qkv(blk.ln1(x)).view(N, 1, H + 2 * Hkv, Dh)
            q = qkv[:, :, :H].transpose(1, 2)
            k, v = qkv[:, :, H:H + Hkv].transpose(1, 2), qkv[:, :, H + Hkv:].transpose(1, 2)
            if cache["self"][l] is not None:  # the earlier positions' keys and values, then this one's
                k = torch.cat([cache["self"][l][0], k], dim=2)
                v = torch.cat([cache["self"][l][1], v], dim=2)
            cache["self"][l] = (k, v)
            o, _ = attend(q, k, v, None, False, a.gates if a.gated else None)
            x = x + a.proj(o.transpose(1, 2).reshape(N, 1, -1))
            c = blk.cross
            q = c.q(c.ln(x)).view(N, 1, c.n_heads, c.d_head).transpose(1, 2)
            o, _ = attend(q, *cache["cross"][l], cache["cross_hidden"], cache["cross_hidden"] is not None, c.gates)
            x = blk.add_mlp(x + c.proj(o.transpose(1, 2).reshape(N, 1, -1)))
        cache["length"] = t + 1
        head = self.lm_head.weight if hasattr(self, "lm_head") else self.tok_emb.weight
        return (self.ln_f(x) @ head.t())[:, 0]

    def translate(self, texts, max_len_a: float = 1.5, max_len_b: int = 10, beam: int = 1,
                  length_penalty: float = 1.0) -> list:
        """Translations of source sentences with the checkpoint's tokenizer (beam_search; beam 1
        is greedy), as `headlab translate [--beam N --lenpen X]` gives them: each source is its ids cut to the dataset's source cap
        (data.source_len, else data.seq_len, and at most max_seq_len; minus one for </s>), then
        </s>; a source without ids translates to ""; a hypothesis that is not UTF-8 gets U+FFFD
        and a newline piece becomes a space, so each is one line of text."""
        tok = self.tokenizer()
        d = self.config.get("data", {})
        cap = min(int(d.get("source_len", 0)) or int(d.get("seq_len", 128)), self.spec["max_seq_len"]) - 1
        ids = [tok.encode(t)[:cap] for t in texts]
        todo = [i for i, x in enumerate(ids) if x]
        out = [""] * len(texts)
        for i, hyp in zip(todo, self.beam_search([ids[i] + [tok.eos] for i in todo], tok.bos, tok.eos, tok.pad,
                                                 beam, length_penalty, max_len_a, max_len_b)):
            out[i] = tok.decode(hyp).replace("\n", " ")
        return out
