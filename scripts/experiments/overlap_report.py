#!/usr/bin/python3
"""The overlap experiment's figures (scripts/experiments/overlap.sh).

    overlap_report.py OFF_RUN ON_RUN [--runs runs.txt]

prints one line per run: the mean step time, compute time and transfer
time per the step's phases (workers' train lines, the first steps left
out), max(compute, transfer), their sum and overlap_ratio = step time /
max(compute, transfer). Compute and transfer are the overlap-off run's
phases (compute: input wait + forward and backward; transfer: push + pull +
the servers' wait): the work that overlap may hide. The overlap-on run's own
phases are printed beside them; there its compute includes waiting for
weights still arriving and its push only the last parts.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bandwidth_report import Run  # noqa: E402


def phases(run):
    compute = run.compute()
    transfer = run.mean("push_s") + run.mean("pull_s") + run.mean("wait_s")
    return run.mean("step_s"), compute, transfer


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("off")
    p.add_argument("on")
    p.add_argument("--runs", dest="runs_txt")
    a = p.parse_args()
    load = {}
    if a.runs_txt and os.path.exists(a.runs_txt):
        for line in open(a.runs_txt):
            parts = line.split()
            if len(parts) >= 5:
                load[parts[0]] = " ".join(parts[2:5])
    off, on = Run(a.off), Run(a.on)
    _, compute, transfer = phases(off)
    bound = max(compute, transfer)
    for run in (off, on):
        step, own_compute, own_transfer = phases(run)
        print(f"{run.name}: step_s={step:.3f} compute_s={compute:.3f} "
              f"transfer_s={transfer:.3f} max_s={bound:.3f} "
              f"sum_s={compute + transfer:.3f} "
              f"overlap_ratio={step / bound:.2f} "
              f"(own phases: compute {own_compute:.3f}, transfer "
              f"{own_transfer:.3f}; {len(run.late)} worker steps; load "
              f"average {load.get(run.name, '?')})")


if __name__ == "__main__":
    main()
