#!/usr/bin/python3
"""Plan a cluster you do not have: enumerate, simulate, rank, write the config.

  scripts/plan/plan.py --model=resnet20 --workers=20 --hosts=5 --step_ms=4.024 \\
      --gbit=1,10,56 --shards=1,2,5,10 --stall=0.01:1 [--out=configs/planned.pbtxt]

Given a model of the registry, M workers on --hosts hosts (the shards on
those hosts, round robin, or on --ps_hosts hosts of their own), each host's
link rate(s) and latency, and a worker's compute time per step (--step_ms,
--compute=DIST, or the profile's compute.<model>.<device>_ms.b<batch>), it
simulates every configuration of:
  S shards (--shards), sync N = M - b for b in --backups, adaptive N,
  async (unbounded and with --staleness_bound), wire fp32 / bf16
  (--wires), overlap off / on, the --transports,
with scripts/plan/cluster_sim.py and the machine profile (--profile,
default scripts/plan/default.profile), ranks them by images/s (the
gradients applied per second times the batch), prints the table with
what bounds each, and writes the first choice's cluster config
(configs/*.pbtxt format, docs/CLUSTER.md) to --out. With several --gbit
values it plans once per link speed (and writes --out only with one).

Async is ranked with the others but chosen only when it beats the best sync
configuration by --async_margin (default 1.5x): async trains to a lower
accuracy in this project's studies (docs/EXPERIMENTS.md, "Sync against
async", "Staleness controls"), which a throughput model cannot see.

Time to accuracy (--curves=RUN,... --target=0.6): given run directories of
measured training (the chief's evaluations: scripts/experiments/
time_to_accuracy.sh, staleness.sh and the demo make them), every
configuration with a curve of its kind (sync: its global batch N x batch;
async: its batch, at the simulated staleness; scripts/plan/accuracy.py's
docstring gives the rules) gets the global steps its curves take to
--target and the training time that is at its simulated step rate, with
the curves' spread; the ranking is then by that time (configurations
without a curve after, by images/s), and --async_margin does not apply:
the curves see the accuracy. When the spread of the best configuration of
the other kind (sync against async) reaches the choice's, the first choice
says it is too close to call. With --device=cpu --cores=C every task runs on
one machine of C cores, the workers' compute on them too.

Bad input (an unknown model, N > M, a link that cannot carry one step's
bytes within --max_step_s, a profile without a figure the plan needs) is
an error naming it; nothing is simulated or written.
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import accuracy  # noqa: E402
import cluster_sim as sim  # noqa: E402
from machine_profile import Profile, ProfileError, WIRES, TRANSPORTS  # noqa: E402

TRANSPORT_PLANE = {"grpc": "GRPC", "ucx": "UCX"}


class PlanError(ValueError):
    pass


def _list(kind, what):
    def parse(s):
        try:
            out = [kind(x) for x in s.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{s}': expected a comma-separated list of {what}")
        if not out:
            raise argparse.ArgumentTypeError(f"'{s}': empty")
        return out
    return parse


def build_parser(prog="plan"):
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--model", required=True, help="a model of the registry")
    p.add_argument("--workers", type=int, required=True, help="M")
    p.add_argument("--hosts", type=int, default=None,
                   help="the workers' hosts (default: one per worker)")
    p.add_argument("--ps_hosts", type=int, default=0,
                   help="hosts for the shards alone (default 0: on the workers' hosts)")
    p.add_argument("--gbit", type=_list(float, "numbers"), default=[10.0],
                   help="each host's link rate, Gbit/s each way; a list plans once per rate")
    p.add_argument("--latency_us", type=float, default=5.0,
                   help="one way, each host to the switch (default 5)")
    p.add_argument("--step_ms", type=float, default=None, help="compute per worker step")
    p.add_argument("--compute", default=None, help="a distribution (cluster_sim.py's)")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--batch", type=int, default=128, help="per worker")
    p.add_argument("--stall", default="0:0", help="P:SECONDS, each worker each step")
    p.add_argument("--slow", default="", help="WORKER:FACTOR,...")
    p.add_argument("--shards", type=_list(int, "integers"), default=None,
                   help="S to consider (default 1, 2, 4, ... up to the hosts)")
    p.add_argument("--backups", type=_list(int, "integers"), default=None,
                   help="b to consider, N = M - b (default 0, 1, 2 and M/10)")
    p.add_argument("--replicas", type=int, default=None,
                   help="consider sync N = this only (instead of --backups)")
    p.add_argument("--staleness_bound", type=int, default=4)
    p.add_argument("--modes", type=_list(str, "words"), default=["sync", "adaptive", "async"])
    p.add_argument("--wires", type=_list(str, "words"), default=["fp32", "bf16"])
    p.add_argument("--overlap", type=_list(str, "words"), default=["off", "on"])
    p.add_argument("--transports", type=_list(str, "words"), default=["grpc"])
    p.add_argument("--optimizer", choices=("adam", "sgd", "momentum"), default="adam")
    p.add_argument("--async_margin", type=float, default=1.5)
    p.add_argument("--curves", type=_list(str, "run directories"), default=None,
                   help="measured runs whose evaluations rank the configurations by time "
                   "to --target")
    p.add_argument("--target", type=float, default=0.6,
                   help="the test accuracy of the time to accuracy (with --curves)")
    p.add_argument("--cores", type=int, default=None,
                   help="every task on one machine of this many cores (with --device=cpu "
                   "the workers' compute on them too)")
    p.add_argument("--max_step_s", type=float, default=10.0,
                   help="a link that needs longer than this for one step's bytes is an error")
    p.add_argument("--steps", type=int, default=None,
                   help="simulated steps a configuration (default: 300, fewer for large M)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", default=None)
    p.add_argument("--top", type=int, default=12, help="rows printed per link speed")
    p.add_argument("--out", default=None, help="write the first choice's config here")
    p.add_argument("--name", default="planned")
    p.add_argument("--json", default=None,
                   help="write every configuration's figures here too")
    return p


def compute_spec(a, prof):
    if a.step_ms is not None and a.compute is not None:
        raise PlanError("give --step_ms or --compute, not both")
    if a.compute is not None:
        sim.stm.Dist(a.compute, "--compute")
        return a.compute
    if a.step_ms is not None:
        if not (a.step_ms > 0 and math.isfinite(a.step_ms)):
            raise PlanError(f"--step_ms={a.step_ms}: must be > 0")
        return f"constant:{a.step_ms / 1e3}"
    key = f"compute.{a.model}.{a.device}_ms.b{a.batch}"
    return f"constant:{prof.get(key, 'the compute time: or give --step_ms') / 1e3}"


def settings(a, M):
    """[(label, kwargs)] of the modes to consider."""
    out = []
    for mode in a.modes:
        if mode not in ("sync", "adaptive", "async"):
            raise PlanError(f"--modes: unknown mode '{mode}' (sync, adaptive, async)")
    if "sync" in a.modes:
        if a.replicas is not None:
            if not 1 <= a.replicas <= M:
                raise PlanError(f"--replicas={a.replicas}: N must be in 1..M = {M} "
                                f"(M < N: {M} workers cannot give {a.replicas} gradients)")
            bs = [M - a.replicas]
        else:
            bs = a.backups if a.backups is not None else sorted({0, 1, 2, M // 10})
        for b in bs:
            if b < 0 or b >= M:
                raise PlanError(f"--backups: b = {b} gives N = {M - b}, outside 1..M = {M}")
            out.append((f"sync b={b}", dict(mode="sync", N=M - b)))
    if "adaptive" in a.modes:
        out.append(("adaptive", dict(mode="adaptive")))
    if "async" in a.modes:
        out.append(("async", dict(mode="async")))
        if a.staleness_bound is not None:
            if a.staleness_bound < 0:
                raise PlanError(f"--staleness_bound={a.staleness_bound}: must be >= 0")
            out.append((f"async ssp={a.staleness_bound}",
                        dict(mode="async", staleness_bound=a.staleness_bound)))
    return out


def check(a):
    """Everything that can be wrong, before any simulation. Returns the plan's parts."""
    prof = Profile.load(a.profile)
    models = prof.models()
    if a.model not in models:
        raise PlanError(f"--model={a.model}: unknown model (known: {', '.join(sorted(models))})")
    params = models[a.model]
    M = a.workers
    if M < 1:
        raise PlanError(f"--workers={M}: must be >= 1")
    hosts = a.hosts or M
    if hosts < 1 or hosts > M:
        raise PlanError(f"--hosts={hosts}: must be in 1..M = {M}")
    if a.ps_hosts < 0:
        raise PlanError(f"--ps_hosts={a.ps_hosts}: must be >= 0")
    if a.batch < 1:
        raise PlanError(f"--batch={a.batch}: must be >= 1")
    if not a.latency_us >= 0:
        raise PlanError(f"--latency_us={a.latency_us}: must be >= 0")
    shards = a.shards or [s for s in (1, 2, 4, 8, 16, 32, 64)
                          if s <= max(hosts, a.ps_hosts) * 2] or [1]
    for s in shards:
        if s < 1 or s > params:
            raise PlanError(f"--shards: S = {s} is not in 1..{params}")
    for w in a.wires:
        if w not in WIRES:
            raise PlanError(f"--wires: unknown wire dtype '{w}' ({', '.join(WIRES)})")
    for t in a.transports:
        if t not in TRANSPORT_PLANE:
            raise PlanError(f"--transports: '{t}' is not a data plane between hosts "
                            f"({', '.join(TRANSPORT_PLANE)})")
    for o in a.overlap:
        if o not in ("off", "on"):
            raise PlanError(f"--overlap: '{o}' is neither off nor on")
    if a.cores is not None and a.cores < 1:
        raise PlanError(f"--cores={a.cores}: must be >= 1")
    if not 0 < a.target <= 1:
        raise PlanError(f"--target={a.target}: must be in (0, 1]")
    a.curve_runs = None
    if a.curves:
        try:
            a.curve_runs = accuracy.load_curves(a.curves)
        except accuracy.CurveError as e:
            raise PlanError(f"--curves: {e}") from None
        for c in a.curve_runs:
            if c.model != a.model:
                raise PlanError(f"--curves: {c.name} trained {c.model}, not --model={a.model}")
    compute = compute_spec(a, prof)
    p, sep, s = a.stall.partition(":")
    try:
        stall = (float(p), float(s)) if sep else None
    except ValueError:
        stall = None
    if stall is None:
        raise PlanError(f"--stall={a.stall}: expected PROBABILITY:SECONDS")
    modes = settings(a, M)
    steps = a.steps or max(40, min(300, 30000 // M))
    base = dict(compute=compute, steps=steps, warmup=max(5, steps // 10), seed=a.seed,
                slow=a.slow, stall_p=stall[0], stall_s=stall[1])
    # Every figure each configuration needs, and every option, checked now.
    for w in a.wires:
        for t in a.transports:
            for o in a.overlap:
                for label, kw in modes:
                    sim.Costs(prof, w, a.optimizer, t, o == "on", kw["mode"])
                    extra = {k: v for k, v in kw.items() if k not in ("mode", "N")}
                    sim.stm.Config(kw["mode"], M, kw.get("N"), **base, **extra)
    # The links: the least a step must move through the busiest NIC (the
    # smallest wire, the shards spread over every ps host).
    smallest = min(sim.WIRE_BYTES[w] for w in a.wires)
    ps_hosts = a.ps_hosts or hosts
    per_worker_host = math.ceil(M / hosts)
    for g in a.gbit:
        if not (g > 0 and math.isfinite(g)):
            raise PlanError(f"--gbit={g}: a link rate must be > 0")
        rate = g * 1e9 / 8 * prof.get("link.efficiency", "the links")
        ps_bytes = M * params * smallest / ps_hosts  # in (pushes) and out (pulls)
        worker_bytes = per_worker_host * params * smallest
        t_link = max(ps_bytes, worker_bytes) / rate
        if t_link > a.max_step_s:
            raise PlanError(
                f"--gbit={g:g}: the links cannot carry one step's bytes: a parameter-server "
                f"host's link moves {ps_bytes / 1e6:.1f} MB each way a step ({M} workers x "
                f"{params:,} parameters x {smallest} bytes / {ps_hosts} hosts), "
                f"{t_link:.1f} s at {g:g} Gbit/s, beyond --max_step_s={a.max_step_s:g}")
    return prof, params, shards, modes, base, hosts


def plan_one(a, prof, params, shards, modes, base, hosts, gbit):
    M = a.workers
    rows = []
    for S in shards:
        cl = sim.Cluster.spread(M, S, hosts, a.ps_hosts, gbit, a.latency_us * 1e-6)
        for label, kw in modes:
            for w in a.wires:
                for o in a.overlap:
                    for t in a.transports:
                        opts = dict(base)
                        opts.update({k: v for k, v in kw.items() if k not in ("mode", "N")})
                        res = sim.simulate(cl, params, prof, kw["mode"], kw.get("N"), wire=w,
                                           optimizer=a.optimizer, transport=t,
                                           overlap=(o == "on"), batch=a.batch, cores=a.cores,
                                           cpu_compute=a.device == "cpu" and bool(a.cores),
                                           **opts)
                        rows.append(dict(S=S, setting=label, wire=w, overlap=o, transport=t,
                                         kw=kw, res=res, tta=tta(a, kw, res)))
    rows.sort(key=lambda r: -r["res"]["images_per_s"])
    timed = [r for r in rows if r["tta"]["time"] is not None]
    if timed:
        rows = sorted(timed, key=lambda r: r["tta"]["time"]) + \
            [r for r in rows if r["tta"]["time"] is None]
        best = rows[0]
        why = (f"the shortest predicted time to {a.target:.0%} test accuracy, "
               f"{best['tta']['time']:.0f} s of training "
               f"({best['tta']['steps']:.0f} global steps: {best['tta']['note']})")
        # How sure: another mode whose curves' spread reaches the choice's.
        mode = best["kw"]["mode"] == "async"
        rival = next((r for r in rows[1:] if r["tta"]["time"] is not None and
                      (r["kw"]["mode"] == "async") != mode), None)
        if rival and rival["tta"]["low"] <= best["tta"]["high"]:
            why += (f"; too close to call against {rival['setting']} (S = {rival['S']}, "
                    f"{rival['tta']['time']:.0f} s, {rival['tta']['low']:.0f}-"
                    f"{rival['tta']['high']:.0f}): the curves' spreads overlap")
        return rows, best, why
    sync_rows = [r for r in rows if r["kw"]["mode"] != "async"]
    best = rows[0]
    why = "the most images/s"
    if best["kw"]["mode"] == "async" and sync_rows:
        s = sync_rows[0]
        ratio = best["res"]["images_per_s"] / s["res"]["images_per_s"]
        if ratio < a.async_margin:
            why = (f"async's {ratio:.2f}x the best sync's images/s is below --async_margin "
                   f"{a.async_margin:g} (async trains to lower accuracy: docs/EXPERIMENTS.md)")
            best = s
        else:
            why = f"async moves {ratio:.2f}x the best sync's images/s (>= --async_margin)"
    if a.curve_runs:
        why += f"; no configuration has a curve that reaches --target: {best['tta']['note']}"
    return rows, best, why


def tta(a, kw, res):
    """The time to --target of one simulated configuration from --curves:
    {time, low, high, steps, note}; time None without a curve of its kind."""
    none = dict(time=None, low=None, high=None, steps=None, note="no --curves")
    if not a.curve_runs:
        return none
    mode = "async" if kw["mode"] == "async" else "sync"
    N = kw.get("N") or max(1, round(res.get("mean_n") or a.workers))
    k, lo, hi, note = accuracy.steps_to_target(a.curve_runs, mode, a.batch, N,
                                               res.get("staleness_mean"), a.target)
    if k is None:
        return dict(none, note=note)
    t = [accuracy.time_to_target(x, res["steps_per_s"], mode, a.workers, N)
         for x in (k, lo, hi)]
    return dict(time=t[0], low=t[1], high=t[2], steps=k, note=note)


def fmt_row(i, r):
    res = r["res"]
    p99 = res["step_time_p99"]
    extra = (f"staleness {res['staleness_mean']:.1f}" if res["mode"] == "async"
             else f"N {res['mean_n']:.1f}")
    return (f"| {i} | {r['S']} | {r['setting']} | {r['wire']} | {r['overlap']} | "
            f"{r['transport']} | {res['steps_per_s']:.2f} | {res['images_per_s']:,.0f} | "
            f"{fmt_tta(r['tta'])}"
            f"{res['step_time_p50'] * 1e3:.1f} / {p99 * 1e3:.1f} | "
            f"{res['dropped']} ({100 * res['dropped_fraction']:.1f}%) | {extra} | "
            f"{res['bound_detail']} |")


def fmt_tta(t):
    if t["note"] == "no --curves":
        return ""
    if t["time"] is None:
        return "- | "
    return f"{t['time']:,.0f} ({t['low']:,.0f}-{t['high']:,.0f}) | "


def config_text(a, r, hosts, gbit):
    M, S = a.workers, r["S"]
    kw = r["kw"]
    cl = sim.Cluster.spread(M, S, hosts, a.ps_hosts, gbit)
    names = [h.name for h in cl.hosts]
    lines = [f"# Planned by scripts/plan/plan.py: {a.model}, {M} workers on {hosts} hosts, "
             f"{gbit:g} Gbit/s links.",
             f"# Predicted: {r['res']['images_per_s']:,.0f} images/s, "
             f"{r['res']['steps_per_s']:.2f} steps/s; bound: {r['res']['bound_detail']}.",
             "# Replace the host names with your hosts' names or addresses.",
             f'name: "{a.name}"']
    per_host = {}
    for s in range(S):
        h = cl.ps_host[s]
        port = 2222 + per_host.get(h, 0)
        per_host[h] = per_host.get(h, 0) + 1
        lines.append(f'ps {{ address: "{names[h]}:{port}" }}')
    wport = {}
    for w in range(M):
        h = cl.worker_host[w]
        k = wport.get(h, 0)
        wport[h] = k + 1
        dev = f' device: "gpu:{k}"' if a.device == "gpu" else ""
        lines.append(f'worker {{ address: "{names[h]}:{2300 + k}"{dev} }}')
    t = ["training {"]
    if kw["mode"] == "async":
        t.append("  mode: ASYNC")
        if kw.get("staleness_bound") is not None:
            t.append(f"  staleness_bound: {kw['staleness_bound']}")
    else:
        t.append("  mode: SYNC")
        if kw["mode"] == "sync":
            t.append(f"  replicas_to_aggregate: {kw['N']}")
        t.append(f"  total_num_replicas: {M}")
        if kw["mode"] == "adaptive":
            t.append("  adaptive_backups { }")
    t += [f"  batch_size: {a.batch}",
          f"  optimizer {{ kind: {a.optimizer.upper()} }}",
          "  steps: 10000", "  seed: 1", "}"]
    lines += t
    lines.append(f'model {{ name: "{a.model}" }}')
    lines.append("data { source: SYNTHETIC }")
    wire = [f"gradients: {r['wire'].upper()}", f"weights: {r['wire'].upper()}"]
    if r["overlap"] == "on":
        wire.append("overlap: true")
    if r["transport"] != "grpc":
        wire.append(f"data_plane: {TRANSPORT_PLANE[r['transport']]}")
    lines.append("wire { " + " ".join(wire) + " }")
    return "\n".join(lines) + "\n"


def main(argv=None, prog="plan"):
    """The planner; returns the exit status (0, or 2 on bad input). `psgd plan`
    calls main(argv, prog="psgd plan")."""
    parser = build_parser(prog)
    a = parser.parse_args(argv)
    try:
        if a.out and len(a.gbit) > 1:
            raise PlanError("--out with several --gbit values: plan one link speed to write it")
        prof, params, shards, modes, base, hosts = check(a)
    except (PlanError, ProfileError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    M = a.workers
    print(f"plan: {a.model} ({params:,} parameters), M = {M} workers on {hosts} hosts, "
          f"shards on {'their own ' + str(a.ps_hosts) if a.ps_hosts else 'the workers'}' "
          f"hosts, compute {base['compute']}, stall {a.stall}, batch {a.batch}, "
          f"{base['steps']} simulated steps a configuration, profile "
          f"{os.path.relpath(prof.path) if not os.path.relpath(prof.path).startswith('..') else prof.path}")
    chosen = None
    table = []
    for gbit in a.gbit:
        try:
            rows, best, why = plan_one(a, prof, params, shards, modes, base, hosts, gbit)
        except (ProfileError, ValueError) as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return 2
        wall = sum(r["res"]["sim_wall_s"] for r in rows)
        print(f"\n## {gbit:g} Gbit/s links: {len(rows)} configurations simulated in "
              f"{wall:.1f} s\n")
        col = f"time to {a.target:.0%} (s; spread) | " if a.curve_runs else ""
        print("| rank | S | setting | wire | overlap | transport | steps/s | images/s | " + col +
              "p50 / p99 step (ms) | dropped | N or staleness | bound |")
        print("|---:|---:|---|---|---|---|---:|---:|" + ("---:|" if col else "") +
              "---:|---:|---|---|")
        for i, r in enumerate(rows[:a.top], 1):
            print(fmt_row(i, r))
        res = best["res"]
        print(f"\nFirst choice at {gbit:g} Gbit/s: S = {best['S']}, {best['setting']}, wire "
              f"{best['wire']}, overlap {best['overlap']}, {best['transport']}: "
              f"{res['images_per_s']:,.0f} images/s ({why}).")
        print(sim.describe(res))
        chosen = (best, gbit)
        keep = ("steps_per_s", "images_per_s", "step_time_p50", "step_time_p99", "dropped",
                "dropped_fraction", "mean_n", "staleness_mean", "staleness_p99", "bound",
                "bound_detail", "critical_path_s")
        for r in rows:
            table.append(dict({k: r[k] for k in ("S", "setting", "wire", "overlap",
                                                 "transport")}, gbit=gbit,
                              chosen=r is best, **{k: r["res"].get(k) for k in keep},
                              time_to_target=r["tta"]["time"],
                              time_to_target_spread=[r["tta"]["low"], r["tta"]["high"]]))
    if a.json:
        import json
        try:
            with open(a.json, "w") as f:
                json.dump({"argv": argv if argv is not None else sys.argv[1:],
                           "rows": table}, f, indent=1)
                f.write("\n")
        except OSError as e:
            print(f"{prog}: --json={a.json}: {e.strerror}", file=sys.stderr)
            return 2
    if a.out:
        text = config_text(a, chosen[0], hosts, chosen[1])
        try:
            with open(a.out, "w") as f:
                f.write(text)
        except OSError as e:
            print(f"{prog}: --out={a.out}: {e.strerror}", file=sys.stderr)
            return 2
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
