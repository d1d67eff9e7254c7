#!/bin/bash
# Async 2 x 4: the relay delivering at once, or waiting up to 500 us for 4
# decisions, or 2 ms for 8 (probe.patch).
W=${1:-4}
for r in 1 2 3; do
  for v in "X=1" "PSGD_PROBE_LINGER_US=500 PSGD_PROBE_LINGER_N=4" "PSGD_PROBE_LINGER_US=2000 PSGD_PROBE_LINGER_N=8" "PSGD_PROBE_LINGER_US=2000 PSGD_PROBE_LINGER_N=8 PSGD_PROBE_PARALLEL=1"; do
    out=$(env $v /tmp/ps_bench_probe2 --only=ps --mode=async --shards=2 --workers=$W --seconds=4 --rounds=1 2>&1)
    echo "async W=$W $r [$v] $(echo "$out" | grep -E '^parameter server \(fp32\)' | sed 's/parameter server (fp32): *//;s/ GB.*pulled,//')"
  done
done
