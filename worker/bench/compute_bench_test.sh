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
# --breakdown: a line per layer, then one per kind of layer ("by kind:")
# holding that kind's layers' forward + backward, as summed here from the
# layer lines (fixed columns: the name in 26, the kind in 15, then the
# forward and backward ms).
out=$("$bench" --model=resnet20 --batch=4 --threads=1 --steps=1 --warmup=0 \
  --peer=false --peak=false --breakdown 2>&1) || { echo "$out"; exit 1; }
summed=$(grep -E '^  [a-z].{25} [a-z_]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%' <<<"$out" |
  awk '{ kind = substr($0, 30, 15); gsub(/ /, "", kind);
         split(substr($0, 45), f, " "); ms[kind] += f[1] + f[2]; n[kind] += 2 }
       END { for (k in ms) printf "%s %.3f %d\n", k, ms[k], n[k] }' | sort)
printed=$(sed -nE 's/^by kind: ([a-z_]+) ([0-9.]+) ms .*/\1 \2/p' <<<"$out" | sort)
[ "$(wc -l <<<"$summed")" -ge 5 ] && grep -q '^conv ' <<<"$printed" || {
  echo "kinds summed here:"; echo "$summed"; echo "printed:"; echo "$printed"
  exit 1; }
# Each printed figure is rounded to 0.0005 ms: a kind's sum of N of them
# may be N x 0.0005 off, its own line 0.0005 more.
paste -d' ' <(echo "$summed") <(echo "$printed") | awk '
  { bound = ($3 + 1) * 0.0005 + 1e-9 }
  $1 != $4 || ($2 - $5) > bound || ($5 - $2) > bound {
    print "by kind differs from the layers: " $0; bad = 1 }
  END { exit bad }'
# The peer's --profile: a line per kind, and "all" their sum.
if python3 -c 'import torch' 2>/dev/null; then
  out=$(python3 "$peer" --model resnet20 --batch 2 --steps 1 --warmup 0 \
    --profile 2>&1) || { echo "$out"; exit 1; }
  grep -Eq '^profile: conv [0-9.]+ ms' <<<"$out"
  sed -nE 's/^profile: ([a-z_]+) ([0-9.]+) ms.*/\1 \2/p' <<<"$out" |
    awk '$1 == "all" { all = $2; next } { sum += $2 }
         END { if (all == "" || sum - all > 0.01 || all - sum > 0.01) {
                 print "profile: kinds add up to " sum ", all " all; exit 1 } }'
fi
echo "compute_bench_test: ok"
