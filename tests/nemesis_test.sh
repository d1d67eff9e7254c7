#!/bin/bash
# The nemesis' CI subset under bazel test (tests/nemesis.py --suite=ci): a
# pause, a cut, a full disk and a lost host, each in another mode x front
# end. Needs root (CI runs as root); says SKIP otherwise.
set -euo pipefail
RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
exec /usr/bin/python3 "$RUNFILES/tests/nemesis.py" --suite=ci "$@"
