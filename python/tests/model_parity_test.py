"""psgd.models.Cifar10Tutorial against the C++ workers' cifar10_tutorial
(worker/models, the CPU backend): the same weights and batch give the same
loss and the same gradients, so C++ and Python workers train one model.

Two float32 implementations agree to rounding only where no branch of the
forward is a near tie: a ReLU input near 0, or a max pool's winner near its
runner-up, may go one way in one and the other way in the other, and move
a gradient by much more than rounding. The batch is drawn (seed by seed)
until every such margin, measured in float64, is above TIE_MARGIN; then
the gradients must agree within TOLERANCE of each variable's largest."""

import unittest

import numpy as np
import torch
import torch.nn.functional as F

import _psgd_reference
import psgd.models
from psgd.models import Cifar10Tutorial, tutorial_loss

TIE_MARGIN = 1e-5
TOLERANCE = 1e-5


def tie_margin(model, images):
    """The forward's smallest branch margin in float64: |x| at a ReLU's
    input, and the gap between a max pool window's two largest values
    where the largest is positive (a window of ReLU zeros sends its
    gradient nowhere either way)."""
    margins = []
    functional = psgd.models.F
    relu, max_pool2d = functional.relu, functional.max_pool2d

    def watched_relu(x, *args, **kwargs):
        margins.append(x.abs().min().item())
        return relu(x, *args, **kwargs)

    def watched_pool(x, kernel, stride, *args, **kwargs):
        windows = x.unfold(2, kernel, stride).unfold(3, kernel, stride)
        top = windows.flatten(-2).topk(2, dim=-1).values
        gap = (top[..., 0] - top[..., 1])[top[..., 0] > 0]
        if gap.numel():
            margins.append(gap.min().item())
        return max_pool2d(x, kernel, stride, *args, **kwargs)

    double = Cifar10Tutorial()
    double.load_state_dict(model.state_dict())
    double = double.double()
    functional.relu, functional.max_pool2d = watched_relu, watched_pool
    try:
        with torch.no_grad():
            double(images.double())
    finally:
        functional.relu, functional.max_pool2d = relu, max_pool2d
    return min(margins)


class ModelParityTest(unittest.TestCase):

    def test_the_tutorial_network_is_the_cpp_one(self):
        model = Cifar10Tutorial(seed=5)
        for seed in range(3, 200):
            torch.manual_seed(seed)
            images = torch.randn(4, 3, 24, 24)
            margin = tie_margin(model, images)
            if margin > TIE_MARGIN:
                break
        self.assertGreater(margin, TIE_MARGIN, "no batch without near ties")
        print(f"batch seed {seed}: smallest branch margin {margin:.3g}")
        labels = torch.tensor([0, 3, 9, 3])
        loss = tutorial_loss(model)(model(images), labels)
        loss.backward()
        weights = {n: p.detach().numpy() for n, p in model.named_parameters()}
        cpp_loss, _, cpp_grads = _psgd_reference.gradients(
            "cifar10_tutorial", weights, images.numpy(),
            labels.numpy().astype(np.int32))
        self.assertAlmostEqual(loss.item(), cpp_loss,
                               delta=TOLERANCE * abs(cpp_loss))
        self.assertEqual(set(cpp_grads), set(weights))
        for n, p in model.named_parameters():
            with self.subTest(n):
                g, want = p.grad.numpy(), cpp_grads[n]
                scale = np.abs(want).max()
                diff = np.abs(g - want).max()
                print(f"{n}: largest difference {diff / scale:.3g} of the "
                      "largest gradient")
                self.assertLess(diff, TOLERANCE * scale)


if __name__ == "__main__":
    unittest.main()
