#!/usr/bin/python3
"""Checks a data-queue ledger: was every sample of each epoch trained on once?

  scripts/ledger_check.py --num_samples N --chunk_size C --seed S \\
      [--complete_epochs K] LEDGER...

A parameter-server shard that hands out the data (ps/state/data_queue.h)
writes a ledger line for every chunk whose gradient it applied. A line is a
JSON object (ps/state/data_queue.h's FormatLedgerLine writes it):

  {"epoch":E,"index":I,"worker":W,"step":S,"generation":G,"first":F,"count":N}

  E, I   the chunk: epoch E's permutation positions
         [I * C, min(N_samples, (I + 1) * C))
  W      the worker that computed the gradient
  S      the global step it was applied at (-1 where there is none)
  G      the queue's generation (one more after each restore)
  F, N   the chunk's first sample and its number of samples; checked against
         this script's permutation when present (a mismatch means the ledger
         was written with other options)

Keys may come in any order; other keys are ignored; blank lines are skipped.

Epoch e's permutation is the C++ one (ps/state/data_queue.h,
EpochPermutation): a Fisher-Yates shuffle driven by SplitMix64 started at
seed ^ SplitMix64(e).next(); for i = N - 1 down to 1, swap perm[i] and
perm[below(i + 1)], where below(n) draws r until r >= 2^64 mod n and returns
r mod n. ledger_check_test.py and ps/state/data_queue_test.cc check the same
golden permutation, so the two cannot drift.

Prints per epoch `epoch E: N samples, M missing, R repeated` (N: samples the
ledger's chunks carried, repeats included; M: samples of the epoch no chunk
carried; R: N minus the distinct samples). Exits 1 if one of epochs
0..K-1 (--complete_epochs K, default 0) has a missing or repeated sample, or
a line disagrees with the permutation; 2 on bad arguments or an unreadable
line (naming the file and line).
"""
import argparse
import json
import sys

MASK = (1 << 64) - 1


class SplitMix64:
    """SplitMix64, as ps/state/data_queue.h's SplitMix64."""

    def __init__(self, state):
        self.state = state & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        """Uniform in [0, n) without modulo bias."""
        threshold = (1 << 64) % n
        while True:
            r = self.next()
            if r >= threshold:
                return r % n


def epoch_permutation(num_samples, seed, epoch):
    """Epoch `epoch`'s permutation of range(num_samples)."""
    perm = list(range(num_samples))
    rng = SplitMix64((seed & MASK) ^ SplitMix64(epoch).next())
    for i in range(num_samples - 1, 0, -1):
        j = rng.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class LedgerError(Exception):
    """A line that cannot be read (exit 2)."""


def read_ledger(paths):
    """Yields (where, record) for each line of the files."""
    for path in paths:
        try:
            f = open(path, encoding="utf-8")
        except OSError as e:
            raise LedgerError(f"{path}: cannot open: {e.strerror}") from e
        with f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{path}:{n}"
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise LedgerError(f"{where}: not JSON: {e.msg}") from e
                if not isinstance(rec, dict):
                    raise LedgerError(f"{where}: not a JSON object")
                for key in ("epoch", "index"):
                    if not isinstance(rec.get(key), int) or isinstance(rec.get(key), bool):
                        raise LedgerError(f"{where}: \"{key}\" is missing or not an integer")
                yield where, rec


def check(paths, num_samples, chunk_size, seed, complete_epochs, out=None):
    """Returns the exit status (0 or 1); raises LedgerError for exit 2."""
    out = out or sys.stdout
    chunks = -(-num_samples // chunk_size)
    counts = {}  # epoch -> {sample: times}
    perms = {}
    bad = 0
    for where, rec in read_ledger(paths):
        epoch, index = rec["epoch"], rec["index"]
        if epoch < 0 or not 0 <= index < chunks:
            raise LedgerError(
                f"{where}: chunk (epoch {epoch}, index {index}) is out of range "
                f"(epochs from 0, indices 0..{chunks - 1})")
        if epoch not in perms:
            perms[epoch] = epoch_permutation(num_samples, seed, epoch)
        samples = perms[epoch][index * chunk_size:(index + 1) * chunk_size]
        first, count = rec.get("first"), rec.get("count")
        if (first is not None and first != samples[0]) or (
                count is not None and count != len(samples)):
            print(f"{where}: chunk (epoch {epoch}, index {index}) has first sample "
                  f"{first} and {count} samples here, {samples[0]} and {len(samples)} "
                  f"in the permutation: written with other options?", file=out)
            bad += 1
        seen = counts.setdefault(epoch, {})
        for s in samples:
            seen[s] = seen.get(s, 0) + 1
    for epoch in range(complete_epochs):
        counts.setdefault(epoch, {})
    for epoch in sorted(counts):
        seen = counts[epoch]
        total = sum(seen.values())
        missing = num_samples - len(seen)
        repeated = total - len(seen)
        whole = epoch < complete_epochs
        flag = ""
        if whole and (missing or repeated):
            flag = "  NOT WHOLE"
            bad += 1
        print(f"epoch {epoch}: {total} samples, {missing} missing, {repeated} repeated{flag}",
              file=out)
    return 1 if bad else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num_samples", type=int, required=True)
    p.add_argument("--chunk_size", type=int, required=True)
    p.add_argument("--seed", type=int, required=True, help="the queue's seed, unsigned 64 bits")
    p.add_argument("--complete_epochs", type=int, default=0,
                   help="epochs 0..K-1 must each be whole (every sample once)")
    p.add_argument("ledger", nargs="+", help="ledger files (JSON lines)")
    args = p.parse_args(argv)
    if args.num_samples <= 0:
        p.error(f"--num_samples {args.num_samples} is not positive")
    if args.chunk_size <= 0:
        p.error(f"--chunk_size {args.chunk_size} is not positive")
    if not 0 <= args.seed <= MASK:
        p.error(f"--seed {args.seed} is not in 0..2^64-1")
    if args.complete_epochs < 0:
        p.error(f"--complete_epochs {args.complete_epochs} is negative")
    try:
        return check(args.ledger, args.num_samples, args.chunk_size, args.seed,
                     args.complete_epochs)
    except LedgerError as e:
        print(f"ledger_check.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
