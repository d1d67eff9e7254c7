#!/usr/bin/env bash
# Runs the shard fuzzer (tests/fuzz/shard_fuzz.h): libFuzzer with ASan and
# UBSan, built by clang (`bazel build --config=fuzz`), starting from the seed
# corpus in tests/fuzz/corpus. Usage:
#
#   scripts/bench/fuzz.sh [--runs=N] [--jobs=J] [--max_len=BYTES] [--work_dir=DIR]
#                   [-- LIBFUZZER_FLAGS...]
#
# --runs    inputs in all (default 1000000), split over the jobs
# --jobs    parallel libFuzzer processes (default 1)
# --max_len longest input libFuzzer makes (default 1048576: 1 MiB)
# --work_dir where the growing corpus, the logs and any finding go (default
#           ${TMPDIR:-/tmp}/psgd-fuzz; the corpus there is started afresh
#           from the seeds on every run)
#
# Ends with libFuzzer's summary (inputs, exec/s, coverage) and exits 0, or
# with the finding (the input is saved under WORK_DIR/artifacts; replay it
# with `bazel run //tests/fuzz:shard_fuzzer -- FILE`) and exits 1. Needs
# clang and libclang-rt-14-dev (scripts/setup.sh installs them).
#
# BAZEL: the Bazel command (default `bazel`), e.g.
# BAZEL="bazel --output_base=/tmp/fuzz-ob" to keep off another Bazel
# server's output base.
set -euo pipefail
cd "$(dirname "$0")/../.."
read -r -a bazel <<<"${BAZEL:-bazel}"

runs=1000000
jobs=1
max_len=1048576
work_dir=${TMPDIR:-/tmp}/psgd-fuzz
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs=*) runs=${1#*=} ;;
    --jobs=*) jobs=${1#*=} ;;
    --max_len=*) max_len=${1#*=} ;;
    --work_dir=*) work_dir=${1#*=} ;;
    --) shift; extra=("$@"); break ;;
    *) echo "fuzz.sh: unknown argument '$1' (see the top of $0)" >&2; exit 2 ;;
  esac
  shift
done
for n in "$runs" "$jobs" "$max_len"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: '$n' is not a positive number" >&2; exit 2; }
done

echo "fuzz.sh: building //tests/fuzz:shard_fuzzer with --config=fuzz (clang, ASan, UBSan)"
# gold warns once per ASan symbol it cannot export: noise.
if ! "${bazel[@]}" build --config=fuzz //tests/fuzz:shard_fuzzer 2>&1 |
    grep -v "Cannot export local symbol"; then
  echo "fuzz.sh: build failed" >&2
  exit 1
fi
fuzzer="$("${bazel[@]}" info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz/shard_fuzzer"

rm -rf "$work_dir/corpus"
mkdir -p "$work_dir/corpus" "$work_dir/artifacts"
cp tests/fuzz/corpus/* "$work_dir/corpus/"
per_job=$(( (runs + jobs - 1) / jobs ))
flags=(-runs="$per_job" -max_len="$max_len" -print_final_stats=1
       -artifact_prefix="$work_dir/artifacts/" "${extra[@]+"${extra[@]}"}")
echo "fuzz.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ): $jobs job(s) x $per_job inputs, work dir $work_dir"
start=$(date +%s)
status=0
if [ "$jobs" -eq 1 ]; then
  (cd "$work_dir" && "$fuzzer" "${flags[@]}" corpus) >"$work_dir/fuzz-0.log" 2>&1 || status=$?
else
  # libFuzzer's own job control: each job writes fuzz-J.log in its cwd.
  (cd "$work_dir" && rm -f fuzz-*.log &&
   "$fuzzer" "${flags[@]}" -jobs="$jobs" -workers="$jobs" corpus) >/dev/null 2>&1 || status=$?
fi
seconds=$(( $(date +%s) - start ))

total=0
for log in "$work_dir"/fuzz-*.log; do
  echo "--- $log"
  # -a: the shard's log lines quote fuzzed bytes, which makes grep call
  # the log binary and print nothing.
  grep -aE "^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs|^stat::|^==[0-9]+==ERROR|^SUMMARY|^shard fuzz:|Test unit written" "$log" || true
  done_runs=$(grep -aoE "^Done [0-9]+ runs" "$log" | grep -oE "[0-9]+" || echo 0)
  total=$(( total + done_runs ))
done
echo "fuzz.sh: $total inputs in ${seconds} s with $jobs job(s); corpus $(ls "$work_dir/corpus" | wc -l) inputs"
if [ "$status" -ne 0 ] || ls "$work_dir"/artifacts/* >/dev/null 2>&1; then
  echo "fuzz.sh: FINDING (libFuzzer exit $status); inputs in $work_dir/artifacts:" >&2
  ls -l "$work_dir"/artifacts >&2
  exit 1
fi
echo "fuzz.sh: no finding"
