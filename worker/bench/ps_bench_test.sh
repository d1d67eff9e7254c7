#!/usr/bin/env bash
# ps_bench runs each set it is asked for and prints its figures: the
# parameter server over gRPC and over UCX (whose workers' bytes went over
# UCX: the clients' own count) and the TCP echo, with the ratios between
# them; an unknown set is refused by name. A benchmark's figures are not
# judged here.
set -euo pipefail
bench=$(pwd)/worker/bench/ps_bench
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$("$bench" --only=ps,ucx,tcp --seconds=0.6 --rounds=2 --warmup_seconds=0.2 2>&1) ||
  { rc=$?; echo "$out"; fail "ps_bench exited $rc"; }
echo "$out" | grep -v '^\['
for line in "parameter server (fp32):" "parameter server over UCX (tcp):" "tcp echo:"; do
  grep -qE "^$(sed 's/[()]/\\&/g' <<<"$line") +[0-9.]+ worker steps/s" <<<"$out" ||
    fail "no '$line' figure"
done
mb=$(sed -n 's/^(\([0-9.]*\) MB sent over UCX by the UCX set.s workers)$/\1/p' <<<"$out")
[ -n "$mb" ] || fail "no UCX byte count"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$mb') > 1 else 1)" ||
  fail "the UCX set's workers sent $mb MB over UCX"
for r in ratio_vs_tcp ucx_ratio_vs_tcp ucx_vs_grpc; do
  grep -qE "^$r=[0-9.]+$" <<<"$out" || fail "no $r"
done
if err=$("$bench" --only=ps,rdma 2>&1); then fail "--only=ps,rdma ran"; fi
grep -qF "ps_bench: --only names 'rdma'; it takes ps, ucx, echo and tcp" <<<"$err" ||
  fail "--only=ps,rdma said: $err"
echo PASS
