#!/usr/bin/env bash
# Regenerates experiments/translation/ (issue 30: Michel, Voita and Vaswani on translation) one
# arm at a time, so that arms run one after another across sessions. From the repository root,
# after building, on a clean checkout (every arm's data names the commit it came from) and a quiet
# machine (the wall time of each arm is recorded):
#   experiments/translation/run.sh base          # the base models: 5 seeds, every checkpoint kept
#   python3 experiments/translation/make_results.py        # RESULTS.md from data/ alone
#   OUT=runs/translation JOBS=2 experiments/translation/run.sh base
#   SWEEPS=experiments/translation/dev OUT=/tmp/t DATA=/tmp/t/data experiments/translation/run.sh base
#                                                  # the pipeline on a tiny model (minutes; not results)
# Arms:
#   base        headlab sweep base.toml (5 seeds); each seed's base checkpoint (checkpoints/best.h5:
#               the lowest val loss, fairseq's checkpoint_best) on test by beam 5 (BLEU, chrF);
#               collect.py base -> data/base/
#   settings    the base config at 16000 steps, seed 0, at each rate and dropout of
#               collect.py's SETTINGS_GRID (the first base models' settings among them, and
#               base.toml's: base seed 0 again): which setting reaches the plateau within an arm's
#               time; collect.py settings -> data/settings/
#   head_count_lr  Vaswani Table 3 A, step 1: head_count_lr.toml (1-16 heads at fixed d_model, 4
#               rates, seed 0, at the head-count arms' own fixed step budget); collect.py
#               head_count_lr -> data/head_count_lr/. RATES="5e-4" runs the grid's rates named
#               only (a part, merged by run)
#   head_count  5 fresh seeds per count at its rate: the highest final val BLEU of head_count_lr
#               (head_count/runs.py choose_rates) (OUT/head_count/seeds); data/head_count/
#   head_count_d_head  the same with d_head held at the base model's (OUT/head_count/d_head; the
#               base count's runs are the seeds study's); data/head_count_d_head/
#   head_count_rate_check  one head, the reference of every head-count comparison, at its runner-up
#               rate of head_count_lr for the same fresh seeds (OUT/head_count/rate_check): how much
#               the verdicts rest on the reference's rate; RATE_CHECK_HEADS=2,4,8,16 the other
#               counts (a part of its own); data/head_count_rate_check/
#               Every head-count run's final checkpoint on test by beam 5.
#   michel      Michel et al. on each base seed's base checkpoint: headlab analyze --bleu
#               --layer-only --alignment on test (Tables 1 and 2 in BLEU with the paired bootstrap,
#               every cross head's AER); prune by importance, by ablation and in 3 random orders
#               (Figure 3), by importance within each kind alone (Figure 4), and DYN_POINTS earlier
#               checkpoints before it by their own importance (Section 6); BLEU on test at every round;
#               collect.py michel -> data/michel/
#   voita       Voita et al. on each base seed's base checkpoint: L0 gates over the encoder's heads
#               and over every kind, at each of LAMBDAS for L0_STEPS steps, against the control
#               (the same steps, nothing gated), BLEU on val (the lambda's choice) and on test;
#               the heads' roles (headlab analyze on val); collect.py voita -> data/voita/
#   voita_scratch  each seed's val-chosen encoder layout (from the voita arm's runs, which it
#               finishes first) retrained from scratch for base + L0_STEPS steps
#               (model.active_heads), on val and test; collect.py voita_scratch -> data/voita_scratch/
#   kv_heads    MQA/GQA: the base model with 1, 2, ... K/V heads shared by its query heads in every
#               kind, multi-head attention included, at the head-count arms' fixed step budget
#               (head_count_lr.toml) and the rate head_count_lr chose for the base head count
#               there, 5 seeds each, test BLEU by beam 5; then, with nothing else
#               running, beam-5 decoding speed of each setting (headlab bench --decode, random
#               weights, one thread, BENCH_ROUNDS rounds that take the settings in turn);
#               collect.py kv_heads -> data/kv_heads/
# The alignment heads (AER against the Strong's gold, and whether importance pruning keeps them)
# come from the michel arm's analyses and prune runs.
# A finished step is skipped (the sweep skips finished runs, an evaluation its output file), so
# an arm interrupted by a kill continues where it stopped; each arm's data/<arm>/provenance.csv
# records the commit, the machine and this script's wall time for the arm.
# Parts: SEEDS="0 1" experiments/translation/run.sh ARM runs the arm for those seeds only (the base
# seeds; the head_count arms: the fresh seeds 1-5) and merges their rows into
# data/<arm>/, one provenance row per part. Run folders do not outlive a machine, but data/ does:
# an arm too long for one session runs as parts in several, each part retraining just the base
# models it needs, which collect.py check-base compares with data/base/ digit for digit (a
# difference stops the arm on a machine like the base arm's, see common.machine()). The
# head-count arms take their rates from data/head_count_lr/, voita_scratch its layouts from
# data/voita/: run those arms first.
# Several arms on the same base models in one session (michel, then voita, for seeds "0 1"): with
# DATA a copy of data/ outside the checkout, the first arm's collect leaves the checkout clean, so
# the second starts from the same commit and reuses OUT/base; copy DATA's arm folders back to
# data/ and commit them.
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/translation}
JOBS=${JOBS:-2}
PY=${PY:-/usr/bin/python3}
HERE=experiments/translation
SWEEPS=${SWEEPS:-$HERE}     # where base.toml and head_count_lr.toml are read (dev/: a tiny pipeline check)
DATA=${DATA:-$HERE/data}
SEEDS=${SEEDS:-}            # this part's seeds; empty: all of the arm's
RATES=${RATES:-}            # head_count_lr: this part's rates; empty: all of the grid's
RATE_CHECK_HEADS=${RATE_CHECK_HEADS:-}  # head_count_rate_check: the counts checked (H,H); empty: one head
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
arm=${1:-}
ARMS=$("$PY" $HERE/collect.py arms)  # one list of the arms (collect.py's); each is a function below
if [[ -z $arm || " $ARMS " != *" $arm "* ]]; then
  echo "run.sh: unknown arm '${arm}' (arms: ${ARMS// /, })" >&2
  exit 2
fi
if [[ -n $RATES && $arm != head_count_lr ]]; then
  echo "run.sh: RATES is for the head_count_lr arm, not '$arm'" >&2
  exit 2
fi
if [[ -n $SEEDS && $arm == settings ]]; then
  echo "run.sh: the settings arm has one seed (collect.py SETTINGS_SEED); it takes no SEEDS" >&2
  exit 2
fi
if [[ -n $RATE_CHECK_HEADS && $arm != head_count_rate_check ]]; then
  echo "run.sh: RATE_CHECK_HEADS is for the head_count_rate_check arm, not '$arm'" >&2
  exit 2
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "run.sh: the checkout has uncommitted changes; the data must come from one clean commit" >&2
  exit 2
fi
mkdir -p "$OUT"
started=$EPOCHREALTIME
started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# The load average once a minute while the arm runs (what else shared the cores).
( while sleep 60; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; done >> "$OUT/load_$arm.txt" ) &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT

# `headlab eval --json` of CHECKPOINT into FILE unless FILE exists (written atomically).
eval_json() {
  local file=$1
  shift
  [[ -e $file ]] && return 0
  "$HEADLAB" eval "$@" --json > "$file.tmp" && mv "$file.tmp" "$file"
}
export -f eval_json
export HEADLAB

# SWEEP.toml cut to this part's seeds (the sweep itself when SEEDS is empty): its path.
part_sweep() {
  local sweep=$1 cut=$2
  if [[ -z $SEEDS ]]; then echo "$sweep"; else "$PY" experiments/sweep_part.py "$sweep" "$cut" "$SEEDS"; fi
}

base_seeds() {  # this part's base seeds (all there are in OUT/base when SEEDS is empty)
  local r
  if [[ -n $SEEDS ]]; then echo $SEEDS; return; fi
  for r in "$OUT"/base/train.seed=*/; do r=${r%/}; echo "${r##*=}"; done
}

base_runs() {  # the base run folders of this part's seeds
  local s
  for s in $(base_seeds); do echo "$OUT/base/train.seed=$s/"; done
}

base_models() {  # the base sweep, each seed's base checkpoint on test, the check against data/base/
  "$HEADLAB" sweep "$(part_sweep "$SWEEPS/base.toml" "$OUT/base_part.toml")" --jobs "$JOBS" --out "$OUT/base"
  on_test best $(base_runs)
  "$PY" $HERE/collect.py check-base "$OUT" "$DATA" "$SEEDS"
}

# A run's checkpoint: final (its last step_*.h5: the fixed-budget arms) or best (best.h5, which the
# trainer rewrites whenever val loss improves: the base models, which train past their plateau).
checkpoint() {
  if [[ $1 == best ]]; then echo "$2"checkpoints/best.h5; else ls "$2"checkpoints/step_*.h5 | sort | tail -n 1; fi
}

on_test() {  # on_test final|best RUN...: each run folder's checkpoint on test by beam 5, two at a time
  local which=$1 run
  shift
  for run in "$@"; do
    echo "${run}test_beam5.json $(checkpoint "$which" "$run") --split test --beam 5 --set train.threads=1"
  done | xargs -P "$JOBS" -L 1 bash -c 'eval_json "$@"' _
}

settings() {
  local f
  f=$("$PY" $HERE/collect.py settings-sweep "$SWEEPS/base.toml" "$OUT/settings")
  "$HEADLAB" sweep "$f" --jobs "$JOBS" --out "${f%.toml}"
}

# The head-count arms share OUT/head_count/: lr (the rate sweep), seeds and d_head. Each later arm
# first finishes what it needs of the earlier ones (the sweeps skip finished runs).
head_count_lr() {
  local f=$SWEEPS/head_count_lr.toml
  [[ -z $RATES ]] || f=$("$PY" experiments/sweep_part.py "$f" "$OUT/head_count/lr_part.toml" "$RATES" train.lr)
  "$HEADLAB" sweep "$f" --jobs "$JOBS" --out "$OUT/head_count/lr"
  head_count_on_test
}

head_count_on_test() {  # every finished head-count run without its test.txt, by beam 5
  "$PY" experiments/head_count/make_results.py eval-jobs "$HEADLAB" "$OUT/head_count" |
    xargs -d '\n' -r -P "$JOBS" -n 1 bash -c
}

# STUDY EXTRA...: one sweep file per count at the rate data/head_count_lr/ chose, fresh seeds (this
# part's), at OUT/head_count/STUDY/heads=<H>.toml
head_count_seeds() {
  local study=$1 f
  shift
  if [[ ! -e $DATA/head_count_lr/runs.csv ]]; then
    echo "run.sh: $DATA/head_count_lr/runs.csv is missing: run the head_count_lr arm first (it chooses the rates)" >&2
    exit 2
  fi
  for f in $("$PY" experiments/head_count/make_results.py seeds-sweeps "$SWEEPS/head_count_lr.toml" \
      "$DATA/head_count_lr/runs.csv" "$OUT/head_count/$study" "$@"); do
    [[ -z $SEEDS ]] || "$PY" experiments/sweep_part.py "$f" "$f" "$SEEDS" > /dev/null
  done
}

# Every count's sweep file in DIR but SKIP, each into its folder. When the cores do not divide a
# sweep's runs (a part of 1 or 3 seeds on 2 cores) and there are several sweeps, they run side by
# side, one core each, so that no core idles while a sweep's last run finishes alone.
count_sweeps() {
  local dir=$1 skip=${2:-} f files=() runs
  for f in "$dir"/heads=*.toml; do [[ $f == "$skip" ]] || files+=("$f"); done
  runs=$("$PY" -c 'import sys, tomllib; print(len(tomllib.load(open(sys.argv[1], "rb"))["grid"]["train.seed"]))' "${files[0]}")
  if (( runs % JOBS == 0 || ${#files[@]} == 1 )); then
    for f in "${files[@]}"; do "$HEADLAB" sweep "$f" --jobs "$JOBS" --out "${f%.toml}"; done
  else
    printf '%s\n' "${files[@]}" |
      xargs -d '\n' -P "$JOBS" -I{} bash -c '"$HEADLAB" sweep "$1" --jobs 1 --out "${1%.toml}"' _ {}
  fi
}

head_count() {
  head_count_seeds seeds
  count_sweeps "$OUT/head_count/seeds"
  head_count_on_test
}

# The second study holds every kind's head width at the base model's (d_model / n_heads of
# base.toml's config; enc_d_head and cross_d_head default to d_model / their own head count). At
# the base model's head count that is the seeds study's model, so its runs are shared (a link).
head_count_d_head() {
  local w heads out=$OUT/head_count
  w=$("$PY" $HERE/collect.py base-d-head "$SWEEPS/base.toml")
  heads=$("$PY" $HERE/collect.py base-heads "$SWEEPS/base.toml")
  head_count_seeds seeds
  head_count_seeds d_head "--set=model.d_head=$w" "--set=model.enc_d_head=$w" "--set=model.cross_d_head=$w"
  "$HEADLAB" sweep "$out/seeds/heads=$heads.toml" --jobs "$JOBS" --out "$out/seeds/heads=$heads"
  if [[ -d $out/d_head/heads=$heads && ! -L $out/d_head/heads=$heads ]]; then
    echo "run.sh: $out/d_head/heads=$heads is a folder; it must be a link to the seeds study's runs" >&2
    exit 2
  fi
  ln -sfn "../seeds/heads=$heads" "$out/d_head/heads=$heads"
  count_sweeps "$out/d_head" "$out/d_head/heads=$heads.toml"
  head_count_on_test
}

# Counts at their runner-up rates, for the same fresh seeds: every rate was chosen on one seed.
# One head (every comparison's reference) by default; RATE_CHECK_HEADS=2,4,8,16 the others.
head_count_rate_check() {
  head_count_seeds rate_check "--heads=${RATE_CHECK_HEADS:-1}" --runner-up
  count_sweeps "$OUT/head_count/rate_check"
  head_count_on_test
}

# Michel's arm: the test verses decoded (beam 5) at every pruning round and for every head of the
# BLEU ablation: SENTENCES of them (all when empty); STEP_FRAC of all heads pruned per round.
SENTENCES=${SENTENCES:-}
STEP_FRAC=${STEP_FRAC:-0.1}
DYN_POINTS=${DYN_POINTS:-4}
RANDOM_SEEDS=${RANDOM_SEEDS:-"1 2 3"}
source experiments/jobs.sh  # run_job, train_job

michel() {
  base_models  # skips what is done; retrains missing base models bit-identically
  local sent=() seed run ckpts model last n picked i ckpt d
  [[ -n $SENTENCES ]] && sent=(--sentences "$SENTENCES")
  for seed in $(base_seeds); do
    run=$OUT/base/train.seed=$seed/
    d=$OUT/michel/seed$seed
    model=$(checkpoint best "$run")
    # the step checkpoints up to the base checkpoint's step (its own file among them: kept, not picked)
    last=$(printf 'step_%08d.h5' "$("$PY" $HERE/collect.py checkpoint-step "$model")")
    ckpts=$(ls "$run"checkpoints/step_*.h5 | sort | awk -v last="$last" '{ print } index($0, last) { exit }')
    if [[ $(basename "$(echo "$ckpts" | tail -n 1)") != "$last" ]]; then
      echo "run.sh: ${run}checkpoints has no $last, best.h5's step (base.toml keeps every checkpoint)" >&2
      exit 2
    fi
    local prune=("$HEADLAB" prune --split test --beam 5 "${sent[@]}" --step-frac "$STEP_FRAC" --set train.threads=1)
    echo "$d/analyze heads.h5 $HEADLAB analyze $model --split test --bleu --beam 5 ${sent[*]} --layer-only" \
         "--alignment --no-similarity --threads 1 --out $d/analyze"
    for strategy in importance ablation; do
      echo "$d/prune/$strategy pruned.h5 ${prune[*]} $model --strategy $strategy --out $d/prune/$strategy"
    done
    for r in $RANDOM_SEEDS; do
      echo "$d/prune/random_seed$r pruned.h5 ${prune[*]} $model --strategy random --seed $r --out $d/prune/random_seed$r"
    done
    for kind in enc dec cross; do
      echo "$d/prune/importance_$kind pruned.h5 ${prune[*]} $model --strategy importance --only $kind" \
           "--out $d/prune/importance_$kind"
    done
    # Section 6: DYN_POINTS checkpoints spread evenly over training before the base one.
    n=$(echo "$ckpts" | wc -l)
    picked=" $(awk -v n="$n" -v k="$DYN_POINTS" 'BEGIN { for (j = 1; j <= k; j++) printf "%d ", int(j * (n - 1) / k + 0.5) }') "
    i=0
    for ckpt in $ckpts; do
      i=$((i + 1))
      [[ $i -lt $n && $picked == *" $i "* ]] || continue
      echo "$d/dynamics/$(basename "$ckpt" .h5) pruned.h5 ${prune[*]} $ckpt --strategy importance" \
           "--out $d/dynamics/$(basename "$ckpt" .h5)"
    done
  done | xargs -P "$JOBS" -L 1 bash -c 'run_job "$@"' _
}

# Voita's arm: L0's penalty weights and steps (prune --l0-penalty layer_mean, Voita's aggregate).
LAMBDAS=${LAMBDAS:-"0.01 0.03 0.1 0.3 1"}
L0_STEPS=${L0_STEPS:-500}

voita() {
  base_models
  local run seed d model l only
  for seed in $(base_seeds); do
    run=$OUT/base/train.seed=$seed/
    d=$OUT/voita/seed$seed
    model=$(checkpoint best "$run")
    local prune=("$HEADLAB" prune --split val --beam 5 --set train.threads=1)
    echo "$d/roles heads.h5 $HEADLAB analyze $model --split val --no-similarity --threads 1 --out $d/roles"
    echo "$d/none_l0 pruned.h5 ${prune[*]} $model --strategy none --rounds 1 --finetune-steps $L0_STEPS --out $d/none_l0"
    for l in $LAMBDAS; do
      for only in enc all; do
        local o=()
        [[ $only == enc ]] && o=(--only enc)
        echo "$d/l0_${only}_lambda$l pruned.h5 ${prune[*]} $model --strategy l0 --lambda $l --l0-steps $L0_STEPS" \
             "${o[*]} --out $d/l0_${only}_lambda$l"
      done
    done
  done | xargs -P "$JOBS" -L 1 bash -c 'run_job "$@"' _
  # Every gated model and its control on test (the lambda is chosen on val, reported on test).
  for seed in $(base_seeds); do
    for p in "$OUT/voita/seed$seed"/{none_l0,l0_*}/pruned.h5; do
      echo "${p%pruned.h5}test.json $p --split test --beam 5 --set train.threads=1"
    done
  done | xargs -P "$JOBS" -L 1 bash -c 'eval_json "$@"' _
}

# The val-chosen encoder layouts (data/voita/), trained from scratch with the base config and seed
# for the base models' steps and L0's more, the checkpoint chosen as theirs (an arm of its own: five
# more base-length trainings).
voita_scratch() {
  local d final
  if [[ ! -e $DATA/voita/prune.csv ]]; then
    echo "run.sh: $DATA/voita/prune.csv is missing: run the voita arm first (it chooses the layouts)" >&2
    exit 2
  fi
  "$PY" $HERE/collect.py voita-layouts "$DATA" "$SEEDS" | while read -r seed heads; do
    echo "$OUT/voita/seed$seed/scratch done train_job $OUT/voita/seed$seed/scratch $HEADLAB train $("$PY" $HERE/collect.py \
      base-train-args "$SWEEPS/base.toml" "$L0_STEPS") --set train.seed=$seed --set model.active_heads=$heads"
  done | xargs -P "$JOBS" -L 1 bash -c 'run_job "$@"' _
  for d in "$OUT"/voita/seed*/scratch; do
    [[ -e $d/done ]] || continue
    final=$(checkpoint best "$d/")  # selected as the base models are
    for split in val test; do
      echo "$d/$split.json $final --split $split --beam 5 --set train.threads=1"
    done
  done | xargs -P "$JOBS" -L 1 bash -c 'eval_json "$@"' _
}

BENCH_ROUNDS=${BENCH_ROUNDS:-3}

kv_heads() {
  local f k r
  if [[ ! -e $DATA/head_count_lr/runs.csv ]]; then
    echo "run.sh: $DATA/head_count_lr/runs.csv is missing: run the head_count_lr arm first (it chooses the rate)" >&2
    exit 2
  fi
  for f in $("$PY" $HERE/collect.py kv-sweeps "$SWEEPS/base.toml" "$OUT/kv_heads" "$DATA/head_count_lr/runs.csv"); do
    "$HEADLAB" sweep "$(part_sweep "$f" "${f%.toml}_part.toml")" --jobs "$JOBS" --out "${f%.toml}"
  done
  on_test final "$OUT"/kv_heads/kv=*/train.seed=*/
  # Decoding speed, timed: one bench at a time, the settings in turn in every round; once per arm
  # (a later part keeps the committed bench.csv).
  [[ -s $DATA/kv_heads/bench.csv && $(wc -l < "$DATA/kv_heads/bench.csv") -gt 1 ]] && return 0
  for r in $(seq 1 "$BENCH_ROUNDS"); do
    for k in $("$PY" $HERE/collect.py kv-values "$SWEEPS/base.toml"); do
      local file=$OUT/kv_heads/bench/kv=${k}_round$r.json
      [[ -e $file ]] && continue
      mkdir -p "$OUT/kv_heads/bench"
      "$HEADLAB" bench $("$PY" $HERE/collect.py base-train-args "$SWEEPS/base.toml" 0) --decode --beam 5 --reps 9 \
        --warmup 2 --threads 1 --set model.n_kv_heads=$k --set model.enc_n_kv_heads=$k \
        --set model.cross_n_kv_heads=$k --tag "kv=$k" > "$file.tmp"
      mv "$file.tmp" "$file"
    done
  done
}

if [[ $arm == base ]]; then base_models; else "$arm"; fi
wall=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
kill $sampler 2>/dev/null || true
"$PY" $HERE/collect.py "$arm" "$OUT" "$DATA" --sweeps "$SWEEPS" --binary "$HEADLAB" --started "$started_utc" \
  --wall-seconds "$wall" --load "$OUT/load_$arm.txt" --seeds "$SEEDS" --rates "$RATES" \
  --heads "$RATE_CHECK_HEADS"
"$PY" $HERE/make_results.py --data "$DATA"
