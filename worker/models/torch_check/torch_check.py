"""Checks one training step of the C++ engine against PyTorch.

Reads what dump_step wrote (manifest.tsv, step.bin), rebuilds the network in
PyTorch (torch_networks.py) in float64 with the same weights, runs one
training step on the same batch, and compares at `--tolerance` relative to
each tensor's largest value: the loss (cross-entropy + weight decay), every
gradient, and every batch norm's running mean and variance after the step.

Ties and kinks: a ReLU input or a max-pooling window within float32 rounding
of a tie can go either way in the C++ float32 step, and one flip moves a
gradient by ~1e-3. As worker/gpu/tests/gpu_model_test.cc does below its tie batch,
the batches are small enough that this is unlikely, and here it is also
checked: the float64 forward records every ReLU input's distance from 0 and
every max-pooling window's gap between its two largest values (windows whose
maximum is 0 follow a ReLU and carry no gradient); when one is below
TIE_MARGIN the batch is not a fair test and the script exits with
EXIT_NEAR_TIE, so that torch_check_test.sh draws another (dump_step --seed).
Both sides send a window's gradient to its first maximum. (The C++ batch
norm sums its statistics in double for the same reason: oneDNN's float32
sums moved outputs near zero by ~1e-6.)

Exits 0 when everything agrees, 1 otherwise (each tensor's error printed).
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_networks  # noqa: E402

# worker/models/cifar_networks.h: kCifarWeightDecay, on conv and dense
# weights (every parameter of rank > 1).
WEIGHT_DECAY = 5e-4
# PyTorch computes in float64: the reference is exact up to the C++ side's
# float32 rounding.
DTYPE = torch.float64


# float32 rounding of the C++ forward, with room: values this close to a
# kink or a tie may land on either side. (1e-6 while every convolution was a
# direct sum; Winograd's F(2x2, 3x3), the CPU default, rounds about three
# times more, and wrn_28_10's batch at seed 2, a ReLU input 1.19e-6 from 0,
# flipped. Most batches come within 1e-5 of a kink somewhere, so the margin
# cannot be much wider: BUILD's seeds are fair at 2e-6.)
TIE_MARGIN = 2e-6
EXIT_NEAR_TIE = 3


class TieMonitor:
    """Records, during a forward, how close the network comes to a ReLU kink
    or a max-pooling tie (F.relu and F.max_pool2d wrapped while active)."""

    def __init__(self):
        self.relu_margin = float('inf')
        self.pool_margin = float('inf')

    def __enter__(self):
        self._relu, self._pool = F.relu, F.max_pool2d
        monitor = self

        def relu(x, inplace=False):
            monitor.relu_margin = min(monitor.relu_margin,
                                      x.detach().abs().min().item())
            return monitor._relu(x, inplace=inplace)

        def max_pool2d(x, kernel_size, stride=None, *args, **kwargs):
            stride = stride or kernel_size
            windows = x.detach().unfold(2, kernel_size, stride).unfold(
                3, kernel_size, stride).flatten(-2)
            top = windows.topk(2, dim=-1).values
            gaps = (top[..., 0] - top[..., 1])[top[..., 0] > 0]
            if gaps.numel():
                monitor.pool_margin = min(monitor.pool_margin,
                                          gaps.min().item())
            return monitor._pool(x, kernel_size, stride, *args, **kwargs)

        F.relu, F.max_pool2d = relu, max_pool2d
        return self

    def __exit__(self, *unused):
        F.relu, F.max_pool2d = self._relu, self._pool


def read_step(directory):
    """Returns ({kind: {name: array}}, {scalar name: float})."""
    blob = np.fromfile(os.path.join(directory, 'step.bin'), dtype=np.float32)
    tensors, scalars = {}, {}
    with open(os.path.join(directory, 'manifest.tsv')) as f:
        for line in f:
            kind, name, shape, offset = line.rstrip('\n').split('\t')
            if shape == '-':
                scalars[kind] = float(offset)
                continue
            dims = [int(d) for d in shape.split(',')]
            start = int(offset)
            count = int(np.prod(dims))
            tensors.setdefault(kind, {})[name] = (
                blob[start:start + count].reshape(dims))
    return tensors, scalars


def relative_error(ours, theirs):
    """max |ours - theirs| / max |theirs|."""
    scale = max(float(np.abs(theirs).max()), 1e-30)
    return float(np.abs(ours.astype(np.float64) - theirs).max()) / scale


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--model', required=True)
    parser.add_argument('--dir', required=True)
    parser.add_argument('--tolerance', type=float, default=1e-4)
    args = parser.parse_args()
    torch.set_num_threads(2)

    tensors, scalars = read_step(args.dir)
    net = torch_networks.NETWORKS[args.model]().to(DTYPE).train()
    params = dict(net.named_parameters())
    if set(params) != set(tensors['weight']):
        print('variables differ: only in PyTorch',
              sorted(set(params) - set(tensors['weight'])), 'only in C++',
              sorted(set(tensors['weight']) - set(params)))
        return 1

    def to_torch(name, value):
        # Dense weights: C++ (inputs, outputs), PyTorch (outputs, inputs).
        return value.T if name == 'fc.weight' else value

    with torch.no_grad():
        for name, p in params.items():
            value = to_torch(name, tensors['weight'][name])
            if tuple(value.shape) != tuple(p.shape):
                print(f'{name}: shape {value.shape} vs {tuple(p.shape)}')
                return 1
            p.copy_(torch.from_numpy(np.ascontiguousarray(value)))

    images = torch.from_numpy(tensors["images"]["-"]).to(DTYPE)
    labels = torch.from_numpy(tensors['labels']['-'].astype(np.int64))
    with TieMonitor() as ties:
        logits = net(images)
    if min(ties.relu_margin, ties.pool_margin) < TIE_MARGIN:
        print(f'{args.model}: near a tie (ReLU input {ties.relu_margin:.2e} '
              f'from 0, max-pooling gap {ties.pool_margin:.2e}; margin '
              f'{TIE_MARGIN:g}): not a fair batch, draw another')
        return EXIT_NEAR_TIE
    decay = sum(0.5 * WEIGHT_DECAY * (p * p).sum()
                for p in params.values() if p.dim() > 1)
    loss = F.cross_entropy(logits, labels) + decay
    loss.backward()

    failures = []

    def check(what, error):
        if not error <= args.tolerance:
            failures.append((what, error))
        return error

    worst = 0.0
    worst = max(worst, check('loss', abs(scalars['loss'] - loss.item()) /
                             abs(loss.item())))
    check('weight_decay', abs(scalars['weight_decay'] - decay.item()) /
          abs(decay.item()))
    for name, p in params.items():
        ours = to_torch(name, tensors['grad'][name])
        worst = max(worst, check('grad ' + name,
                                 relative_error(ours, p.grad.numpy())))
    buffers = dict(net.named_buffers())
    state = tensors.get('state', {})
    want_state = {n for n in buffers if not n.endswith('num_batches_tracked')}
    if set(state) != want_state:
        failures.append(('state names', float('inf')))
    for name in sorted(want_state & set(state)):
        worst = max(worst, check('state ' + name,
                                 relative_error(state[name],
                                                buffers[name].numpy())))
    print(f'{args.model}: {len(params)} gradients, {len(state)} running '
          f'statistics; loss {scalars["loss"]:.6f} vs {loss.item():.6f}; '
          f'worst relative error {worst:.2e}')
    for what, error in failures:
        print(f'  FAILED {what}: relative error {error:.3e} > '
              f'{args.tolerance:g}')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
