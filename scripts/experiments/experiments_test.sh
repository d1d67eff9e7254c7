#!/usr/bin/env bash
# The experiment scripts without running a cluster: their bad arguments are
# refused by name, --dry-run writes configs that the config loader
# (configs/cluster_tasks) accepts, and batch_sweep_report.py turns fabricated
# runs into its table, its verdicts and its plots.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tasks=$(pwd)/configs/cluster_tasks
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/experiments_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A copy of the scripts: they cd to their repository's root.
mkdir -p "$tmp/repo/scripts/experiments" "$tmp/repo/scripts/run" "$tmp/repo/scripts/lib"
cp "$src"/scripts/run/compare.py "$tmp/repo/scripts/run/"
cp "$src"/scripts/lib/{runs.py,cluster.sh} "$tmp/repo/scripts/lib/"
cp "$src"/scripts/experiments/{lib.sh,staleness.sh,batch_sweep.sh,batch_sweep_report.py} \
  "$tmp/repo/scripts/experiments/"
repo=$tmp/repo
mkdir -p "$tmp/data"
: > "$tmp/data/data_batch_1.bin"; : > "$tmp/data/test_batch.bin"

fails() {  # fails EXPECTED_MESSAGE COMMAND...
  local want=$1; shift
  if out=$("$@" 2>&1); then echo "FAIL: '$*' succeeded"; exit 1; fi
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: '$*' said: $out (wanted: $want)"; exit 1; }
}
fails "--minutes=0 is not a positive number" bash "$repo/scripts/experiments/staleness.sh" --minutes=0
fails "unknown setting 'async-x' in --only" bash "$repo/scripts/experiments/staleness.sh" --only=sync,async-x
fails "unknown argument '--bogus'" bash "$repo/scripts/experiments/staleness.sh" --bogus
fails "no CIFAR-10 binary files in '$tmp/none'" bash "$repo/scripts/experiments/staleness.sh" --data_dir="$tmp/none"
fails "global batch 130 does not divide among 4 workers" bash "$repo/scripts/experiments/batch_sweep.sh" --batches=128,130
fails "--scaling: 'maybe' is neither on nor off" bash "$repo/scripts/experiments/batch_sweep.sh" --scaling=maybe
fails "--epochs=0 is not a positive count" bash "$repo/scripts/experiments/batch_sweep.sh" --epochs=0

# Every config the scripts would run loads.
bash "$repo/scripts/experiments/staleness.sh" --dry-run --data_dir="$tmp/data" --out="$tmp/st" >/dev/null
bash "$repo/scripts/experiments/batch_sweep.sh" --dry-run --data_dir="$tmp/data" --out="$tmp/bs" >/dev/null
n=0
for cfg in "$tmp"/st/*.pbtxt "$tmp"/bs/*.pbtxt; do
  "$tasks" --config="$cfg" >/dev/null || { echo "FAIL: $cfg does not load"; cat "$cfg"; exit 1; }
  n=$((n + 1))
done
[ "$n" -eq $((10 + 5 * 3 * 2)) ] || { echo "FAIL: $n configs, expected 40"; exit 1; }
grep -q "mode: SYNC" "$tmp/st/sync.pbtxt"
grep -q "staleness_bound: 1" "$tmp/st/async-ssp1.pbtxt"
grep -q "learning_rate: 0.00025" "$tmp/st/async-ssp0-quarter.pbtxt"
grep -q "learning_rate: 0.001 " "$tmp/st/async.pbtxt"
grep -q "batch_size: 256" "$tmp/bs/w4-b1024-scaled.pbtxt"
grep -q "base_batch_size: 128" "$tmp/bs/w4-b1024-scaled.pbtxt"
! grep -q "schedule" "$tmp/bs/w4-b1024-plain.pbtxt"

/usr/bin/python3 "$src/scripts/experiments/batch_sweep_report_test.py" "$repo/scripts/experiments/batch_sweep_report.py"
echo "experiments_test: ok ($n configs)"
