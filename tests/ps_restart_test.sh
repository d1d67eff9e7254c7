#!/usr/bin/env bash
# A parameter server killed mid-run (SIGKILL) and started again with the same
# config restores the newest complete checkpoint; the workers wait for it
# (retrying with backoff, never restarted), roll the whole cluster back to
# that checkpoint and train on to the last step; the summary says how many
# steps were redone (docs/RELIABILITY.md).
#   sync:  ps:1 is killed and its newest checkpoint file corrupted before the
#          restart: the restarted server refuses it (checksum, naming the
#          file) and falls back to the previous complete checkpoint.
#   async: ps:0 is killed and restarted.
# Every process exits 0.
#
# What is complete when the restarted server reads the directory: the
# MANIFEST of a checkpoint is written by the last shard to write its file,
# so after the victim is dead the survivor's checkpoint writer can still
# complete a checkpoint whose victim file is already there (never one whose
# victim file is missing). The expectation allows for that; see run_case.
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

EVERY=50

# newest_complete DIR: the newest step-N directory with a MANIFEST.
newest_complete() {
  ls -d "$1"/step-* 2>/dev/null | sed 's/.*step-//' | sort -n | while read -r n; do
    if [ -f "$1/step-$n/MANIFEST" ]; then echo "$n"; fi
  done | tail -1
}

# own_labels DIR SHARD: the labels that have shard SHARD's file, ascending.
own_labels() {
  ls "$1"/step-*/"shard-$2-of-2.ckpt" 2>/dev/null | sed 's|.*/step-\([0-9]*\)/.*|\1|' | sort -n
}

# restored_label LOG: N of the log's "restored checkpoint step-N".
restored_label() {
  sed -n 's/.*restored checkpoint step-\([0-9]*\) .*/\1/p' "$1" | head -1
}

run_case() {
  local name=$1 mode=$2 victim=$3 corrupt=$4 steps=$5
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name ckpt=$TMP/ckpt/$name
  write_config "$cfg" "$name" "$mode" 2 3 3 "$steps" 10
  cat >> "$cfg" <<EOC
model { name: "cifar10_linear" }
checkpoint { dir: "$ckpt" every_steps: $EVERY }
ps_unavailable_timeout_seconds: 120
EOC
  mkdir -p "$run"
  echo "=== $name: kill ps:$victim ($mode)"
  pids=()
  start_cluster "$cfg" "$run" 2 3
  local ps=("${ps_pids[@]}") ws=("${w_pids[@]}")

  await_global_step "$run/worker-0.jsonl" 400 300 "${ws[0]}"
  kill -9 "${ps[victim]}" 2>/dev/null ||
    fail "$name: ps:$victim had exited before the kill (the run was too short)"
  wait "${ps[victim]}" 2>/dev/null || true
  # The victim is dead and reaped: its files are final. Read what is
  # complete only now.
  local at newest victim_labels m
  at=$(last_step "$run/worker-0.jsonl")
  newest=$(newest_complete "$ckpt")
  victim_labels=$(own_labels "$ckpt" "$victim")
  echo "$name: killed ps:$victim near step $at; newest complete checkpoint step-$newest;" \
    "ps:$victim's files:" $victim_labels
  [ -n "$newest" ] || fail "$name: no complete checkpoint"
  local expect=$newest
  if [ "$corrupt" = corrupt ]; then
    # No checkpoint newer than step-$newest may complete from now on, or the
    # restart would restore it and never meet the corrupt file: remove the
    # victim's files of newer ones, as if it had died before writing them
    # (each file appears whole, by a rename). One the survivor completed
    # meanwhile is then refused for the missing file.
    for m in $victim_labels; do
      if [ "$m" -gt "$newest" ]; then
        rm -f "$ckpt/step-$m/shard-$victim-of-2.ckpt"
        echo "$name: removed ps:$victim's file of step-$m (not complete at the kill)"
      fi
    done
    local file="$ckpt/step-$newest/shard-$victim-of-2.ckpt"
    "$PY" - "$file" <<'PYEOF'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0x40
open(path, "wb").write(bytes(data))
PYEOF
    expect=$(ls -d "$ckpt"/step-* | sed 's/.*step-//' | sort -n | awk -v n="$newest" '$1 < n' | while read -r m; do
      if [ -f "$ckpt/step-$m/MANIFEST" ]; then echo "$m"; fi; done | tail -1)
    echo "$name: corrupted $file; expecting step-$expect"
  fi

  # The furthest any worker got before the restart, by the workers' own
  # records: with ps:$victim dead no step completes on every shard.
  local reached
  reached=$(cat "$run"/worker-*.jsonl | "$PY" -c '
import json, sys
print(max(json.loads(l).get("step", -1) for l in sys.stdin if l.strip()))')
  start_task "$cfg" "ps:$victim" "$run" "$run/ps$victim.restart.log"
  ps[victim]=$!; pids+=($!)

  for j in 0 1 2; do
    wait_exit "${ws[j]}" 300 || { cat "$run/w$j.log"; fail "$name: worker:$j exited $?"; }
  done
  for i in 0 1; do
    wait_exit "${ps[i]}" 60 || { cat "$run"/ps$i*.log; fail "$name: ps:$i exited $?"; }
  done
  grep -h "restored checkpoint\|refused" "$run/ps$victim.restart.log"
  local restored
  restored=$(restored_label "$run/ps$victim.restart.log")
  [ -n "$restored" ] || fail "$name: ps:$victim restored no checkpoint"
  if [ "$corrupt" = corrupt ]; then
    # Nothing newer could complete (above): exactly the one before the
    # corrupt one.
    [ "$restored" = "$expect" ] ||
      fail "$name: ps:$victim restored step-$restored, not step-$expect"
  else
    # The newest complete at the restart: step-$newest, or one the
    # survivor completed after the kill, whose victim file was there.
    [ "$restored" -ge "$newest" ] ||
      fail "$name: ps:$victim restored step-$restored, older than step-$newest, complete before the restart"
    grep -qx "$restored" <<<"$victim_labels" ||
      fail "$name: ps:$victim restored step-$restored, of which it had no file"
    # And the newest: the restore refuses every newer one, newest first,
    # before it takes one.
    for m in $victim_labels; do
      [ "$m" -gt "$restored" ] || continue
      grep -q "checkpoint step-$m refused: " "$run/ps$victim.restart.log" ||
        fail "$name: ps:$victim restored step-$restored but did not refuse the newer step-$m"
    done
    expect=$restored
  fi
  if [ "$corrupt" = corrupt ]; then
    grep -q "checkpoint step-$newest refused: .*shard-$victim-of-2.ckpt: its checksum differs from the manifest's (corrupt)" \
      "$run/ps$victim.restart.log" || fail "$name: the corrupt file was not refused by name"
  fi
  local step rollbacks redone
  step=$(json_field "$run/summary.json" final_global_step)
  rollbacks=$(json_field "$run/summary.json" ps_rollbacks)
  redone=$(json_field "$run/summary.json" steps_redone)
  echo "$name: final step $step, rollbacks $rollbacks, steps redone $redone"
  [ "$step" -ge "$steps" ] || fail "$name: final step $step < $steps"
  [ "$rollbacks" = 1 ] || fail "$name: $rollbacks rollbacks, expected 1"
  # The survivors were at step $at or later when the restarted shard came
  # back at step $expect: the cluster redid at least the steps between.
  [ "$redone" -ge $((at - expect)) ] ||
    fail "$name: steps redone $redone, but the cluster was at step $at and went back to $expect"
  # And at most the work since that checkpoint: the steps between it and
  # the furthest step a worker recorded before the restart, give or take
  # the pushes no record names yet. A record names the step its worker
  # computed on: its push may complete a later step (async), and each of
  # the 3 workers may have one more push taken by the survivor without a
  # record. So at most reached + 1 + 2 x 3 - expect; a checkpoint is 50.
  local bound=$((reached + 7 - expect))
  echo "$name: the workers reached step $reached before the restart; at most $bound steps to redo"
  [ "$redone" -le "$bound" ] ||
    fail "$name: steps redone $redone, more than the $bound since step-$expect (the workers reached step $reached)"
  if [ "$corrupt" = corrupt ]; then
    [ "$redone" -ge "$EVERY" ] || fail "$name: fell back a checkpoint but redid only $redone steps"
  fi
  # Each worker went on without a restart and re-synced at least once.
  for j in 0 1 2; do
    [ "$(json_field "$run/worker-$j.summary.json" recoveries)" -ge 1 ] ||
      fail "$name: worker:$j did not re-sync"
  done
}

run_case sync-corrupt SYNC 1 corrupt 2500
# Async steps come far faster (no worker waits for another): more of them,
# so that the kill at step 400 lands mid-run also in a fast build.
run_case async-restart ASYNC 0 plain 15000
echo "PASS"
