#!/usr/bin/env bash
# experiments/pruning, beyond single heads (issue 32): on the same base models as run.sh (its
# sweeps, retrained bit-identically when BASE lacks them), for every task and seed:
#   - the final checkpoint analysed with integrated gradients beside Michel's importance and the
#     ablation score (heads.csv: the three scores' rank correlations), its FFN units too (--ffn:
#     how their attributions add up);
#   - heads pruned by each of the three orders and at random (the fraction prunable of each);
#   - FFN hidden units pruned by importance, magnitude, integrated gradients and at random;
#   - whole attention layers and whole FFN blocks pruned by importance, ablation, integrated
#     gradients and at random;
#   - recovery: heads (and FFN units) pruned by importance with FINETUNE steps of fine-tuning or
#     of distillation from the unpruned model after every round, and the control (the same
#     steps with nothing pruned).
# Then collect_beyond.py: OUT -> data/beyond/, and make_results.py. From the repository root,
# after building, on a clean checkout and a quiet machine (the wall time is recorded):
#   experiments/pruning/run_beyond.sh
#   SCALE=dev TASKS=grammar SEEDS=0 OUT=/tmp/pb DATA=/tmp/pb/data experiments/pruning/run_beyond.sh  # a quick check
# A job whose marker exists is skipped: an interrupted run continues where it stopped.
# In parts (one session each), from the same clean commit: TASKS="grammar text" run_beyond.sh, then
# TASKS="induction classify k_relation" run_beyond.sh; each part replaces its tasks' rows of
# data/beyond/ and keeps the others' (collect_beyond.py refuses a part from another commit).
# Layout: OUT/<task>/seed<N>/beyond/analyze/heads.h5, OUT/<task>/seed<N>/beyond/<arm>/prune.csv
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/pruning}
BASE=${BASE:-$OUT}
DATA=${DATA:-experiments/pruning/data}
SCALE=${SCALE:-full}
TASKS=${TASKS:-"grammar text induction classify k_relation"}
SEEDS=${SEEDS:-"0 1 2 3 4"}
JOBS=${JOBS:-2}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
started=$EPOCHREALTIME
started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
if [[ $SCALE == full && -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "run_beyond.sh: the checkout has uncommitted changes; the data must come from one clean commit" >&2
  exit 2
fi

case $SCALE in
  # STEP_FRAC of the heads (units, layers) per round; FINETUNE steps of recovery after each round;
  # IG_STEPS points of the gates' path.
  full) STEP_FRAC=0.05; FFN_STEP_FRAC=0.05; FINETUNE=20; IG_STEPS=20; RANDOM_SEEDS="1 2 3" ;;
  dev)  STEP_FRAC=0.25; FFN_STEP_FRAC=0.25; FINETUNE=5;  IG_STEPS=4;  RANDOM_SEEDS="1" ;;
  *) echo "run_beyond.sh: SCALE must be full or dev, got '$SCALE'" >&2; exit 2 ;;
esac

# The batches of run.sh: final analysis, metric of every round, scores (training split).
batches() {  # batches TASK -> "final metric score"
  local b
  case $1 in
    k_relation) b="4 2 2" ;;
    induction)  b="32 16 8" ;;
    grammar)    b="32 16 8" ;;
    text)       b="64 32 16" ;;
    classify)   b="16 8 8" ;;
    *) echo "run_beyond.sh: unknown task '$1'" >&2; exit 2 ;;
  esac
  if [[ $SCALE == dev ]]; then set -- $b; b="$(( ($1 + 3) / 4 )) $(( ($2 + 1) / 2 )) $(( ($3 + 1) / 2 ))"; fi
  echo "$b"
}

source experiments/jobs.sh
for task in $TASKS; do batches "$task" > /dev/null; done  # an unknown task: one line, before any work
mkdir -p "$OUT"  # before the sampler opens its file there
( while sleep 60; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; done >> "$OUT/load_beyond.txt" ) &
sampler=$!
jobs_file=$(mktemp)
trap 'kill $sampler 2>/dev/null || true; rm -f "$jobs_file"' EXIT

# 1. The base models of SEEDS, as run.sh trains them (its sweeps cut to these seeds).
for task in $TASKS; do
  sweep=$(/usr/bin/python3 experiments/sweep_part.py experiments/pruning/base_$task.toml "$OUT/base_${task}_part.toml" \
    "$SEEDS")
  if "$HEADLAB" sweep "$sweep" --out "$BASE/base_$task" --dry-run | grep -Eq '^(start|resume) '; then
    "$HEADLAB" sweep "$sweep" --jobs "$JOBS" --out "$BASE/base_$task"
  fi
done

# 2. The jobs: one analysis and the prune arms per task and seed. arm NAME ARGS...: one prune run
# of the final checkpoint into $dir/NAME (scored strategies get the scoring batches, and
# integrated gradients its path's points).
arm() {
  local name=$1
  shift
  local extra=()
  case " $* " in
    *" --strategy random "* | *" --strategy none "*) ;;
    *" --strategy integrated_gradients "*) extra=(--score-batches "$score_b" --ig-steps "$IG_STEPS") ;;
    *) extra=(--score-batches "$score_b") ;;
  esac
  echo "$dir/$name pruned.h5 $HEADLAB prune $final --batches $metric_b ${extra[*]} --set train.threads=1 $*" \
       "--out $dir/$name"
}
for task in $TASKS; do
  read -r final_b metric_b score_b <<< "$(batches "$task")"
  for seed in $SEEDS; do
    run="$BASE/base_$task/train.seed=$seed"
    [[ -d $run/checkpoints ]] || { echo "run_beyond.sh: $run/checkpoints is missing" >&2; exit 2; }
    final=$(ls "$run"/checkpoints/step_*.h5 | sort | tail -n 1)
    dir="$OUT/$task/seed$seed/beyond"
    echo "$dir/analyze heads.h5 $HEADLAB analyze --threads 1 --no-similarity --ffn $final --batches $final_b" \
         "--ig-steps $IG_STEPS --out $dir/analyze"
    for s in importance integrated_gradients ablation; do arm "$s" --strategy $s --step-frac "$STEP_FRAC"; done
    for s in importance magnitude integrated_gradients; do
      arm "${s}_ffn" --unit ffn --strategy $s --step-frac "$FFN_STEP_FRAC"
    done
    for r in $RANDOM_SEEDS; do
      arm "random_seed$r" --strategy random --seed "$r" --step-frac "$STEP_FRAC"
      arm "random_ffn_seed$r" --unit ffn --strategy random --seed "$r" --step-frac "$FFN_STEP_FRAC"
    done
    for unit in attention_layers ffn_blocks; do
      for s in importance ablation integrated_gradients; do arm "${s}_$unit" --unit $unit --strategy $s; done
      for r in $RANDOM_SEEDS; do arm "random_${unit}_seed$r" --unit $unit --strategy random --seed "$r"; done
    done
    for unit in heads ffn; do
      frac=$STEP_FRAC u=""
      [[ $unit == ffn ]] && frac=$FFN_STEP_FRAC u="_ffn"
      ft="--unit $unit --step-frac $frac --finetune-steps $FINETUNE"
      arm "importance${u}_ft$FINETUNE" --strategy importance $ft
      arm "importance${u}_ft${FINETUNE}_distill" --strategy importance $ft --recover distill
      arm "none${u}_ft$FINETUNE" --strategy none $ft
    done
  done
done > "$jobs_file"
echo "$(wc -l < "$jobs_file") jobs, $JOBS at a time (finished ones are skipped)"
status=0
xargs -P "$JOBS" -L 1 bash -c 'run_job "$@"' _ < "$jobs_file" || status=$?

# 3. data/beyond/ (with this script's wall time), then RESULTS.md.
wall=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
kill $sampler 2>/dev/null || true
/usr/bin/python3 experiments/pruning/collect_beyond.py "$OUT" "$DATA/beyond" --tasks "$TASKS" --seeds "$SEEDS" \
  --binary "$HEADLAB" --started "$started_utc" --wall-seconds "$wall" --load "$OUT/load_beyond.txt" --scale "$SCALE"
if [[ -e $DATA/setup.csv ]]; then
  /usr/bin/python3 experiments/pruning/make_results.py --data "$DATA"
else  # a quick check's DATA holds data/beyond/ alone
  echo "run_beyond.sh: $DATA has no run.sh data (setup.csv): RESULTS.md not rendered"
fi
exit $status
