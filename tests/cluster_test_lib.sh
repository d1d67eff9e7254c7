# Shared by the cluster tests: binaries from the runfiles, the tests'
# config, and checks on a run directory; free ports, configs, starting and
# awaiting tasks and last_step come from scripts/lib/cluster.sh. Source it.
set -euo pipefail

RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
source "$RUNFILES/scripts/lib/cluster.sh"
PSGD_BIN=$RUNFILES
PS_SERVER=$RUNFILES/ps/ps_server
WORKER=$RUNFILES/worker/worker
LAUNCH=$RUNFILES/scripts/run/launch.sh
COMPARE=$RUNFILES/scripts/run/compare.py
PY=/usr/bin/python3
TMP=${TEST_TMPDIR:?}

# write_config FILE NAME MODE PS WORKERS N STEPS LEASE_SECONDS: the tests'
# cluster (free loopback ports, synthetic data, batch 16), written by
# scripts/lib/cluster.sh.
write_config() {
  local file=$1 name=$2 mode=$3 ps=$4 workers=$5 n=$6 steps=$7 lease=$8 sync=()
  if [ "$mode" = SYNC ]; then sync=(n="$n"); fi
  write_cluster_config "$file" "$name" mode="$mode" ps="$ps" workers="$workers" \
    ${sync[@]+"${sync[@]}"} batch=16 steps="$steps" \
    training="eval_every: 10 eval_examples: 200" \
    data="source: SYNTHETIC synthetic_train_size: 1200 synthetic_test_size: 300" \
    extra="worker_lease_seconds: $lease"
}

# start_cluster CFG RUN PS WORKERS: starts ps:0..PS-1 and worker:0..WORKERS-1
# of CFG with run directory RUN, their logs in RUN/psI.log and RUN/wJ.log.
# Their pids go into the arrays ps_pids and w_pids, and into pids (for a
# cleanup trap).
start_cluster() {
  local cfg=$1 run=$2 nps=$3 nw=$4 i j
  ps_pids=() w_pids=()
  for ((i = 0; i < nps; i++)); do
    start_task "$cfg" "ps:$i" "$run" "$run/ps$i.log"
    ps_pids+=($!); pids+=($!)
  done
  for ((j = 0; j < nw; j++)); do
    start_task "$cfg" "worker:$j" "$run" "$run/w$j.log"
    w_pids+=($!); pids+=($!)
  done
}

# wait_exit PID SECONDS: the process's exit status, or fails after SECONDS.
wait_exit() {
  local rc=0
  wait_task "$1" "$2" || rc=$?
  ! kill -0 "$1" 2>/dev/null || fail "process $1 still running after $2 s (hang)"
  return $rc
}

# train_lines FILE: the number of "train" lines of a worker's metrics.
train_lines() {
  [ -f "$1" ] || { echo 0; return; }
  grep -c '"kind":"train"' "$1" || true
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
  /usr/bin/python3 "$RUNFILES/scripts/lib/runs.py" mean-loss "$1" "${2,,}" "$3"
}

# train_line_count FILE: the train lines of a task's metrics.
train_line_count() {
  /usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import runs; print(len(runs.train_lines(sys.argv[2])))' \
    "$RUNFILES/scripts/lib" "$1"
}

# json_field FILE KEY
json_field() {
  "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

fail() { echo "FAIL: $*" >&2; exit 1; }

# whole_epochs NAME RUN LOWER MOST: the number of epochs of the data that
# must be whole in RUN (for ledger_check.py --complete_epochs). LOWER is the
# caller's own bound, from its arithmetic (the steps made, less the chunks
# that can be out); MOST the epochs its steps can make at all. ps:0's claim
# (its summary's data_epochs_completed) only is checked against them: the
# case fails when it is below LOWER or above MOST; the more of the claim and
# LOWER is printed. Call it as `e=$(whole_epochs ...)` (not `local e=$(...)`,
# which would hide a failure).
whole_epochs() {
  local name=$1 run=$2 lower=$3 most=$4 claim
  claim=$(json_field "$run/ps-0.summary.json" data_epochs_completed)
  [ "$claim" -le "$most" ] ||
    fail "$name: ps:0 says it completed $claim epochs of the data; the steps make at most $most"
  [ "$claim" -ge "$lower" ] ||
    fail "$name: ps:0 says it completed $claim epochs of the data; the steps make at least $lower whole"
  echo $((claim > lower ? claim : lower))
}

# sample_records NAME RUN J...: sets `records` to --records and the sample
# records (data { record_samples: true }) of workers J... in RUN; fails,
# naming it, when one is missing.
sample_records() {
  local name=$1 run=$2 j f
  shift 2
  records=(--records)
  for j in "$@"; do
    f=$run/samples-worker-$j.jsonl
    [ -f "$f" ] || fail "$name: worker:$j wrote no sample records ($f)"
    records+=("$f")
  done
}

# The second user of the tests that attack a server or plant files for it:
# run as root, uid 65534 (nobody) through setpriv, and the server root's;
# otherwise this same user (no second uid: the modes as planted still
# count). other_user_init NAME [PROGRAM] sets `other` (the setpriv prefix,
# empty for none) and `box`, a directory of /tmp the other user can reach
# (the test's own temporary directory is root's, 0700 on the way), and with
# PROGRAM copies it to $box/attacker, the box then the other user's. The
# caller removes $box in its cleanup.
other_user_init() {
  local name=$1 program=${2:-}
  other=()
  if [ "$(id -u)" = 0 ]; then
    other=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    echo "other user: uid 65534 (nobody), server: root"
  else
    echo "other user and server: uid $(id -u) (not root: no second uid)"
  fi
  box=$(mktemp -d "/tmp/psgd-$name.XXXXXX")
  chmod 755 "$box"
  if [ -n "$program" ]; then
    cp "$program" "$box/attacker"
    chmod 755 "$box/attacker"
    give_other "$box"
  fi
}
# Runs a command as the other user.
as_other() { "${other[@]}" "$@"; }
# Gives paths (links themselves, directories with what they hold) to the
# other user; nothing without a second uid.
give_other() { [ ${#other[@]} -gt 0 ] && chown -R -h 65534:65534 "$@" || true; }
# Whether there is a second uid.
have_other() { [ ${#other[@]} -gt 0 ]; }
