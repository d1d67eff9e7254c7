#!/usr/bin/env bash
# compute_bench on a layer-graph network with its PyTorch peer, one tiny
# round: the peer runs, and the ratio, FLOPs and rate lines are printed.
# (A wiring check: the figures themselves are docs/PERFORMANCE.md's.)
set -euo pipefail
bench=worker/bench/compute_bench
peer=worker/bench/torch_network_step.py
# conv=auto's choices, kept for the next process (docs/COMPUTE.md).
export PSGD_CONV_CACHE=$TEST_TMPDIR/conv_choices.tsv
rm -f "$PSGD_CONV_CACHE"
out=$("$bench" --model=resnet20 --batch=4 --threads=1 --steps=1 --warmup=0 \
  --peer_steps=1 --peak=false --network_peer_script="$peer" 2>&1) || {
  echo "$out"; exit 1; }
echo "$out"
grep -q "peer PyTorch resnet20: torch .* model=resnet20 .*params=272474" <<<"$out"
grep -Eq "^ratio_vs_torch=[0-9.]+$" <<<"$out"
# PyTorch as its CPU guides advise: channels-last, its own ratio.
grep -q "peer PyTorch resnet20 channels_last: torch .* model=resnet20 .*params=272474 memory_format=channels_last autocast=none" <<<"$out"
grep -Eq "^ratio_vs_torch_channels_last=[0-9.]+$" <<<"$out"
[ "$(tail -1 <<<"$out" | sed 's/=.*//')" = images_per_s ]
# The CPU is named as the kernel names it, and the kernels chosen on it.
model_name=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: //')
family=$(grep -m1 '^cpu family' /proc/cpuinfo | sed 's/^[^:]*: //')
grep -qF "cpu: $model_name (family $family model " <<<"$out"
grep -Eq "^kernels: cpu: 3x3 stride-1 convolutions (Winograd F\(2x2, 3x3\) or oneDNN direct, per shape as measured \(below\)|oneDNN direct), oneDNN's activation channel block (8|16|0), compute float32$" <<<"$out"
# Where Winograd applies, each 3x3 stride-1 shape's measured choice.
if grep -q "per shape as measured" <<<"$out"; then
  grep -Eq "^kernel chosen: conv2d x \[[0-9]+, 16, 32, 32\] .*: Winograd [0-9.]+ ms, direct [0-9.]+ ms: (Winograd|direct)$" <<<"$out"
  # The next process on this CPU takes every choice from the cache file,
  # unmeasured, and chooses the same.
  again=$("$bench" --model=resnet20 --batch=4 --threads=1 --steps=1 --warmup=0 \
    --peer=false --peak=false 2>&1) || { echo "$again"; exit 1; }
  first=$(grep '^kernel chosen: ' <<<"$out" | sed -E 's/: Winograd [0-9.]+ ms, direct [0-9.]+ ms: /: /' | sort)
  second=$(grep '^kernel chosen: ' <<<"$again" | sed -E "s/: Winograd [0-9.]+ ms, direct [0-9.]+ ms \(measured before, $(sed 's/[\/.]/\\&/g' <<<"$PSGD_CONV_CACHE")\): /: /" | sort)
  [ -n "$first" ] && [ "$first" = "$second" ] || {
    echo "first process chose:"; echo "$first"; echo "second:"; echo "$second"; exit 1; }
  [ "$(grep -c "	Winograd	\|	direct	" "$PSGD_CONV_CACHE")" = "$(wc -l <<<"$first")" ]
fi
# An unknown model is refused, naming the known ones.
if "$bench" --model=resnet21 --peer=false --peak=false >"$TEST_TMPDIR/o" 2>&1; then
  echo "an unknown model was accepted"; exit 1
fi
grep -q "unknown model 'resnet21'.*resnet20 (272,474 parameters)" "$TEST_TMPDIR/o"
# --eval: inference with and without the batch norm fold, for a layer graph
# only.
out=$("$bench" --model=resnet20 --batch=4 --threads=1 --steps=1 --warmup=0 \
  --peer=false --peak=false --eval 2>&1) || { echo "$out"; exit 1; }
grep -Eq "^round 1: eval resnet20, batch 4: folded [0-9.]+ images/s, unfolded [0-9.]+" <<<"$out"
grep -Eq "^eval_images_per_s=[0-9.]+ eval_fold_ratio=[0-9.]+$" <<<"$out"
if "$bench" --model=cifar10_tutorial --steps=1 --warmup=0 --peer=false \
  --peak=false --eval >"$TEST_TMPDIR/o" 2>&1; then
  echo "--eval of a hand-written model was accepted"; exit 1
fi
grep -q "eval: cifar10_tutorial is not a layer graph" "$TEST_TMPDIR/o"
echo "compute_bench_test: ok"
