#!/usr/bin/env bash
# The async staleness controls in real processes (docs/PS.md, "Async mode"):
#   ssp_bound_B: 2 ps and 2 workers, async with staleness_bound B, worker:1
#     throttled (SIGSTOP / SIGCONT, a quarter of the time running): the fast
#     worker:0 never pulls while more than B pushes ahead of worker:1. Its
#     k-th train line (written after its k-th push and the pull after it)
#     comes only once worker:1 has pushed at least k - B gradients, and
#     worker:1's pushes by then are at most its train lines + 1 (a line is
#     written after its push). The servers count the pulls they held back.
#   dc_beta1: async with dc_asgd_lambda and async_beta1 set trains (the loss
#     falls) and the servers compensate its pushes.
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
throttle=
cleanup() {
  [ -n "$throttle" ] && kill "$throttle" 2>/dev/null || true
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# start_async NAME STEPS EXTRA: starts 2 ps and 2 workers of an async
# cluster (the linear model, EXTRA inside the training block) with run
# directory $TMP/runs/NAME.
start_async() {
  local cfg=$TMP/$1.pbtxt run=$TMP/runs/$1
  write_config "$cfg" "$1" ASYNC 2 2 1 "$2" 30
  sed -i "s/^training { mode: ASYNC/training { mode: ASYNC $3/" "$cfg"
  echo 'model { name: "cifar10_linear" }' >> "$cfg"
  mkdir -p "$run"
  echo "=== $1"
  pids=()
  start_cluster "$cfg" "$run" 2 2
}

# last_server_field RUN KEY: KEY of the last "server" line, summed over ps:0, ps:1.
last_server_field() {
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
total = 0
for i in (0, 1):
    last = None
    for line in open(f"{sys.argv[1]}/ps-{i}.jsonl"):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("kind") == "server":
            last = r
    total += last[sys.argv[2]] if last else 0
print(total)
PYEOF
}

# await_exits NAME RUN: every worker, then every ps of start_cluster exit 0.
await_exits() {
  local j i
  for j in "${!w_pids[@]}"; do
    wait_exit "${w_pids[j]}" 300 || { cat "$2/w$j.log"; fail "$1: worker:$j exited $?"; }
  done
  for i in "${!ps_pids[@]}"; do
    wait_exit "${ps_pids[i]}" 60 || { cat "$2/ps$i.log"; fail "$1: ps:$i exited $?"; }
  done
}

ssp_case() {
  local bound=$1 name=ssp_bound_$1 run=$TMP/runs/ssp_bound_$1
  start_async "$name" 240 "staleness_bound: $bound"
  local ws=("${w_pids[@]}")
  # Throttle worker:1 once it has trained a step (both have joined then).
  await_steps "$run/worker-1.jsonl" 1 300 "${ws[1]}"
  ( while kill -STOP "${ws[1]}" 2>/dev/null; do
      sleep 0.15; kill -CONT "${ws[1]}" 2>/dev/null || break; sleep 0.05
    done ) &
  throttle=$!
  await_exits "$name" "$run"
  kill "$throttle" 2>/dev/null || true; wait "$throttle" 2>/dev/null || true; throttle=
  "$PY" - "$run" "$bound" <<'PYEOF' || fail "$name: the bound was broken"
import json, sys
run, bound = sys.argv[1], int(sys.argv[2])
def lines(j):
    out = []
    for line in open(f"{run}/worker-{j}.jsonl"):
        r = json.loads(line)
        if r.get("kind") == "train":
            out.append((r["unix_time"], r["local_step"]))
    return out
fast, slow = lines(0), lines(1)
slow_times = [t for t, _ in slow]
worst = -10**9
for t, k in fast:
    slow_pushes = sum(1 for s in slow_times if s <= t) + 1  # at most
    worst = max(worst, k - slow_pushes)
    if k > slow_pushes + bound:
        print(f"worker:0 step {k} at {t:.3f} while worker:1 had pushed at "
              f"most {slow_pushes}: beyond the bound {bound}")
        sys.exit(1)
print(f"worker:0 {len(fast)} steps, worker:1 {len(slow)} steps; worker:0 at "
      f"most {worst} pushes beyond worker:1's upper count (bound {bound})")
PYEOF
  local blocked
  blocked=$(last_server_field "$run" ssp_blocked_pulls)
  echo "$name: the servers held back $blocked pulls"
  [ "$blocked" -gt 0 ] || fail "$name: no pull was held back"
}

dc_case() {
  local name=dc_beta1 run=$TMP/runs/dc_beta1
  start_async "$name" 400 "dc_asgd_lambda: 0.04 async_beta1: 0.5"
  await_exits "$name" "$run"
  local first last compensated
  first=$(mean_loss "$run/worker-1.jsonl" FIRST 20)
  last=$(mean_loss "$run/worker-1.jsonl" LAST 20)
  compensated=$(last_server_field "$run" dc_compensated)
  echo "$name: loss $first -> $last, $compensated pushes compensated"
  "$PY" -c "import sys; sys.exit(0 if $last < 0.9 * $first else 1)" ||
    fail "$name: the loss did not fall ($first -> $last)"
  [ "$compensated" -gt 0 ] || fail "$name: no push was compensated"
}

ssp_case 0
ssp_case 1
dc_case
echo PASS
