#!/bin/bash
# Runs cells of the fault matrix (tests/fault_matrix.py) under bazel test:
# fault_matrix_test.sh --fault=ps|worker|all
set -euo pipefail
RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
exec /usr/bin/python3 "$RUNFILES/tests/fault_matrix.py" "$@"
