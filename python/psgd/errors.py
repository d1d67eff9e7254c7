"""psgd's exceptions, raised by the extension (python/module.cc turns each
C++ Status into one, by its code and, for a model mismatch, its payload).

Every one is a psgd.Error, named after what went wrong; some are also the
Python exception a caller would catch: InvalidArgumentError is a
ValueError, ModelMismatchError a FailedPreconditionError. A refused call
sends nothing to the servers. Import them from psgd (psgd.Interrupted ...).
"""

from psgd import _psgd

__all__ = [
    "Error", "InvalidArgumentError", "FailedPreconditionError",
    "ModelMismatchError", "NotFoundError", "DeadlineExceededError",
    "UnavailableError", "UnauthenticatedError", "CancelledError",
    "OutOfRangeError", "Interrupted",
]

Error = _psgd.Error
InvalidArgumentError = _psgd.InvalidArgumentError
FailedPreconditionError = _psgd.FailedPreconditionError
ModelMismatchError = _psgd.ModelMismatchError
NotFoundError = _psgd.NotFoundError
DeadlineExceededError = _psgd.DeadlineExceededError
UnavailableError = _psgd.UnavailableError
UnauthenticatedError = _psgd.UnauthenticatedError
CancelledError = _psgd.CancelledError
OutOfRangeError = _psgd.OutOfRangeError
# A wait for the servers that a signal or set_interrupt's check ended.
Interrupted = _psgd.Interrupted
