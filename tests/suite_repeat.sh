#!/bin/bash
# Runs the whole suite (scripts/test.sh: `bazel test //...`, results not
# cached) N times in a row, optionally with busy loops that load every
# core, and prints one line per run: its `N passed, M failed, K skipped`,
# how long it took and the load average. What the suite goes through before
# a change to a test's waits lands (docs/RELIABILITY.md, "Claims and their
# tests"). Not part of bazel test.
#
#   tests/suite_repeat.sh [--runs=5] [--load=N]
#
# --load=N starts N `yes` processes for the whole time. Each run's log is
# kept in the printed directory. Exits 1 when any run had a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5
load=0
for arg in "$@"; do
  case "$arg" in
    --runs=*) runs=${arg#--runs=} ;;
    --load=*) load=${arg#--load=} ;;
    *) echo "suite_repeat.sh: unknown argument '$arg' (expected --runs=N, --load=N)" >&2; exit 2 ;;
  esac
done
case "$runs$load" in
  *[!0-9]*|"") echo "suite_repeat.sh: --runs and --load take whole numbers" >&2; exit 2 ;;
esac
out=$(mktemp -d /tmp/psgd_suite_repeat.XXXXXX)
echo "suite_repeat.sh: $runs runs, load $load, logs in $out"
pids=()
stop_load() { for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_load EXIT
for ((i = 0; i < load; i++)); do yes >/dev/null & pids+=($!); done
failed=0
for ((r = 1; r <= runs; r++)); do
  start=$(date +%s)
  bash scripts/test.sh --nocache_test_results >"$out/run-$r.log" 2>&1 || true
  line=$(tail -1 "$out/run-$r.log")
  took=$(( $(date +%s) - start ))
  echo "run $r: $line in ${took} s; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%H:%M:%S) UTC"
  case "$line" in
    *" passed, 0 failed"*) ;;
    *) failed=1; grep -E "^FAILED:|^  //" "$out/run-$r.log" | head -20 || true ;;
  esac
done
exit "$failed"
