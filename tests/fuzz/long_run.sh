#!/usr/bin/env bash
# The long fuzzing run behind docs/reliability.md's table: each target for SECONDS (default 600)
# of wall time, one at a time, on a working corpus WORK/<target> seeded from the committed corpus
# (tests/fuzz/corpus/<target>, read-only here). A crash ends libFuzzer's process; the input is
# moved to WORK/findings/ and fuzzing goes on for the rest of the target's time. Prints one line
# per target: executions, wall seconds, working corpus size, findings.
#   bash tests/fuzz/long_run.sh build-fuzz /tmp/fuzz-work 600 [targets...]
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-fuzz}; work=${2:-/tmp/headlab-fuzz-work}; seconds=${3:-600}; shift 3 || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_checkpoint fuzz_run_folder fuzz_sweep_file fuzz_config fuzz_text_loader fuzz_bible_pairs fuzz_tokenizer_model)
mkdir -p "$work/findings" "$work/artifacts"
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  start=$(date +%s); execs=0; found=0; segment=0
  while :; do
    left=$(( seconds - ($(date +%s) - start) ))
    [ "$left" -gt 5 ] || break
    segment=$((segment + 1)); log="$work/$t.$segment.log"
    (cd "$work/artifacts" && "$OLDPWD/$build/tests/fuzz/$t" -max_total_time="$left" -timeout=20 -print_final_stats=1 \
       -dict="$OLDPWD/tests/fuzz/$t.dict" "$work/$t" "$OLDPWD/tests/fuzz/corpus/$t") > "$log" 2>&1
    n=$(grep -a "stat::number_of_executed_units" "$log" | awk '{print $2}')
    if [ -z "$n" ]; then n=$(grep -aoE "^#[0-9]+" "$log" | tail -1 | tr -d '#'); fi
    execs=$((execs + ${n:-0}))
    for a in "$work"/artifacts/*; do
      [ -e "$a" ] || continue
      found=$((found + 1)); mv "$a" "$work/findings/$t.$(basename "$a")"
      cp "$log" "$work/findings/$t.$(basename "$a").log"
    done
  done
  wall=$(( $(date +%s) - start ))
  files=$(ls "$work/$t" | wc -l); bytes=$(du -sb "$work/$t" | cut -f1)
  echo "$t execs=$execs wall_s=$wall corpus_files=$files corpus_bytes=$bytes findings=$found segments=$segment"
done
