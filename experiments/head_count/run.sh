#!/usr/bin/env bash
# Regenerates experiments/head_count/data/ (every run's final metrics, validation curves, config
# facts and test-split scores, plus provenance) and from it RESULTS.md and figures/. From the
# repository root, after building:
#   experiments/head_count/run.sh
#   HEADLAB=/path/to/headlab OUT=runs/head_count JOBS=2 experiments/head_count/run.sh
# Every run is one thread, JOBS at a time (default 2); runs are bit-identical for a given seed
# whatever the load. Finished runs and test evaluations are skipped, so an interrupted
# regeneration continues where it stopped (each invocation adds its wall and CPU time to
# OUT/regeneration.csv, interrupted or not). Steps:
#   1. the sweeps at the original budgets that step 2 compares with (FIRST);
#   2. capacity or learnability: k_relation_3_long_lr and text_long_lr (3x the budget, three
#      learning rates, seed 0), then make_results.py seeds-sweeps writes one sweep per head count
#      at the rate that seed 0 did best with on val, and those train seeds 1-5;
#   2b. the other sweeps and the two extra cases (REST);
#   3. headlab eval --split test of every run's final checkpoint (RUN/test.txt);
#   4. make_results.py collect OUT: OUT -> experiments/head_count/data/ (with this script's wall
#      and CPU time), then make_results.py: data/ -> RESULTS.md and figures/.
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/head_count}
JOBS=${JOBS:-2}
PY=${PY:-/usr/bin/python3}
HERE=experiments/head_count
LONG=${LONG:-"k_relation_3_long text_long"}
FIRST=${FIRST:-"k_relation_2 k_relation_3 text"}
REST=${REST:-"induction grammar k_relation_3_two_layers k_relation_3_p6 grammar_fixed_d_head grammar_kv_heads text_fixed_d_head text_kv_heads"}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
mkdir -p "$OUT"
start=$(date +%s)
started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# The load average once a minute while this runs (what else shared the cores).
( while sleep 60; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; done >> "$OUT/load.txt" ) &
sampler=$!
record_time() {  # started, wall s, CPU user s, CPU sys s of the runs waited for, jobs, cores, how it ended
  times > "$OUT/times.txt"  # in this shell (not a subshell): line 2 is the CPU time of its children
  local cpu
  cpu=$(tr 'ms' '  ' < "$OUT/times.txt" | awk 'NR == 2 {print $1 * 60 + $2 "," $3 * 60 + $4}')
  echo "$started_utc,$(($(date +%s) - start)),$cpu,$JOBS,$(getconf _NPROCESSORS_ONLN),$1" >> "$OUT/regeneration.csv"
}
trap 'kill $sampler 2>/dev/null || true; [[ -n ${done_runs:-} ]] || record_time interrupted' EXIT

sweep() { "$HEADLAB" sweep "$1" --jobs "$JOBS" --out "$2"; }

for s in $FIRST; do sweep "$HERE/$s.toml" "$OUT/$s"; done
for study in $LONG; do
  sweep "$HERE/${study}_lr.toml" "$OUT/${study}_lr"
  for f in $("$PY" $HERE/make_results.py seeds-sweeps "$HERE/${study}_lr.toml" "$OUT/${study}_lr" "$OUT/${study}_seeds"); do
    sweep "$f" "${f%.toml}"
  done
done
for s in $REST; do sweep "$HERE/$s.toml" "$OUT/$s"; done

"$PY" $HERE/make_results.py eval-jobs "$HEADLAB" "$OUT" | xargs -d '\n' -r -P "$JOBS" -n 1 bash -c

record_time finished
done_runs=1
"$PY" $HERE/make_results.py collect "$OUT" --binary "$HEADLAB"
"$PY" $HERE/make_results.py
