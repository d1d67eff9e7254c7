"""Models written in PyTorch with psgd's variable names and layouts, so that
C++ and Python workers train one model in one cluster (docs/PYTHON.md,
"A mixed cluster").

Cifar10Tutorial is worker/models/cifar10_tutorial_net.cc: TensorFlow's
cifar10 tutorial network on 24x24 crops, its variables as
common/model_variables.cc lists them (config model { name:
"cifar10_tutorial" }):

    conv1/weights  (64, 3, 5, 5)   OIHW     conv1/biases  (64)
    conv2/weights  (64, 64, 5, 5)            conv2/biases  (64)
    local3/weights (2304, 384)  (inputs, outputs)   local3/biases (384)
    local4/weights (384, 192)                local4/biases (192)
    softmax_linear/weights (192, 10)         softmax_linear/biases (10)
"""

import torch
import torch.nn.functional as F

__all__ = ["Cifar10Tutorial", "tutorial_loss"]

# The tutorial's L2 weight decay on local3 and local4 (tf.nn.l2_loss x 0.004).
WEIGHT_DECAY = 0.004


def _truncated_normal(shape, stddev, generator):
    # Redrawn beyond two deviations, as TensorFlow's initializer.
    t = torch.randn(shape, generator=generator) * stddev
    while True:
        bad = t.abs() > 2 * stddev
        if not bad.any():
            return t
        t[bad] = torch.randn(int(bad.sum()), generator=generator) * stddev


class Cifar10Tutorial(torch.nn.Module):
    """The cifar10 tutorial network. forward: images (N, 3, 24, 24) ->
    logits (N, 10). Parameters are named as the servers store them."""

    VARIABLES = [  # name, shape, initializer (stddev, or a constant)
        ("conv1/weights", (64, 3, 5, 5), ("normal", 5e-2)),
        ("conv1/biases", (64,), ("constant", 0.0)),
        ("conv2/weights", (64, 64, 5, 5), ("normal", 5e-2)),
        ("conv2/biases", (64,), ("constant", 0.1)),
        ("local3/weights", (2304, 384), ("normal", 0.04)),
        ("local3/biases", (384,), ("constant", 0.1)),
        ("local4/weights", (384, 192), ("normal", 0.04)),
        ("local4/biases", (192,), ("constant", 0.1)),
        ("softmax_linear/weights", (192, 10), ("normal", 1.0 / 192.0)),
        ("softmax_linear/biases", (10,), ("constant", 0.0)),
    ]

    def __init__(self, seed=1):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        for name, shape, (kind, value) in self.VARIABLES:
            t = (_truncated_normal(shape, value, g) if kind == "normal"
                 else torch.full(shape, value))
            self.register_parameter(name, torch.nn.Parameter(t))
        # LRN as TensorFlow's: depth_radius 4, bias 1, alpha 0.001/9 per
        # element (torch divides alpha by the window), beta 0.75.
        self.norm = torch.nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0)

    def _p(self, name):
        return self._parameters[name]

    @staticmethod
    def _pool(x):
        # 3x3 max pooling, stride 2, TensorFlow's SAME padding (all of it
        # after: 24 -> 12 -> 6).
        return F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 3, 2)

    def forward(self, x):
        # x: (N, 3, 24, 24)
        x = F.relu(F.conv2d(x, self._p("conv1/weights"), self._p("conv1/biases"),
                            padding=2))
        x = self.norm(self._pool(x))                       # (N, 64, 12, 12)
        x = F.relu(F.conv2d(x, self._p("conv2/weights"), self._p("conv2/biases"),
                            padding=2))
        x = self._pool(self.norm(x)).flatten(1)            # (N, 2304)
        x = F.relu(x @ self._p("local3/weights") + self._p("local3/biases"))
        x = F.relu(x @ self._p("local4/weights") + self._p("local4/biases"))
        return x @ self._p("softmax_linear/weights") + self._p("softmax_linear/biases")


def tutorial_loss(model):
    """The tutorial's loss: (logits, labels) -> mean cross-entropy plus the
    weight decay on local3 and local4 (as the C++ model's)."""
    def loss(logits, labels):
        decay = sum(model._p(n).pow(2).sum() / 2
                    for n in ("local3/weights", "local4/weights"))
        return F.cross_entropy(logits, labels) + WEIGHT_DECAY * decay
    return loss
