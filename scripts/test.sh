#!/usr/bin/env bash
# The project's test command (README): installs what is missing, runs
# `bazel test //...` and ends with one line `N passed, M failed, K skipped`
# counting test targets. Skipped: targets Bazel skips (incompatible with
# this machine) and tests that cannot run here and say so: such a test
# prints a line that starts with "SKIP: " (the reason follows) and exits 0,
# which Bazel counts as passed; this script reads each passed test's log
# (bazel-testlogs/<package>/<name>/test.log) and counts it skipped, not
# passed. Tests tagged `gpu` run only when a GPU is visible (.bazelrc
# filters them out; this script adds --config=gpu where nvidia-smi lists a
# GPU); the CUDA targets are built whenever the toolkit is present. The
# counting is scripts/lib/test_count.sh's. Extra arguments go to bazel, e.g.
#   scripts/test.sh --config=asan
#   scripts/test.sh //ps/...
set -uo pipefail
cd "$(dirname "$0")/.."

if ! bash scripts/setup.sh; then
  echo "scripts/setup.sh failed"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

targets=()
flags=()
for a in "$@"; do
  case "$a" in
    -*) flags+=("$a") ;;
    *) targets+=("$a") ;;
  esac
done
[ ${#targets[@]} -eq 0 ] && targets=("//...")

# .bazelrc leaves tests tagged gpu out of `bazel test`; --config=gpu puts
# them back, which this script adds where nvidia-smi lists a GPU.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "test.sh: GPU visible: running tests tagged gpu too (--config=gpu)"
  gpu_filter=(--config=gpu)
else
  echo "test.sh: no GPU visible: tests tagged gpu are built but not run"
  gpu_filter=()
fi
# A --config=asan/tsan sets its own tag filters (without gpu); an explicit
# filter or config wins.
for f in "${flags[@]+"${flags[@]}"}"; do
  case "$f" in --config=asan|--config=tsan|--config=gpu|--test_tag_filters=*) gpu_filter=() ;; esac
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test --keep_going --test_summary=short "${gpu_filter[@]+"${gpu_filter[@]}"}" \
  "${flags[@]+"${flags[@]}"}" -- "${targets[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

testlogs=bazel-testlogs
if [ ! -d "$testlogs" ]; then
  testlogs=$(bazel info "${flags[@]+"${flags[@]}"}" bazel-testlogs 2>/dev/null || true)
fi
source scripts/lib/test_count.sh
count_tests "$log" "$testlogs" "$rc"
