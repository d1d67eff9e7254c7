#!/usr/bin/env bash
# Runs scripts/run/compare_test.py with Debian's python3 (which has matplotlib).
set -euo pipefail
dir=$(dirname "$0")
exec /usr/bin/python3 "$dir/compare_test.py"
