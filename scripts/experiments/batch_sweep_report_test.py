"""Checks batch_sweep_report.py on fabricated runs of a sweep."""
import json
import os
import subprocess
import sys
import tempfile


def write_run(out, name, batch, seconds_per_step, accuracy, local=False):
    """10 steps of `batch` images (train_examples 10240 per the sweep)."""
    d = os.path.join(out, name)
    os.makedirs(d)
    lines = []
    for s in range(10):
        lines.append({"kind": "train", "step": s + (1 if local else 0),
                      "wall_time_s": seconds_per_step * (s + 1), "step_s": seconds_per_step,
                      "loss": 2.0, "batch_size": batch})
    lines.append({"kind": "eval", "step": 10, "wall_time_s": seconds_per_step * 10,
                  "test_accuracy": accuracy, "eval_s": 0.0})
    with open(os.path.join(d, "metrics.jsonl" if local else "worker-0.jsonl"), "w") as f:
        f.write("".join(json.dumps(l) + "\n" for l in lines))
    if not local:
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump({"mode": "sync", "final_test_accuracy": accuracy, "final_global_step": 10}, f)


def main():
    script = sys.argv[1]
    out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    with open(os.path.join(out, "sweep.txt"), "w") as f:
        f.write("base_batch 128\nepochs 1\nlr 0.001\nwarmup_epochs 0.5\ntrain_examples 10240\n"
                "model resnet20\n")
    # One process: 1 s a step at either batch. Two workers: slower at 128,
    # faster at 1024. 8x the base batch: scaled 0.5 points below, plain 5.
    write_run(out, "local-b128", 128, 1.0, 0.50, local=True)
    write_run(out, "local-b1024", 1024, 1.0, 0.50, local=True)
    write_run(out, "w2-b128-plain", 128, 2.0, 0.60)
    write_run(out, "w2-b1024-plain", 1024, 0.5, 0.55)
    write_run(out, "w2-b1024-scaled", 1024, 0.5, 0.595)
    r = subprocess.run([sys.executable, script, out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = open(os.path.join(out, "report", "sweep.md")).read()
    assert "Model resnet20. Sync clusters" in report, report
    # 10 steps x 128 images = 0.125 epochs in 10 s: 80 s per epoch.
    assert "| one process | 128 | – | 10 | 0.12 | 80.0 | 0.5000 | – |" in report, report
    assert "| 2 | 128 | plain | 10 | 0.12 | 160.0 | 0.6000 | 0.50 |" in report, report
    assert "| 2 | 1024 | scaled | 10 | 1.00 | 5.0 | 0.5950 | 2.00 |" in report, report
    assert "- 2 worker(s): first beats one process at global batch 1024" in report, report
    assert ("- 2 worker(s), batch 1024 (scaled) against batch 128: 0.5950 vs 0.6000, "
            "-0.50 points (within 1 point)") in report, report
    assert "-5.00 points (more than 1 point below)" in report, report
    for p in ("time_per_epoch.png", "accuracy.png"):
        assert os.path.getsize(os.path.join(out, "report", p)) > 0, p
    # A sweep written before --model (no model line) was of the tutorial model.
    with open(os.path.join(out, "sweep.txt"), "w") as f:
        f.write("base_batch 128\nepochs 1\nlr 0.001\nwarmup_epochs 0.5\ntrain_examples 10240\n")
    r = subprocess.run([sys.executable, script, out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = open(os.path.join(out, "report", "sweep.md")).read()
    assert "Model cifar10_tutorial. Sync clusters" in report, report
    # Bad input: a directory without the sweep's settings.
    os.remove(os.path.join(out, "sweep.txt"))
    r = subprocess.run([sys.executable, script, out], capture_output=True, text=True)
    assert r.returncode != 0 and "sweep.txt is missing" in r.stderr, r.stderr
    print("batch_sweep_report_test: ok")


if __name__ == "__main__":
    main()
