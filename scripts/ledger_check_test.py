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


def ledger_line(epoch, index, perm, chunk_size, worker=0, step=-1, generation=0):
    samples = perm[index * chunk_size:(index + 1) * chunk_size]
    return ('{"epoch":%d,"index":%d,"worker":%d,"step":%d,"generation":%d,'
            '"first":%d,"count":%d}' % (epoch, index, worker, step, generation,
                                        samples[0], len(samples)))


def record_line(epoch, index, perm, chunk_size, worker=0, step=0, generation=0,
                outcome="applied", samples=None):
    """A worker's sample record (worker/session/sample_records.h)."""
    if samples is None:
        samples = perm[index * chunk_size:(index + 1) * chunk_size]
    return ('{"worker":%d,"step":%d,"generation":%d,"epoch":%d,"index":%d,'
            '"outcome":"%s","samples":[%s]}' % (worker, step, generation, epoch, index,
                                               outcome, ",".join(map(str, samples))))


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

    def test_every_complete_epoch_is_checked(self):
        # Twelve whole epochs but one chunk short in the tenth: not only the
        # first few complete epochs must be whole.
        lines = self.whole_epochs(12, random.Random(5))
        dropped = [x for x in lines if x.startswith('{"epoch":9,"index":1,')]
        self.assertEqual(len(dropped), 1)
        lines.remove(dropped[0])
        rc, out, _ = self.run_check(lines, 12)
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 9: 14 samples, 6 missing, 0 repeated  NOT WHOLE", out)
        rc, out, _ = self.run_check(lines + dropped, 12)
        self.assertEqual(rc, 0, out)

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

    def test_a_repeat_in_the_partial_epoch_fails(self):
        lines = self.whole_epochs(1, random.Random(4))
        perm1 = lc.epoch_permutation(self.N, self.SEED, 1)
        lines += [ledger_line(1, 2, perm1, self.C), ledger_line(1, 2, perm1, self.C)]
        rc, out, _ = self.run_check(lines, 1)
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 1: 12 samples, 14 missing, 6 repeated  REPEATED", out)

    def test_bad_arguments(self):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            lc.main(["--num_samples", "0", "--chunk_size", "1", "--seed", "0", "x"])
        self.assertEqual(e.exception.code, 2)


class RecordsAndShardsTest(unittest.TestCase):
    """--records (the workers' sample records) and several ledgers."""
    N, C, SEED = 20, 6, GOLDEN_SEED  # 4 chunks: 6, 6, 6, 2

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.perm = [lc.epoch_permutation(self.N, self.SEED, e) for e in range(2)]

    def write(self, name, lines):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def run_main(self, args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = lc.main(["--num_samples", str(self.N), "--chunk_size", str(self.C),
                          "--seed", str(self.SEED), *args])
        return rc, out.getvalue(), err.getvalue()

    def epoch0(self):
        """Epoch 0 by two workers: the ledger and each worker's records
        (worker 1's gradient of chunk 3 dropped as surplus first)."""
        p, c = self.perm[0], self.C
        ledger = [ledger_line(0, i, p, c, worker=i % 2, step=i) for i in range(4)]
        rec0 = [record_line(0, i, p, c, worker=0, step=i) for i in (0, 2)]
        rec1 = [record_line(0, 3, p, c, worker=1, step=2, outcome="dropped_surplus"),
                record_line(0, 1, p, c, worker=1, step=1, outcome="aggregated"),
                record_line(0, 3, p, c, worker=1, step=3)]
        return ledger, rec0, rec1

    def test_records_that_agree_with_the_ledger(self):
        ledger, rec0, rec1 = self.epoch0()
        rc, out, err = self.run_main(["--complete_epochs", "1",
                                      self.write("ledger.jsonl", ledger), "--records",
                                      self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(out.splitlines(), [
            "epoch 0: 20 samples, 0 missing, 0 repeated",
            "epoch 0: 0 trained-but-not-counted, 0 counted-but-not-trained",
        ])

    def test_a_missing_record(self):
        ledger, rec0, rec1 = self.epoch0()
        rc, out, _ = self.run_main(["--complete_epochs", "1",
                                    self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1[1:2])])
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 0: 20 samples, 0 missing, 0 repeated\n", out)
        self.assertIn("epoch 0: 0 trained-but-not-counted, 1 counted-but-not-trained"
                      "  NOT AS TRAINED", out)
        self.assertIn("ledger.jsonl:4: chunk 0/3 of worker 1, generation 0, step 3: "
                      "no record\n", out)
        # A record of the chunk from that worker, if only of a dropped
        # gradient, says it trained on those samples.
        rc, out, _ = self.run_main(["--complete_epochs", "1",
                                    self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1[:2])])
        self.assertEqual(rc, 0, out)
        # Worker 1's records missing altogether.
        rc, out, _ = self.run_main(["--complete_epochs", "1", "--records",
                                    self.write("r0", rec0), "--ledger",
                                    self.write("ledger.jsonl", ledger)])
        self.assertEqual(rc, 1, out)
        self.assertIn("0 trained-but-not-counted, 2 counted-but-not-trained", out)
        self.assertIn("chunk 0/1 of worker 1, generation 0, step 1: no record\n", out)

    def test_a_killed_worker_may_miss_one_record(self):
        ledger, rec0, rec1 = self.epoch0()
        # Worker 1 was killed with its push of chunk 3 in flight: counted,
        # never recorded. One such chunk of a killed worker is its to miss.
        args = ["--complete_epochs", "1", self.write("ledger.jsonl", ledger),
                "--records", self.write("r0", rec0),
                self.write("r1", rec1[1:2])]
        rc, out, _ = self.run_main(["--killed", "1"] + args)
        self.assertEqual(rc, 0, out)
        self.assertIn("0 counted-but-not-trained, 1 unrecorded by a killed "
                      "worker\n", out)
        self.assertIn("unrecorded: ", out)
        # Not another worker's, and not two of it.
        rc, out, _ = self.run_main(["--killed", "0"] + args)
        self.assertEqual(rc, 1, out)
        rc, out, _ = self.run_main(["--killed", "1", "--complete_epochs", "1",
                                    self.write("ledger.jsonl", ledger),
                                    "--records", self.write("r0", rec0)])
        self.assertEqual(rc, 1, out)
        self.assertIn("1 counted-but-not-trained, 1 unrecorded by a killed "
                      "worker  NOT AS TRAINED", out)

    def test_chunks_held_when_a_step_limited_run_stopped(self):
        # Epoch 0 lacks chunk 2, epoch 1 is under way. Worker 1 held chunk
        # 0/2 when the run stopped at its step limit: its push of it was
        # dropped after the last step, and it had leased chunk 1/1 ahead
        # and never pushed it. Its records end with both.
        p0, p1, c = self.perm[0], self.perm[1], self.C
        ledger = [ledger_line(0, i, p0, c, worker=0, step=i) for i in (0, 1, 3)]
        ledger.append(ledger_line(1, 0, p1, c, worker=0, step=4))
        rec0 = [record_line(0, i, p0, c, worker=0, step=i) for i in (0, 1, 3)]
        rec0.append(record_line(1, 0, p1, c, worker=0, step=4))
        rec1 = [record_line(0, 2, p0, c, worker=1, step=2, outcome="dropped_stale"),
                record_line(1, 1, p1, c, worker=1, step=5, outcome="not_pushed")]
        ledger_path = self.write("ledger.jsonl", ledger)
        args = ["--complete_epochs", "1", ledger_path, "--records",
                self.write("r0", rec0)]
        rc, out, _ = self.run_main(["--held_at_end"] + args + [self.write("r1", rec1)])
        self.assertEqual(rc, 0, out)
        self.assertIn("epoch 0: 14 samples, 6 missing, 0 repeated  (held at the end: "
                      "chunk 0/2 by worker 1 (dropped_stale))\n", out)
        # Without --held_at_end the epoch is not whole.
        rc, out, _ = self.run_main(args + [self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertIn("6 missing, 0 repeated  NOT WHOLE", out)
        # A push of worker 1 taken after the drop: it went on, so the chunk
        # was not in its hands at the end, and the loss is a loss.
        later = rec1 + [record_line(1, 2, p1, c, worker=1, step=6, outcome="aggregated")]
        rc, out, _ = self.run_main(["--held_at_end"] + args + [self.write("r1", later)])
        self.assertEqual(rc, 1, out)
        self.assertIn("NOT WHOLE", out)
        # Nobody's record names the chunk: not excused.
        rc, out, _ = self.run_main(["--held_at_end"] + args + [self.write("r1", rec1[1:])])
        self.assertEqual(rc, 1, out)
        self.assertIn("NOT WHOLE", out)
        # A ledger line of a chunk whose only record is not_pushed: counted
        # but never trained.
        counted = ledger + [ledger_line(1, 1, p1, c, worker=1, step=5)]
        rc, out, _ = self.run_main(["--held_at_end", "--complete_epochs", "1",
                                    self.write("ledger.jsonl", counted), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertIn("chunk 1/1 of worker 1, generation 0, step 5: no record with its samples", out)
        # The chunk held was of an older generation than the ledger's
        # newest (a rollback came after it): it went back to that
        # generation's queue, so it does not excuse the newest one's loss.
        rolled = [l.replace('"generation":0', '"generation":1') for l in ledger]
        rolled_rec0 = [l.replace('"generation":0', '"generation":1') for l in rec0]
        args = ["--complete_epochs", "1", self.write("ledger.jsonl", rolled), "--records",
                self.write("r0", rolled_rec0)]
        rc, out, _ = self.run_main(["--held_at_end"] + args + [self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertIn("6 missing, 0 repeated  NOT WHOLE", out)
        newer = [l.replace('"generation":0', '"generation":1') for l in rec1]
        rc, out, _ = self.run_main(["--held_at_end"] + args + [self.write("r1", newer)])
        self.assertEqual(rc, 0, out)

    def test_a_record_whose_samples_are_not_the_chunks(self):
        ledger, rec0, rec1 = self.epoch0()
        wrong = self.perm[0][0:self.C]  # chunk 0's samples
        rec0[1] = record_line(0, 2, self.perm[0], self.C, worker=0, step=2, samples=wrong)
        rc, out, _ = self.run_main(["--complete_epochs", "1",
                                    self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertIn("0 trained-but-not-counted, 1 counted-but-not-trained", out)
        # The same samples in another order are the chunk's.
        rec0[1] = record_line(0, 2, self.perm[0], self.C, worker=0, step=2,
                              samples=self.perm[0][17:11:-1])
        rc, out, _ = self.run_main(["--complete_epochs", "1",
                                    self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 0, out)

    def test_an_extra_record(self):
        ledger, rec0, rec1 = self.epoch0()
        # Worker 0 says chunk 1's gradient was applied; the ledger has
        # worker 1's.
        rec0.append(record_line(0, 1, self.perm[0], self.C, worker=0, step=1))
        rc, out, _ = self.run_main(["--complete_epochs", "1",
                                    self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 0: 1 trained-but-not-counted, 0 counted-but-not-trained"
                      "  NOT AS TRAINED", out)
        self.assertIn("r0:3: chunk 0/1 of worker 0, generation 0, step 1 (applied): "
                      "no ledger line", out)

    def test_the_partial_epoch_and_a_restore(self):
        ledger, rec0, rec1 = self.epoch0()
        p1 = self.perm[1]
        # Epoch 1 is partial: an aggregated gradient whose step was not
        # applied yet does not fail the check.
        rec0.append(record_line(1, 0, p1, self.C, worker=0, step=5, generation=1,
                                outcome="aggregated"))
        # A restore: generation 0's chunk 1/2 was cut from the ledger and
        # trained again in generation 1.
        rec1.append(record_line(1, 2, p1, self.C, worker=1, step=4))
        rec1.append(record_line(1, 2, p1, self.C, worker=1, step=4, generation=1))
        ledger.append(ledger_line(1, 2, p1, self.C, worker=1, step=4, generation=1))
        rc, out, _ = self.run_main(["--complete_epochs", "1",
                                    self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 0, out)
        self.assertIn("epoch 1: 1 trained-but-not-counted, 0 counted-but-not-trained, "
                      "1 rolled back\n", out)
        # Complete, epoch 1 fails.
        rc, out, _ = self.run_main(["--complete_epochs", "2",
                                    self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)

    def test_ledgers_of_two_shards(self):
        ledger, rec0, rec1 = self.epoch0()
        a = self.write("ledger-0.jsonl", ledger)
        b = self.write("ledger-1.jsonl", list(reversed(ledger)))
        rc, out, _ = self.run_main(["--complete_epochs", "1", "--ledger", a, "--ledger", b])
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.splitlines(), [
            f"ledger {a}:",
            "epoch 0: 20 samples, 0 missing, 0 repeated",
            f"ledger {b}:",
            "epoch 0: 20 samples, 0 missing, 0 repeated",
            "epoch 0: 0 chunks differ between the ledgers",
        ])
        # The second shard took chunk 3 from worker 0 where the first took
        # worker 1's: each ledger is whole, but they disagree.
        other = ledger[:3] + [ledger_line(0, 3, self.perm[0], self.C, worker=0, step=3)]
        b = self.write("ledger-1.jsonl", other)
        rc, out, _ = self.run_main(["--complete_epochs", "1", a, b])
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 0: 2 chunks differ between the ledgers  LEDGERS DISAGREE", out)
        self.assertIn(f"differs: {b} lacks chunk 0/3 of worker 1, generation 0", out)
        self.assertIn(f"differs: {b} has chunk 0/3 of worker 0, generation 0 1 more", out)
        # With the records, the second ledger counts what worker 0 did not
        # train.
        rc, out, _ = self.run_main(["--complete_epochs", "1", a, b, "--records",
                                    self.write("r0", rec0), self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertEqual(out.count("epoch 0: 0 trained-but-not-counted, "
                                   "0 counted-but-not-trained\n"), 1)
        self.assertIn("epoch 0: 1 trained-but-not-counted, 1 counted-but-not-trained"
                      "  NOT AS TRAINED", out)

    def test_a_killed_worker_is_excused_once_per_run(self):
        ledger, rec0, rec1 = self.epoch0()
        p1 = self.perm[1]
        # Worker 1 killed: its chunk 0/3 counted, never recorded (excused),
        # and in epoch 1 (partial) another of its pushes counted with no
        # record: not a second excuse.
        ledger.append(ledger_line(1, 0, p1, self.C, worker=1, step=4))
        args = ["--killed", "1", "--complete_epochs", "1"]
        records = ["--records", self.write("r0", rec0), self.write("r1", rec1[1:2])]
        rc, out, _ = self.run_main(args + [self.write("ledger.jsonl", ledger)] + records)
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 0: 0 trained-but-not-counted, 0 counted-but-not-trained, "
                      "1 unrecorded by a killed worker\n", out)
        self.assertIn("epoch 1: 0 trained-but-not-counted, 1 counted-but-not-trained"
                      "  NOT AS TRAINED", out)
        # The one excused push is the same on every shard: two ledgers that
        # both count it pass.
        ledger.pop()
        a = self.write("ledger-0.jsonl", ledger)
        b = self.write("ledger-1.jsonl", ledger)
        rc, out, _ = self.run_main(args + [a, b] + records)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("1 unrecorded by a killed worker"), 2)
        # Not another chunk of it on the second shard.
        other = ledger[:2] + [ledger_line(0, 2, self.perm[0], self.C, worker=1, step=2),
                              ledger[3]]
        rc, out, _ = self.run_main(args + [a, self.write("ledger-1.jsonl", other)] + records)
        self.assertEqual(rc, 1, out)

    def test_the_partial_epoch_is_joined_with_the_records(self):
        ledger, rec0, rec1 = self.epoch0()
        p1 = self.perm[1]
        # Epoch 1 (partial): worker 0's chunk 1/0 applied and counted.
        ledger.append(ledger_line(1, 0, p1, self.C, worker=0, step=4))
        rec0.append(record_line(1, 0, p1, self.C, worker=0, step=4))
        args = ["--complete_epochs", "1", self.write("ledger.jsonl", ledger)]
        rc, out, _ = self.run_main(args + ["--records", self.write("r0", rec0),
                                           self.write("r1", rec1)])
        self.assertEqual(rc, 0, out)
        self.assertIn("epoch 1: 0 trained-but-not-counted, 0 counted-but-not-trained\n", out)
        # Counted, but no worker trained it: fails in the partial epoch too.
        rc, out, _ = self.run_main(args + ["--records", self.write("r0", rec0[:-1]),
                                           self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 1: 0 trained-but-not-counted, 1 counted-but-not-trained"
                      "  NOT AS TRAINED", out)
        # A worker told its push was applied, the ledger without it: fails;
        # a gradient only aggregated (its step not applied yet) does not.
        rec1.append(record_line(1, 1, p1, self.C, worker=1, step=5))
        rc, out, _ = self.run_main(args + ["--records", self.write("r0", rec0),
                                           self.write("r1", rec1)])
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 1: 1 trained-but-not-counted, 0 counted-but-not-trained"
                      "  NOT AS TRAINED", out)
        rec1[-1] = record_line(1, 1, p1, self.C, worker=1, step=5, outcome="aggregated")
        rc, out, _ = self.run_main(args + ["--records", self.write("r0", rec0),
                                           self.write("r1", rec1)])
        self.assertEqual(rc, 0, out)

    def test_shards_disagreeing_in_the_partial_epoch(self):
        ledger, _, _ = self.epoch0()
        p1 = self.perm[1]
        ledger += [ledger_line(1, i, p1, self.C, worker=i % 2, step=4 + i)
                   for i in range(3)]
        a = self.write("ledger-0.jsonl", ledger)
        # The second shard stopped before the last decision reached it.
        b = self.write("ledger-1.jsonl", ledger[:-1])
        rc, out, _ = self.run_main(["--complete_epochs", "1", a, b])
        self.assertEqual(rc, 0, out)
        self.assertIn("epoch 1: 0 chunks differ between the ledgers, 1 not yet "
                      "applied by the other shards\n", out)
        # One from the middle missing is no tail: they disagree.
        b = self.write("ledger-1.jsonl", ledger[:5] + ledger[6:])
        rc, out, _ = self.run_main(["--complete_epochs", "1", a, b])
        self.assertEqual(rc, 1, out)
        self.assertIn("epoch 1: 1 chunks differ between the ledgers  LEDGERS DISAGREE",
                      out)
        # A chunk the first ledger lacks.
        b = self.write("ledger-1.jsonl", ledger + [
            ledger_line(1, 3, p1, self.C, worker=1, step=7)])
        rc, out, _ = self.run_main(["--complete_epochs", "1", a, b])
        self.assertEqual(rc, 1, out)

    def test_unreadable_records_and_no_ledger(self):
        ledger, _, _ = self.epoch0()
        rc, _, err = self.run_main([self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r", ['{"worker":0,"epoch":0,"index":0,'
                                                     '"generation":0,"outcome":"applied"}'])])
        self.assertEqual(rc, 2)
        self.assertIn('r:1: "samples" is missing or not a list of integers', err)
        rc, _, err = self.run_main([self.write("ledger.jsonl", ledger), "--records",
                                    self.write("r", ['{"worker":0,"epoch":0,"index":7,'
                                                     '"generation":0,"outcome":"applied",'
                                                     '"samples":[]}'])])
        self.assertEqual(rc, 2)
        self.assertIn("r:1: chunk (epoch 0, index 7) is out of range", err)
        with contextlib.redirect_stderr(io.StringIO()) as err, \
                self.assertRaises(SystemExit) as e:
            lc.main(["--num_samples", "20", "--chunk_size", "6", "--seed", "0",
                     "--records", "r", "ledger.jsonl"])
        self.assertEqual(e.exception.code, 2)
        self.assertIn("no ledger", err.getvalue())


if __name__ == "__main__":
    unittest.main()
