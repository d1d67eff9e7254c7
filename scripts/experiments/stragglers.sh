#!/usr/bin/env bash
# The straggler study (docs/STRAGGLERS.md; figures in docs/EXPERIMENTS.md,
# "Stragglers"): what backup workers, adaptive N and async buy when some
# workers are slow. Two parts:
#
#   throughput (default): EMULATED compute (proto/cluster.proto's
#     `emulation`: each step waits --step_ms and pushes a gradient of
#     --model's real size through --ps real servers, the model sliced over
#     them, shard 0 deciding every push for all), M workers for each of
#     --workers, stragglers as PyTorch's study (--stall_p chance of a
#     --stall_s stall per step, every worker) plus worker 0 --slow times
#     slower; each setting for --seconds. Settings:
#       sync-bK    N = M - K, K = 0..--max_backups
#       adaptive   the servers choose N (training.adaptive_backups)
#       async      every push applied on arrival
#       async-ssp  async with staleness_bound: --ssp
#     The report (stragglers_report.py, --model: the step-time model's
#     prediction beside each run): steps/s, gradients applied/s, p50 / p90 /
#     p99 step time, normalized speedup, gradients dropped; compare.py's
#     plots (throughput over time, dropped gradients, staleness).
#   --real: REAL compute, time to accuracy: --real_workers workers of
#     --real_model on CIFAR-10, worker 0 slowed --slow times; sync b=0,
#     sync b=1, adaptive, async, each for --real_minutes; compare.py's
#     report and plots (test accuracy against wall-clock time).
#
#   scripts/experiments/stragglers.sh [--workers=16] [--seconds=60]
#       [--step_ms=55] [--stall_p=0.01] [--stall_s=1] [--slow=3]
#       [--max_backups=4] [--ssp=4] [--model=cifar10_linear] [--only=NAMES]
#       [--ps=1]
#       [--real [--real_workers=4] [--real_model=cifar10_tutorial]
#        [--real_minutes=5] [--data_dir=DIR]]
#       [--out=DIR] [--no-build | --bin_dir=DIR] [--dry-run]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/experiments/lib.sh
workers=16 seconds=60 step_ms=55 stall_p=0.01 stall_s=1 slow=3 max_backups=4
ssp=4 model=cifar10_linear only="" real=0 real_workers=4 num_ps=1
real_model=cifar10_tutorial real_minutes=5
data_dir=../shared/cifar10/cifar-10-batches-bin
out=runs/stragglers-$(date +%Y%m%d-%H%M%S) build=1 dry=0 bin_dir="" bn=""
for arg in "$@"; do
  case "$arg" in
    --workers=*) workers=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --step_ms=*) step_ms=${arg#*=} ;;
    --stall_p=*) stall_p=${arg#*=} ;;
    --stall_s=*) stall_s=${arg#*=} ;;
    --slow=*) slow=${arg#*=} ;;
    --max_backups=*) max_backups=${arg#*=} ;;
    --ssp=*) ssp=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --only=*) only=${arg#*=} ;;
    --ps=*) num_ps=${arg#*=} ;;
    --real) real=1 ;;
    --real_workers=*) real_workers=${arg#*=} ;;
    --real_model=*) real_model=${arg#*=} ;;
    --real_minutes=*) real_minutes=${arg#*=} ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --no-build) build=0 ;;
    --bin_dir=*) bin_dir=$(cd "${arg#*=}" && pwd); build=0 ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "stragglers.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
positive() {  # NAME VALUE: a number > 0, or exit 2 naming it
  if ! [[ "$2" =~ ^[0-9]+([.][0-9]+)?$ ]] || ! awk -v v="$2" 'BEGIN { exit !(v > 0) }'; then
    echo "stragglers.sh: --$1=$2 is not a positive number" >&2; exit 2
  fi
}
positive seconds "$seconds"; positive step_ms "$step_ms"; positive stall_s "$stall_s"
positive real_minutes "$real_minutes"
if ! [[ "$stall_p" =~ ^[0-9]*[.]?[0-9]+$ ]] || ! awk -v v="$stall_p" 'BEGIN { exit !(v <= 1) }'; then
  echo "stragglers.sh: --stall_p=$stall_p is not a probability in [0, 1]" >&2; exit 2
fi
if ! [[ "$slow" =~ ^[0-9]+([.][0-9]+)?$ ]] || ! awk -v v="$slow" 'BEGIN { exit !(v >= 1) }'; then
  echo "stragglers.sh: --slow=$slow is not a factor >= 1" >&2; exit 2
fi
[[ "$max_backups" =~ ^[0-9]+$ ]] || { echo "stragglers.sh: --max_backups=$max_backups is not a count" >&2; exit 2; }
[[ "$ssp" =~ ^[0-9]+$ ]] || { echo "stragglers.sh: --ssp=$ssp is not a count" >&2; exit 2; }
[[ "$num_ps" =~ ^[1-9][0-9]*$ ]] || { echo "stragglers.sh: --ps=$num_ps is not a count >= 1" >&2; exit 2; }
[[ "$real_workers" =~ ^[2-9]$|^[1-9][0-9]+$ ]] || { echo "stragglers.sh: --real_workers=$real_workers is not a count >= 2" >&2; exit 2; }
IFS=, read -r -a counts <<<"$workers"
for m in "${counts[@]}"; do
  [[ "$m" =~ ^[1-9][0-9]*$ ]] && [ "$m" -ge 2 ] || { echo "stragglers.sh: --workers=$workers: '$m' is not a count >= 2" >&2; exit 2; }
  [ "$max_backups" -lt "$m" ] || { echo "stragglers.sh: --max_backups=$max_backups leaves no worker of $m" >&2; exit 2; }
done

if [ "$build" = 1 ] && [ "$dry" = 0 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks >&2
fi
experiment_check_model
mkdir -p "$out"
out=$(cd "$out" && pwd)
step_s=$(awk -v ms="$step_ms" 'BEGIN { printf "%g", ms / 1000 }')

# emulated_config FILE NAME M MODE TRAINING_EXTRA
emulated_config() {
  write_cluster_config "$1" "$2" mode="$4" ps="$num_ps" workers="$3" batch=16 \
    model="$model" data="source: SYNTHETIC" \
    training="optimizer { kind: ADAM learning_rate: 0.001 } steps: 1000000 max_seconds: $seconds seed: 1 $5" \
    extra="emulation { compute { kind: CONSTANT shift_seconds: $step_s } }" \
    extra="stragglers { stall_probability: $stall_p stall_seconds: $stall_s }" \
    extra="stragglers { workers: 0 slow_factor: $slow }" \
    extra="worker_lease_seconds: 60"
}

wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
dirs=()
if [ "$real" = 0 ]; then
  for m in "${counts[@]}"; do
    for ((b = 0; b <= max_backups; b++)); do
      name=m$m-sync-b$b; wanted "sync-b$b" || continue
      emulated_config "$out/$name.pbtxt" "$name" "$m" SYNC \
        "replicas_to_aggregate: $((m - b))"
      dirs+=("$name")
    done
    if wanted adaptive; then
      emulated_config "$out/m$m-adaptive.pbtxt" "m$m-adaptive" "$m" SYNC "adaptive_backups { }"
      dirs+=("m$m-adaptive")
    fi
    if wanted async; then
      emulated_config "$out/m$m-async.pbtxt" "m$m-async" "$m" ASYNC ""
      dirs+=("m$m-async")
    fi
    if wanted async-ssp; then
      emulated_config "$out/m$m-async-ssp.pbtxt" "m$m-async-ssp" "$m" ASYNC "staleness_bound: $ssp"
      dirs+=("m$m-async-ssp")
    fi
  done
else
  data_dir=$(experiment_data_dir "$data_dir")
  model=$real_model
  rs=$(awk "BEGIN { print int($real_minutes * 60) }")
  declare -A real_extra=(
    [real-sync-b0]="replicas_to_aggregate: $real_workers"
    [real-sync-b1]="replicas_to_aggregate: $((real_workers - 1))"
    [real-adaptive]="adaptive_backups { }"
    [real-async]="")
  for name in real-sync-b0 real-sync-b1 real-adaptive real-async; do
    wanted "$name" || continue
    mode=SYNC; [ "$name" = real-async ] && mode=ASYNC
    experiment_config "$out/$name.pbtxt" "$name" "$mode" 1 "$real_workers" 128 \
      "optimizer { kind: ADAM learning_rate: 0.001 } epochs: 100 max_seconds: $rs eval_every: 100 eval_examples: 2000 seed: 1 ${real_extra[$name]}"
    echo "stragglers { workers: 0 slow_factor: $slow }" >> "$out/$name.pbtxt"
    dirs+=("$name")
  done
fi
[ ${#dirs[@]} -gt 0 ] || { echo "stragglers.sh: --only=$only names no setting (see --help)" >&2; exit 2; }
[ "$dry" = 1 ] && { echo "stragglers.sh: configs in $out (--dry-run: nothing run)"; exit 0; }
runs=()
for name in "${dirs[@]}"; do
  echo "stragglers.sh: $name, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  experiment_run "$out/$name.pbtxt" "$out/$name"
  runs+=("$out/$name")
done
if [ "$real" = 0 ]; then
  /usr/bin/python3 scripts/experiments/stragglers_report.py "${runs[@]}" --model \
    --out "$out/report.md" --json "$out/report.json"
  # The plots (throughput over time, dropped gradients, staleness); the
  # emulated runs' losses are 0.
  /usr/bin/python3 scripts/run/compare.py "${runs[@]}" --out "$out/compare"
  echo "stragglers.sh: report $out/report.md, plots in $out/compare/"
else
  /usr/bin/python3 scripts/run/compare.py "${runs[@]}" --target 0.5 --out "$out/report"
  echo "stragglers.sh: report $out/report/report.md"
fi
echo "stragglers.sh: load average after $(cut -d' ' -f1-3 /proc/loadavg)"
