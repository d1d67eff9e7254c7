#!/usr/bin/python3
"""The batch sweep's report: scripts/experiments/batch_sweep_report.py OUT

Reads every run that scripts/experiments/batch_sweep.sh left in OUT
(wW-bB-plain, wW-bB-scaled, local-bB, and OUT/sweep.txt: KEY VALUE lines,
numbers but for the model's name) and writes OUT/report/sweep.md, which
names the model, with time_per_epoch.png and accuracy.png:
  - per run: workers, global batch, scaling, steps, epochs, time per epoch
    (the span of the step lines, less train_local's evaluations, over the
    epochs the step lines cover), final test accuracy, and the speed against
    one process (train_local's time per epoch at the same global batch over
    the run's);
  - per worker count: the smallest global batch at which the cluster's time
    per epoch beats one process's;
  - per worker count: test accuracy at 8x the base batch (scaled and plain)
    against the base batch after the same epochs (goal: within 1 point).
"""
import collections
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "lib"), os.path.join(HERE, "..", "run")]
import compare  # noqa: E402  (scripts/run/compare.py: fmt, matplotlib)
from runs import Run, RunError  # noqa: E402  (scripts/lib/runs.py)

plt = compare.plt
NAME = re.compile(r"^(?:w(?P<w>\d+)|local)-b(?P<b>\d+)(?:-(?P<s>plain|scaled))?$")


def read_settings(out):
    path = os.path.join(out, "sweep.txt")
    if not os.path.exists(path):
        sys.exit(f"batch_sweep_report.py: {path} is missing (batch_sweep.sh writes it)")
    settings = {}
    for lineno, line in enumerate(open(path), 1):
        parts = line.split()
        if len(parts) != 2:
            sys.exit(f"batch_sweep_report.py: {path}:{lineno}: expected 'KEY VALUE'")
        if parts[0] == "model":  # a registry name; a sweep before --model had none
            settings["model"] = parts[1]
            continue
        try:
            settings[parts[0]] = float(parts[1])
        except ValueError:
            sys.exit(f"batch_sweep_report.py: {path}:{lineno}: '{parts[1]}' is not a number")
    for key in ("base_batch", "epochs", "train_examples"):
        if key not in settings:
            sys.exit(f"batch_sweep_report.py: {path}: no '{key}' line")
    return settings


def time_per_epoch(run, train_examples):
    """(seconds per epoch, epochs) over the run's step lines."""
    steps = run.steps
    start = min(r["wall_time_s"] - r.get("step_s", 0.0) for r in steps)
    end = max(r["wall_time_s"] for r in steps)
    evals = sum(e.get("eval_s", 0.0) for e in run.evals
                if start <= e["wall_time_s"] <= end)
    epochs = sum(r.get("batch_size") or 0 for r in steps) / train_examples
    return ((end - start - evals) / epochs if epochs > 0 else None), epochs


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.exit("usage: batch_sweep_report.py OUT (the --out of batch_sweep.sh)")
    out = argv[1].rstrip("/")
    settings = read_settings(out)
    rows = []
    for d in sorted(os.listdir(out)):
        m = NAME.match(d)
        if not m or not os.path.isdir(os.path.join(out, d)):
            continue
        try:
            run = Run(os.path.join(out, d))
        except RunError as e:
            sys.exit(f"batch_sweep_report.py: {e}")
        tpe, epochs = time_per_epoch(run, settings["train_examples"])
        # A cluster's step lines carry the step their gradient was computed
        # from (0 first), train_local's the steps done (1 first).
        last_step = run.summary.get("final_global_step",
                                    max(r["step"] for r in run.steps) + (1 if m["w"] else 0))
        rows.append({"name": d, "workers": int(m["w"]) if m["w"] else 0,
                     "batch": int(m["b"]), "scaling": m["s"] or "plain",
                     "steps": last_step, "epochs": epochs, "tpe": tpe,
                     "acc": run.final_accuracy()})
    if not rows:
        sys.exit(f"batch_sweep_report.py: no runs named wW-bB-plain/scaled or local-bB in {out}")
    local = {r["batch"]: r for r in rows if r["workers"] == 0}
    rows.sort(key=lambda r: (r["workers"], r["batch"], r["scaling"]))
    report_dir = os.path.join(out, "report")
    os.makedirs(report_dir, exist_ok=True)
    fmt = compare.fmt
    base = int(settings["base_batch"])
    lines = [f"# Batch sweep ({out})", "",
             f"Model {settings.get('model', 'cifar10_tutorial')}. "
             f"Sync clusters with one ps and W workers, global batch B (B/W a worker), "
             f"{int(settings['epochs'])} epoch(s) each; W = 0 is one process "
             f"(train_local). Scaling: lr x B/{base} after a linear warmup "
             f"over {settings.get('warmup_epochs', 0)} epoch(s). Speed: one "
             f"process's time per epoch over the run's.", "",
             "| workers | global batch | scaling | steps | epochs | time per epoch (s) | "
             "test accuracy | speed vs one process |",
             "|" + " --- |" * 8]
    for r in rows:
        l = local.get(r["batch"])
        speed = (l["tpe"] / r["tpe"]) if l and r["workers"] and r["tpe"] and l["tpe"] else None
        lines.append(f"| {r['workers'] or 'one process'} | {r['batch']} | "
                     f"{r['scaling'] if r['workers'] else '–'} | {r['steps']} | "
                     f"{fmt(r['epochs'], 2)} | {fmt(r['tpe'], 1)} | {fmt(r['acc'], 4)} | "
                     f"{fmt(speed, 2)} |")
    lines.append("")
    by_workers = collections.defaultdict(list)
    for r in rows:
        if r["workers"]:
            by_workers[r["workers"]].append(r)
    for w, rs in sorted(by_workers.items()):
        beats = sorted(r["batch"] for r in rs if r["batch"] in local and r["tpe"]
                       and local[r["batch"]]["tpe"] and r["tpe"] < local[r["batch"]]["tpe"])
        compared = sorted({r["batch"] for r in rs if r["batch"] in local})
        if not compared:
            continue
        lines.append(f"- {w} worker(s): " + (
            f"first beats one process at global batch {beats[0]}" if beats
            else f"slower than one process at every batch measured ({', '.join(map(str, compared))})"))
    lines.append("")
    for w, rs in sorted(by_workers.items()):
        at = {(r["batch"], r["scaling"]): r for r in rs}
        base_run = at.get((base, "plain")) or at.get((base, "scaled"))
        for s in ("scaled", "plain"):
            big = at.get((8 * base, s))
            if base_run and big and big["acc"] is not None and base_run["acc"] is not None:
                diff = 100 * (big["acc"] - base_run["acc"])
                verdict = "within 1 point" if diff >= -1 else "more than 1 point below"
                lines.append(f"- {w} worker(s), batch {8 * base} ({s}) against batch {base}: "
                             f"{fmt(big['acc'], 4)} vs {fmt(base_run['acc'], 4)}, "
                             f"{diff:+.2f} points ({verdict})")
    lines += ["", "![time per epoch](time_per_epoch.png)", "", "![accuracy](accuracy.png)", ""]
    with open(os.path.join(report_dir, "sweep.md"), "w") as fh:
        fh.write("\n".join(lines))

    for fname, key, ylabel in (("time_per_epoch.png", "tpe", "seconds per epoch"),
                               ("accuracy.png", "acc", "test accuracy")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        series = collections.defaultdict(list)
        for r in rows:
            label = "one process" if not r["workers"] else f"{r['workers']} worker(s), {r['scaling']}"
            if r[key] is not None:
                series[label].append((r["batch"], r[key]))
        for label, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("global batch")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(report_dir, fname), dpi=100)
        plt.close(fig)
    print(f"batch_sweep_report.py: wrote {os.path.join(report_dir, 'sweep.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
