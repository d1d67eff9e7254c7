"""Your own training loop through psgd.torch.Worker (batches() and step()),
against real servers: with gradient clipping in a 2-worker sync cluster it
trains to the config's end, and the clipped gradients are what the servers
apply; with the same seed and batches it gives bit for bit the weights that
train() gives (with and without overlap); the servers' learning rate
follows the schedule's warmup; evaluations may return a dict of metrics;
step() out of turn is refused; a loop left early ends the job with what
ended it (a break, an exception's type and text); with overlap, a step whose group pulls
failed ("redo") pushes nothing and its batch comes again."""

import sys
import unittest

import torch

import psgd.torch
from cluster import Cluster, run_threads, separable_batches

DATA = "source: SYNTHETIC"
LR = 0.1


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.hidden = torch.nn.Linear(8, 32)
        self.bn = torch.nn.BatchNorm1d(32)
        self.out = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.hidden(x))))


def batches(seed, n=8, batch=16):
    return separable_batches(seed, n, batch)


def flat(net):
    return torch.cat([p.detach().flatten() for p in net.parameters()])


def own_loop(net, data, config, task, run_dir, *, clip=None, scale=1.0,
             norms=None):
    w = psgd.torch.Worker(net, config, task, run_dir=run_dir, log_every=0)
    for x, y in w.batches(data):
        loss = torch.nn.functional.cross_entropy(net(x), y) * scale
        loss.backward()
        if clip is not None:
            n = torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
            if norms is not None:
                norms.append(float(n))
        w.step(loss=loss)
    return w.summary


class OwnLoopTest(unittest.TestCase):
    def test_clipping_in_two_workers(self):
        steps = 12
        nets = [Net(), Net()]
        start = flat(nets[0]).clone()
        norms = [[], []]
        with Cluster("own-loop-clip", ps=1, workers=2, steps=steps,
                     model="external", data=DATA,
                     training=f"optimizer {{ kind: SGD learning_rate: {LR} }}"
                     ) as c:
            summaries = run_threads([
                lambda j=j: own_loop(nets[j], batches(20 + j), c.config,
                                     f"worker:{j}", c.run_dir, clip=1.0,
                                     scale=1000.0, norms=norms[j])
                for j in range(2)])
            self.assertEqual(c.wait_ps(), [0])
            run = c.summary()
        self.assertEqual(run["final_global_step"], steps)
        for s in summaries:
            self.assertEqual(s["end_reason"], f"reached step {steps}")
        # The gradients were far above the clip, so without clipping the
        # weights would move by much more than lr per step.
        self.assertGreater(min(norms[0] + norms[1]), 10.0)
        # SGD of the mean of two gradients each clipped to norm 1: each
        # step moves the weights by at most lr (plus rounding), and the
        # servers' weights that the chief pulled last are where they went.
        moved = float((flat(nets[0]) - start).norm())
        self.assertGreater(moved, 0.0)
        self.assertLessEqual(moved, steps * LR * (1 + 1e-4))

    def test_same_weights_as_train(self):
        for overlap in (False, True):
            with self.subTest(overlap=overlap):
                got = {}
                for form in ("train", "own"):
                    net = Net()
                    with Cluster(f"own-loop-{form}-{overlap}", ps=1,
                                 workers=1, steps=10, model="external",
                                 data=DATA,
                                 training="optimizer { kind: ADAM "
                                          "learning_rate: 0.01 }",
                                 extra=f"wire {{ overlap: "
                                       f"{str(overlap).lower()} }}") as c:
                        if form == "train":
                            fn = lambda: psgd.torch.train(
                                net, torch.nn.functional.cross_entropy,
                                batches(5), c.config, "worker:0",
                                run_dir=c.run_dir, log_every=0)
                        else:
                            fn = lambda: own_loop(net, batches(5), c.config,
                                                  "worker:0", c.run_dir)
                        summary, = run_threads([fn])
                        self.assertEqual(c.wait_ps(), [0])
                    self.assertEqual(summary["final_global_step"], 10)
                    got[form] = {n: t.detach().clone()
                                 for n, t in net.state_dict().items()}
                for n in got["train"]:
                    self.assertTrue(torch.equal(got["train"][n],
                                                got["own"][n]), n)

    def test_learning_rate_and_evaluations_as_dicts(self):
        net = Net()
        lrs = []

        def evaluate(module):
            return {"accuracy": 0.25, "loss": 1.5, "examples": 7,
                    "other": 3.0}

        with Cluster("own-loop-lr", ps=1, workers=1, steps=6,
                     model="external", data=DATA,
                     training="eval_every: 2 optimizer { kind: SGD "
                              "learning_rate: 0.1 schedule { warmup_steps: 4 "
                              "warmup_from: 0.5 } }") as c:
            w = psgd.torch.Worker(net, c.config, "worker:0",
                                  run_dir=c.run_dir, log_every=0)

            def loop():
                for x, y in w.batches(batches(2), evaluate=evaluate):
                    lrs.append((w.session.step, w.learning_rate))
                    torch.nn.functional.cross_entropy(net(x), y).backward()
                    w.step()
                return w.summary
            summary, = run_threads([loop])
            self.assertEqual(c.wait_ps(), [0])
            evals = [l for l in c.lines(0) if l["kind"] == "eval"]
        self.assertEqual(summary["end_reason"], "reached step 6")
        # Update t = step + 1 of a warmup over 4 updates from 0.5: 0.625,
        # 0.75, 0.875, then 1 (common/lr_schedule.h).
        want = {0: 0.0625, 1: 0.075, 2: 0.0875, 3: 0.1, 4: 0.1, 5: 0.1}
        self.assertEqual([s for s, _ in lrs], list(range(6)))
        for step, lr in lrs:
            self.assertAlmostEqual(lr, want[step], places=6, msg=step)
        # The chief's evaluations (steps 2, 4 and the final one) took the
        # dict's metrics.
        self.assertEqual([e["step"] for e in evals], [2, 4, 6])
        for e in evals:
            self.assertEqual(e["test_accuracy"], 0.25)
            self.assertEqual(e["examples"], 7)

    def test_step_out_of_turn(self):
        net = Net()
        with Cluster("own-loop-turn", ps=1, workers=1, steps=3,
                     model="external", data=DATA) as c:
            w = psgd.torch.Worker(net, c.config, "worker:0",
                                  run_dir=c.run_dir, log_every=0)
            with self.assertRaises(psgd.FailedPreconditionError):
                w.step()  # no batch yet

            def loop():
                for x, y in w.batches(batches(1)):
                    torch.nn.functional.cross_entropy(net(x), y).backward()
                    w.step()
                    with self.assertRaises(psgd.FailedPreconditionError):
                        w.step()  # a second step for one batch
                return w.summary
            summary, = run_threads([loop])
            self.assertEqual(c.wait_ps(), [0])
        self.assertEqual(summary["end_reason"], "reached step 3")

    def test_a_loop_left_early_ends_the_job_with_what_ended_it(self):
        # A break ends the job at once ("ended early"); an exception out of
        # the loop's body that the program catches ends it with its type
        # and text, by the time the handler runs.
        net = Net()
        with Cluster("own-loop-break", ps=1, workers=1, steps=100,
                     model="external", data=DATA) as c:
            w = psgd.torch.Worker(net, c.config, "worker:0",
                                  run_dir=c.run_dir, log_every=0)
            for k, (x, y) in enumerate(w.batches(batches(1))):
                torch.nn.functional.cross_entropy(net(x), y).backward()
                w.step()
                if k == 2:
                    break
            self.assertEqual(w.summary["end_reason"],
                             "the loop over batches() ended early")
            self.assertEqual(c.wait_ps(), [0])
        with Cluster("own-loop-caught", ps=1, workers=1, steps=100,
                     model="external", data=DATA) as c:
            w = psgd.torch.Worker(net, c.config, "worker:0",
                                  run_dir=c.run_dir, log_every=0)

            def train():
                for k, (x, y) in enumerate(w.batches(batches(1))):
                    torch.nn.functional.cross_entropy(net(x), y).backward()
                    if k == 2:
                        raise ValueError(f"no step for batch {k}")
                    w.step()
            try:
                train()
            except ValueError:
                summary = w.summary  # the job has ended already
            self.assertEqual(summary["end_reason"],
                             "ValueError: no step for batch 2")
            self.assertEqual(c.wait_ps(), [0])
            self.assertEqual(c.summary()["end_reason"],
                             "ValueError: no step for batch 2")
        self.assertIsNone(sys.gettrace())

    def test_a_redone_step_brings_its_batch_again(self):
        # The session says "redo" after the third forward, as after a
        # failed group pull (worker/session/step_overlap_test.cc makes one
        # for real): that batch is yielded again and pushed once.
        steps = 6
        net = Net()
        data = batches(40, n=steps)
        seen = []
        forward_done = psgd.Session.forward_done
        calls = [0]

        def once_redo(session):
            state = forward_done(session)
            calls[0] += 1
            return "redo" if calls[0] == 3 else state

        with Cluster("own-loop-redo", ps=1, workers=1, steps=steps,
                     model="external", data=DATA,
                     extra="wire { overlap: true }") as c:
            psgd.Session.forward_done = once_redo
            try:
                w = psgd.torch.Worker(net, c.config, "worker:0",
                                      run_dir=c.run_dir, log_every=0)
                for x, y in w.batches(data):
                    seen.append(x)
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    loss.backward()
                    w.step(loss=loss)
            finally:
                psgd.Session.forward_done = forward_done
            self.assertEqual(c.wait_ps(), [0])
            run = c.summary()
        self.assertEqual(run["final_global_step"], steps)
        self.assertEqual(len(seen), steps + 1)
        self.assertIs(seen[2], seen[3])  # the redone batch, again
        self.assertEqual([id(x) for x in seen[:3] + seen[4:]],
                         [id(x) for x, _ in data])
        self.assertEqual(w.summary["local_steps"], steps)


if __name__ == "__main__":
    unittest.main()
