#!/bin/bash
# Runs the whole fault matrix (tests/fault_matrix.py: 24 cells, the three
# faults) N times in a row, optionally with busy loops that load every core,
# and prints one line per run and fault with the load average: what a
# change to the matrix or to what it tests goes through before it lands
# (docs/RELIABILITY.md, "The fault matrix"). Not part of bazel test.
#
#   tests/fault_matrix_repeat.sh [--runs=5] [--load=N]
#
# --load=N starts N `yes` processes for the whole time (the machine's
# cores are then shared with them). Builds the matrix's binaries first and
# runs a copy of them, so that a build during the runs does not change
# them. Exits 1 when any cell failed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5
load=0
for arg in "$@"; do
  case "$arg" in
    --runs=*) runs=${arg#--runs=} ;;
    --load=*) load=${arg#--load=} ;;
    *) echo "fault_matrix_repeat.sh: unknown argument '$arg' (expected --runs=N, --load=N)" >&2; exit 2 ;;
  esac
done
case "$runs$load" in
  *[!0-9]*) echo "fault_matrix_repeat.sh: --runs and --load take whole numbers" >&2; exit 2 ;;
esac
bazel build //tests:fault_matrix_all_test >/dev/null 2>&1 || {
  echo "fault_matrix_repeat.sh: bazel build //tests:fault_matrix_all_test failed" >&2
  exit 1
}
copy=$(mktemp -d /tmp/fault_matrix_repeat.XXXXXX)
hogs=()
cleanup() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$copy"
}
trap cleanup EXIT
cp -rL bazel-bin/tests/fault_matrix_all_test.runfiles "$copy/runfiles"
for ((i = 0; i < load; i++)); do
  yes >/dev/null &
  hogs+=($!)
done
echo "fault matrix x $runs, $load busy loops, $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), from $(git rev-parse --short HEAD), $(date -u +%FT%TZ)"
failures=0
for ((run = 1; run <= runs; run++)); do
  for fault in ps worker all; do
    start=$(date +%s)
    log="$copy/run$run-$fault.log"
    if TEST_SRCDIR="$copy/runfiles" /usr/bin/python3 tests/fault_matrix.py --fault="$fault" >"$log" 2>&1; then
      verdict=PASS
    else
      verdict=FAIL
      failures=$((failures + 1))
      cp "$log" "/tmp/fault_matrix_repeat-run$run-$fault.log"
    fi
    cells=$(grep -c '^PASS\|^FAIL' "$log" || true)
    passed=$(grep -c '^PASS' "$log" || true)
    echo "run $run fault $fault: $verdict ($passed of $cells cells) in $(($(date +%s) - start)) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    [ "$verdict" = PASS ] || echo "  its log: /tmp/fault_matrix_repeat-run$run-$fault.log"
  done
done
echo "fault matrix x $runs: $failures failed fault runs"
[ "$failures" -eq 0 ]
