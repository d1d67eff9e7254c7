#!/usr/bin/env bash
# Builds the psgd Python package and packs it into a wheel:
#   scripts/build_wheel.sh [OUT_DIR]      (default dist/)
# prints the wheel's path. Then, for example:
#   /usr/bin/python3 -m venv --system-site-packages v
#   v/bin/pip install --no-index dist/psgd-*.whl && v/bin/python -m psgd
# The wheel is for Debian's /usr/bin/python3 (3.11) on a machine that
# scripts/setup.sh set up (the extension links its shared gRPC, protobuf,
# Abseil and oneDNN); docs/PYTHON.md, "Installing".
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
bazel build //python:psgd >&2
exec /usr/bin/python3 python/wheel/wheel.py bazel-bin/python/psgd "$out"
