#!/usr/bin/env bash
# Do two headlab binaries write the same results? Runs one fixed set of commands with each, one
# thread (train the default text config with GQA and dropout; k_relation with grad_accum 1 and 2;
# eval, sample, analyze with an attention dump and --layer-only; prune by importance with
# fine-tuning and at random; a 2 x 2 sweep), then compares every file they wrote
# (compare_outputs.py: timings, provenance and headlab_kind left out). For refactors that must
# not change results (issue 17). Some seconds per binary.
#   tests/tools/same_outputs.sh OLD/headlab build/headlab [WORK]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=${3:-$(mktemp -d)}
run_all() {
  local H=$(realpath "$1") out=$2
  rm -rf "$out" && mkdir -p "$out" && cd "$out"
  export OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1
  $H train $src/configs/default.toml --set train.steps=60 --set train.warmup_steps=10 --set train.eval_every=20 \
    --set train.checkpoint_every=20 --set model.n_kv_heads=2 --set model.dropout=0.1 --set train.threads=1 --out run > train.log 2>&1
  $H train $src/configs/k_relation.toml --set train.steps=200 --set train.threads=1 --out krel > krel.log 2>&1
  $H train $src/configs/k_relation.toml --set train.steps=100 --set train.grad_accum=2 --set train.threads=1 \
    --out krel_accum > krel_accum.log 2>&1
  $H eval krel --split test > eval.txt 2>&1
  $H sample run --tokens 40 --prompt "The " > sample.txt 2>&1
  $H analyze krel --dump-example 0 --layer-only > analyze.log 2>&1
  $H prune krel --strategy importance --finetune-steps 10 > prune_imp.log 2>&1
  $H prune krel --strategy random --seed 3 > prune_rand.log 2>&1
  printf 'base = "%s"\nname = "s"\n[set]\n"train.steps" = 60\n"train.warmup_steps" = 10\n"train.threads" = 1\n[grid]\n"model.n_heads" = [1, 2]\n"train.lr" = [0.1, 3e-3]\n' \
    "$src/configs/k_relation.toml" > sweep.toml
  $H sweep sweep.toml --out sweep -j 2 > sweep.log 2>&1
}
(run_all "$1" "$work/a")
(run_all "$2" "$work/b")
/usr/bin/python3 "$src/tests/tools/compare_outputs.py" "$work/a" "$work/b"
