#!/usr/bin/env bash
# The simulator (scripts/plan/cluster_sim.py) against real clusters on
# network-namespace hosts (docs/EXPERIMENTS.md, "Planning a cluster"): each
# scenario runs for real, every task on a host of its own with its link
# capped by tc (tbf), the workers' compute emulated at a GPU's step time
# (docs/STRAGGLERS.md, "Emulated compute": a wait, then ResNet-20's real
# gradient bytes through the real servers), and the same cluster is
# simulated with the machine profile; scripts/plan/validate_report.py
# prints the table (scenario, predicted, measured, error) and writes
# OUT/report.md.
#
#   sudo scripts/plan/validate.sh [--seconds=20] [--step_ms=4.024]
#       [--only=NAME,...] [--profile=FILE] [--bin_dir=DIR] [--out=DIR]
#       [--dry-run]
#
# The scenarios (name: shards, workers, mode, link cap), 1-4 shards, 2-8
# workers, sync with and without backup workers, async, and async with a
# staleness bound (mode sspK: staleness_bound K), at 1 and 10 Gbit/s;
# ResNet-20, batch 128 a worker, momentum SGD, gRPC, float32:
#   s1-m2-sync-1g  s1-m4-sync-1g  s2-m4-sync-1g  s2-m4-b1-1g  s2-m4-async-1g
#   s4-m8-sync-1g  s2-m8-async-1g s1-m2-sync-10g s2-m4-sync-10g
#   s2-m4-async-10g s4-m8-b2-10g  s1-m8-b1-10g
#   s2-m4-ssp0-1g  s2-m8-ssp1-1g  s2-m4-ssp0-10g
# --step_ms: each worker's emulated compute a step (default 4.024: the
# gpu_times study's t(128) = 3 ms + 8 us x 128, an assumption). The
# binaries are the -c opt build (--bin_dir, default bazel-out/k8-opt/bin:
# `bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks`
# first). --dry-run writes every config and the simulator's predictions,
# runs nothing (no root needed). Needs root otherwise (ip netns, tc).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=20 step_ms=4.024 only="" profile="" bin=bazel-out/k8-opt/bin out="" dry=0
for arg in "$@"; do
  case "$arg" in
    --seconds=*) seconds=${arg#*=} ;;
    --step_ms=*) step_ms=${arg#*=} ;;
    --only=*) only=${arg#*=} ;;
    --profile=*) profile=${arg#*=} ;;
    --bin_dir=*) bin=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "validate.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "validate.sh: --seconds must be a whole number >= 1, not '$seconds'" >&2; exit 2; }
[[ $step_ms =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "validate.sh: --step_ms must be a number >= 0, not '$step_ms'" >&2; exit 2; }
[ -z "$profile" ] || [ -f "$profile" ] || { echo "validate.sh: --profile=$profile: no such file" >&2; exit 2; }

# name shards workers mode(sync|async|sspK) backups cap
scenarios=(
  "s1-m2-sync-1g 1 2 sync 0 1gbit"
  "s1-m4-sync-1g 1 4 sync 0 1gbit"
  "s2-m4-sync-1g 2 4 sync 0 1gbit"
  "s2-m4-b1-1g 2 4 sync 1 1gbit"
  "s2-m4-async-1g 2 4 async 0 1gbit"
  "s4-m8-sync-1g 4 8 sync 0 1gbit"
  "s2-m8-async-1g 2 8 async 0 1gbit"
  "s1-m2-sync-10g 1 2 sync 0 10gbit"
  "s2-m4-sync-10g 2 4 sync 0 10gbit"
  "s2-m4-async-10g 2 4 async 0 10gbit"
  "s4-m8-b2-10g 4 8 sync 2 10gbit"
  "s1-m8-b1-10g 1 8 sync 1 10gbit"
  "s2-m4-ssp0-1g 2 4 ssp0 0 1gbit"
  "s2-m8-ssp1-1g 2 8 ssp1 0 1gbit"
  "s2-m4-ssp0-10g 2 4 ssp0 0 10gbit"
)
if [ -n "$only" ]; then
  IFS=, read -r -a wanted <<<"$only"
  kept=()
  for w in "${wanted[@]}"; do
    found=0
    for s in "${scenarios[@]}"; do
      if [ "${s%% *}" = "$w" ]; then kept+=("$s"); found=1; fi
    done
    [ "$found" = 1 ] || { echo "validate.sh: --only: no scenario '$w'" >&2; exit 2; }
  done
  scenarios=("${kept[@]}")
fi
if [ "$dry" = 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "validate.sh: needs root (ip netns, tc); --dry-run needs none" >&2; exit 1; }
  for b in ps/ps_server worker/worker configs/cluster_tasks; do
    [ -x "$bin/$b" ] || { echo "validate.sh: no $bin/$b: bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks" >&2; exit 1; }
  done
fi
out=${out:-runs/plan-validate-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
prefix=pv
[ "$dry" = 1 ] || trap 'bash scripts/run/netns_hosts.sh down --prefix=$prefix >/dev/null 2>&1 || true' EXIT
source scripts/lib/cluster.sh

{
  echo "step_ms $step_ms"
  echo "seconds $seconds"
  echo "cpu $(lscpu | sed -n 's/^Model name: *//p' | head -1), family $(lscpu | sed -n 's/^CPU family: *//p' | head -1), model $(lscpu | sed -n 's/^Model: *//p' | head -1), $(nproc) cores"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$out/setup.txt"
: > "$out/scenarios.txt"
for s in "${scenarios[@]}"; do
  read -r name shards workers mode backups cap <<<"$s"
  echo "$s" >> "$out/scenarios.txt"
  ps_hosts=$(for ((i = 0; i < shards; i++)); do printf ',%s%s' "$prefix" "$i"; done)
  worker_hosts=$(for ((i = 0; i < workers; i++)); do printf ',%s%s' "$prefix" "$((shards + i))"; done)
  bound=""
  if [ "$mode" = sync ]; then
    how="mode=SYNC n=$((workers - backups))"
  else
    how="mode=ASYNC"
    # sspK: async, no worker more than K pushes ahead of the slowest.
    [[ $mode =~ ^ssp([0-9]+)$ ]] && bound=" staleness_bound: ${BASH_REMATCH[1]}"
  fi
  # shellcheck disable=SC2086
  write_cluster_config "$out/$name.pbtxt" plan_validate ps_hosts="${ps_hosts#,}" \
    worker_hosts="${worker_hosts#,}" $how batch=128 model=resnet20 \
    data="source: SYNTHETIC" \
    training="optimizer { kind: MOMENTUM learning_rate: 0.01 momentum: 0.9 } steps: 100000000 max_seconds: $seconds seed: 1$bound" \
    extra="emulation { compute { kind: CONSTANT shift_seconds: $(awk -v m="$step_ms" 'BEGIN { printf "%.6f", m / 1000 }') } }" \
    extra='wire { data_plane: GRPC }' extra="worker_lease_seconds: 60"
  [ "$dry" = 0 ] || continue
  bash scripts/run/netns_hosts.sh up $((shards + workers)) --prefix="$prefix" --rate="$cap" >/dev/null
  echo "validate.sh: $name (link cap $cap), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  cpu_before=$(head -1 /proc/stat)
  if ! bash scripts/run/launch.sh --bin_dir="$bin" --netns --run_dir="$out/$name" "$out/$name.pbtxt" \
      > "$out/$name.log" 2>&1; then
    tail -20 "$out/$name.log" >&2
    echo "validate.sh: $name failed (its log: $out/$name.log)" >&2
    exit 1
  fi
  # The machine's CPU busy over the run (every task shares this machine's
  # cores; the simulator gives each task a CPU of its own).
  busy=$(printf '%s\n%s\n' "$cpu_before" "$(head -1 /proc/stat)" | awk '
    { idle = $5 + $6; total = 0; for (i = 2; i <= NF; i++) total += $i }
    NR == 1 { i0 = idle; t0 = total } NR == 2 { printf "%.2f", 1 - (idle - i0) / (total - t0) }')
  echo "$name cpu_busy=$busy load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" >> "$out/runs.txt"
  bash scripts/run/netns_hosts.sh down --prefix="$prefix" >/dev/null
done
/usr/bin/python3 scripts/plan/validate_report.py "$out" --step_ms="$step_ms" ${profile:+--profile="$profile"}
