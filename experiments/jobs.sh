# Job helpers shared by experiments/*/run.sh (source it; each function is exported so that
# `xargs -P N -L 1 bash -c 'run_job "$@"' _` can run job lines in parallel):
#   run_job DIR MARKER COMMAND ARGS...  runs COMMAND unless DIR/MARKER exists; its output goes to
#       DIR/log.txt, its wall time to DIR/seconds.txt. A failed job is reported and the others
#       carry on (xargs then exits 123), so an interrupted regeneration continues where it stopped.
#   train_job DIR COMMAND...  a training run in DIR that resumes where an interrupted one stopped
#       and marks DIR/done.
#   eval_job FILE COMMAND...  COMMAND's output into FILE, written only when it succeeds.
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
train_job() { local dir=$1; shift; "$@" --out "$dir" --resume auto && touch "$dir/done"; }
eval_job() { local file=$1; shift; "$@" > "$file.tmp" && mv "$file.tmp" "$file"; }
export -f run_job train_job eval_job
