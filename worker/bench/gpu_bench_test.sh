#!/usr/bin/env bash
# gpu_bench on a GPU (tagged gpu): the weights stay on the device during the
# timed steps (only the loss and the weight-decay terms come back, well under
# a kilobyte a step against the model's 4.3 MB of weights) and nothing is
# allocated after the warm-up (docs/GPU.md, The benchmark).
set -euo pipefail
bench=${TEST_SRCDIR:?run under bazel test}/psgd/worker/bench/gpu_bench
out=$("$bench" --batch=32 --warmup=2 --steps=5)
echo "$out"
fail() { echo "FAIL: $*"; exit 1; }
line=$(grep "^allocations_in_steps=" <<<"$out") || fail "no allocations_in_steps line"
allocations=$(sed 's/^allocations_in_steps=\([0-9]*\) .*/\1/' <<<"$line")
bytes=$(sed 's/.*host_bytes_per_step=\([0-9.]*\).*/\1/' <<<"$line")
[ "$allocations" = 0 ] || fail "the timed steps made $allocations allocations"
awk -v b="$bytes" 'BEGIN { exit !(b > 0 && b < 1024) }' ||
  fail "host_bytes_per_step=$bytes: not the loss and decay terms alone (weights copied back?)"
echo "PASS"
