#!/usr/bin/env bash
# A paused process (a GC pause, a swap storm, a migrated VM) does not end
# the run. 2 shards, 3 workers, sync N=2 (a backup worker), lease 3 s, the
# servers hand out the data (ledgers, the workers' sample records). Once the
# chief has made 8 steps, one task is stopped with SIGSTOP for 8 s (well
# past the lease), then SIGCONT:
#   ps1:    ps:1 paused. Every worker's push waits on ps:1 and sends ps:0
#           nothing: before, ps:0 expired all three ("worker J sent nothing
#           for 3s and left the live set (lease)"), then refused their
#           commits, and two workers exited 1. Now a worker waiting on a
#           shard keeps its lease on shard 0 (worker/session/lease_keeper.h,
#           PsClient::RenewLease): no lease runs out.
#   worker: worker:1 paused, three times (600 steps: the others go
#           on). Its lease runs out on ps:0 (its chunks go back to the queue, what it staged is dropped);
#           when it continues, its push is refused (not live, or its commit
#           finds nothing staged: PushRefusal::kNotStaged) and it joins
#           again as a new incarnation and pulls: before, a commit refused
#           as "not staged here complete" made it exit 1.
# Every task exits 0, the run reaches its last step, and both shards'
# ledgers joined with every worker's sample records (scripts/ledger_check.py;
# a missing records file fails the case) show every epoch whole that this
# test's arithmetic says must be (the final step x N chunks, less 2 per
# worker that can be out at the end), or that ps:0 says it completed if more
# (its claim fails the case when below that bound or above what the steps
# can make): 0 missing (but for a chunk a worker's records end with:
# --held_at_end, the run stops at its step limit), 0 repeated, nothing
# trained but not counted (the refused gradient is not applied late) and
# nothing counted but not trained.
source "$(dirname "$0")/cluster_test_lib.sh"
LEDGER_CHECK=$RUNFILES/scripts/ledger_check.py

pids=()
cleanup() { for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

samples=480 batch=16
run_case() {
  local name=$1 steps=80
  # The others train on while worker:1 is paused: enough steps for its
  # three pauses (8 s, about 100 steps each here) and more.
  [ "$name" = worker ] && steps=600
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name ckpt=$TMP/ckpt-$name
  write_cluster_config "$cfg" "$name" mode=SYNC ps=2 workers=3 n=2 batch=$batch \
    steps=$steps model=cifar10_linear \
    data="source: SYNTHETIC synthetic_train_size: $samples synthetic_test_size: 100 sharding: SERVERS ledger: true record_samples: true" \
    extra="stragglers { extra_delay { kind: CONSTANT shift_seconds: 0.05 } }" \
    extra="worker_lease_seconds: 3" \
    extra="ps_unavailable_timeout_seconds: 120" \
    extra="checkpoint { dir: \"$ckpt\" every_steps: 10 }"
  mkdir -p "$run"
  echo "=== $name"
  start_cluster "$cfg" "$run" 2 3
  local ps=("${ps_pids[@]}") ws=("${w_pids[@]}") target pauses=1 k at j i
  case "$name" in
    ps1) target=${ps[1]} ;;
    worker) target=${ws[1]} pauses=3 ;;
  esac
  at=0
  for ((k = 1; k <= pauses; k++)); do
    # The others go on meanwhile: each pause 10 steps after the last.
    await_global_step "$run/worker-0.jsonl" $((at + 8)) 300 "${ws[0]}"
    at=$(last_step "$run/worker-0.jsonl")
    kill -STOP "$target"
    echo "$name: paused at step $at for 8 s (lease 3 s)"
    sleep 8
    kill -CONT "$target"
    at=$(last_step "$run/worker-0.jsonl")
  done
  for j in 0 1 2; do
    wait_exit "${ws[j]}" 300 || { cat "$run"/ps*.log "$run/w$j.log"; fail "$name: worker:$j exited $?"; }
  done
  for i in 0 1; do
    wait_exit "${ps[i]}" 60 || { cat "$run/ps$i.log"; fail "$name: ps:$i exited $?"; }
  done
  local step expired epochs least
  step=$(json_field "$run/summary.json" final_global_step)
  expired=$(json_field "$run/summary.json" server_workers_expired)
  echo "$name: final step $step, workers expired $expired"
  [ "$step" -ge "$steps" ] || fail "$name: final step $step < $steps"
  case "$name" in
    ps1)
      if grep -h "left the live set (lease)" "$run"/ps*.log; then
        fail "$name: a worker lost its lease while ps:1 was stopped"
      fi
      [ "$expired" = 0 ] || fail "$name: $expired workers expired" ;;
    worker)
      # The pauses really cost worker:1 its lease, and it came back.
      [ "$expired" -ge 1 ] || fail "$name: no lease ran out: the pause tested nothing"
      grep -h "joining again" "$run"/w*.log | head -3 || echo "(no line of a rejoin in the logs)"
      # What became of worker:1's pushes: refused ones (rejoined) re-synced.
      "$PY" - "$run/worker-1.jsonl" <<'PYEOF'
import collections, json, sys
c = collections.Counter(json.loads(l).get("outcome") for l in open(sys.argv[1])
                        if '"kind":"train"' in l)
print("worker:1's outcomes:", dict(c))
if not c["rejoined"]:
    sys.exit("no push of worker:1 was refused: the pauses tested nothing")
PYEOF
      ;;
  esac
  # The epochs that must be whole, by this test's arithmetic: each of the
  # final step's steps settled N (2) chunks of the batch, in the queue's
  # order; at the end each worker may hold a chunk (a push in hand) and one
  # leased ahead, or one a dropped push gave back not yet leased again (2
  # per worker). A paused worker's chunks come back when its lease runs out.
  # ps:0's own count must reach that bound and not pass what the steps can
  # make; every epoch it says it completed is checked too.
  local chunks=$((samples / batch)) records
  least=$(( (step * 2 - 2 * 3) / chunks ))
  epochs=$(whole_epochs "$name" "$run" "$least" $((step * 2 / chunks)))
  echo "$name: $epochs epochs whole (at least $least by the steps)"
  sample_records "$name" "$run" 0 1 2
  # The run stops at its step limit: a missing sample is excused only in a
  # chunk a worker's records end with (docs/PS.md).
  "$PY" "$LEDGER_CHECK" --num_samples $samples --chunk_size $batch --seed 1 \
    --complete_epochs "$epochs" --held_at_end "$ckpt/ledger.jsonl" "$ckpt/ledger-ps1.jsonl" \
    "${records[@]}" ||
    { tail -n 20 "$run"/w*.log; fail "$name: the ledgers show samples lost, repeated or applied late"; }
}

for c in ${PAUSE_CASES:-ps1 worker}; do
  run_case "$c"
done
echo PASS
