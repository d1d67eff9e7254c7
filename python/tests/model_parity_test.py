"""psgd.models.Cifar10Tutorial against the C++ workers' cifar10_tutorial
(worker/models, the CPU backend): the same weights and batch give the same
loss and the same gradients, so C++ and Python workers train one model."""

import unittest

import numpy as np
import torch

import _psgd_reference
from psgd.models import Cifar10Tutorial, tutorial_loss


class ModelParityTest(unittest.TestCase):

    def test_the_tutorial_network_is_the_cpp_one(self):
        torch.manual_seed(3)
        model = Cifar10Tutorial(seed=5)
        images = torch.randn(4, 3, 24, 24)
        labels = torch.tensor([0, 3, 9, 3])
        loss = tutorial_loss(model)(model(images), labels)
        loss.backward()
        weights = {n: p.detach().numpy() for n, p in model.named_parameters()}
        cpp_loss, _, cpp_grads = _psgd_reference.gradients(
            "cifar10_tutorial", weights, images.numpy(),
            labels.numpy().astype(np.int32))
        self.assertAlmostEqual(loss.item(), cpp_loss, delta=1e-4 * abs(cpp_loss))
        self.assertEqual(set(cpp_grads), set(weights))
        for n, p in model.named_parameters():
            with self.subTest(n):
                g, want = p.grad.numpy(), cpp_grads[n]
                scale = np.abs(want).max()
                self.assertLess(np.abs(g - want).max(), 1e-3 * scale + 1e-7)


if __name__ == "__main__":
    unittest.main()
