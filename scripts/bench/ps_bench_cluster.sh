#!/usr/bin/env bash
# ps_cluster_bench against real ps_server processes: starts the ps tasks of a
# cluster config (on this machine), runs P ps_cluster_bench client processes with
# W/P worker threads each, prints each one's report and
# their sum and the servers' and the clients' CPU per worker step (their
# utime + stime over the middle of the measured seconds, divided by the
# summed steps), and stops the servers.
#
#   scripts/bench/ps_bench_cluster.sh [--workers=W] [--processes=P] [--seconds=S]
#                               [--no-build] [--netns] CONFIG
#
# Defaults: W = the config's number of workers, P = W (one process per
# worker, as a real cluster has), 10 s. The config's mode, wire dtypes and
# token apply. --netns runs each server inside the network namespace of its
# address's host and each client process inside the namespace of its first
# worker's host (scripts/run/netns_hosts.sh up N [--rate=RATE] makes them; as
# root), so the bytes cross the namespaces' links and their caps. Servers
# on real hosts are measured by starting them there and running
# `bazel-bin/worker/bench/ps_cluster_bench --config=CONFIG --workers=K --first_worker=J` on
# each client host.
set -uo pipefail
here=$(pwd)
workers="" processes="" seconds=10 build=1 config="" netns=0
for a in "$@"; do
  case "$a" in
    --workers=*) workers=${a#--workers=} ;;
    --processes=*) processes=${a#--processes=} ;;
    --seconds=*) seconds=${a#--seconds=} ;;
    --no-build) build=0 ;;
    --netns) netns=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "ps_bench_cluster.sh: unknown option '$a'" >&2; exit 2 ;;
    *) case "$a" in /*) config=$a ;; *) config="$here/$a" ;; esac ;;
  esac
done
[ -f "$config" ] || { echo "ps_bench_cluster.sh: no config file '$config'" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib/cluster.sh
if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker/bench:ps_cluster_bench //configs:cluster_tasks >&2 || {
    echo "ps_bench_cluster.sh: build failed" >&2; exit 1; }
fi
bin=bazel-out/k8-opt/bin
PSGD_BIN=$bin
tasks=$("$bin/configs/cluster_tasks" --config="$config") || exit 1
num_workers=$(grep -c '^worker:' <<<"$tasks")
[ -z "$workers" ] && workers=$num_workers
[ -z "$processes" ] && processes=$workers
for v in workers processes seconds; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "ps_bench_cluster.sh: --$v=${!v} must be a positive integer" >&2; exit 2; }
done
[ "$workers" -le "$num_workers" ] || { echo "ps_bench_cluster.sh: --workers=$workers > the config's $num_workers workers" >&2; exit 2; }
[ "$processes" -le "$workers" ] || { echo "ps_bench_cluster.sh: --processes=$processes > --workers=$workers" >&2; exit 2; }

# TASK -> host (its address without the port), for --netns.
declare -A host_of
while read -r task address; do host_of[$task]=${address%:*}; done \
  < <("$bin/configs/cluster_tasks" --config="$config" --addresses)
# on_host TASK COMMAND...: becomes COMMAND (exec), in TASK's namespace with
# --netns; call it in a subshell, "(on_host ...) &", so that $! is the
# command's own pid.
on_host() {
  local task=$1; shift
  [ "$netns" = 1 ] && exec ip netns exec "${host_of[$task]}" "$@"
  exec "$@"
}
if [ "$netns" = 1 ]; then
  for t in $tasks; do
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "${host_of[$t]}" || {
      echo "ps_bench_cluster.sh: --netns: $t's host '${host_of[$t]}' is not a network namespace here (scripts/run/netns_hosts.sh up N)" >&2
      exit 2; }
  done
fi

out=$(mktemp -d /tmp/psgd_ps_bench.XXXXXX)
# The servers' and clients' logs stay where a client failed (the message
# names the folder) and go otherwise.
keep_logs=0
trap 'stop_tasks TERM; wait 2>/dev/null; [ "$keep_logs" = 1 ] || rm -rf "$out"' EXIT
for t in $tasks; do
  [[ $t == ps:* ]] || continue
  in=(); [ "$netns" = 1 ] && in=(--netns="${host_of[$t]}")
  start_task ${in[@]+"${in[@]}"} "$config" "$t" "$out/run" "$out/${t/:/-}.log"
done

# Wait until every server listens (30 s at most).
while read -r task address; do
  [[ $task == ps:* ]] || continue
  host=${address%:*} port=${address##*:}
  [ "$host" = "0.0.0.0" ] && host=127.0.0.1
  for ((i = 0; i < 300; i++)); do
    (on_host worker:0 bash -c "exec 3<>/dev/tcp/$host/$port") 2>/dev/null && break
    sleep 0.1
  done
done < <("$bin/configs/cluster_tasks" --config="$config" --addresses)

client_pids=()
first=0
for ((p = 0; p < processes; p++)); do
  n=$(( workers / processes + (p < workers % processes ? 1 : 0) ))
  (on_host "worker:$first" "$bin/worker/bench/ps_cluster_bench" --config="$config" --workers="$n" \
    --first_worker="$first" --seconds="$seconds") >"$out/client-$p.log" 2>&1 &
  client_pids+=($!)
  first=$((first + n))
done
# The servers' and the clients' CPU (utime + stime of every ps task and
# client process, /proc/PID/stat) over the middle of the clients' measured
# seconds: from 1 s after their 1 s of
# warmup to 1 s before the end (--seconds of 4 or more).
cpu_ticks_of() {
  local sum=0 pid f
  for pid in "$@"; do
    f=$(cut -d')' -f2- "/proc/$pid/stat" 2>/dev/null) || continue
    read -r -a f <<<"$f"
    sum=$((sum + f[11] + f[12]))  # fields 14 and 15: utime, stime
  done
  echo "$sum"
}
cpu_window="" cpu_ticks="" client_ticks=""
if [ "$seconds" -ge 4 ]; then
  sleep 2
  c0=$(cpu_ticks_of "${task_pids[@]}") k0=$(cpu_ticks_of "${client_pids[@]}") t0=$(date +%s.%N)
  sleep $((seconds - 2))
  c1=$(cpu_ticks_of "${task_pids[@]}") k1=$(cpu_ticks_of "${client_pids[@]}") t1=$(date +%s.%N)
  cpu_window=$(/usr/bin/python3 -c "print($t1 - $t0)")
  cpu_ticks=$((c1 - c0)) client_ticks=$((k1 - k0))
fi
rc=0
for pid in "${client_pids[@]}"; do wait "$pid" || rc=1; done
for ((p = 0; p < processes; p++)); do
  echo "--- client process $p"
  cat "$out/client-$p.log"
done
[ "$rc" = 0 ] || { keep_logs=1; echo "ps_bench_cluster.sh: a client failed; logs in $out" >&2; exit 1; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# The sum over the client processes (each measured the same --seconds).
cat "$out"/client-*.log | CPU_WINDOW="$cpu_window" CPU_TICKS="$cpu_ticks" CLIENT_TICKS="$client_ticks" \
  CLK_TCK="$(getconf CLK_TCK)" /usr/bin/python3 -c '
import os, re, sys
servers, steps, mb = {}, 0.0, 0.0
for line in sys.stdin:
    m = re.match(r"server (\d+) \((.*)\): ([\d.]+) MB/s", line)
    if m: servers[m.group(1), m.group(2)] = servers.get((m.group(1), m.group(2)), 0) + float(m.group(3))
    m = re.match(r"all workers: ([\d.]+) steps/s, ([\d.]+) MB/s", line)
    if m: steps += float(m.group(1)); mb += float(m.group(2))
for (i, a), v in sorted(servers.items()):
    print(f"total server {i} ({a}): {v:.1f} MB/s pushed + pulled")
print(f"total: {steps:.1f} worker steps/s, {mb:.1f} MB/s")
window = os.environ["CPU_WINDOW"]
if window and steps > 0:
    for who, ticks in (("servers", "CPU_TICKS"), ("clients", "CLIENT_TICKS")):
        busy = int(os.environ[ticks]) / int(os.environ["CLK_TCK"]) / float(window)
        print(f"{who}\x27 CPU: {busy:.2f} cores busy, {1000 * busy / steps:.2f} ms "
              f"per worker step (over {float(window):.1f} s of the measured seconds)")
'
