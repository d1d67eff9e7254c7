#!/usr/bin/python3
"""Seed 002's finding through the planner: "distributed training is slower
than one node until the batch is large enough" (docs/EXPERIMENTS.md,
"Planning a cluster"), simulated.

  scripts/plan/batch_crossing.py [--batches=128,512,2048,8192] [--workers=4]
      [--shards=2] [--gbit=10,1] [--transports=grpc,ucx] [--step_ms=3]
      [--per_sample_us=8] [--model=resnet20] [--optimizer=momentum]
      [--profile=FILE] [--steps=60] [--cores=C] [--tbf]

For each global batch B: one node (one worker computing t(B), its shard on
the same host over shared memory) against --workers workers and --shards
shards each on a host of its own (B / workers a worker computing
t(B / workers)), sync N = M, fp32, at each link rate and transport, as
scripts/experiments/gpu_times.sh --finding=batch runs it for real with
emulated compute (--cores=C: every task on one machine of C cores, as
those namespace hosts share this machine's; --tbf: their links' token
bucket, validate_report.py's); t(b) = --step_ms + b x --per_sample_us / 1000 ms, that
script's assumption. Then the planner's first choice for the same M,
hosts and batch (plan.py's search: 1, 2 and 4 shards, sync b = 0 and 1,
adaptive, async, fp32 and bf16, overlap off and on, the --transports),
and the global batch where each distributed setting first moves as many
images/s as one node (the crossing). Prints a markdown table; writes
nothing.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster_sim as sim  # noqa: E402
import plan  # noqa: E402
from machine_profile import Profile, ProfileError  # noqa: E402


def _ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def _floats(s):
    return [float(x) for x in s.split(",") if x.strip()]


def t_ms(b, a):
    return a.step_ms + b * a.per_sample_us / 1000


def one_node(a, prof, params, B):
    cl = sim.Cluster([sim.Host("node", 100e9 / 8, 0.0)], [0], [0])
    return sim.simulate(cl, params, prof, "sync", 1, wire="fp32", optimizer=a.optimizer,
                        transport="shm", batch=B, compute=f"constant:{t_ms(B, a) / 1000}",
                        steps=a.steps, warmup=max(5, a.steps // 10), seed=1, cores=a.cores)


def distributed(a, prof, params, B, gbit, transport):
    M = a.workers
    burst = max(gbit * 1e9 / 8 / 200, 65536) if a.tbf else 0.0
    cl = sim.Cluster.spread(M, a.shards, M, a.shards, gbit, 5e-6, burst)
    return sim.simulate(cl, params, prof, "sync", M, wire="fp32", optimizer=a.optimizer,
                        transport=transport, batch=B // M,
                        compute=f"constant:{t_ms(B // M, a) / 1000}", steps=a.steps,
                        warmup=max(5, a.steps // 10), seed=1, cores=a.cores)


def planner_choice(a, B, gbit):
    argv = [f"--model={a.model}", f"--workers={a.workers}", f"--hosts={a.workers}",
            f"--batch={B // a.workers}", f"--step_ms={t_ms(B // a.workers, a)}",
            f"--gbit={gbit}", "--shards=1,2,4", "--backups=0,1",
            f"--transports={','.join(a.transports)}", f"--optimizer={a.optimizer}",
            f"--steps={a.steps}", "--latency_us=5", "--ps_hosts=4"]
    if a.profile:
        argv.append(f"--profile={a.profile}")
    if a.cores:
        argv.append(f"--cores={a.cores}")
    pa = plan.build_parser().parse_args(argv)
    prof, params, shards, modes, base, hosts = plan.check(pa)
    rows, best, why = plan.plan_one(pa, prof, params, shards, modes, base, hosts, gbit)
    return best


def main(argv=None, prog="batch_crossing.py"):
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--batches", type=_ints, default=[128, 512, 2048, 8192])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--gbit", type=_floats, default=[10.0, 1.0])
    p.add_argument("--transports", type=lambda s: s.split(","), default=["grpc", "ucx"])
    p.add_argument("--step_ms", type=float, default=3.0)
    p.add_argument("--per_sample_us", type=float, default=8.0)
    p.add_argument("--model", default="resnet20")
    p.add_argument("--optimizer", default="momentum")
    p.add_argument("--profile", default=None)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--tbf", action="store_true",
                   help="links shaped as scripts/run/netns_hosts.sh shapes them (tc tbf, a "
                   "bucket of 5 ms at the rate), not NICs")
    p.add_argument("--cores", type=int, default=None,
                   help="every task on one machine of this many cores, as the namespace "
                   "hosts of gpu_times.sh share this machine's (default: hosts of their own)")
    try:
        a = p.parse_args(argv)
    except ValueError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    try:
        if a.workers < 1 or a.shards < 1 or a.steps < 1 or (a.cores is not None and a.cores < 1):
            raise ValueError("--workers, --shards, --steps and --cores must be >= 1")
        if not (a.step_ms >= 0 and a.per_sample_us >= 0):
            raise ValueError("--step_ms and --per_sample_us must be >= 0")
        for B in a.batches:
            if B < a.workers or B % a.workers:
                raise ValueError(f"--batches: {B} is not a multiple of --workers={a.workers}")
        prof = Profile.load(a.profile)
        if a.model not in prof.models():
            raise ValueError(f"--model={a.model}: unknown model")
        params = prof.models()[a.model]
        settings = [(g, t) for g in a.gbit for t in a.transports]
        head = " | ".join(f"{t} {g:g}G" for g, t in settings)
        where = f"on one machine of {a.cores} cores" if a.cores else "on hosts of their own"
        print(f"{a.model}, {a.workers} workers x {a.shards} shards {where}, "
              f"t(b) = {a.step_ms:g} ms + b x {a.per_sample_us:g} us, {a.optimizer}, fp32; "
              f"images/s (against one node)\n")
        print(f"| global batch | one node | {head} | the planner's first choice "
              f"({a.gbit[0]:g}G) |")
        print("| --- | --- | " + " | ".join("---" for _ in settings) + " | --- |")
        crossing = {}
        for B in a.batches:
            one = one_node(a, prof, params, B)["images_per_s"]
            cells = []
            for g, t in settings:
                ips = distributed(a, prof, params, B, g, t)["images_per_s"]
                cells.append(f"{ips:,.0f} ({ips / one:.2f}x)")
                if ips >= one and (g, t) not in crossing:
                    crossing[(g, t)] = B
            best = planner_choice(a, B, a.gbit[0])
            r = best["res"]
            print(f"| {B} | {one:,.0f} | " + " | ".join(cells) +
                  f" | S = {best['S']}, {best['setting']}, {best['wire']}, overlap "
                  f"{best['overlap']}, {best['transport']}: {r['images_per_s']:,.0f} "
                  f"({r['images_per_s'] / one:.2f}x; {r['bound']}) |")
        print()
        for g, t in settings:
            B = crossing.get((g, t))
            print(f"{t} at {g:g} Gbit/s: as fast as one node from global batch "
                  f"{B if B else 'none of ' + ','.join(map(str, a.batches))}")
    except (ValueError, ProfileError, plan.PlanError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
