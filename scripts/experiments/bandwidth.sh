#!/usr/bin/env bash
# The bandwidth experiment (docs/EXPERIMENTS.md, "Across hosts: 10G and 1G"):
# the same sync cluster, 2 ps and 3 workers each on a host of its own (five
# network namespaces, scripts/run/netns_hosts.sh), run uncapped and with two link
# caps standing for 10 GbE and 1 GbE; one report of loss per step and per
# second, the step split, bytes/s per host against its cap, and the step's
# transfer time against the byte bound of the busiest link.
#
#   sudo scripts/experiments/bandwidth.sh [--steps=60] [--batch=32]
#        [--data_dir=../shared/cifar10/cifar-10-batches-bin] [--out=DIR]
#        [--cap10g=RATE --cap1g=RATE] [--no-build]
#
# The caps: unless given, they come from the uncapped run, so that the ratio
# of transfer time to compute time per step is what the seed experiment's
# 10 GbE and 1 GbE networks gave (its 1 GbE run took 5x as long per step as
# its 10 GbE one): with C the compute time of a step and B the bits a step
# moves over the busiest link, 1G is B / (8 C) and 10G ten times that
# (docs/EXPERIMENTS.md shows the arithmetic). Needs root (ip netns).
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=60 batch=32 data_dir=../shared/cifar10/cifar-10-batches-bin
out=runs/bandwidth-$(date +%Y%m%d-%H%M%S) cap10g="" cap1g="" build=1
for arg in "$@"; do
  case "$arg" in
    --steps=*) steps=${arg#*=} ;;
    --batch=*) batch=${arg#*=} ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --cap10g=*) cap10g=${arg#*=} ;;
    --cap1g=*) cap1g=${arg#*=} ;;
    --no-build) build=0 ;;
    *) echo "bandwidth.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bandwidth.sh: needs root (ip netns, tc)" >&2; exit 1; }
[ -f "$data_dir/data_batch_1.bin" ] || { echo "bandwidth.sh: no CIFAR-10 in '$data_dir'" >&2; exit 1; }
if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks >&2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
data_dir=$(cd "$data_dir" && pwd)
prefix=bw
trap 'bash scripts/run/netns_hosts.sh down --prefix=$prefix >/dev/null 2>&1 || true' EXIT

source scripts/experiments/netns_sync_cluster.sh
cfg=$out/bandwidth.pbtxt
write_sync_config "$cfg" "$prefix" "$data_dir" "$batch" "$steps"
run() { run_on_hosts "$1" "$2" "$cfg" "$out" "$prefix"; }  # run NAME RATE

: > "$out/runs.txt"
run uncapped ""
if [ -z "$cap1g" ]; then
  read -r cap10g cap1g < <(/usr/bin/python3 scripts/experiments/bandwidth_report.py --caps "$out/uncapped")
  echo "bandwidth.sh: caps from the uncapped run: 10G -> $cap10g, 1G -> $cap1g"
fi
run cap10g "$cap10g"
run cap1g "$cap1g"
/usr/bin/python3 scripts/run/compare.py "$out/uncapped" "$out/cap10g" "$out/cap1g" --out "$out/report" --target 0.3
/usr/bin/python3 scripts/experiments/bandwidth_report.py "$out/uncapped" "$out/cap10g" "$out/cap1g" \
  --out "$out/report" --runs "$out/runs.txt"
echo "bandwidth.sh: report $out/report/report.md and $out/report/bandwidth.md"
