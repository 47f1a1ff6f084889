"""Per-head scores as `headlab analyze` defines them (src/analysis/heads.cpp, docs/analysis.md),
on a Model and the batches of a split (data.eval_batches):

    loss                    sum of per-target losses / number of scored targets
    importance[k][h]        (k: an attention site) mean over examples with a scored target of |dL_b/dxi_h|, L_b the
                            example's mean loss, xi_h the head's gate (Michel et al. 2019)
    importance_normalized   importance divided by the l2 norm of its site's importances
    ablation_loss_delta     loss with head h alone gated to 0, minus loss
    integrated_gradients    (g_h - b) times the mean over N midpoints a_k = (k + 1/2) / N of dL/dxi_h at
                            xi = b + a_k (g - b), L the split's mean loss (Sundararajan et al. 2017)

FFN units (`headlab analyze --ffn`, src/analysis/ffn_units.cpp), per MLP block (the FFN gates' order):

    importance[b][f]        mean over batches of |dL/dg_f|, L the batch's mean loss, g the unit's gate
    magnitude[b][f]         |g_f| ||W_fc[f,:]|| ||W_proj[:,f]||
    integrated_gradients    as for heads, over the FFN gates

    s = head_scores(model, eval_batches(ckpt.config, "val"))
    ig = integrated_gradients(model, eval_batches(ckpt.config, "val"), steps=20)
    u = ffn_unit_scores(model, eval_batches(ckpt.config, "val"), ig_steps=8)
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .checkpoint import attention_sites


def _example_losses(model, out, targets, labels):
    """Per-example loss sums [B] and scored-target counts [B]."""
    if model.spec["kind"] in ("decoder", "encoder_decoder"):
        t = torch.as_tensor(targets, dtype=torch.long)
        logits = out.logits
        losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1), ignore_index=-1,
                                 reduction="none").view(t.shape)
        return losses.sum(1), (t != -1).sum(1)
    y = torch.as_tensor(labels, dtype=torch.long)
    losses = F.cross_entropy(out.logits, y, ignore_index=-1, reduction="none")
    return losses, (y != -1).long()


def split_loss(model, batches) -> float:
    """The whole-split mean loss, as `headlab eval` computes it (translate's batches carry the
    source after the four fields: eval_tuple)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for tokens, targets, labels, key_padding, *source in batches:
            source = dict(source=source[0], source_padding=source[1]) if source else {}
            out = model(tokens, key_padding=key_padding, **source)
            s, n = _example_losses(model, out, targets, labels)
            total += float(s.sum())
            count += int(n.sum())
    return total / count


def head_scores(model, batches, ablation: bool = True) -> dict:
    """loss, importance, importance_normalized and ablation_loss_delta, one list of floats per
    attention site ([site][H], attention_sites() order: a decoder's or encoder's layers; an
    encoder_decoder's encoder layers, then each decoder layer's self- and cross-attention), and
    `sites`, the (kind, layer) of each, as heads.csv's attention and layer columns."""
    sites = attention_sites(model.spec)
    heads = [h for _, _, _, h in sites]
    dtype = model.tok_emb.weight.dtype
    grad_abs = [np.zeros(h) for h in heads]
    n_examples, loss_sum, n_targets = 0, 0.0, 0
    masked_sum = [np.zeros(h) for h in heads]
    base_gates = [g.detach().clone() for g in model.gates()]
    for tokens, targets, labels, key_padding, *source in batches:
        source = dict(source=source[0], source_padding=source[1]) if source else {}
        B = tokens.shape[0]
        # One gate per example and head: d(sum_b L_b)/d gate[b,h] = dL_b/dxi_h, zero gates included.
        gates = [g.to(dtype)[None, :].repeat(B, 1).requires_grad_(True) for g in base_gates]
        out = model(tokens, key_padding=key_padding, gates=gates, **source)
        s, n = _example_losses(model, out, targets, labels)
        loss_sum += float(s.sum())
        n_targets += int(n.sum())
        scored = n > 0
        per_example = torch.where(scored, s / n.clamp(min=1).to(s.dtype), torch.zeros_like(s))
        grads = torch.autograd.grad(per_example.sum(), gates)
        for k in range(len(sites)):
            grad_abs[k] += grads[k][scored].abs().sum(0).detach().numpy()
        n_examples += int(scored.sum())
        if ablation:
            with torch.no_grad():
                for k in range(len(sites)):
                    for h in range(heads[k]):
                        if float(base_gates[k][h]) == 0.0:  # nothing changes: the unmasked loss
                            masked_sum[k][h] += float(s.sum())
                            continue
                        g = [x.to(dtype) for x in base_gates]
                        g[k] = g[k].clone()
                        g[k][h] = 0
                        m = model(tokens, key_padding=key_padding, gates=g, **source)
                        masked_sum[k][h] += float(_example_losses(model, m, targets, labels)[0].sum())
    loss = loss_sum / n_targets
    importance = [g / n_examples for g in grad_abs]
    normalized = []
    for imp in importance:
        norm = float(np.sqrt((imp ** 2).sum()))
        normalized.append(imp / norm if norm > 0 else np.zeros_like(imp))
    result = dict(loss=loss, n_targets=n_targets, n_examples=n_examples,
                  sites=[(kind, layer) for kind, layer, _, _ in sites],
                  importance=[x.tolist() for x in importance],
                  importance_normalized=[x.tolist() for x in normalized])
    if ablation:
        result["ablation_loss_delta"] = [(m / n_targets - loss).tolist() for m in masked_sum]
    return result


def integrated_gradients(model, batches, steps: int, baseline: float = 0.0) -> dict:
    """`headlab analyze --ig-steps N`: {"attribution": [site][H] lists, "loss": L(g), "baseline_loss":
    L(b)}, the path from every gate at `baseline` to the model's gates g, all heads together; a gate
    at 0 (a pruned head) stays 0 on the whole path and gets 0."""
    base_gates = [g.detach().clone() for g in model.gates()]
    dtype = model.tok_emb.weight.dtype

    def mean_loss(a, grad):
        gates = [torch.where(g == 0, g, baseline + a * (g - baseline)).requires_grad_(grad)
                 for g in (g.to(dtype) for g in base_gates)]
        total, count, grads = 0.0, 0, [torch.zeros(len(g), dtype=torch.float64) for g in base_gates]
        for tokens, targets, labels, key_padding, *source in batches:
            source = dict(source=source[0], source_padding=source[1]) if source else {}
            out = model(tokens, key_padding=key_padding, gates=gates, **source)
            s, n = _example_losses(model, out, targets, labels)
            if int(n.sum()) == 0:
                continue
            total += float(s.sum())
            count += int(n.sum())
            if grad:
                for k, g in enumerate(torch.autograd.grad(s.sum(), gates)):
                    grads[k] += g.detach().double()
        return total / count, [g / count for g in grads]

    path = [np.zeros(len(g)) for g in base_gates]
    for k in range(steps):
        _, grads = mean_loss((k + 0.5) / steps, True)
        for site, g in enumerate(grads):
            path[site] += g.numpy() / steps
    attribution = [(np.where(g.double().numpy() == 0, 0.0, g.double().numpy() - baseline) * p).tolist()
                   for g, p in zip(base_gates, path)]
    with torch.no_grad():
        loss, _ = mean_loss(1.0, False)
        baseline_loss, _ = mean_loss(0.0, False)
    return dict(attribution=attribution, loss=loss, baseline_loss=baseline_loss)


def mlp_blocks(model) -> list:
    """The blocks with an MLP in the FFN gates' order: an encoder_decoder's encoder blocks, then its
    decoder's; otherwise the stack's."""
    encoder = [model.enc.layer(l) for l in range(model.enc.n_layers)] if hasattr(model, "enc") else []
    return encoder + list(model.blocks)


def _with_ffn_gates(model, gates, fn):
    """fn() with each MLP block's gates set to `gates` (tensors, maybe requiring grad), then restored."""
    blocks = mlp_blocks(model)
    own = [b.mlp.gates for b in blocks]
    try:
        for b, g in zip(blocks, gates):
            b.mlp.gates = g
        return fn()
    finally:
        for b, g in zip(blocks, own):
            b.mlp.gates = g


def _batch_terms(model, batches):
    """(loss sum, scored targets) of each batch, with the model's current gates."""
    for tokens, targets, labels, key_padding, *source in batches:
        source = dict(source=source[0], source_padding=source[1]) if source else {}
        out = model(tokens, key_padding=key_padding, **source)
        s, n = _example_losses(model, out, targets, labels)
        if int(n.sum()) > 0:
            yield s.sum(), int(n.sum())


def ffn_unit_scores(model, batches, ig_steps: int = 0) -> dict:
    """`headlab analyze --ffn`: {"importance", "magnitude"[, "integrated_gradients"]}, each one list
    of floats per MLP block, and "loss" (with ig_steps, also "ig_baseline_loss": every unit off)."""
    blocks = mlp_blocks(model)
    dtype = model.tok_emb.weight.dtype
    own = [b.mlp.gates.detach().clone().to(dtype) for b in blocks]
    out = {"magnitude": [], "importance": []}
    for b, g in zip(blocks, own):
        rows = b.mlp.fc.weight.detach().double().norm(dim=1)
        cols = b.mlp.proj.weight.detach().double().norm(dim=0)
        out["magnitude"].append((g.double().abs() * rows * cols).tolist())

    def importance():
        gates = [g.clone().requires_grad_(True) for g in own]
        sums, n_batches, total, count = [torch.zeros(len(g), dtype=torch.float64) for g in own], 0, 0.0, 0

        def run():
            nonlocal n_batches, total, count
            for s, n in _batch_terms(model, batches):
                for k, g in enumerate(torch.autograd.grad(s / n, gates)):
                    sums[k] += g.detach().double().abs()
                n_batches += 1
                total += float(s)
                count += n
        _with_ffn_gates(model, gates, run)
        return [((x / n_batches) * (g != 0)).tolist() for x, g in zip(sums, own)], total / count

    out["importance"], out["loss"] = importance()
    if ig_steps > 0:
        path = [torch.zeros(len(g), dtype=torch.float64) for g in own]
        for k in range(ig_steps):
            a = (k + 0.5) / ig_steps
            gates = [(a * g).requires_grad_(True) for g in own]

            def point():
                grads, total = [torch.zeros(len(g), dtype=torch.float64) for g in own], 0
                for s, n in _batch_terms(model, batches):
                    for j, g in enumerate(torch.autograd.grad(s, gates)):
                        grads[j] += g.detach().double()
                    total += n
                return [g / total for g in grads]
            for j, g in enumerate(_with_ffn_gates(model, gates, point)):
                path[j] += g / ig_steps
        out["integrated_gradients"] = [(g.double() * p).tolist() for g, p in zip(own, path)]

        def baseline_loss():
            with torch.no_grad():
                terms = [(float(s), n) for s, n in _batch_terms(model, batches)]
            return sum(s for s, _ in terms) / sum(n for _, n in terms)
        out["ig_baseline_loss"] = _with_ffn_gates(model, [torch.zeros_like(g) for g in own], baseline_loss)
    return out
