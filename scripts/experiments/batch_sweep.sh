#!/usr/bin/env bash
# The batch-size sweep (docs/EXPERIMENTS.md, "Batch size and workers"): sync
# clusters of 1, 2 and 4 workers (one ps) at global batches from 128 to 2048,
# with and without the linear scaling rule and warmup, and one process
# (train_local) at each global batch; each trains a fixed number of epochs on
# CIFAR-10, the tutorial model unless --model names another of the registry.
# The report (batch_sweep_report.py) gives time per epoch and test accuracy
# per setting, the speed against one process, the smallest batch at which
# each cluster beats one process, and the accuracy at 8x the base batch
# against the base batch.
#
#   scripts/experiments/batch_sweep.sh [--batches=128,256,512,1024,2048]
#        [--workers=1,2,4] [--epochs=2] [--scaling=off,on] [--no-local]
#        [--base_batch=128] [--warmup_epochs=0.5] [--lr=0.001]
#        [--model=cifar10_tutorial] [--bn=SERVER|LOCAL]
#        [--data_dir=../shared/cifar10/cifar-10-batches-bin] [--out=DIR]
#        [--no-build | --bin_dir=DIR] [--dry-run]
#
# Global batch B with W workers: each worker takes B/W images a step (B must
# divide by W), the servers average W gradients (N = M = W). Scaling "on":
# the learning rate is lr x B / base_batch (the linear scaling rule, applied
# by the servers' schedule) after a linear warmup from lr over
# warmup_epochs' worth of steps; "off": lr throughout. Each worker gets
# nproc / W compute threads (at least 1), train_local all of them.
# --model=NAME trains that model of the registry (worker --list_models:
# cifar10_tutorial, resnet20, cnn10, ...) in the clusters and in
# train_local; --bn=SERVER|LOCAL says where a model with batch norm keeps
# its running statistics (model.batch_norm_statistics, docs/CLUSTER.md;
# default SERVER; refused for a model without batch norm). Runs land in OUT
# as wW-bB-scaled / wW-bB-plain and local-bB; a second call with the same
# --out (and the same --model) adds runs, and the report covers every run
# there. --dry-run writes the clusters' configs to OUT and stops.
# --bin_dir=DIR takes ps/ps_server, worker/worker, worker/train_local and
# configs/cluster_tasks from DIR (as scripts/run/launch.sh --bin_dir)
# instead of building.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/experiments/lib.sh
batches=128,256,512,1024,2048 workers=1,2,4 epochs=2 scaling=off,on local=1
base_batch=128 warmup_epochs=0.5 lr=0.001 data_dir=../shared/cifar10/cifar-10-batches-bin
out=runs/batch-sweep-$(date +%Y%m%d-%H%M%S) build=1 dry=0 bin_dir="" model=cifar10_tutorial bn=""
for arg in "$@"; do
  case "$arg" in
    --batches=*) batches=${arg#*=} ;;
    --workers=*) workers=${arg#*=} ;;
    --epochs=*) epochs=${arg#*=} ;;
    --scaling=*) scaling=${arg#*=} ;;
    --no-local) local=0 ;;
    --base_batch=*) base_batch=${arg#*=} ;;
    --warmup_epochs=*) warmup_epochs=${arg#*=} ;;
    --lr=*) lr=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --bn=*) bn=${arg#*=} ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --no-build) build=0 ;;
    --bin_dir=*) bin_dir=$(cd "${arg#*=}" && pwd); build=0 ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "batch_sweep.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
bad() { echo "batch_sweep.sh: $*" >&2; exit 2; }
IFS=, read -r -a batch_list <<<"$batches"
IFS=, read -r -a worker_list <<<"$workers"
IFS=, read -r -a scaling_list <<<"$scaling"
for b in "${batch_list[@]}"; do [[ "$b" =~ ^[1-9][0-9]*$ ]] || bad "--batches: '$b' is not a positive count"; done
for w in "${worker_list[@]}"; do [[ "$w" =~ ^[1-9][0-9]*$ ]] || bad "--workers: '$w' is not a positive count"; done
for s in "${scaling_list[@]}"; do [[ "$s" =~ ^(on|off)$ ]] || bad "--scaling: '$s' is neither on nor off"; done
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] || bad "--epochs=$epochs is not a positive count"
[[ "$base_batch" =~ ^[1-9][0-9]*$ ]] || bad "--base_batch=$base_batch is not a positive count"
[[ "$warmup_epochs" =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--warmup_epochs=$warmup_epochs is not a number >= 0"
[[ "$lr" =~ ^[0-9]*[.]?[0-9]+(e-?[0-9]+)?$ ]] || bad "--lr=$lr is not a positive number"
[[ "$bn" =~ ^(|SERVER|LOCAL)$ ]] || bad "--bn=$bn is neither SERVER nor LOCAL"
for b in "${batch_list[@]}"; do
  for w in "${worker_list[@]}"; do
    [ $((b % w)) -eq 0 ] || bad "global batch $b does not divide among $w workers"
  done
done
data_dir=$(experiment_data_dir "$data_dir")
train_examples=$(( $(stat -c %s "$data_dir"/data_batch_*.bin | awk '{s += $1} END {print s}') / 3073 ))
cores=$(nproc)

if [ "$build" = 1 ] && [ "$dry" = 0 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks //worker:train_local >&2
fi
experiment_check_model
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -f "$out/sweep.txt" ]; then  # an earlier call's runs (a sweep before --model: the tutorial's)
  earlier=$(awk '$1 == "model" { print $2 }' "$out/sweep.txt")
  [ "${earlier:-cifar10_tutorial}" = "$model" ] ||
    bad "$out holds a sweep of model ${earlier:-cifar10_tutorial}, not $model (give another --out)"
fi
{
  echo "base_batch $base_batch"; echo "epochs $epochs"; echo "lr $lr"
  echo "warmup_epochs $warmup_epochs"; echo "train_examples $train_examples"
  echo "model $model"
} > "$out/sweep.txt"

for b in "${batch_list[@]}"; do
  if [ "$local" = 1 ] && [ "$dry" = 0 ] && [ ! -d "$out/local-b$b" ]; then
    echo "batch_sweep.sh: local-b$b, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    mkdir -p "$out/local-b$b"
    echo "before $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/local-b$b.load.txt"
    "${bin_dir:-bazel-bin}"/worker/train_local --model="$model" --data_dir="$data_dir" --batch="$b" --epochs="$epochs" \
      --learning_rate="$lr" --threads="$cores" --run_dir="$out/local-b$b" --log_every=0 \
      > "$out/local-b$b.log" 2>&1 || { tail -20 "$out/local-b$b.log" >&2; exit 1; }
    echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/local-b$b.load.txt"
  fi
  for w in "${worker_list[@]}"; do
    threads=$(( cores / w > 0 ? cores / w : 1 ))
    for s in "${scaling_list[@]}"; do
      name=w$w-b$b-plain schedule=""
      if [ "$s" = on ]; then
        name=w$w-b$b-scaled
        warmup=$(awk -v e="$warmup_epochs" -v n="$train_examples" -v b="$b" 'BEGIN { printf "%d", e * n / b + 0.5 }')
        schedule="schedule { base_batch_size: $base_batch warmup_steps: $warmup warmup_from: $(awk -v b="$b" -v base="$base_batch" 'BEGIN { print base / b }') }"
      fi
      [ -d "$out/$name" ] && continue  # a run of an earlier call
      experiment_config "$out/$name.pbtxt" "$name" SYNC 1 "$w" $((b / w)) \
        "optimizer { kind: ADAM learning_rate: $lr $schedule } epochs: $epochs seed: 1" "$threads"
      [ "$dry" = 1 ] && continue
      echo "batch_sweep.sh: $name, load average $(cut -d' ' -f1-3 /proc/loadavg)"
      experiment_run "$out/$name.pbtxt" "$out/$name"
    done
  done
done
[ "$dry" = 1 ] && { echo "batch_sweep.sh: configs in $out (--dry-run: nothing run)"; exit 0; }
/usr/bin/python3 scripts/experiments/batch_sweep_report.py "$out"
echo "batch_sweep.sh: report $out/report/sweep.md"
