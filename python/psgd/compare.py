#!/usr/bin/python3
"""Compares training runs: writes report.md and PNG plots.

    psgd compare RUN_DIR [RUN_DIR...] [--out DIR] [--target 0.6]
    (or scripts/run/compare.py ..., from the repository: the same code)

Each RUN_DIR is what a cluster (scripts/run/launch.sh) or train_local wrote:
  config.pbtxt                    the config of the run (clusters)
  worker-J.jsonl / metrics.jsonl (train_local)   one JSON object per line:
      {"kind": "train", "step", "wall_time_s", "loss", "train_accuracy",
       "images_per_s", "compute_s", and for cluster workers "pull_s",
       "push_s", "wait_s", "staleness", "outcome"}
      {"kind": "eval", "step", "wall_time_s", "test_accuracy"}
  ps-I.jsonl                       server lines ({"kind": "server", ...})
  summary.json                     the run's summary (the chief's)
  net-HOST.jsonl                   a host's link counters (launch.sh --netns)
Other .jsonl files are not read (samples-worker-J.jsonl of data {
record_samples: true }, the servers' ledgers): scripts/lib/runs.py's
METRICS_FILE names the ones that are.
A run gathered from several hosts may keep each host's or task's files in a
folder of its own (RUN_DIR/h0/, RUN_DIR/h1/, ...; scripts/run/collect_run.sh
gathers them): the files of RUN_DIR and of its sub-folders are read as one
run, and a file name found in two folders is an error.

Plots (PNG, in --out, default the first run's parent directory / compare-TIME):
  loss.png        loss per step and loss per wall-clock second (two panels)
  accuracy.png    test accuracy per wall-clock second
  throughput.png  images/s of the whole run over time
  staleness.png   staleness histogram of async runs
  dropped.png     gradients dropped per run (stale, surplus) of sync runs
and report.md with one table: final accuracy, time to --target accuracy,
steps, epochs, images/s, and mean step time split into pull, compute, push,
wait; the runs' configs side by side (the model and where its batch norm
statistics live, N, M, batch, learning rate, schedule, staleness controls,
wire). accuracy.png has a panel per second and one per epoch (images taken
by all workers over the training set's size, from the train_examples of the
workers' step lines, or the epoch of train_local's eval lines). Nothing
depends on the model: any model of the registry, or a Python worker's.

    --repeats N   each setting was run N times, its run directories given one
                  after the other (sync-r1 sync-r2 sync-r3 async-r1 ...): the
                  report opens with the mean and sample standard deviation of
                  each setting's final accuracy, time to target, epochs,
                  images/s and steps, and the accuracy plots colour each
                  setting's repeats alike.
"""
import argparse
import collections
import datetime
import math
import os
import re
import sys

from .runs import Run, RunError  # noqa: F401  (psgd.runs; compare.Run for importers)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("psgd compare: matplotlib is missing: install python3-matplotlib "
             "(scripts/setup.sh does) and run with /usr/bin/python3, or a "
             "virtual environment made from it with --system-site-packages")


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


def plot_accuracy(runs, out, colors=None):
    """Test accuracy per wall-clock second and per epoch. With repeats,
    `colors` maps a run to its setting's color and label (one legend entry
    per setting)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    labelled = set()
    for run in runs:
        if not run.evals:
            continue
        color, label = (colors or {}).get(run.path, (None, run.label))
        if label in labelled:
            label = None
        else:
            labelled.add(label)
        style = dict(marker="o", markersize=3, color=color, label=label,
                     alpha=0.7 if colors else 1.0)
        a.plot([r["wall_time_s"] for r in run.evals],
               [r["test_accuracy"] for r in run.evals], **style)
        ee = run.eval_epochs()
        if ee:
            b.plot([e for e, _ in ee], [acc for _, acc in ee], **style)
    a.set_xlabel("wall-clock seconds")
    a.set_title("test accuracy per second")
    b.set_xlabel("epochs (images taken by all workers / training set)")
    b.set_title("test accuracy per epoch")
    for ax in (a, b):
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
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
             "rejoined"]
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


def steps_taken(run):
    """The run's global steps: the summary's final_global_step, else from the
    step lines: a cluster's carry the step their gradient was computed from
    (0 first), train_local's the steps done (1 first)."""
    if run.summary.get("final_global_step") is not None:
        return run.summary["final_global_step"]
    last = max(x["step"] for x in run.steps)
    return last if run.mode == "local" else last + 1


def fmt(x, digits=3, unit=""):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}{unit}"


def setting_name(group):
    """A name for runs that repeat one setting: their common prefix without
    a trailing separator or repeat number (sync-r1, sync-r2 -> sync)."""
    names = [r.name for r in group]
    prefix = os.path.commonprefix(names)
    if len(names) > 1:
        prefix = re.sub(r"[-_.]?(r|rep|repeat)?\d*$", "", prefix)
    return prefix or names[0]


def mean_spread(values):
    """(mean, sample standard deviation, count) of the values that are not
    None; the deviation is None for fewer than two."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None, 0
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return m, None, len(vals)
    return m, math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)), len(vals)


def fmt_spread(values, digits):
    m, sd, n = mean_spread(values)
    if m is None:
        return "–"
    text = fmt(m, digits) + (f" ± {fmt(sd, digits)}" if sd is not None else "")
    return text + (f" ({n} of {len(values)})" if n < len(values) else "")


def repeats_table(groups, target):
    """Mean ± sample standard deviation over each setting's repeats."""
    lines = [f"Repeats: mean ± sample standard deviation over each setting's "
             f"runs (a count in brackets: runs that reached it).", "",
             f"| setting | runs | final test accuracy | time to {target:.0%} (s) | "
             f"epochs | images/s | steps |",
             "|" + " --- |" * 7]
    for g in groups:
        steps = [steps_taken(r) for r in g]
        lines.append(
            f"| {setting_name(g)} | {len(g)} | {fmt_spread([r.final_accuracy() for r in g], 4)} | "
            f"{fmt_spread([r.time_to(target) for r in g], 1)} | "
            f"{fmt_spread([r.epochs() for r in g], 2)} | "
            f"{fmt_spread([r.total_images_per_s() for r in g], 1)} | "
            f"{fmt_spread(steps, 1)} |")
    lines.append("")
    return lines


def report(runs, out, target, plots, groups=None):
    lines = [f"# Run comparison ({datetime.date.today().isoformat()})", ""]
    lines.append("Runs: " + ", ".join(f"`{r.path}`" for r in runs))
    lines.append("")
    if groups:
        lines.extend(repeats_table(groups, target))
    lines.append(f"| run | mode | workers | steps | final test accuracy | "
                 f"time to {target:.0%} (s) | duration (s) | epochs | images/s | "
                 f"step (s) | pull | compute | push | wait |")
    lines.append("|" + " --- |" * 14)
    for r in runs:
        step_s = r.mean("step_s")
        parts = {k: r.mean(k) for k in ("pull_s", "compute_s", "push_s", "wait_s")}
        if step_s is None:
            known = [v for v in parts.values() if v is not None]
            step_s = sum(known) if known else None
        last_step = steps_taken(r)
        lines.append(
            f"| {r.name}{' (emulated compute)' if r.emulated else ''} | "
            f"{r.mode} | {len(r.workers())} | {last_step} | "
            f"{fmt(r.final_accuracy(), 4)} | {fmt(r.time_to(target), 1)} | "
            f"{fmt(r.duration(), 1)} | {fmt(r.epochs(), 2)} | "
            f"{fmt(r.total_images_per_s(), 1)} | "
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


def main(argv=None, prog="compare.py"):
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n")[0],
        epilog="Each RUN_DIR is a run directory (psgd launch's, "
               "scripts/run/launch.sh's, train_local's).")
    p.add_argument("runs", nargs="+", help="run directories")
    p.add_argument("--out", help="output directory")
    p.add_argument("--target", type=float, default=0.6,
                   help="target test accuracy for the time-to-accuracy column")
    p.add_argument("--repeats", type=int, default=1,
                   help="each setting was run this many times: the run "
                        "directories come in groups of this many consecutive "
                        "ones, and the report adds the mean and spread of each")
    a = p.parse_args(argv)
    if not 0 < a.target <= 1:
        p.error(f"--target {a.target} is not in (0, 1]")
    if a.repeats < 1:
        p.error(f"--repeats {a.repeats} is not a positive count")
    if len(a.runs) % a.repeats:
        p.error(f"--repeats {a.repeats}: {len(a.runs)} run directories do not "
                f"split into groups of {a.repeats}")
    try:
        runs = [Run(path) for path in a.runs]
    except RunError as e:
        sys.exit(f"{prog}: {e}")
    groups, colors = None, None
    if a.repeats > 1:
        groups = [runs[i:i + a.repeats] for i in range(0, len(runs), a.repeats)]
        palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        colors = {r.path: (palette[i % len(palette)], setting_name(g))
                  for i, g in enumerate(groups) for r in g}
    out = a.out or os.path.join(
        os.path.dirname(os.path.abspath(runs[0].path)),
        "compare-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    plot_loss(runs, out)
    plot_accuracy(runs, out, colors)
    plot_throughput(runs, out)
    plots = ["loss.png", "accuracy.png", "throughput.png"]
    if plot_staleness(runs, out):
        plots.append("staleness.png")
    if plot_dropped(runs, out):
        plots.append("dropped.png")
    report(runs, out, a.target, plots, groups)
    print(f"{prog}: wrote {os.path.join(out, 'report.md')} and {len(plots)} plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
