"""Parameters without a gradient, through psgd.torch and real servers
(docs/PS.md, "Parameters without a gradient"): a frozen parameter
(requires_grad=False, used by the forward) and an unused branch stay bit
for bit what they were after 100 steps of momentum SGD with weight decay and
of Adam (with and without overlap), as torch.optim leaves a parameter whose
grad is None; and a push carries fewer bytes than with them trained."""

import unittest

import torch

import psgd.torch
from cluster import Cluster, run_threads, separable_batches

DATA = "source: SYNTHETIC"
STEPS = 100


class Net(torch.nn.Module):
    def __init__(self, freeze):
        super().__init__()
        torch.manual_seed(7)
        self.frozen = torch.nn.Linear(8, 64)   # used, maybe not trained
        self.out = torch.nn.Linear(64, 3)
        self.unused = torch.nn.Linear(64, 64)  # a branch the forward skips
        if freeze:
            for p in self.frozen.parameters():
                p.requires_grad_(False)

    def forward(self, x):
        return self.out(torch.relu(self.frozen(x)))


def batches(n=10, batch=16):
    return separable_batches(3, n, batch)


def train(optimizer, freeze, overlap=False):
    """One worker, STEPS steps; the module after, its values before, and the
    mean bytes a step sent."""
    net = Net(freeze)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    with Cluster(f"frozen-{freeze}-{overlap}", ps=1, workers=1, steps=STEPS,
                 model="external", data=DATA,
                 training=f"optimizer {{ {optimizer} }}",
                 extra=f"wire {{ overlap: {str(overlap).lower()} }}") as c:
        run_threads([lambda: psgd.torch.train(
            net, torch.nn.functional.cross_entropy, batches(), c.config,
            "worker:0", run_dir=c.run_dir, log_every=0)])
        assert c.wait_ps() == [0]
        lines = [l for l in c.lines(0) if l.get("kind") == "train"]
    sent = [l["sent_bytes"] for l in lines if "sent_bytes" in l]
    return net, before, sum(sent) / max(1, len(sent))


class FrozenTest(unittest.TestCase):
    def check_untouched(self, net, before):
        after = dict(net.named_parameters())
        for n in ("frozen.weight", "frozen.bias", "unused.weight",
                  "unused.bias"):
            self.assertTrue(torch.equal(after[n].detach(), before[n]),
                            f"{n} changed")
        self.assertFalse(torch.equal(after["out.weight"].detach(),
                                     before["out.weight"]))

    def test_momentum_with_weight_decay(self):
        net, before, _ = train(
            "kind: MOMENTUM learning_rate: 0.05 momentum: 0.9 "
            "weight_decay: 5e-4", freeze=True)
        self.check_untouched(net, before)

    def test_adam_with_and_without_overlap(self):
        for overlap in (False, True):
            with self.subTest(overlap=overlap):
                net, before, _ = train("kind: ADAM learning_rate: 0.01",
                                       freeze=True, overlap=overlap)
                self.check_untouched(net, before)

    def test_fewer_bytes_than_trained(self):
        opt = "kind: SGD learning_rate: 0.05"
        _, _, frozen = train(opt, freeze=True)
        _, _, trained = train(opt, freeze=False)
        # Trained: every parameter but the unused branch. Frozen: `out` only.
        # (The unused branch is marked in both.)
        self.assertGreater(frozen, 0)
        self.assertLess(frozen, trained)
        # Whatever else a step sends, the frozen layer's 8x64+64 floats are
        # not among them.
        self.assertGreaterEqual(trained - frozen, (8 * 64 + 64) * 4)


if __name__ == "__main__":
    unittest.main()
