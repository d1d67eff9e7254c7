"""Golden test of scripts/deploy/k8s_manifests.py: the TFJob and the plain
manifests of testdata/k8s/hosts.pbtxt are byte for byte the checked-in ones;
the TF_CONFIG a plain-manifest pod builds for itself resolves, through the
real ps_server and worker (--cluster_from=tf_config --print_cluster), to the
task of its ordinal; bad configs are refused by name.

To accept a deliberate change: scripts/deploy/k8s_manifests.py
scripts/deploy/testdata/k8s/hosts.pbtxt --image registry.example/psgd:1
--namespace train --out scripts/deploy/testdata/k8s
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], "psgd")
DATA = os.path.join(HERE, "testdata", "k8s")
TOOL = os.path.join(HERE, "k8s_manifests.py")


def run(*args, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, env=env)


def main():
    out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    r = run(sys.executable, TOOL, os.path.join(DATA, "hosts.pbtxt"), "--image",
            "registry.example/psgd:1", "--namespace", "train", "--out", out)
    assert r.returncode == 0, r.stderr
    for name in ("hosts-tfjob.yaml", "hosts-k8s.yaml"):
        got = open(os.path.join(out, name)).read()
        want = open(os.path.join(DATA, name)).read()
        assert got == want, f"{name} differs from the golden file"
    plain = open(os.path.join(out, "hosts-k8s.yaml")).read()
    tfjob = open(os.path.join(out, "hosts-tfjob.yaml")).read()
    for needle in ("kind: TFJob", "Chief:", "replicas: 2", "grpc: {port: 2222}",
                   "name: checkpoints"):
        assert needle in tfjob, needle
    for needle in ("clusterIP: None", "kind: StatefulSet", "volumeClaimTemplates",
                   "completionMode: Indexed", "grpc: {port: 2222}"):
        assert needle in plain, needle

    # Each pod's shell command builds TF_CONFIG from its ordinal: run it with
    # the binary replaced by --print_cluster of the real one.
    binaries = {"/psgd/ps_server": os.path.join(RUNFILES, "ps/ps_server"),
                "/psgd/worker": os.path.join(RUNFILES, "worker/worker")}
    config = os.path.join(DATA, "hosts.pbtxt")
    for args, env_name, value, expect in (
            (r'"export TF_CONFIG=.*?ps_server[^"]*"', "HOSTNAME", "hosts-ps-1", "ps:1"),
            (r'"export TF_CONFIG=.*?/psgd/worker[^"]*"', "JOB_COMPLETION_INDEX", "2", "worker:2")):
        script = json.loads(re.search(args, plain).group(0))
        for b, real in binaries.items():
            script = script.replace(b, real)
        script = script.replace("--config=/etc/psgd/cluster.pbtxt", f"--config={config}")
        script = script.replace("--run_dir=/runs", "--print_cluster")
        env = dict(os.environ, **{env_name: value})
        r = run("/bin/sh", "-c", script, env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"# this task: {expect} (from tf_config)"), r.stdout
        assert 'address: "hosts-ps-0.hosts-ps.train.svc:2222"' in r.stdout, r.stdout

    # Worker programs (WorkerTask.program): a Python chief beside C++
    # workers picks its command by index in the Indexed Job, and is the
    # TFJob's Chief; worker:1.. of a TFJob need one program.
    text = open(config).read()
    programs = os.path.join(out, "programs.pbtxt")
    open(programs, "w").write(re.sub(
        r'worker \{ address: "([^"]*)" \}',
        lambda m, n=iter(range(99)): (
            f'worker {{ address: "{m.group(1)}" program: "examples/torch_cifar10.py --model=tutorial" }}'
            if next(n) == 0 else m.group(0)), text, count=0))
    assert "program:" in open(programs).read(), open(programs).read()
    r = run(sys.executable, TOOL, programs, "--out", out)
    assert r.returncode == 0, r.stderr
    plain = open(os.path.join(out, "hosts-k8s.yaml")).read()
    tfjob = open(os.path.join(out, "hosts-tfjob.yaml")).read()
    python = ("/usr/bin/env PYTHONPATH=/psgd/python /usr/bin/python3 "
              "/psgd/examples/torch_cifar10.py --model=tutorial")
    assert f"0) exec {python} --config=" in plain, plain
    assert "1) exec /psgd/worker --config=" in plain, plain
    chief = tfjob[tfjob.index("Chief:"):tfjob.index("Worker:")]
    assert ('command: [/usr/bin/env]' in chief and '"/psgd/examples/torch_cifar10.py"'
            in chief), chief
    assert "command: [/psgd/worker]" in tfjob[tfjob.index("Worker:"):], tfjob
    # The Indexed Job's line runs the right program for each index.
    script = json.loads(re.search(r'"export TF_CONFIG=.*?esac"', plain).group(0))
    script = script.replace("/usr/bin/env PYTHONPATH=/psgd/python /usr/bin/python3 "
                            "/psgd/examples/torch_cifar10.py --model=tutorial",
                            "echo python")
    script = script.replace("/psgd/worker", "echo cpp")
    for index, expect in (("0", "python"), ("1", "cpp")):
        r = run("/bin/sh", "-c", script, env=dict(os.environ, JOB_COMPLETION_INDEX=index))
        assert r.returncode == 0 and r.stdout.startswith(expect), (index, r.stdout)

    # Bad input is named.
    bad = os.path.join(out, "bad.pbtxt")
    open(bad, "w").write('name: "Bad_Name" worker { address: "a:1" }\n')
    r = run(sys.executable, TOOL, bad, "--out", out)
    assert r.returncode != 0 and "is not a Kubernetes name" in r.stderr, r.stderr
    open(bad, "w").write('name: "x" worker { address: "a:1" }\n')
    r = run(sys.executable, TOOL, bad, "--out", out)
    assert r.returncode != 0 and "no ps task" in r.stderr, r.stderr
    r = run(sys.executable, TOOL, os.path.join(out, "missing.pbtxt"), "--out", out)
    assert r.returncode != 0 and "cannot read" in r.stderr, r.stderr
    print("k8s_manifests_test: ok")


if __name__ == "__main__":
    main()
