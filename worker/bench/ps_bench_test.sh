#!/usr/bin/env bash
# ps_bench runs each set it is asked for and prints its figures: the
# parameter server over gRPC and over UCX (whose workers' bytes went over
# UCX: the clients' own count) and the TCP echo, with the ratios between
# them; an unknown set is refused by name. A benchmark's figures are not
# judged here.
set -euo pipefail
bench=$(pwd)/worker/bench/ps_bench
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$("$bench" --only=ps,ucx,floor,tcp --seconds=0.6 --rounds=2 --warmup_seconds=0.2 2>&1) ||
  { rc=$?; echo "$out"; fail "ps_bench exited $rc"; }
echo "$out" | grep -v '^\['
for line in "parameter server (fp32):" "parameter server over UCX (tcp):" \
  "in process (no transport):" "tcp echo:"; do
  grep -qE "^$(sed 's/[()]/\\&/g' <<<"$line") +[0-9.]+ worker steps/s" <<<"$out" ||
    fail "no '$line' figure"
done
mb=$(sed -n 's/^(\([0-9.]*\) MB sent over UCX by the UCX set.s workers)$/\1/p' <<<"$out")
[ -n "$mb" ] || fail "no UCX byte count"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$mb') > 1 else 1)" ||
  fail "the UCX set's workers sent $mb MB over UCX"
for r in ratio_vs_tcp ucx_ratio_vs_tcp ucx_vs_grpc ratio_vs_floor ucx_ratio_vs_floor; do
  grep -qE "^$r=[0-9.]+$" <<<"$out" || fail "no $r"
done
# cpu_floor_ms is the in-process set's CPU per worker step plus the TCP
# echo's, each as printed on its own line.
figure() { sed -nE "s/^$(sed 's/[()]/\\&/g' <<<"$1") +[0-9.]+ worker steps\/s, [0-9.]+ GB\/s pushed \+ pulled, ([0-9.]+) CPU ms per worker step$/\1/p" <<<"$out"; }
inproc=$(figure "in process (no transport):")
tcpms=$(figure "tcp echo:")
floor=$(sed -nE 's/^cpu_floor_ms=([0-9.]+) .*/\1/p' <<<"$out")
[ -n "$inproc" ] && [ -n "$tcpms" ] && [ -n "$floor" ] ||
  fail "no CPU figures (in process '$inproc', tcp '$tcpms', floor '$floor')"
/usr/bin/python3 -c "import sys; sys.exit(0 if abs($inproc + $tcpms - $floor) < 0.011 else 1)" ||
  fail "cpu_floor_ms=$floor is not $inproc + $tcpms"
if err=$("$bench" --only=ps,rdma 2>&1); then fail "--only=ps,rdma ran"; fi
grep -qF "ps_bench: --only names 'rdma'; it takes ps, ucx, floor, echo and tcp" <<<"$err" ||
  fail "--only=ps,rdma said: $err"
echo PASS
