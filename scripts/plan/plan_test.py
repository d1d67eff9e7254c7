#!/usr/bin/python3
"""Tests of the cluster simulator, the profile, the calibration and the planner.

  /usr/bin/python3 scripts/plan/plan_test.py

The simulator's rules against the servers' rules (docs/PS.md: N of M with
backups, surplus and stale drops, async refusals beyond max_push_staleness),
its reduction to step_time_model.py when every cost is zero, its prediction
of the recorded straggler study (within 10%, as stragglers_report.py
--model compares the step-time model), and bad input everywhere.
"""
import contextlib
import io
import json
import os
import re
import statistics
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
# The repository's root: the source tree, or the test's runfiles under Bazel.
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import accuracy  # noqa: E402
import batch_crossing  # noqa: E402
import calibrate  # noqa: E402
import cluster_sim as sim  # noqa: E402
import plan  # noqa: E402
from machine_profile import Profile, ProfileError, parse  # noqa: E402

stm = sim.stm
C = 0.5
DEFAULT = Profile.load()


def zero_profile():
    """Every cost 0: the simulator reduces to the step-time model's rules."""
    v = {k: (0.0 if re.match(r"(server|transport)\.", k) else x)
         for k, x in DEFAULT.values.items()}
    return Profile(v, "zero")


def one_host(M, S=1):
    return sim.Cluster([sim.Host("local", 1e12, 0.0)], [0] * S, [0] * M)


def run(cluster, mode="sync", N=None, prof=None, params=17290, **kw):
    kw.setdefault("compute", f"constant:{C}")
    return sim.simulate(cluster, params, prof or DEFAULT, mode, N, **kw)


class SyncRulesTest(unittest.TestCase):
    def test_n_of_m_with_backups_every_step(self):
        # 6 equal workers, N = 4, 3 shards on hosts of their own, real costs:
        # every step averages exactly N distinct workers and the other M - N
        # pushes computed from it are dropped (surplus: after the N-th).
        for S in (1, 3):
            cl = sim.Cluster.spread(6, S, 6, S, 10)
            r = run(cl, "sync", 4, params=272474, steps=20, warmup=2)
            self.assertEqual(r["aggregated"], 4 * 20)
            self.assertEqual(r["dropped"], 2 * 20)
            self.assertEqual(r["dropped_stale"], 0)
            for k in range(2, 22):
                self.assertEqual(len(set(r["step_members"][k])), 4, (S, k))
            for k in range(2, 21):  # step 21's last pushes may come after the end
                self.assertEqual(r["dropped_by_step"][k], 2, (S, k))
            self.assertEqual(set(r["n_per_step"]), {4})

    def test_slow_worker_is_stale(self):
        # N = 3 of 4, worker 0 3x slow: every push of worker 0 is dropped as
        # stale, the others make every step (step_time_model_test's case).
        for S in (1, 2):
            r = run(sim.Cluster.spread(4, S, 4, S, 10), "sync", 3, slow={0: 3.0}, steps=30,
                    warmup=0)
            self.assertEqual(r["per_worker_aggregated"][0], 0)
            self.assertEqual(r["per_worker_aggregated"][1:], [30, 30, 30])
            self.assertGreater(r["dropped_stale"], 0)
            self.assertEqual(r["dropped_surplus"], 0)

    def test_zero_costs_reduce_to_the_step_time_model(self):
        zero = zero_profile()
        cases = [("sync", 4, {}), ("sync", 3, {"slow": {0: 3.0}}),
                 ("adaptive", None, {"slow": {0: 3.0}}),
                 ("async", None, {"max_push_staleness": 0}),
                 ("async", None, {"slow": {0: 3.0}, "staleness_bound": 0})]
        for mode, N, extra in cases:
            kw = dict(compute=f"constant:{C}", steps=30, warmup=2, **extra)
            a = stm.simulate(mode, 4, N, push_s=0.125, pull_s=0.25, **kw)
            b = sim.simulate(one_host(4), 17290, zero, mode, N, push_extra_s=0.125,
                             pull_extra_s=0.25, **kw)
            for key in ("steps_per_s", "grads_per_s", "dropped", "arrivals"):
                self.assertEqual(a[key], b[key], (mode, N, extra, key))
        # With random compute and stragglers, the same to rounding.
        kw = dict(compute="exp:0.25,0.25", stall_p=0.05, stall_s=2.0, steps=200, warmup=10,
                  seed=3)
        for mode, N in (("sync", 6), ("sync", 8), ("adaptive", None), ("async", None)):
            a = stm.simulate(mode, 8, N, **kw)
            b = sim.simulate(one_host(8), 17290, zero, mode, N, **kw)
            self.assertAlmostEqual(a["steps_per_s"], b["steps_per_s"], places=9)
            self.assertEqual(a["dropped"], b["dropped"])


class ScaleTest(unittest.TestCase):
    def test_1024_workers_64_shards(self):
        # The planner's scale (its time is measured and printed by
        # cluster_sim.py, not asserted here): the same rules hold.
        cl = sim.Cluster.spread(1024, 64, 256, 16, 10)
        r = run(cl, "sync", 1016, params=272474, compute="constant:0.004", wire="bf16",
                steps=3, warmup=2)
        self.assertEqual(r["aggregated"], 3 * 1016)
        self.assertEqual(len(r["cpu_utilisation"]), 64)
        self.assertTrue(all(u > 0 for u in r["cpu_utilisation"].values()))
        self.assertEqual(len(r["link_utilisation"]), 2 * (256 + 16))


class AsyncRulesTest(unittest.TestCase):
    def test_refusals_beyond_the_limit(self):
        # max_push_staleness 0, 4 equal workers: one push of each round is
        # applied, the 3 staler ones refused (they pull and compute again).
        r = run(one_host(4), "async", prof=zero_profile(), max_push_staleness=0, steps=25,
                warmup=1)
        self.assertEqual(r["applied"], 25)
        self.assertEqual(r["refused"], 75)
        self.assertEqual(set(r["staleness_values"]), {0})
        # Limit 1 with real costs on 2 shards: nothing applied staler than 1.
        r = run(sim.Cluster.spread(6, 2, 6, 2, 10), "async", max_push_staleness=1, steps=40,
                warmup=2)
        self.assertLessEqual(max(r["staleness_values"]), 1)
        self.assertGreater(r["refused"], 0)
        self.assertEqual(r["applied"] + r["refused"], r["arrivals"])
        # No limit: nothing refused, staleness up to M - 1 and beyond.
        r = run(sim.Cluster.spread(6, 2, 6, 2, 10), "async", steps=40, warmup=2)
        self.assertEqual(r["refused"], 0)
        self.assertGreaterEqual(max(r["staleness_values"]), 5)

    def test_staleness_bound_holds_clocks(self):
        r = run(sim.Cluster.spread(4, 2, 4, 2, 10), "async", slow={0: 3.0}, staleness_bound=0,
                steps=30, warmup=2)
        clocks = r["per_worker_applied"]
        self.assertLessEqual(max(clocks) - min(clocks), 1)
        self.assertGreater(r["ssp_waits"], 0)


class ResourcesTest(unittest.TestCase):
    def test_wire_halves_the_bytes_and_a_link_bound_step(self):
        cl = sim.Cluster.spread(8, 2, 8, 2, 0.1)  # 100 Mbit/s: the links bound the step
        a = run(cl, "sync", params=272474, compute="constant:0.001", steps=20, warmup=2)
        b = run(cl, "sync", params=272474, compute="constant:0.001", wire="bf16", steps=20,
                warmup=2)
        self.assertEqual(a["bytes_per_push"], 2 * b["bytes_per_push"])
        self.assertEqual(a["bound"], "link")
        self.assertGreater(b["steps_per_s"], 1.8 * a["steps_per_s"])
        self.assertIn("link p", a["bound_detail"])  # a shard's host
        u = a["link_utilisation"]
        self.assertGreater(u["p0 in"] + u["p0 out"], 0.8)

    def test_bounds(self):
        cl = sim.Cluster.spread(8, 2, 8, 2, 100)
        r = run(cl, "sync", params=272474, steps=20, warmup=2)
        self.assertEqual(r["bound"], "compute")
        r = run(cl, "sync", params=272474, stall_p=0.2, stall_s=2.0, steps=40, warmup=2)
        self.assertEqual(r["bound"], "compute")
        self.assertIn("stragglers", r["bound_detail"])
        slow_cpu = Profile(dict(DEFAULT.values, **{"server.stage_ns_per_byte.fp32": 2000.0}),
                           "slow")
        r = run(cl, "sync", prof=slow_cpu, params=272474, compute="constant:0.001", steps=20,
                warmup=2)
        self.assertEqual(r["bound"], "server CPU")
        self.assertIn("ps:", r["bound_detail"])
        # Many shards, fast links, tiny compute: the relay of shard 0's
        # decisions is on every step's path (its share is reported).
        r = run(sim.Cluster.spread(4, 16, 4, 16, 100), "sync", params=272474,
                compute="constant:0.0001", steps=20, warmup=2)
        self.assertGreater(r["critical_path_s"]["relay"], 0)

    def test_decide_push_follows_the_followers_stage(self):
        # One worker on a host of its own (1,000x faster), two shards on two
        # hosts of r bytes/s, no latency, no CPU cost: b = 500,000 bytes a
        # shard each way take b/r = 5 ms. A whole push is staged on shard 1
        # (b/r), then carried to shard 0 by DecidePush (b/r more); the pull
        # takes both halves at once (b/r). So a step of N=1 is C + 3 b/r,
        # where a push sent to both shards at once would make it C + 2 b/r.
        r, b = 1e8, 500000
        hosts = [sim.Host("w", 1000 * r, 0.0), sim.Host("p0", r, 0.0), sim.Host("p1", r, 0.0)]
        cl = sim.Cluster(hosts, [1, 2], [0])
        res = run(cl, "sync", 1, prof=zero_profile(), params=2 * b // 4, steps=10, warmup=2)
        self.assertAlmostEqual(res["step_time_mean"], C + 3 * b / r, delta=1e-3 * b / r)
        # A lone shard on one such host: C + 2 b'/r with b' = 2b, the same bytes.
        lone = sim.Cluster(hosts[:2], [1], [0])
        res = run(lone, "sync", 1, prof=zero_profile(), params=2 * b // 4, steps=10, warmup=2)
        self.assertAlmostEqual(res["step_time_mean"], C + 4 * b / r, delta=1e-3 * b / r)

    def test_overlap_shortens_a_transfer_bound_step(self):
        cl = sim.Cluster.spread(4, 2, 4, 2, 1)
        kw = dict(params=2748890, compute="constant:0.02", steps=20, warmup=2)
        off = run(cl, "sync", **kw)
        on = run(cl, "sync", overlap=True, **kw)
        self.assertLess(on["step_time_mean"], off["step_time_mean"])

    def test_a_token_bucket_link(self):
        # One worker, one shard at 1 Gbit/s: ResNet-20's 1,089,896 bytes
        # take 8.72 ms each way. Without a bucket the step is at least the
        # compute and both transfers; with a bucket deeper than a
        # transfer, refilled during the 50 ms of compute, every transfer
        # goes at once and the step is the one over a 1,000 Gbit/s link
        # (transfers of 8.7 us) within 1%.
        kw = dict(params=272474, compute="constant:0.05", steps=20, warmup=2)
        d = 272474 * 4 / (1e9 / 8)
        plain = run(sim.Cluster.spread(1, 1, 1, 1, 1, 5e-6), "sync", **kw)
        self.assertGreaterEqual(plain["step_time_mean"], 0.05 + 2 * d)
        bucket = run(sim.Cluster.spread(1, 1, 1, 1, 1, 5e-6, burst_bytes=2e6), "sync", **kw)
        fast = run(sim.Cluster.spread(1, 1, 1, 1, 1000, 5e-6), "sync", **kw)
        self.assertLess(abs(bucket["step_time_mean"] / fast["step_time_mean"] - 1), 0.01)
        # A bucket smaller than a transfer saves its depth, no more.
        half = run(sim.Cluster.spread(1, 1, 1, 1, 1, 5e-6, burst_bytes=500e3), "sync", **kw)
        saved = plain["step_time_mean"] - half["step_time_mean"]
        self.assertAlmostEqual(saved, 2 * 500e3 / (1e9 / 8), delta=1e-4)
        # The rate still holds: back-to-back transfers, no idle to refill.
        busy = run(sim.Cluster.spread(8, 1, 8, 1, 1, 5e-6, burst_bytes=500e3), "sync",
                   params=272474, compute="constant:0.0001", steps=20, warmup=2)
        self.assertLessEqual(busy["link_utilisation"]["p0 in"], 1.0 + 1e-9)

    def test_one_machine_s_cores(self):
        # Eight workers and four shards whose stages are slow (300 ns a byte
        # of a shard's 272 KB of ResNet-20: 82 ms a push on each shard), so
        # that without the machine more than 2 shard CPUs are busy, on one
        # machine of 2 cores: at most 2 seconds of work a second, so the
        # steps/s falls to what 2 cores can do, and the bound says so. With
        # as many cores as tasks and the workers' CPU free it is the
        # simulator without the machine, exactly.
        cl = sim.Cluster.spread(8, 4, 8, 4, 100)
        slow = Profile(dict(DEFAULT.values, **{"server.stage_ns_per_byte.fp32": 300.0}), "slow")
        kw = dict(prof=slow, params=272474, compute="constant:0.01", steps=30, warmup=3)
        free = run(cl, "sync", **kw)
        two = run(cl, "sync", cores=2, **kw)
        busy = sum(free["cpu_utilisation"].values())
        self.assertGreater(busy, 2.0)  # more than 2 cores' work without the machine
        self.assertLessEqual(two["cores_utilisation"], 1.0 + 1e-9)
        # Per step the shards' work is fixed: 2 cores' worth of seconds a
        # second bounds the steps a second.
        work_per_step = busy / free["steps_per_s"]
        self.assertLessEqual(two["steps_per_s"], 2.0 / work_per_step * 1.001)
        self.assertEqual(two["bound"], "machine CPU")
        self.assertIn("2 cores", two["bound_detail"])
        no_worker = Profile(dict(slow.values, **{"worker.ns_per_byte.grpc": 0.0}), "w0")
        many = run(cl, "sync", cores=12, **dict(kw, prof=no_worker))
        self.assertAlmostEqual(many["steps_per_s"], free["steps_per_s"], places=9)
        # The workers' CPU is charged on the cores: a costly one slows the step.
        costly = Profile(dict(slow.values, **{"worker.ns_per_byte.grpc": 50.0}), "w50")
        self.assertLess(run(cl, "sync", cores=12, **dict(kw, prof=costly))["steps_per_s"],
                        0.9 * many["steps_per_s"])
        for bad in (0, -1, 1.5):
            with self.assertRaises(ValueError) as cm:
                run(cl, "sync", cores=bad, **kw)
            self.assertIn(f"cores = {bad}", str(cm.exception))
        v = dict(DEFAULT.values)
        del v["worker.ns_per_byte.grpc"]
        with self.assertRaises(ProfileError) as cm:
            run(cl, "sync", prof=Profile(v, "p"), cores=2, steps=5, warmup=1)
        self.assertIn("'worker.ns_per_byte.grpc'", str(cm.exception))

    def test_bad_input(self):
        cl = sim.Cluster.spread(4, 2, 4, 2, 10)
        for kw, text in ((dict(wire="fp8"), "wire 'fp8'"),
                         (dict(optimizer="lamb"), "optimizer 'lamb'"),
                         (dict(transport="carrier-pigeon"), "transport 'carrier-pigeon'"),
                         (dict(N=5), "N = 5"),
                         (dict(push_extra_s=-1), "push_extra_s"),
                         (dict(batch=0), "batch = 0")):
            N = kw.pop("N", None)
            with self.assertRaises(ValueError) as cm:
                run(cl, "sync", N, **kw)
            self.assertIn(text, str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            sim.Cluster([sim.Host("a", 1e9, 0)], [0, 3], [0])
        self.assertIn("ps:1: host 3", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            sim.Host("a", 0, 0)
        self.assertIn("host a", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            sim.Host("b", 1e9, 0, -1)
        self.assertIn("host b: burst -1", str(cm.exception))

    def test_missing_figure_is_named(self):
        v = dict(DEFAULT.values)
        del v["server.stage_ns_per_byte.bf16"]
        with self.assertRaises(ProfileError) as cm:
            run(sim.Cluster.spread(4, 2, 4, 2, 10), "sync", prof=Profile(v, "p"), wire="bf16")
        self.assertIn("'server.stage_ns_per_byte.bf16'", str(cm.exception))
        self.assertIn("bf16 pushes", str(cm.exception))
        run(sim.Cluster.spread(4, 2, 4, 2, 10), "sync", prof=Profile(v, "p"), steps=5, warmup=1)


class FirstChoiceTest(unittest.TestCase):
    """validate_report.first_choices: plan.py's rule on the predictions
    against the measured figures, in images/s."""

    def test_the_pick_and_the_async_margin(self):
        import validate_report as vr
        # (name, workers, mode, backups, cap, predicted steps/s, measured).
        # 4 workers at batch 128: sync N=4 moves 512 images a step, N=3 384,
        # async 128 a push. Predicted: a 100 x 512 = 51,200; b 120 x 384 =
        # 46,080; async 500 x 128 = 64,000 < 1.5 x 51,200: a is the pick.
        group = [("a", 4, "sync", 0, "1g", 100.0, 90.0),
                 ("b", 4, "sync", 1, "1g", 120.0, 130.0),
                 ("c", 4, "async", 0, "1g", 500.0, 600.0)]
        rows = vr.first_choices(group)
        self.assertEqual(len(rows), 1)
        # Measured: a 46,080, b 49,920: a is 7.7% short of the fastest sync.
        self.assertIn("| a (51,200 predicted, 46,080 measured) |", rows[0])
        self.assertIn("| c (76,800) | b (49,920) |", rows[0])
        self.assertIn("no: 7.7% short of b", rows[0])
        # Async at 1.5x the best sync's prediction is the pick, against all.
        fast = [g if g[0] != "c" else ("c", 4, "async", 0, "1g", 700.0, 600.0) for g in group]
        self.assertIn("yes: 0.0% short of c", vr.first_choices(fast)[0])
        # One scenario of its kind: no row; no measurement: the pick alone.
        self.assertEqual(vr.first_choices(group[:1]), [])
        unmeasured = [g[:6] + (None,) for g in group]
        self.assertTrue(vr.first_choices(unmeasured)[0].endswith("| - | - | - |"))


class ProfileTest(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse("a.b = 1.5  # c\n\n# x\nc = 2\n"), {"a.b": 1.5, "c": 2.0})
        for text, msg in (("a.b 1", "expected 'key = number'"), ("a = x", "'x' is not a number"),
                          ("a = -1", "must be a finite number >= 0"), ("a = 1\na = 2", "twice")):
            with self.assertRaises(ProfileError) as cm:
                parse(text, "f")
            self.assertIn(msg, str(cm.exception))

    def test_models_are_the_registry(self):
        registry = os.path.join(ROOT, "worker", "models", "registry.cc")
        if not os.path.exists(registry):
            self.skipTest(f"{registry} not reachable from here")
        with open(registry) as f:
            names = set(re.findall(r'^\s*\{"([a-z0-9_]+)",', f.read(), re.M))
        self.assertTrue(names)
        self.assertEqual(set(DEFAULT.models()), names)


RUNS = os.path.join(ROOT, "docs", "experiments", "stragglers-2026-11-26")


class StragglerStudyTest(unittest.TestCase):
    """The recorded emulated straggler study (docs/EXPERIMENTS.md,
    "Stragglers"): one ps_server, cifar10_linear, 55 ms compute, 1% stalls of
    1 s, worker 0 3x slow; each run's own push and pull medians as the
    transfer times, as stragglers_report.py --model gives the step-time
    model; the transport's per-message figures are in those medians."""

    def test_within_ten_percent(self):
        if not os.path.isdir(RUNS):
            self.skipTest(f"{RUNS} not reachable from here")
        v = dict(DEFAULT.values)
        v["transport.grpc.latency_us"] = v["transport.grpc.us_per_message"] = 0.0
        prof = Profile(v, "loopback")
        runs = []
        for name in ("m16-report.json", "m16-b5-b8-report.json", "m8-m32-report.json"):
            with open(os.path.join(RUNS, name)) as f:
                runs += json.load(f)
        self.assertEqual(len(runs), 19)
        errors = {}
        for r in runs:
            M = r["workers"]
            kw = dict(compute="constant:0.055", slow={0: 3.0}, stall_p=0.01, stall_s=1.0,
                      steps=2000, warmup=50, push_extra_s=r["push_s_median"],
                      pull_extra_s=r["pull_s_median"])
            if r["mode"] == "async":
                mode, N = "async", None
                if "ssp" in r["run"]:
                    kw["staleness_bound"] = 4  # stragglers.sh's --ssp
            elif r["adaptive"]:
                mode, N = "adaptive", None
            else:
                mode, N = "sync", round(r["n_mean"])
            pred = statistics.mean(
                sim.simulate(one_host(M), 17290, prof, mode, N, seed=s, **kw)["steps_per_s"]
                for s in range(1, 6))
            errors[r["run"]] = pred / r["steps_per_s"] - 1
        bad = {k: f"{100 * e:+.1f}%" for k, e in errors.items() if abs(e) > 0.10}
        self.assertEqual(bad, {}, errors)


class BandwidthStudyTest(unittest.TestCase):
    """The recorded bandwidth study (docs/EXPERIMENTS.md, "Across hosts: 10G
    and 1G links"): 2 ps and 3 workers each on a namespace host of its own,
    cifar10_tutorial, batch 32, N = M = 3, fp32, links capped by tbf. Given
    each run's own measured compute, the simulated step is within 10% of
    the measured one: the links' share is what is predicted."""

    def test_capped_links(self):
        for mbit, compute_s, step_s in ((167.1, 0.477, 1.132), (16.7, 0.233, 6.558)):
            cl = sim.Cluster.spread(3, 2, 3, 2, mbit / 1000)
            r = sim.simulate(cl, 1068298, DEFAULT, "sync", batch=32,
                             compute=f"constant:{compute_s}", steps=10, warmup=2)
            self.assertLess(abs(r["step_time_mean"] / step_s - 1), 0.10, (mbit, r["step_time_mean"]))
            self.assertEqual(r["bound"], "link")


def _main(module, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = module.main(argv)
    return rc, out.getvalue(), err.getvalue()


def _main_prog(module, argv, prog):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = module.main(argv, prog=prog)
    return rc, out.getvalue(), err.getvalue()


class PlanTest(unittest.TestCase):
    BASE = ["--model=resnet20", "--workers=8", "--hosts=2", "--step_ms=4", "--shards=1,2",
            "--modes=sync,adaptive,async", "--backups=0,1", "--overlap=off", "--steps=40"]

    def test_plans_and_writes_the_first_choice(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "c.pbtxt")
            rc, text, err = _main(plan, self.BASE + ["--gbit=10", f"--out={out}"])
            self.assertEqual(rc, 0, err)
            with open(out) as f:
                cfg = f.read()
        self.assertIn("First choice at 10 Gbit/s", text)
        self.assertIn("| rank | S |", text)
        m = re.search(r"First choice at 10 Gbit/s: S = (\d+), (sync b=(\d+)|adaptive|async)",
                      text)
        S = int(m.group(1))
        self.assertEqual(len(re.findall(r"^ps \{", cfg, re.M)), S)
        self.assertEqual(len(re.findall(r"^worker \{", cfg, re.M)), 8)
        self.assertIn('model { name: "resnet20" }', cfg)
        if m.group(3) is not None:
            self.assertIn(f"replicas_to_aggregate: {8 - int(m.group(3))}", cfg)
            self.assertIn("total_num_replicas: 8", cfg)
        self.assertRegex(cfg, r"wire \{ gradients: (FP32|BF16) weights: (FP32|BF16) \}")

    def test_slow_links_choose_bf16(self):
        rc, text, err = _main(plan, self.BASE + ["--gbit=0.5", "--modes=sync"])
        self.assertEqual(rc, 0, err)
        self.assertRegex(text, r"First choice at 0.5 Gbit/s: S = \d+, sync b=\d, wire bf16")

    def check_refused(self, argv, message):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "c.pbtxt")
            rc, text, err = _main(plan, argv + [f"--out={out}"])
            self.assertEqual(rc, 2, text)
            self.assertIn(message, err)
            self.assertFalse(os.path.exists(out), argv)

    def test_bad_input(self):
        b = [a for a in self.BASE if not a.startswith("--model")]
        self.check_refused(b + ["--model=resnet21"], "--model=resnet21: unknown model (known: ")
        self.check_refused(self.BASE + ["--replicas=9"], "M < N: 8 workers cannot give 9")
        self.check_refused(self.BASE + ["--backups=8"], "b = 8 gives N = 0")
        self.check_refused(self.BASE + ["--gbit=0.0001"], "cannot carry one step's bytes")
        self.check_refused(self.BASE + ["--gbit=0"], "a link rate must be > 0")
        self.check_refused(self.BASE + ["--gbit=1,10"], "--out with several --gbit values")
        self.check_refused(self.BASE + ["--wires=fp8"], "unknown wire dtype 'fp8'")
        self.check_refused(self.BASE + ["--stall=0.5"], "--stall=0.5: expected")
        # As `psgd plan` would call it: its errors name the command.
        rc, _, err = _main_prog(plan, self.BASE + ["--replicas=0"], "psgd plan")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("psgd plan: --replicas=0"), err)
        rc, _, err = _main(sim, ["--model=resnet21"])
        self.assertEqual(rc, 2)
        self.assertIn("--model=resnet21: unknown model", err)
        no_step = [a for a in self.BASE if not a.startswith("--step_ms")]
        self.check_refused(no_step + ["--batch=64"],
                           "lacks 'compute.resnet20.gpu_ms.b64' (needed for the compute time")
        with tempfile.TemporaryDirectory() as d:
            prof = os.path.join(d, "p.profile")
            with open(prof, "w") as f:
                f.write("\n".join(f"{k} = {v}" for k, v in DEFAULT.values.items()
                                  if k != "server.stage_ns_per_byte.bf16"))
            self.check_refused(self.BASE + [f"--profile={prof}", "--wires=fp32,bf16"],
                               "lacks 'server.stage_ns_per_byte.bf16'")


BENCH = """\
ps_bench: model cifar10_tutorial, 1068298 float32 values (4.27 MB), 2 shards, 4 workers, \
sync N=M=4; 5 alternating rounds of 1.0 s each after 1.0 s warmup; loopback
parameter server (fp32):     100.0 worker steps/s, 0.8546384 GB/s pushed + pulled, 10.00 \
CPU ms per worker step
parameter server (bf16):     150.0 worker steps/s, 0.6409788 GB/s pushed + pulled, 7.50 \
CPU ms per worker step
in process (no transport):   400.0 worker steps/s, 0.000 GB/s pushed + pulled, 4.00 \
CPU ms per worker step
tcp echo:                    500.0 worker steps/s, 4.273192 GB/s pushed + pulled, 3.00 \
CPU ms per worker step
cpu_floor_ms=7.000 (in process 4.000 + tcp echo 3.000)
"""


class CalibrateTest(unittest.TestCase):
    def test_from_ps_bench(self):
        with tempfile.TemporaryDirectory() as d:
            bench, out = os.path.join(d, "b.txt"), os.path.join(d, "p.profile")
            samples = os.path.join(d, "s.txt")
            with open(bench, "w") as f:
                f.write(BENCH)
            with open(samples, "w") as f:
                f.write("0.010\n0.012\n# x\n0.011\n")
            rc, text, err = _main(calibrate, [f"--ps_bench={bench}", f"--out={out}",
                                              "--step_ms=cnn10:gpu:256=7.5",
                                              f"--step_samples=resnet20:cpu:64={samples}"])
            self.assertEqual(rc, 0, err)
            p = Profile.load(out)
        b = 8546384  # bytes pushed + pulled a worker step
        # gRPC on the shard: half of (10 - 4) ms over b bytes.
        self.assertAlmostEqual(p.get("transport.grpc.server_ns_per_byte"), 3e-3 / b * 1e9, 4)
        # bf16: CPU per wire byte 7.5 ms / (b/2) against 10 ms / b: 1.5x fp32's.
        self.assertAlmostEqual(p.get("server.stage_ns_per_byte.bf16"),
                               1.5 * p.get("server.stage_ns_per_byte.fp32"), 4)
        self.assertEqual(p.get("compute.cnn10.gpu_ms.b256"), 7.5)
        self.assertAlmostEqual(p.get("compute.resnet20.cpu_ms.b64"), 11.0)
        self.assertIn("cpu_floor_ms=7.000", text)
        self.assertIn("transport.grpc.server_ns_per_byte", text)
        # The base profile's split, scaled to the in-process set's 4 ms / b.
        work = (p.get("server.stage_ns_per_byte.fp32") * b / 2 +
                p.get("server.serve_ns_per_byte.fp32") * b / 2 +
                p.get("server.sum_ns_per_param") * b / 8 +
                p.get("server.apply_ns_per_param.adam") * b / 8 / 4) * 1e-9
        self.assertAlmostEqual(work, 4e-3, 6)

    def test_from_real_processes(self):
        # Three runs of ps_bench_cluster.sh, 2 shards x 2 workers in sync,
        # ResNet-20 (P = 272,474 values: 8P bytes pushed + pulled a worker
        # step): the servers spent 1.8, 2.0 and 2.4 CPU ms a worker step,
        # the clients 1.0, 1.5, 3.0.
        P = 272474
        def run(servers, clients, ucx=False):  # noqa: E306
            head = ("ps_cluster_bench --config=/c.pbtxt: model resnet20 (1.09 MB), 2 ps tasks, "
                    "workers {0}..{0}, sync, gradients float32, weights float32; 6.0 s\n")
            return ("--- client process 0\n" +
                    ("[info] shard 0 at h:1: pushes and pulls over UCX (tcp) to h:2\n"
                     if ucx else "") + head.format(0) +
                    "--- client process 1\n" + head.format(1) +
                    f"total: 500.0 worker steps/s, {500 * 8 * P / 1e6} MB/s\n"
                    f"servers' CPU: 0.90 cores busy, {servers} ms per worker step (over 4 s)\n"
                    f"clients' CPU: 0.70 cores busy, {clients} ms per worker step (over 4 s)\n")
        with tempfile.TemporaryDirectory() as d:
            bench, out = os.path.join(d, "c.txt"), os.path.join(d, "p.profile")
            with open(bench, "w") as f:
                f.write(run(1.8, 1.0) + run(2.4, 3.0) + run(2.0, 1.5))
            rc, text, err = _main(calibrate, [f"--cluster_bench={bench}", f"--out={out}",
                                              "--cluster_optimizer=momentum"])
            self.assertEqual(rc, 0, err)
            p = Profile.load(out)
        # The workers: the median 1.5 ms over 8P bytes.
        self.assertAlmostEqual(p.get("worker.ns_per_byte.grpc"), 1.5e-3 / (8 * P) * 1e9, 5)
        # The servers, by the simulator's rules for 2 shards of P/2 values
        # (2P bytes each way a shard) and N = 2: a worker step stages and
        # serves once on each shard (a message each), sums P values, applies
        # half a step to P values, and a step's relay costs a message on
        # each shard (one a worker step): 2.0 ms, the median.
        g = p.get
        msg = (g("server.us_per_message") + g("transport.grpc.us_per_message")) * 1e-6
        st = (g("server.stage_ns_per_byte.fp32") + g("transport.grpc.server_ns_per_byte")) * 1e-9
        sv = (g("server.serve_ns_per_byte.fp32") + g("transport.grpc.server_ns_per_byte")) * 1e-9
        cpu = (5 * msg + 2 * 2 * P * (st + sv) + g("server.sum_ns_per_param") * 1e-9 * P
               + g("server.apply_ns_per_param.momentum") * 1e-9 * P / 2)
        self.assertAlmostEqual(cpu / 2.0e-3, 1.0, 4)
        # Everything the servers pay is scaled alike; UCX's figures stay.
        self.assertAlmostEqual(g("server.sum_ns_per_param") / DEFAULT.get("server.sum_ns_per_param"),
                               g("transport.grpc.us_per_message") /
                               DEFAULT.get("transport.grpc.us_per_message"), 4)
        self.assertEqual(g("transport.ucx.server_ns_per_byte"),
                         DEFAULT.get("transport.ucx.server_ns_per_byte"))
        self.assertIn("2 x 2 sync over grpc, median of 3 runs", text)
        # Over UCX (the clients' log says so), UCX's figures are the ones set.
        with tempfile.TemporaryDirectory() as d:
            bench, out = os.path.join(d, "c.txt"), os.path.join(d, "p.profile")
            with open(bench, "w") as f:
                f.write(run(2.0, 1.5, ucx=True))
            rc, _, err = _main(calibrate, [f"--cluster_bench={bench}", f"--out={out}",
                                           "--cluster_optimizer=momentum"])
            self.assertEqual(rc, 0, err)
            p = Profile.load(out)
        self.assertAlmostEqual(p.get("worker.ns_per_byte.ucx"), 1.5e-3 / (8 * P) * 1e9, 5)
        self.assertEqual(p.get("worker.ns_per_byte.grpc"), DEFAULT.get("worker.ns_per_byte.grpc"))
        # Bad input: nothing written.
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "p.profile")
            files = {"ok": run(2.0, 1.5), "cut": run(2.0, 1.5).split("clients' CPU")[0],
                     "mixed": run(2.0, 1.5) + run(2.0, 1.5).replace("resnet20", "cnn10"),
                     "bf16": run(2.0, 1.5).replace("gradients float32", "gradients bfloat16")}
            for name, t in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(t)
            for argv, msg in (([f"--cluster_bench={d}/ok"], "needs --cluster_optimizer"),
                              (["--cluster_optimizer=sgd"], "without --cluster_bench"),
                              ([f"--cluster_bench={d}/cut", "--cluster_optimizer=sgd"],
                               "no complete run"),
                              ([f"--cluster_bench={d}/mixed", "--cluster_optimizer=sgd"],
                               "runs of different clusters"),
                              ([f"--cluster_bench={d}/bf16", "--cluster_optimizer=sgd"],
                               "calibrate on float32 runs"),
                              ([f"--cluster_bench={d}/none", "--cluster_optimizer=sgd"],
                               "--cluster_bench=")):
                rc, _, err = _main(calibrate, argv + [f"--out={out}"])
                self.assertEqual(rc, 2, argv)
                self.assertIn(msg, err)
                self.assertFalse(os.path.exists(out))

    def test_bad_input_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "p.profile")
            bench = os.path.join(d, "b.txt")
            with open(bench, "w") as f:
                f.write("\n".join(l for l in BENCH.splitlines() if "fp32" not in l))
            for argv, msg in (([f"--ps_bench={bench}"], "no 'parameter server (fp32):' line"),
                              ([f"--ps_bench={d}/none"], "--ps_bench="),
                              (["--step_ms=resnet20:tpu:128=4"], "expected MODEL:gpu|cpu:BATCH"),
                              (["--step_ms=resnet20:gpu:128=x"], "'x' is not a number"),
                              ([], "nothing to calibrate")):
                rc, _, err = _main(calibrate, argv + [f"--out={out}"])
                self.assertEqual(rc, 2, argv)
                self.assertIn(msg, err)
                self.assertFalse(os.path.exists(out))


def write_curve(d, name, mode, M, batch, accs, seed=1, N=None, eval_every=10, staleness=0,
                eval_s=1.0, model="resnet20", step_s=0.1):
    """A run directory as launch.sh writes one, small: config.pbtxt,
    summary.json, the chief's train lines (async: applied pushes of the
    given staleness) and an evaluation every eval_every global steps with
    the accuracies `accs`."""
    path = os.path.join(d, name)
    os.makedirs(path)
    N = N or M
    with open(os.path.join(path, "config.pbtxt"), "w") as f:
        f.write(f'name: "{name}"\n' + "".join(f'worker {{ address: "h:{i}" }}\n'
                                              for i in range(M)) +
                f"training {{ mode: {mode.upper()} batch_size: {batch} "
                f"{f'replicas_to_aggregate: {N} ' if mode == 'sync' else ''}"
                f"eval_every: {eval_every} seed: {seed} }}\nmodel {{ name: \"{model}\" }}\n")
    with open(os.path.join(path, "summary.json"), "w") as f:
        json.dump(dict(mode=mode, workers=M, batch_size=batch, model=model,
                       **({"replicas_to_aggregate": N} if mode == "sync" else {})), f)
    t, lines = 0.5, []
    for i, acc in enumerate(accs):
        for k in range(eval_every):
            step = i * eval_every + k
            lines.append(dict(kind="train", task="worker:0", step=step, wall_time_s=t,
                              step_s=step_s,
                              batch_size=batch, staleness=staleness if mode == "async" else 0,
                              outcome="applied" if mode == "async" else "aggregated"))
            t += step_s
        t += eval_s
        lines.append(dict(kind="eval", task="worker:0", step=(i + 1) * eval_every,
                          wall_time_s=t, test_accuracy=acc, eval_s=eval_s, final=False))
    with open(os.path.join(path, "worker-0.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in lines))
    return path


class TimeToAccuracyTest(unittest.TestCase):
    """scripts/plan/accuracy.py: the steps a configuration's curves take to a
    target, the time that is at a step rate, and the planner ranking by it."""

    def test_sync_takes_the_curves_of_its_global_batch(self):
        with tempfile.TemporaryDirectory() as d:
            c = accuracy.load_curves([
                write_curve(d, "a", "sync", 2, 64, [0.3, 0.5, 0.61, 0.7], seed=1),
                write_curve(d, "b", "sync", 2, 64, [0.3, 0.5, 0.55, 0.62], seed=2),
                write_curve(d, "c", "sync", 4, 64, [0.4, 0.65], seed=1)])
            # Global batch 128: the curves a (30 steps) and b (40).
            k, lo, hi, note = accuracy.steps_to_target(c, "sync", 64, 2, target=0.6)
            self.assertEqual((k, lo, hi), (35, 30, 40), note)
            # 4 x 32 is global batch 128 as well, whatever M.
            self.assertEqual(accuracy.steps_to_target(c, "sync", 32, 4, target=0.6)[0], 35)
            self.assertEqual(accuracy.steps_to_target(c, "sync", 64, 4, target=0.6)[:3],
                             (20, 20, 20))
            k, _, _, note = accuracy.steps_to_target(c, "sync", 64, 3, target=0.6)
            self.assertIsNone(k)
            self.assertIn("no sync curve at global batch 192 (curves at 128, 256)", note)
            k, _, _, note = accuracy.steps_to_target(c, "sync", 64, 2, target=0.9)
            self.assertIsNone(k)
            self.assertIn("never reaches 90%", note)

    def test_async_interpolates_in_staleness(self):
        with tempfile.TemporaryDirectory() as d:
            c = accuracy.load_curves([
                write_curve(d, "a2", "async", 2, 64, [0.2] * 9 + [0.6], staleness=1),
                write_curve(d, "a4", "async", 4, 64, [0.2] * 29 + [0.6], staleness=3)])
            self.assertAlmostEqual(c[0].staleness, 1.0)
            f = lambda s: accuracy.steps_to_target(c, "async", 64, staleness=s)  # noqa: E731
            self.assertEqual(f(1)[0], 100)
            self.assertEqual(f(3)[0], 300)
            self.assertAlmostEqual(f(2)[0], 200)  # halfway: 100 + (300 - 100) / 2
            self.assertAlmostEqual(f(1.5)[0], 150)
            k, _, _, note = f(7)
            self.assertEqual(k, 300)
            self.assertIn("outside the measured levels (simulated staleness 7.00)", note)
            self.assertIsNone(accuracy.steps_to_target(c, "async", 32, staleness=1)[0])

    def test_time_to_target(self):
        # 100 steps at 2 steps/s, start-up 3 s, evaluations every 25 steps
        # of 4, 1, 1, 1 s: sync N = M waits for each: 3 + 50 + 7.
        tt = accuracy.time_to_target
        self.assertAlmostEqual(tt(100, 2.0, "sync", 4, 4, 25, [4, 1], 3.0), 60.0)
        # Async (and N < M): the other workers go on; the chief's 1/M share of
        # each evaluation is lost, the last (which ends the measured time)
        # counts whole: 3 + 50 + (4 + 1 + 1) / 4 + 1.
        self.assertAlmostEqual(tt(100, 2.0, "async", 4, None, 25, [4, 1], 3.0), 55.5)
        self.assertAlmostEqual(tt(100, 2.0, "sync", 4, 3, 25, [4, 1], 3.0), 55.5)
        self.assertAlmostEqual(tt(100, 2.0, "sync", 4, 4), 50.0)
        # On 2 shared cores the evaluation takes one of the 2 that train:
        # 3 + 50 + (4 + 1 + 1) / 2 + 1; sync N = M stalls as before.
        self.assertAlmostEqual(tt(100, 2.0, "async", 4, None, 25, [4, 1], 3.0, cores=2), 57.0)
        self.assertAlmostEqual(tt(100, 2.0, "async", 4, None, 25, [4, 1], 3.0, cores=8), 55.5)
        self.assertAlmostEqual(tt(100, 2.0, "sync", 4, 4, 25, [4, 1], 3.0, cores=2), 60.0)
        with self.assertRaises(ValueError):
            tt(100, 0.0, "sync", 4, 4)

    def test_measured_time_is_the_first_evaluation_at_target(self):
        with tempfile.TemporaryDirectory() as d:
            c = accuracy.Curve(write_curve(d, "a", "sync", 2, 64, [0.3, 0.61, 0.5, 0.7],
                                           eval_every=10, eval_s=2.0, step_s=0.5))
            # Start 0.5 s, 20 steps of 0.5 s, two evaluations of 2 s.
            self.assertEqual(c.steps_to(0.6), 20)
            self.assertAlmostEqual(c.time_to(0.6), 0.5 + 10 + 4)
            self.assertAlmostEqual(c.measured_rate(), 2.0)
            self.assertEqual((c.eval_every, c.seed, c.start_s), (10, 1, 0.5))

    def test_cpu_compute_takes_the_cores(self):
        # 4 workers of compute C on 2 cores, every other cost zero: a sync
        # step needs 4 computes, 2 at a time: 2C; async applies 2 pushes
        # every C.
        zero = zero_profile()
        v = dict(zero.values)
        v["worker.ns_per_byte.grpc"] = 0.0
        zero = Profile(v, "zero")
        r = run(one_host(4), "sync", 4, prof=zero, steps=20, warmup=4, cores=2,
                cpu_compute=True)
        self.assertAlmostEqual(r["steps_per_s"], 1 / (2 * C), places=6)
        r = run(one_host(4), "async", prof=zero, steps=40, warmup=8, cores=2, cpu_compute=True)
        self.assertAlmostEqual(r["grads_per_s"], 2 / C, places=6)
        # Without cpu_compute the cores hold no compute: every worker at once.
        r = run(one_host(4), "sync", 4, prof=zero, steps=20, warmup=4, cores=2)
        self.assertAlmostEqual(r["steps_per_s"], 1 / C, places=6)
        with self.assertRaisesRegex(ValueError, "cpu_compute: .* needs cores"):
            run(one_host(4), "sync", 4, prof=zero, steps=5, warmup=1, cpu_compute=True)

    BASE = ["--model=resnet20", "--workers=4", "--hosts=1", "--step_ms=100", "--shards=1",
            "--modes=sync,async", "--backups=0", "--wires=fp32", "--overlap=off",
            "--steps=40", "--device=cpu", "--batch=64", "--staleness_bound=0"]

    def test_the_planner_ranks_by_time_to_target(self):
        # Async moves 2x the gradients of sync N = M = 4 on 2 cores? No: on
        # one machine of 2 cores both apply 2 x 64 images every 100 ms; sync
        # makes one step of 256 images every 200 ms, async one push every
        # 50 ms. Curves: sync at global batch 256 reaches 60% at step 200
        # (40 s), async at staleness 3 at step 1,000 (50 s): sync first.
        # With the async curve at step 600 (30 s): async first.
        for async_steps, first in ((1000, "sync b=0"), (600, "async")):
            with tempfile.TemporaryDirectory() as d:
                curves = [
                    write_curve(d, "s", "sync", 4, 64, [0.2] * 19 + [0.6]),
                    write_curve(d, "a", "async", 4, 64,
                                [0.2] * (async_steps // 10 - 1) + [0.6], staleness=3)]
                out = os.path.join(d, "c.pbtxt")
                rc, text, err = _main(plan, self.BASE + [
                    "--cores=2", f"--curves={','.join(curves)}", f"--out={out}"])
                self.assertEqual(rc, 0, err)
                self.assertIn("time to 60% (s; spread)", text)
                m = re.search(r"First choice at 10 Gbit/s: S = 1, ([^,]+),", text)
                self.assertEqual(m.group(1), first, text)
                self.assertIn("the shortest predicted time to 60% test accuracy", text)
                want = {"sync b=0": 200 / 5.0, "async": async_steps / 20.0}
                for label, t in want.items():
                    row = next(l for l in text.splitlines()
                               if f"| {label} |" in l)
                    got = float(row.split("|")[9].split("(")[0].replace(",", ""))
                    self.assertLess(abs(got / t - 1), 0.05, (label, row))
                with open(out) as f:
                    self.assertIn("mode: SYNC" if first.startswith("sync") else "mode: ASYNC",
                                  f.read())

    def test_too_close_to_call(self):
        # Two async curves at 700 and 1,000 steps (about 36 and 51 s at 19.5
        # pushes/s) around sync's 200 steps (41 s at 4.85 steps/s): sync
        # first, and its rival's spread reaches it. Async at 700 and 750
        # (36-38 s): async first, sync's 41 s out of its reach.
        with tempfile.TemporaryDirectory() as d:
            curves = [write_curve(d, "s", "sync", 4, 64, [0.2] * 19 + [0.6]),
                      write_curve(d, "a1", "async", 4, 64, [0.2] * 69 + [0.6], staleness=3),
                      write_curve(d, "a2", "async", 4, 64, [0.2] * 99 + [0.6], staleness=3,
                                  seed=2)]
            rc, text, err = _main(plan, self.BASE + ["--cores=2", f"--curves={','.join(curves)}"])
            self.assertEqual(rc, 0, err)
            self.assertRegex(text, r"First choice at 10 Gbit/s: S = 1, sync b=0, .*too close to "
                             r"call against async \(S = 1, \d+ s, 3\d-5\d\)")
            curves[2] = write_curve(d, "a3", "async", 4, 64, [0.2] * 74 + [0.6], staleness=3,
                                    seed=2)
            rc, text, err = _main(plan, self.BASE + ["--cores=2", f"--curves={','.join(curves)}"])
            self.assertRegex(text, r"First choice at 10 Gbit/s: S = 1, async,")
            self.assertNotIn("too close to call", text)

    def test_validate_predicts_each_run_from_the_other_seeds(self):
        # Seed 1 reaches 60% at step 20, seed 2 at step 40: each run's
        # predicted steps are the other seed's.
        with tempfile.TemporaryDirectory() as d:
            runs = [write_curve(d, "r1", "sync", 2, 64, [0.3, 0.6], seed=1),
                    write_curve(d, "r2", "sync", 2, 64, [0.3, 0.4, 0.5, 0.6], seed=2)]
            rc, text, err = _main(accuracy, ["validate", *runs, "--step_ms=100", "--cores=2"])
            self.assertIn(rc, (0, 1), err)
            rows = {l.split("|")[1].strip(): l.split("|") for l in text.splitlines()
                    if l.startswith("| r")}
            self.assertEqual(rows["r1"][3].strip(), "40 (40-40)")
            self.assertEqual(rows["r1"][4].strip(), "20")
            self.assertEqual(rows["r2"][3].strip(), "20 (20-20)")
            self.assertEqual(rows["r2"][4].strip(), "40")

    def test_curves_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            other = write_curve(d, "o", "sync", 4, 64, [0.6], model="cnn10")
            empty = os.path.join(d, "empty")
            os.makedirs(empty)
            for argv, msg in (([f"--curves={d}/none"], f"--curves: {d}/none: not a directory"),
                              ([f"--curves={empty}"], "no .jsonl metrics files"),
                              ([f"--curves={other}"], "o trained cnn10, not --model=resnet20"),
                              (["--target=1.5"], "--target=1.5: must be in (0, 1]"),
                              (["--cores=0"], "--cores=0: must be >= 1")):
                out = os.path.join(d, "c.pbtxt")
                rc, text, err = _main(plan, self.BASE + argv + [f"--out={out}"])
                self.assertEqual(rc, 2, text)
                self.assertIn(msg, err)
                self.assertFalse(os.path.exists(out))
            rc, _, err = _main(accuracy, ["validate", other, "--step_ms=100"])
            self.assertEqual(rc, 2)
            self.assertIn("validate needs runs of two seeds or more", err)


class BatchCrossingTest(unittest.TestCase):
    """scripts/plan/batch_crossing.py: seed 002's finding simulated."""

    def test_one_node_against_distributed(self):
        rc, text, err = _main(batch_crossing, ["--batches=128,8192", "--gbit=10",
                                               "--transports=grpc", "--steps=10"])
        self.assertEqual(rc, 0, err)
        rows = [l for l in text.splitlines() if re.match(r"\| \d+ \|", l)]
        self.assertEqual(len(rows), 2, text)
        # At batch 128 one node (t(128) = 4.0 ms of compute, shared memory)
        # moves more than 4 workers of 32 who each pull and push the whole
        # model through 10 Gbit/s NICs; at 8192 the 4 workers' compute
        # (t(2048) = 19.4 ms against t(8192) = 68.5 ms) wins.
        ratio = [float(re.search(r"\(([\d.]+)x\)", r.split("|")[3]).group(1)) for r in rows]
        self.assertLess(ratio[0], 1.0, rows[0])
        self.assertGreater(ratio[1], 1.0, rows[1])
        self.assertIn("grpc at 10 Gbit/s: as fast as one node from global batch 8192", text)

    def test_bad_input(self):
        for argv, msg in ((["--batches=130"], "130 is not a multiple of --workers=4"),
                          (["--model=resnet21"], "--model=resnet21: unknown model"),
                          (["--workers=0"], "must be >= 1")):
            rc, _, err = _main(batch_crossing, argv + ["--steps=5"])
            self.assertEqual(rc, 2, argv)
            self.assertIn(msg, err)


if __name__ == "__main__":
    unittest.main()
