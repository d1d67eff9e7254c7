#!/usr/bin/env bash
# A worker killed mid-run (SIGKILL: it never says goodbye) never hangs the
# job. Its lease runs out on the servers (3 s here), it leaves their live
# set, and by the documented policy (docs/PS.md) the sync steps go on with
# the live workers:
#   N=2 of M=3: the two others still make N; training reaches its last step.
#   N=M=2: steps complete with the one live worker; the run reaches its
#          last step with fewer gradients per step.
# Every surviving process exits 0, and the summary counts the expired worker.
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# wait_exit PID SECONDS: the exit status, or fails after SECONDS.
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "process $pid still running after $2 s (hang)"
    sleep 0.2
  done
  wait "$pid"
}

run_case() {
  local name=$1 workers=$2 n=$3 victim=$4 steps=$5
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name
  write_config "$cfg" "$name" SYNC 2 "$workers" "$n" "$steps" 3
  mkdir -p "$run"
  echo "=== $name: kill worker:$victim of $workers (N=$n)"
  pids=()
  local ps=() ws=()
  for i in 0 1; do
    "$PS_SERVER" --config="$cfg" --task=ps:$i --run_dir="$run" >"$run/ps$i.log" 2>&1 &
    ps+=($!); pids+=($!)
  done
  for ((j = 0; j < workers; j++)); do
    "$WORKER" --config="$cfg" --task=worker:$j --run_dir="$run" >"$run/w$j.log" 2>&1 &
    ws+=($!); pids+=($!)
  done

  # Kill the victim once it has done 5 steps.
  local deadline=$((SECONDS + 300))
  until [ -f "$run/worker-$victim.jsonl" ] &&
        [ "$(grep -c '"kind":"train"' "$run/worker-$victim.jsonl")" -ge 5 ]; do
    [ $SECONDS -lt $deadline ] || { cat "$run"/*.log; fail "$name: worker:$victim made no progress"; }
    kill -0 "${ws[victim]}" 2>/dev/null || { cat "$run"/*.log; fail "$name: worker:$victim ended early"; }
    sleep 0.1
  done
  kill -9 "${ws[victim]}"
  wait "${ws[victim]}" 2>/dev/null || true
  echo "$name: killed worker:$victim at step $(tail -1 "$run/worker-$victim.jsonl" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["step"])')"

  for ((j = 0; j < workers; j++)); do
    [ "$j" = "$victim" ] && continue
    wait_exit "${ws[j]}" 300 || { cat "$run/w$j.log"; fail "$name: worker:$j exited $?"; }
  done
  for i in 0 1; do
    wait_exit "${ps[i]}" 60 || { cat "$run/ps$i.log"; fail "$name: ps:$i exited $?"; }
  done
  local step expired
  step=$(json_field "$run/summary.json" final_global_step)
  expired=$(json_field "$run/summary.json" server_workers_expired)
  echo "$name: final step $step, workers expired $expired"
  grep -h "left the live set" "$run"/ps*.log || true
  [ "$step" -ge "$steps" ] || fail "$name: final step $step < $steps"
  [ "$expired" = 1 ] || fail "$name: $expired workers expired, expected 1"
}

run_case backup-2of3 3 2 2 40
run_case nobackup-2of2 2 2 1 40
echo "PASS"
