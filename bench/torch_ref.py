#!/usr/bin/python3
"""The PyTorch speed reference: headlab's own model (python/headlab) trained in PyTorch, one
training-speed measurement per run, printed as one JSON line (the keys `headlab bench` prints).

Model: the network of configs/bench.toml, built by headlab.Model from the same model section:
V = 256 bytes, learned token + position embeddings, n_layers pre-LN blocks
  x = x + Attn(LN1(x)); x = x + MLP(LN2(x))
Attn: fused qkv linear (bias), causal multi-head softmax(Q K^T / sqrt(d_head)) written the plain
way PyTorch users write it (matmul, masked_fill, softmax, matmul; no fused kernel), output linear
(bias). MLP: linear(d, 4d) + GELU (tanh) + linear(4d, d). Final LN, untied LM head without bias.
headlab's head gates (all ones) are left out of the forward, as a plain PyTorch model has none.
Init: headlab's (N(0, 0.02), residual projections / sqrt(2 n_layers), LayerNorm 1/0, biases 0).
Loss: mean next-token cross-entropy. torch.optim.AdamW(lr=3e-4, betas=(0.9, 0.95), eps=1e-8,
weight_decay=0.1) on every parameter, constant LR, no clipping. Data: random bytes from a seed.
Dense float32, PyTorch's own CPU kernels and its BLAS; on an AVX-512 CPU BLIS's skx kernels
are selected (Debian's BLIS 0.9 otherwise falls back to generic ones on Zen 4/5).

FLOPs/token = 6*N_nonemb + 12*n_layers*d_model*T, N_nonemb every parameter except the token and
position embeddings (so the untied LM head, LayerNorms and biases are included).

Usage: /usr/bin/python3 bench/torch_ref.py --d_model 256 --n_layers 4 --n_heads 8 --seq 128 \\
         --batch 16 --steps 20 --warmup 3 --threads 2
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--d_model", type=int, default=256)
p.add_argument("--n_layers", type=int, default=4)
p.add_argument("--n_heads", type=int, default=8)
p.add_argument("--seq", type=int, default=128)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--tag", default="", help="free-form label copied into the JSON line")
args = p.parse_args()

if args.d_model % args.n_heads:
    sys.exit(f"error: d_model {args.d_model} is not divisible by n_heads {args.n_heads}")

# Set before torch (and any BLAS it loads) initialises: libgomp reads it at load time and
# BLIS/OpenBLAS read it when they initialise their thread count.
os.environ["OMP_NUM_THREADS"] = str(args.threads)
# Debian's BLIS 0.9 (which torch reaches through libblas.so.3 once libblis is installed) does not
# recognise Zen 4/5 CPUs and falls back to its generic kernels, 3-4x slower. BLIS_ARCH_TYPE=0
# selects its AVX-512 ('skx') kernels, the fastest there, so the reference is PyTorch at its best.
if "BLIS_ARCH_TYPE" not in os.environ and " avx512f" in open("/proc/cpuinfo").read():
    os.environ["BLIS_ARCH_TYPE"] = "0"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "python"))
import headlab  # noqa: E402
from machine import blas_library, cpu_busy_seconds, cpu_capability  # noqa: E402  (bench/machine.py)

V = 256


def bench_config():
    """configs/bench.toml's model section at this run's sizes."""
    return {"model": dict(kind="decoder", vocab_size=V, d_model=args.d_model, n_heads=args.n_heads, n_kv_heads=0,
                          d_head=0, n_layers=args.n_layers, mlp_ratio=4, max_seq_len=args.seq, positions="learned",
                          dropout=0.0, tie_embeddings=False, activation="gelu", norm_eps=1e-5, bias=True,
                          init_std=0.02)}


def init_like_headlab(model, n_layers, std=0.02):
    """GPT-2 init as headlab's parameter table declares it (src/nn/model.cpp parameter_specs)."""
    residual_std = std / (2.0 * n_layers) ** 0.5
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            elif name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                p.normal_(0.0, residual_std)
            else:
                p.normal_(0.0, std)


def main():
    config = dict(d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads, seq=args.seq,
                  batch=args.batch, threads=args.threads, steps=args.steps, warmup=args.warmup,
                  model="python/headlab Model (matmul + masked softmax attention)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = headlab.Model(bench_config(), gated=False)
    init_like_headlab(model, args.n_layers)
    n_params = sum(p.numel() for p in model.parameters())  # head gates are buffers: not counted
    n_emb = model.tok_emb.weight.numel() + model.pos_emb.weight.numel()
    n_nonemb = n_params - n_emb
    flops_per_token = 6 * n_nonemb + 12 * args.n_layers * args.d_model * args.seq

    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    gen = torch.Generator().manual_seed(args.seed + 1)
    total = args.warmup + args.steps
    data = torch.randint(0, V, (total, args.batch, args.seq + 1), generator=gen)

    times, losses = [], []
    for i in range(total):
        if i == args.warmup:
            busy0, steal0 = cpu_busy_seconds()
            own0, wall0 = sum(os.times()[:2]), time.perf_counter()
            flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        x, y = data[i, :, :-1], data[i, :, 1:]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(x).logits
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        lv = loss.item()
        t1 = time.perf_counter()
        losses.append(lv)
        if i >= args.warmup:
            times.append(t1 - t0)

    busy1, steal1 = cpu_busy_seconds()
    own1, wall1 = sum(os.times()[:2]), time.perf_counter()
    flt1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    wall = wall1 - wall0
    med = statistics.median(times)
    tokens = args.batch * args.seq
    out = dict(
        config=config,
        tag=args.tag,
        torch=torch.__version__,
        torch_threads=torch.get_num_threads(),
        cpu_capability=cpu_capability(),
        blas=blas_library(),
        params=n_params,
        params_nonembedding=n_nonemb,
        flops_per_token=flops_per_token,
        flops_formula="6*N_nonemb + 12*n_layers*d_model*T (N_nonemb = all params except tok_emb, pos_emb)",
        step_ms_median=round(med * 1e3, 3),
        step_ms_min=round(min(times) * 1e3, 3),
        step_ms_max=round(max(times) * 1e3, 3),
        step_ms_all=[round(t * 1e3, 3) for t in times],
        tokens_per_s=round(tokens / med, 1),
        gflops=round(flops_per_token * tokens / med / 1e9, 2),
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        loss_first=round(losses[0], 4),
        loss_last=round(losses[-1], 4),
        loadavg_start=LOADAVG,
        # Average number of cores busy with *other* processes during the measured steps
        # (machine-wide busy time minus this process's CPU time), and hypervisor steal.
        foreign_cores=round(max(0.0, (busy1 - busy0) - (own1 - own0)) / wall, 2),
        steal_cores=round((steal1 - steal0) / wall, 2),
        own_cores=round((own1 - own0) / wall, 2),
        blis_arch_type=os.environ.get("BLIS_ARCH_TYPE"),
        # Minor page faults per measured step (fresh memory handed out by the allocator).
        minflt_per_step=round((flt1 - flt0) / args.steps),
        glibc_tunables=os.environ.get("GLIBC_TUNABLES"),
    )
    print(json.dumps(out), flush=True)


LOADAVG = open("/proc/loadavg").read().split()[0]
if __name__ == "__main__":
    main()
