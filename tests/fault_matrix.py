#!/usr/bin/python3
"""The fault matrix (docs/RELIABILITY.md, "The fault matrix"): every promise
of the cluster crossed with every kind of model, optimizer, mode and front
end, under three faults, in real processes:

  ps      kill -9 of one parameter server, started again with the same
          command: it restores the newest complete checkpoint and the
          workers roll the cluster back to it;
  worker  kill -9 of one worker, started again: it rejoins and trains on;
  all     kill -9 of every process at once, all started again: the servers
          restore, the workers roll back.

Models: the tutorial network and ResNet-20 with batch-norm statistics on
the servers and local to the workers (the C++ worker), and a PyTorch
network with batch norm (psgd.torch, model "external"). Optimizers: Adam,
momentum with weight decay, SGD. Modes: sync N=1 of M=2 (a backup worker)
and async. Overlap (wire { overlap }) on and off; shared memory between
the workers and the servers (wire { shared_memory }) on and off. 2 ps,
2 workers, synthetic data, a checkpoint every 10 steps.

The whole cross product (4 x 3 x 2 x 2 x 2 x 3 = 288 cells) does not fit CI's
time, so each fault runs 8 cells that together cover every pair of values
of any two dimensions (model x optimizer, model x mode, model x overlap,
overlap x shared memory, optimizer x mode, ...) across the three faults: `--list` prints them.

The sync cells take their data from the servers (data { sharding: SERVERS
ledger: true record_samples: true }): every shard keeps a ledger of the
chunks it applied and every worker records the samples of each push.

Each cell checks that:
  - every process, restarted ones included, exits 0 and the run ends at
    its step count (summary.json's final_global_step);
  - a restarted server restored the newest checkpoint complete when it
    started, and the state it holds after the restore (weights, running
    statistics, optimizer slots) is that checkpoint's bit for bit: the
    digest it logs equals `ckpt_tool digest` of its file;
  - sync: every shard's ledger joined with the workers' records
    (scripts/ledger_check.py): 0 samples missing, 0 repeated, 0 trained but
    not counted and 0 counted but not trained in the completed epoch (one
    chunk of a killed worker may have no record: ledger_check --killed), no
    repeat in the partial one, and the same chunks on both shards;
  - nothing waited for a timeout it did not need: no worker gave up on
    others joining or leaving, no lease ran out except the killed worker's
    (no lease runs out when the killed worker comes back in time), no call
    gave up on a deadline.
Every wait is for a condition (a step reached, a checkpoint complete, a
process ended), bounded; a cell's processes are killed when it ends.

    fault_matrix.py --fault=ps|worker|all [--cell=NAME] [--list]
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], "psgd") \
    if "TEST_SRCDIR" in os.environ else "bazel-bin"
SOURCES = os.path.join(os.environ["TEST_SRCDIR"], "psgd") \
    if "TEST_SRCDIR" in os.environ else "."
PS_SERVER = os.path.join(RUNFILES, "ps", "ps_server")
WORKER = os.path.join(RUNFILES, "worker", "worker")
CKPT_TOOL = os.path.join(RUNFILES, "ps", "checkpoint", "ckpt_tool")
TORCH_WORKER = os.path.join(SOURCES, "tests", "fault_matrix_torch_worker.py")
CLUSTER_SH = os.path.join(SOURCES, "scripts", "lib", "cluster.sh")
LEDGER_CHECK = os.path.join(SOURCES, "scripts", "ledger_check.py")
PYTHONPATH = os.path.join(RUNFILES, "python", "site")
TMP = os.environ.get("TEST_TMPDIR", "/tmp/fault_matrix")

MODELS = {
    # name: (registry model, batch_norm_statistics)
    "tutorial": ("cifar10_tutorial", None),
    "resnet20-server": ("resnet20", "SERVER"),
    "resnet20-local": ("resnet20", "LOCAL"),
    "torch-bn": ("external", "SERVER"),
}
OPTIMIZERS = {
    "adam": "kind: ADAM learning_rate: 0.001",
    "momentum": "kind: MOMENTUM learning_rate: 0.01 momentum: 0.9 "
                "weight_decay: 5e-4",
    "sgd": "kind: SGD learning_rate: 0.01",
}
MODES = ("sync", "async")
FAULTS = ("ps", "worker", "all")
EVERY = 10       # checkpoint every this many steps
NUM_PS = 2
NUM_WORKERS = 2
BATCH = 16
TRAIN_SIZE = 512  # synthetic training images: 32 chunks an epoch
# Seconds for a whole cell: a hang, not a slow machine (a cell takes 2-15 s
# here). A target runs 8 cells, and 8 x 100 s stays within a large test's
# 900 s, so a hang fails the cell, not the whole target on its timeout.
CELL_TIMEOUT = 100

# What a cell must not see in any log: a wait that ran into its timeout.
TIMEOUT_LINES = (
    "starting without the others",           # the start's wait for workers
    "have not left",                          # the chief's wait at the end
    "did not come back within",               # servers gone for good
    "DEADLINE_EXCEEDED",
    "were not initialised by the chief in time",
)
LEASE_LINE = re.compile(r"worker (\d+) sent nothing for .* left the live set")
RESTORED = re.compile(r"restored checkpoint step-(\d+) \(step \d+, generation "
                      r"\d+, state digest ([0-9a-f]{8})\)")


def cells():
    """Each fault's cells: a covering of the other dimensions' pairs."""
    models, opts = list(MODELS), list(OPTIMIZERS)
    out = []
    for f, fault in enumerate(FAULTS):
        for m, model in enumerate(models):
            for k, mode in enumerate(MODES):
                opt = opts[(f + m + k) % len(opts)]
                overlap = (f + m + k) % 2 == 1
                shm = (m // 2 + f + k) % 2 == 1
                # Half the others carry their tensors over UCX (wire {
                # data_plane: UCX }): two cells per fault, every model in
                # one fault or another.
                ucx = not shm and (m + f) % 2 == 0
                name = f"{fault}-{model}-{opt}-{mode}-" \
                       f"{'overlap' if overlap else 'plain'}" \
                       f"{'-shm' if shm else ''}{'-ucx' if ucx else ''}"
                out.append(dict(name=name, fault=fault, model=model, opt=opt,
                                mode=mode, overlap=overlap, shm=shm, ucx=ucx))
    return out


class CellFailed(Exception):
    pass


def fail(cell, message):
    raise CellFailed(f"{cell['name']}: {message}")


class Cell:
    def __init__(self, cell):
        self.c = cell
        self.dir = os.path.join(TMP, cell["name"])
        subprocess.run(["rm", "-rf", self.dir], check=True)
        os.makedirs(self.dir)
        self.config = os.path.join(self.dir, "cluster.pbtxt")
        self.run_dir = os.path.join(self.dir, "run")
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.procs = {}     # task -> Popen (the current process of the task)
        self.ended = []     # (task, returncode) of processes that ended
        self.steps = 60 if cell["mode"] == "sync" else 120
        model, bn = MODELS[cell["model"]]
        data = (f"source: SYNTHETIC synthetic_train_size: {TRAIN_SIZE} "
                "synthetic_test_size: 128")
        if cell["mode"] == "sync":
            data += " sharding: SERVERS ledger: true record_samples: true"
        keys = [f"mode={cell['mode'].upper()}", f"ps={NUM_PS}",
                f"workers={NUM_WORKERS}", f"batch={BATCH}",
                f"steps={self.steps}", f"model={model}", f"data={data}",
                f"training=optimizer {{ {OPTIMIZERS[cell['opt']]} }}",
                # Every checkpoint stays (keep), so that a restore's file can
                # be read after the run whichever one it was.
                f"extra=checkpoint {{ dir: \"{self.ckpt}\" every_steps: {EVERY} "
                f"keep: 1000 }}",
                f"extra=wire {{ overlap: {str(cell['overlap']).lower()} "
                f"shared_memory: {str(cell['shm']).lower()} "
                f"data_plane: {'UCX' if cell['ucx'] else 'GRPC'} }}",
                # Long enough that no live worker misses one on a loaded
                # machine; a killed worker comes back well within it.
                "extra=worker_lease_seconds: 30",
                "extra=ps_unavailable_timeout_seconds: 120"]
        if cell["mode"] == "sync":
            keys.append("n=1")
        if bn:
            keys.append(f"bn={bn}")
        subprocess.run(["bash", "-c", 'source "$0"; write_cluster_config "$@"',
                        CLUSTER_SH, self.config, cell["name"]] + keys,
                       check=True)

    # --- processes ---------------------------------------------------------
    def start(self, task):
        log = open(os.path.join(self.dir, task.replace(":", "") + ".log"), "a")
        log.write(f"=== {task} started at {time.time():.3f}\n")
        log.flush()
        flags = [f"--config={self.config}", f"--task={task}",
                 f"--run_dir={self.run_dir}"]
        if task.startswith("ps:"):
            argv = [PS_SERVER] + flags
        elif MODELS[self.c["model"]][0] == "external":
            argv = ["/usr/bin/python3", TORCH_WORKER] + flags
            if self.c["mode"] == "sync":
                argv.append("--servers_data")
        else:
            argv = [WORKER] + flags
        env = dict(os.environ, PYTHONPATH=PYTHONPATH)
        self.procs[task] = subprocess.Popen(argv, stdout=log,
                                            stderr=subprocess.STDOUT, env=env)

    def kill(self, task):
        p = self.procs.pop(task)
        if p.poll() is not None:
            fail(self.c, f"{task} had ended (code {p.returncode}) before the "
                         "fault: the run was too short")
        p.send_signal(signal.SIGKILL)
        p.wait()

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def log(self, task):
        with open(os.path.join(self.dir, task.replace(":", "") + ".log")) as f:
            return f.read()

    def all_logs(self):
        return {t: self.log(t) for t in self.tasks()}

    @staticmethod
    def tasks():
        return [f"ps:{i}" for i in range(NUM_PS)] + \
            [f"worker:{j}" for j in range(NUM_WORKERS)]

    # --- conditions --------------------------------------------------------
    def global_step(self):
        best = 0
        for j in range(NUM_WORKERS):
            path = os.path.join(self.run_dir, f"worker-{j}.jsonl")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                for line in f:
                    if '"kind":"train"' in line and line.endswith("\n"):
                        best = max(best, json.loads(line)["step"])
        return best

    def complete(self):
        """Labels of the checkpoints with a MANIFEST, ascending."""
        if not os.path.isdir(self.ckpt):
            return []
        labels = []
        for name in os.listdir(self.ckpt):
            m = re.fullmatch(r"step-(\d+)", name)
            if m and os.path.exists(os.path.join(self.ckpt, name, "MANIFEST")):
                labels.append(int(m.group(1)))
        return sorted(labels)

    def digests(self):
        """(label, shard) -> ckpt_tool's digest, of every complete one."""
        out = {}
        for label in self.complete():
            for i in range(NUM_PS):
                path = os.path.join(self.ckpt, f"step-{label}",
                                    f"shard-{i}-of-{NUM_PS}.ckpt")
                r = subprocess.run([CKPT_TOOL, "digest", path],
                                   capture_output=True, text=True)
                if r.returncode == 0:
                    out[(label, i)] = r.stdout.strip()
        return out

    def await_(self, what, condition, deadline):
        while not condition():
            for task, p in self.procs.items():
                if p.poll() is not None and p.returncode != 0:
                    fail(self.c, f"{task} exited {p.returncode} while waiting "
                                 f"for {what}:\n{self.log(task)[-3000:]}")
            if time.time() > deadline:
                fail(self.c, f"no {what} within {CELL_TIMEOUT} s (a hang)")
            time.sleep(0.05)

    # --- the cell ----------------------------------------------------------
    def run(self):
        deadline = time.time() + CELL_TIMEOUT
        for task in self.tasks():
            self.start(task)
        # The fault comes once a checkpoint past the first is complete and
        # the cluster is past it: a restore has steps to redo.
        self.await_("checkpoint step-10 and step 15",
                    lambda: any(l >= EVERY for l in self.complete())
                    and self.global_step() >= EVERY + 5, deadline)
        fault = self.c["fault"]
        victims = {"ps": ["ps:1"], "worker": ["worker:1"],
                   "all": self.tasks()}[fault]
        for task in victims:
            self.kill(task)
        at_kill = self.global_step()
        # What a restarted server must restore: the newest checkpoint
        # complete now, or a newer one the survivors complete from files the
        # victim had written before it died; each complete one's digests.
        newest_before = max(self.complete())
        expected = self.digests()
        for task in victims:
            self.start(task)
        for task, p in list(self.procs.items()):
            remaining = max(1, deadline - time.time())
            try:
                code = p.wait(remaining)
            except subprocess.TimeoutExpired:
                fail(self.c, f"{task} still running after {CELL_TIMEOUT} s "
                             f"(a hang):\n{self.log(task)[-3000:]}")
            if code != 0:
                fail(self.c, f"{task} exited {code}:\n{self.log(task)[-3000:]}")
        return self.check(victims, newest_before, expected, at_kill)

    def check(self, victims, newest_before, expected, at_kill):
        with open(os.path.join(self.run_dir, "summary.json")) as f:
            summary = json.load(f)
        final = summary["final_global_step"]
        if final < self.steps:
            fail(self.c, f"final step {final} < {self.steps}")
        # (A restarted worker may find the run at its end, or lose every
        # race to the other worker: its steps are not counted, its exit
        # status and the run's end are.)
        logs = self.all_logs()
        restored = []
        for task in victims:
            if not task.startswith("ps:"):
                continue
            shard = int(task.split(":")[1])
            restart = logs[task].split("=== ")[-1]  # the restarted process's
            m = RESTORED.search(restart)
            if m is None:
                fail(self.c, f"{task} restored nothing:\n{restart[-2000:]}")
            label, digest = int(m.group(1)), m.group(2)
            if label < newest_before:
                fail(self.c, f"{task} restored step-{label}, but step-"
                             f"{newest_before} was complete")
            want = expected.get((label, shard))
            if want is None:
                # Completed after the kill from the victim's file: read now.
                path = os.path.join(self.ckpt, f"step-{label}",
                                    f"shard-{shard}-of-{NUM_PS}.ckpt")
                r = subprocess.run([CKPT_TOOL, "digest", path],
                                   capture_output=True, text=True)
                want = r.stdout.strip() if r.returncode == 0 else None
            if digest != want:
                fail(self.c, f"{task} restored step-{label} with state digest "
                             f"{digest}; the checkpoint's file has {want}")
            restored.append(f"{task} step-{label} {digest}")
        for task, text in logs.items():
            for line in TIMEOUT_LINES:
                if line in text:
                    fail(self.c, f"{task} waited for a timeout: "
                                 f"'{line}' in its log")
            if task.startswith("worker:"):
                # Shared memory used with both servers when asked for (every
                # process here is on one machine), and never refused.
                for shard in range(NUM_PS):
                    used = re.search(rf"shard {shard} at \S+: pushes and "
                                     "pulls through shared memory",
                                     text) is not None
                    if used != self.c["shm"]:
                        fail(self.c, f"{task}: shared memory with shard "
                                     f"{shard} {'not ' if not used else ''}"
                                     f"used, but asked for: {self.c['shm']}")
                if "no shared memory (" in text:
                    fail(self.c, f"{task}: a server refused shared memory")
                # Over UCX with both servers when asked for; never without.
                for shard in range(NUM_PS):
                    linked = re.search(rf"shard {shard} at \S+: pushes and "
                                       "pulls over UCX", text) is not None
                    if linked != self.c["ucx"]:
                        fail(self.c, f"{task}: UCX with shard {shard} "
                                     f"{'not ' if not linked else ''}used, "
                                     f"but asked for: {self.c['ucx']}")
                if "go over gRPC" in text:
                    fail(self.c, f"{task}: UCX fell back to gRPC")
            for m in LEASE_LINE.finditer(text):
                fail(self.c, f"{task}: worker {m.group(1)}'s lease ran out "
                             "(a live worker missed it, or the killed one "
                             "was not back in time)")
        if "ps:0" in victims or "ps:1" in victims:
            if summary.get("ps_rollbacks", 0) < 1:
                fail(self.c, "a server restored a checkpoint but the cluster "
                             "did not roll back to it")
        ledgers = ""
        if self.c["mode"] == "sync":
            ledgers = self.check_ledgers(
                final, [int(t.split(":")[1]) for t in victims
                        if t.startswith("worker:")], at_kill)
        return (f"killed {','.join(victims)} at step {at_kill}; final step "
                f"{final}; restored: {', '.join(restored) or '-'}{ledgers}")

    def check_ledgers(self, final, killed_workers, at_kill):
        """Every shard's ledger joined with the workers' records. The epochs
        that must be whole are bounded from below by this test's own
        arithmetic, not by the servers' count: each of the cell's steps
        settles N (1) chunks, so self.steps * N chunks were trained, in the
        queue's order; at the end each worker may hold a chunk, or one a
        dropped push gave back not yet leased again (2 per worker), and a
        killed worker's chunk, leased about at_kill * N, may be out until
        the run ends (the run can end before its restart gives it back).
        Every epoch below the first such chunk's must be whole; if ps:0 says
        fewer were completed, the cell fails; if it says more, those are
        checked as well."""
        ledgers = [os.path.join(self.ckpt, "ledger.jsonl")] + [
            os.path.join(self.ckpt, f"ledger-ps{i}.jsonl")
            for i in range(1, NUM_PS)]
        records = [os.path.join(self.run_dir, f"samples-worker-{j}.jsonl")
                   for j in range(NUM_WORKERS)]
        for path in ledgers + records:
            if not os.path.exists(path):
                fail(self.c, f"no {path}")
        chunks_per_epoch = TRAIN_SIZE // BATCH
        n = 1  # the cell's replicas_to_aggregate (n=1 above)
        out = 2 * NUM_WORKERS
        first_open = self.steps * n - out
        if killed_workers:
            first_open = min(first_open, at_kill * n - out)
        lower = max(0, first_open) // chunks_per_epoch
        with open(os.path.join(self.run_dir, "ps-0.summary.json")) as f:
            claimed = json.load(f)["data_epochs_completed"]
        if claimed > final * n // chunks_per_epoch:
            fail(self.c, f"ps:0 completed {claimed} epochs of {TRAIN_SIZE} "
                         f"samples in {final} steps of {n} x {BATCH}")
        if claimed < lower:
            fail(self.c, f"ps:0 says {claimed} epoch(s) completed; "
                         f"{self.steps} steps of {n} x {BATCH} samples of "
                         f"{TRAIN_SIZE} make at least {lower} whole")
        complete = max(lower, claimed)
        r = subprocess.run(
            ["/usr/bin/python3", LEDGER_CHECK, "--num_samples", str(TRAIN_SIZE),
             "--chunk_size", str(BATCH), "--seed", "1",
             "--complete_epochs", str(complete)] + ledgers +
            [f"--killed={j}" for j in killed_workers] +
            ["--records"] + records, capture_output=True, text=True)
        if r.returncode != 0:
            fail(self.c, f"ledger_check (exit {r.returncode}):\n"
                         f"{r.stdout[-3000:]}{r.stderr[-2000:]}")
        with open(ledgers[0]) as f:
            chunks = sum(1 for line in f if line.strip())
        return (f"; ledgers: {chunks} chunks on each shard, {complete} "
                f"epoch(s) whole (at least {lower} by the steps)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fault", choices=FAULTS)
    parser.add_argument("--cell", help="run this cell only")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    chosen = [c for c in cells()
              if (args.fault is None or c["fault"] == args.fault)
              and (args.cell is None or c["name"] == args.cell)]
    if args.list:
        for c in chosen:
            print(c["name"])
        return 0
    if not chosen:
        print("no such cell", file=sys.stderr)
        return 2
    failures = []
    for c in chosen:
        t0 = time.time()
        cell = Cell(c)
        try:
            what = cell.run()
            print(f"PASS {c['name']} ({time.time() - t0:.1f} s): {what}",
                  flush=True)
        except CellFailed as e:
            print(f"FAIL {e}", flush=True)
            failures.append(c["name"])
        finally:
            cell.stop_all()
    print(f"{len(chosen) - len(failures)} cells passed, {len(failures)} failed"
          + (": " + ", ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
