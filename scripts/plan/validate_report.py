#!/usr/bin/python3
"""The table of scripts/plan/validate.sh: each scenario's steps/s as the
simulator predicts it (scripts/plan/cluster_sim.py with the machine
profile) and as the real cluster on namespace hosts made it, and the error.

    validate_report.py OUT --step_ms=MS [--profile=FILE]   writes OUT/report.md

OUT holds scenarios.txt (name shards workers mode backups cap, a line
each; mode sync, async, or sspK: async with staleness_bound K),
setup.txt and, unless validate.sh ran with --dry-run, runs.txt and one
launch.sh --netns run directory per scenario (read by
scripts/lib/runs.py). Measured: the cluster's global step (sync: steps;
async: applied pushes) over the steady part of the run, from the first
training line after the first SKIP global steps to the last line, by the
newest global step any worker's lines show. Predicted: cluster_sim's
steps_per_s, every task on a host of its own with the cap as its NIC's
rate and the caps' token bucket as the links' (scripts/run/netns_hosts.sh's
tbf burst: 5 ms at the rate, at least 64 KiB) and every task on one
machine of --cores cores; the same with a CPU a shard and the workers' CPU
free is printed beside it. Then the planner's first choice: among the
scenarios of the same workers and link cap, the one scripts/plan/plan.py's
rule picks from the predictions (the most images/s, async only at
ASYNC_MARGIN times the best sync's), against the one the runs measured
fastest (and the fastest sync one). Exits 1 when a scenario's error is over 15% (the bar
docs/EXPERIMENTS.md sets), 2 on bad input.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import cluster_sim  # noqa: E402
import runs  # noqa: E402  (scripts/lib/runs.py)
from machine_profile import Profile, ProfileError  # noqa: E402

SKIP = 5  # global steps left out at the start (connections, first pulls)
BAR = 0.15
ASYNC_MARGIN = 1.5  # plan.py's --async_margin default
CHOICE_BAR = 0.05  # the first choice within 5% of the measured fastest


def staleness_bound(mode):
    """async: None (no bound); sspK: K; sync: None. ValueError otherwise."""
    if mode in ("sync", "async"):
        return None
    if mode.startswith("ssp") and mode[3:].isdigit():
        return int(mode[3:])
    raise ValueError(f"mode '{mode}' is not sync, async or sspK")


def is_async(mode):
    """async and sspK (async with a staleness bound)."""
    return mode != "sync"


def images_per_step(mode, workers, backups, batch=128):
    """Sync: N workers' batches a step; async: one push's batch."""
    return batch if is_async(mode) else (workers - backups) * batch


def first_choices(results):
    """results: [(name, workers, mode, backups, cap, predicted steps/s,
    measured steps/s or None)]. Rows of a table: for each (workers, cap)
    with two scenarios or more, the planner's pick from the predictions and
    the measured fastest (all, and sync only)."""
    groups = {}
    for r in results:
        groups.setdefault((r[1], r[4]), []).append(r)
    rows = []
    for (workers, cap), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        def ips(r, k):  # noqa: E306
            return r[k] * images_per_step(r[2], r[1], r[3])
        pred = sorted(group, key=lambda r: -ips(r, 5))
        pick = pred[0]
        syncs = [r for r in pred if not is_async(r[2])]
        if is_async(pick[2]) and syncs and ips(pick, 5) < ASYNC_MARGIN * ips(syncs[0], 5):
            pick = syncs[0]
        if any(r[6] is None for r in group):
            rows.append(f"| {workers} | {cap} | {pick[0]} | - | - | - |")
            continue
        fastest = max(group, key=lambda r: ips(r, 6))
        fastest_sync = max(syncs, key=lambda r: ips(r, 6)) if syncs else fastest
        ref = fastest if is_async(pick[2]) or not syncs else fastest_sync
        short = 1 - ips(pick, 6) / ips(ref, 6)
        ok = short <= CHOICE_BAR
        rows.append(f"| {workers} | {cap} | {pick[0]} ({ips(pick, 5):,.0f} predicted, "
                    f"{ips(pick, 6):,.0f} measured) | {fastest[0]} ({ips(fastest, 6):,.0f}) | "
                    f"{fastest_sync[0]} ({ips(fastest_sync, 6):,.0f}) | "
                    f"{'yes' if ok else 'no'}: {short:.1%} short of {ref[0]} |")
    return rows


def measured_rate(path):
    """The newest global step's rate over the steady part of a run."""
    try:
        run = runs.Run(path)
    except runs.RunError as e:
        raise ValueError(str(e)) from e
    lines = sorted((r["unix_time"], r["step"]) for r in run.steps
                   if r.get("kind", "train") == "train")
    if not lines:
        raise ValueError(f"{path}: no training lines")
    newest, marks = -1, []
    for t, step in lines:
        if step > newest:
            newest = step
            marks.append((t, step))
    start = next((m for m in marks if m[1] >= marks[0][1] + SKIP), None)
    if start is None or marks[-1][0] <= start[0]:
        raise ValueError(f"{path}: {len(marks)} global steps, too few to measure")
    return (marks[-1][1] - start[1]) / (marks[-1][0] - start[0])


def tbf_burst_bytes(gbit):
    """scripts/run/netns_hosts.sh's tbf burst at this rate."""
    return max(gbit * 1e9 / 8 / 200, 65536)


def predicted(shards, workers, mode, backups, gbit, step_ms, profile, burst_bytes, cores=None):
    models = profile.models()
    cl = cluster_sim.Cluster.spread(workers, shards, workers, shards, gbit, 5e-6,
                                    burst_bytes)
    bound = staleness_bound(mode)
    res = cluster_sim.simulate(
        cl, models["resnet20"], profile, "async" if is_async(mode) else "sync",
        None if is_async(mode) else workers - backups, wire="fp32",
        optimizer="momentum", transport="grpc", batch=128,
        compute=f"constant:{step_ms / 1000}", steps=300, warmup=20, seed=1, cores=cores,
        **({} if bound is None else {"staleness_bound": bound}))
    return res["steps_per_s"], res["bound"], res.get("cores_utilisation")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--step_ms", type=float, required=True)
    p.add_argument("--profile", default=None)
    p.add_argument("--cores", type=int, default=os.cpu_count(),
                   help="the cores every task of the runs shared (default: this machine's)")
    a = p.parse_args(argv)
    if a.cores is None or a.cores < 1:
        print(f"validate_report.py: --cores={a.cores}: must be >= 1", file=sys.stderr)
        return 2
    try:
        profile = Profile.load(a.profile)
        with open(os.path.join(a.out, "scenarios.txt")) as f:
            scenarios = [line.split() for line in f if line.strip()]
    except (OSError, ProfileError, ValueError) as e:
        print(f"validate_report.py: {e}", file=sys.stderr)
        return 2
    ran = os.path.exists(os.path.join(a.out, "runs.txt"))
    busy = {}  # scenario -> the machine's CPU busy over its run
    if ran:
        for line in open(os.path.join(a.out, "runs.txt")):
            words = line.split()
            for w in words[1:]:
                if w.startswith("cpu_busy="):
                    busy[words[0]] = float(w.split("=", 1)[1])
    rows, worst, results = [], 0.0, []
    for name, shards, workers, mode, backups, cap in scenarios:
        gbit = {"1gbit": 1.0, "10gbit": 10.0}.get(cap)
        if gbit is None:
            print(f"validate_report.py: {name}: cap '{cap}' is not 1gbit or 10gbit",
                  file=sys.stderr)
            return 2
        try:
            pred, bound, sim_busy = predicted(int(shards), int(workers), mode, int(backups), gbit,
                                    a.step_ms, profile, tbf_burst_bytes(gbit), a.cores)
            nic, _, _ = predicted(int(shards), int(workers), mode, int(backups), gbit,
                               a.step_ms, profile, tbf_burst_bytes(gbit))
            meas = measured_rate(os.path.join(a.out, name)) if ran else None
        except (ValueError, ProfileError) as e:
            print(f"validate_report.py: {name}: {e}", file=sys.stderr)
            return 2
        results.append((name, int(workers), mode, int(backups), cap, pred, meas))
        how = ("async" if mode == "async" else
               f"async, staleness_bound {staleness_bound(mode)}" if is_async(mode) else
               f"sync N={int(workers) - int(backups)} of {workers}")
        # CPU ms a step (a sync step, an async push) on the machine's cores:
        # the simulator's work on them, and what the machine was busy.
        sim_ms = sim_busy * a.cores * 1000 / pred
        if meas is None:
            rows.append(f"| {name} | {shards} | {workers} | {how} | {cap} | "
                        f"{pred:.1f} | {nic:.1f} | - | - | {bound} | - | {sim_ms:.2f} | - |")
            continue
        meas_ms = busy[name] * a.cores * 1000 / meas if name in busy else float("nan")
        err = pred / meas - 1
        worst = max(worst, abs(err))
        rows.append(f"| {name} | {shards} | {workers} | {how} | {cap} | {pred:.1f} | "
                    f"{nic:.1f} | {meas:.1f} | {err:+.1%}{'' if abs(err) <= BAR else ' **over 15%**'} | "
                    f"{bound} | {busy.get(name, float('nan')):.0%} | {sim_ms:.2f} | "
                    f"{meas_ms:.2f} |")
    setup = open(os.path.join(a.out, "setup.txt")).read().strip()
    text = "\n".join([
        "# The simulator against real runs on namespace hosts", "",
        "```", setup, "```", "",
        f"The machine profile: {os.path.relpath(profile.path)}.", "",
        f"The prediction: every task on one machine of {a.cores} cores (the shards' and the "
        "workers' CPU work on them), the links' token buckets; beside it the same with a CPU "
        "a shard and the workers' CPU free (the simulator before it modelled the machine). "
        f"CPU ms a step (a sync step, an async push): the simulator's work on the {a.cores} "
        "cores, and the machine's busy share of them over the run (/proc/stat) over the "
        "measured steps/s.", "",
        "| scenario | shards | workers | mode | link cap | predicted steps/s | "
        "predicted, a CPU a shard | measured steps/s | error | the simulator's bound | "
        "machine CPU busy | CPU ms a step, simulated | CPU ms a step, measured |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, "",
        "The planner's first choice among the scenarios of the same workers and link cap "
        f"(images/s; async only at {ASYNC_MARGIN:g}x the best sync's, as plan.py), against "
        f"the measured fastest (sync when the pick is sync), within {CHOICE_BAR:.0%}:", "",
        "| workers | link cap | first choice | measured fastest | measured fastest sync | "
        "the choice within 5% |",
        "| --- | --- | --- | --- | --- | --- |",
        *first_choices(results), ""])
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    if ran:
        print(f"worst error {worst:.1%}; {sum('over 15%' in r for r in rows)} of "
              f"{len(rows)} scenarios over 15%")
    return 1 if worst > BAR else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
