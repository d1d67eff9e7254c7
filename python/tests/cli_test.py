"""The psgd command (python/psgd/cli.py, `python -m psgd`) on bad input and
without a cluster: each subcommand's --help; an unknown subcommand; a config
naming a program that does not exist, a task the config lacks, a C++ worker
the install does not have: refused by name with exit 2 and nothing started
(a stand-in psgd-ps notes any start); compare and ledger-check of a
directory without runs; example --list and a bad example; status of servers
that are not running. The cluster itself: //python/tests:wheel_test.
"""
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], "psgd")
CLUSTER_TASKS = os.path.join(RUNFILES, "configs", "cluster_tasks")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class CliTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        # Stand-ins of the wheel's commands: psgd-cluster-tasks is the real
        # config reader, psgd-ps notes that it was started.
        self.bin = os.path.join(self.dir, "bin")
        os.makedirs(self.bin)
        os.symlink(CLUSTER_TASKS, os.path.join(self.bin, "psgd-cluster-tasks"))
        self.started = os.path.join(self.dir, "started")
        ps = os.path.join(self.bin, "psgd-ps")
        with open(ps, "w") as f:
            f.write(f"#!/bin/sh\necho \"$@\" >> {self.started}\nexit 0\n")
        os.chmod(ps, os.stat(ps).st_mode | stat.S_IEXEC)
        p0, p1, w0, w1 = free_ports(4)
        self.config = os.path.join(self.dir, "c.pbtxt")
        self.write_config(p0, p1, w0, w1, 'program: "worker.py"')
        with open(os.path.join(self.dir, "worker.py"), "w") as f:
            f.write("print('worker ran')\n")

    def write_config(self, p0, p1, w0, w1, program, path=None):
        with open(path or self.config, "w") as f:
            f.write(f'name: "cli"\nps {{ address: "127.0.0.1:{p0}" }}\n'
                    f'ps {{ address: "127.0.0.1:{p1}" }}\n'
                    f'worker {{ address: "127.0.0.1:{w0}" {program} }}\n'
                    f'worker {{ address: "127.0.0.1:{w1}" {program} }}\n'
                    'training { mode: SYNC batch_size: 4 steps: 2 }\n'
                    'model { name: "external" }\ndata { source: SYNTHETIC }\n'
                    f'run_root: "{self.dir}/runs"\n')

    def psgd(self, *args, timeout=60):
        env = dict(os.environ, PATH=self.bin + ":/usr/bin:/bin")
        return subprocess.run([sys.executable, "-m", "psgd", *args], cwd=self.dir,
                              capture_output=True, text=True, env=env, timeout=timeout)

    def assertRefused(self, r, *words):
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        for w in words:
            self.assertIn(w, r.stderr)

    def test_help_of_every_command(self):
        r = self.psgd("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for command in ("info", "launch", "compare", "ledger-check", "status", "ps", "example",
                        "plan", "calibrate", "ckpt"):
            self.assertIn(command, r.stdout)
            h = self.psgd(command, "--help")
            self.assertEqual(h.returncode, 0, command + ": " + h.stderr)
            self.assertIn("usage", h.stdout.lower(), command)

    def test_no_arguments_is_info(self):
        r = self.psgd()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^psgd \d")
        self.assertIn("extension: loads", r.stdout)

    def test_unknown_command(self):
        self.assertRefused(self.psgd("lunch", "c.pbtxt"), "unknown command 'lunch'", "launch")

    def test_program_that_does_not_exist_starts_nothing(self):
        self.write_config(*free_ports(4), 'program: "no_such_worker.py --x"')
        r = self.psgd("launch", self.config)
        self.assertRefused(r, "worker:0's program 'no_such_worker.py' does not exist")
        self.assertFalse(os.path.exists(self.started), "a server was started")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "runs")), "a run directory was made")

    def test_unknown_task_starts_nothing(self):
        r = self.psgd("launch", self.config, "--tasks", "ps:0,worker:7")
        self.assertRefused(r, "worker:7 not in", "ps:0, ps:1, worker:0, worker:1")
        self.assertFalse(os.path.exists(self.started))

    def test_cpp_worker_not_installed(self):
        self.write_config(*free_ports(4), "")
        r = self.psgd("launch", self.config)
        self.assertRefused(r, "worker:0 runs the C++ worker")
        self.assertFalse(os.path.exists(self.started))

    def test_no_config(self):
        self.assertRefused(self.psgd("launch", "nope.pbtxt"), "no config file 'nope.pbtxt'")
        self.assertRefused(self.psgd("status", "nope.pbtxt"), "no config file 'nope.pbtxt'")

    def test_launch_selected_tasks(self):
        # The servers alone (stand-ins that exit 0): started with the
        # config, their task and the run directory; the workers are not.
        run = os.path.join(self.dir, "run")
        r = self.psgd("launch", self.config, "--tasks=ps:1,ps:0", "--run_dir", run)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(self.started) as f:
            lines = sorted(f.read().splitlines())
        self.assertEqual(len(lines), 2, lines)
        self.assertIn("--task=ps:0", lines[0])
        self.assertIn(f"--run_dir={run}", lines[0])
        self.assertIn("every task exited 0", r.stdout)
        # A worker program runs with this Python and the package importable.
        r = self.psgd("launch", self.config, "--tasks=worker:1", "--run_dir", run)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("worker:1 | worker ran", r.stdout)

    def test_first_failure_is_the_exit_status(self):
        with open(os.path.join(self.dir, "worker.py"), "w") as f:
            f.write("import sys\nsys.exit(5 if '--task=worker:1' in sys.argv else 0)\n")
        r = self.psgd("launch", self.config, "--tasks=worker:0,worker:1",
                      "--run_dir", os.path.join(self.dir, "run"))
        self.assertEqual(r.returncode, 5, r.stdout + r.stderr)
        self.assertIn("failed: worker:1 (exit 5)", r.stderr)

    def test_compare_and_ledger_check_without_runs(self):
        empty = os.path.join(self.dir, "empty")
        os.makedirs(empty)
        r = self.psgd("compare", empty)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"{empty}: no .jsonl metrics files", r.stderr)
        r = self.psgd("compare", os.path.join(self.dir, "missing"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing: not a directory", r.stderr)
        r = self.psgd("ledger-check", empty)
        self.assertRefused(r, f"{empty}/config.pbtxt: cannot read the run's config")
        # A run whose config hands out no data.
        self.write_config(*free_ports(4), "", path=os.path.join(empty, "config.pbtxt"))
        self.assertRefused(self.psgd("ledger-check", empty), "sharding: SERVERS")

    def test_ledger_check_of_a_run(self):
        # A run directory with its config and a ledger of two whole epochs
        # of 8 samples in chunks of 4 (seed 1), written from the checker's
        # own permutation; then one chunk repeated.
        sys.path.insert(0, os.path.join(RUNFILES, "python", "site"))
        from psgd import ledger_check  # pylint: disable=import-outside-toplevel
        run = os.path.join(self.dir, "ledger-run")
        os.makedirs(run)
        with open(os.path.join(run, "config.pbtxt"), "w") as f:
            f.write('name: "l"\nps { address: "127.0.0.1:1" }\n'
                    'worker { address: "127.0.0.1:2" }\n'
                    'training { batch_size: 4 steps: 4 }\n'
                    'data { source: SYNTHETIC synthetic_train_size: 8 sharding: SERVERS '
                    'ledger: true }\n'
                    f'checkpoint {{ dir: "{run}/ckpt" }}\n')
        os.makedirs(os.path.join(run, "ckpt"))
        lines = []
        for epoch in (0, 1, 2):
            perm = ledger_check.epoch_permutation(8, 1, epoch)
            for index in (0, 1) if epoch < 2 else (0,):
                lines.append(json.dumps({"epoch": epoch, "index": index, "worker": 0,
                                         "first": perm[index * 4], "count": 4}))
        path = os.path.join(run, "ckpt", "ledger.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = self.psgd("ledger-check", run)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("8 samples, chunks of 4, seed 1, epochs 0..1 whole", r.stdout)
        self.assertIn("epoch 1: 8 samples, 0 missing, 0 repeated", r.stdout)
        with open(path, "a") as f:
            f.write(lines[0] + "\n")
        r = self.psgd("ledger-check", run)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("epoch 0: 12 samples, 0 missing, 4 repeated  NOT WHOLE", r.stdout)

        # A run that stopped at its step limit with chunk 0/1 in worker 1's
        # hands (its push dropped after the last step): epoch 0 lacks it,
        # and the worker's records end with it.
        with open(path, "w") as f:
            f.write("\n".join(lines[:1] + lines[2:]) + "\n")
        def record(epoch, index, worker, outcome):
            perm = ledger_check.epoch_permutation(8, 1, epoch)
            return json.dumps({"worker": worker, "step": 0, "generation": 0, "epoch": epoch,
                               "index": index, "outcome": outcome,
                               "samples": perm[index * 4:index * 4 + 4]})
        with open(os.path.join(run, "samples-worker-0.jsonl"), "w") as f:
            f.write("\n".join(record(e, i, 0, "applied")
                              for e, i in ((0, 0), (1, 0), (1, 1), (2, 0))) + "\n")
        with open(os.path.join(run, "samples-worker-1.jsonl"), "w") as f:
            f.write(record(0, 1, 1, "dropped_stale") + "\n")
        r = self.psgd("ledger-check", run)  # no summary: not known to be step-limited
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("epoch 0: 4 samples, 4 missing, 0 repeated  NOT WHOLE", r.stdout)
        with open(os.path.join(run, "summary.json"), "w") as f:
            json.dump({"end_reason": "reached step 4"}, f)
        r = self.psgd("ledger-check", run)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("stopped at its step limit", r.stdout)
        self.assertIn("epoch 0: 4 samples, 4 missing, 0 repeated  (held at the end: "
                      "chunk 0/1 by worker 1 (dropped_stale))", r.stdout)

    def test_examples(self):
        r = self.psgd("example", "--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("torch_cifar10", r.stdout)
        self.assertIn("torchvision_cifar10", r.stdout)
        r = self.psgd("example", "torch_cifar10", "--path")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(r.stdout.strip()), r.stdout)
        self.assertRefused(self.psgd("example", "mnist"), "no example 'mnist'", "torch_cifar10")
        r = self.psgd("example", "torch_cifar10", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--own_loop", r.stdout)

    def test_status_of_servers_not_running(self):
        r = self.psgd("status", self.config, "--timeout", "1")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"ps:0 .* not answering")
        self.assertRegex(r.stdout, r"ps:1 .* not answering")

    def test_ps_runs_the_installed_server(self):
        r = self.psgd("ps", "--config=c.pbtxt", "--task=ps:0")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.started) as f:
            self.assertEqual(f.read().strip(), "--config=c.pbtxt --task=ps:0")


if __name__ == "__main__":
    unittest.main()
