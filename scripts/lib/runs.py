#!/usr/bin/python3
"""The reader of run directories (Run, RunError): the psgd package's
(python/psgd/runs.py, which `psgd compare` uses from an install), loaded
from this repository without the package's extension, for the scripts:

    sys.path.insert(0, ".../scripts/lib"); from runs import Run, RunError
    runs.py last-step FILE | runs.py mean-loss FILE first|last N

python/psgd/runs.py's docstring says the rest.
"""
import importlib
import os
import sys
import types


def _psgd_module(name):
    """python/psgd/NAME.py of this repository as psgd_sources.NAME (the
    package's standard-library tools, without psgd/__init__.py, which loads
    the extension)."""
    if "psgd_sources" not in sys.modules:
        pkg = types.ModuleType("psgd_sources")
        pkg.__path__ = [os.path.normpath(os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "psgd"))]
        sys.modules["psgd_sources"] = pkg
    return importlib.import_module("psgd_sources." + name)


_runs = _psgd_module("runs")
globals().update({k: v for k, v in vars(_runs).items() if not k.startswith("__")})

if __name__ == "__main__":
    _runs.main(sys.argv)
