#!/usr/bin/env bash
# Regenerates experiments/translation/ (issue 30: Michel, Voita and Vaswani on translation) one
# arm at a time, so that arms run one after another across sessions. From the repository root,
# after building, on a clean checkout (every arm's data names the commit it came from) and a quiet
# machine (the wall time of each arm is recorded):
#   experiments/translation/run.sh base          # the base models: 5 seeds, every checkpoint kept
#   python3 experiments/translation/make_results.py        # RESULTS.md from data/ alone
#   OUT=runs/translation JOBS=2 experiments/translation/run.sh base
# Arms:
#   base   headlab sweep base.toml (5 seeds); each final checkpoint on test by beam 5 (BLEU, chrF);
#          collect.py base -> data/base/
# (the head-count, Michel, Voita, alignment and MQA/GQA arms are not written yet: issue 30.)
# A finished step is skipped (the sweep skips finished runs, an evaluation its output file), so
# an arm interrupted by a kill continues where it stopped; each arm's data/<arm>/provenance.csv
# records the commit, the machine and this script's wall time for the arm.
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/translation}
JOBS=${JOBS:-2}
PY=${PY:-/usr/bin/python3}
HERE=experiments/translation
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
arm=${1:-}
case $arm in
  base) ;;
  *) echo "run.sh: unknown arm '${arm}' (arms: base)" >&2; exit 2 ;;
esac
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

base_models() {  # the base sweep, then each seed's final checkpoint on test, two at a time
  "$HEADLAB" sweep "$HERE/base.toml" --jobs "$JOBS" --out "$OUT/base"
  for run in "$OUT"/base/train.seed=*/; do
    final=$(ls "$run"checkpoints/step_*.h5 | sort | tail -n 1)
    echo "${run}test_beam5.json $final --split test --beam 5 --set train.threads=1"
  done | xargs -P "$JOBS" -L 1 bash -c 'eval_json "$@"' _
}

case $arm in
  base) base_models ;;
esac
wall=$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
kill $sampler 2>/dev/null || true
"$PY" $HERE/collect.py "$arm" "$OUT" "$HERE/data" --binary "$HEADLAB" --started "$started_utc" \
  --wall-seconds "$wall" --load "$OUT/load_$arm.txt"
"$PY" $HERE/make_results.py
