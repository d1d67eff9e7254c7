#!/usr/bin/env bash
# run_gpu_tests.sh [--timeout S] [--deadline T] [--logs DIR] [-- CATCH2 ARGS...]:
# runs every test of the bundle (bin/*_test) through run.sh, each under its
# own timeout (default 240 s; a hang costs that, not the whole device call),
# cut to what is left before T (seconds since the epoch) if given; a test
# with less than 10 s left is not started and counts as failed. Prints each
# result with its time, the last 60 lines of a failing test, and ends with
# `N passed, M failed (names)`. Each test's whole output goes to
# DIR/<test>.log (default: the bundle folder). Arguments after -- go to
# every test (Catch2's, e.g. -s for all assertions).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
limit=240
deadline=""
logs="$here"
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout|--deadline|--logs)
      [ $# -ge 2 ] || { echo "run_gpu_tests.sh: $1 needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    --timeout) limit="$2"; shift 2 ;;
    --deadline) deadline="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    --) shift; break ;;
    *) echo "run_gpu_tests.sh: unknown argument $1 (run_gpu_tests.sh --help)" >&2; exit 2 ;;
  esac
done
case "$limit" in ''|*[!0-9]*) echo "run_gpu_tests.sh: --timeout wants seconds, not '$limit'" >&2; exit 2 ;; esac
case "$deadline" in *[!0-9]*) echo "run_gpu_tests.sh: --deadline wants seconds since the epoch, not '$deadline'" >&2; exit 2 ;; esac
mkdir -p "$logs" || exit 2
passed=0; failed=0; failing=()
for t in "$here"/bin/*_test; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  start=$(date +%s)
  this=$limit
  if [ -n "$deadline" ] && [ $(( deadline - start )) -lt "$this" ]; then
    this=$(( deadline - start ))
    if [ "$this" -lt 10 ]; then
      failed=$((failed + 1)); failing+=("$name")
      echo "FAILED $name (not started: the deadline is $this s away)"
      continue
    fi
  fi
  (cd "$here" && timeout -k 10 "$this" "$here/run.sh" "$t" "$@") > "$logs/$name.log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1)); echo "PASSED $name ($took s)"
  else
    failed=$((failed + 1)); failing+=("$name")
    case "$rc" in
      124|137) echo "FAILED $name (timed out after $this s)" ;;
      *) echo "FAILED $name (exit $rc, $took s)" ;;
    esac
    tail -60 "$logs/$name.log" | sed 's/^/    /'
  fi
done
echo "$passed passed, $failed failed${failing:+ (${failing[*]})}"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
