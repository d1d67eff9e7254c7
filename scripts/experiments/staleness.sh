#!/usr/bin/env bash
# The staleness experiment (docs/EXPERIMENTS.md, "Closing the async gap"):
# sync against async, and async with each staleness control, 2 ps x 4
# workers on this machine, each for the same wall-clock budget on CIFAR-10;
# one report (scripts/run/compare.py) with accuracy per second and per epoch,
# staleness histograms and the configs side by side.
#
#   scripts/experiments/staleness.sh [--minutes=3] [--repeats=1]
#        [--model=cifar10_tutorial] [--bn=SERVER|LOCAL]
#        [--data_dir=../shared/cifar10/cifar-10-batches-bin] [--out=DIR]
#        [--only=NAME,NAME] [--no-build | --bin_dir=DIR] [--dry-run]
#
# --model=NAME trains that model of the registry (worker --list_models:
# cifar10_tutorial, resnet20, cnn10, ...; a larger network takes far
# longer a step, so give it more --minutes: evaluations come every 200
# global steps); --bn=SERVER|LOCAL says where a model with batch norm keeps
# its running statistics (model.batch_norm_statistics, docs/CLUSTER.md;
# default SERVER; refused for a model without batch norm).
#
# The settings (names as in the report):
#   sync            N = M = 4
#   async           plain async, full-size Adam steps
#   async-ssp1      staleness_bound: 1 (a worker more than 1 step ahead of
#                   the slowest live worker waits before it computes)
#   async-ssp0      staleness_bound: 0 (workers' clocks in lockstep)
#   async-lr        lr_scaled_by_staleness: the step divided by staleness
#   async-dc        DC-ASGD, dc_asgd_lambda: 0.04 (the DC-ASGD paper's
#                   CIFAR-10 value)
#   async-beta1     async_beta1: 0.5 (momentum lowered: asynchrony acts as
#                   momentum of its own)
#   async-combined  staleness_bound 1 + async_beta1 0.5 + DC-ASGD
#   async-quarter   learning rate 0.00025 (lr / M: an async cluster makes M
#                   Adam steps where sync makes one, each of full size)
#   async-ssp0-quarter  staleness_bound 0 and learning rate 0.00025
# --only keeps a subset; --repeats runs each setting R times (NAME-rK);
# --dry-run writes the configs to OUT and stops; --bin_dir=DIR takes the
# binaries from DIR (as scripts/run/launch.sh --bin_dir) instead of building.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/experiments/lib.sh
minutes=3 repeats=1 data_dir=../shared/cifar10/cifar-10-batches-bin
out=runs/staleness-$(date +%Y%m%d-%H%M%S) only="" build=1 dry=0 bin_dir=""
model=cifar10_tutorial bn=""
for arg in "$@"; do
  case "$arg" in
    --minutes=*) minutes=${arg#*=} ;;
    --repeats=*) repeats=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --bn=*) bn=${arg#*=} ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --only=*) only=${arg#*=} ;;
    --no-build) build=0 ;;
    --bin_dir=*) bin_dir=$(cd "${arg#*=}" && pwd); build=0 ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "staleness.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || ! awk -v m="$minutes" 'BEGIN { exit !(m > 0) }'; then
  echo "staleness.sh: --minutes=$minutes is not a positive number" >&2; exit 2
fi
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "staleness.sh: --repeats=$repeats is not a positive count" >&2; exit 2; }
[[ "$bn" =~ ^(|SERVER|LOCAL)$ ]] || { echo "staleness.sh: --bn=$bn is neither SERVER nor LOCAL" >&2; exit 2; }

declare -A extra=(
  [sync]=""
  [async]=""
  [async-ssp1]="staleness_bound: 1"
  [async-ssp0]="staleness_bound: 0"
  [async-lr]="lr_scaled_by_staleness: true"
  [async-dc]="dc_asgd_lambda: 0.04"
  [async-beta1]="async_beta1: 0.5"
  [async-combined]="staleness_bound: 1 async_beta1: 0.5 dc_asgd_lambda: 0.04"
  [async-quarter]=""
  [async-ssp0-quarter]="staleness_bound: 0"
)
declare -A lr=([async-quarter]=0.00025 [async-ssp0-quarter]=0.00025)
order=(sync async async-ssp1 async-ssp0 async-lr async-dc async-beta1 async-combined
       async-quarter async-ssp0-quarter)
if [ -n "$only" ]; then
  IFS=, read -r -a order <<<"$only"
  for n in "${order[@]}"; do
    [ -n "${extra[$n]+x}" ] || { echo "staleness.sh: unknown setting '$n' in --only (see --help)" >&2; exit 2; }
  done
fi
data_dir=$(experiment_data_dir "$data_dir")
seconds=$(awk "BEGIN { print int($minutes * 60) }")

if [ "$build" = 1 ] && [ "$dry" = 0 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks >&2
fi
experiment_check_model
mkdir -p "$out"
out=$(cd "$out" && pwd)
dirs=()
for name in "${order[@]}"; do
  for ((r = 1; r <= repeats; r++)); do
    run=$name; [ "$repeats" -gt 1 ] && run=$name-r$r
    mode=ASYNC; [ "$name" = sync ] && mode=SYNC
    experiment_config "$out/$run.pbtxt" "$run" "$mode" 2 4 128 \
      "optimizer { kind: ADAM learning_rate: ${lr[$name]:-0.001} } epochs: 100 max_seconds: $seconds eval_every: 200 eval_examples: 2000 seed: $r ${extra[$name]}"
    [ "$dry" = 1 ] && continue
    echo "staleness.sh: $run ($minutes min), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    experiment_run "$out/$run.pbtxt" "$out/$run"
    dirs+=("$out/$run")
  done
done
[ "$dry" = 1 ] && { echo "staleness.sh: configs in $out (--dry-run: nothing run)"; exit 0; }
/usr/bin/python3 scripts/run/compare.py "${dirs[@]}" --repeats "$repeats" --target 0.5 --out "$out/report"
echo "staleness.sh: report $out/report/report.md"
