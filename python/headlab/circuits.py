"""Circuit analyses as `headlab circuits` defines them (src/analysis/head_detectors.cpp,
docs/circuits.md), computed here from the torch Model's attention (its forward's
return_attention), for checking the binary and for use in notebooks.

    previous_token, duplicate_token, induction   TransformerLens's head_detector ("mul", its
        defaults): sum(A * D) / sum(A) per sequence, averaged over the sequences
    prefix_matching   Olsson et al. 2022: on n tokens repeated once, the second copy's mean
        attention on tokens whose predecessor is the query's token

    composition (Elhage et al. 2021, TransformerLens's all_composition_scores), from the weights:
        ||W_OV^s W_QK^r|| (q), ||W_OV^s W_QK^r^T|| (k), ||W_OV^s W_OV^r|| (v), each divided by the
        two circuits' norms; LN1's weight folded into W_Q, W_K, W_V, W_O centred, biases left out

    tokens = h5py.File("runs/x/detectors.h5")["tokens"][:]      # the binary's inputs [rows, 2n]
    s = detector_scores(model, tokens)   # {"previous_token": array [heads], ...}, heads site by site
    c = composition_scores(model)        # {("L0H1", "L1H0"): {"q": ..., "k": ..., "v": ...}, ...}
    d = logit_attribution(model, headlab.eval_batches(ckpt.config, "val"))   # {"L0H1": mean term, ...}
    p = activation_patching(model, clean, corrupt, targets)   # forward hooks on the torch modules
    pp = path_patching(model, clean, corrupt, targets)
"""
from __future__ import annotations

import numpy as np
import torch

DETECTORS = ("previous_token", "duplicate_token", "induction", "prefix_matching")


def detection_pattern(name: str, tokens) -> np.ndarray:
    """TransformerLens's 0/1 pattern D [T, T] on one sequence (prefix_matching uses induction's)."""
    x = np.asarray(tokens)
    T = len(x)
    if name == "previous_token":
        return np.eye(T, k=-1)
    duplicate = np.tril((x[:, None] == x[None, :]).astype(float), k=-1)
    if name == "duplicate_token":
        return duplicate
    if name in ("induction", "prefix_matching"):
        shifted = np.zeros((T, T))
        shifted[:, 1:] = duplicate[:, :-1]
        return np.tril(shifted)
    raise ValueError(f"unknown detector {name!r} (detectors: {', '.join(DETECTORS)})")


def detector_score(name: str, probs: np.ndarray, tokens, half: int) -> float:
    """One head's score on one sequence, probs [T, T] its attention."""
    d = detection_pattern(name, tokens)
    rows = slice(half, None) if name == "prefix_matching" else slice(None)
    return float((probs[rows] * d[rows]).sum() / probs[rows].sum())


@torch.no_grad()
def detector_scores(model, tokens) -> dict:
    """Every head's four scores (site by site, head by head, as detectors.csv orders them),
    averaged over the rows of tokens [rows, 2n] (each row n tokens twice)."""
    tokens = np.asarray(tokens)
    half = tokens.shape[1] // 2
    out = {name: [] for name in DETECTORS}
    per_row = []
    for row in tokens:
        attention = model(torch.as_tensor(row[None, :]), return_attention=True).attention
        per_row.append([probs[0].double().numpy() for probs in attention])  # [H_l, T, T] per layer
    for l, layer in enumerate(per_row[0]):
        for h in range(layer.shape[0]):
            for name in DETECTORS:
                out[name].append(np.mean([detector_score(name, maps[l][h], row, half)
                                          for maps, row in zip(per_row, tokens)]))
    return {name: np.array(values) for name, values in out.items()}


@torch.no_grad()
def head_circuits(model) -> list:
    """(label, kind, site, W_QK [C, C], W_OV [C, C]) of every query head of a decoder, an encoder or
    an EncoderDecoder (site: its index in attention_sites(), the order the model runs them), in
    float64, formed in full (the binary factors them; this is the plain definition). Each LayerNorm
    weight is folded into the weights that read it: LN1 into a self-attention's q, k, v; a cross
    head's LN_c into its q and the encoder's ln_f into its k, v (they read the encoder's output)."""
    from .checkpoint import attention_sites

    one_stack = not hasattr(model, "enc")
    heads = []
    for site, (kind, l, _, _) in enumerate(attention_sites(model.spec)):
        if kind == "cross":
            blk = model.blocks[l]
            a = blk.cross
            H, Hkv, Dh = a.n_heads, a.n_kv_heads, a.d_head
            q = a.q.weight.double() * a.ln.weight.double()[None, :]                 # [H Dh, C]
            kv = a.kv.weight.double() * model.enc.ln_f.weight.double()[None, :]    # [2 Hkv Dh, C]: K heads, V heads
            rows = lambda h, g: (q[h * Dh:(h + 1) * Dh], kv[g * Dh:(g + 1) * Dh],  # noqa: E731
                                 kv[(Hkv + g) * Dh:(Hkv + g + 1) * Dh])
        else:
            blk = model.enc.layer(l) if kind == "enc" else model.blocks[l]
            a = blk.attn
            H, Hkv, Dh = a.n_heads, a.n_kv_heads, a.d_head
            w = a.qkv.weight.double() * blk.ln1.weight.double()[None, :]  # [(H + 2 Hkv) Dh, C], LN folded
            rows = lambda h, g: (w[h * Dh:(h + 1) * Dh], w[(H + g) * Dh:(H + g + 1) * Dh],  # noqa: E731
                                 w[(H + Hkv + g) * Dh:(H + Hkv + g + 1) * Dh])
        proj = a.proj.weight.double()                                   # [C, H Dh]
        for h in range(H):
            W_Q, W_K, W_V = (m.T for m in rows(h, h // (H // Hkv)))
            W_O = proj[:, h * Dh:(h + 1) * Dh].T
            W_O = W_O - W_O.mean(dim=1, keepdim=True)
            label = f"L{l}H{h}" if one_stack else f"{kind}.L{l}H{h}"
            heads.append((label, kind, site, W_Q @ W_K.T, W_V @ W_O))
    return heads


def compositions_between(sender_kind, sender_site, receiver_kind, receiver_site) -> tuple:
    """Which of "q", "k", "v" connect a sender to a receiver: the receiver reads the stream the sender
    wrote into, after it did (analysis/composition.h): a later self-attention of the same stream by
    all three; a cross-attention the decoder stream by its queries, the encoder's output by its keys
    and values."""
    if receiver_kind == "cross":
        return ("k", "v") if sender_kind == "enc" else ("q",) if receiver_site > sender_site else ()
    same_stream = (sender_kind == "enc") == (receiver_kind == "enc")
    return ("q", "k", "v") if same_stream and receiver_site > sender_site else ()


def composition_scores(model) -> dict:
    """{(sender, receiver): {kind: score}} for every connected pair, with the kinds that connect it."""
    heads = head_circuits(model)
    out = {}
    for s_label, s_kind, s_site, _, ov_s in heads:
        for r_label, r_kind, r_site, qk_r, ov_r in heads:
            kinds = compositions_between(s_kind, s_site, r_kind, r_site)
            if kinds:
                right = {"q": qk_r, "k": qk_r.T, "v": ov_r}
                out[(s_label, r_label)] = {k: float((ov_s @ right[k]).norm() / (ov_s.norm() * right[k].norm()))
                                           for k in kinds}
    return out


@torch.no_grad()
def ov_copying_scores(model) -> list:
    """Every head's copying score: sum(l) / sum(|l|) over the eigenvalues l of its full OV circuit
    W_E W_V W_O W_U [V, V], formed in full (W_E rows centred, ln_f's weight folded into W_U); NaN
    for an encoder_decoder's encoder heads, which have no path of their own to the logits."""
    W_E = model.tok_emb.weight.double()
    W_E = W_E - W_E.mean(dim=1, keepdim=True)
    head = model.lm_head.weight if hasattr(model, "lm_head") else model.tok_emb.weight
    W_U = (head.double() * model.ln_f.weight.double()[None, :]).T      # [C, V]
    out = []
    for _, kind, _, _, ov in head_circuits(model):
        if kind == "enc":
            out.append(float("nan"))
            continue
        eig = np.linalg.eigvals((W_E @ ov @ W_U).numpy())
        out.append(float(eig.real.sum() / np.abs(eig).sum()))
    return out


# ---- direct logit attribution and the logit lens --------------------------------------------------

def _blocks(model, batch):
    """Runs the (decoder) stack of a decoder or an EncoderDecoder block by block on an
    eval_batches() tuple: the stream entering each block; the attention sites writing into it, as
    (kind, attention module, head outputs [B,T,H,Dh]): its self-attention, then an encoder_decoder's
    cross-attention; the stream before its MLP; and the stream entering ln_f."""
    from .seq2seq import _padding_mask

    tokens = torch.as_tensor(batch[0], dtype=torch.long)
    T = tokens.shape[1]
    hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
    seq2seq = hasattr(model, "enc")
    padded = False
    if seq2seq:  # as EncoderDecoder.forward
        key_padding, source, source_padding = batch[3], batch[4], batch[5]
        memory, _, _ = model.encode(source, source_padding)
        cross_hidden = _padding_mask(source_padding)
        if key_padding is not None:
            hidden, padded = hidden | _padding_mask(key_padding), True
        x = model.embed(tokens, encoder=False)
    else:
        x = model.embed(tokens)
    inputs, writers, mids = [], [], []
    for blk in model.blocks:
        inputs.append(x)
        x, a, _ = blk.self_attention(x, hidden, padded, None)
        writers.append([("dec", blk.attn, a)])
        if seq2seq:
            c, _ = blk.cross(x, memory, cross_hidden, None)
            x = x + blk.cross.proj(c.reshape(*c.shape[:2], -1))
            writers[-1].append(("cross", blk.cross, c))
        mids.append(x)
        x = blk.add_mlp(x)
    return inputs, writers, mids, x


@torch.no_grad()
def logit_attribution(model, batches) -> dict:
    """The terms of the correct token's logit, as `headlab circuits --dla` writes them: {"embed",
    "L0H1", ..., "L0 attn bias", "L0 mlp", ..., "ln_f bias": mean term} (an EncoderDecoder's heads and
    biases "dec.L0H1", "cross.L0H1", "dec.L0 attn bias", ...), and "lens": per layer
    (loss, accuracy, mean logit, mean prob), the final LayerNorm applied with each stream's own
    statistics. The final LayerNorm's scale is frozen at the run's own."""
    head = model.lm_head.weight if hasattr(model, "lm_head") else model.tok_emb.weight
    w_f, b_f, eps = model.ln_f.weight, model.ln_f.bias, model.ln_f.eps
    sums, lens, n = {}, None, 0
    one_stack = not hasattr(model, "enc")
    for batch in batches:
        targets = torch.as_tensor(batch[1], dtype=torch.long)
        inputs, writers, mids, final = _blocks(model, batch)  # the model in float64 (load_model(..., torch.float64))
        keep = targets >= 0
        y = targets[keep]
        sigma = (final.var(dim=-1, unbiased=False) + eps).sqrt()[keep]           # [n]
        u = w_f[None, :] * head[y]                                               # [n, C]
        u = (u - u.mean(dim=1, keepdim=True)) / sigma[:, None]

        def term(c):  # c [B,T,C] -> [n]
            return (c[keep] * u).sum(dim=1)

        terms = {"embed": term(inputs[0])}
        for l in range(len(model.blocks)):
            for kind, attn, heads in writers[l]:
                H, Dh = attn.n_heads, attn.d_head
                proj = attn.proj.weight                                          # [C, H Dh]
                name = f"L{l}" if one_stack else f"{kind}.L{l}"
                for h in range(H):
                    terms[f"{name}H{h}"] = term(heads[:, :, h] @ proj[:, h * Dh:(h + 1) * Dh].T)
                bias = attn.proj.bias
                terms[f"{name} attn bias"] = (u * bias[None, :]).sum(dim=1) if bias is not None else torch.zeros(len(y))
            nxt = inputs[l + 1] if l + 1 < len(model.blocks) else final
            terms[f"L{l} mlp"] = term(nxt - mids[l])
        terms["ln_f bias"] = head[y] @ b_f
        for k, v in terms.items():
            sums[k] = sums.get(k, 0.0) + float(v.sum())
        streams = inputs + [final]
        rows = []
        for x in streams:
            logits = torch.nn.functional.layer_norm(x, (x.shape[-1],), w_f, b_f, eps) @ head.T
            lp = torch.log_softmax(logits[keep], dim=-1)
            rows.append((float(-lp[torch.arange(len(y)), y].sum()), float((logits[keep].argmax(-1) == y).sum()),
                         float(logits[keep][torch.arange(len(y)), y].sum()), float(lp[torch.arange(len(y)), y].exp().sum())))
        lens = rows if lens is None else [tuple(a + b for a, b in zip(r, s)) for r, s in zip(lens, rows)]
        n += len(y)
    out = {k: v / n for k, v in sums.items()}
    out["lens"] = [tuple(v / n for v in r) for r in lens]
    return out


# ---- activation and path patching, through forward hooks ------------------------------------------
# Inputs: clean and corrupt are the (decoder's) tokens [B,T]; an encoder_decoder also takes
# clean_source and corrupt_source [B,S]. Heads are listed site by site (attention_sites() order).

def _metric(logits, targets, answer, wrong):
    if answer is not None:
        last = logits[:, -1]
        return float((last[:, answer] - last[:, wrong]).mean())
    t = torch.as_tensor(targets, dtype=torch.long)
    return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1),
                                                   ignore_index=-1))


def _sites(model) -> list:
    """(kind, layer, attention module, block whose input is the site's stream or None) per site:
    a decoder's ("dec", l); an encoder_decoder's encoder layers, then self and cross per layer."""
    if not hasattr(model, "enc"):
        return [("dec", l, blk.attn, blk) for l, blk in enumerate(model.blocks)]
    sites = [("enc", l, model.enc.layer(l).attn, model.enc.layer(l)) for l in range(model.enc.n_layers)]
    for l, blk in enumerate(model.blocks):
        sites += [("dec", l, blk.attn, blk), ("cross", l, blk.cross, None)]
    return sites


def _label(model, kind, layer, head):
    return f"{kind}.L{layer}H{head}" if hasattr(model, "enc") else f"L{layer}H{head}"


@torch.no_grad()
def _run(model, tokens, source=None, hooks=()):
    """Logits of tokens [B,T] (and source [B,S]) with forward hooks (module, kind, fn) on for the
    run only."""
    handles = [(m.register_forward_pre_hook(fn) if kind == "pre" else m.register_forward_hook(fn))
               for m, kind, fn in hooks]
    try:
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        return (model(tokens) if source is None else model(tokens, source=source)).logits
    finally:
        for h in handles:
            h.remove()


def _input_slot(kind, attn, which, h):
    """The module whose output holds query head h's queries (which = "q") or the keys or values it
    reads, and the head's index in that output viewed as [.., heads, Dh]: a self-attention's
    fused q/k/v, or a cross-attention's q or fused k/v projection."""
    g = h // (attn.n_heads // attn.n_kv_heads)
    if kind == "cross":
        return (attn.q, h) if which == "q" else (attn.kv, g if which == "k" else attn.n_kv_heads + g)
    return attn.qkv, {"q": h, "k": attn.n_heads + g, "v": attn.n_heads + attn.n_kv_heads + g}[which]


def _replace_head(out, index, source, d_head):
    """out with head `index` (of out viewed as [.., heads, Dh]) taken from source."""
    patched = out.view(*out.shape[:-1], -1, d_head).clone()
    patched[..., index, :] = source.view(*source.shape[:-1], -1, d_head)[..., index, :]
    return patched.view(out.shape)


def _cache(model, tokens, source=None):
    """Per site: the stream entering it ("x"), its attention output [B,P,H,Dh] ("a"), and each
    q/k/v projection's output by module ("proj"); an encoder_decoder's encoder stream before
    LN_enc ("enc_final")."""
    cache = {"x": {}, "a": {}, "proj": {}}
    hooks = []
    for i, (kind, _, attn, blk) in enumerate(_sites(model)):
        entering = blk if blk is not None else attn  # a cross-attention's first argument is its stream
        hooks.append((entering, "pre", lambda m, args, i=i: cache["x"].__setitem__(i, args[0].clone())))
        hooks.append((attn, "post", lambda m, inp, out, i=i: cache["a"].__setitem__(i, out[0].clone())))
        for module in ([attn.q, attn.kv] if kind == "cross" else [attn.qkv]):
            hooks.append((module, "post", lambda m, inp, out: cache["proj"].__setitem__(m, out.clone())))
    if hasattr(model, "enc"):
        hooks.append((model.enc.ln_f, "pre", lambda m, args: cache.__setitem__("enc_final", args[0].clone())))
    return cache, _run(model, tokens, source, hooks)


def activation_patching(model, clean, corrupt, targets=None, answer=None, wrong=None, clean_source=None,
                        corrupt_source=None) -> dict:
    """`headlab circuits --patch` through forward hooks: {"clean", "corrupt", "head_out" [heads],
    "q", "k", "v" [heads], "resid" {(stack, layer, position): metric}}: the metric after each
    patch of the clean run into the corrupted one (the model in float64)."""
    cache, clean_logits = _cache(model, clean, clean_source)
    metric = lambda logits: _metric(logits, targets, answer, wrong)  # noqa: E731
    corrupted = lambda hooks: metric(_run(model, corrupt, corrupt_source, hooks))  # noqa: E731
    out = {"clean": metric(clean_logits), "corrupt": corrupted([]), "head_out": [], "q": [], "k": [], "v": [],
           "resid": {}, "labels": []}
    for i, (kind, l, attn, blk) in enumerate(_sites(model)):
        for h in range(attn.n_heads):
            out["labels"].append(_label(model, kind, l, h))

            def patch_head(m, inp, o, h=h, i=i):
                a = o[0].clone()
                a[:, :, h] = cache["a"][i][:, :, h]
                return (a,) + tuple(o[1:])
            out["head_out"].append(corrupted([(attn, "post", patch_head)]))
            for which in ("q", "k", "v"):
                module, index = _input_slot(kind, attn, which, h)
                fn = lambda m, inp, o, index=index: _replace_head(o, index, cache["proj"][m], attn.d_head)  # noqa: E731
                out[which].append(corrupted([(module, "post", fn)]))
        if blk is None:
            continue
        for t in range(cache["x"][i].shape[1]):
            def patch_resid(m, args, t=t, i=i):
                x = args[0].clone()
                x[:, t] = cache["x"][i][:, t]
                return (x,) + tuple(args[1:])
            out["resid"][(kind, l, t)] = corrupted([(blk, "pre", patch_resid)])
    return out


def path_patching(model, clean, corrupt, targets=None, answer=None, wrong=None, clean_source=None,
                  corrupt_source=None) -> dict:
    """`headlab circuits --path-patch` through forward hooks: {(sender, receiver): {"q", "k",
    "v"}}, the metric when the receiver's queries (keys, values) are computed from the corrupted
    stream plus the sender's change in direct output, (a_clean - a_corrupt) W_O^s; an encoder
    head reaches a cross-attention's keys and values through LN_enc of the encoder's stream plus
    that change. Inputs without a path are absent (NaN), pairs with none are left out."""
    clean_cache, _ = _cache(model, clean, clean_source)
    corrupt_cache, _ = _cache(model, corrupt, corrupt_source)
    metric = lambda logits: _metric(logits, targets, answer, wrong)  # noqa: E731
    sites = _sites(model)
    out = {}
    for s, (skind, ls, sa, _) in enumerate(sites):
        for hs in range(sa.n_heads):
            diff = clean_cache["a"][s][:, :, hs] - corrupt_cache["a"][s][:, :, hs]            # [B,P,Dh]
            delta = diff @ sa.proj.weight[:, hs * sa.d_head:(hs + 1) * sa.d_head].T            # [B,P,C]
            for r in range(s + 1, len(sites)):
                rkind, lr, ra, rblk = sites[r]
                with torch.no_grad():
                    if (skind == "enc") != (rkind == "enc") and rkind != "cross":
                        continue  # an encoder head does not reach the decoder's self-attention
                    if skind == "enc" and rkind == "cross":
                        memory = model.enc.ln_f(corrupt_cache["enc_final"] + delta)
                        sent, reached = {ra.kv: ra.kv(memory)}, ("k", "v")
                    elif rkind == "cross":
                        sent, reached = {ra.q: ra.q(ra.ln(corrupt_cache["x"][r] + delta))}, ("q",)
                    else:
                        sent, reached = {ra.qkv: ra.qkv(rblk.ln1(corrupt_cache["x"][r] + delta))}, ("q", "k", "v")
                for hr in range(ra.n_heads):
                    scores = {}
                    for which in reached:
                        module, index = _input_slot(rkind, ra, which, hr)
                        fn = lambda m, inp, o, index=index: _replace_head(o, index, sent[m], ra.d_head)  # noqa: E731
                        scores[which] = metric(_run(model, corrupt, corrupt_source, [(module, "post", fn)]))
                    out[(_label(model, skind, ls, hs), _label(model, rkind, lr, hr))] = scores
    return out
