#!/usr/bin/env bash
# The planner's simulator against the real servers (docs/EXPERIMENTS.md,
# "Planning a cluster"): small clusters run for real, with emulated compute
# (docs/STRAGGLERS.md), and simulated by scripts/plan/cluster_sim.py with the
# same M, N, compute and slow worker give the same applied and dropped
# gradients, worker by worker, not only the same rates.
#   stale: 1 ps, 4 workers, sync N = 3 of 4, compute 0.04 s, worker:0 4x
#     slow: each push of worker:0 comes 4 steps late and is dropped as stale,
#     every push of the other three is aggregated, each step averages 3.
#   surplus: 1 ps, 4 equal workers, sync N = 2 of 4: each step aggregates the
#     first 2 pushes and drops the other 2 as surplus.
# The real side is read from the workers' own lines (each push's outcome)
# and the servers' counters (summary.json); the bounds come from the
# arithmetic of N, M and the steps, not from either side's counts.
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done' EXIT
STEPS=30

# real_case NAME N EXTRA...: runs 1 ps and 4 workers of sync N of 4 for
# $STEPS steps with the EXTRA config entries; the run is $TMP/runs/NAME.
real_case() {
  local name=$1 n=$2 cfg=$TMP/$1.pbtxt run=$TMP/runs/$1 j
  shift 2
  write_cluster_config "$cfg" "$name" mode=SYNC ps=1 workers=4 n="$n" batch=16 \
    steps="$STEPS" model=cifar10_linear \
    data="source: SYNTHETIC synthetic_train_size: 1200 synthetic_test_size: 300" \
    extra="emulation { compute { kind: CONSTANT shift_seconds: 0.04 } }" \
    extra="worker_lease_seconds: 60" "$@"
  mkdir -p "$run"
  echo "=== $name"
  start_cluster "$cfg" "$run" 1 4
  for j in 0 1 2 3; do
    wait_exit "${w_pids[j]}" 300 || { cat "$run/w$j.log"; fail "$name: worker:$j exited $?"; }
  done
  wait_exit "${ps_pids[0]}" 60 || { cat "$run/ps0.log"; fail "$name: ps:0 exited $?"; }
}

# compare NAME N SLOW: the real run against the simulation of the same
# cluster (slow: "0:4" or "").
compare() {
  "$PY" - "$TMP/runs/$1" "$2" "$3" "$STEPS" "$RUNFILES/scripts/plan" "$RUNFILES/scripts/lib" <<'PYEOF' || fail "$1: the simulator and the servers disagree"
import collections, json, sys
run, N, slow, steps, plan = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
sys.path[:0] = [plan, sys.argv[6]]
import cluster_sim as sim
import runs
from machine_profile import Profile
M = 4
# The real side: each push's outcome on its worker's lines ("applied": the
# push that completed a step, "aggregated": one counted before it; both
# counted in the step's average).
real = collections.defaultdict(collections.Counter)
order = collections.defaultdict(list)  # each worker's outcomes in push order
for j in range(M):
    for r in runs.train_lines(f"{run}/worker-{j}.jsonl"):
        o = r["outcome"]
        real[j]["counted" if o in ("applied", "aggregated") else o] += 1
        order[j].append(o)
summary = json.load(open(f"{run}/summary.json"))
final = summary["final_global_step"]
# The simulated side: the same cluster on one host, the default profile.
cl = sim.Cluster([sim.Host("local", 1e12, 0.0)], [0], [0] * M)
prof = Profile.load()
res = sim.simulate(cl, prof.models()["cifar10_linear"], prof, "sync", N, batch=16, compute="constant:0.04",
                   slow=slow, steps=steps, warmup=4, seed=1)
print("real outcomes by worker:", {j: dict(c) for j, c in real.items()})
print("real servers:", {k: summary[k] for k in ("final_global_step", "server_aggregated",
                                                  "server_applied",
                                                  "server_dropped_stale", "server_dropped_surplus")})
print("simulated:", {k: res[k] for k in ("aggregated", "dropped_stale", "dropped_surplus",
                                          "per_worker_arrivals", "per_worker_aggregated")})
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("MISMATCH:", what)
        ok = False
# Every step averages N gradients, on both sides.
check(final == steps, f"the run ended at step {final}, not {steps}")
# The servers count a step's completing push apart (server_applied).
counted = summary["server_aggregated"] + summary["server_applied"]
check(counted == N * steps, f"servers counted {counted} gradients, not N x steps = {N * steps}")
check(sum(c["counted"] for c in real.values()) == N * steps,
      "the workers' counted pushes are not N x steps")
check(set(res["n_per_step"]) == {N}, f"simulated steps of other than {N} gradients")
check(res["aggregated"] == N * steps, f"simulated {res['aggregated']} aggregated, not "
      f"N x steps = {N * steps}")
arr, agg = res["per_worker_arrivals"], res["per_worker_aggregated"]
if slow:
    # Worker 0: every push dropped as stale (its first may come while the
    # others still start, its last as the run ends, one step late: surplus);
    # the others: every push counted (the last step may leave one a worker
    # surplus).
    w0 = order[0]
    late = ("dropped_stale", "dropped_surplus")
    check(len(w0) > 2 and w0[0] in late and w0[-1] in late and
          all(o == "dropped_stale" for o in w0[1:-1]), f"real worker 0: {w0}")
    check(arr[0] > 0 and agg[0] == 0, "simulated worker 0 had a push aggregated")
    for j in (1, 2, 3):
        check(real[j]["dropped_stale"] == 0 and real[j]["dropped_surplus"] <= 1,
              f"real worker {j}: {dict(real[j])}")
        check(agg[j] == arr[j], f"simulated worker {j} had pushes dropped")
    check(res["dropped_stale"] > 0 and res["dropped_surplus"] == 0,
          "simulated drops other than worker 0's stale ones")
else:
    # Equal workers: each step drops M - N pushes as surplus, none stale; the
    # last step (the real run's end, the simulated window's edges) may leave
    # up to M - N pushes on either side.
    pushes = sum(sum(c.values()) for c in real.values())
    surplus = sum(c["dropped_surplus"] for c in real.values())
    check(sum(c["dropped_stale"] for c in real.values()) == 0, "real stale drops")
    check(abs(surplus - (M - N) * steps) <= M - N,
          f"real surplus {surplus}, not (M - N) x steps = {(M - N) * steps} +- {M - N}")
    check(pushes == N * steps + surplus, f"real pushes {pushes} != aggregated + surplus")
    check(res["dropped_stale"] == 0, "simulated stale drops")
    check(abs(res["dropped_surplus"] - (M - N) * steps) <= M - N,
          f"simulated surplus {res['dropped_surplus']}, not (M - N) x steps")
sys.exit(0 if ok else 1)
PYEOF
}

real_case stale 3 extra="stragglers { workers: 0 slow_factor: 4 }"
compare stale 3 0:4
real_case surplus 2
compare surplus 2 ""
echo "PASS"
