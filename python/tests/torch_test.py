"""psgd.torch against real ps_server processes: a small nn.Module trained
by three Python workers (sync 2 of 3, overlap of pushes with the backward;
async), the chief's evaluations and summary, and the run directory read by
scripts/run/compare.py and trace.py unchanged."""

import os
import subprocess
import unittest

import torch

import psgd
import psgd.torch
from cluster import Cluster, run_threads, _SOURCES, separable_batches

DATA = "source: SYNTHETIC"


class Mlp(torch.nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.hidden = torch.nn.Linear(8, 16)
        self.out = torch.nn.Linear(16, 3)
        # Never used by the forward: its gradient goes as zeros.
        self.unused = torch.nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def batches(j, n=6, batch=16):
    return separable_batches(100 + j, n, batch)


def evaluate(module):
    with torch.no_grad():
        x, y = zip(*batches(99, 2))
        x, y = torch.cat(x), torch.cat(y)
        out = module(x)
        loss = torch.nn.functional.cross_entropy(out, y).item()
        return (out.argmax(1) == y).float().mean().item(), loss, len(y)


def worker(c, j):
    return psgd.torch.train(Mlp(j), torch.nn.functional.cross_entropy,
                            batches(j), c.config, f"worker:{j}",
                            run_dir=c.run_dir, evaluate=evaluate, log_every=5)


class BnNet(torch.nn.Module):
    """A convolution with batch norm: running statistics as buffers."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3)))


def image_batches(j, n=6, batch=8):
    g = torch.Generator().manual_seed(200 + j)
    return [(torch.randn(batch, 2, 4, 4, generator=g) * 2 + 1,
             torch.randint(0, 3, (batch,), generator=g)) for _ in range(n)]


def evaluate_images(module):
    module.eval()
    with torch.no_grad():
        x, y = zip(*image_batches(99, 2))
        x, y = torch.cat(x), torch.cat(y)
        out = module(x)
        loss = torch.nn.functional.cross_entropy(out, y).item()
    module.train()
    return (out.argmax(1) == y).float().mean().item(), loss, len(y)


def bn_worker(c, j, nets):
    nets[j] = BnNet(j)
    return psgd.torch.train(nets[j], torch.nn.functional.cross_entropy,
                            image_batches(j), c.config, f"worker:{j}",
                            run_dir=c.run_dir, evaluate=evaluate_images,
                            log_every=5)


class TorchTest(unittest.TestCase):

    def check_run(self, c, summaries):
        self.assertEqual(c.wait_ps(), [0, 0])
        run = c.summary()
        pushes = sum(sum(s["outcomes"].values()) for s in summaries)
        self.assertEqual(run["server_applied"] + run["server_aggregated"]
                         + run["server_dropped_stale"]
                         + run["server_dropped_surplus"], pushes)  # shard 0 decides each
        evals = [l for l in c.lines(0) if l["kind"] == "eval"]
        self.assertTrue(evals and evals[-1]["final"])
        for script in ("compare.py", "trace.py"):
            out = subprocess.run(
                ["/usr/bin/python3", os.path.join(_SOURCES, "scripts", "run", script),
                 c.run_dir, "--out", os.path.join(c.dir, script + ".out")],
                capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
        return run

    def test_sync_two_of_three_with_overlap(self):
        with Cluster("torch-sync", ps=2, workers=3, n=2, steps=12,
                     model="external", data=DATA, training="eval_every: 5",
                     extra="wire { overlap: true }") as c:
            parts = []
            add_part = psgd.Session.add_part
            psgd.Session.add_part = lambda s, n, g: (parts.append(n), add_part(s, n, g))
            try:
                summaries = run_threads([lambda j=j: worker(c, j) for j in range(3)])
            finally:
                psgd.Session.add_part = add_part
            run = self.check_run(c, summaries)
            # The 4 used parameters' gradients went out from their hooks
            # during the backward (the unused one's mark with finish_parts).
            pushes = sum(sum(s["outcomes"].values()) for s in summaries)
            self.assertEqual(len(parts), 4 * pushes)
            self.assertNotIn("unused", parts)
            self.assertEqual(run["final_global_step"], 12)
            self.assertEqual(run["server_applied"], 12)  # shard 0 decides each step
            # N = 2 of 3: one gradient aggregated in each step, the third
            # dropped (with N ignored, all three would be taken).
            self.assertEqual(run["server_aggregated"], 12)

    def test_async_with_a_loss_that_falls(self):
        with Cluster("torch-async", ps=2, mode="ASYNC", workers=2, steps=30,
                     model="external", data=DATA,
                     training="optimizer { kind: SGD learning_rate: 0.1 }") as c:
            summaries = run_threads([lambda j=j: worker(c, j) for j in range(2)])
            run = self.check_run(c, summaries)
            # Async workers may land a push or two past the last step.
            self.assertGreaterEqual(run["final_global_step"], 30)
            losses = [l["loss"] for l in c.lines(1) if l["kind"] == "train"]
            self.assertLess(sum(losses[-5:]) / 5, sum(losses[:5]) / 5)


    def test_batch_norm_statistics_on_the_servers(self):
        for overlap in ("false", "true"):
            with Cluster(f"torch-bn-server-{overlap}", ps=2, workers=2, n=2,
                         steps=6, model="external", data=DATA,
                         training="eval_every: 3",
                         extra=f"wire {{ overlap: {overlap} }}") as c:
                nets = {}
                summaries = run_threads(
                    [lambda j=j: bn_worker(c, j, nets) for j in range(2)])
                self.check_run(c, summaries)
                # Both workers' last pull was the final step: the servers'
                # statistics, the same for both, folded from both workers'
                # batches (momentum 1.0 leaves a batch's own in the buffers
                # only until the pull).
                for name in ("running_mean", "running_var"):
                    a = getattr(nets[0].bn, name)
                    b = getattr(nets[1].bn, name)
                    self.assertTrue(torch.equal(a, b), name)
                    start = torch.zeros(4) if name == "running_mean" \
                        else torch.ones(4)
                    self.assertFalse(torch.equal(a, start), name)
                # 1.0 only while train() ran: the module's own is back.
                self.assertEqual(nets[0].bn.momentum, 0.1)
                self.assertEqual(nets[1].bn.momentum, 0.1)

    def test_a_distributed_sampler_is_told_each_epoch(self):
        # 6 batches of 8 per epoch, 20 steps: epochs 0..3, each in another
        # order (DistributedSampler shuffles by seed + epoch).
        x, y = zip(*image_batches(0, n=6))
        ds = torch.utils.data.TensorDataset(torch.cat(x), torch.cat(y))
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=1, rank=0, shuffle=True, seed=5)
        orders = []
        set_epoch = sampler.set_epoch
        sampler.set_epoch = lambda e: (set_epoch(e), orders.append(list(sampler)))
        loader = torch.utils.data.DataLoader(ds, batch_size=8, sampler=sampler)
        with Cluster("torch-epochs", ps=1, workers=1, steps=20,
                     model="external", data=DATA) as c:
            run_threads([lambda: psgd.torch.train(
                BnNet(0), torch.nn.functional.cross_entropy, loader,
                c.config, "worker:0", run_dir=c.run_dir, log_every=0)])
            self.assertEqual(c.wait_ps(), [0])
        self.assertEqual(sampler.epoch, 3)
        self.assertEqual(len(orders), 4)
        self.assertEqual(len({tuple(o) for o in orders}), 4)

    def test_batch_norm_statistics_local(self):
        with Cluster("torch-bn-local", ps=1, workers=2, n=2, steps=6,
                     model="external", bn="LOCAL", data=DATA) as c:
            nets = {}
            run_threads([lambda j=j: bn_worker(c, j, nets) for j in range(2)])
            self.assertEqual(c.wait_ps(), [0])
            # Each worker's own, moved by its own batches.
            a, b = nets[0].bn.running_mean, nets[1].bn.running_mean
            self.assertFalse(torch.equal(a, b))
            self.assertFalse(torch.equal(a, torch.zeros(4)))
            self.assertEqual(nets[0].bn.momentum, 0.1)


if __name__ == "__main__":
    unittest.main()
