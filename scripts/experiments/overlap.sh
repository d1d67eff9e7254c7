#!/usr/bin/env bash
# The overlap experiment (docs/PERFORMANCE.md, "Overlap"): the bandwidth
# experiment's sync cluster (2 ps and 3 workers on network-namespace hosts,
# scripts/experiments/netns_sync_cluster.sh) on a capped link, with the
# config's wire { overlap: true } off and on. Prints per setting the step
# time, compute and transfer time per the step's phases, max(compute,
# transfer), their sum and overlap_ratio = step time / max(compute,
# transfer) (scripts/experiments/overlap_report.py).
#
#   sudo scripts/experiments/overlap.sh [--rate=RATE] [--steps=40]
#        [--batch=32] [--data_dir=../shared/cifar10/cifar-10-batches-bin]
#        [--out=DIR] [--no-build]
#
# Without --rate the cap comes from an uncapped run first: bandwidth.sh's
# "10G" cap, where a step's transfer over the busiest link takes about 0.8
# of its compute (docs/EXPERIMENTS.md), which is where overlap matters most.
# Needs root (ip netns, tc); every namespace is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=40 batch=32 data_dir=../shared/cifar10/cifar-10-batches-bin
out=runs/overlap-$(date +%Y%m%d-%H%M%S) rate="" build=1
for arg in "$@"; do
  case "$arg" in
    --rate=*) rate=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --batch=*) batch=${arg#*=} ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --no-build) build=0 ;;
    *) echo "overlap.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "overlap.sh: needs root (ip netns, tc)" >&2; exit 1; }
[ -f "$data_dir/data_batch_1.bin" ] || { echo "overlap.sh: no CIFAR-10 in '$data_dir'" >&2; exit 1; }
if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks >&2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
data_dir=$(cd "$data_dir" && pwd)
prefix=ov
trap 'bash scripts/run/netns_hosts.sh down --prefix=$prefix >/dev/null 2>&1 || true' EXIT

source scripts/experiments/netns_sync_cluster.sh
write_sync_config "$out/off.pbtxt" "$prefix" "$data_dir" "$batch" "$steps"
write_sync_config "$out/on.pbtxt" "$prefix" "$data_dir" "$batch" "$steps" \
  "wire { overlap: true }"

: > "$out/runs.txt"
if [ -z "$rate" ]; then
  run_on_hosts uncapped "" "$out/off.pbtxt" "$out" "$prefix"
  read -r rate _ < <(/usr/bin/python3 scripts/experiments/bandwidth_report.py --caps "$out/uncapped")
  echo "overlap.sh: cap from the uncapped run: $rate"
fi
run_on_hosts overlap-off "$rate" "$out/off.pbtxt" "$out" "$prefix"
run_on_hosts overlap-on "$rate" "$out/on.pbtxt" "$out" "$prefix"
echo "overlap.sh: link cap $rate, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uptime)"
/usr/bin/python3 scripts/experiments/overlap_report.py "$out/overlap-off" "$out/overlap-on" \
  --runs "$out/runs.txt" | tee "$out/overlap.txt"
