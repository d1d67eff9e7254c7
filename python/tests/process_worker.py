"""A psgd.torch worker as a process of its own, for worker_process_test.py:
its own loop over small separable batches, as a user's program would be.

    process_worker.py CONFIG TASK RUN_DIR [--step_seconds=S]
                      [--fail_at=K] [--raise_at=K] [--outcomes=FILE] [--with]
                      [--eval_seconds=S] [--stall_at=K --stall_seconds=S]
                      [--hidden=H]

--step_seconds: each step computes at least S seconds (a long step).
--fail_at: the dataset raises at its K-th batch (a dataset error).
--raise_at: the loop's body raises RuntimeError("boom at batch K") after
  the K-th batch's backward, before its step() (the training code's error).
--outcomes: step()'s answers, one JSON line per step.
--eval_seconds: the chief's evaluation (eval_every) takes S seconds; it
  prints "evaluating" when it starts and "evaluated" when it ends.
--stall_at, --stall_seconds: batch K computes S seconds (printing
  "stalling at batch K" first): the others' sync pulls wait for it.
--hidden: the hidden layer's width (16; another width is another model: the
  servers refuse it, ModelMismatchError).
--with: the loop inside `with psgd.torch.Worker(...) as w:`.
Prints "started" once it has joined and trained one step, and the worker's
summary's end_reason at the end.
"""

import argparse
import json
import sys
import time

import torch

import psgd.torch
from cluster import separable_batches


class Net(torch.nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        torch.manual_seed(3)
        self.hidden = torch.nn.Linear(8, hidden)
        self.out = torch.nn.Linear(hidden, 3)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


class Data:
    """Batches that go on for as long as the config trains; the K-th raises
    when asked to (a dataset whose file went away)."""

    def __init__(self, fail_at):
        self.batches = separable_batches(7, 16)
        self.fail_at = fail_at

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for k, (x, y) in enumerate(self.batches, 1):
            if self.fail_at and k >= self.fail_at:
                raise OSError(f"batch {k}: the dataset's file is gone")
            # An extra item per batch, handed back to the loop.
            yield x, y, k


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("task")
    p.add_argument("run_dir")
    p.add_argument("--step_seconds", type=float, default=0.0)
    p.add_argument("--fail_at", type=int, default=0)
    p.add_argument("--raise_at", type=int, default=0)
    # Batch k (from 0) computes for this long: the others' sync pulls wait.
    p.add_argument("--stall_at", type=int, default=-1)
    p.add_argument("--stall_seconds", type=float, default=0.0)
    p.add_argument("--outcomes", default="")
    p.add_argument("--batches", default="",
                   help="a line per batch the loop's body begins")
    p.add_argument("--with", dest="with_", action="store_true")
    p.add_argument("--eval_seconds", type=float, default=0.0)
    p.add_argument("--hidden", type=int, default=16)
    a = p.parse_args()
    net = Net(a.hidden)
    out = open(a.outcomes, "w") if a.outcomes else None
    begun = open(a.batches, "w") if a.batches else None

    def evaluate(_module):
        print("evaluating", flush=True)
        time.sleep(a.eval_seconds)
        print("evaluated", flush=True)
        return 0.5, 1.0, 10

    def loop(w):
        ev = evaluate if a.eval_seconds else None
        for x, y, k in w.batches(Data(a.fail_at), evaluate=ev):
            if begun is not None:
                begun.write(f"{k}\n")
                begun.flush()
            t0 = time.time()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            if a.step_seconds:
                time.sleep(max(0.0, a.step_seconds - (time.time() - t0)))
            if a.raise_at and k == a.raise_at:
                raise RuntimeError(f"boom at batch {k}")
            if k == a.stall_at:
                print(f"stalling at batch {k}", flush=True)
                time.sleep(a.stall_seconds)
            r = w.step(loss=loss)
            if out is not None and r is not None:
                out.write(json.dumps({
                    "step": r.step, "outcome": r.outcome.name.lower(),
                    "staleness": r.staleness, "applied": r.applied,
                    "batch": k}) + "\n")
                out.flush()
            if not getattr(loop, "said", False):
                loop.said = True
                print("started", flush=True)
        return w.summary

    if a.with_:
        with psgd.torch.Worker(net, a.config, a.task, run_dir=a.run_dir,
                               log_every=0) as w:
            summary = loop(w)
    else:
        w = psgd.torch.Worker(net, a.config, a.task, run_dir=a.run_dir,
                              log_every=0)
        summary = loop(w)
    print("end_reason:", summary["end_reason"] if summary else None,
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
