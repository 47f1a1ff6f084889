#!/usr/bin/python3
"""The PyTorch speed reference for the encoder_decoder: python/headlab's EncoderDecoder (the same
network as the binary's, built from the same headlab config) trained or decoded in PyTorch, one
measurement per run, printed as one JSON line with the keys `headlab bench` prints.

Training (default): random source rows of --source-len tokens and target rows of --seq tokens,
unpadded (padding masks of ones, as headlab bench passes), mean cross-entropy with the config's
label smoothing (F.cross_entropy(label_smoothing=...), PyTorch's definition, which headlab
uses), backward, gradient-norm clipping at train.grad_clip, torch.optim.AdamW with the config's
lr, betas, eps and weight decay. Attention is written the plain way (matmul, masked softmax,
matmul); no dropout (the network has none in Python: run headlab bench with model.dropout=0).
tokens_per_s counts target tokens.

--decode: --sentences random sources of --source-len tokens (the last </s>), each decoded to
exactly --target-len target tokens (</s> included) by EncoderDecoder.beam_search with its KV
cache (min_len = target_len - 1 bars </s> until the length limit forces it), as `headlab bench
--decode` does; sentences/s = sentences / median time of --reps decodings after --warmup.

Weights: headlab's init scheme (LayerNorm 1/0, biases 0, the rest N(0, init_std), residual
projections / sqrt(2 * layers)); speed does not depend on the values.

Usage: /usr/bin/python3 bench/torch_ref_seq2seq.py configs/translate.toml --seq 64 --source-len 64 --batch 48
       /usr/bin/python3 bench/torch_ref_seq2seq.py configs/translate.toml --decode --beam 5 --sentences 32
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("config", help="a headlab config with model.kind = encoder_decoder")
p.add_argument("--set", action="append", default=[], help="model.KEY=VALUE or train.KEY=VALUE (numbers only)")
p.add_argument("--seq", type=int, help="target tokens per row; also sets model.max_seq_len, as headlab bench --seq")
p.add_argument("--source-len", type=int, help="source tokens per row (default: --seq; 64 with --decode)")
p.add_argument("--batch", type=int, default=48)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--decode", action="store_true")
p.add_argument("--beam", type=int, default=5)
p.add_argument("--sentences", type=int, default=32)
p.add_argument("--target-len", type=int, default=128)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--tag", default="")
args = p.parse_args()

os.environ["OMP_NUM_THREADS"] = str(args.threads)
if "BLIS_ARCH_TYPE" not in os.environ and " avx512f" in open("/proc/cpuinfo").read():
    os.environ["BLIS_ARCH_TYPE"] = "0"  # as bench/torch_ref.py: BLIS's skx kernels on Zen 4/5

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "python"))
import headlab  # noqa: E402

from machine import blas_library, cpu_busy_seconds, cpu_capability  # noqa: E402  (bench/machine.py)

BOS, EOS, PAD, FIRST_PIECE = 2, 3, 0, 4  # headlab's sentencepiece ids (src/cli/bench_decode.cpp)


def load_config():
    """The config file over configs/default.toml (section by section), then --set and --seq."""
    with open(os.path.join(ROOT, "configs", "default.toml"), "rb") as f:
        config = tomllib.load(f)
    with open(args.config, "rb") as f:
        for section, values in tomllib.load(f).items():
            config.setdefault(section, {}).update(values)
    for item in args.set:
        key, value = item.split("=", 1)
        section, name = key.split(".", 1)
        config[section][name] = type(config[section][name])(float(value) if "." in value else int(value))
    if args.seq:
        config["model"]["max_seq_len"] = args.seq
    if config["model"]["kind"] != "encoder_decoder":
        sys.exit(f"error: {args.config}: model.kind must be encoder_decoder")
    return config


def init_like_headlab(model, config):
    std = float(config["model"].get("init_std", 0.02))
    layers = model.spec["n_layers"] + model.spec["n_encoder_layers"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln" in name or name.startswith("ln") or "ln_f" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith(".bias"):
                p.zero_()
            elif name.endswith("proj.weight"):
                p.normal_(0.0, std / (2.0 * layers) ** 0.5)
            else:
                p.normal_(0.0, std)


def measure(run, count, warmup):
    """Wall times of count calls of run() after warmup calls, and the machine's use meanwhile."""
    times = []
    for i in range(warmup + count):
        if i == warmup:
            busy0, steal0 = cpu_busy_seconds()
            own0, wall0 = sum(os.times()[:2]), time.perf_counter()
        t0 = time.perf_counter()
        run(i)
        t1 = time.perf_counter()
        if i >= warmup:
            times.append(t1 - t0)
    busy1, steal1 = cpu_busy_seconds()
    own, wall = sum(os.times()[:2]) - own0, time.perf_counter() - wall0
    use = dict(foreign_cores=round(max(0.0, (busy1 - busy0) - own) / wall, 2),
               steal_cores=round((steal1 - steal0) / wall, 2), own_cores=round(own / wall, 2))
    return times, use


def train(model, config):
    t = config["train"]
    T = args.seq or config["data"]["seq_len"]
    S = args.source_len or T
    V = model.spec["vocab_size"]
    opt = torch.optim.AdamW(model.parameters(), lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["adam_eps"],
                            weight_decay=t["weight_decay"])
    gen = torch.Generator().manual_seed(args.seed + 1)
    total = args.warmup + args.steps
    data = torch.randint(0, V, (total, args.batch, T + 1 + S), generator=gen)
    ones_t, ones_s = torch.ones(args.batch, T, dtype=torch.uint8), torch.ones(args.batch, S, dtype=torch.uint8)
    losses = []

    def step(i):
        x, y, src = data[i, :, :T], data[i, :, 1:T + 1], data[i, :, T + 1:]
        opt.zero_grad(set_to_none=True)
        logits = model(x, key_padding=ones_t, source=src, source_padding=ones_s).logits
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), label_smoothing=t["label_smoothing"])
        loss.backward()
        if t["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        opt.step()
        losses.append(loss.item())

    times, use = measure(step, args.steps, args.warmup)
    med = statistics.median(times)
    cfg = dict(seq=T, source_len=S, batch=args.batch, steps=args.steps, warmup=args.warmup)
    return cfg, dict(mode="train_seq2seq", step_ms_median=round(med * 1e3, 3),
                     step_ms_all=[round(x * 1e3, 3) for x in times], tokens_per_s=round(args.batch * T / med, 1),
                     source_tokens_per_s=round(args.batch * S / med, 1), loss_first=round(losses[0], 4),
                     loss_last=round(losses[-1], 4), label_smoothing=t["label_smoothing"]), use


def decode(model):
    S = args.source_len or 64
    V = model.spec["vocab_size"]
    gen = torch.Generator().manual_seed(args.seed + 1)
    sources = [torch.randint(FIRST_PIECE, V, (S - 1,), generator=gen).tolist() + [EOS] for _ in range(args.sentences)]
    got = []

    def run(i):
        got.append(model.beam_search(sources, BOS, EOS, PAD, beam=args.beam, max_len_a=0.0,
                                     max_len_b=args.target_len, min_len=args.target_len - 1))

    times, use = measure(run, args.reps, args.warmup)
    n_tokens = sum(len(t) + 1 for t in got[-1])
    if n_tokens != args.sentences * args.target_len:
        sys.exit(f"error: decoded {n_tokens} target tokens, expected {args.sentences * args.target_len}")
    med = statistics.median(times)
    cfg = dict(beam=args.beam, sentences=args.sentences, source_len=S, target_len=args.target_len, cache=True,
               reps=args.reps, warmup=args.warmup)
    return cfg, dict(mode="decode", ms_median=round(med * 1e3, 3), ms_all=[round(x * 1e3, 3) for x in times],
                     sentences_per_s=round(args.sentences / med, 3),
                     target_tokens_per_s=round(n_tokens / med, 1)), use


def main():
    config = load_config()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = headlab.EncoderDecoder(config, gated=False)
    init_like_headlab(model, config)
    spec = model.spec
    loadavg = open("/proc/loadavg").read().split()[0]
    cfg, result, use = decode(model) if args.decode else train(model, config)
    config_json = dict(d_model=spec["d_model"], n_layers=spec["n_layers"], n_encoder_layers=spec["n_encoder_layers"],
                       n_heads=spec["n_heads"], vocab_size=spec["vocab_size"], threads=args.threads, **cfg)
    out = dict(config=config_json, tag=args.tag, torch=torch.__version__, torch_threads=torch.get_num_threads(),
               cpu_capability=cpu_capability(), blas=blas_library(),
               params=sum(p.numel() for p in model.parameters()), **result,
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), loadavg_start=loadavg,
               **use, blis_arch_type=os.environ.get("BLIS_ARCH_TYPE"))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
