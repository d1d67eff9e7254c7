#!/usr/bin/env bash
# Starts every task of a cluster config on this machine, streams their logs
# with a task prefix, and stops them all on Ctrl-C or as soon as one fails.
# Exits 0 when every task exited 0; otherwise the first failed task's exit
# status (130 after Ctrl-C; 2 for bad input, with nothing started).
#
#   scripts/run/launch.sh [--no-build] [--bin_dir=DIR] [--run_dir=DIR] [--netns]
#                     [--tasks=ps:0,worker:1] CONFIG [-- FLAGS...]
#
# This is `psgd launch` (python/psgd/launch.py, the one implementation: its
# --help says the rest) run from the repository with the programs Bazel
# builds:
# --no-build     use the binaries already built with -c opt
#                (bazel-out/k8-opt/bin: bazel-bin follows the last build's
#                configuration, which a `bazel test` makes fastbuild)
# --bin_dir=DIR  take ps/ps_server, worker/worker, configs/cluster_tasks and
#                python/site from DIR instead (implies --no-build)
# --run_dir=DIR  where the run is written (default RUN_ROOT/NAME-TIMESTAMP
#                from the config)
# --netns        run each task inside the network namespace its host names
#                (scripts/run/netns_hosts.sh makes them); RUN/HOST/ per host,
#                RUN/HOST/net-HOST.jsonl samples its link every second
# --tasks=LIST   only these tasks of the config
# FLAGS          passed to every ps_server and C++ worker (e.g.
#                --log_level=debug); not to worker programs
#
# A worker task with a program (WorkerTask.program, e.g. a PyTorch worker:
# examples/torch_cifar10.py) runs it instead of worker/worker, with the psgd
# package of $bin/python/site on PYTHONPATH (docs/PYTHON.md). The C++ worker
# is built only when a worker task has no program.
#
# The tasks run in the repository root: relative paths inside the config
# (data.dir, run_root, programs) are taken from there.
set -uo pipefail
here=$(pwd)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }

build=1
bin=""
config=""
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --bin_dir=*) bin=$(abs "${1#--bin_dir=}"); build=0 ;;
    --run_dir=*) pass+=("--run_dir=$(abs "${1#--run_dir=}")") ;;
    --netns) pass+=(--netns) ;;
    --tasks=*) pass+=("$1") ;;
    --) break ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    -*) echo "launch.sh: unknown option '$1'" >&2; exit 2 ;;
    *) if [ -n "$config" ]; then echo "launch.sh: one config only ('$config', '$1')" >&2; exit 2; fi
       config=$(abs "$1") ;;
  esac
  shift
done
if [ -z "$config" ]; then
  echo "usage: scripts/run/launch.sh [--no-build] [--bin_dir=DIR] [--run_dir=DIR] [--tasks=LIST] CONFIG [-- FLAGS...]" >&2
  exit 2
fi
if [ ! -f "$config" ]; then
  echo "launch.sh: no config file '$config'" >&2
  exit 2
fi
cd "$(dirname "$0")/../.." || exit 1

if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //configs:cluster_tasks //python:psgd >&2 || {
    echo "launch.sh: build failed" >&2; exit 1; }
  # The C++ worker only for a worker task without a program.
  tasks_bin=bazel-out/k8-opt/bin/configs/cluster_tasks
  if tasks=$("$tasks_bin" --config="$config" 2>/dev/null); then
    for t in $tasks; do
      [[ $t == worker:* ]] || continue
      if [ -z "$("$tasks_bin" --config="$config" --program="$t")" ]; then
        bazel build -c opt //worker:worker >&2 || {
          echo "launch.sh: build failed" >&2; exit 1; }
        break
      fi
    done
  fi
fi
# The -c opt outputs, unless --bin_dir named others.
if [ -z "$bin" ]; then
  bin=$(pwd)/bazel-bin
  [ -d bazel-out/k8-opt/bin ] && bin=$(pwd)/bazel-out/k8-opt/bin
fi
exec /usr/bin/python3 python/psgd/launch.py --prog=launch.sh --bin_dir="$bin" \
  ${pass[@]+"${pass[@]}"} "$config" "$@"
