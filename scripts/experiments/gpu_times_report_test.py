#!/usr/bin/python3
"""gpu_times_report.py on fabricated runs whose rates and losses are known:
steps/s and images/s over the steady part, the speed against the uncapped
link, the largest loss difference per step, and one node against the
distributed runs.

    gpu_times_report_test.py PATH/TO/gpu_times_report.py
"""
import json
import os
import subprocess
import sys
import tempfile


def write_run(root, name, workers, batch, period_s, steps, loss=None):
    """`workers` workers each ending global step s at s * period_s."""
    d = os.path.join(root, name)
    os.makedirs(d)
    for w in range(workers):
        with open(os.path.join(d, f"worker-{w}.jsonl"), "w") as f:
            for s in range(steps):
                rec = {"kind": "train", "task": f"worker:{w}", "step": s,
                       "unix_time": 1000.0 + s * period_s, "wall_time_s": s * period_s,
                       "batch_size": batch, "step_s": period_s,
                       "compute_s": period_s / 2, "push_s": period_s / 4,
                       "pull_s": period_s / 4, "wait_s": 0.0, "emulated": loss is None}
                if loss is not None:
                    rec["loss"] = loss(s) + 0.01 * w  # the mean adds 0.005 (2 workers)
                f.write(json.dumps(rec) + "\n")


def report(tool, out, setup, runs_txt):
    with open(os.path.join(out, "setup.txt"), "w") as f:
        f.write(setup)
    with open(os.path.join(out, "runs.txt"), "w") as f:
        f.write(runs_txt)
    subprocess.run([sys.executable, tool, out], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "report.md")) as f:
        return f.read()


def expect(text, want):
    if want not in text:
        sys.exit(f"FAIL: report lacks {want!r}:\n{text}")


def main():
    tool = sys.argv[1]
    setup = ("finding {}\nstep_ms 3\nper_sample_us 8\nworkers 2\ncpu test cpu\n"
             "commit abc\ndate 2026-11-28T00:00:00Z\n")
    with tempfile.TemporaryDirectory() as out:
        # 30 global steps; 10 ms a step uncapped, 50 ms on the 1 Gbit/s link.
        write_run(out, "emulated-GRPC-none", 2, 128, 0.010, 30)
        write_run(out, "emulated-GRPC-1gbit", 2, 128, 0.050, 30)
        write_run(out, "real-GRPC-none", 2, 32, 1.0, 10, loss=lambda s: 2.0 - 0.1 * s)
        # The same losses but step 7's, 1% higher.
        write_run(out, "real-GRPC-1gbit", 2, 32, 3.0, 10,
                  loss=lambda s: (2.0 - 0.1 * s) * (1.01 if s == 7 else 1.0) +
                  (0.005 * 0.01 if s == 7 else 0.0))
        write_run(out, "real-GRPC-none-again", 2, 32, 1.0, 10, loss=lambda s: 2.0 - 0.1 * s)
        text = report(tool, out, setup.format("network"),
                      "emulated-GRPC-none none 0.1 0.2 0.3\nemulated-GRPC-1gbit 1gbit 1 2 3\n")
        expect(text, "| GRPC | none | 100.0 | 25,600 | 10.0 | 5.0 | 2.5 | 2.5 | 1.00x | 0.1 0.2 0.3 |")
        expect(text, "| GRPC | 1gbit | 20.0 | 5,120 | 50.0 | 25.0 | 12.5 | 12.5 | 0.20x | 1 2 3 |")
        expect(text, "| GRPC | none | 10 | 2.0050 / 1.1050 | 0.000% |")
        expect(text, "| GRPC | 1gbit | 10 | 2.0050 / 1.1050 | 1.000% |")
        expect(text, "| GRPC | none, again | 10 | 2.0050 / 1.1050 | 0.000% |")
    with tempfile.TemporaryDirectory() as out:
        # One node: 1 worker of 128 every 5 ms; distributed: 2 of 64 every 20 ms.
        write_run(out, "one-node-128", 1, 128, 0.005, 30)
        write_run(out, "dist-UCX-1gbit-128", 2, 64, 0.020, 30)
        text = report(tool, out, setup.format("batch"), "")
        expect(text, "| 128 | 4.02 | 25,600 | 6,400 (0.25x) |")
        expect(text, "| UCX | 1gbit | 128 | 20.0 | 10.0 | 5.0 | 5.0 | 0.0 | – |")
    with tempfile.TemporaryDirectory() as out:
        write_run(out, "one-node-128", 1, 128, 0.005, 4)  # too few steps
        with open(os.path.join(out, "setup.txt"), "w") as f:
            f.write(setup.format("batch"))
        open(os.path.join(out, "runs.txt"), "w").close()
        r = subprocess.run([sys.executable, tool, out], capture_output=True, text=True)
        if r.returncode == 0 or "4 global steps, too few to measure" not in r.stderr:
            sys.exit(f"FAIL: a run of 4 steps was measured: {r.stderr}")
    print("gpu_times_report_test: ok")


if __name__ == "__main__":
    main()
