#!/bin/bash
# ee8e10c, main and the probe build (probe.patch), one ps_bench invocation
# each per round, the order reversed every other round.
#   run3.sh MODE WORKERS ROUNDS, with PROBE_ENV the probe arm's variables
#   (async_vs_ee8e10c.txt: PROBE_ENV="PSGD_PROBE_LINGER_US=2000
#   PSGD_PROBE_LINGER_N=8 PSGD_PROBE_PARALLEL=1"; sync_vs_ee8e10c.txt:
#   PROBE_ENV=PSGD_PROBE_PARALLEL=1).
M=${1:-async}; W=${2:-4}; R=${3:-6}
export MALLOC_MMAP_THRESHOLD_=4194304 MALLOC_TRIM_THRESHOLD_=33554432
for r in $(seq 1 $R); do
  arms=("ee8:/tmp/bench/ps_bench_ee8:X=1" "now:/tmp/ps_bench_now:X=1" "probe:/tmp/ps_bench_probe2:${PROBE_ENV:-PSGD_PROBE_PARALLEL=1}")
  if [ $((r % 2)) = 0 ]; then arms=("${arms[2]}" "${arms[1]}" "${arms[0]}"); fi
  for a in "${arms[@]}"; do
    name=${a%%:*}; rest=${a#*:}; bin=${rest%%:*}; e=${rest#*:}
    out=$(env $e $bin --only=ps --mode=$M --shards=2 --workers=$W --seconds=4 --rounds=1 2>&1)
    echo "$M W=$W r$r $name $(echo "$out" | grep -E '^parameter server \(fp32\)' | sed 's/parameter server (fp32): *//;s/ GB.*pulled,//')"
  done
done
