#!/usr/bin/python3
"""Time to accuracy: measured accuracy-per-step curves joined with the
simulator's step rate.

  scripts/plan/accuracy.py curves RUN... [--target=0.6]
  scripts/plan/accuracy.py validate RUN... [--step_ms=MS | --compute=DIST]
      [--profile=FILE]
      [--cores=C] [--target=0.6] [--out=FILE]

A curve is a run directory (scripts/run/launch.sh's, read by
scripts/lib/runs.py): the chief's evaluations (test accuracy at a global
step) of one setting. What a curve stands for:
  sync N of M at batch B per worker: global batch N x B; a sync step is one
    Adam step on N x B images whatever the shards, links or M.
  async at batch B: a global step is one applied push; its curve is taken
    at the run's mean staleness (the applied pushes' staleness on the
    workers' lines), the level the run measured.

Steps to a target: the global step of the curve's first evaluation at or
above it (what a run's "time to target" counts: the first evaluation that
sees it). A configuration's steps: sync, the mean over the curves of its
global batch (none: no prediction); async, the curves of its batch
interpolated linearly in staleness between the two measured levels around
the simulated staleness (outside them, the nearest level, said so). The
spread of the curves (the fewest and most steps) is how sure it is.

Time to target (time_to_target()): start-up + steps / the simulated global
steps per second + the evaluations on the way, each evaluation's own
measured time (from the curves, by its index: the first costs more); the
chief evaluating stops a sync step of N = M for the whole evaluation, and
otherwise (async, or N < M) takes the chief's 1/M share of the step rate
for its length (with every task on C shared cores, a core's: 1/min(M, C)),
except the last, which the measured time ends with. The
planner (plan.py --curves) leaves start-up and evaluations out (they depend
on the evaluator, not on the cluster): its time is training time alone.

`validate` sets every run against a prediction made without it: the
steps from the curves of the runs with other seeds, the step rate from
scripts/plan/cluster_sim.py with every task on one machine of --cores
cores and each worker's compute on them (cpu_compute: CPU workers of one
thread), the compute time --compute (a distribution: samples:FILE of a
calibration run's compute_s), --step_ms or the profile's
compute.MODEL.cpu_ms.bBATCH (a calibration run's, not these runs'),
start-up and evaluation times from the other seeds' runs. It prints the
table (predicted and measured time, error, the order of sync and async for
each M and seed, and whether their predicted spreads overlap: too close to
call) and exits 1 when an error is over 20% or an order is wrong where the
spreads did not overlap, 2 on bad input.
"""
import argparse
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import cluster_sim  # noqa: E402
from machine_profile import Profile, ProfileError  # noqa: E402


_RUNS = []


def _runs():
    """The run reader, loaded when a curve is first read (the planner runs
    without it when no --curves are given): scripts/lib/runs.py in the
    repository; installed (psgd/plan/), the package's psgd/runs.py beside
    this folder, loaded without the package's extension."""
    if not _RUNS:
        try:
            import runs  # pylint: disable=import-outside-toplevel
        except ImportError:
            import importlib.util  # pylint: disable=import-outside-toplevel
            path = os.path.join(HERE, "..", "runs.py")
            if not os.path.isfile(path):
                raise CurveError("the run reader (scripts/lib/runs.py, or psgd/runs.py "
                                 "installed) is not here: cannot read curves") from None
            spec = importlib.util.spec_from_file_location("psgd_plan_runs", path)
            runs = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(runs)
        _RUNS.append(runs)
    return _RUNS[0]


BAR = 0.20  # docs/EXPERIMENTS.md's bar for time to accuracy


class CurveError(ValueError):
    pass


class Curve:
    """One run's evaluations and the setting they belong to."""

    def __init__(self, path):
        runs = _runs()
        try:
            run = runs.Run(path)
        except runs.RunError as e:
            raise CurveError(str(e)) from e
        self.path, self.name = run.path, run.name
        s, f = run.summary, run.config_fields()
        self.mode = run.mode
        if self.mode not in ("sync", "async"):
            raise CurveError(f"{path}: a {self.mode} run, not a cluster's (sync or async)")
        try:
            self.M = int(s.get("workers") or f["M"])
            self.N = int(s.get("replicas_to_aggregate") or f["N"]) if self.mode == "sync" else 1
            self.batch = int(s.get("batch_size") or f["batch"])
        except ValueError as e:
            raise CurveError(f"{path}: its config does not say M, N and the batch: {e}") from e
        self.model = s.get("model") or f["model"]
        self.seed = _config_int(run, "seed")
        chief = sorted({e["task"] for e in run.evals})
        if not run.evals:
            raise CurveError(f"{path}: no evaluations (eval_every) to make a curve of")
        if len(chief) > 1:
            raise CurveError(f"{path}: evaluations from {', '.join(chief)}: one chief expected")
        # The chief's evaluations every eval_every global steps (default:
        # the first evaluation's step).
        self.eval_every = _config_int(run, "eval_every") or run.evals[0]["step"]
        self.points = [(e["step"], e["test_accuracy"], e["wall_time_s"], e.get("eval_s", 0.0))
                       for e in run.evals]
        firsts = [r for r in run.steps if r["task"] == chief[0]]
        self.start_s = firsts[0]["wall_time_s"] if firsts else 0.0
        stale = [r["staleness"] for r in run.steps
                 if r.get("outcome") == "applied" and isinstance(r.get("staleness"), (int, float))]
        self.staleness = statistics.mean(stale) if stale else (0.0 if self.mode == "sync"
                                                               else None)
        if self.mode == "async" and self.staleness is None:
            raise CurveError(f"{path}: an async run without applied pushes' staleness")
        self.run = run

    @property
    def global_batch(self):
        return self.N * self.batch if self.mode == "sync" else self.batch

    def _first_at(self, target):
        """The first evaluation (step, accuracy, wall, eval_s) at or above
        target, or None."""
        return next((p for p in self.points if p[1] >= target), None)

    def steps_to(self, target):
        """The global step of the first evaluation at or above target (None: never)."""
        p = self._first_at(target)
        return p[0] if p else None

    def time_to(self, target):
        """The measured time to target: the chief's clock at the end of
        that evaluation (None: never)."""
        p = self._first_at(target)
        return p[2] if p else None

    def measured_rate(self):
        """Global steps per second in the steady state, from the workers'
        own step times (median step_s): sync, the chief's steps; async,
        every worker's pushes together. None without step times."""
        per = {}
        for r in self.run.steps:
            if isinstance(r.get("step_s"), (int, float)) and r["step_s"] > 0:
                per.setdefault(r["task"], []).append(r["step_s"])
        if not per:
            return None
        rates = {t: 1 / statistics.median(v) for t, v in per.items()}
        if self.mode == "sync":
            return min(rates.values())
        return sum(rates.values())

    def describe(self):
        how = (f"sync N={self.N} of {self.M}" if self.mode == "sync"
               else f"async M={self.M}, staleness {self.staleness:.2f}")
        return f"{self.name}: {how}, batch {self.batch}, {len(self.points)} evaluations"


def _config_int(run, name):
    """An integer field of the run's config.pbtxt (None: not there)."""
    cfg = os.path.join(run.files.get("config.pbtxt", run.path), "config.pbtxt")
    if os.path.exists(cfg):
        with open(cfg) as f:
            m = re.search(r"\b" + name + r"\s*:\s*(\d+)", f.read())
        if m:
            return int(m.group(1))
    return None


def steps_to_target(curves, mode, batch, N=None, staleness=None, target=0.6):
    """(steps, low, high, note) for a configuration from the curves, or
    (None, None, None, why). sync: global batch N x batch; async: batch and
    the simulated staleness."""
    if mode == "sync":
        gb = N * batch
        same = [c for c in curves if c.mode == "sync" and c.global_batch == gb]
        if not same:
            have = sorted({c.global_batch for c in curves if c.mode == "sync"})
            return None, None, None, (f"no sync curve at global batch {gb} (curves at "
                                      f"{', '.join(map(str, have)) or 'none'})")
        ks = [c.steps_to(target) for c in same]
        if any(k is None for k in ks):
            return None, None, None, (f"a sync curve at global batch {gb} never reaches "
                                      f"{target:.0%}")
        return statistics.mean(ks), min(ks), max(ks), f"{len(ks)} sync curve(s) at {gb}"
    same = [c for c in curves if c.mode == "async" and c.batch == batch]
    if not same:
        return None, None, None, f"no async curve at batch {batch}"
    # Levels: the curves of one M together (one staleness level each).
    levels = {}
    for c in same:
        levels.setdefault(c.M, []).append(c)
    table = []
    for M, cs in sorted(levels.items()):
        ks = [c.steps_to(target) for c in cs]
        if any(k is None for k in ks):
            return None, None, None, (f"an async curve at M={M} never reaches {target:.0%}")
        table.append((statistics.mean(c.staleness for c in cs), statistics.mean(ks),
                      min(ks), max(ks), M))
    table.sort()
    if staleness <= table[0][0] or staleness >= table[-1][0]:
        s, k, lo, hi, M = table[0] if staleness <= table[0][0] else table[-1]
        note = f"async curve(s) of M={M} (staleness {s:.2f})"
        if abs(staleness - s) > 0.5:
            note += f", outside the measured levels (simulated staleness {staleness:.2f})"
        return k, lo, hi, note
    for a, b in zip(table, table[1:]):
        if a[0] <= staleness <= b[0]:
            x = (staleness - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0.0
            lerp = [a[i] + x * (b[i] - a[i]) for i in (1, 2, 3)]
            return (*lerp, f"async curves of M={a[4]} and M={b[4]} (staleness {a[0]:.2f} "
                           f"and {b[0]:.2f}) at {staleness:.2f}")
    raise AssertionError("unreachable")


def time_to_target(steps, steps_per_s, mode, M, N=None, eval_every=None, eval_s=(),
                   start_s=0.0, cores=None):
    """Seconds to reach `steps` global steps at `steps_per_s`, plus start-up
    and the chief's evaluations every `eval_every` steps (eval_s[i]: the
    i-th evaluation's seconds; the last listed repeats). The module's
    docstring gives the rule; cores: every task on one machine of that many
    cores, the workers' compute on them (an evaluation then takes one of
    the min(M, cores) cores that train)."""
    if not (steps_per_s > 0 and math.isfinite(steps_per_s)):
        raise ValueError(f"steps_per_s = {steps_per_s}: must be > 0")
    t = start_s + steps / steps_per_s
    if eval_every and eval_s:
        n = int(steps // eval_every)
        stalls = mode == "sync" and N == M
        share = 1 / min(M, cores) if cores else 1 / M
        for i in range(n):
            e = eval_s[min(i, len(eval_s) - 1)]
            t += e if stalls or i == n - 1 else e * share
    return t


def _eval_costs(curves):
    """The i-th evaluation's mean seconds over the curves (as long as the shortest)."""
    n = min(len(c.points) for c in curves)
    return [statistics.mean(c.points[i][3] for c in curves) for i in range(n)]


def predict(run, others, profile, compute, cores, target):
    """Predicted time to target for `run`'s setting from `others`' curves;
    compute: a worker's compute time per step, a cluster_sim distribution
    (constant:S, samples:FILE, ...)."""
    cl = cluster_sim.Cluster.spread(run.M, 1, 1, 0, 100.0, 0.0)
    if run.model not in profile.models():
        raise CurveError(f"{run.name}: model {run.model} is not in the profile's registry")
    res = cluster_sim.simulate(
        cl, profile.models()[run.model], profile, run.mode,
        run.N if run.mode == "sync" else None, wire="fp32", optimizer="adam", transport="grpc",
        batch=run.batch, compute=compute, steps=300, warmup=20, seed=1,
        cores=cores, cpu_compute=True)
    k, lo, hi, note = steps_to_target(others, run.mode, run.batch, run.N,
                                      res.get("staleness_mean"), target)
    if k is None:
        raise CurveError(f"{run.name}: {note}")
    eval_every = run.eval_every
    costs = _eval_costs(others)
    start = statistics.mean(c.start_s for c in others)
    t = {x: time_to_target(v, res["steps_per_s"], run.mode, run.M, run.N, eval_every, costs,
                           start, cores) for x, v in (("mid", k), ("lo", lo), ("hi", hi))}
    return dict(steps=k, steps_lo=lo, steps_hi=hi, note=note, steps_per_s=res["steps_per_s"],
                staleness=res.get("staleness_mean"), time=t["mid"], time_lo=t["lo"],
                time_hi=t["hi"])


def load_curves(paths):
    out = []
    for p in paths:
        out.append(Curve(p))
    if not out:
        raise CurveError("no runs given")
    return out


def cmd_curves(a):
    for c in load_curves(a.runs):
        k = c.steps_to(a.target)
        t = c.time_to(a.target)
        rate = c.measured_rate()
        print(f"{c.describe()}; {a.target:.0%} at global step "
              f"{k if k is not None else 'never'} ({f'{t:.1f} s' if t else 'not reached'}); "
              f"{f'{rate:.2f}' if rate else '-'} global steps/s (the workers' median step)")
    return 0


def cmd_validate(a):
    profile = Profile.load(a.profile)
    curves = load_curves(a.runs)
    seeds = {c.seed for c in curves}
    if None in seeds or len(seeds) < 2:
        raise CurveError("validate needs runs of two seeds or more (their configs' seed:): "
                         "each run is predicted from the other seeds' curves")
    rows, worst, results, errors = [], 0.0, {}, []
    for run in sorted(curves, key=lambda c: (c.seed, c.M, c.mode)):
        if a.compute:
            compute = a.compute
        elif a.step_ms is not None:
            compute = f"constant:{a.step_ms / 1000}"
        else:
            compute = "constant:{}".format(profile.get(
                f"compute.{run.model}.cpu_ms.b{run.batch}",
                f"{run.name}'s compute time (or give --step_ms or --compute)") / 1000)
        others = [c for c in curves if c.seed != run.seed]
        p = predict(run, others, profile, compute, a.cores, a.target)
        meas = run.time_to(a.target)
        meas_k = run.steps_to(a.target)
        rate = run.measured_rate()
        how = f"sync N={run.N} of {run.M}" if run.mode == "sync" else f"async M={run.M}"
        results[(run.seed, run.M, run.mode)] = (p["time"], meas, p["time_lo"], p["time_hi"])
        if meas is None:
            rows.append(f"| {run.name} | {how} | {p['steps']:.0f} ({p['steps_lo']:.0f}-"
                        f"{p['steps_hi']:.0f}) | never | {p['steps_per_s']:.2f} | "
                        f"{f'{rate:.2f}' if rate else '-'} | {p['time']:.0f} "
                        f"({p['time_lo']:.0f}-{p['time_hi']:.0f}) | not reached | - | "
                        f"{p['note']} |")
            worst = math.inf
            continue
        err = p["time"] / meas - 1
        worst = max(worst, abs(err))
        errors.append(abs(err))
        rows.append(f"| {run.name} | {how} | {p['steps']:.0f} ({p['steps_lo']:.0f}-"
                    f"{p['steps_hi']:.0f}) | {meas_k} | {p['steps_per_s']:.2f} | "
                    f"{f'{rate:.2f}' if rate else '-'} | {p['time']:.0f} ({p['time_lo']:.0f}-"
                    f"{p['time_hi']:.0f}) | {meas:.0f} | {err:+.1%}"
                    f"{' **over 20%**' if abs(err) > BAR else ''} | {p['note']} |")
    order_rows, wrong, called_wrong = [], 0, 0
    for (seed, M, mode), (pt, mt, plo, phi) in sorted(results.items()):
        if mode != "sync" or (seed, M, "async") not in results:
            continue
        apt, amt, alo, ahi = results[(seed, M, "async")]
        pf = "sync" if pt <= apt else "async"
        mf = None if mt is None and amt is None else (
            "sync" if amt is None or (mt is not None and mt <= amt) else "async")
        # The curves' spreads overlap: the prediction cannot tell them apart.
        close = not (phi < alo or ahi < plo)
        ok = pf == mf
        wrong += not ok
        called_wrong += not ok and not close
        order_rows.append(f"| {seed} | {M} | {pf} ({pt:.0f} s against {apt:.0f} s) | "
                          f"{'yes: too close to call' if close else 'no'} | "
                          f"{mf or '-'} ({_s(mt)} against {_s(amt)}) | {'yes' if ok else 'no'} |")
    text = "\n".join([
        f"# Time to {a.target:.0%}: predicted from the other seeds' curves against measured", "",
        f"Profile {os.path.relpath(profile.path)}; compute {compute} (seconds) a worker step on "
        f"{a.cores} shared cores (cluster_sim cpu_compute); each run's prediction: the steps "
        "from the runs of other seeds, the step rate simulated, start-up and evaluations from "
        "the other seeds' runs.", "",
        "| run | setting | steps to target, predicted (spread) | measured | global steps/s, "
        "simulated | measured | time (s), predicted (spread) | measured | error | curves |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, "",
        "Which is faster, sync or async, for each seed and M:", "",
        "| seed | M | predicted faster | spreads overlap | measured faster | right |",
        "| --- | --- | --- | --- | --- | --- |",
        *order_rows, ""])
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(f"worst error {worst:.1%}; {sum(abs_err > BAR for abs_err in errors)} of "
          f"{len(errors)} over {BAR:.0%}; {wrong} of {len(order_rows)} orders wrong, "
          f"{called_wrong} of them where the spreads do not overlap")
    return 1 if worst > BAR or called_wrong else 0


def _s(t):
    return f"{t:.0f} s" if t is not None else "never"


def main(argv=None, prog="accuracy.py"):
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("curves", help="each run's curve and its steps to --target")
    c.add_argument("runs", nargs="+")
    c.add_argument("--target", type=float, default=0.6)
    v = sub.add_parser("validate", help="each run against a prediction from the other seeds")
    v.add_argument("runs", nargs="+")
    v.add_argument("--step_ms", type=float, default=None,
                   help="a worker's compute per step, from a calibration run (default: the "
                   "profile's compute.MODEL.cpu_ms.bBATCH, calibrate.py --step_samples)")
    v.add_argument("--compute", default=None,
                   help="a worker's compute per step as a distribution (cluster_sim's: "
                   "samples:FILE of a calibration run's compute_s, constant:S, ...)")
    v.add_argument("--profile", default=None)
    v.add_argument("--cores", type=int, default=os.cpu_count())
    v.add_argument("--target", type=float, default=0.6)
    v.add_argument("--out", default=None, help="write the report here too")
    a = p.parse_args(argv)
    try:
        if not 0 < a.target <= 1:
            raise CurveError(f"--target={a.target}: must be in (0, 1]")
        if a.cmd == "validate":
            if a.step_ms is not None and not (a.step_ms > 0 and math.isfinite(a.step_ms)):
                raise CurveError(f"--step_ms={a.step_ms}: must be > 0")
            if a.step_ms is not None and a.compute:
                raise CurveError("give --step_ms or --compute, not both")
            if a.compute:
                cluster_sim.stm.Dist(a.compute, "--compute")
            if a.cores is None or a.cores < 1:
                raise CurveError(f"--cores={a.cores}: must be >= 1")
            return cmd_validate(a)
        return cmd_curves(a)
    except (CurveError, ProfileError, ValueError, OSError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
