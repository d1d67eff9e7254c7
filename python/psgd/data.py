"""psgd.data: CIFAR-10's binary files as a torch Dataset, the same files the
C++ worker reads (data { dir }: cifar-10-batches-bin/, data_batch_1.bin ..
data_batch_5.bin and test_batch.bin, each record 1 label byte and 3,072
pixel bytes, channel by channel). torchvision's CIFAR10 reads the Python
pickle version instead.

    train = psgd.data.CIFAR10("data", train=True, augment=True)
    loader = DataLoader(train, batch_size=w.batch_size,
                        sampler=w.sampler(train))

Items are (image, label): a float32 tensor of shape (3, 32, 32), each
channel normalised with CIFAR-10's training mean and standard deviation, and
an int64 label; with with_index=True also the item's index (for a loop that
records what it trained on). augment=True: the standard augmentation, a
random crop of the image padded by 4 pixels on every side and a random
horizontal flip.

A file that is missing, whose size is not whole records, or that holds a
label above 9, is refused with a ValueError (FileNotFoundError for a missing
one) naming the file.
"""

import os

import numpy as np

try:
    import torch
except ImportError as _e:  # psgd.torch says the same, at greater length
    raise ImportError(f"psgd.data needs PyTorch ({_e})") from _e

__all__ = ["CIFAR10"]

RECORD_BYTES = 1 + 3 * 32 * 32
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TEST_FILES = ["test_batch.bin"]


def _directory(root):
    nested = os.path.join(root, "cifar-10-batches-bin")
    if os.path.isfile(os.path.join(nested, TRAIN_FILES[0])) or \
            os.path.isfile(os.path.join(nested, TEST_FILES[0])):
        return nested
    return root


def _read(path):
    try:
        raw = np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no such file (CIFAR-10's binary version: "
            "scripts/run/get_cifar10.sh, or docs/CLUSTER.md)") from None
    if raw.size == 0 or raw.size % RECORD_BYTES:
        raise ValueError(
            f"{path}: {raw.size} bytes is not a whole number of "
            f"{RECORD_BYTES}-byte records")
    records = raw.reshape(-1, RECORD_BYTES)
    labels = records[:, 0].astype(np.int64)
    if labels.max() > 9:
        bad = int(np.argmax(labels > 9))
        raise ValueError(f"{path}: record {bad} (byte {bad * RECORD_BYTES}) "
                         f"has label {labels[bad]}, above 9")
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


class CIFAR10(torch.utils.data.Dataset):
    """CIFAR-10's binary files under `root` (the directory of the .bin
    files, or one whose cifar-10-batches-bin/ holds them)."""

    def __init__(self, root, train=True, *, augment=False, with_index=False,
                 normalize=True, seed=None):
        directory = _directory(root)
        images, labels = [], []
        for name in TRAIN_FILES if train else TEST_FILES:
            x, y = _read(os.path.join(directory, name))
            images.append(x)
            labels.append(y)
        self.images = torch.from_numpy(np.concatenate(images))
        self.labels = torch.from_numpy(np.concatenate(labels))
        self.augment = augment
        self.with_index = with_index
        self.normalize = normalize
        self._mean = torch.tensor(MEAN).view(3, 1, 1)
        self._std = torch.tensor(STD).view(3, 1, 1)
        self._generator = (torch.Generator().manual_seed(seed)
                           if seed is not None else None)

    def __len__(self):
        return self.labels.shape[0]

    def __getitem__(self, index):
        x = self.images[index].float().div_(255.0)
        if self.normalize:
            x = (x - self._mean) / self._std
        if self.augment:
            padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
            i, j = torch.randint(0, 9, (2,), generator=self._generator)
            x = padded[:, i:i + 32, j:j + 32]
            if torch.rand((), generator=self._generator) < 0.5:
                x = x.flip(2)
        y = self.labels[index]
        return (x, y, index) if self.with_index else (x, y)
