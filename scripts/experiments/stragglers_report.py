#!/usr/bin/env python3
"""The straggler study's report (scripts/experiments/stragglers.sh): per run
directory, what the workers' step lines say about throughput and the tail.

    stragglers_report.py RUN_DIR... [--warmup_s=5] [--out=FILE.md]
        [--json=FILE] [--model] [--model_steps=2000]

Per run (a setting): workers M, N (sync: the config's; adaptive: the mean
of the N the servers chose, from the step lines' replicas_to_aggregate),
steps/s, gradients applied/s, p50 / p90 / p99 of the global step time,
gradients dropped (stale, surplus, refused) and their fraction, the
normalized speedup against the sync b=0 run of the same M (TensorFlow,
OSDI'16 fig. 8: t(0)/t(b) x 50/(50+b) with N fixed; here M is fixed and
N = M - b, and the same "useful gradients per worker-second" is the ratio
of gradients applied per second), async staleness (mean, p99), and the
delay injected per step (straggler emulation) against the step time.

How the step times are measured. Each step line has the global step of
the weights its gradient used (`step`) and its end (`unix_time`); the step
began `step_s` earlier, when those weights had been pulled. The time step
s's weights were published is taken as the earliest such begin among the
workers' lines (the fastest worker's pull, a millisecond or so after the
servers published); the global step time is the difference of consecutive
publish times (a step no line used shares the interval with its
neighbours). Async has no global step time: its percentiles are of the
workers' own step times (step_s), marked "*". Lines from the first
--warmup_s seconds of the run are left out.

--model runs scripts/experiments/step_time_model.py with each run's
settings (read from its config: workers, N, mode, emulated compute and
stragglers; the transfer times from the run's own pull_s and push_s
medians), --model_steps steps for each of 5 seeds, and prints the mean
prediction beside the measurement with the error. A run's own stalls are a
sample too: at 1% per worker-step a run of a few hundred steps sees a few
dozen, whose count varies by its square root.
Emulated runs say so in the table (every emulated step line has
"emulated": true).
"""

import argparse
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(-(-p * len(v) // 100)) - 1))
    return v[k]


def read_lines(run_dir):
    lines = []
    for name in sorted(os.listdir(run_dir)):
        if re.fullmatch(r"worker-\d+\.jsonl", name):
            with open(os.path.join(run_dir, name)) as f:
                for text in f:
                    text = text.strip()
                    if text:
                        d = json.loads(text)
                        if d.get("kind") == "train":
                            lines.append(d)
    return lines


def read_config(run_dir):
    """The config copied into the run directory (cluster.pbtxt), as text."""
    for name in ("cluster.pbtxt", "config.pbtxt"):
        path = os.path.join(run_dir, name)
        if os.path.exists(path):
            with open(path) as f:
                return f.read()
    return ""


def field(text, name, default=None, cast=float):
    m = re.search(r"\b" + name + r":\s*([-\w.\"]+)", text)
    if not m:
        return default
    v = m.group(1).strip('"')
    try:
        return cast(v)
    except ValueError:
        return v


def measure(run_dir, warmup_s):
    lines = read_lines(run_dir)
    if not lines:
        raise SystemExit(f"stragglers_report.py: {run_dir}: no step lines")
    cfg = read_config(run_dir)
    workers = len({l["task"] for l in lines})
    t0 = min(l["unix_time"] - l["step_s"] for l in lines)
    lines = [l for l in lines if l["unix_time"] - l["step_s"] >= t0 + warmup_s]
    if not lines:
        raise SystemExit(f"stragglers_report.py: {run_dir}: no step lines "
                         f"after the {warmup_s} s warm-up")
    begin = min(l["unix_time"] - l["step_s"] for l in lines)
    end = max(l["unix_time"] for l in lines)
    duration = end - begin
    asynchronous = "mode: ASYNC" in cfg
    out = {"run": os.path.basename(run_dir.rstrip("/")), "workers": workers,
           "mode": "async" if asynchronous else "sync",
           "adaptive": "adaptive_backups" in cfg,
           "emulated": any(l.get("emulated") for l in lines),
           "seconds": duration}
    outcomes = {}
    for l in lines:
        outcomes[l["outcome"]] = outcomes.get(l["outcome"], 0) + 1
    used = outcomes.get("applied", 0) + outcomes.get("aggregated", 0)
    dropped = sum(v for k, v in outcomes.items()
                  if k not in ("applied", "aggregated"))
    out["grads_per_s"] = used / duration
    out["dropped"] = dropped
    out["dropped_fraction"] = dropped / max(1, len(lines))
    out["injected_s_mean"] = statistics.mean(l.get("injected_s", 0)
                                             for l in lines)
    out["pull_s_median"] = statistics.median(l["pull_s"] for l in lines)
    out["push_s_median"] = statistics.median(l["push_s"] for l in lines)
    ns = [l["replicas_to_aggregate"] for l in lines
          if l.get("replicas_to_aggregate")]
    out["n_mean"] = statistics.mean(ns) if ns else None
    if asynchronous:
        out["steps_per_s"] = outcomes.get("applied", 0) / duration
        times = [l["step_s"] for l in lines]
        stale = [l["staleness"] for l in lines]
        out["staleness_mean"] = statistics.mean(stale)
        out["staleness_p99"] = percentile(stale, 99)
    else:
        publish = {}
        for l in lines:
            b = l["unix_time"] - l["step_s"]
            s = l["step"]
            publish[s] = min(publish.get(s, b), b)
        steps = sorted(publish)
        times = []
        for a, b in zip(steps, steps[1:]):
            gap = b - a
            times.extend([(publish[b] - publish[a]) / gap] * gap)
        span = publish[steps[-1]] - publish[steps[0]]
        out["steps_per_s"] = (steps[-1] - steps[0]) / span if span > 0 else 0
    if not times:
        times = [duration]
    out["p50"] = percentile(times, 50)
    out["p90"] = percentile(times, 90)
    out["p99"] = percentile(times, 99)
    out["config"] = cfg
    return out


def settings_of(cfg):
    """The step-time model's options from a config's text."""
    opts = {}
    compute = re.search(r"emulation\s*{\s*compute\s*{([^}]*)}", cfg)
    if compute:
        kind = field(compute.group(1), "kind", "CONSTANT", str)
        shift = field(compute.group(1), "shift_seconds", 0.0)
        if kind == "CONSTANT":
            opts["compute"] = f"constant:{shift}"
        elif kind == "SHIFTED_EXPONENTIAL":
            opts["compute"] = (f"exp:{shift},"
                               f"{field(compute.group(1), 'mean_seconds', 0.0)}")
    for block in re.findall(r"stragglers\s*{([^}]*)}", cfg):
        ws = [int(w) for w in re.findall(r"workers:\s*(\d+)", block)]
        slow = field(block, "slow_factor")
        if slow:
            opts.setdefault("slow", []).extend((w, slow) for w in ws)
        p = field(block, "stall_probability")
        if p:
            opts["stall"] = (p, field(block, "stall_seconds", 0.0))
            if ws:
                opts["stall_workers"] = ws
    return opts


def model_prediction(m, steps, seeds=5):
    """The model's steps/s and gradients/s for run `m`, averaged over
    `seeds` seeds (its own sampling error shrinks; the run's stays)."""
    runs = [one_prediction(m, steps, seed) for seed in range(1, seeds + 1)]
    if any(r is None or "error" in r for r in runs):
        return runs[0]
    return {k: statistics.mean(r[k] for r in runs)
            for k in ("steps_per_s", "grads_per_s")}


def one_prediction(m, steps, seed):
    import step_time_model as stm
    cfg = m["config"]
    s = settings_of(cfg)
    if "compute" not in s:
        return None
    kw = {"compute": s["compute"], "push_s": m["push_s_median"],
          "pull_s": m["pull_s_median"], "steps": steps, "seed": seed}
    if "slow" in s:
        kw["slow"] = dict(s["slow"])
    if "stall" in s:
        kw["stall_p"], kw["stall_s"] = s["stall"]
        if "stall_workers" in s:
            kw["stall_workers"] = s["stall_workers"]
    M = m["workers"]
    try:
        if m["mode"] == "async":
            bound = field(cfg, "staleness_bound", None, int)
            if bound is not None:
                kw["staleness_bound"] = bound
            return stm.simulate("async", M, **kw)
        if m["adaptive"]:
            return stm.simulate("adaptive", M, **kw)
        n = field(cfg, "replicas_to_aggregate", M, int)
        return stm.simulate("sync", M, N=n, **kw)
    except (TypeError, ValueError) as e:
        return {"error": str(e)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--warmup_s", type=float, default=5.0)
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--model", action="store_true")
    ap.add_argument("--model_steps", type=int, default=2000)
    a = ap.parse_args()
    rows = [measure(r, a.warmup_s) for r in a.runs]
    base = {}
    for m in rows:
        if m["mode"] == "sync" and not m["adaptive"] and \
                field(m["config"], "replicas_to_aggregate", m["workers"], int) \
                == m["workers"]:
            base[m["workers"]] = m["grads_per_s"]
    head = ("| run | M | N | steps/s | grads/s | p50 s | p90 s | p99 s | "
            "p99/p50 | dropped | norm. speedup | injected s/step | "
            "staleness mean / p99 |")
    out = [head, "|" + "---|" * 13]
    for m in rows:
        n = m["n_mean"]
        ns = f"{n:.2f}" if n else "-"
        sp = (f"{m['grads_per_s'] / base[m['workers']]:.3f}"
              if m["workers"] in base else "-")
        star = "*" if m["mode"] == "async" else ""
        st = (f"{m['staleness_mean']:.1f} / {m['staleness_p99']}"
              if m["mode"] == "async" else "-")
        label = m["run"] + (" (emulated)" if m["emulated"] else "")
        out.append(
            f"| {label} | {m['workers']} | {ns} | {m['steps_per_s']:.2f} | "
            f"{m['grads_per_s']:.1f} | {m['p50']:.3f}{star} | "
            f"{m['p90']:.3f}{star} | {m['p99']:.3f}{star} | "
            f"{m['p99'] / m['p50']:.2f} | {m['dropped']} "
            f"({100 * m['dropped_fraction']:.1f}%) | {sp} | "
            f"{m['injected_s_mean']:.3f} | {st} |")
    if a.model:
        out += ["", "| run | measured steps/s | model steps/s | error | "
                "measured grads/s | model grads/s | error |", "|---|---|---|---|---|---|---|"]
        for m in rows:
            p = model_prediction(m, a.model_steps)
            if not p or "error" in p:
                out.append(f"| {m['run']} | {m['steps_per_s']:.2f} | - | - | "
                           f"{m['grads_per_s']:.1f} | - | - |")
                continue
            m["model"] = p
            e1 = p["steps_per_s"] / m["steps_per_s"] - 1 if m["steps_per_s"] else 0
            e2 = p["grads_per_s"] / m["grads_per_s"] - 1 if m["grads_per_s"] else 0
            out.append(f"| {m['run']} | {m['steps_per_s']:.2f} | "
                       f"{p['steps_per_s']:.2f} | {100 * e1:+.1f}% | "
                       f"{m['grads_per_s']:.1f} | {p['grads_per_s']:.1f} | "
                       f"{100 * e2:+.1f}% |")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.json:
        for m in rows:
            m.pop("config", None)
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
