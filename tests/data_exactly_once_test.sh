#!/usr/bin/env bash
# The servers hand out the data (data { sharding: SERVERS }; docs/PS.md):
# every sample is trained on exactly once per epoch however workers and
# servers fail. 2 ps x 3 workers, sync N=2 (one backup worker, whose
# surplus gradients send their chunks back to the queue), 480 synthetic
# samples in chunks of 16 (30 chunks an epoch, 15 steps), 60 steps: three
# whole epochs and 15 steps to spare (a chunk whose gradient is dropped
# goes back and may be dropped again before it is applied: with 5 to spare
# a CI run ended with the third epoch one chunk short). Every case's
# workers record each push's samples (data { record_samples: true }), and
# each case ends with scripts/ledger_check.py on both shards' ledgers (ps:0's
# and ps:1's, which must hold the same chunks: one decision per push) joined
# with every worker's records (a missing records file fails the case): 0
# samples missing, 0 repeated and every push as trained in each epoch that
# must be whole, no repeat in the partial one. The epochs that must be whole
# come from this test's own arithmetic: the final step x N chunks of 16 (30
# an epoch), less 2 per worker that can be out at the end (a push in hand,
# one leased ahead), and for a killed worker's chunk the same at the kill
# when the run can have ended before its lease ran out: 3 for the 60-step
# cases, 13 for elastic (N at least 1). ps:0's own count (its summary's
# data_epochs_completed) fails the case when it is below that bound or more
# than the steps can make, and the more of the two is checked. A worker the
# case SIGKILLs may miss one record (--killed J); the step-limited cases
# (all but last_epoch) excuse a missing sample only in a chunk a worker's
# records end with (--held_at_end, docs/PS.md "A run that stops at its step
# limit").
#   backup:      no fault; the backup worker's dropped gradients re-queue.
#   emulated:    as backup, with emulated compute (docs/STRAGGLERS.md: the
#                workers compute nothing, 5 ms a step): their chunks index
#                the servers' whole set, and the next chunk is leased while
#                a step computes, as with a model.
#   last_epoch:  training { epochs: 2 } and no step limit: worker:2, slow
#                (1.1 s a step), is SIGKILLed near the end of the last
#                epoch, holding a chunk that comes back only when its lease
#                runs out (3 s), after the others have leased the rest; they
#                wait for it ("waiting for the data") and train it, and the
#                data ends with both epochs whole (without the wait the
#                ledger misses its samples): ps:0 must say 2, and no chunk
#                is excused as held at the end.
#   kill_worker: worker:2 SIGKILLed after 5 steps (its chunk comes back when
#                its lease runs out, 3 s later; steps of at least 100 ms,
#                an emulated delay, so that the run outlasts the lease: a
#                chunk that comes back after the last step is never
#                trained on, and its epoch is not complete). kill_ps0 and
#                kill_all take the same delay: a worker that comes back
#                late holds the chunk it leased until its push, and on
#                steps of milliseconds the others ran the last 11 steps
#                first (fresh-clone CI, kill_all, epoch 2).
#   kill_ps0:    ps:0, which holds the queue, SIGKILLed and started again: it
#                restores its checkpoint (weights and data position, the
#                ledger cut back to it) and the workers roll back to it.
#   kill_all:    every process SIGKILLed at once and all started again.
#   elastic:     max_workers 5 and N following the live workers (N = live,
#                no backups), 400 steps of at least 40 ms (emulated
#                delay): worker:3 and worker:4, beyond the 3 listed, join
#                mid-run with no process restarted, each contributes
#                gradients, then worker:4 is SIGKILLed (its lease runs out)
#                and worker:3 gets SIGTERM (it leaves at a step boundary
#                and exits 0), and the run ends. The learning rate follows
#                the linear rule with each step's N (0.05 x N / 3): the
#                workers' records show the rate of each step's update.
source "$(dirname "$0")/cluster_test_lib.sh"
LEDGER_CHECK=$RUNFILES/scripts/ledger_check.py

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Steps of a case: the elastic one runs long enough for workers to join;
# last_epoch runs until its epochs are done.
steps_of() {
  case "$1" in elastic) echo 400 ;; last_epoch) ;; *) echo 60 ;; esac
}

write_data_config() {
  local file=$1 name=$2 ckpt=$3 elastic=()
  # Every case: the ledgers and the workers' records of each push.
  local data="source: SYNTHETIC synthetic_train_size: 480 synthetic_test_size: 100 sharding: SERVERS ledger: true record_samples: true"
  case "$name" in
    kill_worker|kill_ps0|kill_all)
      elastic=(extra="stragglers { extra_delay { kind: CONSTANT shift_seconds: 0.1 } }") ;;
    last_epoch)
      # worker:2 takes 1.1 s a step: it holds a chunk nearly all the time,
      # and its gradients come late (dropped, their chunks back in the
      # queue).
      elastic=(training="epochs: 2"
               extra="stragglers { extra_delay { kind: CONSTANT shift_seconds: 0.1 } }"
               extra="stragglers { workers: 2 extra_delay { kind: CONSTANT shift_seconds: 1 } }") ;;
    emulated)
      elastic=(extra="emulation { compute { kind: CONSTANT shift_seconds: 0.005 } }") ;;
  esac
  if [ "$name" = elastic ]; then
    # The linear rule for 3 x 16 (scale 1 at N = 3), following each
    # step's N.
    elastic=(extra="max_workers: 5"
             training="replicas_rule: LIVE_MINUS_BACKUPS optimizer { kind: SGD learning_rate: 0.05 schedule { base_batch_size: 48 } }"
             extra="stragglers { extra_delay { kind: CONSTANT shift_seconds: 0.04 } }")
  fi
  # elastic: N = the live workers (no backups), so a joiner's gradient is
  # part of every step from its first; a backup's may be surplus.
  local n=2
  [ "$name" = elastic ] && n=3
  write_cluster_config "$file" "$name" mode=SYNC ps=2 workers=3 n=$n batch=16 \
    steps="$(steps_of "$name")" model=cifar10_linear ${elastic[@]+"${elastic[@]}"} \
    data="$data" \
    extra="worker_lease_seconds: 3" \
    extra="ps_unavailable_timeout_seconds: 120" \
    extra="checkpoint { dir: \"$ckpt\" every_steps: 4 }"
}

check_ledger() {
  local name=$1 ledger=$2 run=$3 epochs step lower most first_open records=()
  local n_least=2 n_most=2 workers=3 min_step_ms=100 held=(--held_at_end) killed_args=() j
  step=$(json_field "$run/summary.json" final_global_step)
  if [ "$name" = last_epoch ]; then
    # The run ends when the data does (training.epochs 2): both epochs
    # whole, every chunk trained; no chunk held at a step limit.
    lower=2 most=2 held=()
  else
    # The epochs that must be whole, by this test's own arithmetic: each
    # step settles N chunks of 16 (30 an epoch), in the queue's order; at
    # the end each worker may hold a chunk (a push in hand) and one leased
    # ahead, or one a dropped push gave back not yet leased again (2 per
    # worker). elastic: N follows the live workers, 1 to 5, of 5 at most.
    [ "$name" = elastic ] && n_least=1 n_most=5 workers=5 min_step_ms=40
    first_open=$((step * n_least - 2 * workers))
    # A killed worker's chunk (leased at about at_kill x N) is out until its
    # lease runs out, 3 s later (and the next 100 ms tick): at most 4 s of
    # steps of at least min_step_ms (the emulated delay); then it is the
    # lowest chunk in the queue and is trained next. Only a run that can
    # have ended before that keeps it out to the end (as fault_matrix.py's
    # bound at the kill). A restored ps:0 (kill_ps0, kill_all) voids every
    # lease and queues the chunks out at the kill: nothing of then stays out.
    if [ -n "$at_kill" ] &&
        [ $((at_kill + 1 + 4000 / min_step_ms + 2)) -gt "$step" ]; then
      first_open=$((first_open < (at_kill + 1) * n_least - 2 * workers ?
                    first_open : (at_kill + 1) * n_least - 2 * workers))
    fi
    ((first_open >= 0)) || first_open=0
    lower=$((first_open / 30)) most=$((step * n_most / 30))
  fi
  # ps:0's own count (data_epochs_completed) is checked against the bounds,
  # and every epoch it says it completed is checked too.
  epochs=$(whole_epochs "$name" "$run" "$lower" "$most")
  # Every worker's sample records, each file required: the elastic case's
  # joiners too.
  if [ "$name" = elastic ]; then
    sample_records "$name" "$run" 0 1 2 3 4
  else
    sample_records "$name" "$run" 0 1 2
  fi
  # A worker SIGKILLed (once in the run) may miss the record of the push
  # in flight at the kill.
  for j in ${killed[@]+"${killed[@]}"}; do killed_args+=(--killed "$j"); done
  # Every shard keeps a ledger of what it applied (ps:1's beside ps:0's);
  # each must show the same chunks.
  local ledgers=("$ledger" "$(dirname "$ledger")/ledger-ps1.jsonl")
  [ -s "${ledgers[1]}" ] || fail "$name: ps:1 kept no ledger (${ledgers[1]})"
  echo "$name: final step $step, ledger $(wc -l < "$ledger") chunks, ps:1's $(wc -l < "${ledgers[1]}"), $epochs epochs whole (at least $lower by the steps, at most $most)${killed:+, killed worker(s) ${killed[*]}}"
  if ! "$PY" "$LEDGER_CHECK" --num_samples 480 --chunk_size 16 --seed 1 \
      --complete_epochs "$epochs" ${held[@]+"${held[@]}"} ${killed_args[@]+"${killed_args[@]}"} \
      "${ledgers[@]}" "${records[@]}"; then
    # Each chunk of the epochs that must be whole missing from ps:0's
    # ledger, with every worker record of it (who pushed it, at which
    # step, with what outcome) and what the servers said of it.
    "$PY" - "$ledger" "$epochs" "$run" <<'PYMISSING' || true
import glob, json, re, sys
ledger, epochs, run = sys.argv[1], int(sys.argv[2]), sys.argv[3]
done = {(r["epoch"], r["index"]) for r in map(json.loads, open(ledger))}
records = []
for f in sorted(glob.glob(run + "/samples-worker-*.jsonl")):
    records += [json.loads(l) for l in open(f)]
for e in range(epochs):
    for i in range(30):
        if (e, i) in done:
            continue
        print("missing chunk %d/%d:" % (e, i))
        for r in records:
            if (r.get("epoch"), r.get("index")) == (e, i):
                print("  ", {k: r.get(k) for k in ("worker", "step", "generation", "outcome")})
        for f in sorted(glob.glob(run + "/*.log")):
            for line in open(f, errors="replace"):
                if re.search(r"\b%d/%d\b" % (e, i), line):
                    print("  ", f.rsplit("/", 1)[1] + ":", line.rstrip()[:300])
PYMISSING
    # What the servers and workers said of the data, for the diagnosis.
    grep -h "data\|chunk\|warn\|error" "$run"/*.log | tail -n 60
    # Each worker's steps that did not end applied or aggregated.
    grep -H '"kind":"train"' "$run"/worker-*.jsonl | grep -v '"outcome":"\(applied\|aggregated\)"' | head -n 40
    # The workers' logs around the kill.
    tail -n 15 "$run"/w*.log
    cat "$ledger"
    fail "$name: the ledger shows samples missing or repeated"
  fi
}

finish() {
  local name=$1 run=$2 j i step want
  for j in 0 1 2 3 4; do
    [ -n "${ws[j]:-}" ] || continue
    wait_exit "${ws[j]}" 300 || { cat "$run"/w*.log; fail "$name: worker:$j exited $?"; }
  done
  for i in 0 1; do
    wait_exit "${ps[i]}" 120 || { cat "$run"/ps*.log; fail "$name: ps:$i exited $?"; }
  done
  step=$(json_field "$run/summary.json" final_global_step)
  want=$(steps_of "$name")
  [ -z "$want" ] || [ "$step" -ge "$want" ] || fail "$name: final step $step < $want"
  if [ "$name" = last_epoch ]; then
    for j in 0 1; do
      [ "$(json_field "$run/worker-$j.summary.json" end_reason)" = "the data ended (epochs done)" ] ||
        fail "$name: worker:$j did not end with the data"
    done
  fi
}

run_case() {
  local name=$1
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name ckpt=$TMP/ckpt-$name p
  write_data_config "$cfg" "$name" "$ckpt"
  mkdir -p "$run"
  echo "=== $name"
  pids=() killed=() at_kill=""
  start_cluster "$cfg" "$run" 2 3
  ps=("${ps_pids[@]}") ws=("${w_pids[@]}")
  case "$name" in
    backup|emulated) ;;
    last_epoch)
      # 60 chunks, 2 a step (the third is surplus): the last epoch's last
      # chunks are leased from about step 25 on.
      await_global_step "$run/worker-0.jsonl" 25 300 "${ws[0]}"
      kill -9 "${ws[2]}"; wait "${ws[2]}" 2>/dev/null || true
      ws[2]="" killed=(2)
      echo "$name: worker:2 killed at step $(last_step "$run/worker-0.jsonl")"
      ;;
    kill_worker)
      await_steps "$run/worker-2.jsonl" 5 300 "${ws[2]}"
      kill -9 "${ws[2]}"; wait "${ws[2]}" 2>/dev/null || true
      ws[2]="" killed=(2) at_kill=$(last_step "$run/worker-0.jsonl")
      echo "$name: worker:2 killed at step $at_kill"
      ;;
    kill_ps0)
      await_global_step "$run/worker-0.jsonl" 12 300 "${ws[0]}"
      kill -9 "${ps[0]}"; wait "${ps[0]}" 2>/dev/null || true
      sleep 0.5
      start_task "$cfg" "ps:0" "$run" "$run/ps0.restarted.log"
      ps[0]=$!; pids+=($!)
      ;;
    kill_all)
      await_global_step "$run/worker-0.jsonl" 12 300 "${ws[0]}"
      for p in "${ps[@]}" "${ws[@]}"; do kill -9 "$p" 2>/dev/null || true; done
      for p in "${ps[@]}" "${ws[@]}"; do wait "$p" 2>/dev/null || true; done
      killed=(0 1 2)
      echo "$name: every process killed at step $(last_step "$run/worker-0.jsonl")"
      start_cluster "$cfg" "$run" 2 3
      ps=("${ps_pids[@]}") ws=("${w_pids[@]}")
      ;;
    elastic)
      await_global_step "$run/worker-0.jsonl" 8 300 "${ws[0]}"
      for j in 3 4; do
        start_task "$cfg" "worker:$j" "$run" "$run/w$j.log"
        ws[j]=$!; pids+=($!)
      done
      for j in 3 4; do
        await_steps "$run/worker-$j.jsonl" 3 300 "${ws[j]}"
      done
      # Each joined worker's gradients were taken (applied or aggregated).
      for j in 3 4; do
        grep -q '"outcome":"\(applied\|aggregated\)"' "$run/worker-$j.jsonl" ||
          fail "$name: worker:$j joined but contributed no gradient"
      done
      # worker:4 is killed (its lease runs out), worker:3 asked to leave
      # (SIGTERM: it leaves at a step boundary and exits 0 at once).
      kill -9 "${ws[4]}"; wait "${ws[4]}" 2>/dev/null || true
      ws[4]="" killed=(4) at_kill=$(last_step "$run/worker-0.jsonl")
      kill -TERM "${ws[3]}"
      wait_exit "${ws[3]}" 60 || { cat "$run/w3.log"; fail "$name: worker:3 exited $? after SIGTERM"; }
      grep -q "asked to leave (SIGTERM)" "$run/w3.log" ||
        { cat "$run/w3.log"; fail "$name: worker:3 does not say it was asked to leave"; }
      # The servers' side: ps:0 (which decides who is live) and ps:1 took
      # worker:3's Leave; its lease did not have to run out.
      for i in 0 1; do
        grep -q "worker 3 left the live set (its Leave)" "$run/ps$i.log" ||
          { grep -h "worker 3" "$run"/ps*.log || true; fail "$name: ps:$i has no Leave of worker:3 (asked to leave, it exited without one)"; }
      done
      ws[3]=""
      echo "$name: worker:3 and worker:4 joined beyond the listed 3; worker:4 killed, worker:3 left on SIGTERM at step $(last_step "$run/worker-0.jsonl")"
      # The rates the records carry: 0.05 x N / 3 for N of 1 to 5, with 3
      # (the listed workers) and 5 (both joiners in) among them.
      "$PY" - "$run" <<'PYRATES' || fail "$name: the records' learning rates do not follow N"
import glob, json, sys
rates = set()
for f in glob.glob(sys.argv[1] + "/worker-*.jsonl"):
    for line in open(f):
        r = json.loads(line)
        if r.get("kind") == "train" and "learning_rate" in r:
            rates.add(round(r["learning_rate"] * 3 / 0.05, 4))
print("elastic: N of the updates by their rates:", sorted(rates))
assert rates and rates <= {1.0, 2.0, 3.0, 4.0, 5.0}, rates
assert {3.0, 5.0} <= rates, rates
PYRATES
      ;;
  esac
  finish "$name" "$run"
  case "$name" in
    kill_ps0|kill_all)
      grep -q "restored" "$run"/ps0*.log 2>/dev/null ||
        fail "$name: ps:0 does not say it restored a checkpoint" ;;
  esac
  if [ "$name" = elastic ]; then
    # worker:3 left by its Leave, never by its lease; killed worker:4 only
    # by its lease (ps:0 decides both).
    if grep -q "worker 3 sent nothing" "$run/ps0.log"; then
      grep -h "worker [34]" "$run/ps0.log" || true; fail "$name: ps:0 expired worker:3's lease although it left"
    fi
    grep -q "worker 4 sent nothing .* (lease)" "$run/ps0.log" ||
      { grep -h "worker [34]" "$run/ps0.log" || true; fail "$name: ps:0 never expired killed worker:4's lease"; }
    if grep -q "worker 4 left the live set (its Leave" "$run/ps0.log"; then
      fail "$name: ps:0 logs a Leave of worker:4, which was killed"
    fi
  fi
  check_ledger "$name" "$ckpt/ledger.jsonl" "$run"
  if [ "$name" = last_epoch ]; then
    grep -h "waiting for the data\|after waiting\|stops after\|expired\|left" "$run"/w*.log "$run"/ps*.log | head -n 12 || true
  fi
}

for c in ${DATA_CASES:-backup emulated last_epoch kill_worker kill_ps0 kill_all elastic}; do
  run_case "$c"
done
echo "data_exactly_once_test: every case 0 missing, 0 repeated"
