#!/usr/bin/env bash
# Soak run (docs/RELIABILITY.md): a sync cluster of 2 parameter servers and
# 32 synthetic workers (the linear model, batch 8, one thread each) trains for
# 10 minutes while one parameter server is killed (SIGKILL) and started again
# every minute. It reports the steps completed, the restarts survived, the
# most steps redone after a restart and each server's memory (VmRSS) at the
# start and the end, and exits non-zero if the run did not survive.
#
#   scripts/bench/soak.sh [--minutes=10] [--kill_every=60] [--workers=32]
#                   [--victim=1] [--bin_dir=DIR] [--out=DIR]
#
# --victim=I     the ps task killed every time (the other one lives through
#                every rollback, so its memory shows what a long-lived
#                server does); --victim=alternate kills ps:0 and ps:1 in turn
# --bin_dir=DIR  take ps/ps_server and worker/worker from DIR (default: build
#                them with -c opt and use bazel-bin)
# --out=DIR      where the config, the run, the checkpoints, the logs and
#                soak.json go (default /tmp/psgd-soak-TIMESTAMP)
#
# Bounded: everything is killed, and the script fails, 5 minutes after the
# training time is up.
set -uo pipefail
here=$(pwd)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }

minutes=10
kill_every=60
workers=32
victim=1
bin=""
out=/tmp/psgd-soak-$(date +%Y%m%d-%H%M%S)
for a in "$@"; do
  case "$a" in
    --minutes=*) minutes=${a#--minutes=} ;;
    --kill_every=*) kill_every=${a#--kill_every=} ;;
    --workers=*) workers=${a#--workers=} ;;
    --victim=*) victim=${a#--victim=} ;;
    --bin_dir=*) bin=$(abs "${a#--bin_dir=}") ;;
    --out=*) out=$(abs "${a#--out=}") ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib/cluster.sh
if [ -z "$bin" ]; then
  bazel build -c opt //ps:ps_server //worker:worker >&2 || {
    echo "soak.sh: build failed" >&2; exit 1; }
  bin=$(pwd)/bazel-bin
fi
PSGD_BIN=$bin
mkdir -p "$out" || exit 1
run=$out/run
mkdir -p "$run"
cfg=$out/soak.pbtxt
seconds=$((minutes * 60))

# The config: free loopback ports, N = M - 2 (two backup workers).
write_cluster_config "$cfg" soak ps=2 workers="$workers" n=$((workers > 3 ? workers - 2 : 1)) \
  batch=8 steps=1000000000 training="max_seconds: $seconds eval_every: 0" model=cifar10_linear \
  data="source: SYNTHETIC synthetic_train_size: 2000 synthetic_test_size: 500" \
  extra="worker_lease_seconds: 10" extra="ps_unavailable_timeout_seconds: 120" \
  extra="checkpoint { dir: \"$out/ckpt\" every_steps: 100 every_seconds: 10 keep: 3 }" || exit 1

declare -a ps_pid w_pid
stop_tasks_on_exit

start_ps() {  # start_ps I LOGNAME
  start_task "$cfg" "ps:$1" "$run" "$out/$2.log"
  ps_pid[$1]=$!
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

t0=$SECONDS
hard_deadline=$((t0 + seconds + 300))
start_ps 0 ps0
start_ps 1 ps1
for ((j = 0; j < workers; j++)); do
  start_task "$cfg" "worker:$j" "$run" "$out/w$j.log"
  w_pid[$j]=$!
done
echo "soak.sh: $workers workers and 2 servers started; output in $out"

until grep -q '"kind":"train"' "$run/worker-0.jsonl" 2>/dev/null; do
  [ $SECONDS -lt $((t0 + 300)) ] || { echo "soak.sh: no training after 300 s" >&2; exit 1; }
  sleep 0.5
done
train_start=$SECONDS
sleep 5
rss_start=("$(rss_kb "${ps_pid[0]}")" "$(rss_kb "${ps_pid[1]}")")
rss_max=("${rss_start[@]}")
echo "soak.sh: training; server RSS ${rss_start[0]} kB, ${rss_start[1]} kB"

kills=0
kill_log=()
next_kill=$((train_start + kill_every / 2))
end_time=$((train_start + seconds))
rss_end=(0 0)
while [ $SECONDS -lt $((end_time - 5)) ]; do
  for i in 0 1; do
    r=$(rss_kb "${ps_pid[i]}")
    [ "$r" -gt "${rss_max[i]}" ] && rss_max[i]=$r
    rss_end[i]=$r
  done
  if [ $SECONDS -ge $next_kill ] && [ $next_kill -lt $((end_time - 20)) ]; then
    v=$victim
    [ "$victim" = alternate ] && v=$((kills % 2))
    step=$(last_step "$run/worker-0.jsonl")
    kill -9 "${ps_pid[v]}"
    wait "${ps_pid[v]}" 2>/dev/null
    kills=$((kills + 1))
    start_ps "$v" "ps$v.restart-$kills"
    kill_log+=("$((SECONDS - train_start))s:ps$v@$step")
    echo "soak.sh: $((SECONDS - train_start)) s: killed ps:$v near step $step and started it again ($kills)"
    next_kill=$((next_kill + kill_every))
  fi
  sleep 1
done
echo "soak.sh: training time is up; waiting for the tasks to finish"

failed=0
for p in "${w_pid[@]}" "${ps_pid[@]}"; do
  rc=0
  wait_task "$p" $((hard_deadline - SECONDS)) || rc=$?
  if kill -0 "$p" 2>/dev/null; then echo "soak.sh: ${pid_task[$p]} hangs" >&2; exit 1; fi
  [ "$rc" = 0 ] || { echo "soak.sh: ${pid_task[$p]} exited $rc" >&2; failed=1; }
done

python3 - "$run/summary.json" "$out/soak.json" "$kills" "${rss_start[0]}" "${rss_start[1]}" \
  "${rss_end[0]}" "${rss_end[1]}" "${rss_max[0]}" "${rss_max[1]}" "$minutes" "$workers" \
  "${kill_log[*]}" "$failed" <<'PYEOF'
import json, sys
summary = json.load(open(sys.argv[1]))
kills = int(sys.argv[3])
rss = [int(x) for x in sys.argv[4:10]]
report = {
    "minutes": int(sys.argv[10]), "workers": int(sys.argv[11]), "ps_tasks": 2,
    "steps_completed": summary["final_global_step"],
    "ps_kills": kills,
    "restarts_survived": summary["ps_rollbacks"] if sys.argv[13] == "0" else 0,
    "steps_redone_total": summary["steps_redone"],
    "max_steps_redone": summary["max_steps_redone"],
    "ps0_rss_kb": {"start": rss[0], "end": rss[2], "max": rss[4]},
    "ps1_rss_kb": {"start": rss[1], "end": rss[3], "max": rss[5]},
    "kills": sys.argv[12].split(),
    "all_tasks_exited_0": sys.argv[13] == "0",
    "final_test_accuracy": summary.get("final_test_accuracy"),
    "server_dropped_surplus": summary.get("server_dropped_surplus"),
}
json.dump(report, open(sys.argv[2], "w"), indent=2)
print(json.dumps(report, indent=2))
ok = report["all_tasks_exited_0"] and summary["ps_rollbacks"] == kills
sys.exit(0 if ok else 1)
PYEOF
