# Shared by the cluster tests: binaries from the runfiles, free loopback
# ports, configs, and checks on a run directory. Source it.
set -euo pipefail

RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
PS_SERVER=$RUNFILES/ps/ps_server
WORKER=$RUNFILES/worker/worker
LAUNCH=$RUNFILES/scripts/run/launch.sh
COMPARE=$RUNFILES/scripts/run/compare.py
PY=/usr/bin/python3
TMP=${TEST_TMPDIR:?}

# N free TCP ports on 127.0.0.1, one per line (bound, read, released).
free_ports() {
  "$PY" - "$1" <<'PYEOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PYEOF
}

# write_config FILE NAME MODE PS WORKERS N STEPS LEASE_SECONDS
write_config() {
  local file=$1 name=$2 mode=$3 ps=$4 workers=$5 n=$6 steps=$7 lease=$8
  local ports
  ports=($(free_ports $((ps + workers))))
  {
    echo "name: \"$name\""
    for ((i = 0; i < ps; i++)); do echo "ps { address: \"127.0.0.1:${ports[i]}\" }"; done
    for ((i = 0; i < workers; i++)); do
      echo "worker { address: \"127.0.0.1:${ports[ps + i]}\" threads: 1 }"
    done
    echo "training { mode: $mode"
    [ "$mode" = SYNC ] && echo "  replicas_to_aggregate: $n"
    echo "  batch_size: 16 steps: $steps eval_every: 10 eval_examples: 200 }"
    echo "data { source: SYNTHETIC synthetic_train_size: 1200 synthetic_test_size: 300 }"
    echo "worker_lease_seconds: $lease"
  } > "$file"
}

# start_cluster CFG RUN PS WORKERS: starts ps:0..PS-1 and worker:0..WORKERS-1
# of CFG with run directory RUN, their logs in RUN/psI.log and RUN/wJ.log.
# Their pids go into the arrays ps_pids and w_pids, and into pids (for a
# cleanup trap).
start_cluster() {
  local cfg=$1 run=$2 nps=$3 nw=$4 i j
  ps_pids=() w_pids=()
  for ((i = 0; i < nps; i++)); do
    "$PS_SERVER" --config="$cfg" --task=ps:$i --run_dir="$run" >"$run/ps$i.log" 2>&1 &
    ps_pids+=($!); pids+=($!)
  done
  for ((j = 0; j < nw; j++)); do
    "$WORKER" --config="$cfg" --task=worker:$j --run_dir="$run" >"$run/w$j.log" 2>&1 &
    w_pids+=($!); pids+=($!)
  done
}

# wait_exit PID SECONDS: the process's exit status, or fails after SECONDS.
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "process $pid still running after $2 s (hang)"
    sleep 0.2
  done
  wait "$pid"
}

# train_lines FILE: the number of "train" lines of a worker's metrics.
train_lines() {
  [ -f "$1" ] || { echo 0; return; }
  grep -c '"kind":"train"' "$1" || true
}

# last_step FILE: the step of the last "train" line of a worker's metrics.
last_step() {
  # Complete lines only: the worker may be writing the last one.
  "$PY" - "$1" <<'PYEOF'
import json, sys
step = 0
with open(sys.argv[1]) as f:
    for line in f:
        if not line.endswith("\n"):
            break
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("kind") == "train":
            step = r["step"]
print(step)
PYEOF
}

# await_steps FILE N SECONDS PID: waits until FILE has N train lines, while
# PID lives; fails after SECONDS.
await_steps() {
  local file=$1 n=$2 deadline=$((SECONDS + $3)) pid=$4
  until [ "$(train_lines "$file")" -ge "$n" ]; do
    [ $SECONDS -lt $deadline ] || fail "$file: fewer than $n steps after $3 s"
    kill -0 "$pid" 2>/dev/null || fail "process $pid ended before $file had $n steps"
    sleep 0.1
  done
}

# await_global_step FILE N SECONDS PID: waits until the newest train line of
# FILE (a worker's metrics) is at global step N or later, while PID lives;
# fails after SECONDS. (In async mode the chief, which also evaluates, makes
# far fewer steps of its own than the others: count the cluster's steps.)
await_global_step() {
  local file=$1 n=$2 deadline=$((SECONDS + $3)) pid=$4
  until [ "$(train_lines "$file")" -gt 0 ] && [ "$(last_step "$file")" -ge "$n" ]; do
    [ $SECONDS -lt $deadline ] || fail "$file: not at step $n after $3 s"
    kill -0 "$pid" 2>/dev/null || fail "process $pid ended before $file reached step $n"
    sleep 0.1
  done
}

# mean_loss FILE FIRST|LAST N: the mean loss of the first or last N train lines.
mean_loss() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
path, which, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
losses = [r["loss"] for r in map(json.loads, open(path)) if r.get("kind") == "train"]
part = losses[:n] if which == "FIRST" else losses[-n:]
print(sum(part) / len(part))
PYEOF
}

# json_field FILE KEY
json_field() {
  "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

fail() { echo "FAIL: $*" >&2; exit 1; }
