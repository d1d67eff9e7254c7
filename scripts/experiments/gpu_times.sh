#!/usr/bin/env bash
# The seeds' network findings at GPU step times (docs/EXPERIMENTS.md, "The
# network at GPU step times"), each over the gRPC and the UCX data plane, on
# network-namespace hosts (scripts/run/netns_hosts.sh) with links uncapped
# and capped by tc at 10 and 1 Gbit/s. The workers' compute is emulated
# (docs/STRAGGLERS.md, "Emulated compute": no computing, a wait, then
# ResNet-20's real gradient bytes through the real servers) at the time a
# GPU takes for a ResNet-20 step:
#
#   t(b) = --step_ms + b * --per_sample_us / 1000   ms for a batch of b
#
# an assumption, not a measurement (no GPU here): a fixed part for the
# kernel launches of a small network and the optimizer, and a part per image
# (ResNet-20 is about 41 MFLOP a 32x32 image forward, so about 0.12 GFLOP
# forward and backward; 8 us an image is 15 TFLOP/s, what small convolutions
# reach on a modern GPU). Measure yours (scripts/gpu/gpu_bench.sh) and pass
# them.
#
#   sudo scripts/experiments/gpu_times.sh --finding=network
#       seed 000: "the same loss per step, much slower per second on the
#       slower network". 2 ps and --workers workers (each on a host of its
#       own), sync N = M, batch 128 a worker: the emulated runs give steps
#       and images per second on each link; short runs with real compute
#       (ResNet-20 on CIFAR-10, --loss_steps steps of batch 32, each worker
#       its own shard of the data) give the loss of each step on each link,
#       and the first uncapped one runs twice (how far two runs of one
#       setting differ).
#   sudo scripts/experiments/gpu_times.sh --finding=batch
#       seed 002: "distributed slower than one node until the batch is large
#       enough". For each global batch B of --batches: one node (one worker
#       computing t(B) with one ps on its own host, over shared memory)
#       against 2 ps and --workers workers across hosts (B / workers a
#       worker, each computing t(B / workers)), on the 10 and 1 Gbit/s links.
#
# Common: [--planes=GRPC,UCX] [--seconds=15] [--workers=4] [--step_ms=3]
#   [--per_sample_us=8] [--out=DIR] [--no-build] [--dry-run] (every config
#   written, nothing built or run; no root needed); network also
#   [--loss_steps=12] [--data_dir=../shared/cifar10/cifar-10-batches-bin];
#   batch also [--batches=128,512,2048,8192].
# Writes OUT/report.md (scripts/experiments/gpu_times_report.py). Needs root
# (ip netns, tc).
set -euo pipefail
cd "$(dirname "$0")/../.."
finding="" planes=GRPC,UCX seconds=15 workers=4 step_ms=3 per_sample_us=8
loss_steps=12 batches=128,512,2048,8192 build=1 out="" dry=0
data_dir=../shared/cifar10/cifar-10-batches-bin
for arg in "$@"; do
  case "$arg" in
    --finding=*) finding=${arg#*=} ;;
    --planes=*) planes=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    --workers=*) workers=${arg#*=} ;;
    --step_ms=*) step_ms=${arg#*=} ;;
    --per_sample_us=*) per_sample_us=${arg#*=} ;;
    --loss_steps=*) loss_steps=${arg#*=} ;;
    --batches=*) batches=${arg#*=} ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --no-build) build=0 ;;
    --dry-run) dry=1 build=0 ;;
    *) echo "gpu_times.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
case "$finding" in
  network|batch) ;;
  *) echo "gpu_times.sh: --finding must be network or batch, not '$finding'" >&2; exit 2 ;;
esac
for v in seconds workers loss_steps; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "gpu_times.sh: --$v must be a whole number >= 1, not '${!v}'" >&2; exit 2; }
done
for v in step_ms per_sample_us; do
  [[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "gpu_times.sh: --$v must be a number >= 0, not '${!v}'" >&2; exit 2; }
done
IFS=, read -r -a plane_list <<<"$planes"
for p in "${plane_list[@]}"; do
  case "$p" in GRPC|UCX) ;; *) echo "gpu_times.sh: --planes takes GRPC and UCX, not '$p'" >&2; exit 2 ;; esac
done
IFS=, read -r -a batch_list <<<"$batches"
for b in "${batch_list[@]}"; do
  if ! [[ $b =~ ^[1-9][0-9]*$ ]] || ((b % workers != 0)); then
    echo "gpu_times.sh: batch '$b' of --batches is not a multiple of --workers ($workers)" >&2; exit 2
  fi
done
[ "$dry" = 1 ] || [ "$(id -u)" -eq 0 ] || { echo "gpu_times.sh: needs root (ip netns, tc)" >&2; exit 1; }
out=${out:-runs/gpu-times-$finding-$(date +%Y%m%d-%H%M%S)}
if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks >&2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
prefix=gt
[ "$dry" = 1 ] || trap 'bash scripts/run/netns_hosts.sh down --prefix=$prefix >/dev/null 2>&1 || true' EXIT
source scripts/experiments/netns_sync_cluster.sh  # and scripts/lib/cluster.sh

# compute_s B: t(B) in seconds.
compute_s() { awk -v b="$1" -v f="$step_ms" -v s="$per_sample_us" 'BEGIN { printf "%.6f", (f + b * s / 1000) / 1000 }'; }

ps_hosts="${prefix}0,${prefix}1"
worker_hosts=$(for ((i = 0; i < workers; i++)); do printf '%s%s' "${i:+,}" "$prefix$((i + 2))"; done)
worker_hosts=${worker_hosts#,}
wire() {
  if [ "$1" = UCX ]; then echo 'wire { data_plane: UCX ucx_transports: "tcp" }'; else echo 'wire { data_plane: GRPC }'; fi
}

# emulated_config FILE PLANE BATCH_PER_WORKER
emulated_config() {
  write_cluster_config "$1" gpu_times ps_hosts="$ps_hosts" worker_hosts="$worker_hosts" \
    batch="$3" model=resnet20 data="source: SYNTHETIC" \
    training="optimizer { kind: MOMENTUM learning_rate: 0.1 momentum: 0.9 } steps: 1000000 max_seconds: $seconds seed: 1" \
    extra="emulation { compute { kind: CONSTANT shift_seconds: $(compute_s "$3") } }" \
    extra="$(wire "$2")" extra="worker_lease_seconds: 60"
}

# run NAME RATE CONFIG HOSTS: netns_sync_cluster.sh's run_on_hosts (OUT/NAME,
# a line in OUT/runs.txt); nothing with --dry-run.
run() {
  [ "$dry" = 0 ] || return 0
  run_on_hosts "$1" "$2" "$3" "$out" "$prefix" "$4"
}

: > "$out/runs.txt"
{
  echo "finding $finding"
  echo "step_ms $step_ms"
  echo "per_sample_us $per_sample_us"
  echo "workers $workers"
  echo "cpu $(lscpu | sed -n 's/^Model name: *//p' | head -1), family $(lscpu | sed -n 's/^CPU family: *//p' | head -1), model $(lscpu | sed -n 's/^Model: *//p' | head -1), $(nproc) cores"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$out/setup.txt"
links=("none:" "10gbit:10gbit" "1gbit:1gbit")
if [ "$finding" = network ]; then
  [ -f "$data_dir/data_batch_1.bin" ] ||
    { echo "gpu_times.sh: no CIFAR-10 in '$data_dir' (give --data_dir=DIR)" >&2; exit 1; }
  data_dir=$(cd "$data_dir" && pwd)
  for plane in "${plane_list[@]}"; do
    for link in "${links[@]}"; do
      cfg=$out/emulated-$plane-${link%%:*}.pbtxt
      emulated_config "$cfg" "$plane" 128
      run "emulated-$plane-${link%%:*}" "${link#*:}" "$cfg" $((workers + 2))
      # The same cluster computing for real: the loss of each step.
      cfg=$out/real-$plane-${link%%:*}.pbtxt
      write_cluster_config "$cfg" gpu_times ps_hosts="$ps_hosts" worker_hosts="$worker_hosts" \
        batch=32 steps="$loss_steps" model=resnet20 \
        training="optimizer { kind: MOMENTUM learning_rate: 0.1 momentum: 0.9 } seed: 1" \
        data="source: CIFAR10 dir: \"$data_dir\" augment: false sharding: SHARD" \
        extra="$(wire "$plane")" extra="worker_lease_seconds: 120"
      run "real-$plane-${link%%:*}" "${link#*:}" "$cfg" $((workers + 2))
    done
  done
  # The first uncapped real run again: how far two runs of one setting
  # differ (the order in which the servers sum the gradients varies).
  cp "$out/real-${plane_list[0]}-none.pbtxt" "$out/real-${plane_list[0]}-none-again.pbtxt"
  run "real-${plane_list[0]}-none-again" "" "$out/real-${plane_list[0]}-none-again.pbtxt" $((workers + 2))
else
  for b in "${batch_list[@]}"; do
    # One node: one worker and its ps on one host, over shared memory.
    cfg=$out/one-node-$b.pbtxt
    write_cluster_config "$cfg" gpu_times ps_hosts="${prefix}0" worker_hosts="${prefix}0" \
      batch="$b" model=resnet20 data="source: SYNTHETIC" \
      training="optimizer { kind: MOMENTUM learning_rate: 0.1 momentum: 0.9 } steps: 1000000 max_seconds: $seconds seed: 1" \
      extra="emulation { compute { kind: CONSTANT shift_seconds: $(compute_s "$b") } }" \
      extra="wire { shared_memory: true }" extra="worker_lease_seconds: 60"
    run "one-node-$b" "" "$cfg" 1
    for plane in "${plane_list[@]}"; do
      for link in "${links[@]:1}"; do
        cfg=$out/dist-$plane-${link%%:*}-$b.pbtxt
        emulated_config "$cfg" "$plane" $((b / workers))
        run "dist-$plane-${link%%:*}-$b" "${link#*:}" "$cfg" $((workers + 2))
      done
    done
  done
fi
[ "$dry" = 0 ] || { echo "gpu_times.sh: configs in $out (--dry-run: nothing run)"; exit 0; }
/usr/bin/python3 scripts/experiments/gpu_times_report.py "$out"
echo "gpu_times.sh: report $out/report.md"
