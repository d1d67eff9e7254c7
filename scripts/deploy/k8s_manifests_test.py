"""Golden test of scripts/deploy/k8s_manifests.py: the TFJob and the plain
manifests of testdata/k8s/hosts.pbtxt and grow.pbtxt (elastic workers,
max_workers) are byte for byte the checked-in ones; the TF_CONFIG a
plain-manifest pod builds for itself resolves, through the real ps_server
and worker (--cluster_from=tf_config --print_cluster), to the task of its
ordinal, an elastic pod's to worker:M+k, refused from max_workers on; bad
configs are refused by name.

To accept a deliberate change: for C in hosts grow; do
scripts/deploy/k8s_manifests.py scripts/deploy/testdata/k8s/$C.pbtxt
--image registry.example/psgd:1 --namespace train
--out scripts/deploy/testdata/k8s; done
"""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], "psgd")
DATA = os.path.join(HERE, "testdata", "k8s")
TOOL = os.path.join(HERE, "k8s_manifests.py")


def run(*args, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, env=env)


BINARIES = {"/psgd/ps_server": os.path.join(RUNFILES, "ps/ps_server"),
            "/psgd/worker": os.path.join(RUNFILES, "worker/worker")}


def pod_script(plain, pattern, config):
    """The shell line of the pod whose args match `pattern` (a regex over
    the YAML), made to run here: the real binaries with --print_cluster
    and `config` instead of the ConfigMap's."""
    script = json.loads(re.search(pattern, plain).group(0))
    for b, real in BINARIES.items():
        script = script.replace(b, real)
    script = script.replace("--config=/etc/psgd/cluster.pbtxt", f"--config={config}")
    return script.replace("--run_dir=/runs", "--print_cluster")


def documents(yaml):
    """The YAML documents of a manifest file, as text."""
    return yaml.split("\n---\n")


def document(yaml, kind, name):
    """The one document of `kind` named `name`, or None."""
    found = [d for d in documents(yaml)
             if re.search(rf"^kind: {kind}$", d, re.M)
             and re.search(rf"^metadata:\n  name: {name}$", d, re.M)]
    assert len(found) <= 1, (kind, name, found)
    return found[0] if found else None


def generate(config, out):
    r = run(sys.executable, TOOL, config, "--image", "registry.example/psgd:1",
            "--namespace", "train", "--out", out)
    assert r.returncode == 0, r.stderr


def main():
    out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    for config in ("hosts", "grow"):
        generate(os.path.join(DATA, f"{config}.pbtxt"), out)
        for name in (f"{config}-tfjob.yaml", f"{config}-k8s.yaml"):
            got = open(os.path.join(out, name)).read()
            want = open(os.path.join(DATA, name)).read()
            assert got == want, f"{name} differs from the golden file"
    plain = open(os.path.join(out, "hosts-k8s.yaml")).read()
    tfjob = open(os.path.join(out, "hosts-tfjob.yaml")).read()
    # The cluster's token: a Secret of its own, 0600, 32 random bytes, new at
    # each generation; every pod mounts it and the config names it.
    secret_path = os.path.join(out, "hosts-token.yaml")
    assert stat.S_IMODE(os.stat(secret_path).st_mode) == 0o600
    secret = open(secret_path).read()
    token = re.search(r"^  token: ([0-9a-f]{64})$", secret, re.M)
    assert "kind: Secret" in secret and "name: hosts-token" in secret and token, secret
    assert token.group(1) not in plain + tfjob
    peer = re.search(r"^  peer-token: ([0-9a-f]{64})$", secret, re.M)
    assert peer and peer.group(1) != token.group(1), secret
    assert peer.group(1) not in plain + tfjob
    for manifest in (plain, tfjob):
        assert 'token_file: "/etc/psgd-token/token"' in manifest
        mounts = manifest.count("mountPath: /etc/psgd,")
        assert mounts > 0 and manifest.count(
            "mountPath: /etc/psgd-token/token, subPath: token,") == mounts
        assert manifest.count("secretName: hosts-token") == manifest.count("name: hosts-config}")
        # The servers' peer token in every ps container, in no worker's.
        peer_mounts = manifest.count("mountPath: /etc/psgd-token/token.peer, "
                                     "subPath: peer-token,")
        assert peer_mounts == manifest.count("/psgd/ps_server") > 0, manifest
        for block in manifest.split("- name: ")[1:]:
            if "token.peer" in block:
                assert "/psgd/ps_server" in block, block
    generate(os.path.join(DATA, "hosts.pbtxt"), out)
    assert open(secret_path).read() != secret, "the same token twice"
    for needle in ("kind: TFJob", "Chief:", "replicas: 2", "grpc: {port: 2222}",
                   "name: checkpoints"):
        assert needle in tfjob, needle
    for needle in ("clusterIP: None", "kind: StatefulSet", "volumeClaimTemplates",
                   "completionMode: Indexed", "grpc: {port: 2222}"):
        assert needle in plain, needle

    # Each pod's shell command builds TF_CONFIG from its ordinal: run it with
    # the binary replaced by --print_cluster of the real one.
    config = os.path.join(DATA, "hosts.pbtxt")
    for args, env_name, value, expect in (
            (r'"export TF_CONFIG=.*?ps_server[^"]*"', "HOSTNAME", "hosts-ps-1", "ps:1"),
            (r'"export TF_CONFIG=.*?/psgd/worker[^"]*"', "JOB_COMPLETION_INDEX", "2", "worker:2")):
        script = pod_script(plain, args, config)
        env = dict(os.environ, **{env_name: value})
        r = run("/bin/sh", "-c", script, env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"# this task: {expect} (from tf_config)"), r.stdout
        assert 'address: "hosts-ps-0.hosts-ps.train.svc:2222"' in r.stdout, r.stdout
    # Without max_workers there are no elastic workers.
    assert "hosts-elastic" not in plain, plain

    # Elastic workers (grow.pbtxt: 3 listed workers, max_workers 6): a
    # StatefulSet grow-elastic of 0 replicas beside the Indexed Job, its own
    # headless Service; the TFJob is as without max_workers.
    grow = os.path.join(DATA, "grow.pbtxt")
    plain = open(os.path.join(out, "grow-k8s.yaml")).read()
    tfjob = open(os.path.join(out, "grow-tfjob.yaml")).read()
    assert "grow-elastic" not in tfjob and "StatefulSet" not in tfjob, tfjob
    assert document(plain, "Service", "grow-elastic"), plain
    sts = document(plain, "StatefulSet", "grow-elastic")
    assert sts, plain
    for needle in ("\n  replicas: 0\n", "\n  podManagementPolicy: Parallel\n",
                   "\n  serviceName: grow-elastic\n",
                   "\n    matchLabels: {app: grow, role: elastic}\n",
                   "\n      labels: {app: grow, role: elastic}\n",
                   "\n      terminationGracePeriodSeconds: 60\n",
                   "\n          image: registry.example/psgd:1\n",
                   "{name: config, mountPath: /etc/psgd, readOnly: true}",
                   "configMap: {name: grow-config}"):
        assert needle in sts, (needle, sts)
    # The listed workers are as before: an Indexed Job of 3.
    job = document(plain, "Job", "grow-worker")
    assert job and "completions: 3\n" in job, job
    # The elastic pod of ordinal k is worker:3+k, resolved by the real
    # worker; from ordinal 3 (worker:6 = max_workers) the worker refuses.
    elastic_args = r'"export TF_CONFIG=.*?/psgd/worker[^"]*"'
    script = pod_script(sts, elastic_args, grow)
    assert "--cluster_from=tf_config" in script, script
    for ordinal, expect in ((0, "worker:3"), (2, "worker:5")):
        r = run("/bin/sh", "-c", script,
                env=dict(os.environ, HOSTNAME=f"grow-elastic-{ordinal}"))
        assert r.returncode == 0, (ordinal, r.stderr)
        assert r.stdout.startswith(f"# this task: {expect} (from tf_config)"), r.stdout
        assert "max_workers: 6" in r.stdout, r.stdout
        # The listed workers keep their addresses; none is added.
        assert 'address: "grow-worker-2.grow-worker.train.svc:2222"' in r.stdout, r.stdout
        assert r.stdout.count("worker {") == 3, r.stdout
    r = run("/bin/sh", "-c", script, env=dict(os.environ, HOSTNAME="grow-elastic-3"))
    assert r.returncode != 0, r.stdout
    assert ("TF_CONFIG: task worker:6: cluster.worker has 3 addresses and config "
            "'grow' allows worker ids up to max_workers - 1 = 5") in r.stderr, r.stderr
    # max_workers equal to the listed workers: no elastic workers.
    text = open(grow).read()
    same = os.path.join(out, "same.pbtxt")
    open(same, "w").write(text.replace("max_workers: 6", "max_workers: 3"))
    assert "max_workers: 3" in open(same).read()
    generate(same, out)
    assert "grow-elastic" not in open(os.path.join(out, "grow-k8s.yaml")).read()
    # An elastic worker runs the last listed worker's program.
    programs = os.path.join(out, "grow-programs.pbtxt")
    program = '" program: "examples/torch_cifar10.py" }'
    open(programs, "w").write(text.replace('w1:2222" }', 'w1:2222' + program)
                              .replace('w2:2222" }', 'w2:2222' + program))
    assert open(programs).read().count("program:") == 2, open(programs).read()
    generate(programs, out)
    sts = document(open(os.path.join(out, "grow-k8s.yaml")).read(), "StatefulSet",
                   "grow-elastic")
    assert ("exec /usr/bin/env PYTHONPATH=/psgd/python /usr/bin/python3 "
            "/psgd/examples/torch_cifar10.py --config=") in sts, sts

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
    open(programs, "w").write(text.replace('w2:2222" }', 'w2:2222' + program))
    r = run(sys.executable, TOOL, programs, "--out", out)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert f"{programs}: a TFJob runs worker:1.. from one template" in r.stderr, r.stderr
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
