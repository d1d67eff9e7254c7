#!/usr/bin/python3
"""The nemesis: faults a cluster really meets, on test hosts made of network
namespaces (scripts/run/netns_hosts.sh; docs/RELIABILITY.md, "The
nemesis"). One run is a cluster of 2 ps and 3 workers, one task per host
(PREFIX0 ps:0, PREFIX1 ps:1, PREFIX2 worker:0 the chief, PREFIX3 worker:1,
PREFIX4 worker:2; each ps with a checkpoint directory of its own host), the
servers handing out the data (ledgers, the workers' sample records), lease
3 s, under one or more faults:

  --pause=TASK          SIGSTOP of TASK for longer than a lease, then SIGCONT
  --cut=A:B[:oneway]    the link between two hosts dropped (nft, in A's
                        namespace): both ways, or only A to B. A and B are
                        tasks (ps:0, worker:2), `chief` (worker:0) or, for
                        B, `all` (A from every other host): ps:0:ps:1 (the
                        shards from each other, the workers reach both),
                        worker:1:ps:1 (a worker from one shard), chief:all
  --fill-disk[=ps:I]    ps:I's checkpoint directory (ps:0 by default) is a
                        small tmpfs this script mounts; filled, then freed
  --lose-host=ps:I      ps:I killed (SIGKILL) and its checkpoint directory
                        gone; its host comes back with the copy of that
                        directory taken a while before (a backup: without
                        one nothing on the other hosts holds its shard) and
                        the server is started again: it agrees with the
                        other ps on the newest checkpoint both have
  --slow-disk           needs dm-delay (device-mapper); where the kernel has
                        none it says so and skips

  --mode=sync|async     sync N=2 of 3 (a backup worker) or async (sync)
  --front=cpp|torch     the C++ worker or psgd.torch
                        (tests/fault_matrix_torch_worker.py) (cpp)
  --seed=S              draws each fault's step and length; printed (1)
  --at=STEP --for=SEC   a fault's step and length instead of drawn ones
  --steps=N             the run's steps (sync 240, async 960)
  --suite=ci|all        a set of runs instead (ci: a pairwise subset of
                        fault x mode x front; all: every fault x mode x
                        front); prints the table of results
  --list                the runs of --suite, and exit

A schedule that cannot be met is refused before anything starts (exit 2,
naming it): a task or link that does not exist, a fault at or past the
run's last step, a fault as long as the workers' ps_unavailable_timeout.
Leftovers of an earlier run (its namespaces, its mounts) are cleaned if the
run that made them is gone, and refused by name otherwise.

Each run checks: during each fault the run goes on (steps made) or a log
line names what it waits for; after the heal the affected task makes steps
again (the seconds it took: time to resume); every task (a restarted one
too) exits 0; the run reaches its last step; both shards' ledgers joined
with the workers' sample records (scripts/ledger_check.py) show 0 samples
missing, repeated, trained-but-not-counted or counted-but-not-trained in
the epochs that this script's own arithmetic says are complete (steps x
gradients a step x batch / samples, less one for the chunks still out),
never the servers' summary.

Needs root, iproute2 and nft (scripts/setup.sh); as another user it says
SKIP and exits 0.
"""

import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

if "TEST_SRCDIR" in os.environ:
    RUNFILES = SOURCES = os.path.join(os.environ["TEST_SRCDIR"], "psgd")
else:
    SOURCES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    RUNFILES = os.path.join(SOURCES, "bazel-bin")
PS_SERVER = os.path.join(RUNFILES, "ps", "ps_server")
WORKER = os.path.join(RUNFILES, "worker", "worker")
TORCH_WORKER = os.path.join(SOURCES, "tests", "fault_matrix_torch_worker.py")
CLUSTER_SH = os.path.join(SOURCES, "scripts", "lib", "cluster.sh")
NETNS_HOSTS = os.path.join(SOURCES, "scripts", "run", "netns_hosts.sh")
LEDGER_CHECK = os.path.join(SOURCES, "scripts", "ledger_check.py")
PYTHONPATH = os.path.join(RUNFILES, "python", "site")
TMP = os.environ.get("TEST_TMPDIR", "/tmp/nemesis")
STATE = "/run/psgd-nemesis"
PATH_EXTRA = "/usr/sbin:/sbin"

TASKS = ("ps:0", "ps:1", "worker:0", "worker:1", "worker:2")
LEASE = 3            # worker_lease_seconds
UNAVAILABLE = 120    # ps_unavailable_timeout_seconds
SAMPLES = 512        # the torch worker's training set (32 chunks an epoch)
BATCH = 16
N = 2                # sync: gradients a step (of 3 workers)
STEP_DELAY = 0.03    # seconds a worker step takes at least (stragglers)
RUN_TIMEOUT = 300    # a hang guard for one run, not a timing assertion
FAULT_KINDS = ("pause", "cut", "fill-disk", "lose-host", "slow-disk")


class Refused(Exception):
    """A schedule that cannot be met."""


class RunFailed(Exception):
    pass


def log(msg):
    print(msg, flush=True)


def sh(*argv, check=True, **kw):
    env = dict(os.environ)
    env["PATH"] = env.get("PATH", "") + ":" + PATH_EXTRA
    return subprocess.run(list(argv), check=check, env=env,
                          capture_output=True, text=True, **kw)


# --- the faults ------------------------------------------------------------

def parse_tasks(text, allow_all):
    """'ps:0:ps:1:oneway' -> (['ps:0', 'ps:1'], True)."""
    tokens = text.split(":")
    names, oneway, i = [], False, 0
    while i < len(tokens):
        t = tokens[i]
        if t in ("ps", "worker") and i + 1 < len(tokens):
            names.append(f"{t}:{tokens[i + 1]}")
            i += 2
        elif t == "chief":
            names.append("worker:0")
            i += 1
        elif t == "all" and allow_all:
            names.append("all")
            i += 1
        elif t == "oneway" and i == len(tokens) - 1:
            oneway = True
            i += 1
        else:
            raise Refused(f"'{text}': '{t}' names no task (ps:0, ps:1, "
                          "worker:0..2, chief, all)")
    return names, oneway


class Fault:
    def __init__(self, kind, arg):
        self.kind, self.arg = kind, arg
        self.at = None          # the chief's step it starts at
        self.length = None      # seconds
        self.target = None      # the task whose progress shows the resume
        self.oneway = False
        self.pair = None
        if kind == "pause":
            if arg not in TASKS and arg != "chief":
                raise Refused(f"--pause={arg}: no such task ({', '.join(TASKS)})")
            self.task = "worker:0" if arg == "chief" else arg
            self.target = self.task if self.task.startswith("worker") else "worker:0"
        elif kind == "cut":
            names, self.oneway = parse_tasks(arg or "", allow_all=True)
            if len(names) != 2:
                raise Refused(f"--cut={arg}: a link is two tasks, A:B[:oneway]")
            a, b = names
            if a == "all" or a not in TASKS or (b not in TASKS and b != "all"):
                raise Refused(f"--cut={arg}: no link {a} - {b}: A is a task, "
                              "B a task or all")
            if a == b:
                raise Refused(f"--cut={arg}: there is no link from {a} to itself")
            self.pair = (a, b)
            w = [t for t in (a, b) if t.startswith("worker")]
            self.target = w[0] if w else "worker:0"
        elif kind in ("fill-disk", "lose-host"):
            task = arg or ("ps:0" if kind == "fill-disk" else None)
            if task not in ("ps:0", "ps:1"):
                raise Refused(f"--{kind}={arg}: a ps task (ps:0, ps:1) has a "
                              "checkpoint directory; workers keep none")
            self.task = task
            self.target = "worker:0"
        elif kind == "slow-disk":
            self.task = arg or "ps:0"
            self.target = "worker:0"

    def name(self):
        if self.kind == "cut":
            return f"cut {self.pair[0]}-{self.pair[1]}" + (" oneway" if self.oneway else "")
        if self.kind == "slow-disk":
            return "slow-disk"
        return f"{self.kind} {self.task}"


def slow_disk_possible():
    """dm-delay needs the kernel's device-mapper."""
    try:
        with open("/proc/misc") as f:
            if "device-mapper" not in f.read():
                return False, "the kernel has no device-mapper (dm-delay)"
    except OSError:
        return False, "no /proc/misc"
    r = sh("dmsetup", "targets", check=False)
    if r.returncode != 0 or "delay" not in r.stdout:
        return False, "device-mapper has no delay target (dm-delay)"
    return True, ""


# --- the hosts and leftovers -------------------------------------------------

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def clean_leftovers():
    """Removes what a run that is gone left behind (its namespaces, its
    mounts); refuses, by name, namespaces of the nemesis' prefix that no
    state names."""
    known = set()
    for d in sorted(glob.glob(os.path.join(STATE, "*"))):
        prefix = os.path.basename(d)
        known.add(prefix)
        try:
            pid = int(open(os.path.join(d, "pid")).read())
        except (OSError, ValueError):
            pid = 0
        if pid and alive(pid):
            continue  # another run, still going
        for m in open(os.path.join(d, "mounts")).read().split() \
                if os.path.exists(os.path.join(d, "mounts")) else []:
            sh("umount", "-l", m, check=False)
        sh("bash", NETNS_HOSTS, "down", f"--prefix={prefix}", check=False)
        shutil.rmtree(d, ignore_errors=True)
        log(f"nemesis: cleaned the leftovers of an earlier run (prefix {prefix}, pid {pid})")
    r = sh("ip", "netns", "list", check=False)
    strays = sorted({l.split()[0] for l in r.stdout.splitlines()
                     if re.match(r"^nm[0-9a-f]{4}[0-9]+(\s|$)", l)
                     and l.split()[0][:6] not in known})
    if strays:
        raise Refused("namespaces of the nemesis' prefix that no run of it "
                      f"names are up: {' '.join(strays)}; remove them "
                      "(scripts/run/netns_hosts.sh down --prefix=...)")
    mounts = [l.split()[1] for l in open("/proc/mounts")
              if l.startswith("psgd-nemesis ")]
    owned = set()
    for d in glob.glob(os.path.join(STATE, "*", "mounts")):
        owned.update(open(d).read().split())
    stray = [m for m in mounts if m not in owned]
    if stray:
        raise Refused(f"mounts of an earlier nemesis run are there: {' '.join(stray)}")


class Hosts:
    def __init__(self):
        self.prefix = None
        self.mounts = []

    def up(self):
        os.makedirs(STATE, exist_ok=True)
        for _ in range(10):
            p = "nm%04x" % random.SystemRandom().randrange(65536)
            if os.path.exists(os.path.join(STATE, p)):
                continue
            os.makedirs(os.path.join(STATE, p))
            with open(os.path.join(STATE, p, "pid"), "w") as f:
                f.write(str(os.getpid()))
            r = sh("bash", NETNS_HOSTS, "up", str(len(TASKS)), f"--prefix={p}", check=False)
            if r.returncode == 0:
                self.prefix = p
                return
            shutil.rmtree(os.path.join(STATE, p), ignore_errors=True)
        raise RunFailed("could not make the namespace hosts")

    def host(self, task):
        return f"{self.prefix}{TASKS.index(task)}"

    def address(self, task):
        return f"198.18.0.{10 + TASKS.index(task)}"

    def mount_tmpfs(self, path, size):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(STATE, self.prefix, "mounts"), "a") as f:
            f.write(path + "\n")
        # mode 0700: the servers refuse a ledger in a directory others may
        # write to.
        sh("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "psgd-nemesis", path)
        self.mounts.append(path)

    def down(self):
        for m in self.mounts:
            sh("umount", "-l", m, check=False)
        self.mounts = []
        if self.prefix:
            sh("bash", NETNS_HOSTS, "down", f"--prefix={self.prefix}", check=False)
            shutil.rmtree(os.path.join(STATE, self.prefix), ignore_errors=True)
            self.prefix = None


# --- one run -----------------------------------------------------------------

def last_step(path):
    step = 0
    try:
        with open(path) as f:
            for line in f:
                if not line.endswith("\n") or '"kind":"train"' not in line:
                    continue
                try:
                    step = json.loads(line)["step"]
                except (ValueError, KeyError):
                    pass
    except OSError:
        pass
    return step


def train_count(path):
    try:
        with open(path) as f:
            return sum(1 for l in f if l.endswith("\n") and '"kind":"train"' in l)
    except OSError:
        return 0


class Run:
    def __init__(self, name, faults, mode, front, steps, seed):
        self.name, self.faults, self.mode, self.front = name, faults, mode, front
        self.steps, self.seed = steps, seed
        self.dir = os.path.join(TMP, name)
        self.hosts = Hosts()
        self.procs = {}        # task -> Popen
        self.exits = []        # (task, returncode)
        self.results = []      # per fault: dict

    def p(self, msg):
        log(f"{self.name}: {msg}")

    # paths
    def host_dir(self, task):
        return os.path.join(self.dir, "run", self.hosts.host(task))

    def ckpt(self, task):
        return os.path.join(self.dir, self.hosts.host(task), "ckpt")

    def metrics(self, task):
        return os.path.join(self.host_dir(task), f"worker-{task.split(':')[1]}.jsonl")

    def task_log(self, task):
        return os.path.join(self.dir, task.replace(":", "") + ".log")

    def write_config(self):
        self.config = os.path.join(self.dir, "cluster.pbtxt")
        h = [self.hosts.host(t) for t in TASKS]
        data = (f"source: SYNTHETIC synthetic_train_size: {SAMPLES} "
                "synthetic_test_size: 128 sharding: SERVERS ledger: true "
                "record_samples: true")
        keys = [f"mode={self.mode.upper()}", f"ps_hosts={h[0]},{h[1]}",
                f"worker_hosts={h[2]},{h[3]},{h[4]}", "threads=",
                f"ps_extra=checkpoint_dir: \"{self.dir}/{{host}}/ckpt\"",
                f"batch={BATCH}", f"steps={self.steps}",
                f"data={data}",
                f"extra=stragglers {{ extra_delay {{ kind: CONSTANT shift_seconds: {STEP_DELAY} }} }}",
                "extra=checkpoint { every_steps: 20 keep: 20 }",
                f"extra=worker_lease_seconds: {LEASE}",
                f"extra=ps_unavailable_timeout_seconds: {UNAVAILABLE}"]
        if self.front == "torch":
            keys += ["model=external", "bn=SERVER"]
        else:
            keys += ["model=cifar10_linear"]
        if self.mode == "sync":
            keys.append(f"n={N}")
        sh("bash", "-c", 'source "$0"; write_cluster_config "$@"',
           CLUSTER_SH, self.config, self.name, *keys)

    def start(self, task):
        os.makedirs(self.host_dir(task), exist_ok=True)
        logf = open(self.task_log(task), "a")
        logf.write(f"=== {task} started at {time.time():.3f}\n")
        logf.flush()
        flags = [f"--config={self.config}", f"--task={task}",
                 f"--run_dir={self.host_dir(task)}"]
        if task.startswith("ps:"):
            argv = [PS_SERVER] + flags
        elif self.front == "torch":
            argv = ["/usr/bin/python3", TORCH_WORKER] + flags + ["--servers_data"]
        else:
            argv = [WORKER] + flags
        env = dict(os.environ, PYTHONPATH=PYTHONPATH)
        env["PATH"] = env.get("PATH", "") + ":" + PATH_EXTRA
        self.procs[task] = subprocess.Popen(
            ["ip", "netns", "exec", self.hosts.host(task), "env",
             f"PYTHONPATH={PYTHONPATH}"] + argv,
            stdout=logf, stderr=subprocess.STDOUT, env=env)

    def chief_step(self):
        return last_step(self.metrics("worker:0"))

    def cluster_step(self):
        """The newest step any worker's metrics show (the chief's stop
        while it is cut off)."""
        return max(last_step(self.metrics(t)) for t in TASKS if t.startswith("worker"))

    def await_chief_step(self, step):
        deadline = time.time() + RUN_TIMEOUT
        while self.chief_step() < step:
            if time.time() > deadline:
                raise RunFailed(f"the chief is not at step {step} after {RUN_TIMEOUT} s")
            for t, p in self.procs.items():
                if p.poll() is not None:
                    tail = open(self.task_log(t), errors="replace").readlines()[-5:]
                    raise RunFailed(f"{t} exited {p.returncode} before the chief's step {step}:\n"
                                    + "".join(tail))
            time.sleep(0.05)

    def log_sizes(self):
        return {t: os.path.getsize(self.task_log(t)) for t in TASKS
                if os.path.exists(self.task_log(t))}

    def new_lines(self, since):
        out = []
        for t in TASKS:
            path = self.task_log(t)
            if not os.path.exists(path):
                continue
            with open(path, errors="replace") as f:
                f.seek(since.get(t, 0))
                out += [f"{t}: {l.rstrip()}" for l in f.readlines()]
        return out

    # the faults themselves
    def nft(self, task, *rule):
        r = sh("ip", "netns", "exec", self.hosts.host(task), "nft", *rule, check=False)
        if r.returncode != 0:
            raise RunFailed(f"nft {' '.join(rule)} in {self.hosts.host(task)}: {r.stderr.strip()}")

    def apply(self, f):
        if f.kind == "pause":
            self.procs[f.task].send_signal(signal.SIGSTOP)
        elif f.kind == "cut":
            a, b = f.pair
            others = [t for t in TASKS if t != a] if b == "all" else [b]
            addrs = ", ".join(self.hosts.address(t) for t in others)
            self.nft(a, "add", "table", "inet", "nemesis")
            self.nft(a, "add", "chain", "inet", "nemesis", "out",
                     "{ type filter hook output priority 0; policy accept; }")
            self.nft(a, "add", "rule", "inet", "nemesis", "out", "ip", "daddr",
                     f"{{ {addrs} }}", "drop")
            if not f.oneway:
                self.nft(a, "add", "chain", "inet", "nemesis", "in",
                         "{ type filter hook input priority 0; policy accept; }")
                self.nft(a, "add", "rule", "inet", "nemesis", "in", "ip", "saddr",
                         f"{{ {addrs} }}", "drop")
        elif f.kind == "fill-disk":
            path = os.path.join(self.ckpt(f.task), "nemesis-fill")
            sh("dd", "if=/dev/zero", f"of={path}", "bs=1M", check=False)
            st = os.statvfs(self.ckpt(f.task))
            self.p(f"{f.task}'s checkpoint directory full ({st.f_bavail * st.f_frsize} bytes free)")
        elif f.kind == "lose-host":
            p = self.procs[f.task]
            p.kill()
            p.wait()
            self.exits.append((f.task + " (killed)", 0))
            shutil.rmtree(self.ckpt(f.task))
            self.p(f"{f.task} killed and {self.ckpt(f.task)} gone")

    def heal(self, f):
        if f.kind == "pause":
            self.procs[f.task].send_signal(signal.SIGCONT)
        elif f.kind == "cut":
            self.nft(f.pair[0], "delete", "table", "inet", "nemesis")
        elif f.kind == "fill-disk":
            os.remove(os.path.join(self.ckpt(f.task), "nemesis-fill"))
        elif f.kind == "lose-host":
            # The host comes back with the backup of its checkpoints.
            shutil.copytree(self.backup, self.ckpt(f.task))
            self.start(f.task)

    def run_fault(self, f):
        if f.kind == "lose-host":
            # A backup of the host's checkpoints, some steps before.
            self.await_chief_step(max(1, f.at - 20))
            self.backup = os.path.join(self.dir, "backup-" + f.task.replace(":", ""))
            shutil.copytree(self.ckpt(f.task), self.backup,
                            ignore=shutil.ignore_patterns("*.tmp*"))
            self.p(f"backup of {f.task}'s checkpoints at step {self.chief_step()}: "
                   f"{sorted(os.listdir(self.backup))}")
        self.await_chief_step(f.at)
        sizes = self.log_sizes()
        start_step, t0 = self.cluster_step(), time.time()
        self.p(f"{f.name()} at step {start_step} for {f.length:.1f} s")
        self.apply(f)
        time.sleep(f.length)
        heal_step = self.cluster_step()
        target = self.metrics(f.target)
        target_lines = train_count(target)
        self.heal(f)
        t_heal = time.time()
        self.p(f"healed at step {heal_step} ({heal_step - start_step} steps during the fault)")
        # The run went on, or a log line names what it waits for.
        waits = [l for l in self.new_lines(sizes)
                 if re.search(r"\] \[(warning|error)\]|waiting", l)]
        if heal_step == start_step and not waits:
            raise RunFailed(f"{f.name()}: no step made and no log line says what the run waits for")
        # The affected task makes steps again.
        deadline = t_heal + RUN_TIMEOUT
        resumed = None
        while time.time() < deadline:
            if train_count(target) > target_lines:
                resumed = time.time() - t_heal
                break
            p = self.procs[f.target]
            if p.poll() is not None:
                break
            time.sleep(0.05)
        if resumed is None:
            if self.procs[f.target].poll() is not None and \
                    os.path.exists(os.path.join(self.host_dir("worker:0"), "summary.json")):
                resumed = 0.0  # the run reached its end meanwhile
            else:
                raise RunFailed(f"{f.name()}: {f.target} made no step after the heal")
        self.results.append(dict(fault=f.name(), during=heal_step - start_step,
                                 resume=resumed,
                                 wait=(waits[0][:160] if waits else "")))
        self.p(f"{f.target} made a step {resumed:.2f} s after the heal"
               + (f"; first wait line: {waits[0][:200]}" if waits else ""))

    def go(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.hosts.up()
        try:
            self.write_config()
            for f in self.faults:
                if f.kind == "fill-disk":
                    self.hosts.mount_tmpfs(self.ckpt(f.task), "32m")
            for t in TASKS:
                self.start(t)
            for f in sorted(self.faults, key=lambda f: f.at):
                self.run_fault(f)
            self.finish()
            return self.check()
        finally:
            for p in self.procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    p.wait()
            self.hosts.down()

    def finish(self):
        deadline = time.time() + RUN_TIMEOUT
        for t in ("worker:0", "worker:1", "worker:2", "ps:0", "ps:1"):
            p = self.procs[t]
            try:
                rc = p.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                raise RunFailed(f"{t} still running {RUN_TIMEOUT} s after the faults (a hang)")
            self.exits.append((t, rc))
            if rc != 0:
                tail = open(self.task_log(t), errors="replace").readlines()[-15:]
                raise RunFailed(f"{t} exited {rc}:\n" + "".join(tail))

    def check(self):
        chief = os.path.join(self.host_dir("worker:0"), "summary.json")
        with open(chief) as f:
            final = json.load(f)["final_global_step"]
        if final < self.steps:
            raise RunFailed(f"final step {final} < {self.steps}")
        # Complete epochs by this script's arithmetic: every step applies N
        # gradients (sync; min(N, live) with 3 workers and one away is
        # still N) or one (async), one chunk of BATCH samples each; the
        # chunks still out at the end may hold one epoch open. The run
        # stops at its step limit: a chunk a worker held then (its push
        # waiting on a shard it was cut from, or leased ahead), whichever
        # epoch it is of, is named by that worker's records as its last
        # (--held_at_end; docs/PS.md, "A run that stops at its step limit").
        per_step = N if self.mode == "sync" else 1
        epochs = final * per_step * BATCH // SAMPLES - 1
        if epochs < 1:
            raise RunFailed(f"{final} steps make no complete epoch to check")
        ledgers = [os.path.join(self.ckpt("ps:0"), "ledger.jsonl"),
                   os.path.join(self.ckpt("ps:1"), "ledger-ps1.jsonl")]
        records = sorted(glob.glob(os.path.join(self.dir, "run", "*", "samples-worker-*.jsonl")))
        if len(records) != 3:
            raise RunFailed(f"{len(records)} workers' sample records, not 3")
        r = subprocess.run(
            ["/usr/bin/python3", LEDGER_CHECK, "--num_samples", str(SAMPLES),
             "--chunk_size", str(BATCH), "--seed", "1", "--complete_epochs",
             str(epochs), "--held_at_end"] + ledgers + ["--records"] + records,
            capture_output=True, text=True)
        if r.returncode != 0:
            raise RunFailed(f"ledger_check (exit {r.returncode}), {epochs} complete epochs:\n"
                            f"{r.stdout[-3000:]}{r.stderr[-2000:]}")
        # Samples missing in the complete epochs (the last line of each
        # epoch's count; with several ledgers each is counted).
        # Those of chunks a worker held when the run stopped (--held_at_end)
        # are counted apart.
        counts = re.findall(r"^epoch (\d+): \d+ samples, (\d+) missing, \d+ repeated(.*)$",
                            r.stdout, re.M)
        lost = sum(int(m) for e, m, tail in counts
                   if int(e) < epochs and "held at the end" not in tail)
        held = sum(int(m) for e, m, tail in counts
                   if int(e) < epochs and "held at the end" in tail)
        self.p(f"final step {final}; ledgers: {epochs} complete epoch(s) checked, "
               f"{lost} samples lost, {held} held by a worker when the run stopped; "
               "every task exited 0")
        for line in r.stdout.splitlines():
            if "held at the end" in line:
                self.p(line)
        return dict(steps=final, epochs=epochs, lost=lost if not held else f"{lost} ({held} held at the end)")


# --- schedules and suites ------------------------------------------------------

def schedule(faults, steps, seed, at=None, length=None):
    rng = random.Random(seed)
    for f in faults:
        f.at = at if at is not None else rng.randrange(30, max(31, steps // 4))
        f.length = length if length is not None else round(rng.uniform(LEASE + 2, LEASE + 5), 1)
        if f.at >= steps:
            raise Refused(f"{f.name()} at step {f.at}: the run ends at step {steps} before it")
        if f.kind == "lose-host" and f.at < 25:
            raise Refused(f"{f.name()} at step {f.at}: the backup it is restored "
                          "from is taken 20 steps before, after a checkpoint (every 20)")
        if f.length >= UNAVAILABLE:
            raise Refused(f"{f.name()} for {f.length} s: the workers give up after "
                          f"{UNAVAILABLE} s (ps_unavailable_timeout); a fault as long "
                          "cannot be healed within the run")
    return faults


def default_steps(mode):
    return 240 if mode == "sync" else 960


SUITE_FAULTS = [("pause", "ps:1"), ("pause", "worker:1"), ("cut", "ps:0:ps:1"),
                ("cut", "worker:1:ps:1"), ("cut", "worker:2:ps:0:oneway"),
                ("cut", "chief:all"), ("fill-disk", "ps:0"), ("lose-host", "ps:1")]
MODES = ("sync", "async")
FRONTS = ("cpp", "torch")


def suite(which):
    if which == "all":
        return [(k, a, m, fr) for (k, a) in SUITE_FAULTS for m in MODES for fr in FRONTS]
    # ci: each kind of fault once (a pause, a cut, a full disk, a lost
    # host), each in another of the four mode x front end pairs.
    return [("pause", "ps:1", "sync", "cpp"), ("cut", "chief:all", "sync", "torch"),
            ("fill-disk", "ps:0", "async", "torch"), ("lose-host", "ps:1", "async", "cpp")]


def run_one(kind, arg, mode, front, seed, steps=None, at=None, length=None, name=None):
    steps = steps or default_steps(mode)
    if kind == "slow-disk":
        ok, why = slow_disk_possible()
        if not ok:
            log(f"slow-disk: not possible on this machine: {why}; skipped")
            return None
    faults = schedule([Fault(kind, arg)], steps, seed, at, length)
    name = name or re.sub(r"[^a-z0-9]+", "-", f"{faults[0].name()}-{mode}-{front}").strip("-")
    log(f"=== {name}: seed {seed}, {steps} steps; schedule: " +
        "; ".join(f"{f.name()} at step {f.at} for {f.length} s" for f in faults))
    run = Run(name, faults, mode, front, steps, seed)
    t0 = time.time()
    out = run.go()
    out.update(run.results[0])
    out.update(mode=mode, front=front, seconds=time.time() - t0)
    return out


def table(rows):
    lines = ["| fault | mode | front end | steps | during the fault | time to resume (s) | epochs checked | lost |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['fault']} | {r['mode']} | {r['front']} | FAILED: {r['error'][:80]} | | | | |")
            continue
        lines.append(f"| {r['fault']} | {'sync N=2 of 3' if r['mode'] == 'sync' else 'async'} | "
                     f"{'C++ worker' if r['front'] == 'cpp' else 'psgd.torch'} | {r['steps']} | "
                     f"{r['during']} steps | {r['resume']:.2f} | {r['epochs']} | {r['lost']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pause", action="append", default=[])
    ap.add_argument("--cut", action="append", default=[])
    ap.add_argument("--fill-disk", nargs="?", const="ps:0", action="append", default=[])
    ap.add_argument("--lose-host", action="append", default=[])
    ap.add_argument("--slow-disk", action="store_true")
    ap.add_argument("--mode", choices=MODES, default="sync")
    ap.add_argument("--front", choices=FRONTS, default="cpp")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--at", type=int)
    ap.add_argument("--for", dest="length", type=float)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--suite", choices=("ci", "all"))
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    runs = []
    if args.suite:
        runs = suite(args.suite)
        if args.list:
            for r in runs:
                print(" ".join(r))
            return 0
    else:
        for a in args.pause:
            runs.append(("pause", a, args.mode, args.front))
        for a in args.cut:
            runs.append(("cut", a, args.mode, args.front))
        for a in args.fill_disk:
            runs.append(("fill-disk", a, args.mode, args.front))
        for a in args.lose_host:
            runs.append(("lose-host", a, args.mode, args.front))
        if args.slow_disk:
            runs.append(("slow-disk", None, args.mode, args.front))
        if not runs:
            ap.error("name a fault (--pause, --cut, --fill-disk, --lose-host, --slow-disk) or --suite")
    # Every schedule is checked before anything starts.
    try:
        for i, (k, a, m, fr) in enumerate(runs):
            if k != "slow-disk":
                schedule([Fault(k, a)], args.steps or default_steps(m),
                         args.seed + i, args.at, args.length)
    except Refused as e:
        print(f"nemesis: refused: {e}", file=sys.stderr)
        return 2
    if os.geteuid() != 0 or shutil.which("ip", path=os.environ.get("PATH", "") + ":" + PATH_EXTRA) is None:
        print("SKIP: the nemesis needs root and iproute2 (ip netns); CI runs as root")
        return 0
    if any(k == "cut" for k, *_ in runs) and \
            shutil.which("nft", path=os.environ.get("PATH", "") + ":" + PATH_EXTRA) is None:
        print("nemesis: --cut needs nft (nftables; scripts/setup.sh installs it)", file=sys.stderr)
        return 2
    try:
        clean_leftovers()
    except Refused as e:
        print(f"nemesis: refused: {e}", file=sys.stderr)
        return 2
    rows, failed = [], 0
    for i, (k, a, m, fr) in enumerate(runs):
        try:
            r = run_one(k, a, m, fr, args.seed + i, args.steps, args.at, args.length)
            if r is not None:
                rows.append(r)
        except (RunFailed, Refused) as e:
            failed += 1
            f = Fault(k, a)
            rows.append(dict(fault=f.name(), mode=m, front=fr, error=str(e).splitlines()[0]))
            log(f"FAIL: {f.name()} {m} {fr}: {e}")
    print()
    print(table(rows))
    print(f"\n{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
