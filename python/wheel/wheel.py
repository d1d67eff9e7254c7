#!/usr/bin/python3
"""Packs the built psgd package into a wheel that pip installs.

    wheel.py PACKAGE_DIR OUT_DIR [NAME=PROGRAM ...]

PACKAGE_DIR is `bazel build //python:psgd`'s bazel-bin/python/site/psgd
(the Python modules, _psgd.so and _build_info.py). Writes
OUT_DIR/psgd-VERSION-cpXY-cpXY-linux_x86_64.whl (a zip with the package and
its .dist-info: METADATA, WHEEL, RECORD, as PEP 427 describes) and prints
its path. The tag is the interpreter the extension was built for
(_build_info.py), so pip refuses the wheel on another one. The extension
links Debian's shared gRPC, protobuf, Abseil and oneDNN libraries, which
scripts/setup.sh installs: the wheel is for machines set up that way.
Each NAME=PROGRAM (ps_server, ckpt_tool, cluster_tasks) goes into the
wheel's scripts (psgd-VERSION.data/scripts/), which pip installs, executable,
into the environment's bin/ as psgd-ps, psgd-ckpt and psgd-cluster-tasks.
The `psgd` command (psgd/cli.py: psgd launch, compare, ledger-check, status,
ps, example) is the wheel's console script (entry_points.txt), which pip
writes into bin/ for the interpreter it installs into; the examples
(PACKAGE_DIR/examples/*.py) go into the package as psgd/examples/.
"""

import base64
import hashlib
import os
import platform
import re
import stat
import sys
import zipfile


def fail(message):
    print(f"wheel.py: {message}", file=sys.stderr)
    sys.exit(1)


def read_build_info(package):
    info = {}
    path = os.path.join(package, "_build_info.py")
    try:
        with open(path) as f:
            exec(f.read(), {}, info)  # a file this build wrote
    except OSError as e:
        fail(f"cannot read {path} ({e.strerror}): run `bazel build "
             "//python:psgd` first")
    return info


def read_version(package):
    path = os.path.join(package, "__init__.py")
    with open(path) as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if m is None:
        fail(f"{path} has no __version__ line")
    return m.group(1)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return f"{name},sha256={digest.rstrip(b'=').decode()},{len(data)}"


# The programs a wheel may carry, and their console commands.
COMMANDS = {"ps_server": "psgd-ps", "ckpt_tool": "psgd-ckpt",
            "cluster_tasks": "psgd-cluster-tasks"}


def main():
    if len(sys.argv) < 3:
        fail("usage: wheel.py PACKAGE_DIR OUT_DIR [NAME=PROGRAM ...]")
    package, out_dir = sys.argv[1], sys.argv[2]
    programs = {}
    for arg in sys.argv[3:]:
        name, _, path = arg.partition("=")
        if name not in COMMANDS or not path:
            fail(f"'{arg}' is not NAME=PROGRAM with NAME one of "
                 f"{', '.join(COMMANDS)}")
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            fail(f"{name}: {path} is not an executable file")
        programs[name] = path
    if not os.path.isfile(os.path.join(package, "_psgd.so")):
        fail(f"{package} holds no _psgd.so: run `bazel build //python:psgd` "
             "and pass bazel-bin/python/site/psgd")
    info = read_build_info(package)
    version = read_version(package)
    py = "cp" + info["PYTHON_VERSION"].replace(".", "")
    arch = platform.machine()
    tag = f"{py}-{py}-linux_{arch}"
    dist_info = f"psgd-{version}.dist-info"
    files = {}
    for name in sorted(os.listdir(package)):
        if name.endswith(".py") or name == "_psgd.so":
            with open(os.path.join(package, name), "rb") as f:
                files[f"psgd/{name}"] = f.read()
    examples = os.path.join(package, "examples")
    if not os.path.isdir(examples):
        fail(f"{package} holds no examples/: run `bazel build //python:psgd`")
    # The planner (psgd plan, psgd calibrate): its modules and profile.
    plan = os.path.join(package, "plan")
    if not os.path.isdir(plan):
        fail(f"{package} holds no plan/: run `bazel build //python:psgd`")
    for name in sorted(os.listdir(plan)):
        if name.endswith((".py", ".profile")):
            with open(os.path.join(plan, name), "rb") as f:
                files[f"psgd/plan/{name}"] = f.read()
    for name in sorted(os.listdir(examples)):
        if name.endswith(".py"):
            with open(os.path.join(examples, name), "rb") as f:
                files[f"psgd/examples/{name}"] = f.read()
    for name, path in sorted(programs.items()):
        with open(path, "rb") as f:
            files[f"psgd-{version}.data/scripts/{COMMANDS[name]}"] = f.read()
    files[f"{dist_info}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        "Name: psgd\n"
        f"Version: {version}\n"
        "Summary: A worker of a psgd parameter-server cluster, in Python "
        "(psgd.Session, psgd.torch)\n"
        f"Requires-Python: =={info['PYTHON_VERSION']}.*\n"
        "Requires-Dist: numpy\n"
        "Provides-Extra: torch\n"
        "Requires-Dist: torch ; extra == \"torch\"\n").encode()
    # pip writes bin/psgd from this (python -m psgd is the same command).
    files[f"{dist_info}/entry_points.txt"] = (
        "[console_scripts]\n"
        "psgd = psgd.cli:main\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\n"
        "Generator: psgd python/wheel/wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n").encode()
    record = [record_line(n, d) for n, d in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"psgd-{version}-{tag}.whl")
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            # A regular file's mode (pip makes a file executable only when
            # the type bits say it is a regular file).
            executable = name.endswith(".so") or "/scripts/" in name
            entry.external_attr = (stat.S_IFREG |
                                   (0o755 if executable else 0o644)) << 16
            z.writestr(entry, data, zipfile.ZIP_DEFLATED)
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    main()
