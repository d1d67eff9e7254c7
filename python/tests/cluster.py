"""Real ps_server processes for the Python tests: a config written by
scripts/lib/cluster.sh (write_cluster_config, the one config writer), the ps
tasks started and stopped, workers as psgd.Sessions or psgd.torch loops on
threads of this process (the session releases the GIL while it waits) or
C++ worker processes.

Under bazel test the binaries and the psgd package come from the runfiles;
run by hand from the workspace root they come from bazel-bin.
"""

import json
import os
import subprocess
import threading
import time

_RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], "psgd") \
    if "TEST_SRCDIR" in os.environ else "bazel-bin"
_SOURCES = os.path.join(os.environ["TEST_SRCDIR"], "psgd") \
    if "TEST_SRCDIR" in os.environ else "."
PS_SERVER = os.path.join(_RUNFILES, "ps", "ps_server")
WORKER = os.path.join(_RUNFILES, "worker", "worker")
CKPT_TOOL = os.path.join(_RUNFILES, "ps", "checkpoint", "ckpt_tool")
CLUSTER_SH = os.path.join(_SOURCES, "scripts", "lib", "cluster.sh")
TMP = os.environ.get("TEST_TMPDIR", "/tmp")


class Cluster:
    """ps tasks of a fresh config; stop() (or `with`) kills them.

    Keys as write_cluster_config's (scripts/lib/cluster.sh): mode, ps,
    workers, n, batch, steps, training, model, data, extra (a list).
    """
    _count = 0

    @staticmethod
    def tmp():
        """A fresh directory for the test's own files."""
        Cluster._count += 1
        path = os.path.join(TMP, f"files-{Cluster._count}")
        os.makedirs(path, exist_ok=True)
        return path

    def __init__(self, name, **keys):
        Cluster._count += 1
        self.dir = os.path.join(TMP, f"{name}-{Cluster._count}")
        os.makedirs(self.dir, exist_ok=True)
        self.config = os.path.join(self.dir, "cluster.pbtxt")
        self.run_dir = os.path.join(self.dir, "run")
        args = []
        for k, v in keys.items():
            for one in (v if isinstance(v, list) else [v]):
                args.append(f"{k}={one}")
        subprocess.run(["bash", "-c",
                        'source "$0"; write_cluster_config "$@"', CLUSTER_SH,
                        self.config, name] + args, check=True)
        self.num_ps = int(keys.get("ps", 1))
        self.procs = []
        for i in range(self.num_ps):
            self.procs.append(self.start(PS_SERVER, f"ps:{i}"))

    def start(self, binary, task):
        """`binary` as `task` of the config, its output in DIR/TASK.log
        (appended to: a restarted task keeps the log of the one before)."""
        with open(os.path.join(self.dir, task.replace(":", "") + ".log"),
                  "a") as log:
            return subprocess.Popen(
                [binary, f"--config={self.config}", f"--task={task}",
                 f"--run_dir={self.run_dir}"],
                stdout=log, stderr=subprocess.STDOUT)

    def start_cpp_worker(self, j):
        p = self.start(WORKER, f"worker:{j}")
        self.procs.append(p)
        return p

    def config_copy(self, old, new):
        """A copy of the config with `old` replaced by `new` (the tasks
        started read the original)."""
        with open(self.config) as f:
            text = f.read()
        assert old in text, (old, text)
        path = os.path.join(self.dir, f"edited-{len(os.listdir(self.dir))}.pbtxt")
        with open(path, "w") as f:
            f.write(text.replace(old, new))
        return path

    def log(self, task):
        with open(os.path.join(self.dir, task.replace(":", "") + ".log")) as f:
            return f.read()

    def summary(self, name="summary.json"):
        with open(os.path.join(self.run_dir, name)) as f:
            return json.load(f)

    def lines(self, j):
        with open(os.path.join(self.run_dir, f"worker-{j}.jsonl")) as f:
            return [json.loads(l) for l in f if l.strip()]

    def wait_ps(self, timeout=60):
        """The ps processes' exit codes (they exit when the chief shuts
        them down)."""
        deadline = time.time() + timeout
        codes = []
        for p in self.procs[:self.num_ps]:
            codes.append(p.wait(max(1, deadline - time.time())))
        return codes

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def run_threads(fns, timeout=120):
    """Runs each fn on a thread of its own; their results, in order. An
    exception in one is raised here (after all have ended or timed out)."""
    results = [None] * len(fns)
    errors = [None] * len(fns)

    def run(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i, fn), daemon=True)
               for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    deadline = time.time() + timeout
    for t in threads:
        t.join(max(0.1, deadline - time.time()))
    if any(t.is_alive() for t in threads):
        raise TimeoutError(f"workers still running after {timeout} s")
    for e in errors:
        if e is not None:
            raise e
    return results


def separable_batches(seed, n, batch=16):
    """`n` batches of `batch` (inputs (batch, 8), labels in 0..2) of three
    separable classes, from `seed`: the small data of the torch tests."""
    import torch  # pylint: disable=import-outside-toplevel
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(3, 8, generator=g) * 3
    out = []
    for _ in range(n):
        y = torch.randint(0, 3, (batch,), generator=g)
        out.append((centers[y] + torch.randn(batch, 8, generator=g), y))
    return out
