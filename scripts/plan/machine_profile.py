#!/usr/bin/python3
"""A machine profile: the costs of a psgd cluster's parts, as `key = value`.

One figure a line, `#` starts a comment; keys are dotted names, values
numbers (or, for `model.*.registry`, words). The keys the simulator reads
(cluster_sim.py) and what each means:

  server.stage_ns_per_byte.<wire>    a shard's CPU to check and copy one byte
                                     of a staged push (fp32, bf16, fp16 wire)
  server.sum_ns_per_byte             summing one float32 byte of a gradient
                                     into a step's aggregate (sync)
  server.serve_ns_per_byte.<wire>    a shard's CPU per byte of weights it
                                     serves to a pull
  server.apply_ns_per_param.<opt>    one optimizer update of one parameter
                                     (adam, sgd, momentum)
  server.us_per_message              a shard's CPU per request it handles
                                     (stage, commit, pull, decision)
  transport.<t>.server_ns_per_byte   the transport's CPU on the shard per
                                     byte in or out (grpc, ucx, shm)
  transport.<t>.us_per_message       the transport's CPU per message on the
                                     shard
  transport.<t>.latency_us           one way, per message, beside the link's
                                     own latency
  worker.ns_per_byte.<t>             a worker's CPU per byte it pushes or
                                     pulls over transport t (read only when
                                     the simulation is given the machine's
                                     cores)
  overlap.backward_fraction          with overlap, the part of a step's
                                     compute that the push may overlap
  overlap.forward_fraction           with overlap (sync), the part of the
                                     next compute that the pull may overlap
  model.<name>.parameters            float32 parameters of a registry model
  compute.<model>.<device>_ms.b<batch>  a worker's compute per step

A figure the run needs and the profile lacks is an error naming it
(ProfileError); nothing is guessed.
"""
import math
import os
import re

DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default.profile")
WIRES = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("adam", "sgd", "momentum")
TRANSPORTS = ("grpc", "ucx", "shm")


class ProfileError(ValueError):
    pass


class Profile:
    def __init__(self, values, path="(given)"):
        self.values = dict(values)
        self.path = path

    @classmethod
    def load(cls, path=None):
        path = path or DEFAULT_PATH
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise ProfileError(f"profile {path}: {e.strerror}") from None
        return cls(parse(text, path), path)

    def get(self, key, needed_for=""):
        if key not in self.values:
            why = f" (needed for {needed_for})" if needed_for else ""
            raise ProfileError(f"profile {self.path} lacks '{key}'{why}")
        return self.values[key]

    def has(self, key):
        return key in self.values

    def models(self):
        out = {}
        for k, v in self.values.items():
            m = re.fullmatch(r"model\.([A-Za-z0-9_]+)\.parameters", k)
            if m:
                out[m.group(1)] = int(v)
        return out


def parse(text, path="(text)"):
    values = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, val = line.partition("=")
        key, val = key.strip(), val.strip()
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.]+", key) or not val:
            raise ProfileError(f"{path}:{n}: expected 'key = number', got '{raw.strip()}'")
        try:
            num = float(val)
        except ValueError:
            raise ProfileError(f"{path}:{n}: {key}: '{val}' is not a number") from None
        if not math.isfinite(num) or num < 0:
            raise ProfileError(f"{path}:{n}: {key}: {val} must be a finite number >= 0")
        if key in values:
            raise ProfileError(f"{path}:{n}: {key} is given twice")
        values[key] = num
    return values


def write(path, values, comments):
    """Writes `values` ({key: number}) with `comments` ({key: text}) beside them."""
    lines = ["# psgd machine profile (scripts/plan/machine_profile.py describes the keys)."]
    for k in sorted(values):
        c = comments.get(k)
        lines.append(f"{k} = {values[k]:.6g}" + (f"  # {c}" if c else ""))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
