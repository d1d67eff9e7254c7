#!/usr/bin/python3
"""Kubernetes manifests for a cluster config.

    scripts/deploy/k8s_manifests.py CONFIG [--image IMAGE] [--namespace NS]
                             [--port 2222] [--checkpoint_size 1Gi] [--out DIR]
                             [--cluster_tasks PATH]

The config is read by configs/cluster_tasks, the real loader (built with
Bazel when missing): a config the binaries refuse makes no manifests.

writes into DIR (default: the current directory)
  NAME-tfjob.yaml      a Kubeflow TFJob (kubeflow.org/v1): a Chief (worker:0),
                       Worker replicas (worker:1..) and PS replicas; every task
                       runs with --cluster_from=tf_config and reads the TF_CONFIG
                       the training operator sets.
  NAME-k8s.yaml        the same without Kubeflow: a ConfigMap with the config,
                       a headless Service and a StatefulSet for the ps tasks
                       (stable names NAME-ps-I.NAME-ps, a checkpoint volume per
                       pod), and an Indexed Job for the workers (index 0 is the
                       chief); each task builds its TF_CONFIG from its ordinal.
                       With max_workers K above the M listed workers (elastic
                       workers, docs/PS.md) also a StatefulSet NAME-elastic of
                       0 replicas (and its headless Service): its pod of
                       ordinal k is worker:M+k with the last listed worker's
                       program, and refuses to start (the worker's error on
                       max_workers) from M+k = K on. Scale it up and the pods
                       join the running job at the next step; scale it down
                       and SIGTERM makes the C++ worker leave at a step
                       boundary (a grace period of 60 s; a worker program
                       it kills, and its lease runs out). Its pods are
                       restarted when they exit: scale it to 0 when the job
                       ends.
The TFJob has no elastic workers: a TFJob's replicas are the workers its
TF_CONFIG lists, which must be the config's listed ones.
A worker task with a program (WorkerTask.program, e.g. a PyTorch worker) runs
it from the image's /psgd (a .py script with /usr/bin/python3 and the psgd
package of /psgd/python on PYTHONPATH); the TFJob needs one program for
worker:1.. (one replica template).
  NAME-token.yaml      the cluster's token, a Secret (NAME-token) of 32 random
                       bytes made here (the file is written 0600): apply it
                       with either manifest. Every pod mounts it at
                       /etc/psgd-token/token (subPath: the file, root's,
                       0400, not a link), and the ConfigMap's config names
                       it as security.token_file, unless the config has a
                       token of its own or says `insecure: true`. Its second
                       key, peer-token (32 more random bytes), is mounted in
                       the ps containers alone, at /etc/psgd-token/token.peer:
                       the servers' peer token, which a server needs to send
                       or take decisions and workers do not hold.
Both carry the config in a ConfigMap (NAME-config), gRPC health probes on the
ps port (Kubernetes' grpc probe: the ps serves grpc.health.v1), and for each ps
a volume at /checkpoints. For checkpoints that stay on the ps's own volume, give
every ps task `checkpoint_dir: "/checkpoints"` in the config (docs/MULTIHOST.md).
"""
import argparse
import json
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from configs import ConfigError  # noqa: E402
import configs  # noqa: E402  (scripts/lib/configs.py: configs/cluster_tasks)


K8S_NAME = r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?"


def read_config(path, tool=None):
    """What the manifests need of a config, read by configs/cluster_tasks
    (scripts/lib/configs.py); ConfigError names what is wrong. The name is
    checked against Kubernetes' rule before the loader's other checks."""
    try:
        text = open(path).read()
    except OSError as e:
        raise ConfigError(f"cannot read '{path}': {e.strerror}")
    name = configs.field(path, "name", validate=False, tool=tool)
    if not re.fullmatch(K8S_NAME, name):
        raise ConfigError(f"{path}: name {name!r} is not a Kubernetes name "
                          "(lower-case letters, digits and '-', at most 42)")
    roles = [task.split(":")[0] for task, _ in configs.tasks(path, tool=tool)]
    checkpoints = configs.field(path, "checkpoints", tool=tool)
    workers = roles.count("worker")
    max_workers = int(configs.field(path, "max_workers", tool=tool))
    # An elastic worker (worker:M..) runs what the loader gives it: the last
    # listed worker's program (WorkerTaskOf).
    elastic = (worker_command(configs.program(path, f"worker:{workers}", tool=tool))
               if max_workers > workers else None)
    return {"name": name, "ps": roles.count("ps"), "workers": workers,
            "max_workers": max_workers, "elastic_command": elastic,
            "text": text, "checkpoint": checkpoints != "none",
            "own_checkpoint_dirs": checkpoints == "per_task",
            "commands": [worker_command(configs.program(path, f"worker:{j}", tool=tool))
                         for j in range(workers)]}


def worker_command(program):
    """A worker task's command line in the image: the C++ worker, or its
    program (WorkerTask.program) below /psgd with the psgd package
    (/psgd/python) on PYTHONPATH, a .py script run by /usr/bin/python3."""
    if not program:
        return ["/psgd/worker"]
    words = program.split()
    path = words[0] if words[0].startswith("/") else "/psgd/" + words[0]
    python = ["/usr/bin/python3"] if path.endswith(".py") else []
    return ["/usr/bin/env", "PYTHONPATH=/psgd/python"] + python + [path] + words[1:]


def indent(text, n):
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


TOKEN_PATH = "/etc/psgd-token/token"


def with_token_file(text):
    """The config text naming the mounted Secret as its token file, unless it
    has a token (or token_file) of its own or says insecure."""
    if re.search(r"^\s*(token|token_file|insecure)\s*:", text, re.M):
        return text
    line = f'  token_file: "{TOKEN_PATH}"'
    if re.search(r"^security\s*{", text, re.M):
        return re.sub(r"^security\s*{", "security {\n" + line, text, count=1, flags=re.M)
    return text.rstrip() + "\nsecurity {\n" + line + "\n}\n"


def token_secret(c, ns):
    import secrets
    return f"""apiVersion: v1
kind: Secret
metadata:
  name: {c['name']}-token
  namespace: {ns}
type: Opaque
stringData:
  token: {secrets.token_hex(32)}
  peer-token: {secrets.token_hex(32)}
"""


def with_token_volume(manifest, name):
    """Every container that mounts the config also mounts the token Secret;
    every pod that has the config volume also has the Secret's. The ps
    containers alone also mount its peer-token key beside the token, as
    token.peer: the servers' peer token (ps_server's default file), which
    workers do not hold."""
    out = []
    ps = False  # in a ps container
    for line in manifest.splitlines():
        out.append(line)
        pad = line[:len(line) - len(line.lstrip())]
        if re.match(r"^\s*- name: ", line):
            ps = False
        if "/psgd/ps_server" in line:
            ps = True
        if line.strip() == "- {name: config, mountPath: /etc/psgd, readOnly: true}":
            # subPath: the key mounted as the file itself (root's, mode
            # 0400), not the link a Secret volume otherwise makes: token
            # files are opened without following links (common/security.h).
            out.append(pad + "- {name: token, mountPath: /etc/psgd-token/token, "
                       "subPath: token, readOnly: true}")
            if ps:
                out.append(pad + "- {name: token, mountPath: /etc/psgd-token/token.peer, "
                           "subPath: peer-token, readOnly: true}")
        elif line.strip() == f"configMap: {{name: {name}-config}}":
            out.append(pad[:-2] + f"- name: token")
            out.append(pad + f"secret: {{secretName: {name}-token, defaultMode: 0400}}")
    return "\n".join(out) + "\n"


def config_map(c, ns):
    return f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: {c['name']}-config
  namespace: {ns}
data:
  cluster.pbtxt: |
{indent(with_token_file(c['text']).rstrip(), 4)}
"""


def container(command, args, port, ps):
    probe = f"""
        readinessProbe:
          grpc: {{port: {port}}}
          periodSeconds: 5
        livenessProbe:
          grpc: {{port: {port}}}
          initialDelaySeconds: 30
          periodSeconds: 20""" if ps else ""
    ckpt = """
          - {name: checkpoints, mountPath: /checkpoints}""" if ps else ""
    return f"""        command: [{command[0]}]
        args: [{", ".join(json.dumps(a) for a in command[1:] + args)}]
        ports:
          - {{name: tfjob-port, containerPort: {port}}}{probe}
        volumeMounts:
          - {{name: config, mountPath: /etc/psgd, readOnly: true}}
          - {{name: runs, mountPath: /runs}}{ckpt}"""


TASK_ARGS = ["--config=/etc/psgd/cluster.pbtxt", "--cluster_from=tf_config",
             "--run_dir=/runs"]


def tfjob(c, image, ns, port):
    def replica(kind, count, command, ps):
        ckpt = """
              - {name: checkpoints, emptyDir: {}}""" if ps else ""
        return f"""    {kind}:
      replicas: {count}
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: tensorflow
              image: {image}
{indent(container(command, TASK_ARGS, port, ps), 6)}
          volumes:
            - name: config
              configMap: {{name: {c['name']}-config}}
            - {{name: runs, emptyDir: {{}}}}{ckpt}
"""
    out = config_map(c, ns) + f"""---
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: {c['name']}
  namespace: {ns}
spec:
  runPolicy:
    cleanPodPolicy: Running
  tfReplicaSpecs:
"""
    commands = c["commands"]
    out += replica("Chief", 1, commands[0], False)
    if c["workers"] > 1:
        if any(cmd != commands[1] for cmd in commands[2:]):
            raise ConfigError("a TFJob runs worker:1.. from one template: give "
                              "them the same program (WorkerTask.program)")
        out += replica("Worker", c["workers"] - 1, commands[1], False)
    out += replica("PS", c["ps"], ["/psgd/ps_server"], True)
    return out


def headless(n, role, ns, port):
    """A headless Service: stable DNS names NAME-ROLE-I.NAME-ROLE."""
    return f"""---
apiVersion: v1
kind: Service
metadata:
  name: {n}-{role}
  namespace: {ns}
spec:
  clusterIP: None
  # Names resolve before the pods are ready: a worker waits for SERVING
  # (its health check) rather than failing on a name that is not there yet.
  publishNotReadyAddresses: true
  selector: {{app: {n}, role: {role}}}
  ports:
    - {{name: grpc, port: {port}}}
"""


def plain(c, image, ns, port, size):
    n = c["name"]
    ps_hosts = [f"{n}-ps-{i}.{n}-ps.{ns}.svc:{port}" for i in range(c["ps"])]
    worker_hosts = [f"{n}-worker-{i}.{n}-worker.{ns}.svc:{port}"
                    for i in range(c["workers"])]
    cluster = json.dumps({"ps": ps_hosts, "worker": worker_hosts}, separators=(",", ":"))

    def task_command(commands, role, index):
        """The task's shell line; `commands` by index (one: for all). `index`
        is the shell expression of the TF_CONFIG task index."""
        script = (f"export TF_CONFIG='{{\"cluster\":{cluster},\"task\":{{\"type\":\"{role}\","
                  f"\"index\":'\"{index}\"'}}}}'; ")
        def run(command):
            return "exec " + " ".join(shlex.quote(w) for w in command + TASK_ARGS)
        if all(cmd == commands[0] for cmd in commands):
            return json.dumps(script + run(commands[0]))
        cases = " ".join(f"{i}) {run(cmd)};;" for i, cmd in enumerate(commands))
        return json.dumps(script + f'case "{index}" in {cases} esac')

    return config_map(c, ns) + f"""{headless(n, "ps", ns, port)}{headless(n, "worker", ns, port)}---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {n}-ps
  namespace: {ns}
spec:
  serviceName: {n}-ps
  replicas: {c['ps']}
  podManagementPolicy: Parallel
  selector:
    matchLabels: {{app: {n}, role: ps}}
  template:
    metadata:
      labels: {{app: {n}, role: ps}}
    spec:
      containers:
        - name: ps
          image: {image}
          command: [/bin/sh, -c]
          args: [{task_command([['/psgd/ps_server']], 'ps', '${HOSTNAME##*-}')}]
          ports:
            - {{name: grpc, containerPort: {port}}}
          readinessProbe:
            grpc: {{port: {port}}}
            periodSeconds: 5
          livenessProbe:
            grpc: {{port: {port}}}
            initialDelaySeconds: 30
            periodSeconds: 20
          volumeMounts:
            - {{name: config, mountPath: /etc/psgd, readOnly: true}}
            - {{name: runs, mountPath: /runs}}
            - {{name: checkpoints, mountPath: /checkpoints}}
      volumes:
        - name: config
          configMap: {{name: {n}-config}}
        - {{name: runs, emptyDir: {{}}}}
  volumeClaimTemplates:
    - metadata:
        name: checkpoints
      spec:
        accessModes: [ReadWriteOnce]
        resources:
          requests:
            storage: {size}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {n}-worker
  namespace: {ns}
spec:
  completionMode: Indexed
  completions: {c['workers']}
  parallelism: {c['workers']}
  backoffLimit: {4 * c['workers']}
  template:
    metadata:
      labels: {{app: {n}, role: worker}}
    spec:
      subdomain: {n}-worker
      restartPolicy: OnFailure
{worker_containers(n, image, task_command(c['commands'], 'worker', '${JOB_COMPLETION_INDEX}'))}""" + (elastic(c, image, ns, port, task_command)
       if c["max_workers"] > c["workers"] else "")


def worker_containers(n, image, args):
    """A worker pod's container (the shell script `args`, which builds its
    TF_CONFIG and runs the task) and its volumes: the config and the runs."""
    return f"""      containers:
        - name: worker
          image: {image}
          command: [/bin/sh, -c]
          args: [{args}]
          volumeMounts:
            - {{name: config, mountPath: /etc/psgd, readOnly: true}}
            - {{name: runs, mountPath: /runs}}
      volumes:
        - name: config
          configMap: {{name: {n}-config}}
        - {{name: runs, emptyDir: {{}}}}
"""


def elastic(c, image, ns, port, task_command):
    """The elastic workers (max_workers K above the M listed workers): a
    StatefulSet NAME-elastic of 0 replicas whose pod of ordinal k is
    worker:M+k, with the TF_CONFIG of the listed workers and task index M+k
    (no chief: the index is the worker id). The worker resolves its task
    with the config's max_workers and refuses an id from K on (exit 2, the
    message in the pod's log). Scaling it up joins workers at the next step;
    scaling it down sends SIGTERM, and the C++ worker leaves at a step
    boundary and exits 0 within the grace period."""
    n, m, k = c["name"], c["workers"], c["max_workers"]
    index = f"$((${{HOSTNAME##*-}} + {m}))"
    return f"""{headless(n, "elastic", ns, port)}---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {n}-elastic
  namespace: {ns}
spec:
  # Elastic workers: the pod of ordinal k is worker:{m}+k (ids up to
  # max_workers - 1 = {k - 1}: at most {k - m} replicas). Scale up: they join
  # at the next step; scale down: SIGTERM, they leave at a step boundary.
  serviceName: {n}-elastic
  replicas: 0
  podManagementPolicy: Parallel
  selector:
    matchLabels: {{app: {n}, role: elastic}}
  template:
    metadata:
      labels: {{app: {n}, role: elastic}}
    spec:
      # Time for a worker to finish its step and leave after SIGTERM.
      terminationGracePeriodSeconds: 60
{worker_containers(n, image, task_command([c['elastic_command']], 'worker', index))}"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config")
    p.add_argument("--image", default="psgd:latest",
                   help="an image with /psgd/ps_server and /psgd/worker (and, "
                        "for worker programs, /psgd/python and the programs)")
    p.add_argument("--namespace", default="default")
    p.add_argument("--port", type=int, default=2222)
    p.add_argument("--checkpoint_size", default="1Gi")
    p.add_argument("--out", default=".")
    p.add_argument("--cluster_tasks", help="configs/cluster_tasks to read the config with "
                   "(default: bazel-bin's, built when missing)")
    a = p.parse_args(argv)
    if not 1 <= a.port <= 65535:
        p.error(f"--port {a.port} is not in 1..65535")
    try:
        c = read_config(a.config, a.cluster_tasks)
    except ConfigError as e:
        sys.exit(f"k8s_manifests.py: {e}")
    try:
        files = {f"{c['name']}-tfjob.yaml": tfjob(c, a.image, a.namespace, a.port),
                 f"{c['name']}-k8s.yaml": plain(c, a.image, a.namespace, a.port,
                                                a.checkpoint_size)}
    except ConfigError as e:
        sys.exit(f"k8s_manifests.py: {a.config}: {e}")
    files = {f: with_token_volume(t, c["name"]) for f, t in files.items()}
    os.makedirs(a.out, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(a.out, name), "w") as fh:
            fh.write(text)
        print(f"k8s_manifests.py: wrote {os.path.join(a.out, name)}")
    secret = os.path.join(a.out, f"{c['name']}-token.yaml")
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token_secret(c, a.namespace))
    print(f"k8s_manifests.py: wrote {secret} (the cluster's token: keep it private)")
    if c["checkpoint"] and not c["own_checkpoint_dirs"]:
        print("k8s_manifests.py: warning: the config's checkpoint directory is shared "
              "by every ps; give each ps task checkpoint_dir: \"/checkpoints\" to keep "
              "them on its own volume", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
