"""The servers hand out the data to psgd.torch workers (data { sharding:
SERVERS }): two Python workers with DataLoaders over
Worker.batch_sampler(), sync 1 of 2 so that each step's second gradient is
surplus and its chunk goes back to the queue, train until the servers'
3 epochs are handed out; ps:0's ledger shows every sample of the three
epochs trained on exactly once (scripts/ledger_check.py). The same with a
resize: a third worker, beyond the two listed (max_workers), joins once
the others have made steps, trains 5 batches and leaves (its loop breaks).
In both the workers record each push's samples (data { record_samples:
true }): the loader's indices, and in the second a dataset's own index
(with_index); the records agree with the ledger (ledger_check.py
--records). The same with DataLoaders of two loader processes each (their
prefetch leases chunks ahead). sampler() is refused in this mode,
batch_sampler() in the other."""

import glob
import os
import subprocess
import sys
import time
import unittest

import torch

import psgd
import psgd.torch
from cluster import Cluster, run_threads, _SOURCES

SAMPLES, BATCH, EPOCHS = 96, 8, 3
LEDGER_CHECK = os.path.join(_SOURCES, "scripts", "ledger_check.py")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def dataset():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(SAMPLES, 4, generator=g)
    return torch.utils.data.TensorDataset(x, x[:, :3].argmax(1))


class IndexedDataset(torch.utils.data.Dataset):
    """Items (x, y, index), as psgd.data.CIFAR10(with_index=True)'s."""
    with_index = True

    def __init__(self):
        self.data = dataset()

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        x, y = self.data[i]
        return x, y, i


def worker(c, j, seen, at_most=None, indexed=False, loader_workers=0):
    net = Net()
    w = psgd.torch.Worker(net, c.config, f"worker:{j}", run_dir=c.run_dir,
                          log_every=0)
    loader = torch.utils.data.DataLoader(
        IndexedDataset() if indexed else dataset(),
        batch_sampler=w.batch_sampler(), num_workers=loader_workers)
    for x, y, *_ in w.batches(loader):
        seen.append(len(y))
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        w.step(loss=loss)
        if at_most is not None and len(seen) >= at_most:
            break  # leaves: its chunks not pushed go back to the queue
    return w.summary


def check_ledger(test, ckpt, run_dir, workers):
    records = sorted(glob.glob(os.path.join(run_dir, "samples-worker-*.jsonl")))
    test.assertEqual(len(records), workers, records)
    out = subprocess.run(
        [sys.executable, LEDGER_CHECK, "--num_samples", str(SAMPLES),
         "--chunk_size", str(BATCH), "--seed", "1",
         "--complete_epochs", str(EPOCHS),
         os.path.join(ckpt, "ledger.jsonl"), "--records", *records],
        capture_output=True, text=True)
    test.assertEqual(out.returncode, 0, out.stdout + out.stderr)
    for e in range(EPOCHS):
        test.assertIn(f"epoch {e}: {SAMPLES} samples, 0 missing, "
                      f"0 repeated", out.stdout)
        test.assertIn(f"epoch {e}: 0 trained-but-not-counted, "
                      f"0 counted-but-not-trained", out.stdout)


class DataServersTest(unittest.TestCase):
    def two_workers(self, name, ps, n, **kwargs):
        """Two workers train until the servers' epochs are handed out; the
        ledger and their records agree. Returns the batch sizes each saw."""
        ckpt = os.path.join(Cluster.tmp(), "ckpt")
        with Cluster(name, ps=ps, workers=2, n=n, batch=BATCH,
                     model="external",
                     training=f"epochs: {EPOCHS}",
                     data=f"source: SYNTHETIC sharding: SERVERS "
                          f"num_samples: {SAMPLES} ledger: true "
                          "record_samples: true",
                     extra=[f'checkpoint {{ dir: "{ckpt}" every_steps: 5 }}'
                            ]) as c:
            seen = [[], []]
            summaries = run_threads(
                [lambda j=j: worker(c, j, seen[j], **kwargs)
                 for j in range(2)], timeout=300)
            self.assertEqual(c.wait_ps(), [0] * ps)
        for s in summaries:
            self.assertEqual(s["end_reason"], "the data ended (epochs done)")
        check_ledger(self, ckpt, c.run_dir, 2)
        return seen

    def test_every_sample_once_an_epoch(self):
        seen = self.two_workers("data-servers", ps=2, n=1)
        # Surplus gradients: their chunks were handed out again, so the
        # workers saw more samples than the three epochs hold.
        self.assertGreater(sum(map(sum, seen)), EPOCHS * SAMPLES)

    def test_a_worker_joins_and_leaves(self):
        ckpt = os.path.join(Cluster.tmp(), "ckpt")
        with Cluster("data-servers-resize", ps=1, workers=2, n=2,
                     batch=BATCH, model="external",
                     training=f"epochs: {EPOCHS} "
                              "replicas_rule: LIVE_MINUS_BACKUPS",
                     data=f"source: SYNTHETIC sharding: SERVERS "
                          f"num_samples: {SAMPLES} ledger: true "
                          "record_samples: true",
                     extra=["max_workers: 3",
                            f'checkpoint {{ dir: "{ckpt}" every_steps: 5 }}'
                            ]) as c:
            seen = [[], [], []]

            def joiner():
                # Once the listed workers have made steps.
                deadline = time.time() + 60
                while len(seen[0]) < 4 and time.time() < deadline:
                    time.sleep(0.01)
                return worker(c, 2, seen[2], at_most=5, indexed=True)

            summaries = run_threads(
                [lambda j=j: worker(c, j, seen[j], indexed=True)
                 for j in range(2)] +
                [joiner], timeout=300)
            self.assertEqual(c.wait_ps(), [0])
        self.assertEqual(len(seen[2]), 5)  # it joined and trained
        self.assertEqual(summaries[2]["end_reason"],
                         "the loop over batches() ended early")
        self.assertGreater(summaries[2]["local_steps"], 0)
        for s in summaries[:2]:
            self.assertEqual(s["end_reason"], "the data ended (epochs done)")
        check_ledger(self, ckpt, c.run_dir, 3)

    def test_loader_workers_lease_ahead(self):
        """DataLoaders with two loader processes each: the main process
        leases chunks ahead (their prefetch), so that several leases of a
        worker are out at once; the records name the samples each batch
        held, by the dataset's own index, as the loader processes read
        them."""
        self.two_workers("data-servers-loaders", ps=1, n=2, indexed=True,
                         loader_workers=2)

    def test_the_wrong_sampler_is_refused(self):
        with Cluster("data-split", ps=1, workers=1, model="external",
                     steps=10, data="source: SYNTHETIC") as c:
            w = psgd.torch.Worker(Net(), c.config, "worker:0",
                                  run_dir=c.run_dir)
            with self.assertRaises(psgd.FailedPreconditionError):
                w.batch_sampler()
            c.stop()
        with Cluster("data-servers-sampler", ps=1, workers=1,
                     model="external", steps=10, batch=BATCH,
                     data=f"source: SYNTHETIC sharding: SERVERS "
                          f"num_samples: {SAMPLES}") as c:
            w = psgd.torch.Worker(Net(), c.config, "worker:0",
                                  run_dir=c.run_dir)
            with self.assertRaises(psgd.FailedPreconditionError):
                w.sampler(dataset())
            c.stop()


if __name__ == "__main__":
    unittest.main()
