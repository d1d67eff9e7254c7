#!/usr/bin/python3
"""Checks of ledger_check.py: the golden values that ps/state/data_queue_test.cc
checks too (so that the C++ and Python permutations cannot drift), and the
report on fabricated ledgers.

  /usr/bin/python3 scripts/ledger_check_test.py
"""
import contextlib
import io
import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ledger_check as lc  # noqa: E402

# The golden values; ps/state/data_queue_test.cc has the same.
GOLDEN_SEED = 0x0123456789ABCDEF
GOLDEN_EPOCH3 = [19, 8, 16, 0, 17, 6, 14, 4, 12, 18, 7, 9, 13, 2, 15, 1, 10, 3, 11, 5]
GOLDEN_EPOCH4 = [16, 15, 7, 1, 18, 6, 19, 4, 12, 0, 10, 17, 13, 14, 8, 9, 2, 11, 3, 5]
# SplitMix64(7).below(2^63 + 1): 2^64 mod n = 2^63 - 1, so about half the
# draws are rejected (the first two are).
GOLDEN_BELOW = [7392729709960833537, 1529793891446696394, 8483179396677329707,
                7711100304988943181, 6849861940886463535, 6714756187199313381]
# FormatLedgerLine(/*worker=*/3, /*step=*/17, /*generation=*/1, /*epoch=*/3,
# /*index=*/2, samples of chunk 2 of GOLDEN_EPOCH3 with chunk_size 6).
GOLDEN_LINE = '{"epoch":3,"index":2,"worker":3,"step":17,"generation":1,"first":13,"count":6}'


def ledger_line(epoch, index, perm, chunk_size, worker=0, step=-1):
    samples = perm[index * chunk_size:(index + 1) * chunk_size]
    return ('{"epoch":%d,"index":%d,"worker":%d,"step":%d,"generation":0,'
            '"first":%d,"count":%d}' % (epoch, index, worker, step, samples[0], len(samples)))


class GoldenTest(unittest.TestCase):
    def test_splitmix64_reference(self):
        # Vigna's splitmix64.c from state 0.
        r = lc.SplitMix64(0)
        self.assertEqual([r.next() for _ in range(3)],
                         [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F])

    def test_below_rejects_as_the_cpp(self):
        r = lc.SplitMix64(7)
        self.assertEqual([r.below((1 << 63) + 1) for _ in range(6)], GOLDEN_BELOW)

    def test_golden_permutations(self):
        self.assertEqual(lc.epoch_permutation(20, GOLDEN_SEED, 3), GOLDEN_EPOCH3)
        self.assertEqual(lc.epoch_permutation(20, GOLDEN_SEED, 4), GOLDEN_EPOCH4)
        p = lc.epoch_permutation(1000, (1 << 64) - 1, 12345)
        self.assertEqual(p[:5], [169, 488, 162, 940, 725])
        self.assertEqual(sum(i * v for i, v in enumerate(p)), 249038142)

    def test_permutations(self):
        for n in (1, 2, 7, 64, 1000):
            for e in range(3):
                self.assertEqual(sorted(lc.epoch_permutation(n, 99, e)), list(range(n)))
        self.assertNotEqual(lc.epoch_permutation(100, 1, 0), lc.epoch_permutation(100, 1, 1))
        self.assertNotEqual(lc.epoch_permutation(100, 1, 0), lc.epoch_permutation(100, 2, 0))


class CheckTest(unittest.TestCase):
    N, C, SEED = 20, 6, GOLDEN_SEED  # 4 chunks: 6, 6, 6, 2

    def run_check(self, lines, complete_epochs, extra_args=()):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ledger.jsonl")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = lc.main(["--num_samples", str(self.N), "--chunk_size", str(self.C),
                              "--seed", str(self.SEED), "--complete_epochs",
                              str(complete_epochs), *extra_args, path])
            return rc, out.getvalue(), err.getvalue()

    def whole_epochs(self, epochs, rng):
        lines = []
        for e in range(epochs):
            perm = lc.epoch_permutation(self.N, self.SEED, e)
            for i in range(4):
                lines.append(ledger_line(e, i, perm, self.C, worker=rng.randrange(4)))
        rng.shuffle(lines)
        return lines

    def test_golden_line_as_the_cpp_writes_it(self):
        rc, out, _ = self.run_check([GOLDEN_LINE], 0)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out, "epoch 3: 6 samples, 14 missing, 0 repeated\n")

    def test_whole_epochs_in_any_order(self):
        lines = self.whole_epochs(3, random.Random(1))
        rc, out, _ = self.run_check(lines, 3)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.splitlines(), [
            "epoch 0: 20 samples, 0 missing, 0 repeated",
            "epoch 1: 20 samples, 0 missing, 0 repeated",
            "epoch 2: 20 samples, 0 missing, 0 repeated",
        ])

    def test_a_missing_chunk(self):
        perm = lc.epoch_permutation(self.N, self.SEED, 0)
        lines = [ledger_line(0, i, perm, self.C) for i in (0, 1, 3)]
        rc, out, _ = self.run_check(lines, 1)
        self.assertEqual(rc, 1)
        self.assertIn("epoch 0: 14 samples, 6 missing, 0 repeated", out)

    def test_a_repeated_chunk(self):
        perm = lc.epoch_permutation(self.N, self.SEED, 0)
        lines = [ledger_line(0, i, perm, self.C) for i in (0, 1, 2, 3, 3)]
        rc, out, _ = self.run_check(lines, 1)
        self.assertEqual(rc, 1)
        self.assertIn("epoch 0: 22 samples, 0 missing, 2 repeated", out)

    def test_only_the_complete_epochs_must_be_whole(self):
        lines = self.whole_epochs(1, random.Random(2))
        perm1 = lc.epoch_permutation(self.N, self.SEED, 1)
        lines.append(ledger_line(1, 2, perm1, self.C))
        rc, out, _ = self.run_check(lines, 1)
        self.assertEqual(rc, 0, out)
        self.assertIn("epoch 1: 6 samples, 14 missing, 0 repeated", out)
        # An epoch the ledger never mentions but that must be whole.
        rc, out, _ = self.run_check(lines, 3)
        self.assertEqual(rc, 1)
        self.assertIn("epoch 2: 0 samples, 20 missing, 0 repeated", out)

    def test_other_options_are_noticed(self):
        lines = self.whole_epochs(1, random.Random(3))
        self.SEED = GOLDEN_SEED + 1
        rc, out, _ = self.run_check(lines, 1)
        self.assertEqual(rc, 1)
        self.assertIn("written with other options?", out)

    def test_unreadable_lines(self):
        rc, _, err = self.run_check(['{"epoch":0,"index":9}'], 0)
        self.assertEqual(rc, 2)
        self.assertIn("ledger.jsonl:1: chunk (epoch 0, index 9) is out of range", err)
        rc, _, err = self.run_check(['{"epoch":0}'], 0)
        self.assertEqual(rc, 2)
        self.assertIn('"index" is missing', err)
        rc, _, err = self.run_check(["", "not json"], 0)
        self.assertEqual(rc, 2)
        self.assertIn("ledger.jsonl:2: not JSON", err)

    def test_bad_arguments(self):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            lc.main(["--num_samples", "0", "--chunk_size", "1", "--seed", "0", "x"])
        self.assertEqual(e.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
