#!/usr/bin/env bash
# Regenerates experiments/pruning/RESULTS.md (issue 7: Michel et al. 2019 and Voita et al. 2019
# on headlab's models). From the repository root, after building:
#   experiments/pruning/run.sh                       # everything: about 21 min on 2 cores (8 training, 12.4 jobs; 2026-12-01)
#   SCALE=dev TASKS=grammar SEEDS=0 OUT=/tmp/p experiments/pruning/run.sh   # a quick end-to-end check
#   BASE=runs/pruning OUT=runs/pruning-analysis ...  # base models trained elsewhere
#   LIST_JOBS=1 experiments/pruning/run.sh           # print step 2's job lines, run nothing
# Steps:
#   1. the base models: headlab sweep experiments/pruning/base_<task>.toml (3 seeds each, every
#      checkpoint kept), run only when `sweep --dry-run` lists a run that is not finished;
#   2. for every task and seed, independent jobs, two 1-thread jobs at a time (xargs -P 2):
#      headlab analyze of the final checkpoint (ablation and --layer-only, for Tables 1 and 2),
#      headlab analyze of every checkpoint along training (importance only: the dynamics),
#      headlab prune with each strategy, with and without fine-tuning, and an L0 lambda sweep;
#      a job whose output is complete (heads.h5, pruned.h5) is skipped, so an interrupted
#      regeneration continues where it stopped; each job leaves log.txt and seconds.txt;
#   3. headlab plot of every task and seed folder;
#   4. make_results.py: RESULTS.md and figures/.
# Skipping looks only at the marker file: after changing a setting here, delete OUT (or the
# affected folders) to regenerate with it.
# Layout: OUT/<task>/seed<N>/{heads.csv,heads.h5}  (final checkpoint)
#         OUT/<task>/seed<N>/dynamics/step_<S>/     (checkpoints along training)
#         OUT/<task>/seed<N>/prune/<name>/prune.csv (one headlab prune invocation each)
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/pruning}
BASE=${BASE:-$OUT}          # where the base sweeps live: BASE/base_<task>/train.seed=<N>/
SCALE=${SCALE:-full}        # full, or dev: fewer batches, rounds and lambdas (the pipeline's check)
TASKS=${TASKS:-"grammar text induction classify k_relation"}  # longest first, for the job queue
SEEDS=${SEEDS:-"0 1 2"}
JOBS=${JOBS:-2}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive

case $SCALE in
  full) STEP_FRAC=0.05; FINETUNE=20; L0_STEPS=300; LAMBDAS="0.005 0.02 0.05 0.2"; RANDOM_SEEDS="1 2 3"; DYN_DIV=1 ;;
  dev)  STEP_FRAC=0.1;  FINETUNE=5;  L0_STEPS=40;  LAMBDAS="0.02 0.2";            RANDOM_SEEDS="1";     DYN_DIV=4 ;;
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

# 1. Base models (not when only listing the jobs).
for task in $TASKS; do
  [[ ${LIST_JOBS:-0} == 1 ]] && break
  sweep=experiments/pruning/base_$task.toml
  if "$HEADLAB" sweep "$sweep" --out "$BASE/base_$task" --dry-run | grep -Eq '^(start|resume) '; then
    "$HEADLAB" sweep "$sweep" --jobs "$JOBS" --out "$BASE/base_$task"
  fi
done

# 2. The job list: one line per job, "DIR MARKER COMMAND ARGS...".
jobs_file=$(mktemp)
trap 'rm -f "$jobs_file"' EXIT
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
    # Dynamics: every DYN_DIV-th checkpoint and the final one, importance only.
    i=0
    for ckpt in $checkpoints; do
      i=$((i + 1))
      if (( i % DYN_DIV == 0 )) || [[ $ckpt == "$final" ]]; then
        step=$(basename "$ckpt" .h5)
        echo "$dir/dynamics/$step heads.h5 ${analyze[*]} $ckpt --batches $dyn_b --no-ablation --out $dir/dynamics/$step"
      fi
    done
    # Fine-tuning (after each round, and L0's) runs at the rate training ended at (the last lr of
    # metrics.csv), not at the schedule's peak train.lr, which first undoes the trained model.
    lr=$(tail -n 1 "$run/metrics.csv" | cut -d, -f3)
    prune=("$HEADLAB" prune "$final" --batches "$metric_b" --set train.threads=1 --set "train.lr=$lr")
    scored=(--score-batches "$score_b" --step-frac "$STEP_FRAC")
    for strategy in importance ablation entropy confidence; do
      echo "$dir/prune/$strategy pruned.h5 ${prune[*]} --strategy $strategy ${scored[*]} --out $dir/prune/$strategy"
    done
    for r in $RANDOM_SEEDS; do
      echo "$dir/prune/random_seed$r pruned.h5 ${prune[*]} --strategy random --seed $r --step-frac $STEP_FRAC" \
           "--out $dir/prune/random_seed$r"
    done
    echo "$dir/prune/importance_ft$FINETUNE pruned.h5 ${prune[*]} --strategy importance ${scored[*]}" \
         "--finetune-steps $FINETUNE --recompute --out $dir/prune/importance_ft$FINETUNE"
    echo "$dir/prune/random_ft${FINETUNE}_seed1 pruned.h5 ${prune[*]} --strategy random --seed 1 --step-frac $STEP_FRAC" \
         "--finetune-steps $FINETUNE --out $dir/prune/random_ft${FINETUNE}_seed1"
    for lambda in $LAMBDAS; do
      echo "$dir/prune/l0_lambda$lambda pruned.h5 ${prune[*]} --strategy l0 --lambda $lambda --l0-steps $L0_STEPS" \
           "--out $dir/prune/l0_lambda$lambda"
    done
  done
done >> "$jobs_file"

# LIST_JOBS=1: print the job list and stop (bench/compare_analysis.py times some of these jobs).
if [[ ${LIST_JOBS:-0} == 1 ]]; then cat "$jobs_file"; exit 0; fi

# Runs one job unless its marker exists; the output goes to DIR/log.txt, the wall time to
# DIR/seconds.txt. A failed job is reported and the others carry on (xargs then exits 123).
run_job() {
  local dir=$1 marker=$2
  shift 2
  [[ -e $dir/$marker ]] && return 0
  mkdir -p "$dir"
  local start=$EPOCHREALTIME
  if "$@" > "$dir/log.txt" 2>&1; then
    awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }' > "$dir/seconds.txt"
    echo "done $(cat "$dir/seconds.txt") s  $dir"
  else
    echo "FAILED (exit $?): $* -- see $dir/log.txt" >&2
    return 1
  fi
}
export -f run_job
echo "$(wc -l < "$jobs_file") jobs, $JOBS at a time (finished ones are skipped)"
status=0
xargs -P "$JOBS" -L 1 bash -c 'run_job "$@"' _ < "$jobs_file" || status=$?

# 3. Figures of every task and seed (heads heatmaps, prune curves).
for task in $TASKS; do
  for seed in $SEEDS; do "$HEADLAB" plot "$OUT/$task/seed$seed" > /dev/null || status=1; done
done

# 4. The tables.
/usr/bin/python3 experiments/pruning/make_results.py "$OUT"
exit $status
