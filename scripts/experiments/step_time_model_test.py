#!/usr/bin/python3
"""Exact checks of step_time_model.py on deterministic cases.

  /usr/bin/python3 scripts/experiments/step_time_model_test.py

Times are dyadic (0.5, 0.125, ...), so that sums of them are exact in
floating point and equalities are asserted as such.
"""
import contextlib
import io
import json
import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_time_model as stm  # noqa: E402

C = 0.5  # seconds of compute


class SyncTest(unittest.TestCase):
    def test_equal_workers(self):
        for M in (1, 4, 16):
            r = stm.simulate("sync", M, compute=f"constant:{C}", steps=50, warmup=5)
            self.assertEqual(r["step_times"], [C] * 50)
            self.assertEqual(r["steps_per_s"], 1 / C)
            self.assertEqual(r["grads_per_s"], M / C)
            self.assertEqual(r["dropped"], 0)
            self.assertEqual(r["arrivals"], 50 * M)
            self.assertEqual(r["per_worker_dropped"], [0] * M)

    def test_one_slow_worker_b0(self):
        r = stm.simulate("sync", 4, compute=f"constant:{C}", slow={0: 3.0}, steps=30, warmup=0)
        self.assertEqual(r["step_times"], [3 * C] * 30)
        self.assertEqual(r["grads_per_s"], 4 / (3 * C))
        self.assertEqual(r["dropped"], 0)

    def test_one_slow_worker_b1(self):
        # N = 3 of 4: the step takes c; worker 0 (3c) is never in phase. Asserted:
        # every step time is c from step 0, and every push of worker 0 over the
        # whole run (warm-up included; its first one at 3c comes from step 0 when
        # the global step is 2 or 3) is dropped as stale; no push is surplus.
        r = stm.simulate("sync", 4, 3, compute=f"constant:{C}", slow="0:3", steps=30, warmup=0)
        self.assertEqual(r["step_times"], [C] * 30)
        self.assertEqual(r["per_worker_aggregated"], [0, 30, 30, 30])
        self.assertEqual(r["per_worker_dropped"][0], r["per_worker_arrivals"][0])
        self.assertEqual(r["per_worker_dropped"][1:], [0, 0, 0])
        self.assertEqual(r["per_worker_arrivals"][0], 10)  # at 3c, 6c, ..., 30c
        self.assertEqual(r["dropped_stale"], 10)
        self.assertEqual(r["dropped_surplus"], 0)
        self.assertEqual(r["grads_per_s"], 3 / C)

    def test_backup_surplus(self):
        # 4 equal workers, N = 3: the 4th push of each step arrives at the same
        # instant as the 3rd, after the step completed: surplus, never stale.
        r = stm.simulate("sync", 4, 3, compute=f"constant:{C}", steps=20, warmup=2)
        self.assertEqual(r["step_times"], [C] * 20)
        self.assertEqual(r["dropped_surplus"], 20)
        self.assertEqual(r["dropped_stale"], 0)
        self.assertEqual(r["dropped_fraction"], 0.25)
        # Whole run: steps 0..20's; the run ends at the publish of step 22, before
        # the surplus push of step 21 that arrives at that instant.
        self.assertEqual(r["per_worker_dropped"], [0, 0, 0, 21])

    def test_transfers_add_to_the_step(self):
        r = stm.simulate("sync", 3, compute=f"constant:{C}", pull_s=0.125, push_s=0.25,
                         steps=10, warmup=1)
        self.assertEqual(r["step_times"], [0.125 + C + 0.25] * 10)
        r = stm.simulate("sync", 3, compute=f"constant:{C}", pull_s=0.125, push_s=0.25,
                         transfer_delay_s=0.0625, steps=10, warmup=1)
        self.assertEqual(r["step_times"], [0.125 + 0.0625 + C + 0.0625 + 0.25] * 10)
        r = stm.simulate("sync", 3, compute=f"constant:{C}", apply_s=0.25, steps=10, warmup=1)
        self.assertEqual(r["step_times"], [C + 0.25] * 10)


class AsyncTest(unittest.TestCase):
    def test_equal_workers(self):
        M = 5
        r = stm.simulate("async", M, compute=f"constant:{C}", steps=40, warmup=1)
        self.assertEqual(r["grads_per_s"], M / C)
        self.assertEqual(r["steps_per_s"], M / C)
        self.assertEqual(r["applied"], 40 * M)
        self.assertEqual(r["dropped"], 0)
        # Steady state (after the first round, whose staleness is 0..M-1): M-1.
        self.assertEqual(set(r["staleness_values"]), {M - 1})
        self.assertEqual(r["push_interval_p99"], C)
        first = stm.simulate("async", M, compute=f"constant:{C}", steps=2, warmup=0)
        self.assertEqual(first["staleness_values"][:M], list(range(M)))
        self.assertEqual(first["staleness_values"][M:], [M - 1] * M)

    def test_ssp_bound_holds_fast_workers(self):
        # bound 0, worker 0 3x slow: a fast worker that pushed once more than the
        # slowest waits in its pull until worker 0 pushes, so every worker pushes
        # once per 3c: applied/s = M/(3c), clocks never more than bound+1 apart.
        M = 4
        r = stm.simulate("async", M, compute=f"constant:{C}", slow={0: 3.0}, staleness_bound=0,
                         steps=30, warmup=2)
        self.assertEqual(r["grads_per_s"], M / (3 * C))
        self.assertEqual(r["per_worker_applied"], [32] * M)
        self.assertEqual(r["ssp_waits"], 3 * 32)
        self.assertEqual(r["dropped"], 0)
        r = stm.simulate("async", M, compute=f"constant:{C}", slow={0: 3.0}, staleness_bound=2,
                         steps=30, warmup=2)
        applied = r["per_worker_applied"]
        self.assertLessEqual(max(applied) - min(applied), 2 + 1)
        self.assertGreater(r["ssp_waits"], 0)
        # Without a bound the fast workers push 3 times as often.
        r = stm.simulate("async", M, compute=f"constant:{C}", slow={0: 3.0}, steps=30, warmup=2)
        self.assertEqual(r["grads_per_s"], (3 * 3 + 1) / (3 * C))

    def test_max_push_staleness_zero(self):
        # All 4 pushes of a round arrive together; the first (worker 0's) is
        # applied with staleness 0; the other 3 are staler than 0 and refused.
        M = 4
        r = stm.simulate("async", M, compute=f"constant:{C}", max_push_staleness=0,
                         steps=25, warmup=1)
        self.assertEqual(r["arrivals"], 25 * M)
        self.assertEqual(r["applied"], 25)
        self.assertEqual(r["refused"], 25 * (M - 1))
        self.assertEqual(r["dropped_fraction"], (M - 1) / M)
        self.assertEqual(r["grads_per_s"], 1 / C)
        self.assertEqual(set(r["staleness_values"]), {0})
        self.assertEqual(r["per_worker_applied"], [26, 0, 0, 0])
        self.assertEqual(r["per_worker_dropped"], [0, 26, 26, 26])


class AdaptiveTest(unittest.TestCase):
    def test_picks_m_minus_1_with_one_slow_worker(self):
        # Warm-up: 5 steps at n_max = M (each 3c). Then T(n) = c for n <= M-1
        # (n/T grows with n) and T(M) >= c, mostly 3c or more (worker 0's
        # offsets, or censored ones that grow): N = M-1 from step 5 on.
        M = 6
        r = stm.simulate("adaptive", M, compute=f"constant:{C}", slow={0: 3.0}, steps=60,
                         warmup=0)
        self.assertEqual(r["n_per_step"], [M] * 5 + [M - 1] * 55)
        self.assertEqual(r["step_times"], [3 * C] * 5 + [C] * 55)

    def test_rule(self):
        # Two steps published at 0 and 10; now = 20.
        publish = [0.0, 10.0]
        offsets = {0: [1.0, 1.0, 3.0], 1: [1.0, 1.0]}
        n, T = stm.choose_n(offsets, publish, 2, 20.0, 1, 4, 20, 0)
        # T(1) = T(2) = 1; T(3) = (3 + 10)/2; T(4) = (20 + 10)/2: n = 2 (larger n at equal T).
        self.assertEqual(T, {1: 1.0, 2: 1.0, 3: 6.5, 4: 15.0})
        self.assertEqual(n, 2)
        # Equal n / T(n) (1/1 and 2/2): the larger n.
        n, _ = stm.choose_n({0: [1.0, 2.0]}, [0.0], 1, 5.0, 1, 2, 20, 0)
        self.assertEqual(n, 2)
        # Warm-up: n_max; the window: only the last W steps count.
        self.assertEqual(stm.choose_n(offsets, publish, 2, 20.0, 1, 4, 20, 3), (4, None))
        n, T = stm.choose_n(offsets, publish, 2, 20.0, 1, 4, 1, 0)
        self.assertEqual(T, {1: 1.0, 2: 1.0, 3: 10.0, 4: 10.0})

    def test_n_bounds(self):
        r = stm.simulate("adaptive", 6, compute=f"constant:{C}", slow={0: 3.0}, n_max=4,
                         n_min=2, steps=20, warmup=0)
        self.assertEqual(r["n_per_step"], [4] * 20)
        self.assertEqual(r["step_times"], [C] * 20)


class SeedTest(unittest.TestCase):
    OPTS = dict(compute="exp:0.25,0.25", stall_p=0.05, stall_s=2.0, tail="pareto:0.01,1.5",
                tail_p=0.1, steps=200, warmup=10)

    def test_same_seed_same_result(self):
        for mode, N in (("sync", 6), ("adaptive", None), ("async", None)):
            a = stm.simulate(mode, 8, N, seed=3, **self.OPTS)
            b = stm.simulate(mode, 8, N, seed=3, **self.OPTS)
            self.assertEqual(a, b)
            c = stm.simulate(mode, 8, N, seed=4, **self.OPTS)
            self.assertNotEqual(a["duration_s"], c["duration_s"])

    def test_stall_probability(self):
        wc = stm.WorkerCompute(stm.Dist("constant:0.055"), stall_p=0.01, stall_s=1.0,
                               rng=random.Random(7))
        draws = [wc.draw() for _ in range(10000)]
        self.assertTrue(50 <= wc.stalls <= 150, wc.stalls)
        self.assertEqual(sum(1 for d in draws if d > 1.0), wc.stalls)
        # In a simulation: one worker, 10000 steps; its time is steps * c + stalls * 1 s.
        r = stm.simulate("sync", 1, compute="constant:0.5", stall_p=0.01, stall_s=1.0,
                         steps=10000, warmup=0, seed=5)
        self.assertTrue(50 <= r["stalls"] <= 150, r["stalls"])
        self.assertEqual(r["draws"], 10000)
        self.assertEqual(r["duration_s"], 10000 * 0.5 + r["stalls"] * 1.0)

    def test_stall_workers_and_slow_only_where_given(self):
        r = stm.simulate("sync", 4, compute=f"constant:{C}", stall_p=1.0, stall_s=1.0,
                         stall_workers=[2], steps=10, warmup=0)
        self.assertEqual(r["stalls"], 10)
        self.assertEqual(r["step_times"], [C + 1.0] * 10)

    def test_samples_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("0.5\n# a comment\n\n0.5\n")
        try:
            r = stm.simulate("sync", 3, compute="samples:" + f.name, steps=5, warmup=0)
            self.assertEqual(r["step_times"], [0.5] * 5)
        finally:
            os.unlink(f.name)


class BadInputTest(unittest.TestCase):
    def check(self, text, **kw):
        kw.setdefault("compute", "constant:1")
        mode = kw.pop("mode", "sync")
        M = kw.pop("M", 4)
        with self.assertRaises(ValueError) as cm:
            stm.simulate(mode, M, **kw)
        self.assertIn(text, str(cm.exception))

    def test_api(self):
        self.check("stall_p (--stall)", stall_p=1.5, stall_s=1.0)
        self.check("stall_p (--stall)", stall_p=-0.1, stall_s=1.0)
        self.check("tail_p (--tail_p)", tail="exp:0,1", tail_p=2)
        self.check("stall_s (--stall)", stall_p=0.5, stall_s=-1.0)
        self.check("push_s (--push_s)", push_s=-0.001)
        self.check("pull_s (--pull_s)", pull_s=-0.001)
        self.check("transfer_delay_s", transfer_delay_s=-1)
        self.check("slow (--slow) factor", slow={0: -2.0})
        self.check("slow (--slow): worker index 4", slow={4: 3.0})
        self.check("stall_workers (--stall_workers): worker index 9", stall_workers=[9])
        self.check("n_max (--n_max) = 5", mode="adaptive", n_max=5)
        self.check("n_min (--n_min)", mode="adaptive", n_min=3, n_max=2)
        self.check("compute (--compute)", compute="constant:-1")
        self.check("compute (--compute)", compute="gauss:1,2")
        self.check("N = 5", N=5)
        self.check("staleness_bound", staleness_bound=1)  # sync has none

    def test_cli(self):
        for argv, flag in ((["--stall=1.5:1"], "--stall"), (["--slow=16:3"], "--slow"),
                           (["--slow=0:-3"], "--slow"), (["--push_s=-1"], "--push_s"),
                           (["--adaptive", "--n_max=17"], "--n_max"),
                           (["--workers=4,16", "--slow=5:2"], "--slow"),
                           (["--backups=-1"], "--backups"), (["--stall=0.1"], "--stall")):
            err = io.StringIO()
            with self.assertRaises(SystemExit) as cm, contextlib.redirect_stderr(err):
                stm.main(["--workers=16", "--steps=5"] + argv if not argv[0].startswith(
                    "--workers") else ["--steps=5"] + argv)
            self.assertEqual(cm.exception.code, 2)
            self.assertIn(flag, err.getvalue(), argv)


class ReportTest(unittest.TestCase):
    def test_cli_table_and_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "out.json")
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                stm.main(["--workers=4", f"--compute=constant:{C}", "--slow=0:3",
                          "--backups=1,4", "--adaptive", "--async", "--staleness_bound=0",
                          "--steps=30", "--warmup=10", f"--json={path}"])
            with open(path) as f:
                rows = {r["setting"]: r for r in json.load(f)["rows"]}
        self.assertEqual(sorted(rows), ["adaptive", "async ssp=0*", "async*", "sync b=0",
                                        "sync b=1"])
        self.assertIn("sync b=4 skipped", out.getvalue())
        self.assertIn("normalized speedup", out.getvalue())
        self.assertEqual(rows["sync b=0"]["normalized_speedup"], 1.0)
        # t(0)/t(1) * N_1/N_0 = 3c/c * 3/4.
        self.assertEqual(rows["sync b=1"]["normalized_speedup"], 3 * 3 / 4)
        self.assertEqual(rows["sync b=1"]["time_p99"], C)
        self.assertEqual(rows["adaptive"]["mean_n"], 3)
        self.assertEqual(rows["async ssp=0*"]["time_kind"], "push_interval")
        self.assertEqual(rows["async ssp=0*"]["time_p50"], 3 * C)


if __name__ == "__main__":
    unittest.main()
