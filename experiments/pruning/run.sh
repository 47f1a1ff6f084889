#!/usr/bin/env bash
# Regenerates experiments/pruning/ (Michel et al. 2019 and Voita et al. 2019 on headlab's
# models): trains the base models, runs every analysis and pruning arm, collects the compact
# data/ folder and rebuilds RESULTS.md and figures/ from it. From the repository root, after
# building:
#   experiments/pruning/run.sh                       # everything (the time is in RESULTS.md)
#   SCALE=dev TASKS=grammar SEEDS=0 OUT=/tmp/p DATA=/tmp/p/data experiments/pruning/run.sh  # a quick check
#   BASE=runs/pruning OUT=runs/pruning-analysis ...  # base models trained elsewhere
#   LIST_JOBS=1 experiments/pruning/run.sh           # print stage 2's job lines, run nothing
#   TASKS="grammar induction classify k_relation" experiments/pruning/run.sh, then in a later
#   session, at the same clean commit: TASKS=text MERGE=1 experiments/pruning/run.sh
#                                                    # a regeneration in parts (collect.py --merge)
#   ONLY_SCRATCH=1 experiments/pruning/run.sh        # only the from-scratch retraining of the
#                                                    # L0 layouts in data/, merged into data/
#   python3 experiments/pruning/make_results.py      # RESULTS.md and figures from data/ alone
# Stages:
#   1. base models: headlab sweep experiments/pruning/base_<task>.toml (5 seeds, every checkpoint
#      kept), run only when `sweep --dry-run` lists a run that is not finished;
#   2. for every task and seed, independent jobs, two 1-thread jobs at a time (xargs -P):
#      analyze of the final checkpoint (ablation, --layer-only, attention roles); analyze
#      (importance) and two prune curves (importance, random) of every checkpoint along training
#      (Michel Section 6); prune arms of the final checkpoint: each score order without
#      fine-tuning, re-scoring only, fine-tuning only, both, random with fine-tuning, and the
#      control (--strategy none: the same fine-tuning with nothing pruned); L0 at each lambda
#      (--l0-penalty L0_PENALTY: layer_mean, Voita et al.'s code's aggregate, unless set; the
#      data before issue 29 is `sum`, which is layer_mean times the layers) and its control
#      (--strategy none --rounds 1, as many steps);
#   3. the test split of every L0 model and its control (headlab eval), and the L0 layout
#      chosen on val retrained from scratch (make_results.py --l0-layouts chooses it; the
#      heads L0 removed are gated off from init by model.active_heads);
#   4. collect.py: OUT -> data/ (compact CSV and one HDF5 of per-example losses);
#   5. make_results.py: RESULTS.md and figures/ from data/.
# A job whose marker file exists is skipped, so an interrupted regeneration continues where it
# stopped; after changing a setting here, delete OUT (or the affected folders).
# Layout: OUT/<task>/seed<N>/{heads.csv,heads.h5}     analyze of the final checkpoint
#         OUT/<task>/seed<N>/dynamics/step_<S>/        analyze and prune/ of checkpoint S
#         OUT/<task>/seed<N>/prune/<arm>/prune.csv     one headlab prune each (+ test.txt for L0)
#         OUT/<task>/seed<N>/scratch_l0/               the L0 layout trained from scratch
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/pruning}
BASE=${BASE:-$OUT}          # where the base sweeps live: BASE/base_<task>/train.seed=<N>/
DATA=${DATA:-experiments/pruning/data}
SCALE=${SCALE:-full}        # full, or dev: fewer batches, rounds and lambdas (the pipeline's check)
TASKS=${TASKS:-"grammar text induction classify k_relation"}  # longest first, for the job queue
SEEDS=${SEEDS:-"0 1 2 3 4"}
JOBS=${JOBS:-2}
L0_PENALTY=${L0_PENALTY:-layer_mean}  # headlab prune --l0-penalty (docs/pruning-verb.md#l0-gates)
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
started=$EPOCHREALTIME

case $SCALE in
  # LAMBDAS multiply the default --l0-penalty layer_mean (Voita's: each layer's expected open heads,
  # averaged over layers); on a 4-layer model 0.02 is the old sum penalty's 0.005.
  full) STEP_FRAC=0.05; FINETUNE=20; L0_STEPS=300; LAMBDAS="0.005 0.02 0.08 0.3"; RANDOM_SEEDS="1 2 3"; DYN_POINTS=4 ;;
  dev)  STEP_FRAC=0.1;  FINETUNE=5;  L0_STEPS=40;  LAMBDAS="0.02 0.2";            RANDOM_SEEDS="1";     DYN_POINTS=2 ;;
  *) echo "run.sh: SCALE must be full or dev, got '$SCALE'" >&2; exit 2 ;;
esac

# Per task: batches for the final analysis (the paired tests: about 1024 examples), for each
# checkpoint of the dynamics, for the metric of every prune round (about 512 examples), and for
# the prune scores (training split). Batch sizes are the configs': k_relation 256, classify 64,
# induction and grammar 32, text 16.
batches() {  # batches TASK -> "final dynamics metric score"
  local b
  case $1 in
    k_relation) b="4 2 2 2" ;;
    induction)  b="32 8 16 8" ;;
    grammar)    b="32 8 16 8" ;;
    text)       b="64 16 32 16" ;;
    classify)   b="16 4 8 8" ;;
    *) echo "run.sh: unknown task '$1'" >&2; exit 2 ;;
  esac
  if [[ $SCALE == dev ]]; then set -- $b; b="$(( ($1 + 3) / 4 )) $(( ($2 + 1) / 2 )) $(( ($3 + 1) / 2 )) $(( ($4 + 1) / 2 ))"; fi
  echo "$b"
}

# run_job, train_job, eval_job: experiments/jobs.sh.
source experiments/jobs.sh
for task in $TASKS; do batches "$task" > /dev/null; done  # an unknown task: one line, before any work
status=0
run_jobs() {  # run_jobs FILE: its job lines, JOBS at a time
  echo "$(wc -l < "$1") jobs, $JOBS at a time (finished ones are skipped)"
  xargs -P "$JOBS" -L 1 bash -c 'run_job "$@"' _ < "$1" || status=$?
}

ONLY_SCRATCH=${ONLY_SCRATCH:-0}
merge=()
[[ ${MERGE:-0} == 1 ]] && merge=(--merge)
jobs_file=$(mktemp)
trap 'rm -f "$jobs_file"' EXIT

if [[ $ONLY_SCRATCH != 1 ]]; then
# 1. Base models (not when only listing the jobs).
for task in $TASKS; do
  [[ ${LIST_JOBS:-0} == 1 ]] && break
  sweep=experiments/pruning/base_$task.toml
  if "$HEADLAB" sweep "$sweep" --out "$BASE/base_$task" --dry-run | grep -Eq '^(start|resume) '; then
    "$HEADLAB" sweep "$sweep" --jobs "$JOBS" --out "$BASE/base_$task"
  fi
done

# 2. The job list.
for task in $TASKS; do
  read -r final_b dyn_b metric_b score_b <<< "$(batches "$task")"
  for seed in $SEEDS; do
    run="$BASE/base_$task/train.seed=$seed"
    [[ -d $run/checkpoints ]] || { echo "run.sh: $run/checkpoints is missing (base sweep not trained?)" >&2; exit 2; }
    checkpoints=$(ls "$run"/checkpoints/step_*.h5 | sort)
    final=$(echo "$checkpoints" | tail -n 1)
    dir="$OUT/$task/seed$seed"
    analyze=("$HEADLAB" analyze --threads 1 --no-similarity)
    echo "$dir heads.h5 ${analyze[*]} $final --batches $final_b --layer-only --dump-example 0 --out $dir"
    prune=("$HEADLAB" prune --batches "$metric_b" --set train.threads=1)
    scored=(--score-batches "$score_b" --step-frac "$STEP_FRAC")
    # Section 6: DYN_POINTS checkpoints spread evenly over training before the final one (the
    # k-th of DYN_POINTS at index round(k (n - 1) / DYN_POINTS) of the n - 1 earlier ones), each
    # analysed and pruned by its own importance and by a random order.
    n=$(echo "$checkpoints" | wc -l)
    picked=" $(awk -v n="$n" -v k="$DYN_POINTS" 'BEGIN { for (j = 1; j <= k; j++) printf "%d ", int(j * (n - 1) / k + 0.5) }') "
    i=0
    for ckpt in $checkpoints; do
      i=$((i + 1))
      [[ $ckpt == "$final" ]] && continue
      [[ $picked == *" $i "* ]] || continue
      d="$dir/dynamics/$(basename "$ckpt" .h5)"
      echo "$d heads.h5 ${analyze[*]} $ckpt --batches $dyn_b --no-ablation --out $d"
      echo "$d/prune/importance pruned.h5 ${prune[*]} $ckpt --strategy importance ${scored[*]} --out $d/prune/importance"
      echo "$d/prune/random_seed1 pruned.h5 ${prune[*]} $ckpt --strategy random --seed 1 --step-frac $STEP_FRAC" \
           "--out $d/prune/random_seed1"
    done
    # The final checkpoint: score orders, then the fine-tuning arms and their control.
    p="$dir/prune"
    for strategy in importance importance_raw ablation entropy confidence; do
      echo "$p/$strategy pruned.h5 ${prune[*]} $final --strategy $strategy ${scored[*]} --out $p/$strategy"
    done
    for r in $RANDOM_SEEDS; do
      echo "$p/random_seed$r pruned.h5 ${prune[*]} $final --strategy random --seed $r --step-frac $STEP_FRAC --out $p/random_seed$r"
    done
    ft=(--finetune-steps "$FINETUNE")
    echo "$p/importance_recompute pruned.h5 ${prune[*]} $final --strategy importance ${scored[*]} --recompute" \
         "--out $p/importance_recompute"
    echo "$p/importance_ft$FINETUNE pruned.h5 ${prune[*]} $final --strategy importance ${scored[*]} ${ft[*]}" \
         "--out $p/importance_ft$FINETUNE"
    echo "$p/importance_ft${FINETUNE}_recompute pruned.h5 ${prune[*]} $final --strategy importance ${scored[*]} ${ft[*]}" \
         "--recompute --out $p/importance_ft${FINETUNE}_recompute"
    echo "$p/none_ft$FINETUNE pruned.h5 ${prune[*]} $final --strategy none --step-frac $STEP_FRAC ${ft[*]}" \
         "--out $p/none_ft$FINETUNE"
    for lambda in $LAMBDAS; do
      echo "$p/l0_lambda$lambda pruned.h5 ${prune[*]} $final --strategy l0 --lambda $lambda --l0-steps $L0_STEPS" \
           "--l0-penalty $L0_PENALTY --out $p/l0_lambda$lambda"
    done
    echo "$p/none_l0 pruned.h5 ${prune[*]} $final --strategy none --rounds 1 --finetune-steps $L0_STEPS --out $p/none_l0"
  done
done > "$jobs_file"

# LIST_JOBS=1: print the job list and stop (bench/compare_analysis.py times some of these jobs).
if [[ ${LIST_JOBS:-0} == 1 ]]; then cat "$jobs_file"; exit 0; fi
run_jobs "$jobs_file"

# 3. The test split of the L0 models and their controls (the lambda is chosen on val, reported
# on test), then the layout L0 chose on val, trained from scratch as the base model was.
for task in $TASKS; do
  read -r _ _ metric_b _ <<< "$(batches "$task")"
  for seed in $SEEDS; do
    for arm in "$OUT/$task/seed$seed"/prune/{l0_lambda*,none_l0}; do
      [[ -e $arm/pruned.h5 ]] || continue
      echo "$arm/test eval.txt eval_job $arm/test/eval.txt $HEADLAB eval $arm/pruned.h5 --split test --batches $metric_b"
    done
  done
done > "$jobs_file"
run_jobs "$jobs_file"
/usr/bin/python3 experiments/pruning/collect.py "$OUT" "$DATA" --base "$BASE" --tasks "$TASKS" --seeds "$SEEDS" \
  --scale "$SCALE" "${merge[@]}"
fi  # ONLY_SCRATCH
# The layout as model.active_heads (the first n heads of each layer on, the rest gated to 0 from
# init: L0 often empties whole layers, which model.layer_heads cannot express), trained with the
# base sweep's config and seed for as many steps as the L0 model had in all (base + L0_STEPS, as
# Voita et al. compare; the cosine schedule spans them all).
base_train_args() {  # base_train_args TASK -> "CONFIG --set KEY=VALUE ..." of the base sweep but its grid
  /usr/bin/python3 - "experiments/pruning/base_$1.toml" "$L0_STEPS" <<'PY'
import json, os, sys, tomllib
path, extra_steps = sys.argv[1], int(sys.argv[2])
sweep = tomllib.load(open(path, "rb"))
args = [os.path.normpath(os.path.join(os.path.dirname(path), sweep["base"]))]
for key, value in sweep.get("set", {}).items():
    if isinstance(value, str):  # a job line is split on whitespace and quotes: keep values plain
        sys.exit(f"run.sh: {path}: [set] {key} is a string; base_train_args passes numbers and arrays only")
    if key == "train.steps":
        value += extra_steps
    args.append(f"--set {key}={json.dumps(value, separators=(',', ':'))}")
print(" ".join(args))
PY
}
# Only this run's TASKS and SEEDS: in a regeneration in parts, data/ already holds the other
# parts' layouts, whose retraining that part did (and whose run folders may be gone).
/usr/bin/python3 experiments/pruning/make_results.py --data "$DATA" --l0-layouts | while read -r task seed heads; do
  [[ " $TASKS " == *" $task "* && " $SEEDS " == *" $seed "* ]] || continue
  echo "$OUT/$task/seed$seed/scratch_l0 done train_job $OUT/$task/seed$seed/scratch_l0 $HEADLAB train" \
       "$(base_train_args "$task") --set train.seed=$seed --set model.active_heads=$heads" \
       "--set train.keep_checkpoints=1 --set train.threads=1"
done > "$jobs_file"
run_jobs "$jobs_file"
for task in $TASKS; do  # the retrained model on the L0 model's val batches and on test
  read -r _ _ metric_b _ <<< "$(batches "$task")"
  for seed in $SEEDS; do
    d="$OUT/$task/seed$seed/scratch_l0"
    [[ -e $d/done ]] || continue
    last=$(ls "$d"/checkpoints/step_*.h5 | sort | tail -n 1)
    for split in val test; do
      echo "$d/$split eval.txt eval_job $d/$split/eval.txt $HEADLAB eval $last --split $split --batches $metric_b"
    done
  done
done > "$jobs_file"
run_jobs "$jobs_file"

# 4-5. data/, then RESULTS.md and figures from it. The provenance row: this script's wall time.
wall=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
if [[ $ONLY_SCRATCH == 1 ]]; then
  /usr/bin/python3 experiments/pruning/collect.py "$OUT" "$DATA" --tasks "$TASKS" --seeds "$SEEDS" --only-scratch
else
  /usr/bin/python3 experiments/pruning/collect.py "$OUT" "$DATA" --base "$BASE" --tasks "$TASKS" --seeds "$SEEDS" \
    --scale "$SCALE" "${merge[@]}" --wall-seconds "$wall"
fi
/usr/bin/python3 experiments/pruning/make_results.py --data "$DATA"
exit $status
