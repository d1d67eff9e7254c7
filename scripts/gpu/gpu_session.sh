#!/usr/bin/env bash
# Everything a lent GPU is for, in one device call of at most --budget
# seconds (docs/dev/GPU-CHECKS.md, "Checks that remain"):
#   1. scripts/gpu/gpu_check.sh: preflight, every gpu test, the tutorial
#      model against PyTorch (its own files in $OUT);
#   2. the layer-graph networks against PyTorch eager on the same GPU:
#      resnet20 and cnn10 at batch 128 and 512, wrn_28_10 at 128 with the
#      GPU memory it used (nvidia-smi's peak while it ran);
#   3. a cluster of 1 ps and 2 GPU workers sharing the GPU, sync N = 2,
#      resnet20 at batch 128, synthetic data, for --cluster-seconds: its
#      run directory and logs as $OUT/cluster.tar.gz (scripts/run/compare.py
#      reads it here).
# Each part runs under its own timeout, so that a hang costs that part.
#
#   bash scripts/gpu/gpu_session.sh [--budget S] [--cluster-seconds S]
#
# Needs gpu_bundle/psgd_gpu.tar.xz (scripts/gpu/pack_gpu_bundle.sh) and
# $OUT. Writes $OUT/session.txt (each part's result line) and
# $OUT/session_logs.tar.gz (each part's whole output, renewed as each part
# ends) besides gpu_check.sh's five files: 8 files, what a device call
# brings back at most.
set -uo pipefail
start=$(date +%s)
budget=560
cluster_seconds=60
# The cluster's device: gpu:0, or cpu for a dry run on a machine without one.
device=${PSGD_SESSION_DEVICE:-gpu:0}
while [ $# -gt 0 ]; do
  case "$1" in
    --budget|--cluster-seconds)
      [ $# -ge 2 ] || { echo "gpu_session: $1 needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --cluster-seconds) cluster_seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu_session: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in "$budget" "$cluster_seconds"; do
  case "$v" in ''|*[!0-9]*) echo "gpu_session: '$v' is not a number of seconds" >&2; exit 2 ;; esac
done
[ -n "${OUT:-}" ] || { echo "gpu_session: no \$OUT" >&2; exit 2; }
archive=gpu_bundle/psgd_gpu.tar.xz
[ -f "$archive" ] || { echo "gpu_session: no $archive (scripts/gpu/pack_gpu_bundle.sh)" >&2; exit 2; }
left() { echo $(( budget - ($(date +%s) - start) )); }
L=/tmp/psgd_session/logs
rm -rf /tmp/psgd_session && mkdir -p "$L"
say() {
  echo "$*" | tee -a "$OUT/session.txt"
  cp /tmp/gpu_bench_details.log "$L/" 2>/dev/null
  tar -czf "$OUT/session_logs.tar.gz" -C /tmp/psgd_session logs
}

# 1. The check: tests and the tutorial's benchmark.
timeout $(( $(left) - 200 )) bash scripts/gpu/gpu_check.sh --bundle "$archive" \
  --budget 230 --test-timeout 60 --bench-timeout 100 --steps 100 > "$L/check.log" 2>&1
say "check (rc $?): $(tail -n 1 "$L/check.log")"

B=/tmp/psgd_session/psgd_gpu
tar -xJf "$archive" -C /tmp/psgd_session

# 2. The networks against PyTorch.
bench() {  # bench MODEL BATCHES STEPS
  local t=$(( $(left) - cluster_seconds - 60 ))
  [ "$t" -gt 20 ] || { say "bench $1: skipped, no time left"; return; }
  timeout "$t" bash "$B/gpu_bench.sh" --model "$1" --batches "$2" --steps "$3" --warmup 5 \
    > "$L/bench_$1.txt" 2>&1
  say "bench $1 (rc $?): $(tail -n 1 "$L/bench_$1.txt")"
}
bench resnet20 "128 512" 50
bench cnn10 "128 512" 50
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > /tmp/psgd_session/mem.txt 2>/dev/null &
smi=$!
bench wrn_28_10 128 10
kill "$smi" 2>/dev/null
say "wrn_28_10 peak GPU memory (MiB, nvidia-smi, whole GPU): $(sort -n /tmp/psgd_session/mem.txt | tail -n 1)"

# 3. The cluster: 1 ps, 2 GPU workers sharing the GPU.
t=$(( $(left) - 45 ))
if [ "$t" -lt 30 ]; then
  say "cluster: skipped, no time left"
else
  secs=$(( cluster_seconds < t - 20 ? cluster_seconds : t - 20 ))
  R=/tmp/psgd_session/run C=/tmp/psgd_session/cluster.pbtxt
  mkdir -p "$R"
  cat > "$C" <<EOF
name: "gpu-1ps-2gpu"
ps { address: "127.0.0.1:23120" }
worker { address: "127.0.0.1:23220" device: "$device" threads: 2 }
worker { address: "127.0.0.1:23221" device: "$device" threads: 2 }
training {
  mode: SYNC
  replicas_to_aggregate: 2
  total_num_replicas: 2
  batch_size: 128
  optimizer { kind: ADAM learning_rate: 0.001 }
  epochs: 100
  max_seconds: $secs
  eval_every: 100000
  eval_examples: 1000
  seed: 1
}
model { name: "resnet20" }
data { source: SYNTHETIC synthetic_train_size: 50000 synthetic_test_size: 1000 }
EOF
  "$B/run.sh" ps_server --config="$C" --task=ps:0 --run_dir="$R" > "$R/ps0.log" 2>&1 &
  ps0=$!
  for j in 0 1; do
    "$B/run.sh" worker --config="$C" --task=worker:$j --run_dir="$R" > "$R/w$j.log" 2>&1 &
    eval "w$j=\$!"
  done
  # The workers end at max_seconds; a worker still running 30 s later is
  # killed and counted as not ending cleanly.
  deadline=$(( $(date +%s) + secs + 30 ))
  while { kill -0 "$w0" 2>/dev/null || kill -0 "$w1" 2>/dev/null; } &&
        [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 1
  done
  ok=1
  for p in $w0 $w1; do
    if kill -0 "$p" 2>/dev/null; then kill -9 "$p"; ok=0; fi
    wait "$p" 2>/dev/null || ok=0
  done
  sleep 2; kill "$ps0" 2>/dev/null; wait "$ps0" 2>/dev/null
  tar -czf "$OUT/cluster.tar.gz" -C /tmp/psgd_session run
  say "cluster ($secs s, workers exited cleanly: $ok): $(grep -ho '"final_global_step":[0-9]*' "$R"/summary.json 2>/dev/null)"
fi
say "gpu_session: $(( $(date +%s) - start )) s"
