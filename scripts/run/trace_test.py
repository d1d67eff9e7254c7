"""scripts/run/trace.py on a small run made here: two workers, one a straggler,
and a server; the trace's rows, phases and clock are checked."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "trace.py")


def write(path, lines):
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def step(task, step, end, compute, wait):
    return {"kind": "train", "task": task, "step": step, "local_step": step + 1,
            "wall_time_s": end - 1000.0, "unix_time": end, "loss": 2.0,
            "step_s": 0.01 + compute + 0.02 + wait + 0.03,
            "input_wait_s": 0.01, "compute_s": compute, "push_s": 0.02,
            "wait_s": wait, "pull_s": 0.03, "outcome": "applied"}


def main():
    d = tempfile.mkdtemp()
    run = os.path.join(d, "run")
    # Folders per host, as collect_run.sh gathers them.
    os.makedirs(os.path.join(run, "h0"))
    os.makedirs(os.path.join(run, "h1"))
    # worker:1 computes 0.5 s, worker:0 0.1 s and waits for it.
    write(os.path.join(run, "h0", "worker-0.jsonl"),
          [step("worker:0", 0, 1000.66, 0.1, 0.5),
           {"kind": "eval", "task": "worker:0", "step": 1, "wall_time_s": 0.9,
            "eval_s": 0.2, "test_accuracy": 0.1},
           step("worker:0", 1, 1001.32, 0.1, 0.5)])
    write(os.path.join(run, "h1", "worker-1.jsonl"),
          [step("worker:1", 0, 1000.66, 0.5, 0.1),
           step("worker:1", 1, 1001.32, 0.5, 0.1)])
    write(os.path.join(run, "h1", "ps-0.jsonl"),
          [{"kind": "server", "task": "ps:0", "wall_time_s": 0.5,
            "unix_time": 1000.5, "step": 1, "pending_gradients": 1}])
    out = os.path.join(d, "t.json")
    r = subprocess.run([sys.executable, TRACE, run, "--out", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    t = json.load(open(out))
    ev = t["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(names.values()) == ["ps:0", "worker:0", "worker:1"], names
    pid = {v: k for k, v in names.items()}
    steps = [e for e in ev if e.get("cat") == "step"]
    assert len(steps) == 4, steps
    # One clock: both workers' step 0 end at the same time; the earliest
    # step starts at 0.
    ends = sorted((e["ts"] + e["dur"], e["pid"]) for e in steps
                  if e["args"]["step"] == 0)
    assert abs(ends[0][0] - ends[1][0]) < 1.0, ends
    assert min(e["ts"] for e in steps) == 0.0
    # The phases of worker:1's step 0 follow each other in order, and its
    # compute is the long one (the straggler).
    ph = sorted((e for e in ev if e.get("cat") == "phase"
                 and e["pid"] == pid["worker:1"] and e["args"]["step"] == 0),
                key=lambda e: e["ts"])
    assert [e["name"] for e in ph] == ["input", "compute", "push", "wait",
                                       "pull"], ph
    for a, b in zip(ph, ph[1:]):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 1.0, (a, b)
    assert ph[1]["dur"] == 500000.0
    w0 = [e for e in ev if e.get("cat") == "phase" and e["pid"] == pid["worker:0"]
          and e["name"] == "wait"]
    assert all(e["dur"] == 500000.0 for e in w0)
    # No two events of a row overlap (viewers would nest them): on whole
    # microseconds, each starts at or after the end of the one before.
    rows = {}
    for e in ev:
        if e["ph"] == "X":
            rows.setdefault((e["pid"], e["tid"]), []).append(e)
    for row in rows.values():
        row.sort(key=lambda e: e["ts"])
        for a, b in zip(row, row[1:]):
            assert isinstance(a["ts"], int) and isinstance(a["dur"], int), a
            assert a["ts"] + a["dur"] <= b["ts"], (a, b)
    # The chief's evaluation and the server's counters are there.
    assert any(e.get("cat") == "eval" for e in ev)
    assert any(e["ph"] == "C" and e["pid"] == pid["ps:0"] for e in ev)

    # A run without unix_time says what is missing.
    old = os.path.join(d, "old")
    os.makedirs(old)
    rec = step("worker:0", 0, 1.0, 0.1, 0.1)
    del rec["unix_time"]
    write(os.path.join(old, "worker-0.jsonl"), [rec])
    r = subprocess.run([sys.executable, TRACE, old], capture_output=True, text=True)
    assert r.returncode == 2 and "unix_time" in r.stderr, r.stderr
    print("PASS")


if __name__ == "__main__":
    main()
