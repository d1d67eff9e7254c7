#!/usr/bin/python3
"""What the scripts share for reading runs: a run directory's files as one
object (the llm.c habit of dev/data/data_common.py: one reader, imported by
every script that needs it).

    sys.path.insert(0, ".../scripts/lib"); from runs import Run, RunError

A run directory is what a cluster (scripts/run/launch.sh) or train_local
wrote; scripts/run/compare.py's docstring lists its files. A run gathered
from several hosts may keep each host's or task's files in a folder of its
own (RUN_DIR/h0/, RUN_DIR/h1/, ...): the files of RUN_DIR and of its
sub-folders are read as one run, and a file name found in two folders is an
error. Used by compare.py, trace.py, experiments/bandwidth_report.py (and so
overlap_report.py) and experiments/batch_sweep_report.py.

As a command, for shell scripts that follow one task's metrics while it
runs (scripts/lib/cluster.sh's last_step, tests/cluster_test_lib.sh's
mean_loss):

    runs.py last-step FILE              the step of FILE's last complete
                                        train line (0 when none)
    runs.py mean-loss FILE first|last N the mean loss of FILE's first or
                                        last N train lines

No third-party imports: the reports import matplotlib, the reader does not.
"""
import collections
import json
import os
import re
import sys


class RunError(Exception):
    pass


# The metrics files of a run directory (compare.py's docstring): the
# workers' and servers' lines, the hosts' link counters, train_local's
# metrics. Other .jsonl files a run directory may hold are not metrics:
# samples-worker-J.jsonl (data { record_samples: true }: one line per push,
# its samples), the servers' ledgers (ledger.jsonl, ledger-psK.jsonl, in a
# checkpoint folder).
METRICS_FILE = re.compile(r"(worker-\d+|ps-\d+|net-.+|metrics)\.jsonl")


class Run:
    """The metrics of one run directory."""

    def __init__(self, path):
        self.path = path.rstrip("/")
        self.name = os.path.basename(self.path)
        self.steps = []    # step lines of every worker, by wall time
        self.evals = []    # eval lines, by wall time
        self.servers = []  # server lines
        self.net = collections.defaultdict(list)  # host -> net lines
        self.summary = {}
        self.mode = "local"
        self._load()

    def _load(self):
        if not os.path.isdir(self.path):
            raise RunError(f"{self.path}: not a directory")
        found = {}  # file name -> folder
        folders = [self.path] + sorted(
            os.path.join(self.path, d) for d in os.listdir(self.path)
            if os.path.isdir(os.path.join(self.path, d)))
        for folder in folders:
            for f in sorted(os.listdir(folder)):
                if not (METRICS_FILE.fullmatch(f)
                        or f in ("summary.json", "config.pbtxt")):
                    continue
                if f in found:
                    raise RunError(f"{self.path}: {f} is in both {found[f]} and "
                                   f"{folder}: one task's files per folder")
                found[f] = folder
        files = sorted(f for f in found if f.endswith(".jsonl"))
        self.files = found
        if not files:
            raise RunError(f"{self.path}: no .jsonl metrics files")
        for f in files:
            task = f[:-len(".jsonl")]
            with open(os.path.join(found[f], f)) as fh:
                for lineno, line in enumerate(fh, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as e:
                        # A task killed mid-write leaves a partial last line.
                        print(f"{os.path.basename(sys.argv[0])}: {f}:{lineno}: skipped: {e}",
                              file=sys.stderr)
                        continue
                    rec.setdefault("task", task)
                    kind = rec.get("kind", "train")
                    if kind in ("train", "step"):
                        self.steps.append(rec)
                    elif kind == "eval":
                        self.evals.append(rec)
                    elif kind == "server":
                        self.servers.append(rec)
                    elif kind == "net":
                        self.net[rec["host"]].append(rec)
        if not self.steps:
            raise RunError(f"{self.path}: no training-step lines in {', '.join(files)}")
        self.steps.sort(key=lambda r: r.get("wall_time_s", 0.0))
        for recs in self.net.values():
            recs.sort(key=lambda r: r["unix_time"])
        self.evals.sort(key=lambda r: r.get("wall_time_s", 0.0))
        summary = os.path.join(found.get("summary.json", self.path), "summary.json")
        if os.path.exists(summary):
            with open(summary) as fh:
                self.summary = json.load(fh)
        self.mode = self.summary.get("mode") or self._mode_from_config()
        # Emulated compute (docs/STRAGGLERS.md): its step lines say so, and
        # every report that names the run must too.
        self.emulated = any(s.get("emulated") for s in self.steps)

    def _mode_from_config(self):
        cfg = os.path.join(self.files.get("config.pbtxt", self.path), "config.pbtxt")
        if os.path.exists(cfg):
            with open(cfg) as fh:
                for line in fh:
                    if "mode:" in line and "ASYNC" in line:
                        return "async"
            return "sync"
        return "local"

    def config_fields(self):
        """The settings of config.pbtxt that tell runs apart (model, where
        its batch norm statistics live, N, M, batch, learning rate, schedule,
        staleness controls, wire), as text; "–" for one the config leaves at
        its default. The model of a run without a config (train_local) is
        its summary's."""
        cfg = os.path.join(self.files.get("config.pbtxt", self.path), "config.pbtxt")
        text = ""
        if os.path.exists(cfg):
            with open(cfg) as fh:
                text = fh.read()
        text = re.sub(r"#[^\n]*", "", text)
        model_block = re.search(r"\bmodel\s*\{([^}]*)\}", text)
        model_text = model_block.group(1) if model_block else ""

        def model_field(name):
            m = re.search(r"\b" + name + r"\s*:\s*\"?([^\s\"}]+)", model_text)
            return m.group(1) if m else None

        def field(name, default="–"):
            m = re.search(r"\b" + name + r"\s*:\s*\"?([^\s\"}]+)", text)
            return m.group(1) if m else default

        workers = str(len(self.workers()))
        schedule = "–"
        if re.search(r"\bschedule\s*\{", text):
            parts = []
            if field("base_batch_size") != "–":
                parts.append(f"x batch/{field('base_batch_size')}")
            if field("warmup_steps") != "–":
                parts.append(f"warmup {field('warmup_steps')}")
            if field("decay") != "–":
                parts.append(field("decay").lower())
            schedule = ", ".join(parts) or "constant"
        wire = "–"
        if re.search(r"\bwire\s*\{", text):
            wire = f"{field('gradients', 'FP32')}/{field('weights', 'FP32')}"
        model = model_field("name") or self.summary.get("model") or "–"
        return {
            "model": str(model),
            "batch norm": model_field("batch_norm_statistics") or "–",
            "N": field("replicas_to_aggregate", workers if self.mode == "sync" else "1"),
            "M": field("total_num_replicas", workers),
            "batch": field("batch_size", "128"),
            "lr": field("learning_rate", "0.001"),
            "schedule": schedule,
            "staleness bound": field("staleness_bound"),
            "max push staleness": field("max_push_staleness"),
            "lr / staleness": field("lr_scaled_by_staleness"),
            "DC-ASGD λ": field("dc_asgd_lambda"),
            "async β1": field("async_beta1"),
            "wire": wire,
        }

    @property
    def label(self):
        return f"{self.name} ({self.mode}{', emulated' if self.emulated else ''})"

    def workers(self):
        return sorted({r["task"] for r in self.steps})

    def duration(self):
        return max(r.get("wall_time_s", 0.0) for r in self.steps + self.evals)

    def final_accuracy(self):
        if self.summary.get("final_test_accuracy") is not None:
            return self.summary["final_test_accuracy"]
        return self.evals[-1]["test_accuracy"] if self.evals else None

    def train_examples(self):
        """The training set's size (cluster workers write it on their step
        lines), or None."""
        for r in reversed(self.steps):
            n = r.get("train_examples")
            if isinstance(n, (int, float)) and n > 0:
                return n
        return None

    def eval_epochs(self):
        """(epochs, test accuracy) of each eval: the epoch an eval line
        carries (train_local), else the images every worker had taken up to
        the eval's time over the training set's size. Empty when neither is
        known."""
        n = self.train_examples()
        out, i, images = [], 0, 0
        for e in self.evals:
            while i < len(self.steps) and self.steps[i].get("wall_time_s", 0.0) <= e["wall_time_s"]:
                images += self.steps[i].get("batch_size") or 0
                i += 1
            if isinstance(e.get("epoch"), (int, float)):
                out.append((float(e["epoch"]), e["test_accuracy"]))
            elif n:
                out.append((images / n, e["test_accuracy"]))
        return out

    def epochs(self):
        """Epochs over the training set that the run's workers took in all."""
        n = self.train_examples()
        if n:
            return sum(r.get("batch_size") or 0 for r in self.steps) / n
        ee = self.eval_epochs()
        return ee[-1][0] if ee else None

    def time_to(self, target):
        for r in self.evals:
            if r["test_accuracy"] >= target:
                return r["wall_time_s"]
        return None

    def mean(self, key):
        vals = [r[key] for r in self.steps if isinstance(r.get(key), (int, float))]
        return sum(vals) / len(vals) if vals else None

    def total_images_per_s(self):
        """Images per second of all workers together."""
        per_worker = collections.defaultdict(list)
        for r in self.steps:
            if isinstance(r.get("images_per_s"), (int, float)):
                per_worker[r["task"]].append(r["images_per_s"])
        if not per_worker:
            return None
        return sum(sum(v) / len(v) for v in per_worker.values())

    def link_rates(self):
        """Per host: (mean sent B/s, mean received B/s, peak sent+received
        over 1 s... of the samples, cap in bit/s) over the run."""
        rates = {}
        for host, recs in sorted(self.net.items()):
            if len(recs) < 2:
                continue
            dt = recs[-1]["unix_time"] - recs[0]["unix_time"]
            tx = (recs[-1]["tx_bytes"] - recs[0]["tx_bytes"]) / dt
            rx = (recs[-1]["rx_bytes"] - recs[0]["rx_bytes"]) / dt
            peak = 0.0
            for a, b in zip(recs, recs[1:]):
                d = b["unix_time"] - a["unix_time"]
                if d > 0:
                    peak = max(peak, max(b["tx_bytes"] - a["tx_bytes"],
                                         b["rx_bytes"] - a["rx_bytes"]) / d)
            rates[host] = (tx, rx, peak, recs[-1].get("cap_bits_per_s", 0))
        return rates

    def payload_rates(self):
        """Per task: mean payload bytes/s sent and received (sent_bytes and
        received_bytes of its step lines, and of a server's lines, which
        count since the line before, over the task's time)."""
        per = collections.defaultdict(lambda: [0, 0, None, None])
        servers = sorted(self.servers, key=lambda r: (r["task"], r.get("wall_time_s", 0.0)))
        last_server_time = {}
        for r in list(self.steps) + servers:
            if "sent_bytes" not in r:
                continue
            p = per[r["task"]]
            p[0] += r["sent_bytes"]
            p[1] += r.get("received_bytes", 0)
            t = r.get("wall_time_s", 0.0)
            if r.get("kind") == "server":
                start = last_server_time.get(r["task"], 0.0)
                last_server_time[r["task"]] = t
            else:
                start = t - r.get("step_s", 0.0)
            p[2] = start if p[2] is None else min(p[2], start)
            p[3] = t if p[3] is None else max(p[3], t)
        return {task: (p[0] / (p[3] - p[2]), p[1] / (p[3] - p[2]))
                for task, p in sorted(per.items()) if p[3] and p[3] > p[2]}

    def outcomes(self):
        return collections.Counter(r.get("outcome", "applied") for r in self.steps)

    def staleness(self):
        return [r["staleness"] for r in self.steps
                if isinstance(r.get("staleness"), (int, float))
                and r.get("outcome", "applied") == "applied"]


def train_lines(path):
    """The train lines of one task's metrics FILE, complete lines only (the
    task may be writing the last one)."""
    out = []
    with open(path) as fh:
        for line in fh:
            if not line.endswith("\n"):
                break
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("kind") == "train":
                out.append(rec)
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "last-step":
        lines = train_lines(argv[2]) if os.path.exists(argv[2]) else []
        print(lines[-1]["step"] if lines else 0)
    elif len(argv) == 5 and argv[1] == "mean-loss" and argv[3] in ("first", "last"):
        losses = [r["loss"] for r in train_lines(argv[2])]
        n = int(argv[4])
        part = losses[:n] if argv[3] == "first" else losses[-n:]
        if not part:
            sys.exit(f"runs.py: {argv[2]}: no train lines")
        print(sum(part) / len(part))
    else:
        sys.exit("usage: runs.py last-step FILE | runs.py mean-loss FILE first|last N")


if __name__ == "__main__":
    main(sys.argv)
