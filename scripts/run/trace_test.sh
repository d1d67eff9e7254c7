#!/usr/bin/env bash
# Runs scripts/run/trace_test.py with Debian's python3.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/trace_test.py"
