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
