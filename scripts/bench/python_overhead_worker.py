#!/usr/bin/python3
"""The worker program of scripts/bench/python_overhead.sh: in one process,
the same module trained by the same loop once through psgd.torch (the
loop of examples/torchvision_cifar10.py) and once alone (torch.optim.SGD
on the same DataLoader of the same Dataset), both timed the same way: by
time.perf_counter() at the end of each step, images/s from the end of the
5th step to the end of the last (what happens between steps, the next
batch included, counts on both sides).

Why one process: on a virtual machine the same PyTorch loop runs at a
speed that differs from process to process by as much as 1.8x (55 to 100
images/s for ResNet-18 at batch 32 here) and stays put within one, so two
processes compared are mostly two draws of that. In one process both
sides run on the same module, the same memory and the same threads.

--first=psgd|alone says which goes first (the benchmark alternates it
between rounds). The module's weights are put back after the loop alone,
so psgd's servers start from the same weights either way. Writes one JSON
line to --result: {"psgd_images_per_s", "alone_images_per_s", "first"}.

--block=K (K > 0) interleaves the two sides in blocks of K steps instead:
K steps through psgd.torch, then K of the loop alone on a copy of the
module (its own weights and optimizer, so psgd's weights are never
touched), and so on until psgd's steps are done. Each step is timed from
the end of the one before it on the same side, or from the block's start
(the batch's fetch, and psgd's push and pull, inside either way); the
first SKIPPED steps of each side are left out. A machine whose speed
drifts over a run's seconds (this one moved a round's ratio from 0.88 to
0.99) then slows both sides alike.

    python_overhead_worker.py --config=C --task=worker:0 --model=resnet18 \\
        --threads=2 --steps=30 --first=psgd [--block=5] --result=out.json
"""

import argparse
import copy
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

import psgd.torch

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "examples")
sys.path.insert(0, EXAMPLES)
import torch_cifar10  # noqa: E402  pylint: disable=wrong-import-position
import torchvision_cifar10  # noqa: E402  pylint: disable=wrong-import-position

SKIPPED = 5  # steps left out at the start of each side (warm-up)


def images_per_s(ends, batch):
    if len(ends) <= SKIPPED + 1:
        raise SystemExit(f"python_overhead_worker: {len(ends)} steps made, "
                         f"more than {SKIPPED + 1} needed")
    return batch * (len(ends) - SKIPPED) / (ends[-1] - ends[SKIPPED - 1])


def plain_step(model, dataset, batch):
    """One step of the loop without psgd on `model` (torch.optim.SGD,
    its own shuffled DataLoader, started again when it runs out), as a
    function to call once a step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True,
                                         drop_last=True)
    batches = iter(loader)

    def step():
        nonlocal batches
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        return True

    return step


def alone(model, dataset, batch, steps):
    """The loop without psgd; the module's weights put back afterwards."""
    saved = copy.deepcopy(model.state_dict())
    step = plain_step(model, dataset, batch)
    ends = []
    for _ in range(steps):
        step()
        ends.append(time.perf_counter())
    model.load_state_dict(saved)
    model.zero_grad(set_to_none=True)
    return images_per_s(ends, batch)


def with_psgd(model, w, dataset):
    """examples/torchvision_cifar10.py's loop."""
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=w.batch_size, sampler=w.sampler(dataset),
        drop_last=True)
    ends = []
    for x, y in w.batches(loader):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        w.step(loss=loss)
        ends.append(time.perf_counter())
    return images_per_s(ends, w.batch_size)


def interleaved(model, w, dataset, block, first):
    """Both sides in blocks of `block` steps, `first` first; their images/s
    over the steps after the first SKIPPED of each side."""
    alone_step = plain_step(copy.deepcopy(model), dataset, w.batch_size)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=w.batch_size, sampler=w.sampler(dataset),
        drop_last=True)
    psgd_batches = iter(w.batches(loader))
    times = {"psgd": [], "alone": []}

    def psgd_step():
        try:
            x, y = next(psgd_batches)
        except StopIteration:
            return False
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        w.step(loss=loss)
        return True

    steps = {"psgd": psgd_step, "alone": alone_step}
    order = [first, "alone" if first == "psgd" else "psgd"]
    done = False
    while not done:
        for side in order:
            start = time.perf_counter()
            for _ in range(block):
                if not steps[side]():
                    done = True
                    break
                end = time.perf_counter()
                times[side].append(end - start)
                start = end
            if done:
                break
    rates = {}
    for side, t in times.items():
        kept = t[SKIPPED:]
        if not kept:
            raise SystemExit(f"python_overhead_worker: {len(t)} {side} steps "
                             f"made, more than {SKIPPED} needed")
        rates[side] = w.batch_size * len(kept) / sum(kept)
    return rates["psgd"], rates["alone"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--run_dir")
    p.add_argument("--model", default="resnet18",
                   choices=("resnet20",) + tuple(torchvision_cifar10.MODELS))
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--steps", type=int, required=True,
                   help="the loop alone's steps (psgd's are the config's)")
    p.add_argument("--first", choices=("psgd", "alone"), default="psgd")
    p.add_argument("--block", type=int, default=0,
                   help="steps of each side in turn; 0: one side, then the "
                   "other")
    p.add_argument("--result", required=True)
    p.add_argument("--log_every", type=int, default=0)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = (torch_cifar10.resnet20() if args.model == "resnet20"
             else torchvision_cifar10.make_model(args.model))
    w = psgd.torch.Worker(model, args.config, args.task, run_dir=args.run_dir,
                          log_every=args.log_every)
    s = w.settings
    if not s["synthetic"]:
        raise SystemExit("python_overhead_worker: the config's data must be "
                         "SYNTHETIC")
    dataset = torchvision_cifar10.Images(
        *torch_cifar10.synthetic(s["synthetic_train_size"], s["seed"]))
    if args.block < 0:
        raise SystemExit(f"python_overhead_worker: --block={args.block}: "
                         "expected 0 or more")
    if args.block > 0:
        fast, plain = interleaved(model, w, dataset, args.block, args.first)
    elif args.first == "alone":
        plain = alone(model, dataset, w.batch_size, args.steps)
        fast = with_psgd(model, w, dataset)
    else:
        fast = with_psgd(model, w, dataset)
        plain = alone(model, dataset, w.batch_size, args.steps)
    with open(args.result, "w") as f:
        json.dump({"psgd_images_per_s": fast, "alone_images_per_s": plain,
                   "first": args.first}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
