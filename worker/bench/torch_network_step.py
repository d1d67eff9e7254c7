#!/usr/bin/env python3
"""PyTorch's training-step throughput for a layer-graph network of the registry.

The peer of `compute_bench --model=NAME` for the networks of
worker/models/cifar_networks.h: the same network written in PyTorch
(worker/models/torch_check/torch_networks.py: the same layers, parameter
counts and names), trained as compute_bench trains ours: random 32x32 images
and labels, softmax cross-entropy, Adam (lr 1e-3), float32, batch norm in
training mode. Prints one line ending in images_per_s=X over the timed steps
after the warm-up ones.

  python3 worker/bench/torch_network_step.py --model resnet20 --threads 2
  python3 worker/bench/torch_network_step.py --model resnet20 --channels_last
  python3 worker/bench/torch_network_step.py --model resnet20 --channels_last --bf16_autocast

--channels_last and --bf16_autocast are the two lines PyTorch's CPU
performance guides add (the issue's "PyTorch at its best").

--profile also runs --steps more forward and backward passes under
torch.profiler (the optimizer outside it) and prints each kind of layer's
self CPU time per step ("profile: KIND ms"), in the kinds of compute_bench
--breakdown (conv, batch_norm, relu, add, pool, dense, loss) and the
casts and copies autocast and channels-last add (copy), so that the two
can be set side by side layer kind by layer kind.
"""
import argparse
import collections
import os
import sys
import time

import torch
import torch.nn as nn

# torch_networks.py: in the source tree, or beside this file (the GPU
# bundle's peers/, scripts/gpu/pack_gpu_bundle.sh).
_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
sys.path.insert(0, os.path.join(_here, "..", "models", "torch_check"))
import torch_networks  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True,
                   choices=sorted(torch_networks.NETWORKS))
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--channels_last", action="store_true",
                   help="model and images in torch.channels_last, as "
                   "PyTorch's CPU guides advise")
    p.add_argument("--bf16_autocast", action="store_true",
                   help="forward and loss under torch.autocast(device, "
                   "dtype=torch.bfloat16): bfloat16 mixed precision")
    p.add_argument("--profile", action="store_true",
                   help="then each kind of layer's self CPU time per step "
                   "under torch.profiler (see above)")
    a = p.parse_args()
    if a.threads < 1 or a.batch < 1 or a.steps < 1 or a.warmup < 0:
        p.error("--threads, --batch and --steps must be >= 1, --warmup >= 0")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    model = torch_networks.NETWORKS[a.model]().to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)

    def forward_backward() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16,
                            enabled=a.bf16_autocast):
            loss = loss_fn(model(x), y)
        loss.backward()

    def step() -> None:
        forward_backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__} model={a.model} device={a.device} "
          f"threads={a.threads} batch={a.batch} params={n_params} "
          f"memory_format={'channels_last' if a.channels_last else 'nchw'} "
          f"autocast={'bf16' if a.bf16_autocast else 'none'} "
          f"step_ms={1000 * dt / a.steps:.2f} "
          f"images_per_s={a.batch * a.steps / dt:.1f}")
    if a.profile:
        profile_kinds(forward_backward, opt, a.steps)


# aten operators by the kind of layer they belong to, first match wins
# (compute_bench --breakdown's kinds; "copy": autocast's casts and the
# layout copies).
_KINDS = (
    ("conv", ("convolution", "conv2d")),
    ("batch_norm", ("batch_norm",)),
    ("relu", ("relu", "threshold_backward")),
    ("pool", ("pool",)),
    ("dense", ("addmm", "aten::mm", "linear", "aten::t")),
    ("loss", ("softmax", "nll_loss", "cross_entropy")),
    ("add", ("aten::add",)),
    ("copy", ("aten::to", "_to_copy", "copy_", "contiguous", "clone",
              "empty_like")),
)


def kind_of(name: str) -> str:
    for kind, keys in _KINDS:
        if any(k in name for k in keys):
            return kind
    return "other"


def profile_kinds(forward_backward, opt, steps: int) -> None:
    """Prints each kind's self CPU time per step over `steps` forward and
    backward passes (the optimizer's step runs between them, unprofiled)."""
    from torch.profiler import ProfilerActivity, profile
    totals = collections.Counter()
    for _ in range(steps):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            forward_backward()
        for event in prof.key_averages():
            totals[kind_of(event.key)] += event.self_cpu_time_total
        opt.step()
    total = sum(totals.values())
    for kind, us in totals.most_common():
        print(f"profile: {kind} {us / 1e3 / steps:.3f} ms "
              f"({100.0 * us / max(total, 1):.1f}%)")
    print(f"profile: all {total / 1e3 / steps:.3f} ms")


if __name__ == "__main__":
    main()
