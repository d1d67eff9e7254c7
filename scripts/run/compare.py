#!/usr/bin/python3
"""Compares training runs: writes report.md and PNG plots. The code is the
psgd package's (python/psgd/compare.py, `psgd compare` from an install);
this runs it from the repository, without the package's extension:

    scripts/run/compare.py RUN_DIR [RUN_DIR...] [--out DIR] [--target 0.6]

`--help` and python/psgd/compare.py's docstring say the rest.
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


_compare = _psgd_module("compare")
# compare.Run, compare.fmt ... for the scripts that import this file.
globals().update({k: v for k, v in vars(_compare).items() if not k.startswith("__")})

if __name__ == "__main__":
    sys.exit(_compare.main())
