#!/usr/bin/python3
"""The fault matrix's external model (tests/fault_matrix.py): a PyTorch
network with batch norm, trained through psgd.torch as one worker task of a
config with model { name: "external" }. Its data is synthetic and seeded by
the worker's index, so that a restarted worker trains on the same batches;
with --servers_data (the sync cells' data { sharding: SERVERS }) a seeded
synthetic set of the config's 512 training images, of which the servers
hand out the chunks (Worker.batch_sampler).

    fault_matrix_torch_worker.py --config=F --task=worker:J --run_dir=D
        [--servers_data]
"""

import argparse

import torch
import torch.nn.functional as F

import psgd
import psgd.torch


class BnNet(torch.nn.Module):
    """Two convolutions with batch norm, pooled, and a linear layer."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)  # every worker starts from the chief's values
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return self.fc(y.mean((2, 3)))


def batches(worker, batch, n=8):
    g = torch.Generator().manual_seed(1000 + worker)
    patterns = torch.randn(10, 3, 8, 8, generator=torch.Generator().manual_seed(5))
    out = []
    for _ in range(n):
        y = torch.randint(0, 10, (batch,), generator=g)
        out.append((patterns[y] + torch.randn(batch, 3, 8, 8, generator=g), y))
    return out


def training_set(n=512):
    """n images of 10 classes (patterns plus noise), the same in every
    worker: the servers hand out chunks of their indices."""
    g = torch.Generator().manual_seed(77)
    patterns = torch.randn(10, 3, 8, 8, generator=torch.Generator().manual_seed(5))
    y = torch.randint(0, 10, (n,), generator=g)
    return torch.utils.data.TensorDataset(
        patterns[y] + torch.randn(n, 3, 8, 8, generator=g), y)


def evaluate(module):
    module.eval()
    with torch.no_grad():
        x, y = zip(*batches(99, 32, 2))
        x, y = torch.cat(x), torch.cat(y)
        out = module(x)
        loss = F.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).float().mean().item()
    module.train()
    return acc, loss, len(y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--servers_data", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.servers_data:
        w = psgd.torch.Worker(BnNet(), args.config, args.task,
                              run_dir=args.run_dir, log_every=0)
        loader = torch.utils.data.DataLoader(
            training_set(), batch_sampler=w.batch_sampler())
        summary = w.run(loader, F.cross_entropy, evaluate=evaluate)
        print(f"{args.task}: {summary['local_steps']} steps, "
              f"{summary['end_reason']}")
        return
    settings = psgd.Session(args.config, args.task).settings
    summary = psgd.torch.train(
        BnNet(), F.cross_entropy,
        batches(settings["worker_index"], settings["batch_size"]),
        args.config, args.task, run_dir=args.run_dir, evaluate=evaluate,
        log_every=0)
    print(f"{args.task}: {summary['local_steps']} steps, {summary['end_reason']}")


if __name__ == "__main__":
    main()
