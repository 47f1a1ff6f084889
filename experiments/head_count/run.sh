#!/usr/bin/env bash
# Regenerates experiments/head_count/RESULTS.md: trains every sweep (3 seeds per point, two
# 1-thread runs at a time), plots them, and fills the tables. About an hour on 2 idle cores.
# Finished runs are skipped, so an interrupted regeneration continues where it stopped.
#   experiments/head_count/run.sh                 # from the repository root, after building
#   HEADLAB=build/headlab OUT=runs/head_count experiments/head_count/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/head_count}
SWEEPS=${SWEEPS:-"k_relation_2 k_relation_3 induction grammar grammar_fixed_d_head grammar_kv_heads text text_fixed_d_head text_kv_heads"}
for sweep in $SWEEPS; do
  "$HEADLAB" sweep "experiments/head_count/$sweep.toml" --jobs 2 --out "$OUT/$sweep"
  "$HEADLAB" plot "$OUT/$sweep" >/dev/null
done
/usr/bin/python3 experiments/head_count/make_results.py "$OUT"
