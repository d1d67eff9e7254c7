#!/usr/bin/env bash
# ucx_echo_bench on loopback, one short round of each: the server starts,
# the client's TCP and UCX workers echo every shard's bytes, and the rates,
# the CPU per step and both ratios are printed. (A wiring check: the figures
# are docs/PERFORMANCE.md's, measured across network-namespace hosts with
# scripts/bench/ucx_echo.sh.) Bad flags are refused with the reason.
set -euo pipefail
source scripts/lib/cluster.sh
bench=worker/bench/ucx_echo_bench
out_dir=${TEST_TMPDIR:-$(mktemp -d)}
server_pid=""
trap '[ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null || true' EXIT

# Three shards take ports base..base+3 (TCP, the last the control port) and
# ucx..ucx+2: a base from this process's id, another on a clash.
for attempt in 1 2 3; do
  base=$((20000 + ($$ * 7 + attempt * 613) % 20000))
  ucx=$((base + 20000))
  "$bench" --role=server --listen=127.0.0.1 --tcp_port=$base --ucx_port=$ucx \
    --shards=3 >"$out_dir/server.out" 2>"$out_dir/server.err" &
  server_pid=$!
  await_line "$out_dir/server.out" "$server_pid" '^ready$' && break
  kill -9 "$server_pid" 2>/dev/null || true
  server_pid=""
done
[ -n "$server_pid" ] || { cat "$out_dir/server.err"; echo "no server"; exit 1; }

out=$("$bench" --role=client --host=127.0.0.1 --tcp_port=$base --ucx_port=$ucx \
  --shards=3 --workers=2 --bytes=300000 --seconds=0.4 --rounds=2 2>&1) || {
  echo "$out"; exit 1; }
echo "$out"
grep -q "^cpu: " <<<"$out"
grep -q "^shards 3, workers 2, 300000 bytes per shard each way, UCX transports tcp, 2 rounds" <<<"$out"
grep -Eq "^tcp echo: [0-9.]+ worker steps/s, [0-9.]+ GB/s, cpu [0-9.]+ ms per worker step" <<<"$out"
grep -Eq "^ucx echo: [0-9.]+ worker steps/s, [0-9.]+ GB/s, cpu [0-9.]+ ms per worker step" <<<"$out"
grep -Eq "^ucx_vs_tcp=[0-9.]+$" <<<"$out"
grep -Eq "^ucx_cpu_vs_tcp=[0-9.]+$" <<<"$out"
# Steps were made (a rate of 0.0 would mean nothing moved).
! grep -Eq "^(tcp|ucx) echo: 0.0 worker" <<<"$out" || { echo "no steps"; exit 1; }

# Bad flags: refused, naming what is wrong.
if "$bench" --role=client --host=127.0.0.1 --tcp_port=$base --ucx_port=$ucx \
  --shards=3 --only=tcp,rdma >"$out_dir/bad" 2>&1; then
  echo "--only=tcp,rdma was accepted"; exit 1
fi
grep -q "only: 'rdma' is neither tcp nor ucx" "$out_dir/bad"
if "$bench" --role=peer >"$out_dir/bad" 2>&1; then
  echo "--role=peer was accepted"; exit 1
fi
grep -q "role='peer': server or client" "$out_dir/bad"
echo "ucx_echo_bench_test: ok"
