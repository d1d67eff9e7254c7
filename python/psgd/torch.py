"""psgd.torch: train any torch.nn.Module as a worker of a psgd cluster.

    import psgd.torch
    model = Net()                        # any nn.Module
    summary = psgd.torch.train(model, torch.nn.functional.cross_entropy,
                               loader, "cluster.pbtxt", "worker:1",
                               evaluate=lambda m: ...)

or with a loop of your own (docs/PYTHON.md, "Your own loop"):

    w = psgd.torch.Worker(model, "cluster.pbtxt", "worker:1")
    for x, y in w.batches(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        w.step(loss=loss)

The module's named_parameters() are the servers' variables (names and
shapes as torch has them; config model { name: "external" }, or a model of
the registry whose names and layouts the module follows). The chief
initialises the servers from the module's values; every pull writes the
parameters in place (CPU: their own memory, no copy). The run is the C++
worker's (worker/session/task_run.h): sync (N of M, backup workers)
or async as the config says, the chief's evaluations, checkpoints and end
of training, the same run-directory files and progress lines with an ETA.

With wire { overlap: true } the gradients go out during the backward: a
hook on each parameter's gradient accumulator hands it to the session as
soon as autograd has it (as horovod.torch's DistributedOptimizer); in sync
mode the forward waits for each layer's weights only when it reaches it.
The hooks only say when; the order of the step (statistics first, the stop
check, the parts the backward did not send, a redo after a failed group
pull) is the C++ worker's, worker/session/step_overlap.h.

As a process of a cluster (docs/PYTHON.md, "Signals and failures"): while
batches() runs on the main thread, SIGTERM makes the worker leave at the next
step boundary and SIGINT (Ctrl-C) does the same, a chief then ending the job
for every worker (the servers shut down, summary.json written; one line
says so; a second signal stops at once). A signal while the chief evaluates
abandons the evaluation at once: the job ends without another step. A
signal also ends, within seconds, the worker's waits for servers that do
not answer (killed, not started yet, a chief that never initialised them):
from the first signal on no call retries them. An
exception out of the dataset, or out of the loop's body (with or without
`with Worker(...) as w:`), leaves the cluster and, from the chief, ends the
job with the exception's type and text as its reason. The lease is renewed
while Python computes, so a step longer than the lease is no sign of death.

Batch norm (docs/CLUSTER.md, "Batch norm"): with the config's
model { batch_norm_statistics: SERVER } (the default) the modules'
running_mean and running_var buffers are variables of the servers too,
after the parameters: pulls write them in place and the chief evaluates with
them; while run() trains, the batch-norm modules' momentum is 1.0 (each
module's own is put back when it returns), so that after a training
forward the buffers hold the batch's mean and unbiased variance, which the
push carries and the servers fold in with PyTorch's momentum 0.1.
With LOCAL each worker keeps its own buffers, updated by its batches with the
module's momentum. Other buffers stay local. Parameters and statistics must
be float32. CUDA modules are staged through pinned host buffers; that path
is untested here (no GPU).
"""

import atexit
import collections
import dis
import signal
import sys
import threading
import time
import typing
import warnings

try:
    import torch
except ImportError as _e:
    raise ImportError(
        f"psgd.torch needs PyTorch, which {sys.executable} cannot import "
        f"({_e}): Debian's python3-torch (scripts/setup.sh installs it) is "
        "for /usr/bin/python3 and the virtual environments made from it with "
        "--system-site-packages") from _e

import psgd

# torch's threads when the program has not chosen (one per core).
_DEFAULT_THREADS = torch.get_num_threads()

__all__ = ["Worker", "StepResult", "train"]


class StepResult(typing.NamedTuple):
    """What Worker.step() answers: what became of the batch's gradient
    (psgd.StepOutcome: APPLIED, AGGREGATED, DROPPED_STALE, ... as the step
    lines' "outcome"), the step it was computed at, its staleness (async:
    the largest over the shards) and the cluster's generation after it."""
    outcome: "psgd.StepOutcome"
    step: int
    staleness: int
    generation: int

    @property
    def applied(self):
        """The gradient changed the weights (applied, or aggregated into a
        step that is applied)."""
        return self.outcome in (psgd.StepOutcome.APPLIED,
                                psgd.StepOutcome.AGGREGATED)


def _set_epoch(data, epoch):
    """A DataLoader's sampler (or the data itself) that shuffles per epoch,
    as torch.utils.data.DistributedSampler: told the epoch before each pass,
    so that no two epochs repeat one order."""
    for obj in (getattr(data, "sampler", None),
                getattr(data, "batch_sampler", None), data):
        if obj is not None and callable(getattr(obj, "set_epoch", None)):
            obj.set_epoch(epoch)
            return


class _EvaluationAbandoned(BaseException):
    """Raised by Worker's signal handler into the chief's evaluation under
    way: the evaluation ends at once, and the job. A BaseException, as
    KeyboardInterrupt, so that an `except Exception` in evaluate() lets it
    through."""


def _default_accuracy(outputs, targets):
    if outputs.dim() == 2 and targets.dim() == 1 and not targets.is_floating_point():
        return (outputs.argmax(1) == targets).float().mean().item()
    return 0.0


class Worker:
    """A torch.nn.Module's worker loop over a psgd.Session.

    Args:
      module: the model; its named_parameters() (float32) are the variables,
        in that order (the forward's, for overlap).
      config, task, cluster_from, slurm_port_base, run_dir: as
        psgd.Session's.
      log_every: a progress line every this many steps.
    """

    def __init__(self, module, config, task=None, *, cluster_from=None,
                 slurm_port_base=8888, run_dir=None, log_every=50):
        self.module = module
        self.params = [(n, p) for n, p in module.named_parameters()]
        lazy = [n for n, p in self.params
                if isinstance(p, torch.nn.parameter.UninitializedParameter)]
        if lazy:
            raise psgd.InvalidArgumentError(
                f"parameter '{lazy[0]}' is not initialised yet (a lazy "
                "module such as LazyLinear): run one forward on a batch "
                "before making the Worker, so that its shape is known")
        for n, p in self.params:
            if p.dtype != torch.float32:
                raise psgd.InvalidArgumentError(
                    f"parameter '{n}' is {p.dtype}; psgd trains float32")
        self.cuda = any(p.is_cuda for _, p in self.params)
        self.session = psgd.Session(config, task, cluster_from=cluster_from,
                                    slurm_port_base=slurm_port_base,
                                    run_dir=run_dir, log_every=log_every)
        self.settings = self.session.settings
        self.overlap = self.settings["overlap"]
        # worker { threads } is torch's, unless the program chose its own.
        if (self.settings.get("threads_set")
                and torch.get_num_threads() == _DEFAULT_THREADS):
            torch.set_num_threads(int(self.settings["threads"]))
        # Batch norm's running statistics on the servers: variables after the
        # parameters; the modules' momentum 1.0 leaves the batch's own
        # statistics in the buffers after a training forward.
        self.stats = []
        self._momenta = []
        if self.settings["batch_norm_statistics"] == "server":
            # The batch-norm layers' own buffers, known by the module that
            # holds them, not by their names.
            running = {id(t) for m in module.modules()
                       if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                       for t in (m.running_mean, m.running_var)
                       if t is not None}
            self.stats = [(n, b) for n, b in module.named_buffers()
                          if id(b) in running]
            for n, b in self.stats:
                if b.dtype != torch.float32:
                    raise psgd.InvalidArgumentError(
                        f"buffer '{n}' is {b.dtype}; psgd keeps float32 "
                        "statistics")
            # Set for the run only (run() puts each module's own back).
            self._momenta = [
                (m, m.momentum) for m in module.modules()
                if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                and m.track_running_stats]
            # The servers fold statistics with PyTorch's default rule; a
            # module with another would train with a rule it did not ask for.
            for name, m in module.named_modules():
                if (isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                        and m.track_running_stats and m.momentum != 0.1):
                    rule = ("a cumulative average (momentum=None)"
                            if m.momentum is None
                            else f"momentum {m.momentum}")
                    raise psgd.InvalidArgumentError(
                        f"batch norm '{name}' keeps its statistics with "
                        f"{rule}, but with model {{ batch_norm_statistics: "
                        "SERVER } the servers fold them with momentum 0.1: "
                        "make it momentum=0.1, or keep the statistics on the "
                        "workers with model { batch_norm_statistics: LOCAL }")
        self.names = [n for n, _ in self.params] + [n for n, _ in self.stats]
        # Buffers that are not batch norm's (a counter, an EMA, an instance
        # norm's running statistics): each worker keeps its own, and no
        # checkpoint holds them. Batch norm's own buffers, known by the
        # module that holds them, not by their names, are the config's
        # (batch_norm_statistics; num_batches_tracked is documented local).
        batch_norms = {id(b) for m in module.modules()
                       if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                       for b in m.buffers(recurse=False)}
        shared = {id(b) for _, b in self.stats}
        local = [n for n, b in module.named_buffers()
                 if id(b) not in shared and id(b) not in batch_norms]
        if local:
            warnings.warn(
                f"buffers {', '.join(local)} stay on each worker: the servers "
                "do not hold them, the workers do not share them, and no "
                "checkpoint saves them", stacklevel=2)
        # CUDA (untested): pulls land in pinned host buffers, copied to the
        # device after each pull; gradients are copied back before a push.
        self._host = {}
        if self.cuda:
            for n, p in self.params + self.stats:
                self._host[n] = torch.empty(p.shape, dtype=torch.float32,
                                            pin_memory=True)
        self._hooks = []
        self._leased = collections.deque()  # batch_sampler's chunks, in order
        self._awaited = set()  # this step's parameters awaited
        self._in_flight_at_start = False
        self._current = None  # the batch of batches() under way
        self.summary = None   # after batches() ends
        self._signal = None   # SIGTERM / SIGINT received: leave at the boundary
        self._evaluating = False  # the chief's evaluate() runs (main thread)
        self._ended = False
        self._previous = {}   # signal handlers to put back
        self._previous_excepthook = sys.excepthook
        # The loop's generator was closed while an exception may be on its
        # way up (_closed_early): the frames watched for it.
        self._pending = None

    _EARLY = "the loop over batches() ended early"

    # --- as a process of the cluster -----------------------------------
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, _tb):
        """An exception out of the loop leaves the cluster and, from the
        chief, ends the job with its text as the reason."""
        if exc_type is not None:
            self._abort(_reason_of(exc_type, exc))
        elif self._pending is not None:
            self._abort(self._EARLY)
        return False

    def _abort(self, reason):
        self._stop_watching()
        if self._ended or not self.session._joined:  # pylint: disable=protected-access
            return
        self._end(reason, None, end_job=True)

    # --- the loop closed early: a break, or an exception on its way up ---
    def _closed_early(self, closing):
        """The caller's loop let go of batches() before its end (Python
        closes the generator). After a `break` or a `return` the worker
        leaves and, the chief, ends the job now. An exception that leaves
        the loop's body closes the generator too, while it goes up; Python
        shows it to nobody until a handler takes it (an `except`, a `with`'s
        __exit__, the excepthook when it ends the program), so the job ends
        there, with its type and text: a trace on the frames it goes
        through (the loop's and its callers', until it is seen), and the
        excepthook kept in place meanwhile."""
        frame = sys._getframe(1)  # pylint: disable=protected-access
        while frame is not None and frame.f_code in _OWN_CODE:
            frame = frame.f_back
        if (frame is None or _opname(frame) in _CLOSED_BY_FLOW
                or sys.gettrace() is not None):
            # A break or return (the loop's iterator popped), or a tracer
            # of someone else's (a debugger, coverage), left alone.
            self._end(self._EARLY, None, end_job=True)
            return
        watched = []
        while frame is not None:
            frame.f_trace = self._trace
            watched.append(frame)
            frame = frame.f_back
        self._pending = {"frames": watched,
                         "handled": closing.__context__}
        sys.settrace(_untraced)
        atexit.register(self._at_exit)

    def _trace(self, frame, event, arg):
        """Events of the watched frames until the job ends: an exception
        that goes through one (its type and text), one handled there (an
        `except` or `with` took it), or the flow going on without one (the
        loop was let go of as a `break` does)."""
        pending = self._pending
        if pending is None:
            return None
        try:
            handled = sys.exc_info()[1]
            if event == "exception":
                self._abort(_reason_of(arg[0], arg[1]))
            elif handled is not None and handled is not pending["handled"]:
                self._abort(_reason_of(type(handled), handled))
            elif event == "line" and _opname(frame) != "PUSH_EXC_INFO":
                self._abort(self._EARLY)
            elif event == "return" and arg is not None:
                self._abort(self._EARLY)
            # A return of None: the frame's exception (or None) goes on to
            # its caller, whose next event tells.
        except Exception as e:  # noqa: BLE001  (a tracer must not raise)
            print(f"psgd: ending the job failed: {_reason_of(type(e), e)}",
                  file=sys.stderr, flush=True)
        return self._trace if self._pending is not None else None

    def _stop_watching(self):
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if sys.gettrace() is _untraced:
            sys.settrace(None)
        for frame in pending["frames"]:
            if frame.f_trace == self._trace:
                frame.f_trace = None
        atexit.unregister(self._at_exit)
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_excepthook

    def _at_exit(self):
        # Nothing took the exception, nor came after the loop: it ended
        # early.
        self._abort(self._EARLY)

    def _on_signal(self, signum, _frame):
        name = signal.Signals(signum).name
        if self._signal is not None:
            # A second signal (a SIGTERM after either) stops at once, as
            # a second Ctrl-C does.
            raise KeyboardInterrupt(f"{name}: the second signal")
        self._signal = name
        # The worker is ending: no call of its waits for servers that do
        # not answer any more (its push, its leave: seconds, not the
        # minutes of ps_unavailable_timeout).
        self.session.stop_waiting()
        if not self.session._joined:  # pylint: disable=protected-access
            # It waits for the servers (not started) or the chief's
            # initialisation: the wait ends, and the worker, unjoined.
            what, when = "this worker stops", "before it joined the cluster"
        else:
            what = ("the chief ends the job for every worker"
                    if self.session.chief else "this worker leaves the cluster")
            when = ("now: the evaluation under way is abandoned"
                    if self._evaluating else "at the end of this step")
        print(f"psgd: {name}: {what} {when}"
              + (" (Ctrl-C again to stop at once)"
                 if signum == signal.SIGINT else ""),
              file=sys.stderr, flush=True)
        # A second Ctrl-C is Python's own KeyboardInterrupt (after a SIGTERM
        # too).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if self._evaluating:
            # The evaluation ends here (_evaluate takes it), not after
            # minutes: the job ends without it.
            self._evaluating = False
            raise _EvaluationAbandoned()

    def _excepthook(self, exc_type, exc, tb):
        # An exception that ends the program out of the loop's body.
        previous = self._previous_excepthook
        try:
            self._abort(_reason_of(exc_type, exc))
        finally:
            previous(exc_type, exc, tb)

    def _install_process_handlers(self):
        """Signals (only the main thread may set them) and the excepthook,
        for the life of batches()."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._on_signal)
        self._previous_excepthook = sys.excepthook
        sys.excepthook = self._excepthook

    def _restore_process_handlers(self):
        for key, previous in list(self._previous.items()):
            if previous is not None:
                signal.signal(key, previous)
        self._previous = {}
        # While an exception may be going up (_closed_early), the
        # excepthook stays until the job ends.
        if self._pending is None and sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_excepthook

    # --- weights and gradients ------------------------------------------
    def _weight_buffers(self):
        if self.cuda:
            for n, p in self.params + self.stats:
                self._host[n].copy_(p.detach())
            return [(n, self._host[n]) for n in self.names]
        return [(n, p.data) for n, p in self.params] + self.stats

    def _to_device(self, names=None):
        if not self.cuda:
            return
        with torch.no_grad():
            for n, p in self.params + self.stats:
                if names is None or n in names:
                    p.copy_(self._host[n], non_blocking=True)
        torch.cuda.current_stream().synchronize()

    def _grad(self, n, p):
        """What a push carries for parameter n: its gradient, or None when
        it has none (frozen, or unused by this step's forward): the servers
        then leave it and its optimizer state alone, as torch.optim does,
        and no bytes are sent for it."""
        g = p.grad
        if g is None:
            return None
        if self.cuda:
            host = torch.empty(p.shape, dtype=torch.float32, pin_memory=True)
            host.copy_(g.detach())
            return host
        if not g.is_contiguous():
            g = g.contiguous()
        return g

    def _statistic(self, n, b):
        """What a push carries for a running statistic: the buffer, which
        holds the last training forward's batch statistic (momentum 1.0)."""
        if self.cuda:
            host = torch.empty(b.shape, dtype=torch.float32, pin_memory=True)
            host.copy_(b)
            return host
        return b

    def _grads(self):
        return [(n, self._grad(n, p)) for n, p in self.params] + \
            [(n, self._statistic(n, b)) for n, b in self.stats]

    # --- overlap: hooks -----------------------------------------------------
    def _install_hooks(self):
        index = {id(p): i for i, (_, p) in enumerate(self.params)}

        def await_module(mod, _inputs):
            if not self._in_flight_at_start:
                return
            for p in mod.parameters(recurse=False):
                self._await(index[id(p)])

        for mod in self.module.modules():
            if any(True for _ in mod.parameters(recurse=False)):
                self._hooks.append(mod.register_forward_pre_hook(await_module))
        self._hooks.append(
            self.module.register_forward_hook(self._after_forward))
        # A hook on each parameter's gradient accumulator: it runs once the
        # parameter's gradient is whole (horovod.torch's way).
        self._accumulators = []
        for n, p in self.params:
            if p.requires_grad:
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._part_hook(n, p))
                self._accumulators.append(acc)

    def _part_hook(self, n, p):
        def hook(*_):
            st = self._current
            if st is not None and st["state"] == "compute" \
                    and not st["stepped"]:
                self.session.add_part(n, self._grad(n, p))
        return hook

    def _await(self, i):
        """Before parameter i's first use in the forward, while its weights
        are still arriving."""
        st = self._current
        if not self._in_flight_at_start or st is None or i in self._awaited:
            return
        self._awaited.add(i)
        if st["state"] == "compute":
            st["state"] = self._waiting(self.session.await_weights, i)
        if self.cuda:
            self._to_device({self.names[i]})

    # --- the loop -----------------------------------------------------------
    @property
    def learning_rate(self):
        """The servers' learning rate for the next update
        (psgd.Session.learning_rate)."""
        return self.session.learning_rate

    @property
    def batch_size(self):
        """The config's batch size for this worker."""
        return self.settings["batch_size"]

    @property
    def worker_index(self):
        return self.settings["worker_index"]

    @property
    def num_workers(self):
        return self.settings["num_workers"]

    @property
    def data_from_servers(self):
        """Whether the servers hand out the data (data { sharding: SERVERS
        }): then batch_sampler(), not sampler()."""
        return self.settings["data_from_servers"]

    def batch_sampler(self):
        """The servers hand out the data (data { sharding: SERVERS }): a
        batch sampler for a DataLoader over the training set
        (`DataLoader(ds, batch_sampler=w.batch_sampler())`), each batch a
        chunk of sample indices leased from the servers, as
        horovod.torch.elastic.ElasticSampler but with the position on the
        servers: batches() pushes each batch's gradient with its chunk, and
        the servers count the chunk done once that gradient is applied, or
        put it back in the queue when it is dropped or this worker leaves.
        The dataset must hold data { num_samples } samples (the config's;
        its source's training set without it). It ends when the servers'
        epochs are handed out."""
        if not self.data_from_servers:
            raise psgd.FailedPreconditionError(
                "batch_sampler() is for data { sharding: SERVERS }; this "
                "config splits the data among the workers: use sampler()")
        return _ServerBatches(self)

    def sampler(self, dataset, *, shuffle=True, seed=0):
        """A DistributedSampler over `dataset` for this worker: its
        1/num_workers of each epoch, a new order each epoch (batches() tells
        it the epoch)."""
        if self.data_from_servers:
            raise psgd.FailedPreconditionError(
                "the servers hand out the data (data { sharding: SERVERS }): "
                "make the DataLoader with batch_sampler=w.batch_sampler()")
        return torch.utils.data.DistributedSampler(
            dataset, num_replicas=self.num_workers, rank=self.worker_index,
            shuffle=shuffle, seed=seed)

    def batches(self, data, *, evaluate=None):
        """Your own training loop: yields the batches of `data`, each a
        tuple (inputs, targets, *rest: whatever else the batch carries, such
        as its samples' indices) until
        the config's end (steps, epochs, time budget) or until the servers
        shut down, and does around each batch what the C++ worker does: the
        first pull (into the module) before the first batch, the chief's
        evaluations (`evaluate(module)` -> (accuracy, loss, examples)) and
        checkpoints between steps, each epoch told to the sampler, and at the
        end the leave, the chief's final evaluation and the servers'
        shutdown. Call step() once for each batch after the backward:

            for x, y in w.batches(loader):
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                w.step(loss=loss)

        The module's gradients are cleared before each batch. With overlap
        the backward pushes each gradient as it comes, and the forward waits
        for each layer's weights. The summary (a dict: local_steps,
        final_global_step, end_reason, outcomes ...) is `summary` after the
        loop."""
        self._check_split(data)
        for m, _ in self._momenta:
            m.momentum = 1.0
        self._install_process_handlers()
        # A wait for the other workers ends on SIGTERM / Ctrl-C.
        self.session.set_interrupt(lambda: self._signal is not None)
        try:
            yield from self._batches(data, evaluate)
        finally:
            self.session.set_interrupt(None)
            for m, momentum in self._momenta:
                m.momentum = momentum
            # An exception that ends the program closes this generator only
            # after the excepthook has run.
            self._restore_process_handlers()

    def _check_split(self, data):
        """A DataLoader that is not this worker's share of the data, given
        by one of several workers: each worker would train on the whole set
        (or another worker's share), and the cluster's epochs would not be
        epochs. A warning, not a refusal: a dataset may split itself (an
        IterableDataset, a file per worker), which psgd cannot see."""
        n = self.num_workers
        if (n <= 1 or self.data_from_servers
                or not isinstance(data, torch.utils.data.DataLoader)
                or isinstance(data.dataset, torch.utils.data.IterableDataset)):
            return
        split = None
        for obj in (data.sampler, data.batch_sampler,
                    getattr(data.batch_sampler, "sampler", None)):
            if hasattr(obj, "num_replicas") and hasattr(obj, "rank"):
                split = obj
                break
        how = ("make the DataLoader with sampler=w.sampler(dataset) (a "
               "DistributedSampler for this worker), or split the dataset "
               "yourself")
        if split is None:
            warnings.warn(
                f"the DataLoader given to worker {self.worker_index} is not "
                f"split among the {n} workers (its sampler is "
                f"{type(data.sampler).__name__}, not a DistributedSampler): "
                "every worker trains on the whole set, and an epoch of the "
                f"config is {n} passes over it; {how}", stacklevel=3)
        elif (split.num_replicas, split.rank) != (n, self.worker_index):
            warnings.warn(
                f"the DataLoader's sampler is rank {split.rank} of "
                f"{split.num_replicas}, but this is worker "
                f"{self.worker_index} of {n}: {how}", stacklevel=3)

    def step(self, loss=None, *, accuracy=0.0):
        """Pushes the batch's gradients (those that have none, and with
        overlap those already on their way, go as they are), pulls the next
        weights into the module and records the step (`loss`: a tensor or a
        float, for the step lines; `accuracy` too). Returns a StepResult
        (what became of the gradient: applied, aggregated, dropped and why;
        the step; its staleness), the same as the step's line in
        worker-J.jsonl; None when nothing was pushed (the weights brought a
        step to stop at, or, with overlap, the batch comes again)."""
        st = self._current
        if st is None or st["stepped"]:
            raise psgd.FailedPreconditionError(
                "step() comes once for each batch of batches()")
        s = self.session
        if self.overlap and not st["forwarded"]:
            self._after_forward(None, None, None)
        st["stepped"] = True
        if st["stop"] or st["redo"]:
            # The overlapped pulls brought a step to stop at, or failed (the
            # batch comes again): nothing of this batch is pushed.
            return None
        t_computed = time.time()
        try:
            if self.overlap:
                pushed = s.finish_parts(st["step"], self._grads())
            else:
                pushed = s.push(st["step"], self._grads())
        except psgd.Interrupted:
            # A signal ended the push's retries (no server answers): the
            # loop ends at this batch, nothing recorded for it.
            st["stop"] = self._signal_reason() or "interrupted"
            return None
        except psgd.CancelledError:
            st["stop"] = "the servers shut down (training is over)"
            return None
        try:
            t_pushed = time.time()
            s.pull_into()
        except psgd.Interrupted:
            # A signal (SIGTERM, Ctrl-C) ended the wait for the step: the
            # push went, the weights did not come; the loop ends here.
            st["stop"] = self._signal_reason()
            self._record(st, loss, accuracy, t_computed, t_pushed,
                         time.time())
            return StepResult(pushed.outcome, st["step"], pushed.staleness,
                              pushed.generation)
        except psgd.CancelledError:
            # The servers shut down under this step (the chief ended the
            # job): the loop ends at this batch.
            st["stop"] = "the servers shut down (training is over)"
            return None
        t_pulled = time.time()
        if not self.overlap:
            self._to_device()
        self._record(st, loss, accuracy, t_computed, t_pushed, t_pulled)
        return StepResult(pushed.outcome, st["step"], pushed.staleness,
                          pushed.generation)

    def _record(self, st, loss, accuracy, t_computed, t_pushed, t_pulled):
        """The step's line (worker-J.jsonl)."""
        if isinstance(loss, torch.Tensor):
            loss = loss.item()
        st["done"] = True
        self.session.record_step(
            st["step"], loss=float(loss or 0.0), accuracy=float(accuracy),
            batch_size=st["batch_size"], epoch=st["epoch"],
            batches_done=st["batches_done"],
            times=(st["t_begin"], st["t_batch"], t_computed, t_pushed,
                   t_pulled))

    def _batches(self, data, evaluate):
        s = self.session
        epochs = self.settings["epochs"]
        total = epochs * len(data) if epochs and hasattr(data, "__len__") else 0
        if self.data_from_servers and total:
            # The servers hand each worker its share of every epoch's
            # chunks: the progress line's total is that share, not the set.
            total = -(-total // max(1, self.num_workers))
        try:
            s.join(self._weight_buffers(), total_batches=total,
                   statistics=[n for n, _ in self.stats])
        except psgd.Interrupted:
            # A signal while the join waited (for servers that have not
            # started, for the chief's initialisation): the worker ends
            # without having joined; no batch.
            self._ended = True
            self.summary = {"local_steps": 0, "final_global_step": 0,
                            "seconds": 0.0, "outcomes": {},
                            "end_reason": f"{self._signal}: stopped before "
                                          "joining the cluster"}
            return
        # Python computes between our calls: the lease is kept meanwhile.
        s.keep_lease(True)
        self._to_device()
        if self.overlap:
            self._install_hooks()
        self._current = None
        reason = ""
        epoch, batches_done = 0, 0
        _set_epoch(data, epoch)
        batches = iter(data)
        served = 0  # batches of this pass over `data`
        try:
            while True:
                reason = self._before_step(evaluate)
                if reason:
                    break
                t_begin = time.time()
                try:
                    batch = next(batches)
                    served += 1
                except StopIteration:
                    if self.data_from_servers:
                        # Nothing is left to hand out. A DataLoader that
                        # leased ahead was told so while it held chunks of
                        # its own; now they are pushed, a new pass asks
                        # again, and its lease waits while other workers'
                        # chunks of the last epoch are out (one comes back
                        # when its worker dies). A pass with no batch: the
                        # servers' epochs are done.
                        batch = None
                        if served:
                            served = 0
                            batches = iter(data)
                            batch = next(batches, None)
                        if batch is None:
                            reason = "the data ended (epochs done)"
                            break
                        served = 1
                    else:
                        epoch += 1
                        if epochs and epoch >= epochs:
                            reason = "the data ended (epochs done)"
                            break
                        _set_epoch(data, epoch)
                        batches = iter(data)
                        try:
                            batch = next(batches)
                        except StopIteration:
                            reason = "the data is empty"
                            break
                batch = _as_batch(batch)
                targets = batch[1]
                t_batch = time.time()
                if self._leased:
                    # The chunk of this batch (leased when the DataLoader
                    # asked for it, maybe ahead): its push carries it.
                    chunk = self._leased.popleft()
                    s.use_chunk(*chunk[:3])
                    epoch = chunk[0]
                    if self.settings.get("record_samples"):
                        s.set_samples(_batch_sample_ids(data, batch,
                                                        chunk[3]))
                while True:
                    st = self._begin_step()
                    st.update(t_begin=t_begin, t_batch=t_batch, epoch=epoch,
                              batch_size=len(targets),
                              batches_done=batches_done + 1)
                    yield batch
                    if not st["stepped"]:
                        raise psgd.FailedPreconditionError(
                            "call step() once for each batch of batches()")
                    # Overlap: after a failed group pull the forward ran on
                    # weights of two steps; the batch comes again.
                    if not st["redo"]:
                        break
                if st["stop"]:
                    reason = st["stop"]
                    break
                batches_done += 1
        except psgd.CancelledError:
            reason = "the servers shut down (training is over)"
        except psgd.Interrupted:
            # A signal ended a lease's wait (the DataLoader's sampler).
            reason = self._signal_reason()
        except GeneratorExit as closing:
            # The caller's loop ended without exhausting batches(): a break
            # (the worker leaves and, the chief, ends the job now), or an
            # exception out of the loop's body (the job ends with its text
            # where it is seen).
            self._closed_early(closing)
            raise
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001
            # The dataset's (or a second Ctrl-C): leave, end the job with
            # its text, and let it go on up.
            self._end(_reason_of(type(e), e), None, end_job=True)
            raise
        # After a signal: no final evaluation, the job ends now.
        self._end(reason, evaluate if self._signal is None else None,
                  end_job=self._signal is not None)

    def _end(self, reason, evaluate, *, end_job=False):
        if self._ended:
            return
        self._ended = True
        self._current = None
        for h in self._hooks:
            h.remove()
        self._hooks = []
        final = None
        if evaluate is not None:
            def final():
                self._to_device()
                return self._evaluate(evaluate)
        self.summary = self.session.close(reason, evaluate=final,
                                          end_job=end_job)

    def _begin_step(self):
        """Before a batch's forward: the module's gradients cleared; with
        overlap the step begun (the running statistics awaited before the
        forward writes its batch's into the same buffers)."""
        s = self.session
        self.module.zero_grad(set_to_none=True)
        self._awaited = set()
        self._in_flight_at_start = self.overlap and s.pulls_in_flight
        state = self._waiting(s.begin_step) if self.overlap else "compute"
        if self._in_flight_at_start and self.cuda:
            self._to_device(set(self.names[len(self.params):]))
        self._current = {"step": s.step, "stop": "", "redo": False,
                         "state": state, "stepped": False, "forwarded": False}
        return self._current

    def _after_forward(self, _module, _inputs, _outputs):
        """Overlap: once the whole forward has run, the weights it did not
        use are awaited too; then the step's version is known, and whether
        it ends before its push."""
        st = self._current
        if st is None or st["stepped"] or st["forwarded"]:
            return
        st["forwarded"] = True
        if st["state"] == "compute":
            st["state"] = self._waiting(self.session.forward_done)
        if self._in_flight_at_start and self.cuda:
            self._to_device({n for i, n in enumerate(self.names)
                             if i not in self._awaited})
        # The weights' step once every group is in (the push's version).
        st["step"] = self.session.step
        if st["state"] == "stop":
            st["stop"] = (self.session.stop_reason()
                          or self._signal_reason())
        elif st["state"] == "redo":
            st["redo"] = True

    def run(self, data, loss_fn, *, evaluate=None, accuracy=_default_accuracy):
        """Trains until the config's end (steps, epochs, time budget) or
        until the servers shut down: batches() and step() with `loss_fn`.
        Returns this worker's summary (a dict: local_steps,
        final_global_step, end_reason, outcomes ...).

        Args:
          data: an iterable of (inputs, targets) batches, this worker's part
            (settings["worker_index"] of settings["num_workers"]); read
            again for each epoch. A DataLoader whose sampler has set_epoch
            (DistributedSampler) is told each epoch before its pass.
          loss_fn: (outputs, targets) -> scalar loss tensor.
          evaluate: chief: module -> (accuracy, loss, examples), or a dict
            with those keys, every
            eval_every steps and at the end; None: no evaluations.
          accuracy: (outputs, targets) -> float, for the step lines.
        """
        for inputs, targets, *_ in self.batches(data, evaluate=evaluate):
            outputs = self.module(inputs)
            if self._current["stop"] or self._current["redo"]:
                self.step()
                continue
            loss = loss_fn(outputs, targets)
            loss.backward()
            self.step(loss, accuracy=accuracy(outputs.detach(), targets))
        return self.summary

    def _signal_reason(self):
        if self._signal is None:
            return ""
        return (f"{self._signal}: the chief ended the job"
                if self.session.chief
                else f"{self._signal}: left at a step boundary")

    def _waiting(self, call, *args):
        """Overlap's calls that wait for the step: a signal's Interrupted
        stops the step before its push ("stop")."""
        try:
            return call(*args)
        except psgd.Interrupted:
            return "stop"

    def _before_step(self, evaluate):
        s = self.session
        if self._signal is not None:
            return self._signal_reason()
        in_flight = s.pulls_in_flight
        try:
            reason, evaluate_now = s.before_step()
        except psgd.Interrupted:
            return self._signal_reason()
        if in_flight and not s.pulls_in_flight:
            self._to_device()  # the settled pulls' weights
        if reason:
            return reason
        if evaluate_now and evaluate is not None:
            t0 = time.time()
            result = self._evaluate(evaluate)
            if self._signal is not None:
                # Abandoned: no line for it, the job ends now.
                return self._signal_reason()
            acc, loss, n = psgd.eval_metrics(result)
            s.record_eval(s.step, accuracy=acc, loss=loss, examples=n,
                          seconds=time.time() - t0)
        return ""

    def _evaluate(self, evaluate):
        """The chief's evaluate(module); None when a signal abandoned it
        (_on_signal raises into it)."""
        self._evaluating = True
        try:
            return evaluate(self.module)
        except _EvaluationAbandoned:
            return None
        finally:
            self._evaluating = False


def _opname(frame):
    """The name of the instruction a frame is at."""
    try:
        return dis.opname[frame.f_code.co_code[frame.f_lasti]]
    except (IndexError, TypeError):
        return ""


# The instructions at which a loop lets go of its iterator in the normal
# flow: a break or return pops it (POP_TOP), an assignment or del drops it.
# Any other (a call, a raise ...) is an exception on its way up (or a
# close() call: the flow after it tells).
_CLOSED_BY_FLOW = {"POP_TOP", "SWAP", "RETURN_VALUE", "STORE_FAST",
                   "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF", "DELETE_FAST",
                   "DELETE_NAME", "DELETE_GLOBAL", "DELETE_DEREF"}


def _untraced(_frame, _event, _arg):
    """The thread's trace function while Worker._trace watches frames:
    new calls are not traced."""
    return None


def _reason_of(exc_type, exc):
    """An exception as an end reason: its type and text."""
    text = str(exc)
    return f"{exc_type.__name__}: {text}" if text else exc_type.__name__


def _batch_sample_ids(data, batch, leased):
    """The ids of the samples a batch fed the model (data { record_samples:
    true }): the dataset's own index when its items carry one (a dataset
    with `with_index` set, as psgd.data.CIFAR10(with_index=True): the
    batch's third element), else the indices the loader fetched (the
    chunk's samples)."""
    dataset = getattr(data, "dataset", None)
    if getattr(dataset, "with_index", False) and len(batch) >= 3:
        ids = batch[2]
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return [int(i) for i in ids]
    return leased


def _as_batch(batch):
    """A batch as a tuple (inputs, targets, *rest)."""
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return tuple(batch)
    raise psgd.InvalidArgumentError(
        "a batch must be (inputs, targets) or (inputs, targets, *rest), not "
        f"{type(batch).__name__}"
        + (f" of {len(batch)}" if isinstance(batch, (tuple, list)) else ""))


# batches()'s own frames, passed over when looking for the loop's.
_OWN_CODE = (Worker.batches.__code__, Worker._batches.__code__,  # pylint: disable=protected-access
             Worker._closed_early.__code__)  # pylint: disable=protected-access


class _ServerBatches:
    """Worker.batch_sampler(): chunks leased from the servers, one per
    batch, until the data ends; its length is the set's batches per epoch
    (for progress lines), its iteration without end but the servers'."""

    def __init__(self, worker):
        self._worker = worker

    def __len__(self):
        b = self._worker.batch_size
        return (self._worker.settings["num_samples"] + b - 1) // b

    def __iter__(self):
        while True:
            try:
                epoch, index, lease, samples = \
                    self._worker.session.lease_data()
            except psgd.OutOfRangeError:
                return
            samples = list(samples)
            self._worker._leased.append((epoch, index, lease, samples))
            yield samples


def train(module, loss_fn, data, config, task=None, *, cluster_from=None,
          slurm_port_base=8888, run_dir=None, evaluate=None, log_every=50,
          accuracy=_default_accuracy):
    """Worker(module, config, task, ...).run(data, loss_fn, ...): trains the
    module as task `task` of the cluster and returns the worker's summary."""
    w = Worker(module, config, task, cluster_from=cluster_from,
               slurm_port_base=slurm_port_base, run_dir=run_dir,
               log_every=log_every)
    return w.run(data, loss_fn, evaluate=evaluate, accuracy=accuracy)
