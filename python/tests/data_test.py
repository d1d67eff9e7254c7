"""psgd.data.CIFAR10 over small binary files written here: the records as
the C++ reader takes them (label byte, then the channels), normalisation,
the index item, the augmentation's shape and flips, and bad files refused
naming them."""

import os
import tempfile
import unittest

import numpy as np
import torch

import psgd.data

TMP = os.environ.get("TEST_TMPDIR", "/tmp")


def write(path, labels, seed=0):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)
    records = np.concatenate(
        [np.array(labels, np.uint8)[:, None], pixels], axis=1)
    records.tofile(path)
    return pixels


class Cifar10Test(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=TMP)
        nested = os.path.join(self.dir, "cifar-10-batches-bin")
        os.makedirs(nested)
        self.pixels = []
        for i in range(1, 6):
            self.pixels.append(write(os.path.join(nested, f"data_batch_{i}.bin"),
                                     [(i + k) % 10 for k in range(3)], seed=i))
        write(os.path.join(nested, "test_batch.bin"), [9, 0], seed=9)

    def test_records_normalised_and_indexed(self):
        d = psgd.data.CIFAR10(self.dir, train=True, with_index=True)
        self.assertEqual(len(d), 15)
        x, y, index = d[4]  # file 2, record 1
        self.assertEqual(index, 4)
        self.assertEqual(int(y), (2 + 1) % 10)
        self.assertEqual(tuple(x.shape), (3, 32, 32))
        raw = torch.from_numpy(self.pixels[1][1].reshape(3, 32, 32)).float()
        want = (raw / 255.0 - torch.tensor(psgd.data.MEAN).view(3, 1, 1)) \
            / torch.tensor(psgd.data.STD).view(3, 1, 1)
        self.assertTrue(torch.allclose(x, want))
        test = psgd.data.CIFAR10(self.dir, train=False)
        self.assertEqual(len(test), 2)
        self.assertEqual(int(test[0][1]), 9)
        self.assertEqual(len(test[0]), 2)

    def test_augmentation_crops_and_flips(self):
        plain = psgd.data.CIFAR10(self.dir, normalize=False)
        aug = psgd.data.CIFAR10(self.dir, normalize=False, augment=True,
                                seed=1)
        image = plain[0][0]

        def crops(img):
            padded = torch.nn.functional.pad(img, (4, 4, 4, 4))
            return [padded[:, i:i + 32, j:j + 32]
                    for i in range(9) for j in range(9)]

        straight, flipped = crops(image), crops(image.flip(2))
        seen = {"straight": 0, "flipped": 0}
        for _ in range(40):
            x, _ = aug[0]
            self.assertEqual(tuple(x.shape), (3, 32, 32))
            # Every item is a crop of the padded image, flipped or not.
            if any(torch.equal(x, c) for c in straight):
                seen["straight"] += 1
            elif any(torch.equal(x, c) for c in flipped):
                seen["flipped"] += 1
            else:
                self.fail("an augmented item is no crop of the image")
        self.assertGreater(seen["straight"], 0, seen)
        self.assertGreater(seen["flipped"], 0, seen)

    def test_bad_files_are_refused_naming_them(self):
        nested = os.path.join(self.dir, "cifar-10-batches-bin")
        bad = os.path.join(nested, "data_batch_3.bin")
        with open(bad, "ab") as f:
            f.write(b"x")
        with self.assertRaises(ValueError) as e:
            psgd.data.CIFAR10(self.dir)
        self.assertIn("data_batch_3.bin", str(e.exception))
        self.assertIn("whole number", str(e.exception))
        write(bad, [3, 12, 4])
        with self.assertRaises(ValueError) as e:
            psgd.data.CIFAR10(self.dir)
        self.assertIn("record 1", str(e.exception))
        self.assertIn("label 12", str(e.exception))
        os.remove(bad)
        with self.assertRaises(FileNotFoundError) as e:
            psgd.data.CIFAR10(self.dir)
        self.assertIn("data_batch_3.bin", str(e.exception))


if __name__ == "__main__":
    unittest.main()
