"""What the scripts share for reading cluster configs: configs/cluster_tasks,
the real loader (common/cluster_config), asked for a config's tasks and
fields. No script parses a config's text itself.

    sys.path.insert(0, ".../scripts/lib"); import configs
    configs.tasks("c.pbtxt")          # [("ps:0", "h0:2222"), ...]
    configs.field("c.pbtxt", "name")  # also run_root, mode, checkpoints,
                                      # max_workers
    configs.program("c.pbtxt", "worker:1")  # WorkerTask.program, or ""

The binary: the one given, else configs/cluster_tasks under the repository
root (a test's runfiles, or a --bin_dir-style tree), else bazel-bin's, else
it is built (bazel build //configs:cluster_tasks). Every refusal of the
loader is a ConfigError carrying its message (file, line and field).
"""
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class ConfigError(Exception):
    pass


def binary(given=None):
    """The path of cluster_tasks (see the module's docstring)."""
    if given:
        return given
    candidates = [os.path.join(ROOT, "configs", "cluster_tasks"),
                  os.path.join(ROOT, "bazel-bin", "configs", "cluster_tasks")]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    r = subprocess.run(["bazel", "build", "//configs:cluster_tasks"], cwd=ROOT,
                       stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0 or not os.path.isfile(candidates[1]):
        raise ConfigError("configs/cluster_tasks is not built and `bazel build "
                          "//configs:cluster_tasks` failed")
    return candidates[1]


def _run(config, flags, tool):
    try:
        r = subprocess.run([binary(tool), f"--config={config}"] + flags,
                           capture_output=True, text=True)
    except OSError as e:
        raise ConfigError(f"cannot run cluster_tasks: {e.strerror}")
    if r.returncode != 0:
        raise ConfigError(r.stderr.strip() or f"cluster_tasks exited {r.returncode}")
    return r.stdout


def tasks(config, tool=None):
    """[(task, address)] of a validated config, the ps tasks first."""
    return [tuple(line.split(" ", 1)) for line in
            _run(config, ["--addresses"], tool).splitlines() if line]


def field(config, name, validate=True, tool=None):
    """One field of the config: name, run_root, mode, checkpoints (none,
    shared, per_task) or max_workers (max_workers, else the listed workers'
    count). validate=False (name only) parses without the loader's
    checks."""
    flags = [f"--field={name}"] + ([] if validate else ["--novalidate"])
    return _run(config, flags, tool).strip()


def program(config, task, tool=None):
    """The worker program of worker task `task` ("worker:J"):
    WorkerTask.program, "" for the C++ worker."""
    return _run(config, [f"--program={task}"], tool).strip()
