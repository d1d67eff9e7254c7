#!/usr/bin/python3
"""The report of scripts/experiments/gpu_times.sh (the seeds' network
findings at GPU step times).

    gpu_times_report.py OUT     writes OUT/report.md

OUT holds setup.txt, runs.txt and one launch.sh --netns run directory per
run, read by scripts/lib/runs.py:
  emulated-PLANE-LINK  (--finding=network) the emulated cluster on LINK
  real-PLANE-LINK      (--finding=network) the same cluster computing
                       (and real-PLANE-none-again: the first uncapped
                       one run again)
  one-node-B, dist-PLANE-LINK-B  (--finding=batch)
Rates are over each run's steady part: the global steps after the first
SKIP, from the first of them to the end of the last.
"""
import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import runs  # noqa: E402  (scripts/lib/runs.py: the run reader)

SKIP = 5  # global steps left out at the start (connections, first pulls)
LINKS = ["none", "10gbit", "1gbit"]


class Measured:
    """One run's global step rate and its workers' mean step split."""

    def __init__(self, path):
        try:
            run = runs.Run(path)
        except runs.RunError as e:
            sys.exit(f"gpu_times_report.py: {e}")
        steps = [r for r in run.steps if r.get("kind", "train") == "train"]
        if not steps:
            sys.exit(f"gpu_times_report.py: {path}: no training steps")
        self.workers = len({r["task"] for r in steps})
        self.batch = max(int(r.get("batch_size", 0)) for r in steps)
        ends = collections.defaultdict(float)  # global step -> its last end
        for r in steps:
            ends[r["step"]] = max(ends[r["step"]], r["unix_time"])
        ordered = sorted(ends)
        if len(ordered) <= SKIP + 1:
            sys.exit(f"gpu_times_report.py: {path}: {len(ordered)} global "
                     f"steps, too few to measure (more than {SKIP + 1} needed)")
        first, last = ordered[SKIP], ordered[-1]
        span = ends[last] - ends[first]
        self.steps = len(ordered) - SKIP - 1
        self.steps_per_s = self.steps / span if span > 0 else float("nan")
        self.images_per_s = self.steps_per_s * self.batch * self.workers
        steady = [r for r in steps if r["step"] > first]

        def mean(key):
            vals = [r[key] for r in steady if isinstance(r.get(key), (int, float))]
            return sum(vals) / len(vals) if vals else float("nan")

        self.split = {k: mean(k) for k in ("step_s", "compute_s", "push_s", "pull_s", "wait_s")}
        self.emulated = run.emulated
        # The mean loss of each global step over the workers that made it.
        by_step = collections.defaultdict(list)
        for r in steps:
            if isinstance(r.get("loss"), (int, float)):
                by_step[r["step"]].append(r["loss"])
        self.loss = {s: sum(v) / len(v) for s, v in by_step.items()}


def read_setup(out):
    setup = {}
    with open(os.path.join(out, "setup.txt")) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(" ")
            setup[key] = value
    loads = {}
    with open(os.path.join(out, "runs.txt")) as f:
        for line in f:
            parts = line.split()
            loads[parts[0]] = " ".join(parts[2:])
    return setup, loads


def ms(x):
    return f"{1000 * x:.1f}"


def network_report(out, setup, loads, lines):
    planes = sorted({m.group(1) for d in os.listdir(out)
                     if (m := re.match(r"emulated-(\w+)-", d)) and os.path.isdir(os.path.join(out, d))})
    lines += ["## Seed 000: the same loss per step, slower per second on a slower network", "",
              f"{setup['workers']} workers and 2 ps on hosts of their own, sync N = M, "
              "ResNet-20. Per second: emulated compute at batch 128 a worker; "
              "per step: the same cluster computing for real (batch 32, each worker "
              "its shard of CIFAR-10).", "",
              "| data plane | link | global steps/s | images/s | step (ms) | compute | push | pull | "
              "speed against uncapped | load (1, 5, 15 min) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    emulated = {}
    for plane in planes:
        for link in LINKS:
            name = f"emulated-{plane}-{link}"
            if not os.path.isdir(os.path.join(out, name)):
                continue
            m = emulated[plane, link] = Measured(os.path.join(out, name))
            base = emulated.get((plane, "none"))
            rel = f"{m.steps_per_s / base.steps_per_s:.2f}x" if base else "–"
            lines.append(f"| {plane} | {link} | {m.steps_per_s:.1f} | {m.images_per_s:,.0f} | "
                         f"{ms(m.split['step_s'])} | {ms(m.split['compute_s'])} | "
                         f"{ms(m.split['push_s'])} | {ms(m.split['pull_s'])} | {rel} | "
                         f"{loads.get(name, '–')} |")
    lines += ["", "Loss per step (the workers' mean at each global step), runs computing "
              "for real:", "",
              "| data plane | link | steps | loss at the first / last step | "
              "largest difference from the first uncapped run, any step |",
              "| --- | --- | --- | --- | --- |"]
    reference = None
    for plane in planes:
        for link in LINKS + ["none-again"]:
            path = os.path.join(out, f"real-{plane}-{link}")
            if not os.path.isdir(path):
                continue
            m = Measured(path)
            if reference is None:
                reference = m.loss
            common = sorted(set(reference) & set(m.loss))
            diff = max((abs(m.loss[s] - reference[s]) / max(abs(reference[s]), 1e-12)
                        for s in common), default=float("nan"))
            first, last = min(m.loss), max(m.loss)
            shown = "none, again" if link == "none-again" else link
            lines.append(f"| {plane} | {shown} | {len(m.loss)} | {m.loss[first]:.4f} / "
                         f"{m.loss[last]:.4f} | {100 * diff:.3f}% |")
    lines.append("")


def batch_report(out, setup, loads, lines):
    one = {}
    dist = {}
    for d in os.listdir(out):
        if not os.path.isdir(os.path.join(out, d)):
            continue
        if m := re.match(r"one-node-(\d+)$", d):
            one[int(m.group(1))] = Measured(os.path.join(out, d))
        elif m := re.match(r"dist-(\w+)-(\w+)-(\d+)$", d):
            dist[m.group(1), m.group(2), int(m.group(3))] = Measured(os.path.join(out, d))
    columns = sorted({(p, link) for p, link, _ in dist}, key=lambda c: (c[0], LINKS.index(c[1])))
    lines += ["## Seed 002: distributed slower than one node until the batch is large enough", "",
              f"Images per second at global batch B: one node (one worker computing "
              f"t(B), its ps on the same host over shared memory) against "
              f"{setup['workers']} workers and 2 ps across hosts (B / {setup['workers']} "
              "a worker); in brackets, against one node.", "",
              "| global batch | t(B) one node (ms) | one node | " +
              " | ".join(f"{p} {link}" for p, link in columns) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in columns) + " |"]
    step_ms = float(setup["step_ms"])
    per_sample_us = float(setup["per_sample_us"])
    for b in sorted(one):
        o = one[b]
        cells = []
        for p, link in columns:
            d = dist.get((p, link, b))
            cells.append("–" if d is None else
                         f"{d.images_per_s:,.0f} ({d.images_per_s / o.images_per_s:.2f}x)")
        t = step_ms + b * per_sample_us / 1000
        lines.append(f"| {b} | {t:.2f} | {o.images_per_s:,.0f} | " + " | ".join(cells) + " |")
    lines += ["", "Step split of the distributed runs (ms a worker step: step = compute + "
              "push + pull + wait):", "",
              "| data plane | link | global batch | step | compute | push | pull | wait | load |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (p, link, b), d in sorted(dist.items(), key=lambda kv: (kv[0][0], LINKS.index(kv[0][1]), kv[0][2])):
        s = d.split
        lines.append(f"| {p} | {link} | {b} | {ms(s['step_s'])} | {ms(s['compute_s'])} | "
                     f"{ms(s['push_s'])} | {ms(s['pull_s'])} | {ms(s['wait_s'])} | "
                     f"{loads.get(f'dist-{p}-{link}-{b}', '–')} |")
    lines.append("")


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: gpu_times_report.py OUT")
    out = argv[1]
    setup, loads = read_setup(out)
    lines = ["# The network at GPU step times", "",
             f"Emulated compute t(b) = {setup['step_ms']} ms + b x {setup['per_sample_us']} us "
             "(assumed, not measured on a GPU); "
             f"{setup['cpu']}; commit {setup['commit']}; {setup['date']}.", ""]
    if setup["finding"] == "network":
        network_report(out, setup, loads, lines)
    else:
        batch_report(out, setup, loads, lines)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv)
