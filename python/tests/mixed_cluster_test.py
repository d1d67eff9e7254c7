"""A mixed cluster: the C++ worker (//worker:worker, model cifar10_tutorial)
and a Python chief (psgd.models.Cifar10Tutorial, the same variables and
layouts in PyTorch) train one model against a real ps_server; the servers'
counters add up exactly to the two workers' pushes."""

import json
import os
import unittest

import torch

import psgd
import psgd.torch
from psgd.models import Cifar10Tutorial, tutorial_loss
from cluster import Cluster


def batches(n=4, batch=8):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(batch, 3, 24, 24, generator=g),
             torch.randint(0, 10, (batch,), generator=g)) for _ in range(n)]


class MixedClusterTest(unittest.TestCase):

    def test_cpp_and_python_workers_train_one_model(self):
        with Cluster("mixed", workers=2, n=2, steps=5, batch=8,
                     model="cifar10_tutorial",
                     data="source: SYNTHETIC synthetic_train_size: 64 "
                          "synthetic_test_size: 16") as c:
            cpp = c.start_cpp_worker(1)
            model = Cifar10Tutorial()
            mine = psgd.torch.train(model, tutorial_loss(model), batches(),
                                    c.config, "worker:0", run_dir=c.run_dir,
                                    log_every=0)
            self.assertEqual(cpp.wait(120), 0, c.log("worker:1"))
            self.assertEqual(c.wait_ps(), [0])
            run = c.summary()
            self.assertEqual(run["final_global_step"], 5)
            with open(os.path.join(c.run_dir, "worker-1.summary.json")) as f:
                theirs = json.load(f)
            pushes = sum(mine["outcomes"].values()) + sum(
                v for k, v in theirs.items() if k.startswith("pushes_"))
            self.assertEqual(run["server_applied"] + run["server_aggregated"]
                             + run["server_dropped_stale"]
                             + run["server_dropped_surplus"], pushes)
            self.assertEqual(run["server_applied"], 5)
            self.assertGreater(theirs["local_steps"], 0)

    def test_a_python_model_unlike_the_registrys_is_refused(self):
        with Cluster("mixed-bad", steps=2, model="cifar10_tutorial",
                     data="source: SYNTHETIC") as c:
            model = Cifar10Tutorial()
            model.register_parameter("extra", torch.nn.Parameter(torch.zeros(3)))
            with self.assertRaisesRegex(psgd.ModelMismatchError, "'extra'"):
                psgd.torch.train(model, tutorial_loss(model), batches(1),
                                 c.config, "worker:0", run_dir=c.run_dir)


if __name__ == "__main__":
    unittest.main()
