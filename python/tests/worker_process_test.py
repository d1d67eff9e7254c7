"""psgd.torch workers as processes of their own (process_worker.py), the way
a scheduler runs them, against real servers:

* SIGTERM to a Python sync worker: it leaves at the next step boundary
  (the step in hand pushed: every batch it began has an answer, and the
  server took every push the two workers made)
  (exit 0, its end reason says SIGTERM); the others go on at once, without
  waiting for its lease (no worker expired on the servers, the chief
  reaches its last step).
* SIGINT (Ctrl-C) to the Python chief: one line says the job ends; the
  servers shut down (exit 0), summary.json is written with the reason, the
  other worker ends as the servers go, and nobody needs a second Ctrl-C.
* SIGINT to the Python chief while it evaluates (for a minute): the
  evaluation ends at once, and the job without another step.
* SIGINT to the Python chief while its sync pull waits for a worker that
  computes for minutes: the pull returns, the job ends (servers exit 0,
  summary.json) while that worker is still computing.
* kill -9 of a Python sync worker, started again: it rejoins and trains
  (sync 2 of 2: the run reaches its last step only with its gradients).
* An exception in the chief's dataset: the job ends with the exception's
  text as its reason (summary.json), the servers exit 0, the program exits
  with the exception (non-zero), and the other worker ends.
* An exception in the loop's body (the training code between the
  backward and step()), with and without `with Worker(...)`: the job ends
  with the exception's type and text as its reason (summary.json), not
  "the loop over batches() ended early".
* A 4 s step under a 3 s lease trains to its last step: the lease is kept
  while Python computes, no worker expires.
* step() answers what became of each push: its outcomes are the step lines'
  of worker-J.jsonl, step for step, and, counted, the server's own counts
  (sync with a backup worker, where pushes are dropped, and async);
  batches may carry extra items.
* The servers killed (SIGKILL) under a training cluster: SIGINT to a worker
  and SIGTERM to the chief each end it within seconds (exit 0, no
  traceback), not after minutes of retries; the chief's summary.json says
  why. Two Ctrl-Cs in a row stop a worker at once.
* A worker started before its servers ("waiting for parameter servers"),
  and one whose chief never came (it waits for the chief's initialisation,
  and says so): SIGINT / SIGTERM end it within seconds, before it joined.
* The chief ends the job on another worker's ModelMismatchError: it
  writes summary.json with the reason at once (also when it ends the job
  at its join), and a worker in the middle of a long step stops as soon
  as it pushes, not after minutes of re-syncing.
"""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

from cluster import Cluster

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "process_worker.py")
DATA = "source: SYNTHETIC"


def start(c, task, *flags):
    with open(os.path.join(c.dir, task.replace(":", "") + ".py.log"),
              "w") as log:
        return subprocess.Popen(
            [sys.executable, WORKER, c.config, task, c.run_dir, *flags],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))


def log_of(c, task):
    with open(os.path.join(c.dir, task.replace(":", "") + ".py.log")) as f:
        return f.read()


def await_started(c, task, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if "started" in log_of(c, task):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{task} exited {proc.returncode} before "
                                 f"its first step:\n{log_of(c, task)}")
        time.sleep(0.1)
    raise AssertionError(f"{task} did not start:\n{log_of(c, task)}")


def pulls_waiting(c):
    """Shard 0's pulls waiting for their step, asked of the server."""
    import psgd  # pylint: disable=import-outside-toplevel
    token = os.path.join(c.run_dir, "token")
    if os.path.exists(token):
        os.environ["PSGD_TOKEN_FILE"] = token
    shard = psgd._psgd.cluster_status(c.config, 5.0)[0]
    assert "error" not in shard, shard
    return shard["pulls_waiting"]


def ps_summary(c):
    with open(os.path.join(c.run_dir, "ps-0.summary.json")) as f:
        return json.load(f)


class WorkerProcessTest(unittest.TestCase):
    def test_sigterm_leaves_at_a_step_boundary(self):
        with Cluster("proc-term", ps=1, workers=2, n=2, steps=300,
                     model="external", data=DATA,
                     extra="worker_lease_seconds: 30") as c:
            chief = start(c, "worker:0")
            begun = os.path.join(c.dir, "begun-1")
            answers = os.path.join(c.dir, "answers-1")
            other = start(c, "worker:1", f"--batches={begun}",
                          f"--outcomes={answers}")
            await_started(c, "worker:1", other)
            t0 = time.time()
            other.send_signal(signal.SIGTERM)
            self.assertEqual(other.wait(60), 0, log_of(c, "worker:1"))
            print(f"worker:1 left {time.time() - t0:.2f} s after SIGTERM")
            self.assertIn("SIGTERM", log_of(c, "worker:1"))
            self.assertEqual(chief.wait(240), 0, log_of(c, "worker:0"))
            self.assertEqual(c.wait_ps(), [0])
            run = c.summary()
            one = c.summary("worker-1.summary.json")
            ps = ps_summary(c)
            ps_log = c.log("ps:0")
            chief_pushes = len([l for l in c.lines(0) if l["kind"] == "train"])
        self.assertEqual(run["final_global_step"], 300)
        self.assertIn("SIGTERM", one["end_reason"])
        # The step in hand was pushed: every batch the program began has
        # its push's answer (the program's own two records), and the server
        # took as many pushes as the two workers made.
        with open(begun) as f:
            began = [int(l) for l in f if l.strip()]
        with open(answers) as f:
            answered = [json.loads(l) for l in f if l.strip()]
        self.assertGreater(len(began), 0)
        self.assertEqual(len(began), len(answered), (began[-3:], answered[-3:]))
        counters = ps.get("counters", ps)
        taken = sum(counters.get(k, 0) for k in
                    ("applied", "aggregated", "dropped_stale", "dropped_surplus"))
        self.assertEqual(taken, chief_pushes + len(answered), counters)
        # It left: no lease of it ran out on the server, no step waited.
        self.assertEqual(ps["workers_expired"], 0, ps)
        self.assertNotIn("left the live set (lease)", ps_log)
        self.assertNotIn("has waited", ps_log)

    def test_ctrl_c_of_the_chief_ends_the_job(self):
        with Cluster("proc-int", ps=1, workers=2, n=2, steps=100000,
                     model="external", data=DATA) as c:
            chief = start(c, "worker:0")
            other = start(c, "worker:1")
            await_started(c, "worker:0", chief)
            await_started(c, "worker:1", other)
            t0 = time.time()
            chief.send_signal(signal.SIGINT)
            code = chief.wait(60)
            self.assertEqual(c.wait_ps(60), [0])
            print(f"the servers were down {time.time() - t0:.2f} s after "
                  "the chief's SIGINT")
            other_code = other.wait(60)
            run = c.summary()
            chief_log = log_of(c, "worker:0")
            other_log = log_of(c, "worker:1")
        self.assertEqual(code, 0, chief_log)
        self.assertIn("SIGINT", run["end_reason"])
        self.assertEqual(chief_log.count("psgd: SIGINT"), 1, chief_log)
        self.assertNotIn("Exception ignored", chief_log)
        self.assertEqual(other_code, 0, other_log)

    def test_ctrl_c_ends_an_evaluation_under_way(self):
        # The chief evaluates for 60 s every 3 steps: Ctrl-C while it does
        # ends the evaluation and the job at once, without one more step.
        with Cluster("proc-int-eval", ps=1, workers=1, steps=100000,
                     model="external", data=DATA,
                     training="eval_every: 3") as c:
            chief = start(c, "worker:0", "--eval_seconds=60")
            self.addCleanup(chief.kill)
            deadline = time.time() + 120
            while "evaluating" not in log_of(c, "worker:0"):
                self.assertIsNone(chief.poll(), log_of(c, "worker:0"))
                self.assertLess(time.time(), deadline, log_of(c, "worker:0"))
                time.sleep(0.1)
            t0 = time.time()
            chief.send_signal(signal.SIGINT)
            code = chief.wait(15)
            self.assertEqual(c.wait_ps(15), [0])
            seconds = time.time() - t0
            run = c.summary()
            chief_log = log_of(c, "worker:0")
            lines = c.lines(0)
        self.assertEqual(code, 0, chief_log)
        self.assertLess(seconds, 10, chief_log)
        self.assertEqual(run["end_reason"], "SIGINT: the chief ended the job")
        self.assertNotIn("evaluated", chief_log)
        self.assertIn("the evaluation under way is abandoned", chief_log)
        # No step after the evaluation began (at step 3), no eval line.
        self.assertEqual(max(l["step"] for l in lines if l["kind"] == "train"),
                         2, lines)
        self.assertFalse([l for l in lines if l["kind"] == "eval"], lines)
        self.assertNotIn("Traceback", chief_log)

    def test_ctrl_c_ends_a_pull_that_waits_for_the_step(self):
        with Cluster("proc-pull", ps=1, workers=2, n=2, steps=100000,
                     model="external", data=DATA,
                     extra="worker_lease_seconds: 600") as c:
            chief = start(c, "worker:0")
            # worker:1 computes batch 3 for 10 minutes: the chief's pull
            # for that step waits for it.
            other = start(c, "worker:1", "--stall_at=3",
                          "--stall_seconds=600")
            await_started(c, "worker:0", chief)
            deadline = time.time() + 120
            while "stalling" not in log_of(c, "worker:1"):
                self.assertLess(time.time(), deadline, log_of(c, "worker:1"))
                time.sleep(0.1)
            # The chief is in its pull: the server holds it waiting.
            while pulls_waiting(c) < 1:
                self.assertLess(time.time(), deadline, log_of(c, "worker:0"))
                time.sleep(0.1)
            chief.send_signal(signal.SIGINT)
            code = chief.wait(60)
            servers = c.wait_ps(60)
            # The job ended while worker:1 was still in its stall: the
            # chief's pull did not wait for worker:1's gradient.
            still_computing = other.poll() is None
            other.kill()
            other.wait(30)
            run = c.summary()
            chief_log = log_of(c, "worker:0")
        self.assertEqual(code, 0, chief_log)
        self.assertEqual(servers, [0])
        self.assertTrue(still_computing)
        self.assertIn("SIGINT", run["end_reason"])
        self.assertEqual(chief_log.count("psgd: SIGINT"), 1, chief_log)
        self.assertNotIn("Traceback", chief_log)

    def test_signals_end_workers_whose_servers_are_gone(self):
        with Cluster("proc-gone", ps=1, workers=2, n=2, steps=100000,
                     model="external", data=DATA) as c:
            chief = start(c, "worker:0")
            other = start(c, "worker:1")
            self.addCleanup(chief.kill)
            self.addCleanup(other.kill)
            await_started(c, "worker:0", chief)
            await_started(c, "worker:1", other)
            c.stop()  # SIGKILL: no server answers any more
            time.sleep(2)  # both retry (a push, a pull)
            other.send_signal(signal.SIGINT)
            chief.send_signal(signal.SIGTERM)
            # Seconds, not the minutes of ps_unavailable_timeout: the
            # generous bound is for a loaded machine.
            other_code = other.wait(15)
            code = chief.wait(15)
            run = c.summary()
            chief_log = log_of(c, "worker:0")
            other_log = log_of(c, "worker:1")
        self.assertEqual(other_code, 0, other_log)
        self.assertEqual(code, 0, chief_log)
        self.assertIn("end_reason: SIGINT: left at a step boundary", other_log)
        self.assertEqual(run["end_reason"], "SIGTERM: the chief ended the job")
        for log in (chief_log, other_log):
            self.assertNotIn("Traceback", log)
            self.assertNotIn("UnavailableError", log)

    def test_a_second_ctrl_c_stops_at_once(self):
        # The chief computes batch 3 for a minute; the servers are killed
        # meanwhile. The first Ctrl-C waits for the step boundary; the
        # second stops the program at once: the leave on its way out tries
        # the servers once, not for minutes.
        with Cluster("proc-twice", ps=1, workers=1, steps=100000,
                     model="external", data=DATA) as c:
            chief = start(c, "worker:0", "--stall_at=3",
                          "--stall_seconds=60")
            self.addCleanup(chief.kill)
            deadline = time.time() + 120
            while "stalling" not in log_of(c, "worker:0"):
                self.assertIsNone(chief.poll(), log_of(c, "worker:0"))
                self.assertLess(time.time(), deadline, log_of(c, "worker:0"))
                time.sleep(0.1)
            c.stop()
            chief.send_signal(signal.SIGINT)
            time.sleep(1)
            self.assertIsNone(chief.poll())  # the step goes on
            chief.send_signal(signal.SIGINT)
            code = chief.wait(15)
            chief_log = log_of(c, "worker:0")
        # Python's own KeyboardInterrupt, said once by psgd's line.
        self.assertNotEqual(code, 0, chief_log)
        self.assertIn("KeyboardInterrupt", chief_log)
        self.assertEqual(chief_log.count("psgd: SIGINT"), 1, chief_log)
        self.assertNotIn("UnavailableError", chief_log)

    def test_signals_end_a_worker_that_waits_to_join(self):
        # No server: the worker waits for them ("waiting for parameter
        # servers"); SIGINT ends it before it joined.
        with Cluster("proc-noserver", ps=1, workers=2, n=2, steps=100000,
                     model="external", data=DATA) as c:
            c.stop()
            w = start(c, "worker:1")
            self.addCleanup(w.kill)
            deadline = time.time() + 60
            while "waiting for parameter servers" not in log_of(c, "worker:1"):
                self.assertIsNone(w.poll(), log_of(c, "worker:1"))
                self.assertLess(time.time(), deadline, log_of(c, "worker:1"))
                time.sleep(0.1)
            w.send_signal(signal.SIGINT)
            code = w.wait(15)
            no_server_log = log_of(c, "worker:1")
        self.assertEqual(code, 0, no_server_log)
        self.assertIn("before it joined the cluster", no_server_log)
        self.assertIn("end_reason: SIGINT: stopped before joining",
                      no_server_log)
        self.assertNotIn("Traceback", no_server_log)
        # The servers up, the chief never came (it died before joining):
        # worker:1 says what it waits for, and SIGTERM ends the wait.
        with Cluster("proc-nochief", ps=1, workers=2, n=2, steps=100000,
                     model="external", data=DATA) as c:
            w = start(c, "worker:1")
            self.addCleanup(w.kill)
            deadline = time.time() + 60
            while "waiting for the chief" not in log_of(c, "worker:1"):
                self.assertIsNone(w.poll(), log_of(c, "worker:1"))
                self.assertLess(time.time(), deadline, log_of(c, "worker:1"))
                time.sleep(0.1)
            w.send_signal(signal.SIGTERM)
            code = w.wait(15)
            no_chief_log = log_of(c, "worker:1")
        self.assertEqual(code, 0, no_chief_log)
        self.assertIn("end_reason: SIGTERM: stopped before joining",
                      no_chief_log)
        self.assertNotIn("Traceback", no_chief_log)

    def test_a_job_the_chief_ends_early_stops_the_others(self):
        # Async, 3 workers: worker:1 computes one step for 20 s; worker:2
        # is started again with another model (ModelMismatchError), and
        # the chief ends the job. worker:1 stops as soon as it pushes, by
        # the chief's summary.json (the servers are gone by then), not
        # after minutes of re-syncing.
        with Cluster("proc-mismatch", mode="ASYNC", ps=1, workers=3,
                     steps=100000, model="external", data=DATA) as c:
            chief = start(c, "worker:0")
            slow = start(c, "worker:1", "--stall_at=3", "--stall_seconds=20")
            bad = start(c, "worker:2")
            for p in (chief, slow, bad):
                self.addCleanup(p.kill)
            await_started(c, "worker:0", chief)
            await_started(c, "worker:2", bad)
            deadline = time.time() + 60
            while "stalling" not in log_of(c, "worker:1"):
                self.assertLess(time.time(), deadline, log_of(c, "worker:1"))
                time.sleep(0.1)
            t0 = time.time()
            bad.kill()
            bad.wait(30)
            bad = start(c, "worker:2", "--hidden=12")
            self.addCleanup(bad.kill)
            self.assertNotEqual(bad.wait(60), 0)
            code = chief.wait(15)
            self.assertEqual(c.wait_ps(15), [0])
            run = c.summary()
            slow_code = slow.wait(max(1, 20 - (time.time() - t0)) + 15)
            chief_log = log_of(c, "worker:0")
            slow_log = log_of(c, "worker:1")
        self.assertNotEqual(code, 0, chief_log)
        self.assertIn("worker:2 failed", run["end_reason"])
        self.assertEqual(slow_code, 0, slow_log)
        self.assertNotIn("Traceback", slow_log)

    def test_a_chief_that_ends_the_job_at_its_join_writes_the_summary(self):
        # Every worker joins at step 0 and waits for the others: worker:1's
        # model is not the chief's, and the chief ends the job before its
        # first step. summary.json says why (the others read its
        # appearance as the end of the job).
        with Cluster("proc-mismatch0", ps=1, workers=2, n=2, steps=100000,
                     model="external", data=DATA) as c:
            chief = start(c, "worker:0")
            bad = start(c, "worker:1", "--hidden=12")
            for p in (chief, bad):
                self.addCleanup(p.kill)
            code = chief.wait(60)
            self.assertEqual(c.wait_ps(15), [0])
            run = c.summary()
            chief_log = log_of(c, "worker:0")
        self.assertNotEqual(code, 0, chief_log)
        self.assertIn("FailedPreconditionError", chief_log)
        self.assertIn("worker:1 failed", run["end_reason"])
        self.assertEqual(run["final_global_step"], 0, run)

    def test_a_killed_worker_started_again_trains(self):
        # Sync 2 of 2: after worker:1's kill no step completes without it,
        # so the run reaches its last step only if the restarted process
        # pushes gradients that the servers aggregate.
        with Cluster("proc-restart", ps=1, workers=2, n=2, steps=150,
                     model="external", data=DATA,
                     extra="worker_lease_seconds: 60") as c:
            chief = start(c, "worker:0")
            other = start(c, "worker:1")
            await_started(c, "worker:1", other)
            other.kill()
            other.wait(30)
            # The chief's newest step: no later one completes without
            # worker:1.
            killed_at = max(l["step"] for l in c.lines(0)
                            if l["kind"] == "train")
            again = start(c, "worker:1")
            await_started(c, "worker:1", again)
            self.assertEqual(again.wait(240), 0, log_of(c, "worker:1"))
            self.assertEqual(chief.wait(240), 0, log_of(c, "worker:0"))
            self.assertEqual(c.wait_ps(), [0])
            run = c.summary()
            one = c.summary("worker-1.summary.json")
            ps = ps_summary(c)
        self.assertEqual(run["final_global_step"], 150)
        self.assertLess(killed_at, 150)
        # The restarted process's own steps, each a gradient of a step
        # that needed it.
        self.assertGreaterEqual(one["local_steps"], 150 - killed_at - 1, one)
        self.assertEqual(ps["workers_expired"], 0, ps)

    def test_an_exception_in_the_dataset_ends_the_job(self):
        with Cluster("proc-fail", ps=1, workers=2, n=2, steps=100000,
                     model="external", data=DATA) as c:
            chief = start(c, "worker:0", "--fail_at=5")
            other = start(c, "worker:1")
            code = chief.wait(120)
            self.assertEqual(c.wait_ps(60), [0])
            other_code = other.wait(60)
            run = c.summary()
            chief_log = log_of(c, "worker:0")
            other_log = log_of(c, "worker:1")
        self.assertNotEqual(code, 0)
        self.assertIn("OSError", chief_log)  # the program's own traceback
        self.assertIn("the dataset's file is gone", run["end_reason"])
        self.assertEqual(other_code, 0, other_log)

    def test_an_exception_in_the_loop_with_a_context_manager(self):
        # The same through `with Worker(...) as w:`: the dataset raises in
        # the loop's own body's next batch; the job ends with its text.
        with Cluster("proc-with", ps=1, workers=1, steps=100000,
                     model="external", data=DATA) as c:
            chief = start(c, "worker:0", "--fail_at=3", "--with")
            code = chief.wait(120)
            self.assertEqual(c.wait_ps(60), [0])
            run = c.summary()
        self.assertNotEqual(code, 0)
        self.assertIn("the dataset's file is gone", run["end_reason"])

    def test_an_exception_in_the_loop_body_ends_the_job_with_its_text(self):
        # The training code raises between steps (not the dataset): Python
        # closes the loop's generator before anyone sees the exception;
        # the job still ends with its type and text.
        for flags in ([], ["--with"]):
            with self.subTest(flags=flags), Cluster(
                    "proc-body", ps=1, workers=2, n=2, steps=100000,
                    model="external", data=DATA) as c:
                chief = start(c, "worker:0", "--raise_at=4", *flags)
                other = start(c, "worker:1")
                code = chief.wait(120)
                self.assertEqual(c.wait_ps(60), [0])
                other_code = other.wait(60)
                run = c.summary()
                chief_log = log_of(c, "worker:0")
                other_log = log_of(c, "worker:1")
                self.assertNotEqual(code, 0, chief_log)
                # The program's own traceback, once.
                self.assertEqual(chief_log.count("Traceback"), 1, chief_log)
                self.assertIn("\nRuntimeError: boom at batch 4\n", chief_log)
                self.assertEqual(run["end_reason"],
                                 "RuntimeError: boom at batch 4", run)
                self.assertEqual(other_code, 0, other_log)

    def test_a_long_step_under_a_short_lease_trains(self):
        with Cluster("proc-long", ps=1, workers=1, steps=3,
                     model="external", data=DATA,
                     extra="worker_lease_seconds: 3") as c:
            w = start(c, "worker:0", "--step_seconds=4")
            self.assertEqual(w.wait(180), 0, log_of(c, "worker:0"))
            self.assertEqual(c.wait_ps(), [0])
            run = c.summary()
            ps = ps_summary(c)
        self.assertEqual(run["final_global_step"], 3)
        self.assertEqual(ps["workers_expired"], 0, ps)

    def test_step_answers_what_became_of_each_push(self):
        # Sync with a backup worker (N = 1 of 2: each step one push applied,
        # the other dropped) and async (every push applied): the program's
        # answers against its train lines, and the answers' outcomes counted
        # against what the server counted.
        for mode, n in (("SYNC", "1"), ("ASYNC", None)):
            with self.subTest(mode=mode):
                self.outcomes_of_a_run(mode, n)

    def outcomes_of_a_run(self, mode, n):
        keys = dict(mode=mode, ps=1, workers=2, steps=40, model="external",
                    data=DATA)
        if n:
            keys["n"] = n
        with Cluster(f"proc-outcomes-{mode.lower()}", **keys) as c:
            files = [os.path.join(c.dir, f"outcomes-{j}.jsonl")
                     for j in range(2)]
            procs = [start(c, f"worker:{j}", f"--outcomes={files[j]}")
                     for j in range(2)]
            for j, p in enumerate(procs):
                self.assertEqual(p.wait(180), 0, log_of(c, f"worker:{j}"))
            self.assertEqual(c.wait_ps(), [0])
            lines = [[l for l in c.lines(j) if l["kind"] == "train"]
                     for j in range(2)]
            counters = ps_summary(c)
            counters = counters.get("counters", counters)
        seen = {}
        for j in range(2):
            with open(files[j]) as f:
                answers = [json.loads(l) for l in f if l.strip()]
            self.assertEqual(len(answers), len(lines[j]))
            self.assertGreater(len(answers), 0)
            for a, line in zip(answers, lines[j]):
                self.assertEqual(a["outcome"], line["outcome"], (a, line))
                self.assertEqual(a["step"], line["step"], (a, line))
                self.assertEqual(a["staleness"], line["staleness"], (a, line))
                self.assertEqual(a["applied"], a["outcome"] == "applied")
                seen[a["outcome"]] = seen.get(a["outcome"], 0) + 1
            # The extra item of each batch came back: 1, 2, ..., 16 (an
            # epoch of process_worker.py's data), in order.
            self.assertEqual([a["batch"] for a in answers],
                             [i % 16 + 1 for i in range(len(answers))])
        # What the server counted, outcome by outcome.
        for outcome in ("applied", "aggregated", "dropped_stale", "dropped_surplus"):
            self.assertEqual(seen.get(outcome, 0), counters.get(outcome, 0),
                             (outcome, seen, counters))
        if mode == "SYNC":
            self.assertGreater(seen.get("dropped_stale", 0) +
                               seen.get("dropped_surplus", 0), 0, seen)


class SayWhatChangesTest(unittest.TestCase):
    """What psgd.torch would otherwise change without a word."""

    def test_lazy_modules_batch_norm_rules_local_buffers_and_threads(self):
        import warnings  # pylint: disable=import-outside-toplevel

        import torch  # pylint: disable=import-outside-toplevel

        import psgd.torch  # pylint: disable=import-outside-toplevel
        with Cluster("say-what", ps=1, workers=1, steps=1, model="external",
                     data=DATA) as c:
            lazy = torch.nn.Sequential(torch.nn.LazyLinear(3))
            with self.assertRaises(psgd.InvalidArgumentError) as e:
                psgd.torch.Worker(lazy, c.config, "worker:0")
            self.assertIn("run one forward", str(e.exception))
            for momentum, says in ((None, "cumulative average"),
                                   (0.2, "momentum 0.2")):
                net = torch.nn.Sequential(torch.nn.Linear(8, 4),
                                          torch.nn.BatchNorm1d(
                                              4, momentum=momentum))
                with self.assertRaises(psgd.InvalidArgumentError) as e:
                    psgd.torch.Worker(net, c.config, "worker:0")
                self.assertIn(says, str(e.exception))
                self.assertIn("batch_norm_statistics: LOCAL", str(e.exception))
                self.assertIn("model { batch_norm_statistics: SERVER } the "
                              "servers", str(e.exception))
            net = torch.nn.Sequential(torch.nn.Linear(8, 4))
            net.register_buffer("ema", torch.zeros(4))
            before = torch.get_num_threads()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                w = psgd.torch.Worker(net, c.config, "worker:0")
            self.assertTrue(any("ema" in str(x.message) for x in caught),
                            [str(x.message) for x in caught])
            # The config's worker { threads: 1 } (cluster.sh writes it).
            self.assertEqual(w.settings["threads"], 1)
            self.assertEqual(torch.get_num_threads(), 1)
            torch.set_num_threads(before)
            # An instance norm that tracks running statistics keeps them on
            # each worker, as any buffer that is not batch norm's: named
            # too. Batch norm's own buffers are no such news.
            net = torch.nn.Sequential(
                torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4),
                torch.nn.Unflatten(1, (1, 4)),
                torch.nn.InstanceNorm1d(1, track_running_stats=True))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                psgd.torch.Worker(net, c.config, "worker:0")
            said = [str(x.message) for x in caught
                    if "stay on each worker" in str(x.message)]
            self.assertEqual(len(said), 1, said)
            self.assertIn("3.running_mean, 3.running_var, "
                          "3.num_batches_tracked", said[0])
            self.assertNotIn("1.", said[0])
            torch.set_num_threads(before)
        # With the statistics on the workers, a module's own rule is its,
        # and its buffers stay there without a word.
        with Cluster("say-local", ps=1, workers=1, steps=1, model="external",
                     bn="LOCAL", data=DATA) as c:
            net = torch.nn.Sequential(torch.nn.Linear(8, 4),
                                      torch.nn.BatchNorm1d(4, momentum=None))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                psgd.torch.Worker(net, c.config, "worker:0")
            self.assertFalse([x for x in caught
                              if "stay on each worker" in str(x.message)])
            torch.set_num_threads(before)

    def test_a_loader_not_split_per_worker_is_told(self):
        import warnings  # pylint: disable=import-outside-toplevel

        import torch  # pylint: disable=import-outside-toplevel

        import psgd.torch  # pylint: disable=import-outside-toplevel
        data = torch.utils.data.TensorDataset(torch.zeros(64, 8),
                                              torch.zeros(64, dtype=torch.long))
        with Cluster("say-split", ps=1, workers=2, n=2, steps=1,
                     model="external", data=DATA) as c:
            net = torch.nn.Sequential(torch.nn.Linear(8, 3))
            before = torch.get_num_threads()
            w = psgd.torch.Worker(net, c.config, "worker:1")
            torch.set_num_threads(before)

            def first_batch(loader):
                # The warning comes before the join (as an error here).
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    return next(iter(w.batches(loader)))

            whole = torch.utils.data.DataLoader(data, batch_size=8,
                                                shuffle=True)
            with self.assertRaises(UserWarning) as e:
                first_batch(whole)
            self.assertIn("not split among the 2 workers", str(e.exception))
            self.assertIn("sampler=w.sampler(dataset)", str(e.exception))
            other = torch.utils.data.DataLoader(
                data, batch_size=8,
                sampler=torch.utils.data.DistributedSampler(
                    data, num_replicas=2, rank=0))
            with self.assertRaises(UserWarning) as e:
                first_batch(other)
            self.assertIn("rank 0 of 2", str(e.exception))
            self.assertIn("worker 1 of 2", str(e.exception))
            # Split for this worker: no warning (the batches() generator
            # is left unstarted past the check: it would join).
            ok = torch.utils.data.DataLoader(data, batch_size=8,
                                             sampler=w.sampler(data))
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                w._check_split(ok)  # pylint: disable=protected-access


if __name__ == "__main__":
    unittest.main()
