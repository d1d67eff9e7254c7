#!/usr/bin/python3
"""Compares training runs: writes report.md and PNG plots.

    scripts/compare.py RUN_DIR [RUN_DIR...] [--out DIR] [--target 0.6]

Each RUN_DIR is what a cluster (scripts/launch.sh) or train_local wrote:
  config.pbtxt                    the config of the run (clusters)
  worker-J.jsonl / metrics.jsonl (train_local)   one JSON object per line:
      {"kind": "train", "step", "wall_time_s", "loss", "train_accuracy",
       "images_per_s", "compute_s", and for cluster workers "pull_s",
       "push_s", "wait_s", "staleness", "outcome"}
      {"kind": "eval", "step", "wall_time_s", "test_accuracy"}
  ps-I.jsonl                       server lines ({"kind": "server", ...})
  summary.json                     the run's summary (the chief's)
  net-HOST.jsonl                   a host's link counters (launch.sh --netns)
A run gathered from several hosts may keep each host's or task's files in a
folder of its own (RUN_DIR/h0/, RUN_DIR/h1/, ...; scripts/collect_run.sh
gathers them): the files of RUN_DIR and of its sub-folders are read as one
run, and a file name found in two folders is an error.

Plots (PNG, in --out, default the first run's parent directory / compare-TIME):
  loss.png        loss per step and loss per wall-clock second (two panels)
  accuracy.png    test accuracy per wall-clock second
  throughput.png  images/s of the whole run over time
  staleness.png   staleness histogram of async runs
  dropped.png     gradients dropped per run (stale, surplus) of sync runs
and report.md with one table: final accuracy, time to --target accuracy,
steps, images/s, and mean step time split into pull, compute, push, wait.
"""
import argparse
import collections
import datetime
import json
import math
import os
import re
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("compare.py: matplotlib is missing: install python3-matplotlib "
             "(scripts/setup.sh does) and run with /usr/bin/python3")


class RunError(Exception):
    pass


class Run:
    """The metrics of one run directory."""

    def __init__(self, path):
        self.path = path.rstrip("/")
        self.name = os.path.basename(self.path)
        self.steps = []    # step lines of every worker, by wall time
        self.evals = []    # eval lines, by wall time
        self.servers = []  # server lines
        self.net = collections.defaultdict(list)  # host -> net lines
        self.summary = {}
        self.mode = "local"
        self._load()

    def _load(self):
        if not os.path.isdir(self.path):
            raise RunError(f"{self.path}: not a directory")
        found = {}  # file name -> folder
        folders = [self.path] + sorted(
            os.path.join(self.path, d) for d in os.listdir(self.path)
            if os.path.isdir(os.path.join(self.path, d)))
        for folder in folders:
            for f in sorted(os.listdir(folder)):
                if not (f.endswith(".jsonl") or f in ("summary.json", "config.pbtxt")):
                    continue
                if f in found:
                    raise RunError(f"{self.path}: {f} is in both {found[f]} and "
                                   f"{folder}: one task's files per folder")
                found[f] = folder
        files = sorted(f for f in found if f.endswith(".jsonl"))
        self.files = found
        if not files:
            raise RunError(f"{self.path}: no .jsonl metrics files")
        for f in files:
            task = f[:-len(".jsonl")]
            with open(os.path.join(found[f], f)) as fh:
                for lineno, line in enumerate(fh, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as e:
                        # A task killed mid-write leaves a partial last line.
                        print(f"compare.py: {f}:{lineno}: skipped: {e}",
                              file=sys.stderr)
                        continue
                    rec.setdefault("task", task)
                    kind = rec.get("kind", "train")
                    if kind in ("train", "step"):
                        self.steps.append(rec)
                    elif kind == "eval":
                        self.evals.append(rec)
                    elif kind == "server":
                        self.servers.append(rec)
                    elif kind == "net":
                        self.net[rec["host"]].append(rec)
        if not self.steps:
            raise RunError(f"{self.path}: no training-step lines in {', '.join(files)}")
        self.steps.sort(key=lambda r: r.get("wall_time_s", 0.0))
        self.evals.sort(key=lambda r: r.get("wall_time_s", 0.0))
        summary = os.path.join(found.get("summary.json", self.path), "summary.json")
        if os.path.exists(summary):
            with open(summary) as fh:
                self.summary = json.load(fh)
        self.mode = self.summary.get("mode") or self._mode_from_config()

    def _mode_from_config(self):
        cfg = os.path.join(self.files.get("config.pbtxt", self.path), "config.pbtxt")
        if os.path.exists(cfg):
            with open(cfg) as fh:
                for line in fh:
                    if "mode:" in line and "ASYNC" in line:
                        return "async"
            return "sync"
        return "local"

    def config_fields(self):
        """The training settings of config.pbtxt that tell runs apart (N, M,
        batch, learning rate, schedule, staleness controls, wire), as text;
        "–" for one the config leaves at its default."""
        cfg = os.path.join(self.files.get("config.pbtxt", self.path), "config.pbtxt")
        text = open(cfg).read() if os.path.exists(cfg) else ""
        text = re.sub(r"#[^\n]*", "", text)

        def field(name, default="–"):
            m = re.search(r"\b" + name + r"\s*:\s*\"?([^\s\"}]+)", text)
            return m.group(1) if m else default

        workers = str(len(self.workers()))
        schedule = "–"
        if re.search(r"\bschedule\s*\{", text):
            parts = []
            if field("base_batch_size") != "–":
                parts.append(f"x batch/{field('base_batch_size')}")
            if field("warmup_steps") != "–":
                parts.append(f"warmup {field('warmup_steps')}")
            if field("decay") != "–":
                parts.append(field("decay").lower())
            schedule = ", ".join(parts) or "constant"
        wire = "–"
        if re.search(r"\bwire\s*\{", text):
            wire = f"{field('gradients', 'FP32')}/{field('weights', 'FP32')}"
        return {
            "N": field("replicas_to_aggregate", workers if self.mode == "sync" else "1"),
            "M": field("total_num_replicas", workers),
            "batch": field("batch_size", "128"),
            "lr": field("learning_rate", "0.001"),
            "schedule": schedule,
            "staleness bound": field("staleness_bound"),
            "lr / staleness": field("lr_scaled_by_staleness"),
            "wire": wire,
        }

    @property
    def label(self):
        return f"{self.name} ({self.mode})"

    def workers(self):
        return sorted({r["task"] for r in self.steps})

    def duration(self):
        return max(r.get("wall_time_s", 0.0) for r in self.steps + self.evals)

    def final_accuracy(self):
        if self.summary.get("final_test_accuracy") is not None:
            return self.summary["final_test_accuracy"]
        return self.evals[-1]["test_accuracy"] if self.evals else None

    def time_to(self, target):
        for r in self.evals:
            if r["test_accuracy"] >= target:
                return r["wall_time_s"]
        return None

    def mean(self, key):
        vals = [r[key] for r in self.steps if isinstance(r.get(key), (int, float))]
        return sum(vals) / len(vals) if vals else None

    def total_images_per_s(self):
        """Images per second of all workers together."""
        per_worker = collections.defaultdict(list)
        for r in self.steps:
            if isinstance(r.get("images_per_s"), (int, float)):
                per_worker[r["task"]].append(r["images_per_s"])
        if not per_worker:
            return None
        return sum(sum(v) / len(v) for v in per_worker.values())

    def link_rates(self):
        """Per host: (mean sent B/s, mean received B/s, peak sent+received
        over 1 s... of the samples, cap in bit/s) over the run."""
        rates = {}
        for host, recs in sorted(self.net.items()):
            recs = sorted(recs, key=lambda r: r["unix_time"])
            if len(recs) < 2:
                continue
            dt = recs[-1]["unix_time"] - recs[0]["unix_time"]
            tx = (recs[-1]["tx_bytes"] - recs[0]["tx_bytes"]) / dt
            rx = (recs[-1]["rx_bytes"] - recs[0]["rx_bytes"]) / dt
            peak = 0.0
            for a, b in zip(recs, recs[1:]):
                d = b["unix_time"] - a["unix_time"]
                if d > 0:
                    peak = max(peak, max(b["tx_bytes"] - a["tx_bytes"],
                                         b["rx_bytes"] - a["rx_bytes"]) / d)
            rates[host] = (tx, rx, peak, recs[-1].get("cap_bits_per_s", 0))
        return rates

    def payload_rates(self):
        """Per task: mean payload bytes/s sent and received (sent_bytes and
        received_bytes of its step lines, and of a server's lines, which
        count since the line before, over the task's time)."""
        per = collections.defaultdict(lambda: [0, 0, None, None])
        servers = sorted(self.servers, key=lambda r: (r["task"], r.get("wall_time_s", 0.0)))
        last_server_time = {}
        for r in list(self.steps) + servers:
            if "sent_bytes" not in r:
                continue
            p = per[r["task"]]
            p[0] += r["sent_bytes"]
            p[1] += r.get("received_bytes", 0)
            t = r.get("wall_time_s", 0.0)
            if r.get("kind") == "server":
                start = last_server_time.get(r["task"], 0.0)
                last_server_time[r["task"]] = t
            else:
                start = t - r.get("step_s", 0.0)
            p[2] = start if p[2] is None else min(p[2], start)
            p[3] = t if p[3] is None else max(p[3], t)
        return {task: (p[0] / (p[3] - p[2]), p[1] / (p[3] - p[2]))
                for task, p in sorted(per.items()) if p[3] and p[3] > p[2]}

    def outcomes(self):
        return collections.Counter(r.get("outcome", "applied") for r in self.steps)

    def staleness(self):
        return [r["staleness"] for r in self.steps
                if isinstance(r.get("staleness"), (int, float))
                and r.get("outcome", "applied") == "applied"]


def smooth(xs, ys, window):
    """Moving average of ys (window points), with the matching xs."""
    if len(ys) < window or window <= 1:
        return xs, ys
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return xs, out


def plot_loss(runs, out):
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in runs:
        by_step = sorted(run.steps, key=lambda r: r["step"])
        window = max(1, len(by_step) // 100)
        xs, ys = smooth([r["step"] for r in by_step], [r["loss"] for r in by_step], window)
        a.plot(xs, ys, label=run.label)
        xs, ys = smooth([r["wall_time_s"] for r in run.steps],
                        [r["loss"] for r in run.steps], window)
        b.plot(xs, ys, label=run.label)
    a.set_xlabel("global step")
    a.set_ylabel("training loss")
    a.set_title("loss per step")
    b.set_xlabel("wall-clock seconds")
    b.set_ylabel("training loss")
    b.set_title("loss per second")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=100)
    plt.close(fig)


def plot_accuracy(runs, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in runs:
        if run.evals:
            ax.plot([r["wall_time_s"] for r in run.evals],
                    [r["test_accuracy"] for r in run.evals], marker="o",
                    markersize=3, label=run.label)
    ax.set_xlabel("wall-clock seconds")
    ax.set_ylabel("test accuracy")
    ax.set_title("test accuracy per second")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "accuracy.png"), dpi=100)
    plt.close(fig)


def plot_throughput(runs, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in runs:
        # Images per wall-clock bucket, all workers together.
        span = run.duration()
        bucket = max(1.0, span / 50)
        counts = collections.Counter()
        for r in run.steps:
            n = r.get("batch_size") or 0
            if not n and r.get("images_per_s") and r.get("step_s"):
                n = r["images_per_s"] * r["step_s"]
            counts[int(r["wall_time_s"] // bucket)] += n
        if counts:
            keys = sorted(counts)
            ax.plot([k * bucket for k in keys], [counts[k] / bucket for k in keys],
                    label=run.label)
    ax.set_xlabel("wall-clock seconds")
    ax.set_ylabel("images/s (all workers)")
    ax.set_title("throughput")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "throughput.png"), dpi=100)
    plt.close(fig)


def plot_staleness(runs, out):
    async_runs = [r for r in runs if r.mode == "async" and r.staleness()]
    if not async_runs:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in async_runs:
        s = run.staleness()
        hi = max(s)
        ax.hist(s, bins=range(0, int(hi) + 2), alpha=0.6, label=run.label,
                align="left")
    ax.set_xlabel("staleness (server version minus the version the gradient used)")
    ax.set_ylabel("gradients")
    ax.set_title("staleness of applied gradients (async)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "staleness.png"), dpi=100)
    plt.close(fig)
    return True


def plot_dropped(runs, out):
    sync_runs = [r for r in runs if r.mode == "sync"]
    if not sync_runs:
        return False
    kinds = ["aggregated", "applied", "dropped_stale", "dropped_surplus",
             "partly_dropped", "rejoined"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / len(sync_runs)
    for i, run in enumerate(sync_runs):
        c = run.outcomes()
        ax.bar([k + i * width for k in range(len(kinds))], [c.get(k, 0) for k in kinds],
               width=width, label=run.label)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(kinds))])
    ax.set_xticklabels(kinds, rotation=15)
    ax.set_ylabel("worker pushes")
    ax.set_title("push outcomes of sync runs")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "dropped.png"), dpi=100)
    plt.close(fig)
    return True


def fmt(x, digits=3, unit=""):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}{unit}"


def report(runs, out, target, plots):
    lines = [f"# Run comparison ({datetime.date.today().isoformat()})", ""]
    lines.append("Runs: " + ", ".join(f"`{r.path}`" for r in runs))
    lines.append("")
    lines.append(f"| run | mode | workers | steps | final test accuracy | "
                 f"time to {target:.0%} (s) | duration (s) | images/s | "
                 f"step (s) | pull | compute | push | wait |")
    lines.append("|" + " --- |" * 13)
    for r in runs:
        step_s = r.mean("step_s")
        parts = {k: r.mean(k) for k in ("pull_s", "compute_s", "push_s", "wait_s")}
        if step_s is None:
            known = [v for v in parts.values() if v is not None]
            step_s = sum(known) if known else None
        last_step = r.summary.get("final_global_step",
                                  max(x["step"] for x in r.steps) + 1)
        lines.append(
            f"| {r.name} | {r.mode} | {len(r.workers())} | {last_step} | "
            f"{fmt(r.final_accuracy(), 4)} | {fmt(r.time_to(target), 1)} | "
            f"{fmt(r.duration(), 1)} | {fmt(r.total_images_per_s(), 1)} | "
            f"{fmt(step_s)} | {fmt(parts['pull_s'])} | {fmt(parts['compute_s'])} | "
            f"{fmt(parts['push_s'])} | {fmt(parts['wait_s'])} |")
    lines.append("")
    cols = list(runs[0].config_fields().keys())
    lines.append("Configs side by side (config.pbtxt; – is the default):")
    lines.append("")
    lines.append("| run | " + " | ".join(cols) + " |")
    lines.append("|" + " --- |" * (len(cols) + 1))
    for r in runs:
        c = r.config_fields()
        lines.append(f"| {r.name} | " + " | ".join(c[k] for k in cols) + " |")
    lines.append("")
    lines.append("Step times are means over every worker's steps, in seconds; "
                 "wait is the time a worker spent waiting for the step to "
                 "advance (sync) before its pull returned.")
    lines.append("")
    for r in runs:
        c = r.outcomes()
        if r.mode != "local":
            lines.append(f"- {r.name}: push outcomes " +
                         ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
        if r.mode == "async" and r.staleness():
            s = r.staleness()
            lines.append(f"  staleness of applied gradients: mean {sum(s) / len(s):.2f}, "
                         f"max {max(s)}")
    lines.append("")
    net_lines = []
    for r in runs:
        for host, (tx, rx, peak, cap) in r.link_rates().items():
            capped = f"{cap / 1e6:.0f} Mbit/s" if cap else "none"
            share = f"{8 * max(tx, rx) / cap:.0%}" if cap else "–"
            net_lines.append(f"| {r.name} | {host} | {8 * tx / 1e6:.1f} | "
                             f"{8 * rx / 1e6:.1f} | {8 * peak / 1e6:.1f} | "
                             f"{capped} | {share} |")
        for task, (sent, received) in r.payload_rates().items():
            net_lines.append(f"| {r.name} | {task} (payload) | "
                             f"{8 * sent / 1e6:.1f} | {8 * received / 1e6:.1f} "
                             f"| – | – | – |")
    if net_lines:
        lines.append("Network, Mbit/s: each host's link (its interface's "
                     "counters, payload and protocol) and each task's payload, "
                     "mean over the run; peak over 1 s; share: the busier "
                     "direction's mean over the cap.")
        lines.append("")
        lines.append("| run | host or task | sent | received | peak | cap | share |")
        lines.append("|" + " --- |" * 7)
        lines.extend(net_lines)
        lines.append("")
    for p in plots:
        lines.append(f"![{p}]({p})")
    lines.append("")
    with open(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join(lines))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run directories")
    p.add_argument("--out", help="output directory")
    p.add_argument("--target", type=float, default=0.6,
                   help="target test accuracy for the time-to-accuracy column")
    a = p.parse_args(argv)
    if not 0 < a.target <= 1:
        p.error(f"--target {a.target} is not in (0, 1]")
    try:
        runs = [Run(path) for path in a.runs]
    except RunError as e:
        sys.exit(f"compare.py: {e}")
    out = a.out or os.path.join(
        os.path.dirname(os.path.abspath(runs[0].path)),
        "compare-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    plot_loss(runs, out)
    plot_accuracy(runs, out)
    plot_throughput(runs, out)
    plots = ["loss.png", "accuracy.png", "throughput.png"]
    if plot_staleness(runs, out):
        plots.append("staleness.png")
    if plot_dropped(runs, out):
        plots.append("dropped.png")
    report(runs, out, a.target, plots)
    print(f"compare.py: wrote {os.path.join(out, 'report.md')} and {len(plots)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
