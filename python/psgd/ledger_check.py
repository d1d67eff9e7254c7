#!/usr/bin/python3
"""Checks data-queue ledgers: was every sample of each epoch trained on once?

  psgd ledger-check RUN_DIR [--config F] [--ledger LEDGER]... [--complete_epochs K]

takes the bounds from the run's own config (RUN_DIR/config.pbtxt, which the
chief copies there: data.num_samples or the data set's size, the chunk size
training.batch_size, the seed training.seed), every shard's ledger from its
checkpoint directory (ledger.jsonl, ledger-psK.jsonl; relative directories
from here) or from the run directory, and the workers' sample records
(RUN_DIR/samples-worker-J.jsonl) when there are some. Epochs before the
newest one a ledger reached must be whole (--complete_epochs overrides).
The same check with every bound given (scripts/ledger_check.py from the
repository runs this):

  psgd ledger-check --num_samples N --chunk_size C --seed S \\
      [--complete_epochs K] [--ledger LEDGER]... [LEDGER...] \\
      [--records RECORDS...]

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

Each ledger file (positional or --ledger, which may be given several times)
is one shard's ledger, checked on its own; with several, they are also
compared with the first: the shards decide each push alike, so each holds
the same chunks, each from the same worker and generation. Put the ledgers
before --records, or name them with --ledger.

--records names the workers' sample records (data { record_samples: true }:
samples-worker-J.jsonl in the run directory, worker/session/sample_records.h),
a JSON line per push:

  {"worker":W,"step":S,"generation":G,"epoch":E,"index":I,
   "outcome":"applied","samples":[ids...]}

and joins them with each ledger: a chunk is known by (E, I, W, G).

  trained-but-not-counted  a record whose outcome says its gradient was
                           taken ("applied" or "aggregated") but the ledger
                           has no line of that chunk from that worker; a
                           record of a generation older than the ledger's
                           newest (a restore cut its lines back) is counted
                           as rolled back instead
  counted-but-not-trained  a ledger line with no record of that chunk from
                           that worker whose samples are the chunk's (the
                           same ids, in any order)

Epoch e's permutation is the C++ one (ps/state/data_queue.h,
EpochPermutation): a Fisher-Yates shuffle driven by SplitMix64 started at
seed ^ SplitMix64(e).next(); for i = N - 1 down to 1, swap perm[i] and
perm[below(i + 1)], where below(n) draws r until r >= 2^64 mod n and returns
r mod n. ledger_check_test.py and ps/state/data_queue_test.cc check the same
golden permutation, so the two cannot drift.

Prints per ledger (under a line `ledger PATH:` when there are several) and
per epoch `epoch E: N samples, M missing, R repeated` (N: samples the
ledger's chunks carried, repeats included; M: samples of the epoch no chunk
carried; R: N minus the distinct samples); with --records also
`epoch E: T trained-but-not-counted, U counted-but-not-trained` (and
`, B rolled back` when some were), each followed by up to 5 lines naming
them; with several ledgers, then per epoch `epoch E: D chunks differ between
the ledgers` and lines naming them. Epochs 0..K-1 (--complete_epochs K,
default 0) are complete: any of these counts that is not 0 there fails the
check. In a later (partial) epoch a repeat fails it, and so does a chunk
counted that no worker trained, a push a worker was told was applied that
the first ledger (shard 0's) lacks, and a chunk on which the ledgers
disagree, but for those another shard lacks after the last line it shares
with the first (decisions that had not reached it when it stopped: named
`, K not yet applied by the other shards`). --killed J (once per worker)
excuses one push of worker J counted with no record, once in the whole run
(the same chunk on every shard).

A run that stopped at its step limit (--held_at_end; `psgd ledger-check RUN`
turns it on when the chief's summary.json says "reached step") may leave
chunks untrained that its workers held when they stopped: a push in hand
that was dropped after the last step (a worker paused, or waiting for a
shard it was cut off from, while the others made the steps), a chunk leased
ahead and never pushed (outcome "not_pushed", written at the worker's
Leave). Such a chunk keeps its epoch open however old the epoch is. A
missing sample of an epoch that must be whole is then excused, and named
`held at the end`, when it is in such a chunk: one whose worker's records
end with it, that is a record of the chunk (not "applied" or "aggregated")
followed in that worker's file by no push taken, of the ledger's newest
generation (a chunk held before a rollback went back to the older
generation's queue). Every other missing
sample, and every repeat, still fails the check. Exits 1 when the check
fails or a line disagrees with the permutation; 2 on bad arguments or an
unreadable line (naming the file and line).
"""
import argparse
import glob
import json
import os
import re
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


def read_lines(paths, keys):
    """Yields (where, object) for each non-blank line of the JSON-lines
    files, each an object whose `keys` are integers (LedgerError naming the
    file and line otherwise)."""
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
                for key in keys:
                    v = rec.get(key)
                    if not isinstance(v, int) or isinstance(v, bool):
                        raise LedgerError(f"{where}: \"{key}\" is missing or not an integer")
                yield where, rec


def read_ledger(paths):
    """Yields (where, record) for each line of the ledgers."""
    return read_lines(paths, ("epoch", "index"))


# Record outcomes whose gradient a shard took (the chunk counts once the
# ledger has it).
COUNTED_OUTCOMES = ("applied", "aggregated")
# A chunk the worker leased and never pushed (written at its Leave).
NOT_PUSHED = "not_pushed"
# Lines naming the problems of each kind, per epoch and ledger.
SHOWN = 5


def read_records(paths):
    """Yields (where, record) for each line of the workers' sample records."""
    for where, rec in read_lines(paths, ("worker", "generation", "epoch", "index")):
        if not isinstance(rec.get("outcome"), str):
            raise LedgerError(f"{where}: \"outcome\" is missing or not a string")
        samples = rec.get("samples")
        if not isinstance(samples, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in samples):
            raise LedgerError(f"{where}: \"samples\" is missing or not a list of integers")
        yield where, rec


def chunk_key(rec):
    """A pushed chunk: (epoch, index, worker, generation)."""
    return (rec["epoch"], rec["index"], rec.get("worker"), rec.get("generation", 0))


def describe(key, rec=None):
    epoch, index, worker, generation = key
    text = f"chunk {epoch}/{index} of worker {worker}, generation {generation}"
    if rec is not None and "step" in rec:
        text += f", step {rec['step']}"
    if rec is not None and "outcome" in rec:
        text += f" ({rec['outcome']})"
    return text


def print_named(kind, named, out):
    for text in named[:SHOWN]:
        print(f"  {kind}: {text}", file=out)
    if len(named) > SHOWN:
        print(f"  {kind}: ... and {len(named) - SHOWN} more", file=out)


def join_records(entries, records, newest_generation, killed=(), excused=None):
    """One epoch of one ledger against the records of that epoch: the
    problems named, as (trained-but-not-counted, counted-but-not-trained,
    rolled back, unrecorded, applied-but-not-counted: those of the first
    whose record says the step was applied). `killed`: workers killed once
    during the run; one push of each, counted with no record at all, is
    theirs to miss (the push in flight at the kill: the servers counted it,
    the worker died before it wrote the record) and is named as unrecorded
    instead: one in the whole run, the same chunk in every shard's ledger
    (`excused`, worker -> that chunk, kept by the caller across epochs and
    ledgers)."""
    if excused is None:
        excused = {}
    counted = {}
    for where, rec, _samples in entries:
        counted.setdefault(chunk_key(rec), []).append(where)
    by_key = {}
    for where, rec in records:
        by_key.setdefault(chunk_key(rec), []).append(rec)
    trained, rolled_back, applied = [], [], []
    for where, rec in records:
        key = chunk_key(rec)
        if rec["outcome"] not in COUNTED_OUTCOMES or key in counted:
            continue
        text = f"{where}: {describe(key, rec)}: no ledger line"
        (rolled_back if key[3] < newest_generation else trained).append(text)
        if key[3] >= newest_generation and rec["outcome"] == "applied":
            applied.append(text)
    not_trained, unrecorded = [], []
    for where, rec, samples in entries:
        key = chunk_key(rec)
        want = sorted(samples)
        if not any(sorted(r["samples"]) == want for r in by_key.get(key, ())
                   if r["outcome"] != NOT_PUSHED):
            if (key not in by_key and key[2] in killed and
                    excused.get(key[2], key) == key):
                excused[key[2]] = key
                unrecorded.append(f"{where}: {describe(key, rec)}: no record "
                                  "(its worker was killed)")
                continue
            why = ("no record" if key not in by_key
                   else "no record with its samples")
            not_trained.append(f"{where}: {describe(key, rec)}: {why}")
    return trained, not_trained, rolled_back, unrecorded, applied


def held_at_end(records):
    """The chunks the workers held when they stopped, from their records:
    {(epoch, index): ("chunk E/I by worker W (outcome)", generation)} for
    every record of a worker's file after its last push taken (`records`:
    (where, record) in file order). The generation lets the check take only
    the chunks of the ledger's newest one: a chunk held before a rollback
    went back to the queue of that generation, not into the last."""
    tails = {}  # file -> [records after the last push taken]
    for where, rec in records:
        path = where.rsplit(":", 1)[0]
        tail = tails.setdefault(path, [])
        if rec["outcome"] in COUNTED_OUTCOMES:
            tail.clear()
        else:
            tail.append(rec)
    held = {}
    for tail in tails.values():
        for rec in tail:
            held[(rec["epoch"], rec["index"])] = (
                f"chunk {rec['epoch']}/{rec['index']} by worker {rec.get('worker')} "
                f"({rec['outcome']})", rec.get("generation", 0))
    return held


def check(paths, num_samples, chunk_size, seed, complete_epochs, out=None,
          records=None, killed=(), held_at_end_too=False):
    """Returns the exit status (0 or 1); raises LedgerError for exit 2.
    `records`: the workers' sample record files, or None.
    `held_at_end_too`: the run stopped at its step limit; samples of the
    chunks its workers held then may be missing (the docstring above)."""
    out = out or sys.stdout
    chunks = -(-num_samples // chunk_size)
    perms = {}
    bad = 0

    def chunk_of(where, epoch, index):
        if epoch < 0 or not 0 <= index < chunks:
            raise LedgerError(
                f"{where}: chunk (epoch {epoch}, index {index}) is out of range "
                f"(epochs from 0, indices 0..{chunks - 1})")
        if epoch not in perms:
            perms[epoch] = epoch_permutation(num_samples, seed, epoch)
        return perms[epoch][index * chunk_size:(index + 1) * chunk_size]

    ledgers = []  # (path, {epoch: [(where, rec, samples)]})
    for path in paths:
        by_epoch = {}
        for where, rec in read_ledger([path]):
            epoch, index = rec["epoch"], rec["index"]
            samples = chunk_of(where, epoch, index)
            first, count = rec.get("first"), rec.get("count")
            if (first is not None and first != samples[0]) or (
                    count is not None and count != len(samples)):
                print(f"{where}: chunk (epoch {epoch}, index {index}) has first sample "
                      f"{first} and {count} samples here, {samples[0]} and {len(samples)} "
                      f"in the permutation: written with other options?", file=out)
                bad += 1
            by_epoch.setdefault(epoch, []).append((where, rec, samples))
        ledgers.append((path, by_epoch))
    recs_by_epoch = None
    held = {}
    if records is not None:
        recs_by_epoch = {}
        every = list(read_records(records))
        for where, rec in every:
            chunk_of(where, rec["epoch"], rec["index"])
            recs_by_epoch.setdefault(rec["epoch"], []).append((where, rec))
        if held_at_end_too:
            held = held_at_end(every)

    several = len(ledgers) > 1
    excused = {}  # a killed worker -> the one push it may not have recorded
    for number, (path, by_epoch) in enumerate(ledgers):
        if several:
            print(f"ledger {path}:", file=out)
        epochs = set(by_epoch) | set(range(complete_epochs))
        if recs_by_epoch is not None:
            epochs |= set(recs_by_epoch)
        newest = max((rec.get("generation", 0) for entries in by_epoch.values()
                      for _w, rec, _s in entries), default=0)
        for epoch in sorted(epochs):
            entries = by_epoch.get(epoch, [])
            seen = {}
            for _where, _rec, samples in entries:
                for x in samples:
                    seen[x] = seen.get(x, 0) + 1
            total = sum(seen.values())
            missing = num_samples - len(seen)
            repeated = total - len(seen)
            whole = epoch < complete_epochs
            flag = ""
            held_named = []
            if whole and missing and not repeated and held:
                # Missing only what the workers held when they stopped.
                lacking = set(range(num_samples)) - set(seen)
                for (e, index), (who, generation) in sorted(held.items()):
                    if (e == epoch and generation >= newest
                            and lacking & set(chunk_of("", e, index))):
                        lacking -= set(chunk_of("", e, index))
                        held_named.append(who)
                if not lacking:
                    flag = "  (held at the end: " + ", ".join(held_named) + ")"
            if whole and (missing or repeated) and not flag:
                flag = "  NOT WHOLE"
                bad += 1
            elif repeated:
                flag = "  REPEATED"
                bad += 1
            print(f"epoch {epoch}: {total} samples, {missing} missing, {repeated} repeated{flag}",
                  file=out)
            if recs_by_epoch is None:
                continue
            trained, not_trained, rolled_back, unrecorded, applied = join_records(
                entries, recs_by_epoch.get(epoch, []), newest, killed, excused)
            flag = ""
            # In the partial epoch too, no shard counts what no worker
            # trained, and shard 0's ledger (the first) has every push
            # whose step a worker was told was applied; only a gradient
            # aggregated into a step not applied yet may be missing (and, on
            # another shard, the decisions that had not reached it yet:
            # below).
            if (whole and (trained or not_trained)) or (
                    not whole and (not_trained or (number == 0 and applied))):
                flag = "  NOT AS TRAINED"
                bad += 1
            rolled = f", {len(rolled_back)} rolled back" if rolled_back else ""
            if unrecorded:
                rolled += f", {len(unrecorded)} unrecorded by a killed worker"
            print(f"epoch {epoch}: {len(trained)} trained-but-not-counted, "
                  f"{len(not_trained)} counted-but-not-trained{rolled}{flag}", file=out)
            print_named("trained-but-not-counted", trained, out)
            print_named("counted-but-not-trained", not_trained, out)
            print_named("rolled back", rolled_back, out)
            print_named("unrecorded", unrecorded, out)

    if several:
        # The order of the first ledger's lines: another shard applies the
        # same decisions in the same order, so what it lacks in a partial
        # epoch must come after everything it has (decisions that had not
        # reached it when it stopped).
        position = {}
        for _path, by_epoch in ledgers[:1]:
            for entries in by_epoch.values():
                for where, rec, _s in entries:
                    line = int(where.rsplit(":", 1)[1])
                    position.setdefault(chunk_key(rec), line)
        first_path, first = ledgers[0]
        epochs = set(range(complete_epochs))
        for _path, by_epoch in ledgers:
            epochs |= set(by_epoch)
        for epoch in sorted(epochs):
            base = {}
            for _where, rec, _s in first.get(epoch, []):
                key = chunk_key(rec)
                base[key] = base.get(key, 0) + 1
            named, behind = [], 0
            for path, by_epoch in ledgers[1:]:
                other = {}
                for _where, rec, _s in by_epoch.get(epoch, []):
                    key = chunk_key(rec)
                    other[key] = other.get(key, 0) + 1
                # The last of the first ledger's lines this shard has (all
                # its epochs).
                last = max((position.get(chunk_key(rec), -1)
                            for entries in by_epoch.values()
                            for _w, rec, _s in entries), default=-1)
                for key in sorted(set(base) | set(other)):
                    a, b = base.get(key, 0), other.get(key, 0)
                    if a > b and epoch >= complete_epochs and b == 0 and \
                            position.get(key, -1) > last:
                        behind += 1  # a decision that had not reached it
                    elif a > b:
                        named.append(f"{path} lacks {describe(key)} ({a - b} of {a} in {first_path})")
                    elif b > a:
                        named.append(f"{path} has {describe(key)} {b - a} more time(s) than {first_path}")
            flag = ""
            if named:
                flag = "  LEDGERS DISAGREE"
                bad += 1
            tail = (f", {behind} not yet applied by the other shards"
                    if behind else "")
            print(f"epoch {epoch}: {len(named)} chunks differ between the ledgers"
                  f"{tail}{flag}", file=out)
            print_named("differs", named, out)
    return 1 if bad else 0


# The data set sizes the servers take when data.num_samples is not set
# (common/cluster_config's TrainingSamples).
CIFAR10_TRAIN = 50000
SYNTHETIC_TRAIN_DEFAULT = 10000


def run_bounds(run_dir, config_path=None):
    """(num_samples, chunk_size, seed, ledgers, records) of a run directory,
    from its config; LedgerError naming what is missing."""
    from . import config_text  # pylint: disable=import-outside-toplevel
    if not os.path.isdir(run_dir):
        raise LedgerError(f"{run_dir}: not a directory")
    config_path = config_path or os.path.join(run_dir, "config.pbtxt")
    try:
        with open(config_path, encoding="utf-8") as f:
            config = config_text.parse(f.read())
    except OSError as e:
        raise LedgerError(f"{config_path}: cannot read the run's config "
                          f"({e.strerror}); name one with --config") from e
    except ValueError as e:
        raise LedgerError(f"{config_path}: {e}") from e
    get = lambda path, default=None: config_text.get(config, path, default)  # noqa: E731
    if get("data.sharding") != "SERVERS":
        raise LedgerError(f"{config_path}: data {{ sharding: SERVERS }} is not set: "
                          "the servers handed out no data and kept no ledger")
    num_samples = get("data.num_samples")
    if num_samples is None:
        num_samples = (get("data.synthetic_train_size", SYNTHETIC_TRAIN_DEFAULT)
                       if get("data.source") == "SYNTHETIC" else CIFAR10_TRAIN)
    chunk_size = get("training.batch_size", 128)
    seed = get("training.seed", 1)
    # Each shard's ledger: in its checkpoint directory, or the run's.
    dirs = [run_dir] + sorted(glob.glob(os.path.join(run_dir, "*", "")))
    shared = get("checkpoint.dir")
    ps = config.get("ps", [])
    ledgers = []
    for index in range(max(1, len(ps))):
        name = "ledger.jsonl" if index == 0 else f"ledger-ps{index}.jsonl"
        own = config_text.get(ps[index], "checkpoint_dir") if index < len(ps) else None
        places = [d for d in (own, shared) if d] + dirs
        found = [os.path.join(os.path.expanduser(d), name) for d in places
                 if os.path.isfile(os.path.join(os.path.expanduser(d), name))]
        if found:
            ledgers.append(found[0])
        elif index == 0:
            raise LedgerError(
                f"{run_dir}: no {name} (ps:0's ledger) in "
                + ", ".join(dict.fromkeys(places))
                + (" (data { ledger: true } is not set)" if get("data.ledger") != "true"
                   else "") + "; name the ledgers with --ledger")
    records = sorted(
        os.path.join(d, f) for d in dirs for f in os.listdir(d)
        if re.fullmatch(r"samples-worker-\d+\.jsonl", f))
    return num_samples, chunk_size, seed, ledgers, records


def default_complete_epochs(run_dir, ledgers, config_path=None):
    """The epochs that must be whole: those before the newest epoch ps:0's
    ledger reached, and every one of training.epochs when the run ended
    because the data ended (summary.json's end_reason)."""
    from . import config_text  # pylint: disable=import-outside-toplevel
    complete = 0
    for _where, rec in read_ledger(ledgers[:1]):
        complete = max(complete, rec["epoch"])
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        with open(config_path or os.path.join(run_dir, "config.pbtxt"), encoding="utf-8") as f:
            epochs = config_text.get(config_text.parse(f.read()), "training.epochs")
    except (OSError, ValueError):
        return complete
    if epochs and str(summary.get("end_reason", "")).startswith("the data ended"):
        complete = max(complete, epochs)
    return complete


def stopped_at_step_limit(run_dir):
    """Whether the chief's summary.json says the run stopped at its step
    limit (end_reason "reached step S")."""
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            reason = str(json.load(f).get("end_reason", ""))
    except (OSError, ValueError, AttributeError):
        return False
    return reason.startswith("reached step")


def run_main(argv=None, prog="psgd ledger-check"):
    """psgd ledger-check RUN_DIR: the check with the run's own bounds."""
    p = argparse.ArgumentParser(
        prog=prog, description="Checks a run's data-queue ledgers: was every "
        "sample of each epoch trained on once? The bounds come from the "
        "run's config; with --num_samples, --chunk_size and --seed instead "
        "of a RUN_DIR, the ledgers named are checked against those.")
    p.add_argument("run_dir", nargs="?", help="the run directory")
    p.add_argument("--config", help="the config (default RUN_DIR/config.pbtxt)")
    p.add_argument("--ledger", action="append", default=[], dest="ledgers",
                   help="a shard's ledger, instead of those found; may be "
                        "given several times")
    p.add_argument("--complete_epochs", type=int,
                   help="epochs 0..K-1 must each be whole (default: those "
                        "before the newest epoch a ledger reached)")
    p.add_argument("--no_records", action="store_true",
                   help="leave the workers' sample records out")
    args, rest = p.parse_known_args(argv)
    if args.run_dir is None or args.run_dir.startswith("-") or rest:
        # The form with every bound given.
        return main(argv, prog=prog)
    try:
        num_samples, chunk_size, seed, ledgers, records = run_bounds(
            args.run_dir, args.config)
    except LedgerError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    ledgers = args.ledgers or ledgers
    complete = args.complete_epochs
    if complete is None:
        complete = default_complete_epochs(args.run_dir, ledgers, args.config)
    if complete < 0:
        p.error(f"--complete_epochs {complete} is negative")
    step_limited = stopped_at_step_limit(args.run_dir)
    print(f"{prog}: {', '.join(ledgers)}: {num_samples} samples, chunks of "
          f"{chunk_size}, seed {seed}, epochs 0..{complete - 1} whole"
          + (f"; records {', '.join(records)}" if records and not args.no_records else "")
          + ("; stopped at its step limit (chunks held then may be missing)"
             if step_limited and records and not args.no_records else ""))
    try:
        return check(ledgers, num_samples, chunk_size, seed, complete,
                     records=None if args.no_records or not records else records,
                     held_at_end_too=step_limited)
    except LedgerError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2


def main(argv=None, prog="ledger_check.py"):
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--num_samples", type=int, required=True)
    p.add_argument("--chunk_size", type=int, required=True)
    p.add_argument("--seed", type=int, required=True, help="the queue's seed, unsigned 64 bits")
    p.add_argument("--complete_epochs", type=int, default=0,
                   help="epochs 0..K-1 must each be whole (every sample once)")
    p.add_argument("--ledger", action="append", default=[], dest="ledgers",
                   help="a shard's ledger (JSON lines); may be given several times")
    p.add_argument("--records", action="extend", nargs="+",
                   help="the workers' sample records (samples-worker-J.jsonl)")
    p.add_argument("--killed", action="append", type=int, default=[],
                   help="a worker id killed once during the run (with "
                        "--records: one counted chunk of it may have no record)")
    p.add_argument("--held_at_end", action="store_true",
                   help="the run stopped at its step limit (with --records: "
                        "the chunks its workers held then may be missing, "
                        "named as held at the end)")
    p.add_argument("ledger", nargs="*", help="ledger files (JSON lines), one per shard")
    args = p.parse_args(argv)
    ledgers = args.ledger + args.ledgers
    if not ledgers:
        p.error("no ledger: name one (before --records, or with --ledger)")
    if args.num_samples <= 0:
        p.error(f"--num_samples {args.num_samples} is not positive")
    if args.chunk_size <= 0:
        p.error(f"--chunk_size {args.chunk_size} is not positive")
    if not 0 <= args.seed <= MASK:
        p.error(f"--seed {args.seed} is not in 0..2^64-1")
    if args.complete_epochs < 0:
        p.error(f"--complete_epochs {args.complete_epochs} is negative")
    try:
        return check(ledgers, args.num_samples, args.chunk_size, args.seed,
                     args.complete_epochs, records=args.records,
                     killed=set(args.killed), held_at_end_too=args.held_at_end)
    except LedgerError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
