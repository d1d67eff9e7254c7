"""`psgd ckpt`: the servers' checkpoints for a PyTorch user.

    psgd ckpt export --torch SOURCE OUT.pt
    psgd ckpt show FILE | psgd ckpt digest FILE     (the installed psgd-ckpt)

`export --torch` writes the model's weights of one checkpoint as a
`state_dict` (torch.save) under the servers' variable names, which for a
psgd.torch worker are the module's own (`named_parameters()`, and with
`model { batch_norm_statistics: SERVER }` the batch norms' `running_mean`
and `running_var`): `module.load_state_dict(torch.load(OUT.pt))` takes it.
Variables the servers cut into row slices are put back together. The
values are the checkpoint's float32 bits. Buffers the servers do not hold
(batch norm's `num_batches_tracked`, each worker's own buffers) are not in
it: load with `strict=False`, which names them as missing keys.

SOURCE: a checkpoint file (DIR/step-S/shard-I-of-N.ckpt: its step), a
step directory (DIR/step-S), a checkpoint directory (its newest step that
every shard completed), or a run directory (its config.pbtxt's
checkpoint { dir }). Optimizer slots are not exported.
"""
import argparse
import json
import os
import re
import subprocess
import sys

SHARD_FILE = re.compile(r"^shard-(\d+)-of-(\d+)\.ckpt$")
STEP_DIR = re.compile(r"^step-(\d+)$")


class CkptError(Exception):
    """Bad input, named: exit status 2."""


def _shard_files(step_dir):
    """The shard files of a step directory, if every shard's is there."""
    found, total = {}, None
    for name in os.listdir(step_dir):
        m = SHARD_FILE.match(name)
        if m:
            found[int(m.group(1))] = os.path.join(step_dir, name)
            total = int(m.group(2))
    if total is None or sorted(found) != list(range(total)):
        return None
    return [found[i] for i in range(total)]


def _newest_complete_step(ckpt_dir):
    steps = []
    for name in os.listdir(ckpt_dir):
        m = STEP_DIR.match(name)
        path = os.path.join(ckpt_dir, name)
        if m and os.path.isdir(path):
            steps.append((int(m.group(1)), path))
    for _step, path in sorted(steps, reverse=True):
        files = _shard_files(path)
        if files:
            return files
    return None


def shard_files(source):
    """The shard files of the checkpoint SOURCE names (see the module)."""
    if os.path.isfile(source):
        if not SHARD_FILE.match(os.path.basename(source)):
            raise CkptError(f"{source} is not a shard's checkpoint file "
                            "(shard-I-of-N.ckpt)")
        step_dir = os.path.dirname(os.path.abspath(source))
        files = _shard_files(step_dir)
        if files is None:
            raise CkptError(f"{step_dir} does not hold every shard's file")
        return files
    if not os.path.isdir(source):
        raise CkptError(f"no checkpoint file or directory {source}")
    if STEP_DIR.match(os.path.basename(os.path.normpath(source))):
        files = _shard_files(source)
        if files is None:
            raise CkptError(f"{source} does not hold every shard's file")
        return files
    config = os.path.join(source, "config.pbtxt")
    if os.path.isfile(config):
        from . import config_text  # pylint: disable=import-outside-toplevel
        with open(config) as f:
            ckpt_dir = config_text.get(config_text.parse(f.read()), "checkpoint.dir")
        if not ckpt_dir:
            raise CkptError(f"the run {source} has no checkpoint {{ dir }} in "
                            "its config.pbtxt: it kept no checkpoints")
        source = ckpt_dir
        if not os.path.isdir(source):
            raise CkptError(f"the run's checkpoint directory {source} is not there")
    files = _newest_complete_step(source)
    if files is None:
        raise CkptError(f"{source} holds no step-S directory with every "
                        "shard's file")
    return files


def read_shard(ckpt_tool, path):
    """(header, {name: bytes}) of one shard's checkpoint, decoded by
    psgd-ckpt (every checksum checked)."""
    r = subprocess.run([ckpt_tool, "tensors", path], capture_output=True)
    if r.returncode != 0:
        raise CkptError(f"{path}: {r.stderr.decode(errors='replace').strip()}")
    head, _, data = r.stdout.partition(b"\n")
    header = json.loads(head)
    values, offset = {}, 0
    for t in header["tensors"]:
        n = 4
        for d in t["shape"]:
            n *= d
        values[t["name"]] = data[offset:offset + n]
        offset += n
    if offset != len(data):
        raise CkptError(f"{path}: {len(data)} bytes of values where the "
                        f"tensors take {offset}")
    return header, values


def state_dict(files, ckpt_tool):
    """{name: torch.Tensor} of the shards' files, slices put back together,
    and the step."""
    import torch  # pylint: disable=import-outside-toplevel
    whole, slices, steps = {}, {}, set()
    for path in files:
        header, values = read_shard(ckpt_tool, path)
        steps.add(header["step"])
        for t in header["tensors"]:
            tensor = torch.frombuffer(bytearray(values[t["name"]]),
                                      dtype=torch.float32).reshape(t["shape"])
            if t["slice_of"] is None:
                whole[t["name"]] = tensor
            else:
                slices.setdefault(t["slice_of"], []).append((t["row_begin"], tensor))
    if len(steps) != 1:
        raise CkptError(f"the shards' files are of steps {sorted(steps)}")
    for name, parts in slices.items():
        parts.sort(key=lambda p: p[0])
        rows = 0
        for begin, t in parts:
            if begin != rows:
                raise CkptError(f"variable {name}: its slices start at rows "
                                f"{[b for b, _ in parts]}: one is missing")
            rows += t.shape[0]
        whole[name] = torch.cat([t for _, t in parts], dim=0)
    return whole, steps.pop()


def export_torch(source, out, ckpt_tool):
    import torch  # pylint: disable=import-outside-toplevel
    files = shard_files(source)
    sd, step = state_dict(files, ckpt_tool)
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise CkptError(f"no directory {directory} for {out}")
    tmp = f"{out}.tmp.{os.getpid()}"
    torch.save(sd, tmp)
    os.replace(tmp, out)
    params = sum(t.numel() for t in sd.values())
    print(f"wrote {out}: {len(sd)} tensors, {params:,} values, step {step} "
          f"({len(files)} shard file(s) of {os.path.dirname(files[0])})")


def main(argv, ckpt_tool=None):
    p = argparse.ArgumentParser(
        prog="psgd ckpt", description="the servers' checkpoints: export one "
        "as a PyTorch state_dict, or show / digest a shard's file")
    sub = p.add_subparsers(dest="verb", required=True)
    e = sub.add_parser("export", help="a checkpoint as a PyTorch state_dict",
                       description=__doc__.split("\n\n", 2)[2])
    e.add_argument("--torch", action="store_true", required=True,
                   help="as a torch.save'd state_dict (the one format)")
    e.add_argument("source", help="a checkpoint file, step directory, "
                   "checkpoint directory or run directory")
    e.add_argument("out", help="the .pt file to write")
    for verb in ("show", "digest"):
        v = sub.add_parser(verb, help=f"psgd-ckpt {verb} FILE")
        v.add_argument("file")
    a = p.parse_args(argv)
    if ckpt_tool is None:
        print("psgd ckpt: no psgd-ckpt program beside this psgd or on PATH "
              "(the wheel installs it into the environment's bin/)", file=sys.stderr)
        return 2
    if a.verb in ("show", "digest"):
        return subprocess.run([ckpt_tool, a.verb, a.file]).returncode
    try:
        export_torch(a.source, a.out, ckpt_tool)
    except CkptError as err:
        print(f"psgd ckpt export: {err}", file=sys.stderr)
        return 2
    return 0
