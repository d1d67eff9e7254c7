#!/usr/bin/python3
"""CIFAR-10 with PyTorch workers of a psgd cluster.

    # the servers (or scripts/run/launch.sh configs/torch_resnet20.pbtxt)
    bazel-bin/ps/ps_server --config=configs/torch_resnet20.pbtxt --task=ps:0 &
    bazel-bin/ps/ps_server --config=configs/torch_resnet20.pbtxt --task=ps:1 &
    # one per worker task
    PYTHONPATH=bazel-bin/python/site python3 examples/torch_cifar10.py \\
        --config=configs/torch_resnet20.pbtxt --task=worker:0

--model=resnet20 (config model { name: "external" }): ResNet-20 (He et al.
2016, CIFAR variant: 3 stages of 3 basic blocks, 16/32/64 channels,
0.27 M parameters) on 32x32 images, defined below. --model=tutorial
(config model { name: "cifar10_tutorial" }): the tutorial network of the
C++ workers (psgd.models.Cifar10Tutorial) on 24x24 crops, so that C++ and
Python workers share one cluster.

The data is the config's: data { source: SYNTHETIC } needs no download
(random images of ten separable classes); data { source: CIFAR10 dir: D }
reads CIFAR-10's binary files (scripts/run/get_cifar10.sh); --data_dir=D
reads them from D instead of the config's dir. Each worker reads its share
(every M-th image from J), as the C++ workers do.

--own_loop trains with the loop written in main() (psgd.torch.Worker's
batches() and step(); --clip=C clips the gradients' norm to C) instead of
psgd.torch.train.

Batch-norm running statistics follow the config's
model { batch_norm_statistics }: SERVER (the default) keeps them on the
servers, which fold each push's batch statistics in (the chief evaluates
with the servers' values); LOCAL leaves them on each worker (docs/CLUSTER.md,
"Batch norm").
"""

import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F

import psgd
import psgd.torch
from psgd.models import Cifar10Tutorial, tutorial_loss


# --- ResNet-20 ----------------------------------------------------------------
class BasicBlock(torch.nn.Module):
    """Two 3x3 convolutions with batch norm, and the shortcut (option A of
    the paper: subsampled and zero-padded when the shape changes)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.pad = cout - cin
        self.stride = stride

    def forward(self, x):
        # x: (N, cin, H, W) -> (N, cout, H / stride, W / stride)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.pad:
            s = F.pad(s, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(y + s)


class ResNet(torch.nn.Module):
    """The CIFAR ResNet: a stem, three stages of `blocks` basic blocks and a
    linear classifier. forward: images (N, 3, 32, 32) -> logits (N, 10)."""

    def __init__(self, blocks=3, classes=10):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = torch.nn.BatchNorm2d(16)
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for b in range(blocks):
                layers.append(BasicBlock(cin, cout, stride if b == 0 else 1))
                cin = cout
        self.layers = torch.nn.Sequential(*layers)
        self.fc = torch.nn.Linear(64, classes)
        for m in self.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_out")

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.layers(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def resnet20():
    return ResNet(blocks=3)


# --- data -------------------------------------------------------------------
def synthetic(count, seed):
    """`count` images (3, 32, 32) of ten classes, each class a fixed random
    pattern plus noise; labels (count,)."""
    g = torch.Generator().manual_seed(1234)  # the same classes everywhere
    patterns = torch.randn(10, 3, 32, 32, generator=g)
    g.manual_seed(seed)
    labels = torch.randint(0, 10, (count,), generator=g)
    images = patterns[labels] + 2.0 * torch.randn(count, 3, 32, 32, generator=g)
    return images, labels


def cifar10(data_dir, train):
    """CIFAR-10's binary files: images (N, 3, 32, 32) scaled to zero mean
    and unit variance, labels (N,)."""
    names = ([f"data_batch_{i}.bin" for i in range(1, 6)] if train
             else ["test_batch.bin"])
    missing = [n for n in names if not os.path.isfile(os.path.join(data_dir, n))]
    if missing:
        raise SystemExit(f"torch_cifar10.py: {data_dir} lacks CIFAR-10's "
                         f"{', '.join(missing)} (scripts/run/get_cifar10.sh, "
                         "or --data_dir)")
    raw = np.concatenate([np.fromfile(os.path.join(data_dir, n), np.uint8)
                          .reshape(-1, 3073) for n in names])
    labels = torch.from_numpy(raw[:, 0].astype(np.int64))
    images = torch.from_numpy(raw[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32))
    images = (images - images.mean()) / images.std()
    return images, labels


class Batches:
    """This worker's share of a set in shuffled batches, an epoch per pass;
    24x24 crops for the tutorial network (random ones when augmenting)."""

    def __init__(self, images, labels, batch, worker, workers, seed, crop24,
                 augment):
        self.images, self.labels = images[worker::workers], labels[worker::workers]
        self.batch, self.seed, self.crop24, self.augment = batch, seed, crop24, augment
        self.epoch = 0

    def __len__(self):
        return len(self.labels) // self.batch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        order = torch.randperm(len(self.labels), generator=g)
        for i in range(len(self)):
            idx = order[i * self.batch:(i + 1) * self.batch]
            x = self.images[idx]
            if self.augment:
                flip = torch.rand(len(idx), generator=g) < 0.5
                x = torch.where(flip[:, None, None, None], x.flip(3), x)
            if self.crop24:
                dy, dx = ((int(torch.randint(0, 9, (1,), generator=g)),
                           int(torch.randint(0, 9, (1,), generator=g)))
                          if self.augment else (4, 4))
                x = x[:, :, dy:dy + 24, dx:dx + 24]
            yield x.contiguous(), self.labels[idx]


def evaluator(images, labels, crop24, limit=2000):
    images, labels = images[:limit], labels[:limit]
    if crop24:
        images = images[:, :, 4:28, 4:28].contiguous()

    def evaluate(module):
        module.eval()
        correct, loss = 0, 0.0
        with torch.no_grad():
            for i in range(0, len(labels), 500):
                out = module(images[i:i + 500])
                loss += F.cross_entropy(out, labels[i:i + 500], reduction="sum").item()
                correct += (out.argmax(1) == labels[i:i + 500]).sum().item()
        module.train()
        return correct / len(labels), loss / len(labels), len(labels)
    return evaluate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--task", help="worker:J (or --cluster_from)")
    parser.add_argument("--cluster_from", choices=("slurm", "tf_config"))
    parser.add_argument("--slurm_port_base", type=int, default=8888)
    parser.add_argument("--run_dir")
    parser.add_argument("--data_dir",
                        help="CIFAR-10's binary files (data_batch_1.bin ...); "
                             "default: the config's data.dir")
    parser.add_argument("--model", choices=("resnet20", "tutorial"),
                        default="resnet20")
    parser.add_argument("--log_every", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch's intra-op threads (0: its default)")
    parser.add_argument("--own_loop", action="store_true",
                        help="the loop written here (psgd.torch.Worker's "
                             "batches() and step()), not psgd.torch.train")
    parser.add_argument("--clip", type=float, default=0.0,
                        help="--own_loop: clip the gradients' norm to this "
                             "(0: no clipping)")
    args = parser.parse_args()
    if args.clip < 0 or (args.clip and not args.own_loop):
        parser.error("--clip takes a norm > 0, with --own_loop")
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = psgd.Session(args.config, args.task,
                            cluster_from=args.cluster_from,
                            slurm_port_base=args.slurm_port_base).settings
    if settings["synthetic"]:
        train = synthetic(settings["synthetic_train_size"], settings["seed"])
        test = synthetic(settings["synthetic_test_size"], settings["seed"] + 1)
    else:
        data_dir = args.data_dir or settings["data_dir"]
        train = cifar10(data_dir, True)
        test = cifar10(data_dir, False)
    tutorial = args.model == "tutorial"
    torch.manual_seed(settings["seed"])
    model = Cifar10Tutorial(settings["seed"]) if tutorial else resnet20()
    loss = tutorial_loss(model) if tutorial else F.cross_entropy
    data = Batches(*train, settings["batch_size"], settings["worker_index"],
                   settings["num_workers"], settings["seed"], tutorial,
                   augment=not settings["synthetic"])
    if args.own_loop:
        w = psgd.torch.Worker(
            model, args.config, args.task, cluster_from=args.cluster_from,
            slurm_port_base=args.slurm_port_base, run_dir=args.run_dir,
            log_every=args.log_every)
        for x, y in w.batches(data, evaluate=evaluator(*test, tutorial)):
            step_loss = loss(model(x), y)
            step_loss.backward()
            if args.clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            w.step(loss=step_loss)
        summary = w.summary
    else:
        summary = psgd.torch.train(
            model, loss, data, args.config, args.task,
            cluster_from=args.cluster_from,
            slurm_port_base=args.slurm_port_base, run_dir=args.run_dir,
            evaluate=evaluator(*test, tutorial), log_every=args.log_every)
    print(f"{settings['task']}: {summary['local_steps']} steps, "
          f"{summary['end_reason']}")


if __name__ == "__main__":
    main()
