#!/usr/bin/python3
"""CIFAR-10 with torchvision's ResNet-18 or MobileNetV2 as workers of a psgd
cluster, written as a PyTorch user writes a training script: a Dataset with
torchvision transforms, a DataLoader with this worker's sampler, and the
training loop in this file (psgd.torch.Worker), or psgd.torch.train with
--train.

    # the servers (or scripts/run/launch.sh CONFIG, with this file as the
    # workers' program:)
    bazel-bin/ps/ps_server --config=configs/torchvision_resnet18.pbtxt --task=ps:0 &
    # one per worker task
    PYTHONPATH=bazel-bin/python/site python3 examples/torchvision_cifar10.py \\
        --config=configs/torchvision_resnet18.pbtxt --task=worker:0

The config's model is "external" (the module's parameters are the
servers' variables). --model=resnet18 (11.2 M parameters), mobilenet_v2
(2.2 M), densenet (DenseNet-121's blocks at growth rate 12, 1.0 M) or
shufflenet_v2 (ShuffleNetV2 1.0x, 1.3 M), adapted to 32x32 images as CIFAR
recipes do: ResNet-18's, DenseNet's and ShuffleNetV2's first convolution
3x3 with stride 1 and no max pooling, MobileNetV2's first convolution with
stride 1. The data is the config's: data { source:
SYNTHETIC } needs no download; CIFAR10 reads the binary files of its dir
(or --data_dir). CIFAR-10's training images are augmented with
torchvision's RandomCrop(32, padding=4) and RandomHorizontalFlip.

--clip=C clips the gradients' norm to C before each push (in this file's
loop; with wire { overlap: true } the gradients leave during the backward,
so clip there only without overlap).
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F
import torchvision
from torchvision import transforms

import psgd
import psgd.torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cifar10 import cifar10, synthetic  # noqa: E402  the same files


MODELS = ("resnet18", "mobilenet_v2", "densenet", "shufflenet_v2")


def make_model(name):
    """torchvision's networks adapted to 32x32 images as CIFAR model zoos
    adapt them."""
    if name == "resnet18":
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = torch.nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        m.maxpool = torch.nn.Identity()
        return m
    if name == "mobilenet_v2":
        m = torchvision.models.mobilenet_v2(num_classes=10)
        m.features[0][0].stride = (1, 1)
        return m
    if name == "densenet":
        # DenseNet-121's blocks (6, 12, 24, 16) at CIFAR's growth rate 12
        # (the model zoos' densenet_cifar): a 3x3 stem, no pooling.
        m = torchvision.models.DenseNet(growth_rate=12,
                                        block_config=(6, 12, 24, 16),
                                        num_init_features=24,
                                        num_classes=10)
        m.features.conv0 = torch.nn.Conv2d(3, 24, 3, stride=1, padding=1,
                                           bias=False)
        m.features.pool0 = torch.nn.Identity()
        return m
    if name == "shufflenet_v2":
        m = torchvision.models.shufflenet_v2_x1_0(num_classes=10)
        m.conv1[0] = torch.nn.Conv2d(3, 24, 3, stride=1, padding=1,
                                     bias=False)
        m.maxpool = torch.nn.Identity()
        return m
    raise ValueError(f"model {name!r}: expected one of {', '.join(MODELS)}")


class Images(torch.utils.data.Dataset):
    """(image, label) pairs of tensors, each image through `transform`."""

    def __init__(self, images, labels, transform=None):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.images[i]
        return (self.transform(x) if self.transform else x), self.labels[i]


def evaluator(dataset, batch=500, limit=2000):
    """The chief's evaluation: a dict of metrics over the first `limit`
    test images (all of them at the end is the caller's choice)."""
    def evaluate(module):
        module.eval()
        correct, loss, n = 0, 0.0, 0
        loader = torch.utils.data.DataLoader(
            torch.utils.data.Subset(dataset, range(min(limit, len(dataset)))),
            batch_size=batch)
        with torch.no_grad():
            for x, y in loader:
                out = module(x)
                loss += F.cross_entropy(out, y, reduction="sum").item()
                correct += (out.argmax(1) == y).sum().item()
                n += len(y)
        module.train()
        return {"accuracy": correct / n, "loss": loss / n, "examples": n}
    return evaluate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--task", help="worker:J (or --cluster_from)")
    parser.add_argument("--cluster_from", choices=("slurm", "tf_config"))
    parser.add_argument("--run_dir")
    parser.add_argument("--data_dir",
                        help="CIFAR-10's binary files (default: the "
                             "config's data dir)")
    parser.add_argument("--model", choices=MODELS, default="resnet18")
    parser.add_argument("--train", action="store_true",
                        help="psgd.torch.train instead of this file's loop")
    parser.add_argument("--clip", type=float, default=0.0,
                        help="clip the gradients' norm to this (0: no)")
    parser.add_argument("--log_every", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch's intra-op threads (0: its default)")
    args = parser.parse_args()
    if args.clip < 0 or (args.clip and args.train):
        parser.error("--clip takes a norm > 0, in this file's loop (no --train)")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)  # every worker builds the same initial model
    model = make_model(args.model)
    w = psgd.torch.Worker(model, args.config, args.task,
                          cluster_from=args.cluster_from, run_dir=args.run_dir,
                          log_every=args.log_every)
    s = w.settings
    if s["synthetic"]:
        train = synthetic(s["synthetic_train_size"], s["seed"])
        test = synthetic(s["synthetic_test_size"], s["seed"] + 1)
    else:
        data_dir = args.data_dir or s["data_dir"]
        train, test = cifar10(data_dir, True), cifar10(data_dir, False)
    # Augmented as CIFAR recipes do; the synthetic set as it is (its
    # classes are patterns that a crop would shift).
    augment = None if s["synthetic"] else transforms.Compose(
        [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()])
    dataset = Images(*train, transform=augment)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=w.batch_size, sampler=w.sampler(dataset),
        drop_last=True)
    evaluate = evaluator(Images(*test))
    if args.train:
        summary = w.run(loader, F.cross_entropy, evaluate=evaluate)
    else:
        for x, y in w.batches(loader, evaluate=evaluate):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if args.clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            w.step(loss=loss)
        summary = w.summary
    print(f"{s['task']}: {summary['local_steps']} steps, "
          f"{summary['end_reason']}")


if __name__ == "__main__":
    main()
