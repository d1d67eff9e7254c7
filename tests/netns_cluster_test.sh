#!/usr/bin/env bash
# A cluster across three hosts: network namespaces made by
# scripts/run/netns_hosts.sh (198.18.0.0/15, a bridge, nothing routed off the
# machine), with a unique prefix so that it cannot meet a developer's hosts.
# 2 ps tasks on hosts 0 and 1 (listening on 0.0.0.0, dialled by host name)
# and 3 workers, one per host; each host writes its own folder of the run
# directory and each ps its own checkpoint directory (nothing shared).
#   sync and async runs through scripts/run/launch.sh --netns to their last step;
#   ps:1 killed (SIGKILL) mid-run and started again on its host: it agrees
#   with ps:0 over RPC on the newest checkpoint both have, restores its own
#   file of it, and the run goes on to its last step.
# Every namespace, veth and the bridge are removed on any exit.
source "$(dirname "$0")/cluster_test_lib.sh"
NETNS_HOSTS=$RUNFILES/scripts/run/netns_hosts.sh

# Not run here: a line that starts with "SKIP: " and exit 0, which Bazel
# counts as passed and scripts/test.sh as skipped (it reads the test's log).
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2 (ip netns); CI runs as root"
  exit 0
fi

pids=()
prefix=""
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [ -n "$prefix" ] && bash "$NETNS_HOSTS" down --prefix="$prefix" || true
}
trap cleanup EXIT

# A prefix no one else uses: 'nt' and 4 hex digits (up refuses one in use).
for attempt in 1 2 3 4 5; do
  candidate=nt$(printf '%04x' $((RANDOM % 65536)))
  if bash "$NETNS_HOSTS" up 3 --prefix="$candidate"; then prefix=$candidate; break; fi
done
[ -n "$prefix" ] || fail "could not make the namespace hosts"
H0=${prefix}0 H1=${prefix}1 H2=${prefix}2

# Names resolve inside a namespace; nothing routes off the machine.
ip netns exec "$H0" getent hosts "$H2" | grep -q '^198\.18\.0\.12 ' || fail "$H2 does not resolve in $H0"
[ -z "$(ip -n "$H0" route show default)" ] || fail "$H0 has a default route"

# host_config FILE NAME MODE STEPS: ps:0 and ps:1 on hosts 0 and 1, each
# with a checkpoint directory of its own host; a worker on each host.
# keep: 20: at 2 ms a step, a loaded machine's checkpoint writers can lag
# several intervals behind, and the default keep of 3 could then prune on
# ps:0 the newest checkpoint that ps:1 also has (docs/MULTIHOST.md).
host_config() {
  local file=$1 name=$2 mode=$3 steps=$4
  write_cluster_config "$file" "$name" mode="$mode" ps_hosts="$H0,$H1" \
    worker_hosts="$H0,$H1,$H2" threads= ps_extra="checkpoint_dir: \"$TMP/$name/{host}/ckpt\"" \
    batch=16 steps="$steps" training="eval_every: 50 eval_examples: 200" \
    model=cifar10_linear data="source: SYNTHETIC synthetic_train_size: 1200 synthetic_test_size: 300" \
    extra="checkpoint { every_steps: 40 keep: 20 }" extra="worker_lease_seconds: 10" \
    extra="ps_unavailable_timeout_seconds: 120"
}

for mode in SYNC ASYNC; do
  name=hosts-${mode,,}
  cfg=$TMP/$name.pbtxt run=$TMP/runs/$name
  steps=150; [ "$mode" = ASYNC ] && steps=600
  host_config "$cfg" "$name" "$mode" "$steps"
  echo "=== $name: launch.sh --netns"
  timeout 300 bash "$LAUNCH" --bin_dir="$RUNFILES" --netns --run_dir="$run" "$cfg" > "$TMP/$name.log" 2>&1 ||
    { tail -40 "$TMP/$name.log"; fail "$name: launch.sh failed"; }
  # One folder per host; the chief's summary on its host.
  for h in "$H0" "$H1" "$H2"; do [ -d "$run/$h" ] || fail "$name: no folder of $h"; done
  [ -f "$run/$H0/summary.json" ] || fail "$name: no summary on $H0"
  [ -f "$run/$H2/worker-2.jsonl" ] || fail "$name: worker:2's metrics are not on $H2"
  [ -f "$run/$H1/ps-1.jsonl" ] || fail "$name: ps:1's metrics are not on $H1"
  step=$(json_field "$run/$H0/summary.json" final_global_step)
  echo "$name: final step $step"
  [ "$step" -ge "$steps" ] || fail "$name: final step $step < $steps"
  # Each ps checkpointed into its own directory only.
  ls "$TMP/$name/$H0/ckpt"/step-*/shard-0-of-2.ckpt >/dev/null || fail "$name: no checkpoint of ps:0"
  ! ls "$TMP/$name/$H0/ckpt"/step-*/shard-1-of-2.ckpt >/dev/null 2>&1 || fail "$name: ps:1 wrote into ps:0's directory"
  # The link counters were sampled per host; compare.py reads the run.
  [ -s "$run/$H1/net-$H1.jsonl" ] || fail "$name: no link samples of $H1"
  "$PY" "$COMPARE" "$run" --out "$TMP/$name-report" >/dev/null || fail "$name: compare.py failed"
  grep -q "| $name | $H1 |" "$TMP/$name-report/report.md" || fail "$name: no link figures in the report"
done

# A ps killed and started again on its host: it asks ps:0 over RPC which
# checkpoints it has and restores the newest both have, from its own
# directory; the workers roll the cluster back to it and finish.
name=hosts-restart
cfg=$TMP/$name.pbtxt run=$TMP/runs/$name steps=1000
host_config "$cfg" "$name" SYNC "$steps"
mkdir -p "$run/$H0" "$run/$H1" "$run/$H2"
echo "=== $name: kill ps:1 on $H1"
hosts_of=("$H0" "$H1" "$H2")
ps_pids=() w_pids=()
for i in 0 1; do
  start_task --netns="${hosts_of[i]}" "$cfg" "ps:$i" "$run/${hosts_of[i]}" "$run/${hosts_of[i]}/ps$i.log"
  ps_pids+=($!); pids+=($!)
done
for j in 0 1 2; do
  start_task --netns="${hosts_of[j]}" "$cfg" "worker:$j" "$run/${hosts_of[j]}" "$run/${hosts_of[j]}/w$j.log"
  w_pids+=($!); pids+=($!)
done
await_global_step "$run/$H0/worker-0.jsonl" 200 240 "${w_pids[0]}"
kill -9 "${ps_pids[1]}" 2>/dev/null || fail "$name: ps:1 had exited before the kill"
wait "${ps_pids[1]}" 2>/dev/null || true
# own_labels DIR SHARD: the labels with this shard's file, one per line.
own_labels() { ls "$1"/step-*/"shard-$2-of-2.ckpt" 2>/dev/null | sed 's|.*/step-\([0-9]*\)/.*|\1|' | sort -n; }
# ps:1 is dead and reaped: its files are final. ps:0 goes on and its
# checkpoint writer may still add a file of a label ps:1 has (ps:1 was a
# step ahead), so the newest both have can only grow until ps:1 asks ps:0.
ps1_labels=$(own_labels "$TMP/$name/$H1/ckpt" 1)
common=$(comm -12 <(own_labels "$TMP/$name/$H0/ckpt" 0 | sort) <(sort <<<"$ps1_labels") | sort -n | tail -1)
echo "$name: killed ps:1 near step $(last_step "$run/$H0/worker-0.jsonl"); newest checkpoint both have: step-$common"
[ -n "$common" ] || fail "$name: no checkpoint common to both ps"
# Every path the restarted ps:1 touches, read by strace (not by psgd).
start_task --netns="$H1" --strace="$TMP/$name.ps1.strace" "$cfg" ps:1 "$run/$H1" "$run/$H1/ps1.restart.log"
ps_pids[1]=$!; pids+=($!)
for j in 0 1 2; do
  wait_exit "${w_pids[j]}" 300 || { cat "$run/${hosts_of[j]}/w$j.log"; fail "$name: worker:$j exited $?"; }
done
for i in 0 1; do
  wait_exit "${ps_pids[i]}" 60 || { cat "$run/${hosts_of[i]}"/ps$i*.log; fail "$name: ps:$i exited $?"; }
done
grep -h "agreed\|restored checkpoint" "$run/$H1/ps1.restart.log"
# The agreement's line lists what each ps had complete when ps:1 asked:
# ps:1's list is its files, ps:0's still has step-$common (it keeps 20),
# and the agreed label is the newest in both (in one generation), so
# step-$common or one ps:0 completed after the kill.
agreed=$("$PY" - "$run/$H1/ps1.restart.log" "$common" $ps1_labels <<'PYEOF'
import re, sys
log, before, files = sys.argv[1], int(sys.argv[2]), {int(x) for x in sys.argv[3:]}
found = None
for line in open(log):
    found = re.search(r"checkpoints complete per shard: ps:0 \[([^\]]*)\], "
                      r"ps:1 \[([^\]]*)\]; agreed: step-(\d+)", line)
    if found:
        break
if not found:
    sys.exit("no agreement line in the restarted ps:1's log")
def parse(text):
    return {int(l): g for l, g in (c.split("/g") for c in text.split())}
ps0, ps1, agreed = parse(found.group(1)), parse(found.group(2)), int(found.group(3))
if set(ps1) != files:
    sys.exit(f"ps:1 reported {sorted(ps1)}, its files are {sorted(files)}")
if before not in ps0 or before not in ps1:
    sys.exit(f"step-{before}, which both had before the restart, is not in both lists")
both = [l for l in ps0 if l in ps1 and ps0[l] == ps1[l]]
if agreed != max(both):
    sys.exit(f"agreed on step-{agreed}, but the newest both have is step-{max(both)}")
if agreed < before:
    sys.exit(f"agreed on step-{agreed}, older than step-{before}")
print(agreed)
PYEOF
) || fail "$name: ps:1 did not agree on the newest checkpoint both have"
echo "$name: agreed on step-$agreed (step-$common both had at the restart)"
grep -q "restored checkpoint step-$agreed " "$run/$H1/ps1.restart.log" || fail "$name: ps:1 did not restore step-$agreed"
# Nothing shared between hosts: the restarted ps:1 agreed with ps:0 over
# RPC and touched none of host $H0's files (its checkpoints or run files).
[ -s "$TMP/$name.ps1.strace" ] || fail "$name: no strace of the restarted ps:1"
grep -q "$TMP/$name/$H1/ckpt" "$TMP/$name.ps1.strace" || fail "$name: the strace shows no access to ps:1's own checkpoints"
if grep -E "\"($TMP/$name/$H0|$run/$H0)[/\"]" "$TMP/$name.ps1.strace" | head -5 | grep .; then
  fail "$name: the restarted ps:1 touched host $H0's files (above)"
fi
echo "$name: the restarted ps:1 touched no file of host $H0 ($(grep -c . "$TMP/$name.ps1.strace") file calls traced)"
step=$(json_field "$run/$H0/summary.json" final_global_step)
rollbacks=$(json_field "$run/$H0/summary.json" ps_rollbacks)
echo "$name: final step $step, rollbacks $rollbacks"
[ "$step" -ge "$steps" ] || fail "$name: final step $step < $steps"
[ "$rollbacks" = 1 ] || fail "$name: $rollbacks rollbacks, expected 1"

echo "PASS"
