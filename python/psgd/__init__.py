"""psgd: a worker of a psgd parameter-server cluster, in Python.

A Session is one worker task of a cluster config (configs/*.pbtxt), the same
config the ps_server and worker daemons read. It joins the cluster, pulls
the weights into arrays it borrows, pushes gradients and says what became of
each push; the recovery from servers that restart, the chief's duties and the
run directory's files (worker-J.jsonl, the chief's summary.json) are the C++
worker's own (worker/session/). psgd.torch runs a whole training loop for a
torch.nn.Module.

    import numpy as np, psgd
    w = {"linear/weights": np.zeros((1728, 10), np.float32),
         "linear/biases": np.zeros((10,), np.float32)}
    with psgd.Session("cluster.pbtxt", "worker:1") as s:
        s.join(w)                          # the first weights, into w
        while not s.stop_reason():
            step = s.step
            grads = compute(w)             # name -> float32 array, w's shapes
            outcome = s.push(step, grads)  # psgd.PushOutcome
            s.pull_into(w)                 # the next weights, in place

Arrays are float32 and C-contiguous: numpy arrays, or CPU torch tensors (their
memory, through .numpy(), without a copy). Errors are psgd.Error subclasses
named after what went wrong (InvalidArgumentError is also a ValueError,
ModelMismatchError a FailedPreconditionError ...); a refused call sends
nothing to the servers.

The package: session.py (Session, StepOutcome, PushOutcome), errors.py (the
exceptions), torch.py (psgd.torch), data.py (CIFAR-10's binary files as a
torch Dataset), models.py (networks with the C++ models' variable names),
_psgd (the extension, python/module.cc).
"""

import sys

from psgd import _build_info

__version__ = "0.1.0"


def _load_extension():
    """The extension, or an ImportError that says what to run instead."""
    built_for = _build_info.PYTHON_VERSION
    running = "%d.%d" % sys.version_info[:2]
    if (sys.implementation.name != _build_info.IMPLEMENTATION or
            running != built_for):
        raise ImportError(
            f"psgd's extension is built for {_build_info.IMPLEMENTATION} "
            f"{built_for} ({_build_info.PYTHON}); this is "
            f"{sys.implementation.name} {running} ({sys.executable}): run "
            f"{_build_info.PYTHON}, or a virtual environment made from it")
    try:
        from psgd import _psgd  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError(
            f"psgd's extension does not load under {sys.executable}: {e} "
            "(scripts/setup.sh installs the shared libraries it links)") from e
    return _psgd


_psgd = _load_extension()

# The package's names, from the modules that need the extension loaded:
# errors.py (the exceptions), session.py (Session and what a push returns).
from psgd.errors import (  # noqa: E402
    CancelledError, DeadlineExceededError, Error, FailedPreconditionError,
    Interrupted, InvalidArgumentError, ModelMismatchError, NotFoundError,
    OutOfRangeError, UnauthenticatedError, UnavailableError)
from psgd.session import (  # noqa: E402
    PushOutcome, Session, StepOutcome, eval_metrics)

__all__ = [
    "Session", "StepOutcome", "PushOutcome", "Error", "InvalidArgumentError",
    "FailedPreconditionError", "ModelMismatchError", "NotFoundError",
    "DeadlineExceededError", "UnavailableError", "UnauthenticatedError",
    "CancelledError", "OutOfRangeError", "Interrupted", "eval_metrics",
]
