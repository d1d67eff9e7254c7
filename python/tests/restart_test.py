"""A ps_server SIGKILLed and started again mid-run under Python workers: it
restores its newest checkpoint, the workers roll the cluster back to it
(a new generation; a gradient computed before the rollback is ROLLED_BACK,
not applied) and the run reaches its last step. The same under psgd.torch
workers with overlap, whose group pulls and pushes in parts meet the dead
server (worker/session/step_overlap.h: a failed group makes the step one to
compute again)."""

import os
import time
import unittest

import numpy as np

import psgd
from cluster import Cluster, PS_SERVER, run_threads

SHAPES = {"w": (64, 8), "b": (8,)}


def train(c, j, outcomes, generations, asleep):
    w = {n: np.zeros(s, np.float32) for n, s in SHAPES.items()}
    s = psgd.Session(c.config, f"worker:{j}", run_dir=c.run_dir, log_every=0)
    s.join(w)
    while not s.stop_reason():
        step = s.step
        asleep[j] = time.monotonic()
        time.sleep(0.02)  # a step long enough for the kill to land mid-run
        o = s.push(step, {n: np.full_like(a, 0.01) for n, a in w.items()})
        outcomes.append(o.outcome)
        s.pull_into(w)
        generations.add(s.generation)
    s.close("done")


def torch_train(c, j, states):
    import torch
    import psgd.torch

    torch.manual_seed(j)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3))
    g = torch.Generator().manual_seed(100 + j)
    data = [(torch.randn(16, 8, generator=g),
             torch.randint(0, 3, (16,), generator=g)) for _ in range(8)]

    def loss_fn(out, y):
        time.sleep(0.02)  # a step long enough for the kill to land mid-run
        return torch.nn.functional.cross_entropy(out, y)

    return psgd.torch.train(model, loss_fn, data, c.config, f"worker:{j}",
                            run_dir=c.run_dir, log_every=0)


class RestartTest(unittest.TestCase):

    def kill_and_restart(self, c, ckpt, ready):
        while not any(n.startswith("step-") for n in
                      (os.listdir(ckpt) if os.path.isdir(ckpt) else [])) \
                or not ready():
            time.sleep(0.001)
        c.procs[1].kill()
        c.procs[1].wait()
        time.sleep(0.5)
        c.procs[1] = c.start(PS_SERVER, "ps:1")

    def test_overlapped_torch_workers_through_a_ps_restart(self):
        ckpt = os.path.join(Cluster.tmp(), "ckpt-torch")
        with Cluster("py-restart-torch", ps=2, workers=2, steps=60,
                     model="external", data="source: SYNTHETIC", extra=[
                         f'checkpoint {{ dir: "{ckpt}" every_steps: 5 }}',
                         "ps_unavailable_timeout_seconds: 60",
                         "wire { overlap: true }"]) as c:
            states = []
            forward_done = psgd.Session.forward_done

            def recording(session):
                state = forward_done(session)
                states.append(state)
                return state

            psgd.Session.forward_done = recording
            try:
                summaries = run_threads(
                    [lambda: torch_train(c, 0, states),
                     lambda: torch_train(c, 1, states),
                     lambda: self.kill_and_restart(
                         c, ckpt, lambda: len(states) >= 20)], timeout=180)
            finally:
                psgd.Session.forward_done = forward_done
            self.assertEqual(c.wait_ps(), [0, 0])
            run = c.summary()
            self.assertGreaterEqual(run["final_global_step"], 60)
            self.assertGreaterEqual(run["ps_rollbacks"], 1)
            self.assertIn("restored", c.log("ps:1"))
            self.assertTrue(set(states) <= {"compute", "stop", "redo"}, states)
            for summary in summaries[:2]:
                self.assertGreaterEqual(summary["final_global_step"], 60)

    def test_a_killed_ps_restarts_and_the_python_workers_roll_back(self):
        ckpt = os.path.join(Cluster.tmp(), "ckpt")
        with Cluster("py-restart", ps=2, workers=2, steps=60, model="external",
                     data="source: SYNTHETIC", extra=[
                         f'checkpoint {{ dir: "{ckpt}" every_steps: 5 }}',
                         "ps_unavailable_timeout_seconds: 60"]) as c:
            outcomes, generations, asleep = [], set(), {}

            def a_push_comes_next():
                # A worker has just begun the sleep before its push, so the
                # kill lands before that push, which meets the dead server
                # and then the rollback. (Killed while both workers were in
                # their pulls, the run had no ROLLED_BACK: once in CI.)
                now = time.monotonic()
                return len(outcomes) >= 20 and any(
                    now - t < 0.005 for t in list(asleep.values()))

            run_threads([lambda: train(c, 0, outcomes, generations, asleep),
                         lambda: train(c, 1, outcomes, generations, asleep),
                         lambda: self.kill_and_restart(
                             c, ckpt, a_push_comes_next)],
                        timeout=180)
            self.assertEqual(c.wait_ps(), [0, 0])
            run = c.summary()
            self.assertGreaterEqual(run["final_global_step"], 60)
            self.assertGreaterEqual(run["ps_rollbacks"], 1)
            self.assertGreater(max(generations), 1)
            # A gradient computed before the rollback did not land: its
            # outcome says so (the purpose of this test).
            self.assertIn(psgd.StepOutcome.ROLLED_BACK, outcomes)
            self.assertIn("restored", c.log("ps:1"))


if __name__ == "__main__":
    unittest.main()
