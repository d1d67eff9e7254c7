#!/usr/bin/python3
"""Fill a machine profile from ps_bench's output and measured step times.

  bazel-bin/worker/bench/ps_bench --only=ps,floor,ucx,tcp --shards=2 --workers=4 \\
      --wire=bf16 --seconds=10 > bench.txt
  scripts/plan/calibrate.py --ps_bench=bench.txt \\
      --step_ms=resnet20:gpu:128=4.02 --step_samples=cnn10:cpu:128=compute_s.txt \\
      --out=my.profile

It reads ps_bench's header (model, float32 values, shards, workers, sync or
async) and its per-set lines ("NAME: X worker steps/s, Y GB/s pushed +
pulled, Z CPU ms per worker step") and derives, printing each figure and
where it came from:

  the shards' own work per byte moved: from "in process (no transport)"
    when the run has it (its CPU per byte), else the fp32 server's CPU less
    the TCP echo's (an upper bound: it then includes gRPC's framing on both
    ends); the base profile's split of it (stage, serve, sum, optimizer) is
    scaled to match;
  transport.grpc.server_ns_per_byte: half the gRPC server's CPU per byte
    beyond the in-process set's (or half the TCP echo's);
  worker.ns_per_byte.grpc: the other half (the workers' ends);
  transport.ucx.server_ns_per_byte: gRPC's plus half of what the UCX set
    costs beyond the gRPC one;
  the 16-bit wire's stage and serve cost per wire byte: fp32's times the
    ratio of the two sets' CPU per wire byte;
  --cluster_bench: the output of one or more runs of
    scripts/bench/ps_bench_cluster.sh (real ps_server and client processes,
    with --netns on namespace hosts), whose servers' and clients' CPU per
    worker step (the median over the runs) replace what the in-process
    bench says: worker.ns_per_byte.<transport> is the clients' CPU per byte
    pushed and pulled; the server's figures (server.* and the transport's
    server_ns_per_byte and us_per_message) are the base's (or --ps_bench's)
    scaled so that the simulator, given the bench's cluster (its shards,
    workers, mode, --cluster_optimizer; one host, no link limit), spends
    the servers' measured CPU per worker step. The transport is gRPC, or
    UCX where the clients' log says they pushed and pulled over it;
  compute.<model>.<device>_ms.b<batch>: as given (--step_ms), or the median
    of a file of measured step times in seconds (--step_samples: a run's
    compute_s values, one a line).

Every other figure comes from --base (default: scripts/plan/default.profile).
A missing set the derivation needs, or an unreadable file, is an error and
nothing is written.
"""
import argparse
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine_profile import Profile, ProfileError, write  # noqa: E402

SET_LINE = re.compile(r"^(?P<name>.+?):\s+(?P<steps>[\d.]+) worker steps/s, (?P<gbs>[\d.]+) "
                      r"GB/s pushed \+ pulled, (?P<cpu>[\d.]+) CPU ms per worker step")
HEADER = re.compile(r"^ps_bench: model (?P<model>\S+), (?P<values>\d+) float32 values .*?, "
                    r"(?P<shards>\d+) shards, (?P<workers>\d+) workers, (?P<mode>sync|async)")
FLOOR = re.compile(r"^cpu_floor_ms=(?P<ms>[\d.]+)")


CLUSTER_HEADER = re.compile(r"^ps_cluster_bench --config=\S+: model (?P<model>\S+) \(.*?\), "
                            r"(?P<shards>\d+) ps tasks, workers (?P<first>\d+)\.\.(?P<last>\d+), "
                            r"(?P<mode>sync|async), gradients (?P<g>\S+), weights (?P<w>\S+);")
CLUSTER_TOTAL = re.compile(r"^total: (?P<steps>[\d.]+) worker steps/s, (?P<mb>[\d.]+) MB/s")
CLUSTER_CPU = re.compile(r"^(?P<who>servers|clients)' CPU: [\d.]+ cores busy, (?P<ms>[\d.]+) ms "
                         r"per worker step")
OPTIMIZERS = ("adam", "momentum", "sgd")


class CalibrationError(ValueError):
    pass


def parse_bench(text):
    sets, header, floor = {}, None, None
    for line in text.splitlines():
        line = line.strip()
        m = SET_LINE.match(line)
        if m:
            steps, gbs, cpu = float(m["steps"]), float(m["gbs"]), float(m["cpu"])
            if steps <= 0:
                raise CalibrationError(f"ps_bench set '{m['name']}': 0 worker steps/s")
            sets[m["name"].lower()] = dict(steps=steps, bytes=gbs * 1e9 / steps,
                                           cpu_s=cpu / 1e3)
            continue
        m = HEADER.match(line)
        if m:
            header = dict(model=m["model"], params=int(m["values"]), shards=int(m["shards"]),
                          workers=int(m["workers"]), mode=m["mode"])
            continue
        m = FLOOR.match(line)
        if m:
            floor = float(m["ms"])
    return header, sets, floor


def derive(header, sets, floor, base):
    """{key: value}, {key: where it came from}."""
    vals, notes = {}, {}
    fp32 = sets.get("parameter server (fp32)")
    if fp32 is None:
        raise CalibrationError("the ps_bench output has no 'parameter server (fp32):' line "
                               "(run it with --only=ps,...)")
    if header is None:
        raise CalibrationError("the ps_bench output has no 'ps_bench: model ...' header line")
    # Bytes pushed + pulled a worker step: the model's float32 values up and
    # down (the in-process set moves no bytes through a transport and prints
    # 0 GB/s).
    model_bytes = 2 * 4 * header["params"]
    b = fp32["bytes"] or model_bytes
    inproc = sets.get("in process (no transport)")
    if inproc is not None and inproc["bytes"] == 0:
        inproc = dict(inproc, bytes=model_bytes)
    tcp = sets.get("tcp echo")
    if inproc is not None:
        work = inproc["cpu_s"] / inproc["bytes"]
        transport = max(0.0, (fp32["cpu_s"] - inproc["cpu_s"]) / b / 2)
        src = (f"'in process (no transport)' {inproc['cpu_s'] * 1e3:.2f} ms per worker step "
               f"over {inproc['bytes'] / 1e6:.2f} MB")
        tsrc = (f"half of (fp32 {fp32['cpu_s'] * 1e3:.2f} - in process "
                f"{inproc['cpu_s'] * 1e3:.2f}) ms over {b / 1e6:.2f} MB")
    elif tcp is not None:
        work = max(0.0, (fp32["cpu_s"] - tcp["cpu_s"])) / b
        transport = tcp["cpu_s"] / tcp["bytes"] / 2
        src = (f"fp32 {fp32['cpu_s'] * 1e3:.2f} - tcp echo {tcp['cpu_s'] * 1e3:.2f} ms per "
               f"worker step over {b / 1e6:.2f} MB (an upper bound: no in-process set)")
        tsrc = f"half the tcp echo's {tcp['cpu_s'] * 1e3:.2f} ms over {tcp['bytes'] / 1e6:.2f} MB"
    else:
        raise CalibrationError("the ps_bench output has neither 'in process (no transport):' "
                               "nor 'tcp echo:' (run it with --only=ps,floor or ps,tcp)")
    g = base.get
    W = header["workers"]
    updates = 1.0 / W if header["mode"] == "sync" else 1.0
    # What the base profile says the shards spend per byte moved in this bench:
    # a push's stage (b/2), a pull's serve (b/2), a sum of its b/8 parameters
    # (sync) and `updates` optimizer updates of them.
    p = b / 8
    base_work = (g("server.stage_ns_per_byte.fp32") * b / 2 + g("server.serve_ns_per_byte.fp32")
                 * b / 2 + (g("server.sum_ns_per_param") if header["mode"] == "sync" else 0) * p
                 + g("server.apply_ns_per_param.adam") * p * updates) * 1e-9 / b
    f = work / base_work if base_work > 0 else 1.0
    for k in ("server.stage_ns_per_byte.fp32", "server.serve_ns_per_byte.fp32",
              "server.sum_ns_per_param", "server.apply_ns_per_param.adam",
              "server.apply_ns_per_param.sgd", "server.apply_ns_per_param.momentum"):
        vals[k] = g(k) * f
        notes[k] = f"base x {f:.3f}: the shards' work {work * 1e9:.3f} ns a byte moved ({src})"
    vals["transport.grpc.server_ns_per_byte"] = transport * 1e9
    notes["transport.grpc.server_ns_per_byte"] = tsrc
    # The other half: the workers' ends of the same transfers.
    vals["worker.ns_per_byte.grpc"] = transport * 1e9
    notes["worker.ns_per_byte.grpc"] = "the workers' half of the same: " + tsrc
    narrow = [n for n in sets if n.startswith("parameter server (") and n != "parameter server "
              "(fp32)"]
    for n in narrow:
        wire = n[len("parameter server ("):-1]
        if wire not in ("bf16", "fp16"):
            continue
        m = sets[n]
        ratio = (m["cpu_s"] / m["bytes"]) / (fp32["cpu_s"] / b)
        for kind in ("stage", "serve"):
            k = f"server.{kind}_ns_per_byte.{wire}"
            vals[k] = vals[f"server.{kind}_ns_per_byte.fp32"] * ratio
            notes[k] = (f"fp32's x {ratio:.3f} (CPU per wire byte: {wire} "
                        f"{m['cpu_s'] * 1e3:.2f} ms / {m['bytes'] / 1e6:.2f} MB against fp32's)")
    ucx = [n for n in sets if n.startswith("parameter server over ucx")]
    if ucx:
        m = sets[ucx[0]]
        extra = max(0.0, (m["cpu_s"] - fp32["cpu_s"]) / m["bytes"] / 2)
        vals["transport.ucx.server_ns_per_byte"] = (transport + extra) * 1e9
        notes["transport.ucx.server_ns_per_byte"] = (
            f"gRPC's + half of (UCX {m['cpu_s'] * 1e3:.2f} - gRPC {fp32['cpu_s'] * 1e3:.2f}) ms")
    if floor is not None:
        notes["_floor"] = f"cpu_floor_ms={floor:.3f} (ps_bench's least CPU a worker step costs)"
    return vals, notes


def parse_cluster_bench(text):
    """The runs of ps_bench_cluster.sh in `text`: the cluster (model, shards,
    workers, mode, transport) and, per run, its summed worker steps/s,
    bytes a worker step, and the servers' and clients' CPU ms a worker
    step."""
    cluster, runs, run, ucx = None, [], {}, False
    for line in text.splitlines():
        line = line.strip()
        if "pushes and pulls over UCX" in line:
            ucx = True
        m = CLUSTER_HEADER.match(line)
        if m:
            if m["g"] != "float32" or m["w"] != "float32":
                raise CalibrationError(f"--cluster_bench: a run with gradients {m['g']}, "
                                       f"weights {m['w']}: calibrate on float32 runs")
            c = dict(model=m["model"], shards=int(m["shards"]), mode=m["mode"])
            if cluster is not None and (cluster["model"], cluster["shards"], cluster["mode"]) \
                    != (c["model"], c["shards"], c["mode"]):
                raise CalibrationError("--cluster_bench: runs of different clusters "
                                       f"({cluster['model']} against {c['model']}, ...)")
            cluster = cluster or c
            run.setdefault("workers", 0)
            run["workers"] += int(m["last"]) - int(m["first"]) + 1
            continue
        m = CLUSTER_TOTAL.match(line)
        if m:
            steps = float(m["steps"])
            if steps <= 0:
                raise CalibrationError("--cluster_bench: a run of 0 worker steps/s")
            run.update(steps=steps, bytes=float(m["mb"]) * 1e6 / steps)
            continue
        m = CLUSTER_CPU.match(line)
        if m:
            run[m["who"]] = float(m["ms"]) / 1e3
            if "servers" in run and "clients" in run:
                if "steps" not in run or "workers" not in run:
                    raise CalibrationError("--cluster_bench: a CPU line without its run's "
                                           "ps_cluster_bench header and total line")
                runs.append(run)
                run = {}
    if cluster is None or not runs:
        raise CalibrationError("--cluster_bench: no complete run of ps_bench_cluster.sh (its "
                               "clients' header, 'total:' and both CPU lines; --seconds of 4 or "
                               "more)")
    workers = {r["workers"] for r in runs}
    if len(workers) != 1:
        raise CalibrationError(f"--cluster_bench: runs of {sorted(workers)} workers")
    cluster["workers"] = workers.pop()
    cluster["transport"] = "ucx" if ucx else "grpc"
    return cluster, runs


def simulated_server_s(cluster, optimizer, profile):
    """The CPU seconds a worker step that the simulator's shards spend on
    `cluster` (one host, no link limit, no shared cores) with `profile`."""
    import cluster_sim  # noqa: E402  (beside this file)
    models = profile.models()
    if cluster["model"] not in models:
        raise CalibrationError(f"--cluster_bench: model '{cluster['model']}' has no "
                               f"model.{cluster['model']}.parameters in the profile")
    S, W = cluster["shards"], cluster["workers"]
    cl = cluster_sim.Cluster([cluster_sim.Host("local", 1e15, 0.0)], [0] * S, [0] * W)
    res = cluster_sim.simulate(cl, models[cluster["model"]], profile, cluster["mode"],
                               W if cluster["mode"] == "sync" else None, wire="fp32",
                               optimizer=optimizer, transport=cluster["transport"],
                               compute="constant:0.001", steps=200, warmup=20, seed=1)
    return sum(res["cpu_utilisation"].values()) / res["grads_per_s"]


def derive_cluster(cluster, runs, optimizer, base):
    """{key: value}, {key: where it came from}: the server's figures of
    `base` scaled to the runs' servers' CPU, and the workers' per byte."""
    t = cluster["transport"]
    servers = statistics.median(r["servers"] for r in runs)
    clients = statistics.median(r["clients"] for r in runs)
    b = statistics.median(r["bytes"] for r in runs)
    src = (f"ps_bench_cluster.sh: {cluster['model']}, {cluster['shards']} x "
           f"{cluster['workers']} {cluster['mode']} over {t}, median of {len(runs)} runs")
    sim = simulated_server_s(cluster, optimizer, base)
    f = servers / sim
    keys = [k for k in base.values if k.startswith("server.")]
    keys += [f"transport.{t}.server_ns_per_byte", f"transport.{t}.us_per_message"]
    vals, notes = {}, {}
    for k in keys:
        vals[k] = base.get(k) * f
        notes[k] = (f"x {f:.3f}: the servers' {servers * 1e3:.2f} CPU ms a worker step, the "
                    f"simulator's {sim * 1e3:.2f} before; {src}")
    vals[f"worker.ns_per_byte.{t}"] = clients / b * 1e9
    notes[f"worker.ns_per_byte.{t}"] = (f"the clients' {clients * 1e3:.2f} CPU ms a worker step "
                                        f"over {b / 1e6:.2f} MB pushed + pulled; {src}")
    return vals, notes


def step_key(spec, flag):
    key, sep, value = spec.partition("=")
    parts = key.split(":")
    if not sep or len(parts) != 3 or not parts[2].isdigit() or parts[1] not in ("gpu", "cpu"):
        raise CalibrationError(f"{flag}={spec}: expected MODEL:gpu|cpu:BATCH=VALUE")
    return f"compute.{parts[0]}.{parts[1]}_ms.b{parts[2]}", value


def main(argv=None, prog="calibrate"):
    """Returns the exit status (0, or 2 on bad input)."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--ps_bench", default=None, help="a file of ps_bench's output ('-': stdin)")
    ap.add_argument("--cluster_bench", default=None,
                    help="a file of ps_bench_cluster.sh's output, one run or more")
    ap.add_argument("--cluster_optimizer", default=None, choices=OPTIMIZERS,
                    help="the optimizer of --cluster_bench's config (required with it)")
    ap.add_argument("--step_ms", action="append", default=[],
                    help="MODEL:gpu|cpu:BATCH=MS, a given compute time per step")
    ap.add_argument("--step_samples", action="append", default=[],
                    help="MODEL:gpu|cpu:BATCH=FILE, measured step times in seconds")
    ap.add_argument("--base", default=None, help="the profile to start from")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        base = Profile.load(a.base)
        vals, notes = {}, {}
        if a.ps_bench:
            try:
                text = sys.stdin.read() if a.ps_bench == "-" else open(a.ps_bench).read()
            except OSError as e:
                raise CalibrationError(f"--ps_bench={a.ps_bench}: {e.strerror}") from None
            header, sets, floor = parse_bench(text)
            v, n = derive(header, sets, floor, base)
            vals.update(v)
            notes.update(n)
            print(f"calibrate: ps_bench {header['model']}, {header['params']:,} values, "
                  f"{header['shards']} shards, {header['workers']} workers, {header['mode']}; "
                  f"sets: {', '.join(sorted(sets))}")
        if a.cluster_bench:
            if a.cluster_optimizer is None:
                raise CalibrationError("--cluster_bench needs --cluster_optimizer (the "
                                       "config's optimizer: adam, momentum or sgd)")
            try:
                text = open(a.cluster_bench).read()
            except OSError as e:
                raise CalibrationError(f"--cluster_bench={a.cluster_bench}: {e.strerror}") \
                    from None
            cluster, runs = parse_cluster_bench(text)
            before = Profile(dict(base.values, **vals), base.path)
            v, n = derive_cluster(cluster, runs, a.cluster_optimizer, before)
            vals.update(v)
            notes.update(n)
            print(f"calibrate: ps_bench_cluster.sh {cluster['model']}, {cluster['shards']} "
                  f"shards, {cluster['workers']} workers, {cluster['mode']}, "
                  f"{cluster['transport']}; {len(runs)} runs")
        elif a.cluster_optimizer is not None:
            raise CalibrationError("--cluster_optimizer without --cluster_bench")
        for spec in a.step_ms:
            key, value = step_key(spec, "--step_ms")
            try:
                ms = float(value)
            except ValueError:
                raise CalibrationError(f"--step_ms={spec}: '{value}' is not a number") from None
            if not ms > 0:
                raise CalibrationError(f"--step_ms={spec}: must be > 0")
            vals[key], notes[key] = ms, "given"
        for spec in a.step_samples:
            key, path = step_key(spec, "--step_samples")
            try:
                with open(path) as f:
                    xs = [float(x.split("#")[0]) for x in f if x.split("#")[0].strip()]
            except OSError as e:
                raise CalibrationError(f"--step_samples={spec}: {e.strerror}") from None
            except ValueError:
                raise CalibrationError(f"--step_samples={spec}: a line is not a number") from None
            if not xs or min(xs) < 0:
                raise CalibrationError(f"--step_samples={spec}: no samples, or a negative one")
            vals[key] = statistics.median(xs) * 1e3
            notes[key] = f"median of {len(xs)} measured step times in {path}"
        if not vals:
            raise CalibrationError("nothing to calibrate: give --ps_bench, --cluster_bench, "
                                   "--step_ms or --step_samples")
    except (CalibrationError, ProfileError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    for k in sorted(vals):
        print(f"  {k} = {vals[k]:.6g}  ({notes[k]})")
    if "_floor" in notes:
        print(f"  {notes['_floor']}")
    out = dict(base.values)
    out.update(vals)
    comments = {k: f"from {base.path}" for k in base.values}
    comments.update({k: notes[k] for k in vals})
    try:
        write(a.out, out, comments)
    except OSError as e:
        print(f"{prog}: --out={a.out}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"calibrate: wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
