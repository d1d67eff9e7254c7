"""psgd.Session: one worker task of a psgd cluster, and what a push
returns (StepOutcome, PushOutcome). The package's docstring (psgd) shows a
loop; docs/PYTHON.md describes the API. Import these from psgd.
"""

import enum
import time
import typing

from psgd import _psgd
from psgd.errors import Error, InvalidArgumentError

__all__ = ["Session", "StepOutcome", "PushOutcome", "eval_metrics"]

# The C++ StepOutcome (worker/session/step_outcome.h), member for member:
# kApplied is APPLIED, kDroppedStale DROPPED_STALE ...; the values are the
# words of the metrics (worker-J.jsonl's "outcome").
StepOutcome = enum.Enum(
    "StepOutcome", [(name.upper(), name) for name in _psgd.STEP_OUTCOMES],
    module=__name__)
StepOutcome.__doc__ = """What became of a push (worker/session/step_outcome.h).

One outcome for every shard (shard 0 decides each push for all of them).
APPLIED: completed a step (sync) or applied (async); AGGREGATED: joined the
step's aggregate; DROPPED_STALE / DROPPED_SURPLUS: dropped, computed from an
older step / the step was already full; REFUSED_TOO_STALE: beyond
the async staleness bound; REJOINED: the worker was out of the live set and
joined again; DUPLICATE: sent again after a failure, the shards had it;
ROLLED_BACK: the cluster went back to a checkpoint before it landed."""


class PushOutcome(typing.NamedTuple):
    """A push's outcome, its staleness (async: the largest over the shards)
    and the cluster's generation afterwards."""
    outcome: StepOutcome
    staleness: int
    generation: int


def eval_metrics(result):
    """An evaluation's (accuracy, loss, examples): from a dict of metrics
    (its "accuracy", "loss" and "examples"; others are not recorded) or a
    tuple of the three."""
    if isinstance(result, dict):
        missing = [k for k in ("accuracy", "loss", "examples")
                   if k not in result]
        if missing:
            raise InvalidArgumentError(
                f"evaluate() returned a dict without {', '.join(missing)}")
        return result["accuracy"], result["loss"], result["examples"]
    return result


def _array(name, t):
    """A float32 array over `t`'s own memory (numpy, or a CPU torch tensor)."""
    if hasattr(t, "detach") and hasattr(t, "numpy"):  # a torch tensor
        if getattr(t, "is_cuda", False):
            raise InvalidArgumentError(
                f"'{name}' is a CUDA tensor: psgd.torch stages CUDA tensors "
                "through host memory; Session takes host arrays")
        return t.detach().numpy()
    return t


def _arrays(tensors):
    items = tensors.items() if hasattr(tensors, "items") else tensors
    return [(str(name), _array(name, t)) for name, t in items]


def _outcome(t):
    return PushOutcome(StepOutcome(t[0]), t[1], t[2])


class Session:
    """One worker task of a psgd cluster.

    Args:
      config: the cluster config file (text format, proto/cluster.proto).
      task: "worker:J"; None with cluster_from.
      cluster_from: "slurm" or "tf_config": the task and the addresses from
        the engine's environment, as the daemons' --cluster_from.
      run_dir: the run directory shared by the tasks; None: the chief's
        RUN_ROOT/NAME-TIMESTAMP, which the servers pass on.
      log_every: a progress line every this many steps (0: never).

    Raises InvalidArgumentError for a bad config or a task the config lacks,
    NotFoundError for a config that cannot be read. Nothing is sent before
    join(). One thread uses a Session.

    Batch norm in a loop of one's own (docs/CLUSTER.md, "Batch norm"): the
    servers hold exactly the variables that join() gives them. With the
    config's batch_norm_statistics SERVER (settings["batch_norm_statistics"]
    == "server", the default) give the running statistics too (after the
    parameters, their names in join()'s `statistics`, which is what tells
    the servers they are statistics and not parameters), push each step's
    batch statistics under their names (the
    batch mean and unbiased variance: a batch-norm module with momentum 1.0
    leaves them in its buffers after a training forward), and the servers
    fold them in; statistics left out of join() stay local to the worker,
    unseen by the servers and the chief's evaluations. psgd.torch.Worker
    does all of this for an nn.Module. With LOCAL, give only parameters.
    """

    def __init__(self, config, task=None, *, cluster_from=None, run_dir=None,
                 log_every=50, slurm_port_base=8888):
        self._w = _psgd.Worker(str(config), task or "", cluster_from or "",
                               str(run_dir or ""), int(log_every),
                               int(slurm_port_base))
        self._joined = {}
        self._left = False
        self._finished = False

    # What the config says for this task.
    @property
    def settings(self):
        """The task's settings from the config, a dict: task, worker_index,
        num_workers, chief, sync, overlap, max_steps, max_seconds, epochs,
        batch_size, seed, eval_every, eval_examples, model,
        batch_norm_statistics ("server" or "local"), cluster, data."""
        return self._w.settings

    @property
    def chief(self):
        return self.settings["chief"]

    @property
    def run_dir(self):
        return self._w.run_dir

    @property
    def step(self):
        """The global step (the lowest shard step) of the weights pulled."""
        return self._w.step

    @property
    def generation(self):
        """The cluster's generation (one more with each rollback)."""
        return self._w.generation

    @property
    def learning_rate(self):
        """The servers' learning rate for the next update from the current
        weights: the config's learning_rate times its schedule's factor
        (warmup, step or cosine decay) at that update. Async pushes may
        scale it by their staleness on top."""
        return self._w.learning_rate

    def join(self, weights, total_batches=0, *, statistics=()):
        """Joins the cluster; the first weights are written into `weights`.

        Args:
          weights: name -> float32 C-contiguous array (each variable of the
            model, in forward order). Borrowed for the session's life: every
            pull writes into their memory. The chief's current values
            initialise the servers.
          total_batches: this worker's batches in all (epochs x batches per
            epoch), for the progress lines' ETA; 0: unknown.
          statistics: the names among `weights` that are batch norm's
            running statistics (kept on the servers, folded from each push's
            batch statistics, never touched by the optimizer); the others
            are trained parameters. A name is never read for its meaning.

        Raises ModelMismatchError when the variables are not the cluster's
        (naming the first that differs and both shapes), and the servers'
        errors (UnauthenticatedError for a wrong token, DeadlineExceededError
        when they do not come up).
        """
        arrays = _arrays(weights)
        self._w.join(arrays, int(total_batches), [str(n) for n in statistics])
        self._joined = dict(arrays)

    def pull_into(self, tensors=None):
        """The weights for the next step. After a push: sync, waits until
        the servers completed the step; async, the newest. Before any push:
        the newest. The weights land in the arrays given to join(); other
        `tensors` (name -> array of the same shapes) get a copy."""
        self._w.pull()
        if tensors is not None:
            self._copy_into(tensors)

    def _copy_into(self, tensors):
        import numpy as np
        for name, t in _arrays(tensors):
            src = self._joined[name]
            if t is not src and not np.may_share_memory(t, src):
                np.copyto(t, src)

    def push(self, step, grads):
        """Pushes the step's gradients, whole.

        Args:
          step: the step the gradients were computed at (self.step then).
          grads: name -> float32 C-contiguous array, every variable once in
            join()'s order, with its shape; None for a variable without a
            gradient in this step (frozen, or unused by the step's
            forward): the servers leave it and its optimizer state alone
            and no bytes are sent for it (docs/PS.md, "Parameters without
            a gradient").

        Returns a PushOutcome. Raises InvalidArgumentError (nothing sent)
        for another step, a missing or unknown variable, another shape or
        dtype, or a non-contiguous array; CancelledError once the servers
        have shut down (training is over).
        """
        return _outcome(self._w.push(int(step), _arrays(grads)))

    # --- a step with overlap (wire { overlap: true }) ----------------------
    # The order is the C++ worker's (worker/session/step_overlap.h); the
    # caller's hooks only say when its forward reaches a parameter and when
    # its backward has a gradient. begin_step, await_weights and
    # forward_done return the step's state: "compute" (go on), "stop" (the
    # weights are of a step to stop at: push nothing) or "redo" (a group's
    # pull failed: the whole model was pulled again; compute the batch
    # again, without parts).

    def begin_step(self):
        """Before the forward: the running statistics awaited (the forward
        writes its batch's into their buffers)."""
        return self._w.begin_step()

    def await_weights(self, index):
        """Before parameter `index`'s (join()'s order) first use in the
        forward: waits for its group of the pulls in flight."""
        return self._w.await_weights(int(index))

    def forward_done(self):
        """After the forward: the parameters it did not use awaited; then the
        step's version (and `step`) is known."""
        return self._w.forward_done()

    def add_part(self, name, grad):
        """A parameter's gradient as soon as the backward has it (None: no
        gradient, as push()'s); it must not change until finish_parts."""
        self._w.add_part(str(name), _array(name, grad))

    def finish_parts(self, step, grads):
        """After the backward: `grads` as push()'s; those not sent by
        add_part (unused parameters, the batch statistics) go as parts, then
        the push is finished (sent again whole after a transient failure).
        Returns a PushOutcome."""
        return _outcome(self._w.finish_parts(int(step), _arrays(grads)))

    @property
    def pulls_in_flight(self):
        return self._w.pulls_in_flight

    def settle_pulls(self):
        """Overlap: the pulls in flight, if any, finished."""
        self._w.settle_pulls()

    def lease_data(self):
        """The servers hand out the data (data { sharding: SERVERS }): the
        next chunk of sample indices for this worker, as (epoch, index,
        lease, samples); the next push carries it, and the servers count it
        done once that gradient is applied (or put it back in the queue when
        it is dropped). While nothing is left to hand out but chunks of the
        last epoch are out with other workers, it waits (leasing again
        every 50 ms to 1 s): a chunk whose worker dies comes back and is
        this worker's. Raises OutOfRangeError once the data ended (or, while
        this worker holds chunks it has not pushed, until they are pushed)."""
        return self._w.lease_data()

    def use_chunk(self, epoch, index, lease):
        """The chunk the next push carries, when chunks were leased ahead
        (a DataLoader that prefetches): as lease_data returned it."""
        self._w.use_chunk(int(epoch), int(index), int(lease))

    def set_samples(self, samples):
        """data { record_samples: true }: the ids of the samples the next
        push's batch fed the model (a dataset item's own index); the push's
        line in samples-worker-J.jsonl names them. Without it the line names
        the samples of the chunk leased."""
        self._w.set_samples([int(s) for s in samples])

    def before_step(self):
        """What the C++ worker does before each step, in one call: pulls in
        flight settled when training stops or the chief evaluates next; the
        chief's duties (failed workers, checkpoint requests). Returns
        (stop, evaluate): why training stops ("reached step N", the time
        budget spent, the servers shut down) or "" to go on, and whether the
        chief evaluates the current weights now (then record_eval)."""
        return self._w.before_step()

    def stop_reason(self):
        """Why training stops before the next step ("reached step N", the
        time budget spent), or "" to go on."""
        return self._w.stop_reason()

    # The chief's duties.
    def eval_due(self):
        """Chief: an evaluation is due at the current weights."""
        return self._w.eval_due()

    def maybe_request_checkpoint(self):
        self._w.maybe_request_checkpoint()

    def record_step(self, step, *, loss, accuracy=0.0, batch_size, epoch=0,
                    batches_done=0, times):
        """Writes the step's line (worker-J.jsonl), the chief's scalars and
        the progress line. `times`: unix seconds when the step began, its
        batch was ready, the gradients were computed, pushed, and the next
        weights pulled. The outcome is the last push's."""
        self._w.record_step(int(step), int(epoch), int(batch_size),
                            float(loss), float(accuracy), int(batches_done),
                            [float(t) for t in times])

    def record_eval(self, step, *, accuracy, loss, examples, seconds=0.0,
                    final=False):
        """An evaluation's line (the chief's)."""
        self._w.record_eval(int(step), float(accuracy), float(loss),
                            int(examples), float(seconds), bool(final))
        if not final:
            self._w.evaluated()

    def status(self):
        """Every shard's status: a list of dicts (step, generation,
        live_workers, and the counters applied, aggregated, dropped_stale,
        dropped_surplus, refused, refused_too_stale, ...)."""
        return self._w.status()

    def set_interrupt(self, check):
        """The calls that may wait for the other workers (pull_into,
        settle_pulls, before_step, lease_data, overlap's begin_step,
        await_weights and forward_done: a sync step waits for the slowest
        worker) run Python's signal handlers every 0.1 s while they wait,
        and call `check()` (None: no check). A handler that raises (a
        KeyboardInterrupt) ends the wait with its exception; `check()`
        returning true ends it with Interrupted: for a handler that only
        notes a signal, as psgd.torch's does. Either also stops the waits
        for servers that do not answer, for good (stop_waiting): push,
        join, status, leave and finish run the handlers too, and a push
        retrying against servers that are gone ends with Interrupted. The
        weights stay as before the call; close() may follow."""
        self._w.set_interrupt_check(check)

    def stop_waiting(self):
        """The program is ending (a signal's handler may call it; it never
        blocks): from now on no call waits for servers that do not answer.
        A call tries them once instead of retrying for
        ps_unavailable_timeout, join() stops waiting for servers that have
        not started and for the chief's initialisation (Interrupted), and
        close() ends as when the servers are gone (the summaries written,
        no error). A call that waits now ends within about a second."""
        self._w.stop_waiting()

    def keep_lease(self, on=True):
        """While on, the servers' lease of this worker is renewed whenever
        it sends nothing for a while: for a caller that computes (or
        evaluates) for longer than the config's worker_lease_seconds
        between calls, as the C++ worker while it computes. psgd.torch
        turns it on for its loop. Off after close()."""
        self._w.keep_lease(bool(on))

    def close(self, reason="", evaluate=None, *, end_job=False):
        """Leaves the cluster. The chief waits for the others to leave
        (unless `end_job`: the job ends now, e.g. on Ctrl-C or an error),
        pulls the newest weights, calls `evaluate()` (-> (accuracy, loss,
        examples), a dict of metrics as eval_metrics reads, or None) for the
        final evaluation, shuts the servers down
        and writes summary.json. Returns this worker's summary (a dict).
        Idempotent; OK when the servers are gone already."""
        if self._finished or not self._joined:
            return None
        if not self._left:
            self._left = True
            self._w.leave(wait_for_others=not end_job)
        if self.chief and evaluate is not None:
            t0 = time.time()
            result = evaluate()
            if result is not None:
                accuracy, loss, examples = eval_metrics(result)
                self.record_eval(self.step, accuracy=accuracy, loss=loss,
                                 examples=examples, seconds=time.time() - t0,
                                 final=True)
        self._finished = True
        return self._w.finish(reason)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        elif self._joined and not self._left:
            self._left = True
            try:
                self._w.leave()
            except Error:
                pass
        return False
