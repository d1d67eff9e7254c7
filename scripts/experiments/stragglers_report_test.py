"""stragglers_report.py on fabricated runs: a sync run whose steps are
published every 0.1 s (one step of 0.5 s among them) and an async one; the
measured steps/s, gradients/s, percentiles, drops and speedup are exact."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(
    HERE, "stragglers_report.py")
sys.path.insert(0, os.path.dirname(REPORT))
import stragglers_report  # noqa: E402


def write_run(root, name, mode, lines_by_worker, extra=""):
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(f"training {{ mode: {mode} replicas_to_aggregate: 2 {extra} }}\n"
                "emulation { compute { kind: CONSTANT shift_seconds: 0.05 } }\n")
    for j, lines in enumerate(lines_by_worker):
        with open(os.path.join(d, f"worker-{j}.jsonl"), "w") as f:
            for l in lines:
                f.write(json.dumps(dict(l, kind="train", task=f"worker:{j}",
                                        pull_s=0.001, push_s=0.001,
                                        emulated=True)) + "\n")
    return d


class ReportTest(unittest.TestCase):

    def test_sync_and_async_runs(self):
        root = tempfile.mkdtemp()
        # Two workers; step s published at 0.1 s x s, but step 5 took 0.5 s
        # (steps 6.. come 0.4 s later). Worker 0's gradients are applied,
        # worker 1's dropped as surplus after step 2.
        def publish(s):
            return 0.1 * s + (0.4 if s > 5 else 0.0)
        w0 = [{"step": s, "unix_time": publish(s) + 0.05, "step_s": 0.05,
               "outcome": "applied", "staleness": 0,
               "replicas_to_aggregate": 2, "injected_s": 0.0}
              for s in range(0, 21)]
        w1 = [{"step": s, "unix_time": publish(s) + 0.08, "step_s": 0.08,
               "outcome": "aggregated" if s < 3 else "dropped_surplus",
               "staleness": 0, "replicas_to_aggregate": 2,
               "injected_s": 0.01} for s in range(0, 21)]
        sync = write_run(root, "sync", "SYNC", [w0, w1])
        m = stragglers_report.measure(sync, warmup_s=0.0)
        self.assertEqual(m["workers"], 2)
        self.assertTrue(m["emulated"])
        # 20 steps over 2.4 s.
        self.assertAlmostEqual(m["steps_per_s"], 20 / 2.4)
        self.assertAlmostEqual(m["p50"], 0.1)
        self.assertAlmostEqual(m["p99"], 0.5)
        self.assertEqual(m["dropped"], 18)
        self.assertAlmostEqual(m["n_mean"], 2.0)
        self.assertAlmostEqual(m["injected_s_mean"], 0.005)
        # 24 gradients used over the lines' span (0 .. 2.4 + 0.08).
        self.assertAlmostEqual(m["grads_per_s"], 24 / 2.48)

        a0 = [{"step": s, "unix_time": 0.1 * (s + 1), "step_s": 0.1,
               "outcome": "applied", "staleness": s % 3} for s in range(10)]
        asy = write_run(root, "async", "ASYNC", [a0])
        m = stragglers_report.measure(asy, warmup_s=0.0)
        self.assertEqual(m["mode"], "async")
        self.assertAlmostEqual(m["steps_per_s"], 10.0)
        self.assertAlmostEqual(m["p50"], 0.1)
        self.assertEqual(m["staleness_p99"], 2)

        # The command line: the table, the speedup of the b=0 run (1.000).
        out = subprocess.run([sys.executable, REPORT, sync, asy,
                              "--warmup_s=0"], capture_output=True,
                             text=True, check=True).stdout
        self.assertIn("| sync (emulated) | 2 | 2.00 | 8.33 |", out)
        self.assertIn("| async (emulated) | 1 |", out)

    def test_a_run_without_lines_is_named(self):
        root = tempfile.mkdtemp()
        empty = write_run(root, "empty", "SYNC", [[]])
        r = subprocess.run([sys.executable, REPORT, empty],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("empty: no step lines", r.stderr)


if __name__ == "__main__":
    unittest.main()
