#!/bin/bash
# A/B: the same probe binary, legs in sequence (as main) vs in parallel.
for mode in async sync; do
for r in 1 2 3 4; do
  for v in seq par; do
    if [ $v = par ]; then e="PSGD_PROBE_PARALLEL=1"; else e="X=1"; fi
    out=$(env $e /tmp/ps_bench_probe2 --only=ps --mode=$mode --shards=2 --workers=4 --seconds=4 --rounds=1 2>&1)
    echo "$mode $r $v $(echo "$out" | grep -E '^parameter server \(fp32\)' | sed 's/parameter server (fp32): *//') $(echo "$out" | grep -c -i 'error\|warn.*staged')"
  done
done
done
