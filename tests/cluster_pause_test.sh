#!/usr/bin/env bash
# A paused server (issue 62: a GC pause, a swap storm, a migrated VM) does
# not end the run. 2 shards, 3 workers, sync N=2, lease 3 s, 80 steps: once
# the chief has made 8 steps, ps:1 is stopped with SIGSTOP for 8 s (well past the
# lease), then SIGCONT. Meanwhile every worker's push waits on ps:1 and
# sends ps:0 nothing: before, ps:0 expired all three ("worker J sent nothing
# for 3s and left the live set (lease)"), then refused their commits, and
# two workers exited 1. Now a worker waiting on a shard keeps its lease on
# shard 0 (worker/session/lease_keeper.h, PsClient::RenewLease): no lease
# runs out, every task exits 0 and the run reaches its last step.
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

name=pause
cfg=$TMP/$name.pbtxt run=$TMP/runs/$name
steps=80
write_config "$cfg" "$name" SYNC 2 3 2 "$steps" 3
mkdir -p "$run"
start_cluster "$cfg" "$run" 2 3
ps=("${ps_pids[@]}") ws=("${w_pids[@]}")
await_steps "$run/worker-0.jsonl" 8 300 "${ws[0]}"
at=$(last_step "$run/worker-0.jsonl")
kill -STOP "${ps[1]}"
echo "$name: ps:1 stopped at step $at for 8 s (lease 3 s)"
sleep 8
kill -CONT "${ps[1]}"
echo "$name: ps:1 continued"
for j in 0 1 2; do
  wait_exit "${ws[j]}" 300 || { cat "$run"/ps*.log "$run/w$j.log"; fail "$name: worker:$j exited $?"; }
done
for i in 0 1; do
  wait_exit "${ps[i]}" 60 || { cat "$run/ps$i.log"; fail "$name: ps:$i exited $?"; }
done
step=$(json_field "$run/summary.json" final_global_step)
expired=$(json_field "$run/summary.json" server_workers_expired)
echo "$name: final step $step, workers expired $expired"
if grep -h "left the live set (lease)" "$run"/ps*.log; then
  fail "$name: a worker lost its lease while ps:1 was stopped"
fi
[ "$expired" = 0 ] || fail "$name: $expired workers expired"
[ "$step" -ge "$steps" ] || fail "$name: final step $step < $steps"
echo PASS
