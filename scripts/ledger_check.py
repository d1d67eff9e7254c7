#!/usr/bin/python3
"""Checks data-queue ledgers: was every sample of each epoch trained on once?
The code is the psgd package's (python/psgd/ledger_check.py; `psgd
ledger-check RUN` from an install takes the bounds from the run's config);
this runs it from the repository, without the package's extension:

  scripts/ledger_check.py --num_samples N --chunk_size C --seed S \\
      [--complete_epochs K] [--ledger LEDGER]... [LEDGER...] \\
      [--records RECORDS...]

`--help` and python/psgd/ledger_check.py's docstring say the rest.
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
            os.path.dirname(os.path.abspath(__file__)), "..", "python", "psgd"))]
        sys.modules["psgd_sources"] = pkg
    return importlib.import_module("psgd_sources." + name)


_ledger_check = _psgd_module("ledger_check")
# SplitMix64, check ... for the tests that import this file.
globals().update({k: v for k, v in vars(_ledger_check).items() if not k.startswith("__")})

if __name__ == "__main__":
    sys.exit(_ledger_check.main())
