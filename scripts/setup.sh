#!/usr/bin/env bash
# Installs the Debian 12 packages that the build, the tests and the scripts
# need. Idempotent: when everything is present it only checks (a second or
# two). Usage:
#   scripts/setup.sh            build + tests + scripts
#   scripts/setup.sh --bench    also what only the benchmarks need (none now:
#                               PyTorch, their peer, is in the main list)
#   scripts/setup.sh --list     print the package list and exit
#   scripts/setup.sh --python   also build the psgd wheel (scripts/build_wheel.sh)
#                               and install it into .venv, a virtual
#                               environment over Debian's Python and its
#                               torch and numpy: then `.venv/bin/python -m psgd`
# On a system without apt-get it prints what to install and fails.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap          # Bazel 4.2.3 (works offline; see docs/BUILDING.md)
  g++ pkg-config
  protobuf-compiler libprotobuf-dev
  protobuf-compiler-grpc libgrpc++-dev
  libabsl-dev libspdlog-dev libfmt-dev catch2
  libopenblas-dev libdnnl-dev  # BLAS; oneDNN (the CPU backend's convolutions, GEMMs)
  clang libclang-rt-14-dev # the fuzzer (libFuzzer) and sanitizer runtimes
  clang-format             # scripts/check_format.sh (CI)
  libssl-dev openssl       # the cluster token's SHA-256; test certificates
  libcivetweb-dev          # the Prometheus endpoints' HTTP server (common/prometheus.h)
  python3 python3-numpy python3-matplotlib  # scripts/run/compare.py
  pybind11-dev python3-dev python3-torch    # the psgd Python package (//python) and its tests; worker/models/torch_check; the CPU benchmark's peer
  python3-venv             # //python/tests:wheel_test: the wheel in a virtual environment
  python3-pip              # //python/tests:wheel_test: the wheel into the system Python (user site)
  python3-torchvision      # examples/torchvision_cifar10.py (and its run in launch_program_test)
  procps iproute2          # scripts/run/launch.sh, tests; ip netns and tc (netns_hosts.sh)
  strace                   # tests/netns_cluster_test.sh: the paths a restarted ps touches
  nftables                 # tests/nemesis.py: nft drops a link between namespace hosts (--cut)
  slurmctld slurmd slurm-client  # tests/slurm_cluster_test.sh (scripts/deploy/)
  prometheus               # promtool: the /metrics pages' format check in the tests
  libucx-dev               # UCX 1.13 (//third_party/system:ucx): the data plane between hosts (ps/ucx)
)
BENCH_PACKAGES=()

want=("${PACKAGES[@]}")
python=0
case "${1:-}" in
  --bench) want+=(${BENCH_PACKAGES[@]+"${BENCH_PACKAGES[@]}"}) ;;
  --python) python=1 ;;
  --list) printf '%s\n' "${PACKAGES[@]}"; echo "# with --bench:"; printf '%s\n' ${BENCH_PACKAGES[@]+"${BENCH_PACKAGES[@]}"}; exit 0 ;;
  "") ;;
  *) echo "setup.sh: unknown option '$1' (expected --bench, --python or --list)" >&2; exit 2 ;;
esac

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
else
  missing=("${want[@]}")
fi

if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: no apt-get here. Install these (Debian 12 names; equivalents elsewhere):" >&2
    printf '  %s\n' "${missing[@]}" >&2
    echo "Versions the project is built with: Bazel 4.2.3, gRPC 1.51, protobuf 3.21, Abseil 20220623, spdlog 1.10, Catch2 2.13, OpenBLAS 0.3.21." >&2
    exit 1
  fi
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
      echo "setup.sh: need root to install: ${missing[*]}" >&2; exit 1
    fi
  fi
  echo "setup.sh: installing ${missing[*]}"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's /usr/bin/bazel is a wrapper that runs /usr/bin/bazel-<version
# in .bazelversion>; bazel-bootstrap installs only /usr/bin/bazel-4.
if [ ! -e /usr/bin/bazel-4.2.3 ]; then
  if [ -x /usr/bin/bazel-4 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO ln -s bazel-4 /usr/bin/bazel-4.2.3
  elif ! command -v bazel >/dev/null 2>&1; then
    echo "setup.sh: no Bazel found; install bazel-bootstrap or Bazel 4.2.3" >&2
    exit 1
  fi
fi
echo "setup.sh: all packages present"
if [ "$python" = 1 ]; then
  cd "$(dirname "$0")/.."
  wheel=$(bash scripts/build_wheel.sh dist | tail -1)
  [ -d .venv ] || /usr/bin/python3 -m venv --system-site-packages .venv
  .venv/bin/pip install -q --no-index --no-deps --force-reinstall "$wheel"
  .venv/bin/python -m psgd
  echo "setup.sh: psgd installed in .venv (.venv/bin/python; docs/PYTHON.md, \"Install\")"
fi
