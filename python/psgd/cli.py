"""The `psgd` command (the wheel's console script; also `python -m psgd`).

    psgd                      what this installation is (= psgd info)
    psgd info                 the version, the interpreter, the extension, torch
    psgd launch CONFIG ...    every task of a config on this host (or --tasks)
    psgd compare RUN...       report.md and plots of runs
    psgd ledger-check RUN     every sample of each epoch trained on once?
    psgd status CONFIG        each server's state, step and live workers
    psgd ps ARGS...           a parameter server (the installed psgd-ps)
    psgd example NAME ARGS    an example worker program of the install
    psgd example --list       the examples
    psgd ckpt export --torch SOURCE OUT.pt   a checkpoint as a state_dict
    psgd plan ...             plans a cluster by simulation (scripts/plan)
    psgd calibrate ...        a machine profile for the planner from the benches

`psgd COMMAND --help` says each command's arguments. Exit status: 0 when
the command did what it was asked, 2 for bad input (named on stderr), and
otherwise the command's own (launch: the first failed task's).
"""
import argparse
import os
import sys

COMMANDS = {
    "info": "what this installation is: version, interpreter, extension, torch",
    "launch": "every task of a cluster config on this host, or the ones named",
    "compare": "compares runs: report.md and PNG plots",
    "ledger-check": "checks a run's data-queue ledgers with the run's own bounds",
    "status": "each parameter server's state, step and live workers",
    "ps": "runs a parameter server (the installed psgd-ps program)",
    "example": "runs an example worker program of the install (--list)",
    "ckpt": "a checkpoint as a PyTorch state_dict (export --torch), or show / digest",
    "plan": "plans a cluster you do not have: simulates, ranks, writes a config",
    "calibrate": "writes a machine profile for `psgd plan` from ps_bench or ps_bench_cluster.sh",
}

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "examples")


def usage():
    width = max(len(c) for c in COMMANDS)
    lines = ["usage: psgd COMMAND [ARGS...]   (psgd COMMAND --help for each)", "",
             "commands:"]
    lines += [f"  {c:<{width}}  {what}" for c, what in COMMANDS.items()]
    return "\n".join(lines)


def info(argv):
    argparse.ArgumentParser(prog="psgd info", description=COMMANDS["info"]).parse_args(argv)
    import psgd  # pylint: disable=import-outside-toplevel
    from psgd import _build_info  # pylint: disable=import-outside-toplevel
    print(f"psgd {psgd.__version__} ({HERE})")
    print(f"interpreter: {sys.implementation.name} "
          f"{'%d.%d.%d' % sys.version_info[:3]} ({sys.executable})")
    print(f"extension: loads ({psgd._psgd.__file__}), built for "
          f"{_build_info.IMPLEMENTATION} {_build_info.PYTHON_VERSION}")
    try:
        import torch  # pylint: disable=import-outside-toplevel
        print(f"torch: {torch.__version__} ({torch.__file__.rsplit('/', 1)[0]})"
              f", psgd.torch usable")
    except ImportError as e:
        print(f"torch: none ({e}): psgd.Session works, psgd.torch does not")
    return 0


def launch(argv):
    from . import launch as launcher  # pylint: disable=import-outside-toplevel
    return launcher.main(argv, prog="psgd launch")


def compare(argv):
    from . import compare as comparer  # pylint: disable=import-outside-toplevel
    return comparer.main(argv, prog="psgd compare")


def ledger_check(argv):
    from . import ledger_check as checker  # pylint: disable=import-outside-toplevel
    return checker.run_main(argv, prog="psgd ledger-check")


def status(argv):
    p = argparse.ArgumentParser(
        prog="psgd status", description=COMMANDS["status"] + ": each ps task "
        "of the config is asked (its Status, without joining the cluster); "
        "exit 1 when one does not answer.")
    p.add_argument("config", help="the cluster config")
    p.add_argument("--run_dir", help="the run's directory: its token "
                   "(RUN_DIR/token, as psgd launch makes it) unless "
                   "PSGD_TOKEN_FILE is set")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds to wait for each server (default 5)")
    p.add_argument("--json", action="store_true", help="one JSON list instead of lines")
    a = p.parse_args(argv)
    if not os.path.isfile(a.config):
        p.error(f"no config file '{a.config}'")
    if a.timeout <= 0:
        p.error(f"--timeout {a.timeout} is not positive")
    if a.run_dir:
        if not os.path.isdir(a.run_dir):
            p.error(f"--run_dir {a.run_dir} is not a directory")
        os.environ.setdefault("PSGD_TOKEN_FILE", os.path.join(a.run_dir, "token"))
    import psgd  # pylint: disable=import-outside-toplevel
    try:
        shards = psgd._psgd.cluster_status(os.path.abspath(a.config), a.timeout)
    except psgd.Error as e:
        print(f"psgd status: {a.config}: {e}", file=sys.stderr)
        return 2
    if a.json:
        import json  # pylint: disable=import-outside-toplevel
        print(json.dumps(shards, indent=1))
    else:
        for s in shards:
            head = f"{s['task']:<6} {s['address']:<22}"
            if "error" in s:
                refused = s["error"].startswith(("UNAUTHENTICATED", "PERMISSION_DENIED"))
                print(f"{head} {'refuses this call' if refused else 'not answering'}: "
                      f"{s['error']}" + (" (psgd launch's token is RUN_DIR/token: "
                                         "give --run_dir)" if refused and not a.run_dir
                                         else ""))
                continue
            state = "serving" if s["initialized"] else "waiting for the chief to initialise"
            live = s["live_workers"]
            if isinstance(live, (list, tuple)):
                live = f"{len(live)}" + (f" ({', '.join(f'worker:{w}' for w in live)})"
                                         if live else "")
            line = (f"{head} {state}, step {s['step']}, generation {s['generation']}, "
                    f"live workers {live}, applied {s['applied']}, "
                    f"aggregated {s['aggregated']}, dropped "
                    f"{s['dropped_stale'] + s['dropped_surplus']}")
            if "data" in s:
                d = s["data"]
                line += (f", data epoch {d['epoch']} ({d['chunks_done']} of "
                         f"{d['chunks_per_epoch']} chunks done)")
            print(line)
    return 1 if any("error" in s for s in shards) else 0


def ps(argv):
    from . import launch as launcher  # pylint: disable=import-outside-toplevel
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: psgd ps --config=F --task=ps:I [FLAGS...]\n\n"
              "Runs a parameter server: the installed psgd-ps program "
              "(ps/ps_server) with these arguments; `psgd ps --helpfull` "
              "lists its flags (docs/CLUSTER.md).")
        return 0
    path = launcher.installed_command("psgd-ps")
    if path is None:
        print("psgd ps: no psgd-ps program beside this psgd or on PATH "
              "(the wheel installs it into the environment's bin/)", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execv(path, ["psgd-ps", *argv])
    return 1  # not reached


def example_names():
    if not os.path.isdir(EXAMPLES):
        return []
    return sorted(f[:-3] for f in os.listdir(EXAMPLES) if f.endswith(".py"))


def example_summary(name):
    """The first line of the example's docstring."""
    import ast  # pylint: disable=import-outside-toplevel
    with open(os.path.join(EXAMPLES, name + ".py"), encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.strip().split("\n")[0]


def example(argv):
    p = argparse.ArgumentParser(
        prog="psgd example", description=COMMANDS["example"] + ". An example "
        "is a worker program: a config's worker task names it (`program: "
        "\"examples/NAME.py ...\"`, which psgd launch finds in the install), "
        "or run it here with --config, --task and --run_dir.",
        epilog="The arguments after NAME go to the example (NAME --help: its own).")
    p.add_argument("--list", action="store_true", help="the examples, one a line")
    p.add_argument("--path", action="store_true", help="print the example's path")
    p.add_argument("name", nargs="?", help="the example (psgd example --list)")
    p.add_argument("args", nargs="*", help="the example's arguments")
    # Everything after NAME is the example's (its own --help too).
    at = next((i for i, x in enumerate(argv) if not x.startswith("-")), len(argv))
    a = p.parse_args(argv[:at + 1])
    a.args = argv[at + 1:]
    if a.args and a.args[0] == "--path":
        a.path, a.args = True, a.args[1:]
    names = example_names()
    if a.list:
        for n in names:
            print(f"{n:<22} {example_summary(n)}")
        return 0
    if not a.name:
        p.error("name an example (psgd example --list)")
    name = a.name[:-3] if a.name.endswith(".py") else a.name
    if name not in names:
        p.error(f"no example '{a.name}' (examples: {', '.join(names) or 'none installed'})")
    path = os.path.join(EXAMPLES, name + ".py")
    if a.path:
        print(path)
        return 0
    env = dict(os.environ)
    site = os.path.dirname(HERE)
    env["PYTHONPATH"] = site + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, path, *a.args], env)
    return 1  # not reached


def ckpt(argv):
    from . import ckpt as checkpoints  # pylint: disable=import-outside-toplevel
    from . import launch as launcher  # pylint: disable=import-outside-toplevel
    return checkpoints.main(argv, launcher.installed_command("psgd-ckpt"))


def _planner(module, command):
    """The planner's module (scripts/plan/), installed as psgd/plan/ or, in
    the repository, beside python/: its main(argv, prog)."""
    def run(argv):
        here = os.path.join(HERE, "plan")
        if not os.path.isdir(here):
            here = os.path.normpath(os.path.join(HERE, "..", "..", "scripts", "plan"))
        if not os.path.isfile(os.path.join(here, module + ".py")):
            print(f"psgd {command}: the planner is not installed here ({here})",
                  file=sys.stderr)
            return 2
        sys.path.insert(0, here)
        import importlib  # pylint: disable=import-outside-toplevel
        return importlib.import_module(module).main(argv, prog=f"psgd {command}")
    return run


HANDLERS = {"info": info, "launch": launch, "compare": compare,
            "ledger-check": ledger_check, "status": status, "ps": ps,
            "example": example, "ckpt": ckpt, "plan": _planner("plan", "plan"),
            "calibrate": _planner("calibrate", "calibrate")}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        return info([])
    command, rest = argv[0], argv[1:]
    if command in ("-h", "--help", "help"):
        print(usage())
        return 0
    if command not in HANDLERS:
        print(f"psgd: unknown command '{command}'\n{usage()}", file=sys.stderr)
        return 2
    try:
        return HANDLERS[command](rest)
    except KeyboardInterrupt:
        return 130
