#!/usr/bin/env bash
# A worker killed mid-run (SIGKILL: it never says goodbye) never hangs the
# job. Its lease runs out on the servers (3 s here), it leaves their live
# set, and by the documented policy (docs/PS.md) the sync steps go on with
# the live workers:
#   N=2 of M=3: the two others still make N; training reaches its last step.
#   N=M=2: steps complete with the one live worker; the run reaches its
#          last step with fewer gradients per step.
# Every surviving process exits 0, ps:0 (which expires leases for every
# shard) logs that the killed worker's
# lease ran out, and the summary counts it among the expired workers (a
# live worker that misses its lease on a loaded machine joins again and may
# be counted too).
# Then a killed worker is started again (same task, a new process): it joins
# again at the current step and trains (its data starts over), and the run
# reaches its last step.
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

run_case() {
  local name=$1 workers=$2 n=$3 victim=$4 steps=$5
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name
  write_config "$cfg" "$name" SYNC 2 "$workers" "$n" "$steps" 3
  mkdir -p "$run"
  echo "=== $name: kill worker:$victim of $workers (N=$n)"
  pids=()
  start_cluster "$cfg" "$run" 2 "$workers"
  local ps=("${ps_pids[@]}") ws=("${w_pids[@]}")

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
  echo "$name: killed worker:$victim at step $(last_step "$run/worker-$victim.jsonl")"

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
  # Shard 0 expires leases for every shard (docs/PS.md, "One decision per
  # push"): it says so, ps:1 follows its decision.
  grep -q "worker $victim sent nothing for .* and left the live set (lease)" "$run/ps0.log" ||
    fail "$name: ps:0 does not say that worker:$victim's lease ran out"
  [ "$expired" -ge 1 ] || fail "$name: $expired workers expired, expected the killed worker:$victim among them"
}

# restart_case NAME N: 3 workers, N of them per step; worker:2 killed after
# 5 steps and started again at once.
restart_case() {
  local name=$1 n=$2 steps=2000
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name
  write_config "$cfg" "$name" SYNC 2 3 "$n" "$steps" 3
  echo 'model { name: "cifar10_linear" }' >> "$cfg"
  mkdir -p "$run"
  echo "=== $name: kill worker:2 and start it again (N=$n of 3)"
  pids=()
  start_cluster "$cfg" "$run" 2 3
  local ps=("${ps_pids[@]}") ws=("${w_pids[@]}")
  await_steps "$run/worker-2.jsonl" 5 300 "${ws[2]}"
  kill -9 "${ws[2]}"
  wait "${ws[2]}" 2>/dev/null || true
  local killed_at
  killed_at=$(last_step "$run/worker-2.jsonl")
  start_task "$cfg" worker:2 "$run" "$run/w2.restart.log"
  ws[2]=$!; pids+=($!)
  echo "$name: killed worker:2 at step $killed_at and started it again"

  for j in 0 1 2; do
    wait_exit "${ws[j]}" 300 || { cat "$run"/w$j*.log; fail "$name: worker:$j exited $?"; }
  done
  for i in 0 1; do
    wait_exit "${ps[i]}" 60 || { cat "$run/ps$i.log"; fail "$name: ps:$i exited $?"; }
  done
  # The restarted process's lines follow the killed one's: local steps from 1,
  # global steps from where the cluster was.
  "$PY" - "$run/worker-2.jsonl" "$killed_at" <<'PYEOF' || fail "$name: the restarted worker did not train on"
import json, sys
lines = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"]
starts = [i for i, r in enumerate(lines) if r["local_step"] == 1]
assert len(starts) == 2, f"{len(starts)} runs of worker:2 in its metrics"
again = lines[starts[1]:]
print(f"restarted worker:2 trained {len(again)} steps, from step {again[0]['step']}")
assert len(again) >= 3, "it trained fewer than 3 steps"
assert again[0]["step"] >= int(sys.argv[2]), "it did not start at the current step"
PYEOF
  local step
  step=$(json_field "$run/summary.json" final_global_step)
  echo "$name: final step $step"
  [ "$step" -ge "$steps" ] || fail "$name: final step $step < $steps"
  [ "$(json_field "$run/worker-2.summary.json" local_steps)" -ge 3 ] ||
    fail "$name: the restarted worker's summary has fewer than 3 steps"
}

run_case backup-2of3 3 2 2 40
run_case nobackup-2of2 2 2 1 40
restart_case restart-2of3 2
restart_case restart-3of3 3
echo "PASS"
