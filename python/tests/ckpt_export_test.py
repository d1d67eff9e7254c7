"""`psgd ckpt export --torch` (python/psgd/ckpt.py): a 2-shard sync run of
Python workers keeps checkpoints, one variable large enough that the
servers cut it into row slices on both shards; the run's final checkpoint
exported as a state_dict is what a torch module's load_state_dict takes,
and holds, bit for bit, the weights the workers pulled after the last step
(read by the workers, not by the exporter). Bad sources are refused by name
with exit 2, nothing written."""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import psgd
from cluster import Cluster, CKPT_TOOL, run_threads

# fc.weight: 2 MiB, over the servers' 1 MiB split threshold: two row slices.
SHAPES = {"fc.weight": (512, 1024), "fc.bias": (512,)}


def train(c, j, final):
    w = {n: np.zeros(s, np.float32) for n, s in SHAPES.items()}
    s = psgd.Session(c.config, f"worker:{j}", run_dir=c.run_dir, log_every=0)
    s.join(w)
    rng = np.random.default_rng(j)
    while not s.stop_reason():
        step = s.step
        s.push(step, {n: rng.standard_normal(a.shape).astype(np.float32) * 0.01
                      for n, a in w.items()})
        s.pull_into(w)
    final[j] = {n: a.copy() for n, a in w.items()}
    s.close("done")


class CkptExportTest(unittest.TestCase):
    def psgd(self, *args):
        bin_dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        os.symlink(CKPT_TOOL, os.path.join(bin_dir, "psgd-ckpt"))
        env = dict(os.environ, PATH=bin_dir + ":/usr/bin:/bin")
        return subprocess.run([sys.executable, "-m", "psgd", "ckpt", *args],
                              capture_output=True, text=True, env=env, timeout=120)

    def test_export_is_the_servers_weights(self):
        import torch
        ckpt = os.path.join(Cluster.tmp(), "ckpt")
        with Cluster("ckpt-export", ps=2, workers=2, steps=6, model="external",
                     data="source: SYNTHETIC",
                     extra=[f'checkpoint {{ dir: "{ckpt}" every_steps: 2 }}']) as c:
            final = {}
            run_threads([lambda: train(c, 0, final), lambda: train(c, 1, final)],
                        timeout=180)
            self.assertEqual(c.wait_ps(), [0, 0])
            run_dir = c.run_dir
        # Both workers pulled the same weights after the last step.
        for n in SHAPES:
            self.assertTrue(np.array_equal(final[0][n], final[1][n]), n)
        # The cut variable is in two slices, one on each shard.
        show = subprocess.run([CKPT_TOOL, "show", os.path.join(
            ckpt, "step-6", "shard-0-of-2.ckpt")], capture_output=True, text=True)
        self.assertIn("fc.weight/part_", show.stdout, show.stdout + show.stderr)

        out = os.path.join(Cluster.tmp(), "model.pt")
        r = self.psgd("export", "--torch", run_dir, out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("step 6", r.stdout)
        module = torch.nn.Sequential()
        module.add_module("fc", torch.nn.Linear(1024, 512))
        module.load_state_dict(torch.load(out))  # strict: every key, no other
        sd = module.state_dict()
        for n in SHAPES:
            got = sd[n].numpy()
            self.assertEqual(got.shape, SHAPES[n])
            self.assertTrue(np.array_equal(got.view(np.uint32),
                                           final[0][n].view(np.uint32)), n)
        # The same from the step directory and from a shard's file.
        for source in (os.path.join(ckpt, "step-6"),
                       os.path.join(ckpt, "step-6", "shard-1-of-2.ckpt")):
            again = os.path.join(Cluster.tmp(), "again.pt")
            r = self.psgd("export", "--torch", source, again)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            loaded = torch.load(again)
            for n in SHAPES:
                self.assertTrue(torch.equal(loaded[n], sd[n]), (source, n))

        # Bad sources: named, exit 2, nothing written.
        bad_out = os.path.join(Cluster.tmp(), "bad.pt")
        r = self.psgd("export", "--torch", "/no/such/ckpt", bad_out)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no checkpoint file or directory /no/such/ckpt", r.stderr)
        lonely = os.path.join(Cluster.tmp(), "step-9")
        os.makedirs(lonely)
        os.symlink(os.path.join(ckpt, "step-6", "shard-0-of-2.ckpt"),
                   os.path.join(lonely, "shard-0-of-2.ckpt"))
        r = self.psgd("export", "--torch", lonely, bad_out)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("does not hold every shard's file", r.stderr)
        corrupt = os.path.join(Cluster.tmp(), "step-7")
        os.makedirs(corrupt)
        for i in range(2):
            with open(os.path.join(corrupt, f"shard-{i}-of-2.ckpt"), "wb") as f:
                f.write(b"not a checkpoint")
        r = self.psgd("export", "--torch", corrupt, bad_out)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("shard-0-of-2.ckpt", r.stderr)
        self.assertFalse(os.path.exists(bad_out))


if __name__ == "__main__":
    unittest.main()
