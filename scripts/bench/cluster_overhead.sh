#!/usr/bin/env bash
# The cost of the parameter server: the same training steps in train_local
# (Adam applied in the process) and in a one-worker sync cluster (pull from
# and push to one ps_server on loopback, Adam there), in one run, as the
# ratio of mean step times.
#
#   scripts/bench/cluster_overhead.sh [--steps=N] [--batch=B] [--threads=T]
#                               [--data_dir=DIR | --synthetic] [--rounds=R]
#                               [--wire=fp32|bf16|fp16]
#
# Defaults: 60 steps of batch 128 with 2 threads, CIFAR-10 from
# data/cifar-10-batches-bin (the synthetic set when absent), 2 rounds; the
# first 5 steps of each run are warm-up and not counted. The rounds
# alternate local and cluster runs so that both see the same background
# load. --wire sets the cluster's wire block (gradients and weights in that
# dtype; default fp32). Last line: overhead_ratio=X (cluster step time /
# local step time).
set -uo pipefail
here=$(pwd)
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib/cluster.sh

steps=60 batch=128 threads=2 rounds=2 data_dir="" synthetic=0 wire=fp32
for a in "$@"; do
  case "$a" in
    --steps=*) steps=${a#--steps=} ;;
    --batch=*) batch=${a#--batch=} ;;
    --threads=*) threads=${a#--threads=} ;;
    --rounds=*) rounds=${a#--rounds=} ;;
    --data_dir=*) data_dir=${a#--data_dir=}
                  case "$data_dir" in /*) ;; *) data_dir="$here/$data_dir" ;; esac ;;
    --synthetic) synthetic=1 ;;
    --wire=*) wire=${a#--wire=} ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "cluster_overhead.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
for v in steps batch threads rounds; do
  if ! [[ "${!v}" =~ ^[1-9][0-9]*$ ]]; then
    echo "cluster_overhead.sh: --$v=${!v} is not a positive integer" >&2; exit 2
  fi
done
[ "$steps" -gt 10 ] || { echo "cluster_overhead.sh: --steps must be > 10" >&2; exit 2; }
case "$wire" in
  fp32|bf16|fp16) ;;
  *) echo "cluster_overhead.sh: --wire=$wire: expected fp32, bf16 or fp16" >&2; exit 2 ;;
esac

bazel build -c opt //worker:train_local //ps:ps_server //worker:worker \
  //configs:cluster_tasks >/dev/null 2>&1 || { echo "cluster_overhead.sh: build failed" >&2; exit 1; }

[ -z "$data_dir" ] && data_dir="$PWD/data/cifar-10-batches-bin"
if [ "$synthetic" = 0 ] && ! [ -f "$data_dir/test_batch.bin" ]; then
  echo "cluster_overhead.sh: no CIFAR-10 in $data_dir: using the synthetic set" >&2
  synthetic=1
fi
if [ "$synthetic" = 1 ]; then
  local_data=(--data=synthetic)
  config_data='source: SYNTHETIC'
else
  local_data=(--data=cifar10 --data_dir="$data_dir")
  config_data="source: CIFAR10 dir: \"$data_dir\""
fi

out=$(mktemp -d /tmp/psgd_overhead.XXXXXX)
write_cluster_config "$out/one_worker.pbtxt" overhead threads="$threads" batch="$batch" \
  steps="$steps" data="$config_data" extra="wire { gradients: ${wire^^} weights: ${wire^^} }"

# mean_step FILE: mean step_s of the train lines after the first 5.
mean_step() {
  /usr/bin/python3 - "$1" <<'EOF'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"][5:]
keys = ["step_s", "compute_s", "pull_s", "push_s", "wait_s", "apply_s", "input_wait_s"]
print(" ".join(f"{k}={sum(r.get(k, 0.0) for r in steps) / len(steps):.4f}" for k in keys))
EOF
}

local_times=() cluster_times=()
for ((r = 1; r <= rounds; r++)); do
  bazel-bin/worker/train_local "${local_data[@]}" --steps="$steps" --batch="$batch" \
    --threads="$threads" --log_every=0 --run_dir="$out/local-$r" >"$out/local-$r.log" 2>&1 \
    || { cat "$out/local-$r.log"; exit 1; }
  bash scripts/run/launch.sh --no-build --run_dir="$out/cluster-$r" "$out/one_worker.pbtxt" \
    >"$out/cluster-$r.log" 2>&1 || { cat "$out/cluster-$r.log"; exit 1; }
  l=$(mean_step "$out/local-$r/metrics.jsonl")
  c=$(mean_step "$out/cluster-$r/worker-0.jsonl")
  echo "round $r: train_local   $l"
  echo "round $r: 1-worker sync $c"
  local_times+=("$(sed 's/ .*//; s/step_s=//' <<<"$l")")
  cluster_times+=("$(sed 's/ .*//; s/step_s=//' <<<"$c")")
done
echo "wire: $wire; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "${local_times[*]}" "${cluster_times[*]}" <<'EOF'
import statistics, sys
local = [float(x) for x in sys.argv[1].split()]
cluster = [float(x) for x in sys.argv[2].split()]
l, c = statistics.median(local), statistics.median(cluster)
print(f"median step: train_local {l:.4f} s, one-worker cluster {c:.4f} s")
print(f"overhead_ratio={c / l:.3f}")
EOF
