"""Straggler emulation and emulated compute end to end (docs/STRAGGLERS.md):
a sync cluster of C++ workers with emulated compute and one worker slowed,
and a Python worker with an emulated slow link, against a real ps_server.
Each step line records the delay injected into it (injected_s) apart from
the real time, the emulated workers' lines say "emulated", and the runs end
at their step counts. That the delays were waited out is read from the
lines' wall clock (wall_time_s, which the emulator does not write): a
slowed worker's consecutive steps are at least its delays apart. No timing
is asserted beyond those lower bounds, which the worker's own waits make."""


def spacing(lines):
    """The wall-clock gaps between consecutive step lines."""
    t = [l["wall_time_s"] for l in lines]
    return [b - a for a, b in zip(t, t[1:])]

import unittest

import torch

import psgd
import psgd.torch
from cluster import Cluster

EMULATION = ("emulation { compute { kind: CONSTANT shift_seconds: 0.02 } }")
# Worker 2 stalls every step for 50 ms and waits 10 ms around each transfer.
SLOW_WORKER = ("stragglers { workers: 2 stall_probability: 1 "
               "stall_seconds: 0.05 transfer_delay_seconds: 0.01 }")


class StragglersTest(unittest.TestCase):

    def test_emulated_cluster_with_a_straggler_records_its_delays(self):
        with Cluster("stragglers", workers=3, n=2, steps=12, batch=16,
                     model="resnet20", data="source: SYNTHETIC",
                     extra=[EMULATION, SLOW_WORKER]) as c:
            workers = [c.start_cpp_worker(j) for j in range(3)]
            for j, w in enumerate(workers):
                self.assertEqual(w.wait(180), 0, c.log(f"worker:{j}"))
            self.assertEqual(c.wait_ps(), [0])
            self.assertEqual(c.summary()["final_global_step"], 12)
            self.assertIn("EMULATED compute (constant 0.02 s)",
                          c.log("worker:0"))
            for j in range(3):
                lines = [l for l in c.lines(j) if l["kind"] == "train"]
                self.assertTrue(lines, j)
                for l in lines:
                    self.assertTrue(l.get("emulated"), l)
                    if j == 2:
                        # A stall and two transfers, waited out.
                        self.assertGreaterEqual(l["injected_s"], 0.07 - 1e-6, l)
                        self.assertGreaterEqual(l["compute_s"], 0.05 - 1e-6, l)
                    else:
                        self.assertEqual(l["injected_s"], 0.0, l)
                # Every step of each took its emulated 20 ms of compute;
                # worker 2's also its stall and two transfer delays.
                least = 0.07 if j == 2 else 0.02
                for gap in spacing(lines):
                    self.assertGreaterEqual(gap, least - 1e-3, (j, lines))
            # No evaluation of an emulated model.
            self.assertFalse([l for l in c.lines(0) if l["kind"] == "eval"])

    def test_a_python_worker_waits_out_its_slow_link(self):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Flatten(),
                                    torch.nn.Linear(3 * 8 * 8, 10))
        data = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,)))
                for _ in range(3)]
        with Cluster("stragglers-py", steps=6, batch=4, model="external",
                     data="source: SYNTHETIC",
                     extra=["stragglers { transfer_delay_seconds: 0.02 }"]) as c:
            psgd.torch.train(model, torch.nn.functional.cross_entropy, data,
                             c.config, "worker:0", run_dir=c.run_dir,
                             log_every=0)
            self.assertEqual(c.wait_ps(), [0])
            lines = [l for l in c.lines(0) if l["kind"] == "train"]
            self.assertEqual(len(lines), 6)
            for l in lines:
                self.assertNotIn("emulated", l)
                # Before its push and after its pull.
                self.assertGreaterEqual(l["injected_s"], 0.04 - 1e-6, l)
            for gap in spacing(lines):
                self.assertGreaterEqual(gap, 0.04 - 1e-3, lines)


if __name__ == "__main__":
    unittest.main()
