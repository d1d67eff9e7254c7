#!/usr/bin/env bash
# Builds the psgd Python package and packs it into a wheel:
#   scripts/build_wheel.sh [OUT_DIR]      (default dist/)
# prints the wheel's path. Then, for example:
#   /usr/bin/python3 -m venv --system-site-packages v
#   v/bin/pip install --no-index dist/psgd-*.whl && v/bin/python -m psgd
#   v/bin/psgd-ps --config=cluster.pbtxt --task=ps:0     # no Bazel needed
# The wheel is for Debian's /usr/bin/python3 (3.11) on a machine that
# scripts/setup.sh set up (the extension links its shared gRPC, protobuf,
# Abseil and oneDNN); docs/PYTHON.md, "Install".
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
# Optimised (-c opt), the package and the cluster's programs, which pip
# installs from the wheel into the environment's bin/ (psgd-ps, psgd-ckpt,
# psgd-cluster-tasks): pip install + a config is a whole cluster.
bazel build -c opt //python:psgd //ps:ps_server //ps/checkpoint:ckpt_tool \
  //configs:cluster_tasks >&2
bin=bazel-out/k8-opt/bin
exec /usr/bin/python3 python/wheel/wheel.py "$bin/python/site/psgd" "$out" \
  ps_server="$bin/ps/ps_server" ckpt_tool="$bin/ps/checkpoint/ckpt_tool" \
  cluster_tasks="$bin/configs/cluster_tasks"
