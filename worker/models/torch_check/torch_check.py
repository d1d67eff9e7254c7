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

bfloat16 (`--bf16`, for dump_step --backend=cpu:compute=bf16,...): the
convolutions read their inputs rounded to 8 bits of mantissa, and at these
small batches and random weights one step's gradients are ill-conditioned
enough that a bfloat16 step lands 20-70% (of each tensor's largest value)
from float64's, ours and PyTorch's alike, even when the float64 reference
rounds the same inputs as oneDNN does (each flipped rounding cascades
through the batch norms; measured 2026-12-05 on the four CIFAR networks:
gradient cosine 0.74-0.99 against float64, 0.93-0.99 against the emulated
rounding). No fixed tolerance both holds and means something there, so the
bound is PyTorch's own bfloat16 step (float32 weights, bf16 autocast, as its
CPU guides advise) on the same weights and batch: psgd's errors against
float64 may be no larger than PyTorch's with a quarter to spare
(BF16_SLACK), the median over the gradients and running statistics and the
largest of them, and the loss within BF16_SLACK times PyTorch's loss error
or one bfloat16 rounding (2^-9), whichever is larger. The tie check is off
there: bfloat16's rounding moves every value by far more than TIE_MARGIN on
both sides. This catches a convolution in bfloat16 that is wrong (a missing
bias, a pass skipped, a wrong rounding), not one that is 20% less exact.

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

# --bf16: psgd's error against float64 at most this times PyTorch's own
# bfloat16 step's (see the module's docstring); one bfloat16 rounding.
BF16_SLACK = 1.25
BF16_ROUNDING = 2.0**-9


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


def load_network(model, tensors, dtype):
    """The network in `dtype` with dump_step's weights; (net, params) or a
    message naming what differs."""
    net = torch_networks.NETWORKS[model]().to(dtype).train()
    params = dict(net.named_parameters())
    if set(params) != set(tensors['weight']):
        return None, (f"variables differ: only in PyTorch "
                      f"{sorted(set(params) - set(tensors['weight']))}, only "
                      f"in C++ {sorted(set(tensors['weight']) - set(params))}")
    with torch.no_grad():
        for name, p in params.items():
            value = to_torch(name, tensors['weight'][name])
            if tuple(value.shape) != tuple(p.shape):
                return None, f'{name}: shape {value.shape} vs {tuple(p.shape)}'
            p.copy_(torch.from_numpy(np.ascontiguousarray(value)))
    return (net, params), None


def to_torch(name, value):
    # Dense weights: C++ (inputs, outputs), PyTorch (outputs, inputs).
    return value.T if name == 'fc.weight' else value


def train_step(net, params, images, labels, autocast=False):
    """One step's loss and weight decay (the gradients land in params)."""
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
        logits = net(images)
    decay = sum(0.5 * WEIGHT_DECAY * (p * p).sum()
                for p in params.values() if p.dim() > 1)
    loss = F.cross_entropy(logits.to(decay.dtype), labels) + decay
    loss.backward()
    return loss, decay


def step_errors(tensors, scalars, net, params, loss, decay):
    """{what: relative error against this step} of a step's results in
    dump_step's form (tensors, scalars); 'state names' is inf when the
    running statistics' names differ."""
    errors = {
        'loss': abs(scalars['loss'] - loss.item()) / abs(loss.item()),
        'weight_decay':
            abs(scalars['weight_decay'] - decay.item()) / abs(decay.item()),
    }
    for name, p in params.items():
        ours = to_torch(name, tensors['grad'][name])
        errors['grad ' + name] = relative_error(ours,
                                                p.grad.double().numpy())
    buffers = dict(net.named_buffers())
    state = tensors.get('state', {})
    want_state = {n for n in buffers if not n.endswith('num_batches_tracked')}
    if set(state) != want_state:
        errors['state names'] = float('inf')
    for name in sorted(want_state & set(state)):
        errors['state ' + name] = relative_error(
            state[name], buffers[name].double().numpy())
    return errors


def as_dump(net, params, loss, decay):
    """A PyTorch step's results in dump_step's form, to measure its errors
    with step_errors."""
    tensors = {
        'grad': {n: to_torch(n, p.grad.double().numpy())
                 for n, p in params.items()},
        'state': {n: b.double().numpy() for n, b in net.named_buffers()
                  if not n.endswith('num_batches_tracked')},
    }
    return tensors, {'loss': loss.item(), 'weight_decay': decay.item()}


def tensor_keys(errors):
    """The gradients' and running statistics' entries of step_errors."""
    return [k for k in errors if k.startswith(('grad ', 'state '))]


def bf16_failures(ours, theirs):
    """--bf16's bounds (module docstring): [(what, error, bound)] broken."""
    failures = []
    loss_bound = BF16_SLACK * max(theirs['loss'], BF16_ROUNDING)
    if not ours['loss'] <= loss_bound:
        failures.append(('loss', ours['loss'], loss_bound))
    if 'state names' in ours:
        failures.append(('state names', float('inf'), 0.0))
    keys = tensor_keys(ours)
    for what, pick in (('median', np.median), ('largest', np.max)):
        mine = float(pick([ours[k] for k in keys]))
        bound = BF16_SLACK * float(pick([theirs[k] for k in keys]))
        if not mine <= bound:
            failures.append((f'{what} gradient or statistic error', mine,
                             bound))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--model', required=True)
    parser.add_argument('--dir', required=True)
    parser.add_argument('--tolerance', type=float, default=1e-4)
    parser.add_argument('--bf16', action='store_true',
                        help='the C++ step computed its convolutions in '
                        'bfloat16: bound its errors by PyTorch\'s own '
                        'bfloat16 step (see above)')
    args = parser.parse_args()
    torch.set_num_threads(2)

    tensors, scalars = read_step(args.dir)
    loaded, problem = load_network(args.model, tensors, DTYPE)
    if problem:
        print(problem)
        return 1
    net, params = loaded
    images = torch.from_numpy(tensors["images"]["-"])
    labels = torch.from_numpy(tensors['labels']['-'].astype(np.int64))
    with TieMonitor() as ties:
        loss, decay = train_step(net, params, images.to(DTYPE), labels)
    if (not args.bf16 and
            min(ties.relu_margin, ties.pool_margin) < TIE_MARGIN):
        print(f'{args.model}: near a tie (ReLU input {ties.relu_margin:.2e} '
              f'from 0, max-pooling gap {ties.pool_margin:.2e}; margin '
              f'{TIE_MARGIN:g}): not a fair batch, draw another')
        return EXIT_NEAR_TIE
    errors = step_errors(tensors, scalars, net, params, loss, decay)
    worst = max(errors.values())
    state_count = sum(1 for k in errors if k.startswith('state '))
    print(f'{args.model}: {len(params)} gradients, {state_count} running '
          f'statistics; loss {scalars["loss"]:.6f} vs {loss.item():.6f}; '
          f'worst relative error {worst:.2e}')
    if args.bf16:
        (bf_net, bf_params), _ = load_network(args.model, tensors,
                                              torch.float32)
        bf_loss, bf_decay = train_step(bf_net, bf_params, images, labels,
                                       autocast=True)
        theirs = step_errors(*as_dump(bf_net, bf_params, bf_loss, bf_decay),
                             net, params, loss, decay)
        keys = tensor_keys(errors)
        for who, e in (('psgd bf16', errors), ('PyTorch bf16 autocast',
                                               theirs)):
            values = [e[k] for k in keys]
            print(f'  {who} against float64: loss {e["loss"]:.2e}, '
                  f'gradients and statistics median {np.median(values):.3g}, '
                  f'largest {max(values):.3g}')
        failures = bf16_failures(errors, theirs)
        for what, error, bound in failures:
            print(f'  FAILED {what}: relative error {error:.3e} > {bound:.3e}')
        return 1 if failures else 0
    failures = [(k, e) for k, e in errors.items() if not e <= args.tolerance]
    for what, error in failures:
        print(f'  FAILED {what}: relative error {error:.3e} > '
              f'{args.tolerance:g}')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
