#!/usr/bin/env bash
# Regenerates experiments/translate_config/data/: the shipped configs/translate.toml trained once
# on this machine's cores (timed), its test and val scores (greedy and beam 5), and the two
# baselines on the same sentences; then make_results.py renders RESULTS.md. From the repository
# root, after building, on a quiet machine (nothing else building, testing or training: the
# train wall time is the result) and a clean checkout (the data name the commit):
#   experiments/translate_config/run.sh
#   HEADLAB=/path/to/headlab OUT=runs/translate_config experiments/translate_config/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/translate_config}
PY=${PY:-/usr/bin/python3}
DATA=experiments/translate_config/data
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "run.sh: the checkout has uncommitted changes; the data must come from one clean commit" >&2
  exit 2
fi
commit=$(git rev-parse HEAD)
rm -rf "$OUT"
mkdir -p "$OUT" "$DATA"
# The load average every 10 s while training runs (what else shared the cores).
( while sleep 10; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; done >> "$OUT/load.txt" ) &
sampler=$!
started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
start=$(date +%s.%N)
"$HEADLAB" train configs/translate.toml --out "$OUT/run"
end=$(date +%s.%N)
kill "$sampler"
score() {  # NAME ARGS...: one eval --json line into data/NAME.json
  local name=$1
  shift
  "$HEADLAB" eval "$OUT/run" --json "$@" > "$DATA/$name.json.tmp"
  mv "$DATA/$name.json.tmp" "$DATA/$name.json"
}
score test_greedy --split test --hypotheses "$DATA/test_greedy.hyp"
score test_beam5 --split test --beam 5
score val_greedy --split val
score test_copy --split test --baseline copy
score test_strongs --split test --baseline strongs --hypotheses "$DATA/test_strongs.hyp"
# Every cross-attention head as a word aligner against the Strong's gold of the test verses,
# beside the diagonal and IBM Model 1 (issue 28 item 4; not timed).
"$HEADLAB" analyze "$OUT/run" --alignment-only --split test > /dev/null
cp "$OUT/run/alignment.csv" "$DATA/alignment_test.csv"
cp "$OUT/run/metrics.csv" "$DATA/metrics.csv"
max_load=$(awk '{ if ($2 > m) m = $2 } END { print m + 0 }' "$OUT/load.txt")
{
  echo "commit,started_utc,train_wall_s,cores,max_load_1min"
  echo "$commit,$started_utc,$(awk "BEGIN { printf \"%.1f\", $end - $start }"),$(getconf _NPROCESSORS_ONLN),$max_load"
} > "$DATA/run.csv"
"$HEADLAB" info "$OUT/run" --json > "$DATA/info.json"
"$PY" experiments/translate_config/make_results.py
