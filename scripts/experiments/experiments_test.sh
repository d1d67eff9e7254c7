#!/usr/bin/env bash
# The experiment scripts without running a cluster: their bad arguments are
# refused by name, --dry-run writes configs that the config loader
# (configs/cluster_tasks) accepts, --model and --bn are checked against the
# worker's registry (worker --list_models) and reach every config and
# train_local, and batch_sweep_report.py turns fabricated runs into its
# table, its verdicts and its plots.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tasks=$(pwd)/configs/cluster_tasks
bin=$(pwd)  # worker/worker and configs/cluster_tasks, as a --bin_dir
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/experiments_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A copy of the scripts: they cd to their repository's root.
mkdir -p "$tmp/repo/scripts/experiments" "$tmp/repo/scripts/run" "$tmp/repo/scripts/lib" \
  "$tmp/repo/python/psgd"
cp "$src"/scripts/run/compare.py "$tmp/repo/scripts/run/"
cp "$src"/scripts/lib/{runs.py,cluster.sh,free_ports.py} "$tmp/repo/scripts/lib/"
# compare.py and runs.py run the psgd package's code from its sources.
cp "$src"/python/psgd/{compare.py,runs.py} "$tmp/repo/python/psgd/"
cp "$src"/scripts/experiments/{lib.sh,staleness.sh,batch_sweep.sh,batch_sweep_report.py} \
  "$src"/scripts/experiments/{stragglers.sh,stragglers_report.py,step_time_model.py,elastic.sh} \
  "$src"/scripts/experiments/{gpu_times.sh,gpu_times_report.py,netns_sync_cluster.sh} \
  "$src"/scripts/experiments/time_to_accuracy.sh \
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
fails "--steps=0 is not a positive integer" bash "$repo/scripts/experiments/elastic.sh" --steps=0
fails "--steps must be >= 40" bash "$repo/scripts/experiments/elastic.sh" --steps=20
fails "--repeats=0 is not a positive integer" bash "$repo/scripts/experiments/elastic.sh" --repeats=0
fails "--churn=x is not a count" bash "$repo/scripts/experiments/elastic.sh" --churn=x
fails "unknown argument '--bogus'" bash "$repo/scripts/experiments/elastic.sh" --bogus
fails "no CIFAR-10 in '$tmp/none'" bash "$repo/scripts/experiments/elastic.sh" --data_dir="$tmp/none"
for script in staleness.sh batch_sweep.sh; do
  run=(bash "$repo/scripts/experiments/$script" --dry-run --data_dir="$tmp/data" --out="$tmp/bad")
  fails "--model=resnet21: unknown model (known: cifar10_tutorial, cifar10_linear, resnet20, " \
    "${run[@]}" --bin_dir="$bin" --model=resnet21
  fails "--bn=MAYBE is neither SERVER nor LOCAL" "${run[@]}" --bin_dir="$bin" --model=resnet20 --bn=MAYBE
  fails "--bn=LOCAL: model cifar10_tutorial has no batch norm" "${run[@]}" --bin_dir="$bin" --bn=LOCAL
  # Without a worker binary (none in the copy, no --bin_dir) a model cannot
  # be checked; the default model needs no check (the dry runs below).
  fails "cannot check --model=resnet20: no worker binary" "${run[@]}" --model=resnet20
done

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
# (`! cmd` never stops a `set -e` script: the check needs its own exit.)
if grep -q "schedule" "$tmp/bs/w4-b1024-plain.pbtxt"; then
  echo "FAIL: the plain batch sweep config has a schedule"; exit 1
fi
grep -q '^model { name: "cifar10_tutorial" }$' "$tmp/st/sync.pbtxt"
grep -q '^model { name: "cifar10_tutorial" }$' "$tmp/bs/w1-b128-plain.pbtxt"
grep -qx "model cifar10_tutorial" "$tmp/bs/sweep.txt"

# Another model: every config names it (and --bn where given) and loads.
bash "$repo/scripts/experiments/staleness.sh" --dry-run --data_dir="$tmp/data" --out="$tmp/st-resnet" \
  --bin_dir="$bin" --model=resnet20 --only=sync,async-ssp0 >/dev/null
bash "$repo/scripts/experiments/batch_sweep.sh" --dry-run --data_dir="$tmp/data" --out="$tmp/bs-cnn" \
  --bin_dir="$bin" --model=cnn10 --bn=LOCAL --batches=128,256 --workers=1,2 >/dev/null
m=0
for cfg in "$tmp"/st-resnet/*.pbtxt "$tmp"/bs-cnn/*.pbtxt; do
  "$tasks" --config="$cfg" >/dev/null || { echo "FAIL: $cfg does not load"; cat "$cfg"; exit 1; }
  case "$cfg" in
    */st-resnet/*) want='model { name: "resnet20" }' ;;
    *) want='model { name: "cnn10" batch_norm_statistics: LOCAL }' ;;
  esac
  grep -qxF "$want" "$cfg" || { echo "FAIL: $cfg has no line '$want'"; cat "$cfg"; exit 1; }
  m=$((m + 1))
done
[ "$m" -eq $((2 + 2 * 2 * 2)) ] || { echo "FAIL: $m configs of other models, expected 10"; exit 1; }
grep -qx "model cnn10" "$tmp/bs-cnn/sweep.txt"
# A second call into the same --out with another model would mix the sweeps.
fails "holds a sweep of model cnn10, not resnet20 (give another --out)" \
  bash "$repo/scripts/experiments/batch_sweep.sh" --dry-run --data_dir="$tmp/data" --out="$tmp/bs-cnn" \
  --bin_dir="$bin" --model=resnet20
# train_local (the one-process runs) gets the model too: a stand-in that
# prints its arguments and fails stops the sweep at its first run.
mkdir -p "$tmp/stub/worker"
ln -s "$bin/worker/worker" "$tmp/stub/worker/worker"
printf '#!/bin/sh\necho "train_local $*"\nexit 3\n' > "$tmp/stub/worker/train_local"
chmod +x "$tmp/stub/worker/train_local"
fails "train_local --model=cnn10 " bash "$repo/scripts/experiments/batch_sweep.sh" \
  --data_dir="$tmp/data" --out="$tmp/bs-local" --bin_dir="$tmp/stub" --model=cnn10 --batches=128 --workers=1

# Time to accuracy: bad arguments, and each config of every seed, M and
# mode loads with its mode, workers, batch and seed.
ta=(bash "$repo/scripts/experiments/time_to_accuracy.sh" --dry-run --bin_dir="$bin" --data_dir="$tmp/data")
fails "--workers=2,x is not a list of positive counts" "${ta[@]}" --workers=2,x
fails "--modes=sync,ssp: each must be sync or async" "${ta[@]}" --modes=sync,ssp
fails "--stop_at=1.5 is not in (0, 1]" "${ta[@]}" --stop_at=1.5
fails "--seeds=0 is not a list of positive integers" "${ta[@]}" --seeds=0
fails "--eval_every=0 is not a positive integer" "${ta[@]}" --eval_every=0
fails "unknown argument '--bogus'" "${ta[@]}" --bogus
fails "--calibration_seconds=-1 is not a count of seconds" "${ta[@]}" --calibration_seconds=-1
"${ta[@]}" --out="$tmp/ta" >/dev/null
t=0
for cfg in "$tmp"/ta/*.pbtxt; do
  "$tasks" --config="$cfg" >/dev/null || { echo "FAIL: $cfg does not load"; cat "$cfg"; exit 1; }
  t=$((t + 1))
done
[ "$t" -eq 9 ] || { echo "FAIL: $t time-to-accuracy configs, expected 8 and the calibration"; exit 1; }
grep -q "mode: SYNC batch_size: 64 .* eval_every: 1000000 seed: 99" "$tmp/ta/calibration.pbtxt"
[ "$(grep -c '^worker ' "$tmp/ta/calibration.pbtxt")" -eq "$(nproc)" ]
[ "$(grep -c '^worker ' "$tmp/ta/s1-m4-async-seed2.pbtxt")" -eq 4 ]
grep -q "mode: ASYNC batch_size: 64 .* seed: 2" "$tmp/ta/s1-m4-async-seed2.pbtxt"
grep -q "mode: SYNC batch_size: 64 .* seed: 1" "$tmp/ta/s1-m2-sync-seed1.pbtxt"
grep -q '^model { name: "resnet20" }$' "$tmp/ta/s1-m2-sync-seed1.pbtxt"

# The straggler study: bad arguments, and every config it would run (the
# emulated settings with their stragglers, adaptive N and SSP; --real's)
# loads.
st=(bash "$repo/scripts/experiments/stragglers.sh" --dry-run --bin_dir="$bin")
fails "--stall_p=1.5 is not a probability in [0, 1]" "${st[@]}" --stall_p=1.5
fails "--slow=0.5 is not a factor >= 1" "${st[@]}" --slow=0.5
fails "--max_backups=4 leaves no worker of 4" "${st[@]}" --workers=4
fails "--workers=8,x: 'x' is not a count >= 2" "${st[@]}" --workers=8,x
fails "--seconds=0 is not a positive number" "${st[@]}" --seconds=0
fails "--only=nothing names no setting" "${st[@]}" --only=nothing
"${st[@]}" --workers=8,16 --out="$tmp/sg" >/dev/null
"${st[@]}" --real --data_dir="$tmp/data" --out="$tmp/sg-real" >/dev/null
k=0
for cfg in "$tmp"/sg/*.pbtxt "$tmp"/sg-real/*.pbtxt; do
  "$tasks" --config="$cfg" >/dev/null || { echo "FAIL: $cfg does not load"; cat "$cfg"; exit 1; }
  k=$((k + 1))
done
[ "$k" -eq $((2 * 8 + 4)) ] || { echo "FAIL: $k straggler configs, expected 20"; exit 1; }
grep -q "replicas_to_aggregate: 12" "$tmp/sg/m16-sync-b4.pbtxt"
grep -q "adaptive_backups" "$tmp/sg/m8-adaptive.pbtxt"
grep -q "staleness_bound: 4" "$tmp/sg/m8-async-ssp.pbtxt"
grep -q "stragglers { workers: 0 slow_factor: 3 }" "$tmp/sg-real/real-sync-b1.pbtxt"
/usr/bin/python3 "$src/scripts/experiments/step_time_model_test.py"
/usr/bin/python3 "$src/scripts/experiments/stragglers_report_test.py" "$repo/scripts/experiments/stragglers_report.py"

# The network at GPU step times: bad arguments, and every config of both
# findings loads, with the data plane, the link's emulated compute and
# one node's shared memory where they belong.
gt=(bash "$repo/scripts/experiments/gpu_times.sh" --dry-run)
fails "--finding must be network or batch, not 'speed'" "${gt[@]}" --finding=speed
fails "--planes takes GRPC and UCX, not 'RDMA'" "${gt[@]}" --finding=batch --planes=GRPC,RDMA
fails "batch '130' of --batches is not a multiple of --workers (4)" "${gt[@]}" --finding=batch --batches=128,130
fails "--step_ms must be a number >= 0, not '-1'" "${gt[@]}" --finding=batch --step_ms=-1
fails "--seconds must be a whole number >= 1, not '0'" "${gt[@]}" --finding=batch --seconds=0
fails "no CIFAR-10 in '$tmp/none'" "${gt[@]}" --finding=network --data_dir="$tmp/none"
"${gt[@]}" --finding=network --data_dir="$tmp/data" --out="$tmp/gt-net" >/dev/null
"${gt[@]}" --finding=batch --batches=128,2048 --out="$tmp/gt-batch" >/dev/null
k=0
for cfg in "$tmp"/gt-net/*.pbtxt "$tmp"/gt-batch/*.pbtxt; do
  "$tasks" --config="$cfg" >/dev/null || { echo "FAIL: $cfg does not load"; cat "$cfg"; exit 1; }
  k=$((k + 1))
done
# network: 2 planes x 3 links x (emulated, real); batch: 2 batches x (one
# node + 2 planes x 2 links); the first uncapped real run twice.
[ "$k" -eq $((13 + 10)) ] || { echo "FAIL: $k configs of gpu_times.sh, expected 23"; exit 1; }
grep -q 'data_plane: UCX' "$tmp/gt-net/real-UCX-1gbit.pbtxt"
grep -q 'data_plane: GRPC' "$tmp/gt-net/emulated-GRPC-10gbit.pbtxt"
# t(512) = 3 ms + 512 x 8 us; one node computes the whole batch of 2048.
grep -q 'shift_seconds: 0.007096' "$tmp/gt-batch/dist-UCX-1gbit-2048.pbtxt"
grep -q 'batch_size: 512' "$tmp/gt-batch/dist-UCX-1gbit-2048.pbtxt"
grep -q 'shift_seconds: 0.019384' "$tmp/gt-batch/one-node-2048.pbtxt"
grep -q 'shared_memory: true' "$tmp/gt-batch/one-node-2048.pbtxt"
[ "$(grep -c '^worker ' "$tmp/gt-batch/one-node-2048.pbtxt")" -eq 1 ]
/usr/bin/python3 "$src/scripts/experiments/gpu_times_report_test.py" "$repo/scripts/experiments/gpu_times_report.py"

/usr/bin/python3 "$src/scripts/experiments/batch_sweep_report_test.py" "$repo/scripts/experiments/batch_sweep_report.py"
echo "experiments_test: ok ($n configs, $m of other models)"
