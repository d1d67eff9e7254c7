#!/bin/bash
# Runs a Python test of the psgd package (python/tests/NAME.py) with
# /usr/bin/python3, the package (//python:psgd) and the helpers from the
# runfiles: py_test.sh NAME.
set -euo pipefail
RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
export PYTHONPATH=$RUNFILES/python/site:$RUNFILES/python/tests
exec /usr/bin/python3 "$RUNFILES/python/tests/$1.py" -v
