#!/usr/bin/env bash
# Regenerates experiments/circuits/ (issue 31): the induction phase change in the head detectors.
# Trains configs/induction.toml with 5 seeds, a checkpoint every 20 steps (induction.toml), runs
# `headlab circuits --detectors --composition` over every checkpoint of each run, copies the
# compact outputs into data/seed<N>/ and renders RESULTS.md and figures/. From the repository
# root, after building, on a clean checkout (the data name the commit it came from):
#   experiments/circuits/run.sh
#   OUT=/tmp/c DATA=/tmp/c/data experiments/circuits/run.sh    # elsewhere (RESULTS.md still here)
#   /usr/bin/python3 experiments/circuits/make_results.py     # RESULTS.md and figures from data/
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/circuits}
DATA=${DATA:-experiments/circuits/data}
PY=${PY:-/usr/bin/python3}
JOBS=${JOBS:-2}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "run.sh: the checkout has uncommitted changes; the data must come from one clean commit" >&2
  exit 2
fi
commit=$(git rev-parse HEAD)
started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
started=$EPOCHREALTIME
mkdir -p "$OUT"
# The 1-minute load average every 10 s (what else shared the cores: the wall time is no benchmark
# unless it stays near the run's own 2).
( while sleep 10; do cut -d' ' -f1 /proc/loadavg; done > "$OUT/load.txt" ) &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT
"$HEADLAB" sweep experiments/circuits/induction.toml --jobs "$JOBS" --out "$OUT/induction"
rm -rf "$DATA.tmp"
mkdir -p "$DATA.tmp"
for run in "$OUT"/induction/train.seed=*; do
  seed=${run##*train.seed=}
  "$HEADLAB" circuits "$run" --detectors --composition --out "$OUT/seed$seed" > "$OUT/seed$seed.log"
  mkdir -p "$DATA.tmp/seed$seed"
  cp "$OUT/seed$seed"/{detectors.csv,composition.csv,ov_copying.csv} "$run/metrics.csv" "$DATA.tmp/seed$seed/"
done
max_load=$(awk '{ if ($1 > m) m = $1 } END { print m + 0 }' "$OUT/load.txt")
{
  echo "commit,started_utc,wall_s,cores,max_load_1min"
  echo "$commit,$started_utc,$(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $started }"),$(getconf _NPROCESSORS_ONLN),$max_load"
} > "$DATA.tmp/provenance.csv"
rm -rf "$DATA"
mv "$DATA.tmp" "$DATA"
DATA=$DATA "$PY" experiments/circuits/make_results.py
