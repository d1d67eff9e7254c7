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

# async_config FILE NAME STEPS EXTRA: 2 ps, 2 workers, the linear model,
# EXTRA inside the training block.
async_config() {
  write_config "$1" "$2" ASYNC 2 2 1 "$3" 30
  sed -i "s/^training { mode: ASYNC/training { mode: ASYNC $4/" "$1"
  echo 'model { name: "cifar10_linear" }' >> "$1"
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

ssp_case() {
  local bound=$1 steps=240
  local name=ssp_bound_$bound
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name
  async_config "$cfg" "$name" "$steps" "staleness_bound: $bound"
  mkdir -p "$run"
  echo "=== $name"
  pids=()
  start_cluster "$cfg" "$run" 2 2
  local ps=("${ps_pids[@]}") ws=("${w_pids[@]}")
  # Throttle worker:1 once it has trained a step (both have joined then).
  await_steps "$run/worker-1.jsonl" 1 300 "${ws[1]}"
  ( while kill -STOP "${ws[1]}" 2>/dev/null; do
      sleep 0.15; kill -CONT "${ws[1]}" 2>/dev/null || break; sleep 0.05
    done ) &
  throttle=$!
  for j in 0 1; do
    wait_exit "${ws[j]}" 300 || { cat "$run/w$j.log"; fail "$name: worker:$j exited $?"; }
  done
  kill "$throttle" 2>/dev/null || true; wait "$throttle" 2>/dev/null || true; throttle=
  for i in 0 1; do
    wait_exit "${ps[i]}" 60 || { cat "$run/ps$i.log"; fail "$name: ps:$i exited $?"; }
  done
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
  local name=dc_beta1 steps=400
  local cfg=$TMP/$name.pbtxt run=$TMP/runs/$name
  async_config "$cfg" "$name" "$steps" "dc_asgd_lambda: 0.04 async_beta1: 0.5"
  mkdir -p "$run"
  echo "=== $name"
  pids=()
  start_cluster "$cfg" "$run" 2 2
  local ps=("${ps_pids[@]}") ws=("${w_pids[@]}")
  for j in 0 1; do
    wait_exit "${ws[j]}" 300 || { cat "$run/w$j.log"; fail "$name: worker:$j exited $?"; }
  done
  for i in 0 1; do
    wait_exit "${ps[i]}" 60 || { cat "$run/ps$i.log"; fail "$name: ps:$i exited $?"; }
  done
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
