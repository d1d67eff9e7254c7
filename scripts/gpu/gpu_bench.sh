#!/usr/bin/env bash
# Train-step throughput of the cifar10 tutorial model on this machine's GPU:
# ours (//worker/bench:gpu_bench) against PyTorch's
# (../shared/peers/torch_cifar10_step.py --device cuda), as ratios; with
# --model NAME a layer-graph network's (gpu_bench --model=NAME against
# worker/bench/torch_network_step.py --device cuda --model NAME).
#
#   scripts/gpu/gpu_bench.sh [--bench CMD] [--peer PATH] [--python PY]
#                        [--batches "128 512"] [--steps N] [--warmup N]
#                        [--model resnet20]
#
# Ours runs twice per batch: float32 (tf32=off, the tests' setting) and
# tf32=on. PyTorch runs with its defaults, which allow TF32 in cuDNN
# convolutions (torch.backends.cudnn.allow_tf32) but not in matmuls, and
# choose cuDNN algorithms by heuristics (cudnn.benchmark is off). So
# tf32/torch is the like-for-like ratio and fp32/torch the one with our
# stricter math.
#
# CMD defaults to the bundle's `run.sh bin/gpu_bench` when this script sits
# in a bundle (scripts/gpu/pack_gpu_bundle.sh), else bazel-bin's gpu_bench
# (built with -c opt if missing). PATH defaults to the first
# torch_cifar10_step.py (torch_network_step.py with --model) found in the
# bundle's peers/, worker/bench/, ../shared/peers/ or shared/peers/. Ends
# with one line: `ratio_tf32_128=X ratio_fp32_128=Y ...`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

bench=""
peer=""
python=python3
batches="128 512"
model=cifar10_tutorial
steps=200
warmup=20
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench="$2"; shift 2 ;;
    --peer) peer="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ -z "$bench" ]; then
  if [ -x "$here/run.sh" ] && [ -x "$here/bin/gpu_bench" ]; then
    bench="$here/run.sh $here/bin/gpu_bench"
  else
    root="$(cd "$here/../.." && pwd)"
    if [ ! -x "$root/bazel-bin/worker/bench/gpu_bench" ]; then
      (cd "$root" && bazel build -c opt //worker/bench:gpu_bench)
    fi
    bench="$root/bazel-bin/worker/bench/gpu_bench"
  fi
fi
# The tutorial's peer, or a layer-graph network's (with --model NAME).
peer_script=torch_cifar10_step.py peer_args=()
if [ "$model" != cifar10_tutorial ]; then
  peer_script=torch_network_step.py peer_args=(--model "$model")
fi
if [ -z "$peer" ]; then
  for p in "$here/peers" "$here/../../worker/bench" "$here/../../shared/peers" \
           "$here/../../../shared/peers" "$PWD/shared/peers" "$PWD/../shared/peers"; do
    if [ -f "$p/$peer_script" ]; then peer="$p/$peer_script"; break; fi
  done
fi
[ -n "$peer" ] && [ -f "$peer" ] || { echo "gpu_bench.sh: $peer_script not found; pass --peer PATH" >&2; exit 1; }

# The value of the last `images_per_s=X` in a run's output.
rate() { grep -o 'images_per_s=[0-9.]*' | tail -1 | cut -d= -f2; }

summary=""
printf '%-6s %12s %12s %12s %11s %11s\n' batch ours_fp32 ours_tf32 torch fp32/torch tf32/torch
for b in $batches; do
  log_fp32=$($bench --model="$model" --backend=gpu:0 --batch="$b" --steps="$steps" --warmup="$warmup" 2>&1) \
    || { echo "$log_fp32" >&2; exit 1; }
  log_tf32=$($bench --model="$model" --backend=gpu:0:tf32=on --batch="$b" --steps="$steps" --warmup="$warmup" 2>&1) \
    || { echo "$log_tf32" >&2; exit 1; }
  log_torch=$("$python" "$peer" --device cuda --batch "$b" --steps "$steps" --warmup "$warmup" "${peer_args[@]}" 2>&1) \
    || { echo "$log_torch" >&2; exit 1; }
  fp32=$(rate <<<"$log_fp32")
  tf32=$(rate <<<"$log_tf32")
  torch=$(rate <<<"$log_torch")
  r_fp32=$(awk -v a="$fp32" -v b="$torch" 'BEGIN { printf "%.2f", a / b }')
  r_tf32=$(awk -v a="$tf32" -v b="$torch" 'BEGIN { printf "%.2f", a / b }')
  printf '%-6s %12s %12s %12s %11s %11s\n' "$b" "$fp32" "$tf32" "$torch" "$r_fp32" "$r_tf32"
  {
    echo "--- batch $b: ours (fp32)"; echo "$log_fp32"
    echo "--- batch $b: ours (tf32)"; echo "$log_tf32"
    echo "--- batch $b: torch"; echo "$log_torch"
  } >> "${TMPDIR:-/tmp}/gpu_bench_details.log"
  summary="$summary ratio_fp32_$b=$r_fp32 ratio_tf32_$b=$r_tf32"
done
echo "(each run's full output: ${TMPDIR:-/tmp}/gpu_bench_details.log)"
echo "${summary# }"
