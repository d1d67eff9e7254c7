#!/usr/bin/env bash
# The data plane's yardstick across two hosts: brings up two network-
# namespace hosts (scripts/run/netns_hosts.sh, prefix "ux"), runs
# ucx_echo_bench's server on ux0 and its client on ux1 (TCP and UCX rounds
# alternating in one run), prints the client's report with the machine's
# load, and always takes the hosts down again. As root.
#
#   scripts/bench/ucx_echo.sh [--rate=RATE] [--no-build] [BENCH FLAGS...]
#
# --rate caps both hosts' links with tc's tbf (1gbit, 10gbit, ...); without
# it the veth links run as fast as the machine copies. BENCH FLAGS go to the
# client (and --shards and --transports to the server too), e.g.
#   scripts/bench/ucx_echo.sh --shards=2 --workers=4 --seconds=10
#   scripts/bench/ucx_echo.sh --rate=10gbit --shards=1 --workers=1 --bytes=73000000
set -uo pipefail
rate="" build=1 client_flags=() server_flags=()
for a in "$@"; do
  case "$a" in
    --rate=*) rate=$a ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    --shards=*|--transports=*) client_flags+=("$a"); server_flags+=("$a") ;;
    --role=*|--host=*|--listen=*|--tcp_port=*|--ucx_port=*)
      echo "ucx_echo.sh: $a is the script's to set" >&2; exit 2 ;;
    --*) client_flags+=("$a") ;;
    *) echo "ucx_echo.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib/cluster.sh
if [ "$(id -u)" -ne 0 ]; then echo "ucx_echo.sh: needs root (ip netns)" >&2; exit 1; fi
if [ "$build" = 1 ]; then
  bazel build -c opt //worker/bench:ucx_echo_bench >&2 || {
    echo "ucx_echo.sh: build failed" >&2; exit 1; }
fi
bench=$(pwd)/bazel-bin/worker/bench/ucx_echo_bench
[ -x "$bench" ] || { echo "ucx_echo.sh: no $bench (build it, or drop --no-build)" >&2; exit 1; }
hosts=scripts/run/netns_hosts.sh
bash "$hosts" up 2 --prefix=ux ${rate:+"$rate"} || exit 1
out=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -9 "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  bash "$hosts" down --prefix=ux >/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
ip netns exec ux0 "$bench" --role=server --listen=198.18.0.10 \
  "${server_flags[@]+"${server_flags[@]}"}" >"$out/server.out" 2>"$out/server.err" &
server_pid=$!
await_line "$out/server.out" "$server_pid" '^ready$' || {
  cat "$out/server.err" >&2; echo "ucx_echo.sh: the server did not start" >&2; exit 1; }
cap=${rate#--rate=}
echo "ucx_echo.sh: $(date -u +%FT%TZ), links ${cap:-uncapped}, load $(cut -d' ' -f1-3 /proc/loadavg)"
ip netns exec ux1 "$bench" --role=client --host=ux0 \
  "${client_flags[@]+"${client_flags[@]}"}"
rc=$?
echo "ucx_echo.sh: load after $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
