#!/usr/bin/env bash
# End to end: scripts/run/launch.sh starts 2 ps and 3 worker processes from a
# config on free loopback ports with synthetic data, sync for 30 steps and
# async for 30 steps, and sync again with overlap (wire { overlap: true }). Every process exits 0, the loss falls, and the metrics
# hold what scripts/run/compare.py needs for its report.
source "$(dirname "$0")/cluster_test_lib.sh"

for mode in SYNC ASYNC; do
  cfg=$TMP/$mode.pbtxt
  run=$TMP/runs/$mode
  # Async steps count every worker's updates: 60 is about 20 per worker.
  steps=30; [ "$mode" = ASYNC ] && steps=60
  write_config "$cfg" "e2e-$mode" "$mode" 2 3 3 "$steps" 30
  echo "=== $mode"
  timeout 600 "$LAUNCH" --bin_dir="$RUNFILES" --run_dir="$run" "$cfg" \
    || fail "$mode: launch.sh exited $?"

  for f in config.pbtxt cluster.pbtxt summary.json ps-0.jsonl ps-1.jsonl ps-0.summary.json \
           worker-0.jsonl worker-1.jsonl worker-2.jsonl worker-2.summary.json; do
    [ -s "$run/$f" ] || fail "$mode: $run/$f missing or empty"
  done
  # The chief's resolved cluster loads as a config of its own.
  "$WORKER" --config="$run/cluster.pbtxt" --task=worker:2 --print_cluster > /dev/null ||
    fail "$mode: $run/cluster.pbtxt does not load"
  step=$(json_field "$run/summary.json" final_global_step)
  [ "$step" -ge "$steps" ] || fail "$mode: final step $step < $steps"
  # Every task's payload bytes: the workers' per step, the servers' per line.
  grep -q '"sent_bytes":[1-9]' "$run/ps-0.jsonl" || fail "$mode: ps:0 records no bytes sent"
  grep -q '"received_bytes":[1-9]' "$run/ps-1.jsonl" || fail "$mode: ps:1 records no bytes received"
  # TensorBoard event files of the chief and both servers, every CRC good.
  events=("$run"/events.out.tfevents.*)
  [ "${#events[@]}" -eq 3 ] || fail "$mode: ${#events[@]} event files, expected 3"
  "$RUNFILES/tests/read_events" "${events[@]}" > "$TMP/events-$mode.txt" ||
    fail "$mode: an event file does not read back"
  for tag in train/loss test/accuracy step/compute_s outcomes/ ps0/pushes_applied ps1/live_workers; do
    grep -q "  $tag" "$TMP/events-$mode.txt" || fail "$mode: no $tag in the event files"
  done
  acc=$(json_field "$run/summary.json" final_test_accuracy)
  # The loss of the worker that took the most steps: in async a worker that
  # the machine's load starves may take only a few of the 60 (the chief took
  # 5 under a busy CI once), and then its first five steps are its last.
  busiest=$(for i in 0 1 2; do
    echo "$(train_line_count "$run/worker-$i.jsonl") $run/worker-$i.jsonl"
  done | sort -rn | head -1 | cut -d' ' -f2)
  first=$(mean_loss "$busiest" FIRST 5)
  last=$(mean_loss "$busiest" LAST 5)
  echo "$mode: final step $step, accuracy $acc, loss $first -> $last ($(basename "$busiest"))"
  "$PY" -c "import sys; sys.exit(0 if $last < $first else 1)" \
    || fail "$mode: loss did not fall ($first -> $last)"
done

# Overlap (wire { overlap: true }): the same sync cluster pushes in parts
# and pulls in groups; every process exits 0, every step takes exactly one
# gradient from each worker, the loss falls.
cfg=$TMP/OVERLAP.pbtxt
run=$TMP/runs/OVERLAP
write_config "$cfg" "e2e-overlap" SYNC 2 3 3 30 30
echo 'wire { overlap: true }' >> "$cfg"
echo "=== SYNC with overlap"
timeout 600 "$LAUNCH" --bin_dir="$RUNFILES" --run_dir="$run" "$cfg" \
  || fail "overlap: launch.sh exited $?"
step=$(json_field "$run/summary.json" final_global_step)
[ "$step" -ge 30 ] || fail "overlap: final step $step < 30"
for i in 0 1; do
  "$PY" - "$run/ps-$i.summary.json" <<'PYEOF' || fail "overlap: ps:$i counters"
import json, sys
s = json.load(open(sys.argv[1]))
c = s.get("counters", s)
applied, aggregated = c["applied"], c["aggregated"]
assert applied == 30 and aggregated == 60, (applied, aggregated)
assert c.get("dropped_stale", 0) == 0 and c.get("dropped_surplus", 0) == 0, c
PYEOF
done
first=$(mean_loss "$run/worker-0.jsonl" FIRST 5)
last=$(mean_loss "$run/worker-0.jsonl" LAST 5)
echo "overlap: final step $step, loss $first -> $last"
"$PY" -c "import sys; sys.exit(0 if $last < $first else 1)" \
  || fail "overlap: loss did not fall ($first -> $last)"

# Both runs in one report, with the sync and async plots.
"$PY" "$COMPARE" "$TMP/runs/SYNC" "$TMP/runs/ASYNC" --out "$TMP/report" --target 0.3 \
  || fail "compare.py failed"
for f in report.md loss.png accuracy.png throughput.png staleness.png dropped.png; do
  [ -s "$TMP/report/$f" ] || fail "report: $f missing"
done
grep -q '^| SYNC | sync | 3 | 30 |' "$TMP/report/report.md" || fail "report lacks the sync row"
grep -q '^| ASYNC | async | 3 |' "$TMP/report/report.md" || fail "report lacks the async row"
grep -q '| ps:0 (payload) |' "$TMP/report/report.md" || fail "report lacks the servers' payload"
cat "$TMP/report/report.md"
echo "PASS"
