#!/usr/bin/env python3
"""One Chrome trace of a run: scripts/run/trace.py RUN_DIR [--out FILE]

Opens in chrome://tracing or https://ui.perfetto.dev (no server needed: load
the file). A row per task: each worker's steps split into their phases
(input, compute, push, wait, pull) and the chief's evaluations, so that a
sync step's straggler shows as the row whose compute ends last while the
others wait; each server's step and pending gradients as counters.

RUN_DIR is a run directory as scripts/lib/runs.py reads it (one folder, or
one folder per task gathered from several hosts). Step lines need
`unix_time` (the step's end, written by the worker since 2026-11); the rows
of different tasks are placed on one clock by it. Default output:
RUN_DIR/trace.json.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from runs import Run, RunError  # noqa: E402  (scripts/lib/runs.py)

# Phases in the order a step runs them (the pull waits for the step first,
# then moves the weights).
PHASES = (("input", "input_wait_s"), ("compute", "compute_s"),
          ("push", "push_s"), ("wait", "wait_s"), ("pull", "pull_s"))


def task_order(task):
    kind, _, index = task.partition(":")
    return (0 if kind == "ps" else 1, int(index) if index.isdigit() else 0, task)


def build_trace(run):
    """The trace events of `run` (runs.Run) as a dict for json.dump."""
    timed = [r for r in run.steps if isinstance(r.get("unix_time"), (int, float))]
    if not timed:
        raise RunError(f"{run.path}: no step line has unix_time (written by "
                       "workers since 2026-11): nothing to place on a clock")
    # Each task's clock: unix_time - wall_time_s is its start.
    starts = {}
    for r in timed:
        starts.setdefault(r["task"], r["unix_time"] - r.get("wall_time_s", 0.0))
    origin = min(r["unix_time"] - r.get("step_s", 0.0) for r in timed)
    tasks = sorted({r["task"] for r in run.steps} |
                   {r["task"] for r in run.servers}, key=task_order)
    pid = {t: i + 1 for i, t in enumerate(tasks)}
    events = []
    for t in tasks:
        events.append({"ph": "M", "name": "process_name", "pid": pid[t],
                       "args": {"name": t}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid[t],
                       "args": {"sort_index": pid[t]}})

    def us(seconds):
        return round(seconds * 1e6)

    # Events of one row (task, thread) must not overlap, or viewers nest
    # them: each lands on whole microseconds, at or after the row's last end
    # (clocks read apart round a phase's edges a microsecond either way).
    row_end = {}

    def place(task, tid, begin_s, dur_s):
        key = (pid[task], tid)
        ts = max(us(begin_s), row_end.get(key, us(begin_s)))
        end = max(ts, us(begin_s + dur_s))
        row_end[key] = end
        return {"pid": pid[task], "tid": tid, "ts": ts, "dur": end - ts}

    for r in sorted(timed, key=lambda r: (r["task"], r["unix_time"])):
        end = r["unix_time"] - origin
        begin = end - r.get("step_s", 0.0)
        args = {k: r[k] for k in ("step", "local_step", "loss", "outcome",
                                  "staleness") if k in r}
        events.append({"ph": "X", "name": f"step {r.get('step')}",
                       "cat": "step", **place(r["task"], 1, begin, r.get("step_s", 0.0)),
                       "args": args})
        at = begin
        for name, field in PHASES:
            d = float(r.get(field, 0.0) or 0.0)
            if d > 0:
                events.append({"ph": "X", "name": name, "cat": "phase",
                               **place(r["task"], 2, at, d),
                               "args": {"step": r.get("step")}})
            at += d
    for e in sorted(run.evals, key=lambda e: (e["task"], e.get("wall_time_s", 0.0))):
        start = starts.get(e["task"])
        if start is None or "wall_time_s" not in e:
            continue
        end = start + e["wall_time_s"] - origin
        events.append({"ph": "X", "name": "eval", "cat": "eval",
                       **place(e["task"], 3, end - e.get("eval_s", 0.0), e.get("eval_s", 0.0)),
                       "args": {"step": e.get("step"),
                                "test_accuracy": e.get("test_accuracy")}})
    for s in run.servers:
        if not isinstance(s.get("unix_time"), (int, float)):
            continue
        events.append({"ph": "C", "name": "shard", "pid": pid[s["task"]],
                       "ts": us(s["unix_time"] - origin),
                       "args": {"step": s.get("step", 0),
                                "pending_gradients": s.get("pending_gradients", 0)}})
    for t in tasks:
        for tid, name in ((1, "steps"), (2, "phases"), (3, "evaluations")):
            events.append({"ph": "M", "name": "thread_name", "pid": pid[t],
                           "tid": tid, "args": {"name": name}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run": run.path, "origin_unix_time": origin}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--out", help="the trace file (default RUN_DIR/trace.json)")
    a = p.parse_args(argv)
    try:
        run = Run(a.run_dir)
        trace = build_trace(run)
    except RunError as e:
        print(f"trace.py: {e}", file=sys.stderr)
        return 2
    out = a.out or os.path.join(a.run_dir, "trace.json")
    with open(out, "w") as fh:
        json.dump(trace, fh)
    steps = sum(1 for e in trace["traceEvents"] if e.get("cat") == "step")
    print(f"trace.py: {steps} steps of {len({e['pid'] for e in trace['traceEvents']})} "
          f"tasks -> {out} (open in chrome://tracing or ui.perfetto.dev)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
