"""Checks scripts/run/compare.py on fabricated runs: sync and async of the
tutorial model, repeats, a run gathered from hosts, runs of other models
(a ResNet-20 cluster, a train_local run of cnn10), and a run whose samples
files and ledgers are not read as training lines."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def write_run(root, name, mode, model=""):
    """A cluster run; `model` is the config's model block, if any."""
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        extra = ""
        if mode == "async":
            extra = (" staleness_bound: 3 batch_size: 64 optimizer { learning_rate: 0.002 "
                     "schedule { warmup_steps: 100 decay: COSINE decay_steps: 900 } }")
        f.write(f'name: "{name}"\ntraining {{ mode: {mode.upper()}{extra} }}\n'
                + (f"{model}\n" if model else "")
                + ('wire { gradients: BF16 weights: BF16 }\n' if mode == "async" else ""))
    for w in range(2):
        with open(os.path.join(d, f"worker-{w}.jsonl"), "w") as f:
            for s in range(40):
                rec = {"kind": "train", "step": s, "wall_time_s": 0.5 * s + 0.1 * w,
                       "loss": 2.3 - 0.04 * s, "train_accuracy": 0.1 + 0.01 * s,
                       "images_per_s": 256.0, "batch_size": 128, "step_s": 0.5,
                       "pull_s": 0.05, "compute_s": 0.4, "push_s": 0.03,
                       "wait_s": 0.02, "sent_bytes": 250_000, "received_bytes": 500_000,
                       "train_examples": 10240,
                       "staleness": (s + w) % 3 if mode == "async" else 0,
                       "outcome": ("dropped_surplus" if mode == "sync" and w == 1 and s % 4 == 0
                                   else "applied")}
                f.write(json.dumps(rec) + "\n")
            if w == 0:
                for s in (10, 20, 39):
                    f.write(json.dumps({"kind": "eval", "step": s, "wall_time_s": 0.5 * s,
                                        "test_accuracy": 0.02 * s}) + "\n")
            f.write('{"kind": "step", "trunc')  # a task killed mid-line
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump({"mode": mode, "final_test_accuracy": 0.78}, f)
    return d


def main():
    root = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    a = write_run(root, "sync-run", "sync")
    b = write_run(root, "async-run", "async")
    out = os.path.join(root, "out")
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), a, b,
                        "--out", out, "--target", "0.5"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for p in ("report.md", "loss.png", "accuracy.png", "throughput.png",
              "staleness.png", "dropped.png"):
        assert os.path.getsize(os.path.join(out, p)) > 0, p
    report = open(os.path.join(out, "report.md")).read()
    # Final accuracy from the summary, time to 50% from the evals (step 39 at 19.5 s).
    assert "| sync-run | sync | 2 | 40 | 0.7800 | 19.5 |" in report, report
    assert "| async-run | async | 2 | 40 | 0.7800 | 19.5 |" in report, report
    assert "dropped_surplus 10" in report, report
    # The configs side by side.
    assert ("| run | model | batch norm | N | M | batch | lr | schedule | staleness bound | "
            "max push staleness | lr / staleness | DC-ASGD λ | async β1 | wire |" in report), report
    assert "| sync-run | – | – | 2 | 2 | 128 | 0.001 | – | – | – | – | – | – | – |" in report, report
    assert ("| async-run | – | – | 1 | 2 | 64 | 0.002 | warmup 100, cosine | 3 | – | – | – | – | "
            "BF16/BF16 |" in report), report
    # Epochs: 2 workers x 40 steps x 128 images over 10240 training images.
    assert "| 19.5 | 19.6 | 1.00 | 512.0 |" in report, report
    # 40 steps of 250 kB sent from -0.5 s (the first step's start) to 19.5 s.
    assert "| sync-run | worker-0 (payload) | 4.0 | 8.0 | – | – | – |" in report, report
    assert "| 0.500 | 0.050 | 0.400 | 0.030 | 0.020 |" in report, report

    # Repeats: two settings of two runs each; mean and spread per setting.
    reps = [write_run(root, name, mode) for name, mode in
            (("sync-r1", "sync"), ("sync-r2", "sync"), ("async-r1", "async"), ("async-r2", "async"))]
    with open(os.path.join(reps[1], "summary.json"), "w") as f:
        json.dump({"mode": "sync", "final_test_accuracy": 0.70}, f)
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), *reps,
                        "--repeats", "2", "--out", out, "--target", "0.5"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = open(os.path.join(out, "report.md")).read()
    # 0.78 and 0.70: mean 0.74, sample deviation 0.0566.
    assert "| sync | 2 | 0.7400 ± 0.0566 | 19.5 ± 0.0 | 1.00 ± 0.00 |" in report, report
    assert "| async | 2 | 0.7800 ± 0.0000 |" in report, report
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), *reps[:3],
                        "--repeats", "2"], capture_output=True, text=True)
    assert r.returncode != 0 and "3 run directories do not split into groups of 2" in r.stderr, r.stderr

    # A run gathered from hosts: one folder per host, with link counters.
    hosts = os.path.join(root, "hosts-run")
    shutil.copytree(a, os.path.join(hosts, "h0"))
    os.makedirs(os.path.join(hosts, "h1"))
    os.rename(os.path.join(hosts, "h0", "worker-1.jsonl"),
              os.path.join(hosts, "h1", "worker-1.jsonl"))
    for h, cap in (("h0", 0), ("h1", 100_000_000)):
        with open(os.path.join(hosts, h, f"net-{h}.jsonl"), "w") as f:
            for t in range(11):  # 1 MB/s sent, 0.5 MB/s received
                f.write(json.dumps({"kind": "net", "host": h, "unix_time": 100.0 + t,
                                    "tx_bytes": 1_000_000 * t, "rx_bytes": 500_000 * t,
                                    "cap_bits_per_s": cap}) + "\n")
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), hosts,
                        "--out", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = open(os.path.join(out, "report.md")).read()
    assert "| hosts-run | sync | 2 | 40 | 0.7800 |" in report, report
    assert "| hosts-run | h0 | 8.0 | 4.0 | 8.0 | none | – |" in report, report
    assert "| hosts-run | h1 | 8.0 | 4.0 | 8.0 | 100 Mbit/s | 8% |" in report, report
    # The same task's file in two folders is refused by name.
    shutil.copy(os.path.join(hosts, "h1", "worker-1.jsonl"), os.path.join(hosts, "h0"))
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), hosts],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "worker-1.jsonl is in both" in r.stderr, r.stderr

    # Other models: nothing in the report depends on the tutorial model. A
    # ResNet-20 cluster with its batch norm statistics on the workers, and a
    # train_local run of cnn10 (no config; its summary names the model, its
    # eval lines carry the epoch).
    resnet = write_run(root, "resnet20-sync", "sync",
                       model='model { name: "resnet20" batch_norm_statistics: LOCAL }')
    with open(os.path.join(resnet, "summary.json"), "w") as f:
        json.dump({"mode": "sync", "model": "resnet20", "final_test_accuracy": 0.55}, f)
    local = os.path.join(root, "cnn10-local")
    os.makedirs(local)
    with open(os.path.join(local, "metrics.jsonl"), "w") as f:
        for s in range(1, 21):
            f.write(json.dumps({"kind": "train", "step": s, "wall_time_s": 2.0 * s,
                                "loss": 2.3 - 0.05 * s, "train_accuracy": 0.1 + 0.02 * s,
                                "images_per_s": 64.0, "batch_size": 128,
                                "step_s": 2.0}) + "\n")
            if s % 10 == 0:
                f.write(json.dumps({"kind": "eval", "step": s, "wall_time_s": 2.0 * s,
                                    "epoch": s / 10, "test_accuracy": 0.03 * s}) + "\n")
    with open(os.path.join(local, "summary.json"), "w") as f:
        json.dump({"program": "train_local", "mode": "local", "model": "cnn10",
                   "final_test_accuracy": 0.6}, f)
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), resnet, local,
                        "--out", out, "--target", "0.5"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = open(os.path.join(out, "report.md")).read()
    assert "| resnet20-sync | sync | 2 | 40 | 0.5500 | 19.5 |" in report, report
    assert "| resnet20-sync | resnet20 | LOCAL | 2 | 2 | 128 | 0.001 |" in report, report
    # train_local: 20 steps, accuracy 0.6 at 40 s (the target 0.5 too), 2
    # epochs from its eval lines, 64 images/s.
    assert "| cnn10-local | local | 1 | 20 | 0.6000 | 40.0 | 40.0 | 2.00 | 64.0 |" in report, report
    assert "| cnn10-local | cnn10 | – |" in report, report
    for p in ("loss.png", "accuracy.png", "throughput.png", "dropped.png"):
        assert os.path.getsize(os.path.join(out, p)) > 0, p

    # A run with data { record_samples: true } and its ledgers beside it:
    # samples-worker-J.jsonl (one line per push, no loss) and the servers'
    # ledger.jsonl / ledger-ps1.jsonl in a checkpoint folder are not
    # training lines; the report is the same as without them.
    samples = os.path.join(root, "samples-run")
    shutil.copytree(a, samples)
    for w in range(2):
        with open(os.path.join(samples, f"samples-worker-{w}.jsonl"), "w") as f:
            for s in range(40):
                f.write(json.dumps({"worker": w, "step": s, "generation": 0,
                                    "epoch": 0, "index": 2 * s + w,
                                    "outcome": "applied",
                                    "samples": [0, 1, 2]}) + "\n")
    os.makedirs(os.path.join(samples, "ckpt"))
    for name in ("ledger.jsonl", "ledger-ps1.jsonl"):
        with open(os.path.join(samples, "ckpt", name), "w") as f:
            f.write(json.dumps({"epoch": 0, "index": 0, "worker": 0,
                                "step": 1, "samples": [0, 1, 2]}) + "\n")
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), samples,
                        "--out", out, "--target", "0.5"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = open(os.path.join(out, "report.md")).read()
    assert "| samples-run | sync | 2 | 40 | 0.7800 | 19.5 |" in report, report

    # Bad input: a directory without metrics is refused by name.
    empty = os.path.join(root, "empty")
    os.makedirs(empty)
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), empty],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "no .jsonl metrics files" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), a, "--target", "7"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--target 7.0 is not in (0, 1]" in r.stderr, r.stderr
    print("compare_test: ok")


if __name__ == "__main__":
    main()
