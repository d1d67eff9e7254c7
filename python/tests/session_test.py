"""psgd.Session against real ps_server processes: sync N of M with a backup
worker, async staleness as the servers record it, a typed refusal (a push
beyond max_push_staleness), variables that are not the chief's, and bad
input refused with a Python exception naming it and nothing applied."""

import collections
import json
import os
import subprocess
import time
import unittest

import numpy as np

import psgd
from cluster import CKPT_TOOL, Cluster, run_threads

SHAPES = {"linear/weights": (12, 3), "linear/biases": (3,)}
DATA = "source: SYNTHETIC"


def weights(seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def session(c, j, config=None):
    return psgd.Session(config or c.config, f"worker:{j}", run_dir=c.run_dir,
                        log_every=0)


def train(c, j, delay=0.0):
    """A worker that pushes constant gradients until the end; its outcomes."""
    w = weights(j)
    s = session(c, j)
    s.join(w)
    outcomes = []
    while not s.stop_reason():
        step, t0 = s.step, time.time()
        time.sleep(delay)
        grads = {n: np.full_like(a, 0.01) for n, a in w.items()}
        try:
            outcomes.append(s.push(step, grads))
            s.pull_into(w)
        except psgd.CancelledError:
            break
        s.record_step(step, loss=1.0, batch_size=4, times=(t0,) * 4 + (time.time(),))
    s.close("done")
    return outcomes


def chief_live(c):
    """Whether ps:0's metrics have counted a live worker yet."""
    path = os.path.join(c.run_dir, "ps-0.jsonl")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return any(json.loads(l).get("live_workers", 0) >= 1
                   for l in f if l.endswith("\n"))


class SessionTest(unittest.TestCase):

    def test_sync_two_of_three_with_a_backup_worker(self):
        with Cluster("py-sync", workers=3, n=2, steps=8, model="external",
                     data=DATA) as c:
            outcomes = run_threads([lambda j=j: train(c, j) for j in range(3)])
            self.assertEqual(c.wait_ps(), [0])
            summary = c.summary()
            pushes = sum(len(o) for o in outcomes)
            kinds = collections.Counter(o.outcome for w in outcomes for o in w)
            self.assertLessEqual(set(kinds), {
                psgd.StepOutcome.APPLIED, psgd.StepOutcome.AGGREGATED,
                psgd.StepOutcome.DROPPED_STALE, psgd.StepOutcome.DROPPED_SURPLUS})
            self.assertEqual(summary["final_global_step"], 8)
            self.assertEqual(summary["server_applied"], 8)
            # N = 2: every step took two gradients, the first aggregated
            # (with N ignored, all three would be taken).
            self.assertEqual(summary["server_aggregated"], 8)
            self.assertEqual(summary["server_applied"] + summary["server_aggregated"]
                             + summary["server_dropped_stale"]
                             + summary["server_dropped_surplus"], pushes)
            self.assertEqual(kinds[psgd.StepOutcome.APPLIED], 8)
            self.assertEqual(kinds[psgd.StepOutcome.AGGREGATED],
                             summary["server_aggregated"])
            # The run directory's lines, as the C++ worker writes them.
            for j in range(3):
                lines = [l for l in c.lines(j) if l["kind"] == "train"]
                self.assertEqual(len(lines), len(outcomes[j]))
                self.assertEqual([l["outcome"] for l in lines],
                                 [o.outcome.value for o in outcomes[j]])

    def test_async_staleness_as_the_servers_record_it(self):
        with Cluster("py-async", mode="ASYNC", workers=2, steps=20,
                     model="external", data=DATA) as c:
            outcomes = run_threads([lambda: train(c, 0), lambda: train(c, 1, 0.01)])
            self.assertEqual(c.wait_ps(), [0])
            summary = c.summary()
            applied = [o for w in outcomes for o in w
                       if o.outcome == psgd.StepOutcome.APPLIED]
            self.assertEqual(summary["server_applied"], len(applied))
            hist = collections.Counter(o.staleness for o in applied)
            expected = ",".join(f"{k}:{v}" for k, v in sorted(hist.items()))
            self.assertEqual(summary["staleness_histogram_shard0"], expected)

    def test_a_push_beyond_max_push_staleness_is_refused_by_type(self):
        with Cluster("py-refuse", mode="ASYNC", workers=2, steps=50,
                     training="max_push_staleness: 0", model="external",
                     data=DATA) as c:
            w0, w1 = weights(0), weights(1)
            s0, s1 = session(c, 0), session(c, 1)
            run_threads([lambda: s0.join(w0), lambda: s1.join(w1)])
            g = {n: np.full_like(a, 0.01) for n, a in w0.items()}
            stale_step = s1.step
            self.assertEqual(s0.push(s0.step, g).outcome, psgd.StepOutcome.APPLIED)
            refused = s1.push(stale_step, g)
            self.assertEqual(refused.outcome, psgd.StepOutcome.REFUSED_TOO_STALE)
            status = s0.status()[0]
            self.assertEqual((status["applied"], status["refused_too_stale"]), (1, 1))
            s1.close()
            s0.close()

    def test_a_worker_with_other_variables_is_refused_naming_the_first(self):
        # min_workers: 1 lets the chief go on while worker:1 is refused (it
        # then joins with the right variables, which clears its failure).
        with Cluster("py-mismatch", workers=2, steps=3, model="external",
                     data=DATA, training="min_workers: 1") as c:
            chief = session(c, 0)
            other = dict(SHAPES, **{"linear/weights": (12, 4)})

            def refused():
                with self.assertRaises(psgd.ModelMismatchError) as e:
                    session(c, 1).join(weights(1, other))
                return str(e.exception)

            def right():
                return train(c, 1)

            results = run_threads([lambda: chief.join(weights(0)),
                                   lambda: (refused(), right())])
            message = results[1][0]
            self.assertIn("'linear/weights'", message)
            self.assertIn("[12, 4]", message)
            self.assertIn("[12, 3]", message)
            self.assertIsInstance(psgd.ModelMismatchError("x"),
                                  psgd.FailedPreconditionError)
            while not chief.stop_reason():
                step = chief.step
                chief.push(step, {n: np.zeros(s, np.float32) for n, s in SHAPES.items()})
                chief.pull_into()
            chief.close("done")
            self.assertEqual(c.summary()["final_global_step"], 3)

    def test_a_refused_worker_ends_the_job_with_its_reason(self):
        # Every listed worker is needed (min_workers unset): the chief,
        # waiting at step 0 for the others, learns from the servers that
        # worker:1 was refused and why, and fails at once (not after the
        # 5-minute start timeout); the servers shut down.
        with Cluster("py-refused", workers=2, steps=3, model="external",
                     data=DATA) as c:
            chief = session(c, 0)
            other = dict(SHAPES, **{"linear/weights": (12, 4)})

            def refused():
                # The chief has joined and waits: the server's metrics
                # (ps-0.jsonl, a line every 2 s) count it live.
                while not chief_live(c):
                    time.sleep(0.1)
                with self.assertRaises(psgd.ModelMismatchError):
                    session(c, 1).join(weights(1, other))

            def chief_join():
                with self.assertRaises(psgd.FailedPreconditionError) as e:
                    chief.join(weights(0))
                return str(e.exception)

            message = run_threads([chief_join, refused], timeout=60)[0]
            self.assertIn("worker:1 failed", message)
            self.assertIn("'linear/weights'", message)
            self.assertIn("training.min_workers", message)
            status = c.wait_ps(timeout=60)
            self.assertEqual(len(status), 1)

    def test_the_servers_hold_exactly_the_variables_given_to_join(self):
        # PYTHON.md: the servers hold exactly the variables given to join,
        # the running statistics named in `statistics` as statistics; one
        # left out of join stays on the worker. Read from the servers'
        # checkpoint by ckpt_tool, not from psgd.
        ckpt = Cluster.tmp()
        with Cluster("py-joined", steps=3, model="external", data=DATA,
                     extra=f'checkpoint {{ dir: "{ckpt}" every_steps: 1 }}') as c:
            w = dict(weights(0), **{"bn/moving_mean": np.zeros(3, np.float32)})
            kept = {"bn/moving_variance": np.full(3, 7.0, np.float32)}
            s = session(c, 0)
            s.join(w, statistics=["bn/moving_mean"])
            while not s.stop_reason():
                step = s.step
                grads = {n: np.full_like(a, 0.01) for n, a in w.items()}
                grads["bn/moving_mean"] = np.ones(3, np.float32)
                s.push(step, grads)
                s.pull_into(w)
            s.close("done")
            self.assertEqual(c.wait_ps(), [0])
        newest = max(int(d[len("step-"):]) for d in os.listdir(ckpt)
                     if d.startswith("step-"))
        shown = subprocess.run(
            [CKPT_TOOL, "show",
             os.path.join(ckpt, f"step-{newest}", "shard-0-of-1.ckpt")],
            capture_output=True, text=True, check=True).stdout
        held = [l.strip() for l in shown.splitlines() if l.startswith("  ")]
        self.assertEqual(held, ["linear/weights [12, 3]", "linear/biases [3]",
                                "bn/moving_mean [3] (running statistic)"],
                         shown)
        # The statistic folds the pushed batch statistics (never the
        # optimizer): 1 - 0.9^3 after three steps, as the pull brought back.
        np.testing.assert_allclose(w["bn/moving_mean"], 1 - 0.9 ** 3, rtol=1e-6)
        np.testing.assert_array_equal(kept["bn/moving_variance"], 7.0)

    def test_a_model_of_the_registry_is_checked_before_connecting(self):
        with Cluster("py-registry", steps=3, model="cifar10_linear",
                     data=DATA) as c:
            with self.assertRaises(psgd.ModelMismatchError) as e:
                session(c, 0).join(weights(0))
            self.assertIn("'linear/weights' has shape [12, 3]", str(e.exception))
            self.assertIn("[1728, 10]", str(e.exception))

    def test_bad_input_is_refused_and_nothing_applied(self):
        with Cluster("py-bad", steps=2, model="external", data=DATA) as c:
            with self.assertRaisesRegex(psgd.InvalidArgumentError, "worker:7"):
                session(c, 7)
            with self.assertRaisesRegex(ValueError, "worker:7"):
                session(c, 7)
            w = weights(0)
            s = session(c, 0)
            s.join(w)
            good = {n: np.zeros(shape, np.float32) for n, shape in SHAPES.items()}
            bad = {
                "another shape": dict(good, **{"linear/biases": np.zeros(4, np.float32)}),
                "float64": dict(good, **{"linear/weights": np.zeros((12, 3))}),
                "not contiguous": dict(good, **{
                    "linear/weights": np.zeros((3, 12), np.float32).T}),
                "missing": {"linear/weights": good["linear/weights"]},
                "not an array": dict(good, **{"linear/biases": [0.0, 0.0, 0.0]}),
            }
            words = {"another shape": "'linear/biases' has shape [4]",
                     "float64": "'linear/weights' has dtype",
                     "not contiguous": "'linear/weights' is not contiguous",
                     "missing": "1 gradients for 2 variables",
                     "not an array": "'linear/biases' is a <class 'list'>"}
            for what, grads in bad.items():
                with self.subTest(what):
                    with self.assertRaises(psgd.InvalidArgumentError) as e:
                        s.push(s.step, grads)
                    self.assertIn(words[what], str(e.exception))
            with self.assertRaisesRegex(psgd.InvalidArgumentError,
                                        "computed at step 5"):
                s.push(5, good)
            status = s.status()[0]
            self.assertEqual((status["applied"], status["refused"], status["step"]),
                             (0, 0, 0))
            while not s.stop_reason():
                s.push(s.step, good)
                s.pull_into(w)
            s.close()
            self.assertEqual(c.summary()["server_applied"], 2)

    def test_a_wrong_token_is_refused_and_changes_nothing(self):
        with Cluster("py-token", steps=2, model="external", data=DATA,
                     extra='security { token: "right-token" }') as c:
            wrong = c.config_copy('token: "right-token"', 'token: "wrong-token"')
            with self.assertRaises(psgd.UnauthenticatedError) as e:
                session(c, 0, wrong).join(weights(0))
            self.assertIn("token", str(e.exception))
            self.assertIsInstance(e.exception, PermissionError)
            s = session(c, 0)
            s.join(weights(0))
            status = s.status()[0]
            self.assertEqual((status["applied"], status["step"]), (0, 0))
            s.close()


if __name__ == "__main__":
    unittest.main()
