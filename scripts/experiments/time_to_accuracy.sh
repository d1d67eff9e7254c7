#!/usr/bin/env bash
# Time to accuracy on this machine (docs/EXPERIMENTS.md, "Planning a
# cluster", time to accuracy): clusters of one ps and M CPU workers (real
# compute, one thread each) trained until the chief's evaluation reaches
# --stop_at (or --max_seconds), sync N = M and async, each with several
# seeds. The runs are both the measured times to --target and the curves
# (test accuracy per global step) that scripts/plan/accuracy.py predicts
# from; scripts/plan/accuracy.py's validate command sets one seed's
# prediction, made from the other seeds' curves, against its measurement.
#
#   scripts/experiments/time_to_accuracy.sh [--model=resnet20] [--batch=64]
#        [--workers=2,4] [--modes=sync,async] [--seeds=1,2] [--target=0.6]
#        [--stop_at=0.63] [--max_seconds=480] [--eval_every=50]
#        [--eval_examples=2000] [--lr=0.001]
#        [--data_dir=../shared/cifar10/cifar-10-batches-bin] [--out=DIR]
#        [--calibration_seconds=60] [--calibration_only]
#        [--no-build | --bin_dir=DIR] [--dry-run]
#
# Each run is OUT/s1-mM-MODE-seedK (a run directory as launch.sh writes it);
# a run ends once an evaluation reaches --stop_at (the cluster is sent
# SIGINT, as Ctrl-C does) or at --max_seconds (the config's budget).
# Adam at --lr, batch --batch per worker, CIFAR-10 with augmentation, each
# worker its shard of the training set, evaluations every --eval_every
# global steps on --eval_examples test images.
#
# First a calibration run (OUT/calibration, none of the measured ones):
# one ps and as many workers as this machine has cores, sync, seed 99, no
# evaluations, for --calibration_seconds (0: none); the workers'
# compute_s after their first 10 steps go to OUT/compute_s.txt, a worker's
# compute time per step for scripts/plan/calibrate.py --step_samples;
# --calibration_only stops after it.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/experiments/lib.sh
model=resnet20 bn="" batch=64 workers=2,4 modes=sync,async seeds=1,2 target=0.6
stop_at=0.63 max_seconds=480 eval_every=50 eval_examples=2000 lr=0.001
data_dir=../shared/cifar10/cifar-10-batches-bin out=runs/tta-$(date +%Y%m%d-%H%M%S)
build=1 dry=0 bin_dir="" calibration_seconds=60 calibration_only=0
for arg in "$@"; do
  case "$arg" in
    --model=*) model=${arg#*=} ;;
    --batch=*) batch=${arg#*=} ;;
    --workers=*) workers=${arg#*=} ;;
    --modes=*) modes=${arg#*=} ;;
    --seeds=*) seeds=${arg#*=} ;;
    --target=*) target=${arg#*=} ;;
    --stop_at=*) stop_at=${arg#*=} ;;
    --max_seconds=*) max_seconds=${arg#*=} ;;
    --eval_every=*) eval_every=${arg#*=} ;;
    --eval_examples=*) eval_examples=${arg#*=} ;;
    --lr=*) lr=${arg#*=} ;;
    --calibration_seconds=*) calibration_seconds=${arg#*=} ;;
    --calibration_only) calibration_only=1 ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --no-build) build=0 ;;
    --bin_dir=*) bin_dir=$(cd "${arg#*=}" && pwd); build=0 ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "time_to_accuracy.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "time_to_accuracy.sh: $*" >&2; exit 2; }
[[ "$calibration_seconds" =~ ^[0-9]+$ ]] || die "--calibration_seconds=$calibration_seconds is not a count of seconds"
[ "$calibration_only" = 0 ] || [ "$calibration_seconds" -gt 0 ] || die "--calibration_only with --calibration_seconds=0 runs nothing"
for v in batch max_seconds eval_every eval_examples; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "--$v=${!v} is not a positive integer"
done
[[ "$workers" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--workers=$workers is not a list of positive counts"
[[ "$seeds" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--seeds=$seeds is not a list of positive integers"
[[ "$modes" =~ ^(sync|async)(,(sync|async))*$ ]] || die "--modes=$modes: each must be sync or async"
for v in target stop_at; do
  awk -v x="${!v}" 'BEGIN { exit !(x + 0 == x && x > 0 && x <= 1) }' || die "--$v=${!v} is not in (0, 1]"
done
awk -v x="$lr" 'BEGIN { exit !(x + 0 == x && x > 0) }' || die "--lr=$lr is not a positive number"
data_dir=$(experiment_data_dir "$data_dir")

if [ "$build" = 1 ] && [ "$dry" = 0 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks >&2
fi
experiment_check_model
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=${bin_dir:-bazel-out/k8-opt/bin}

# run_until CONFIG DIR: launch.sh of CONFIG into DIR, sent SIGINT once the
# chief's metrics have an evaluation at or above $stop_at.
run_until() {
  local cfg=$1 dir=$2 pid
  mkdir -p "$dir"
  echo "before $(cut -d' ' -f1-3 /proc/loadavg)" > "$dir.load.txt"
  bash scripts/run/launch.sh --no-build ${bin_dir:+--bin_dir="$bin_dir"} --run_dir="$dir" "$cfg" \
    > "$dir.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    if [ -f "$dir/worker-0.jsonl" ] && awk -v s="$stop_at" '
        /"kind":"eval"/ { if (match($0, /"test_accuracy":[0-9.eE+-]+/)) {
          if (substr($0, RSTART + 16, RLENGTH - 16) + 0 >= s) found = 1 } }
        END { exit !found }' "$dir/worker-0.jsonl"; then
      echo "time_to_accuracy.sh: $(basename "$dir") reached $stop_at: stopping it"
      kill -INT "$pid" 2>/dev/null || true
      break
    fi
  done
  local rc=0
  wait "$pid" || rc=$?
  echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir.load.txt"
  # 130: the SIGINT above.
  if [ "$rc" != 0 ] && [ "$rc" != 130 ]; then
    tail -30 "$dir.log" >&2
    echo "time_to_accuracy.sh: the run $(basename "$dir") failed (log: $dir.log)" >&2
    return 1
  fi
}

if [ "$calibration_seconds" -gt 0 ]; then
  experiment_config "$out/calibration.pbtxt" calibration SYNC 1 "$(nproc)" "$batch" \
    "optimizer { kind: ADAM learning_rate: $lr } epochs: 100 max_seconds: $calibration_seconds eval_every: 1000000 seed: 99"
  if [ "$dry" = 0 ]; then
    echo "time_to_accuracy.sh: calibration ($calibration_seconds s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    experiment_run "$out/calibration.pbtxt" "$out/calibration"
    /usr/bin/python3 - "$out/calibration" scripts/lib > "$out/compute_s.txt" <<'PYEOF'
import glob, sys
sys.path.insert(0, sys.argv[2])
import runs
for path in sorted(glob.glob(sys.argv[1] + "/worker-*.jsonl")):
    for r in runs.train_lines(path)[10:]:
        print(r["compute_s"])
PYEOF
    echo "time_to_accuracy.sh: $(wc -l < "$out/compute_s.txt") compute times in $out/compute_s.txt"
  fi
fi
[ "$calibration_only" = 0 ] || exit 0

IFS=, read -r -a wl <<<"$workers"
IFS=, read -r -a ml <<<"$modes"
IFS=, read -r -a sl <<<"$seeds"
for seed in "${sl[@]}"; do
  for m in "${wl[@]}"; do
    for mode in "${ml[@]}"; do
      run=s1-m$m-$mode-seed$seed
      experiment_config "$out/$run.pbtxt" "$run" "${mode^^}" 1 "$m" "$batch" \
        "optimizer { kind: ADAM learning_rate: $lr } epochs: 100 max_seconds: $max_seconds eval_every: $eval_every eval_examples: $eval_examples seed: $seed"
      [ "$dry" = 1 ] && continue
      echo "time_to_accuracy.sh: $run, load average $(cut -d' ' -f1-3 /proc/loadavg)"
      run_until "$out/$run.pbtxt" "$out/$run"
    done
  done
done
[ "$dry" = 1 ] && { echo "time_to_accuracy.sh: configs in $out (--dry-run: nothing run)"; exit 0; }
echo "time_to_accuracy.sh: runs in $out; then scripts/plan/calibrate.py --step_samples=$model:cpu:$batch=$out/compute_s.txt --out=$out/cpu.profile and scripts/plan/accuracy.py validate $out/s1-* --profile=$out/cpu.profile"
