#!/usr/bin/python3
"""The bandwidth experiment's analysis (scripts/experiments/bandwidth.sh).

    bandwidth_report.py --caps UNCAPPED_RUN
        prints "CAP10G CAP1G" (tc rates) chosen from the uncapped run
    bandwidth_report.py RUN [RUN...] --out DIR [--runs runs.txt]
        writes DIR/bandwidth.md and bandwidth_*.png

A RUN is a launch.sh --netns run directory (one folder per host, with the
hosts' link samples net-HOST.jsonl and the workers' step lines), read by
scripts/lib/runs.py.
"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import runs  # noqa: E402  (scripts/lib/runs.py: the run reader)

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The seed experiment: 1 GbE took 5x as long per step as 10 GbE. With
# compute C and the busiest link's transfer T1 at 1G (T10 = T1 / 10):
# C + T1 = 5 (C + T1/10)  =>  T1 = 8 C, T10 = 0.8 C.
TRANSFER_OVER_COMPUTE_1G = 8.0
SKIP = 3  # first steps left out of means (warm-up)


def counter_at(recs, t, key):
    """A link counter at time t, interpolated between samples."""
    if t <= recs[0]["unix_time"]:
        return recs[0][key]
    for a, b in zip(recs, recs[1:]):
        if a["unix_time"] <= t <= b["unix_time"]:
            f = (t - a["unix_time"]) / max(b["unix_time"] - a["unix_time"], 1e-9)
            return a[key] + f * (b[key] - a[key])
    return recs[-1][key]


class Run:
    """A run as runs.Run reads it, with the means this report takes: over
    the workers' train lines from local step SKIP on."""

    def __init__(self, path):
        try:
            run = runs.Run(path)
        except runs.RunError as e:
            sys.exit(f"bandwidth_report.py: {e}")
        self.path, self.name, self.net = run.path, run.name, run.net
        self.steps = [r for r in run.steps if r.get("kind", "train") == "train"]
        if not self.steps:
            sys.exit(f"bandwidth_report.py: {path}: no training steps")
        timed = [r for r in self.steps if "unix_time" in r]
        self.start = min(r["unix_time"] - r["step_s"] for r in timed)
        self.end = max(r["unix_time"] for r in timed)
        self.global_steps = len({r["step"] for r in self.steps})
        late = [r for r in self.steps if r.get("local_step", r["step"]) >= SKIP]
        self.late = late or self.steps

    def mean(self, key):
        return statistics.mean(r[key] for r in self.late)

    def compute(self):
        return self.mean("compute_s") + self.mean("input_wait_s")

    def links(self):
        """host -> (rx, tx) bytes per global step over the training window,
        and cap in bit/s."""
        out = {}
        for host, recs in self.net.items():
            rx = counter_at(recs, self.end, "rx_bytes") - counter_at(recs, self.start, "rx_bytes")
            tx = counter_at(recs, self.end, "tx_bytes") - counter_at(recs, self.start, "tx_bytes")
            out[host] = (rx / self.global_steps, tx / self.global_steps,
                         recs[-1].get("cap_bits_per_s", 0))
        return out

    def busiest(self):
        links = self.links()
        host = max(links, key=lambda h: links[h][0] + links[h][1])
        return host, links[host]

    def loss_by_step(self):
        by = collections.defaultdict(list)
        for r in self.steps:
            by[r["step"]].append(r["loss"])
        return {s: statistics.mean(v) for s, v in sorted(by.items())}


def rate(bits):
    return f"{max(1, int(round(bits / 1000)))}kbit"


def caps(path):
    r = Run(path)
    host, (rx, tx, _) = r.busiest()
    bits = 8 * (rx + tx)  # push and pull phases follow each other in sync
    c = r.compute()
    one_g = bits / (TRANSFER_OVER_COMPUTE_1G * c)
    print(rate(10 * one_g), rate(one_g))
    print(f"bandwidth_report.py: compute {c:.3f} s/step, busiest host {host} "
          f"moves {bits / 1e6:.1f} Mbit/step -> 1G cap {one_g / 1e6:.2f} Mbit/s",
          file=sys.stderr)


def report(paths, out, runs_txt):
    runs = [Run(p) for p in paths]
    load = {}
    if runs_txt and os.path.exists(runs_txt):
        for line in open(runs_txt):
            parts = line.split()
            if len(parts) >= 5:
                load[parts[0]] = " ".join(parts[2:5])
    os.makedirs(out, exist_ok=True)
    L = ["# Bandwidth experiment", ""]
    L.append("| run | link cap | load avg (1/5/15 min) | steps | training (s) | step (s) | "
             "input | compute | push | pull | wait | transfer (step - compute - input) | "
             "busiest host | its Mbit per step (in + out) | byte bound (s) | transfer / bound |")
    L.append("|" + " --- |" * 16)
    for r in runs:
        host, (rx, tx, cap) = r.busiest()
        transfer = r.mean("step_s") - r.compute()
        bound = 8 * (rx + tx) / cap if cap else None
        L.append(
            f"| {r.name} | {f'{cap / 1e6:.1f} Mbit/s' if cap else 'none'} | {load.get(r.name, '–')} | "
            f"{r.global_steps} | {r.end - r.start:.1f} | {r.mean('step_s'):.3f} | "
            f"{r.mean('input_wait_s'):.3f} | {r.mean('compute_s'):.3f} | {r.mean('push_s'):.3f} | "
            f"{r.mean('pull_s'):.3f} | {r.mean('wait_s'):.3f} | {transfer:.3f} | {host} | "
            f"{8 * rx / 1e6:.1f} + {8 * tx / 1e6:.1f} | "
            f"{f'{bound:.3f}' if bound else '–'} | {f'{transfer / bound:.2f}x' if bound else '–'} |")
    L.append("")
    L.append(f"Means over every worker's steps from local step {SKIP} on. The byte bound "
             "is the bits the busiest host's link carried per step (in and out: a sync "
             "step's pushes all come in before its pulls go out) over the cap.")
    L.append("")
    base = runs[0].loss_by_step()
    L.append(f"Loss per step against {runs[0].name} (mean over the workers of each step):")
    L.append("")
    L.append("| run | steps compared | max relative difference | mean relative difference | "
             "max over 10-step means |")
    L.append("| --- | --- | --- | --- | --- |")
    for r in runs[1:]:
        other = r.loss_by_step()
        common = sorted(set(base) & set(other))
        rel = [abs(other[s] - base[s]) / base[s] for s in common]
        windows = [common[i:i + 10] for i in range(0, len(common), 10)]
        wrel = [abs(statistics.mean(other[s] for s in w) - statistics.mean(base[s] for s in w)) /
                statistics.mean(base[s] for s in w) for w in windows if w]
        L.append(f"| {r.name} | {len(common)} | {max(rel):.2%} | {statistics.mean(rel):.2%} | "
                 f"{max(wrel):.2%} |")
    L.append("")
    L.append("Link of every host over the training window, Mbit/s (interface counters: "
             "payload and protocol):")
    L.append("")
    L.append("| run | host | in | out | cap | busier direction / cap |")
    L.append("| --- | --- | --- | --- | --- | --- |")
    for r in runs:
        dt = r.end - r.start
        for host, (rx, tx, cap) in sorted(r.links().items()):
            n = r.global_steps
            L.append(f"| {r.name} | {host} | {8 * rx * n / dt / 1e6:.1f} | {8 * tx * n / dt / 1e6:.1f} | "
                     f"{f'{cap / 1e6:.1f}' if cap else 'none'} | "
                     f"{f'{8 * max(rx, tx) * n / dt / cap:.0%}' if cap else '–'} |")
    L.append("")
    # Plots.
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in runs:
        lbs = r.loss_by_step()
        ax[0].plot(list(lbs), list(lbs.values()), label=r.name)
        t = collections.defaultdict(list)
        for x in r.steps:
            if "unix_time" in x:
                t[x["step"]].append(x["unix_time"] - r.start)
        steps = [s for s in lbs if s in t]
        ax[1].plot([max(t[s]) for s in steps], [lbs[s] for s in steps], label=r.name)
    ax[0].set_xlabel("global step"); ax[0].set_ylabel("training loss"); ax[0].legend()
    ax[1].set_xlabel("seconds"); ax[1].set_ylabel("training loss"); ax[1].legend()
    fig.tight_layout(); fig.savefig(os.path.join(out, "bandwidth_loss.png")); plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    parts = ["input_wait_s", "compute_s", "push_s", "pull_s", "wait_s"]
    bottom = [0.0] * len(runs)
    for p in parts:
        vals = [r.mean(p) for r in runs]
        ax.bar([r.name for r in runs], vals, bottom=bottom, label=p[:-2])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("seconds per step"); ax.legend()
    fig.tight_layout(); fig.savefig(os.path.join(out, "bandwidth_step.png")); plt.close(fig)
    L.append("![loss per step and per second](bandwidth_loss.png)")
    L.append("![the step split](bandwidth_step.png)")
    L.append("")
    with open(os.path.join(out, "bandwidth.md"), "w") as fh:
        fh.write("\n".join(L))
    print(f"bandwidth_report.py: wrote {os.path.join(out, 'bandwidth.md')}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*")
    p.add_argument("--caps", help="print the caps from this uncapped run")
    p.add_argument("--out")
    p.add_argument("--runs", dest="runs_txt")
    a = p.parse_args()
    if a.caps:
        caps(a.caps)
    elif a.runs and a.out:
        report(a.runs, a.out, a.runs_txt)
    else:
        p.error("give --caps RUN, or RUN... --out DIR")


if __name__ == "__main__":
    main()
