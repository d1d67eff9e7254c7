#!/bin/bash
# ee8e10c against main (eb5608c's ps_bench, -c opt), alternating, equal malloc.
export MALLOC_MMAP_THRESHOLD_=4194304 MALLOC_TRIM_THRESHOLD_=33554432
R=${1:-10}
for r in $(seq 1 $R); do
  for set in "sync 2 4" "async 2 4" "sync 1 1"; do
    read -r mode s w <<<"$set"
    if [ $((r % 2)) -eq 1 ]; then order="ee8 now"; else order="now ee8"; fi
    for b in $order; do
      if [ $b = ee8 ]; then bin=/tmp/bench/ps_bench_ee8; else bin=/tmp/ps_bench_now; fi
      out=$($bin --only=ps --mode=$mode --shards=$s --workers=$w --seconds=4 --rounds=1 2>&1 | grep -E "^parameter server \(fp32\)" | sed 's/parameter server (fp32): *//; s/ GB\/s pushed + pulled,//')
      echo "r=$r $mode ${s}x$w $b load=$(cut -d' ' -f1 /proc/loadavg) $out"
    done
  done
done
