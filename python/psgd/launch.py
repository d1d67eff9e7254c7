"""psgd launch: every task of a cluster config on this machine.

    psgd launch CONFIG [--tasks ps:0,worker:1] [--run_dir DIR] [--bin_dir DIR]
                [--netns] [-- FLAGS...]

Starts the config's tasks (or the ones --tasks names), the servers first,
streams their output with a task prefix ("worker:0 | ..."), and stops them
all on Ctrl-C (SIGINT or SIGTERM: each task gets SIGTERM; exit 130) or as
soon as one fails (the others get SIGTERM, and SIGKILL 10 s later; the exit
status is the first failed task's). Exits 0 when every task exited 0.

Where the programs come from:
  installed (pip)   psgd-ps and psgd-cluster-tasks, the wheel's commands
                    beside this psgd; a worker task without `program:` needs
                    the C++ worker, which the wheel does not carry (--bin_dir)
  --bin_dir=DIR     DIR/ps/ps_server, DIR/worker/worker,
                    DIR/configs/cluster_tasks and the package DIR/python/site
                    (Bazel's output tree: scripts/run/launch.sh builds it and
                    runs this with --bin_dir)

A worker task with a program (WorkerTask.program, e.g. `examples/
torch_cifar10.py --model=resnet20`) runs it instead of the C++ worker, a
`.py` with this Python and the psgd package importable, with --config,
--task and --run_dir (FLAGS go to the C++ programs only). Relative paths
(the program, the config's data.dir and run_root) are taken from the
directory psgd launch runs in; an `examples/NAME.py` that is not there is
the installed package's example (psgd example --list).

Before anything starts, every task's program is checked: a program that
does not exist, a task the config lacks, or a C++ worker this install does
not have is refused by name (exit 2), and nothing is started.

The cluster's token (docs/CLUSTER.md, "Security"): unless PSGD_TOKEN_FILE is
set, every task reads RUN_DIR/token, which the first task to start makes
(0600). A config with its own token or `insecure: true` ignores it.

--netns runs each task inside the network namespace its host names (the
host of its address; scripts/run/netns_hosts.sh makes them), each host's
files in RUN_DIR/HOST/, and samples each host's link every second into
RUN_DIR/HOST/net-HOST.jsonl (netns_sampler.py).

Standard library only: scripts/run/launch.sh runs this file from the
repository with /usr/bin/python3, without the package's extension.
"""
import argparse
import datetime
import os
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# SIGKILL for a task still running this long after its SIGTERM.
KILL_AFTER_S = 10.0


class LaunchError(Exception):
    """Bad input: a message naming it, exit 2, nothing started."""


def installed_command(name):
    """The wheel's command NAME (psgd-ps ...): beside the running psgd
    command or interpreter, in this installation's scripts directory, or on
    PATH; None when none is."""
    dirs = [os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv[0] else "",
            os.path.dirname(sys.executable)]
    for scheme in (None, "posix_user"):
        try:
            dirs.append(sysconfig.get_path("scripts", scheme) if scheme
                        else sysconfig.get_path("scripts"))
        except KeyError:
            pass
    # A `pip install --target DIR`: DIR/bin beside DIR/psgd.
    dirs.append(os.path.join(os.path.dirname(HERE), "bin"))
    for d in dirs:
        path = os.path.join(d, name)
        if d and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(name)


class Programs:
    """The cluster's programs: a Bazel output tree (--bin_dir) or the
    installed commands."""

    def __init__(self, bin_dir=None):
        self.bin_dir = bin_dir
        if bin_dir:
            self.ps = os.path.join(bin_dir, "ps", "ps_server")
            self.worker = os.path.join(bin_dir, "worker", "worker")
            self.cluster_tasks = os.path.join(bin_dir, "configs", "cluster_tasks")
            site = os.path.join(bin_dir, "python", "site")
            self.site = site if os.path.isdir(site) else None
            self.where = f"--bin_dir {bin_dir}"
        else:
            self.ps = installed_command("psgd-ps")
            self.worker = installed_command("psgd-worker")
            self.cluster_tasks = installed_command("psgd-cluster-tasks")
            # The directory that holds this psgd package.
            self.site = os.path.dirname(HERE)
            self.where = "this installation"

    @staticmethod
    def usable(path):
        return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)

    def need(self, path, what, hint):
        if not self.usable(path):
            raise LaunchError(f"{what} is missing from {self.where}"
                              f"{' (' + path + ')' if path else ''}: {hint}")
        return path


def run_tool(programs, config, *args):
    """cluster_tasks' output for CONFIG (the one reader of configs);
    LaunchError with its message when it refuses the config."""
    tool = programs.need(
        programs.cluster_tasks, "psgd-cluster-tasks (configs/cluster_tasks)",
        "install the psgd wheel, or give --bin_dir of a Bazel build")
    r = subprocess.run([tool, f"--config={config}", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise LaunchError(f"{config}: {r.stderr.strip() or 'refused by ' + tool}")
    return r.stdout


def example_path(name):
    """The installed package's example NAME.py (psgd example), or None."""
    path = os.path.join(HERE, "examples", os.path.basename(name))
    return path if os.path.isfile(path) else None


def worker_command(programs, program, task):
    """The command of a worker task: its program (a .py with this Python),
    or the C++ worker; LaunchError when it does not exist here."""
    if not program.strip():
        return [programs.need(
            programs.worker, f"{task} runs the C++ worker (the config gives it no "
            "`program:`), which", "the wheel carries no C++ worker: give the task a "
            "Python program, or run scripts/run/launch.sh from a repository "
            "(which builds //worker:worker)")]
    try:
        words = shlex.split(program)
    except ValueError as e:
        raise LaunchError(f"{task}'s program '{program}' cannot be split into "
                          f"words: {e}") from e
    first = words[0]
    if first.endswith(".py"):
        path = os.path.expanduser(first)
        if not os.path.isfile(path):
            packaged = (example_path(path) if path.startswith("examples/") else None)
            if packaged is None:
                raise LaunchError(
                    f"{task}'s program '{first}' does not exist (relative paths "
                    f"are taken from {os.getcwd()})")
            path = packaged
        return [sys.executable, path, *words[1:]]
    if os.sep in first:
        if not Programs.usable(os.path.expanduser(first)):
            raise LaunchError(f"{task}'s program '{first}' is not an executable "
                              f"file (relative paths are taken from {os.getcwd()})")
        return [os.path.expanduser(first), *words[1:]]
    found = shutil.which(first)
    if found is None:
        raise LaunchError(f"{task}'s program '{first}' is not on PATH")
    return [found, *words[1:]]


def netns_hosts(programs, config, tasks):
    """task -> network namespace (its address's host), each checked."""
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, env=env)
    names = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    hosts = {}
    for line in run_tool(programs, config, "--addresses").splitlines():
        if not line.strip():
            continue
        task, address = line.split()[:2]
        if task not in tasks:
            continue
        host = address.rsplit(":", 1)[0].strip("[]")
        if host not in names:
            raise LaunchError(
                f"--netns: {task}'s host '{host}' (address '{address}') is not a "
                "network namespace here (make them with scripts/run/netns_hosts.sh up N)")
        hosts[task] = host
    return hosts


class Launch:
    """The tasks of one launch, started, streamed, stopped."""

    def __init__(self, prog):
        self.prog = prog
        self.procs = {}      # task -> Popen
        self.readers = []
        self.out_lock = threading.Lock()
        self.stopping = False
        self.interrupted = False
        self.kill_at = None
        self.start_failed = []  # (task, 126) of a program that could not run

    def say(self, message, out=sys.stderr):
        with self.out_lock:
            print(f"{self.prog}: {message}", file=out, flush=True)

    def stream(self, task, pipe):
        prefix = f"{task:<9}| "
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.out_lock:
                sys.stdout.write(prefix + line + "\n")
                sys.stdout.flush()
        pipe.close()

    def start(self, task, command, env):
        try:
            p = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        except OSError as e:
            # As a shell says a program it cannot run: 126; the others stop.
            self.start_failed.append((task, 126))
            self.say(f"{task}: cannot run {command[0]}: {e.strerror}; stopping the others")
            self.stop()
            return
        self.procs[task] = p
        t = threading.Thread(target=self.stream, args=(task, p.stdout), daemon=True)
        t.start()
        self.readers.append(t)

    def signal_all(self, sig):
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    try:
                        p.send_signal(sig)
                    except ProcessLookupError:
                        pass

    def stop(self):
        if not self.stopping:
            self.stopping = True
            self.kill_at = time.monotonic() + KILL_AFTER_S
            self.signal_all(signal.SIGTERM)

    def on_signal(self, signum, _frame):
        self.say("interrupted, stopping every task")
        self.interrupted = True
        self.stop()

    def wait(self):
        """The failed tasks, (task, exit status), the first first."""
        failed = list(self.start_failed)
        running = dict(self.procs)
        while running:
            for task, p in list(running.items()):
                rc = p.poll()
                if rc is None:
                    continue
                del running[task]
                if rc < 0:
                    rc = 128 - rc  # a signal's death, as a shell says it
                if rc != 0:
                    failed.append((task, rc))
                    if not self.stopping:
                        self.say(f"{task} failed with exit status {rc}; stopping the others")
                        self.stop()
                else:
                    self.say(f"{task} exited 0")
            if running:
                if self.kill_at is not None and time.monotonic() >= self.kill_at:
                    self.signal_all(signal.SIGKILL)
                    self.kill_at = None
                time.sleep(0.05)
        for t in self.readers:
            t.join(timeout=5)
        return failed


def parse_args(argv, prog):
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[5:]))
    p.add_argument("config", help="the cluster config (text format)")
    p.add_argument("--tasks", default="",
                   help="the tasks to start, comma-separated (ps:0,worker:1); "
                        "default: every task of the config")
    p.add_argument("--run_dir", help="where the run is written (default "
                   "RUN_ROOT/NAME-TIMESTAMP from the config)")
    p.add_argument("--bin_dir", help="take ps/ps_server, worker/worker, "
                   "configs/cluster_tasks and python/site from this Bazel "
                   "output tree instead of this installation")
    p.add_argument("--netns", action="store_true",
                   help="run each task in the network namespace of its host")
    p.add_argument("flags", nargs="*", metavar="-- FLAGS",
                   help="after --: flags for every psgd-ps and C++ worker")
    if "--" in argv:
        i = argv.index("--")
        args = p.parse_args(argv[:i])
        args.flags = argv[i + 1:]
    else:
        args = p.parse_args(argv)
        if args.flags:
            p.error(f"unexpected argument(s) {' '.join(args.flags)}: one config; "
                    "flags for the programs go after --")
    return args


def main(argv=None, prog="psgd launch"):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv, prog)
    launch = Launch(prog)
    # From the start: a signal before the tasks start starts none.
    previous = {s: signal.signal(s, launch.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run(args, launch)
    except LaunchError as e:
        launch.say(e)
        launch.signal_all(signal.SIGKILL)
        return 130 if launch.interrupted else 2
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(args, launch):
    config = os.path.abspath(os.path.expanduser(args.config))
    if not os.path.isfile(config):
        raise LaunchError(f"no config file '{args.config}'")
    programs = Programs(os.path.abspath(args.bin_dir) if args.bin_dir else None)
    if args.bin_dir and not os.path.isdir(args.bin_dir):
        raise LaunchError(f"--bin_dir {args.bin_dir} is not a directory")
    every = run_tool(programs, config).split()
    tasks = every
    if args.tasks:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
        unknown = [t for t in tasks if t not in every]
        if unknown:
            raise LaunchError(f"--tasks: {', '.join(unknown)} not in {args.config} "
                              f"(its tasks: {', '.join(every)})")
        if len(set(tasks)) != len(tasks):
            raise LaunchError(f"--tasks names a task twice: {args.tasks}")

    # Every command, checked before anything starts.
    commands = {}
    for task in tasks:
        if task.startswith("ps:"):
            commands[task] = [programs.need(
                programs.ps, "psgd-ps (ps/ps_server)",
                "install the psgd wheel, or give --bin_dir of a Bazel build")] + args.flags
        elif task.startswith("worker:"):
            program = run_tool(programs, config, f"--program={task}").strip()
            commands[task] = worker_command(programs, program, task)
            if not program:
                commands[task] += args.flags
        else:
            raise LaunchError(f"'{task}' is neither ps:I nor worker:J")
    hosts = netns_hosts(programs, config, tasks) if args.netns else {}

    run_dir = args.run_dir
    if not run_dir:
        name = run_tool(programs, config, "--field=name").strip()
        root = run_tool(programs, config, "--field=run_root").strip()
        run_dir = os.path.join(
            root, f"{name}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    run_dir = os.path.abspath(os.path.expanduser(run_dir))
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as e:
        raise LaunchError(f"cannot make the run directory {run_dir}: {e.strerror}") from e
    launch.say(f"run directory {run_dir}", out=sys.stdout)

    env = dict(os.environ)
    env.setdefault("PSGD_TOKEN_FILE", os.path.join(run_dir, "token"))
    if programs.site:
        env["PYTHONPATH"] = programs.site + (
            ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # Task output streams through a pipe: Python must not hold it back.
    env["PYTHONUNBUFFERED"] = "1"

    sampler = None
    try:
        if hosts:
            env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
            names = list(dict.fromkeys(hosts.values()))
            sampler = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "netns_sampler.py"),
                 f"--run_dir={run_dir}", f"--hosts={','.join(names)}",
                 f"--parent={os.getpid()}"], env=env)
        # Servers first, so that workers find them listening.
        for task in sorted(tasks, key=lambda t: not t.startswith("ps:")):
            if launch.stopping:
                break
            task_dir = run_dir
            prefix = []
            if task in hosts:
                task_dir = os.path.join(run_dir, hosts[task])
                os.makedirs(task_dir, exist_ok=True)
                prefix = ["ip", "netns", "exec", hosts[task]]
            launch.start(task, prefix + commands[task] + [
                f"--config={config}", f"--task={task}", f"--run_dir={task_dir}"], env)
        failed = launch.wait()
    finally:
        if sampler is not None:
            sampler.terminate()
            sampler.wait()

    if launch.interrupted:
        launch.say(f"stopped by a signal; run directory {run_dir}")
        return 130
    if failed:
        launch.say("failed: " + " ".join(f"{t} (exit {rc})" for t, rc in failed))
        launch.say(f"run directory {run_dir}", out=sys.stdout)
        return failed[0][1]
    launch.say(f"every task exited 0; run directory {run_dir}", out=sys.stdout)
    return 0


if __name__ == "__main__":
    # Run by path (scripts/run/launch.sh): this file's folder, the package's
    # sources, is no place to import from (psgd/torch.py is not torch).
    if sys.path and os.path.abspath(sys.path[0] or ".") == HERE:
        del sys.path[0]
    _argv = sys.argv[1:]
    _prog = "launch.py"
    if _argv and _argv[0].startswith("--prog="):
        _prog = _argv.pop(0)[len("--prog="):]
    sys.exit(main(_argv, prog=_prog))
