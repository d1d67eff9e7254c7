#!/usr/bin/env bash
# Starts every task of a cluster config on this machine, streams their logs
# with a task prefix, and stops them all on Ctrl-C or as soon as one fails.
# Exits 0 when every task exited 0, non-zero otherwise.
#
#   scripts/run/launch.sh [--no-build] [--bin_dir=DIR] [--run_dir=DIR] [--netns]
#                     CONFIG [-- FLAGS...]
#
# --no-build     use the binaries already built with -c opt
#                (bazel-out/k8-opt/bin: bazel-bin follows the last build's
#                configuration, which a `bazel test` makes fastbuild)
# --bin_dir=DIR  take ps/ps_server, worker/worker and configs/cluster_tasks
#                from DIR instead (implies --no-build)
# --run_dir=DIR  where the run is written (default RUN_ROOT/NAME-TIMESTAMP
#                from the config)
# --netns        run each task inside the network namespace its host names
#                (the host of its address; scripts/run/netns_hosts.sh makes
#                them). Each host gets its own folder of the run directory
#                (RUN/HOST/: nothing shared between hosts; compare.py reads
#                such a run), and RUN/HOST/net-HOST.jsonl samples the bytes
#                its link carried every second (scripts/run/netns_sampler.py).
# FLAGS          passed to every ps_server and C++ worker (e.g.
#                --log_level=debug); not to worker programs
#
# A worker task with a program (WorkerTask.program, e.g. a PyTorch worker:
# examples/torch_cifar10.py) runs it instead of worker/worker, with the psgd
# package of $bin/python/site on PYTHONPATH (docs/PYTHON.md).
#
# The tasks run in the repository root: relative paths inside the config
# (data.dir, run_root) are taken from there.
set -uo pipefail
here=$(pwd)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }

build=1
netns=0
bin=bazel-bin
run_dir=""
config=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --bin_dir=*) bin=$(abs "${1#--bin_dir=}"); build=0 ;;
    --run_dir=*) run_dir=$(abs "${1#--run_dir=}") ;;
    --netns) netns=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "launch.sh: unknown option '$1'" >&2; exit 2 ;;
    *) if [ -n "$config" ]; then echo "launch.sh: one config only ('$config', '$1')" >&2; exit 2; fi
       config=$(abs "$1") ;;
  esac
  shift
done
if [ -z "$config" ]; then
  echo "usage: scripts/run/launch.sh [--no-build] [--bin_dir=DIR] [--run_dir=DIR] CONFIG [-- FLAGS...]" >&2
  exit 2
fi
if [ ! -f "$config" ]; then
  echo "launch.sh: no config file '$config'" >&2
  exit 2
fi
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib/cluster.sh

if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks \
    //python:psgd >&2 || {
    echo "launch.sh: build failed" >&2; exit 1; }
fi
# The -c opt outputs, unless --bin_dir named others.
[ "$bin" = bazel-bin ] && [ -d bazel-out/k8-opt/bin ] && bin=bazel-out/k8-opt/bin
for b in ps/ps_server worker/worker configs/cluster_tasks; do
  if [ ! -x "$bin/$b" ]; then
    echo "launch.sh: $bin/$b is missing (run without --no-build)" >&2
    exit 1
  fi
done

tasks=$("$bin/configs/cluster_tasks" --config="$config") || exit 1
if [ -z "$run_dir" ]; then
  name=$("$bin/configs/cluster_tasks" --config="$config" --field=name)
  root=$("$bin/configs/cluster_tasks" --config="$config" --field=run_root)
  run_dir="$root/$name-$(date +%Y%m%d-%H%M%S)"
fi
mkdir -p "$run_dir" || exit 1
echo "launch.sh: run directory $run_dir"
# The cluster's token (docs/CLUSTER.md, "Security"): unless the config names
# one, every task reads the file here, which the first task to start makes
# (0600). A config with its own token or `insecure: true` ignores it.
export PSGD_TOKEN_FILE=${PSGD_TOKEN_FILE:-$run_dir/token}

# --netns: each task's host (its address without the port) must be a
# namespace.
declare -A host_of=()   # task -> namespace
hosts=()
if [ "$netns" = 1 ]; then
  PATH=$PATH:/usr/sbin:/sbin
  namespaces=" $(ip netns list 2>/dev/null | awk '{print $1}' | tr '\n' ' ') "
  while read -r task address; do
    host=${address%:*}; host=${host#[}; host=${host%]}
    if [[ $namespaces != *" $host "* ]]; then
      echo "launch.sh: --netns: $task's host '$host' (address '$address') is not a network namespace here (make them with scripts/run/netns_hosts.sh up N)" >&2
      exit 2
    fi
    host_of[$task]=$host
    [[ " ${hosts[*]-} " == *" $host "* ]] || hosts+=("$host")
  done < <("$bin/configs/cluster_tasks" --config="$config" --addresses)
  python3 "$(pwd)/scripts/run/netns_sampler.py" --run_dir="$run_dir" \
    --hosts="$(IFS=,; echo "${hosts[*]}")" --parent=$$ &
  sampler=$!
fi

# The tasks (scripts/lib/cluster.sh's start_task): their pids in task_pids,
# pid_task maps a pid to its task.
PSGD_BIN=$bin
declare -A alive=()     # pid -> 1 while running
stopping=0
interrupted=0

# launch TASK: starts TASK, its output on ours with a task prefix.
launch() {
  local task=$1 dir=$run_dir in=()
  if [ "$netns" = 1 ]; then
    in=(--netns="${host_of[$task]}")
    dir=$run_dir/${host_of[$task]}
    mkdir -p "$dir"
  fi
  start_task ${in[@]+"${in[@]}"} "$config" "$task" "$dir" - "${extra[@]+"${extra[@]}"}"
  alive[$!]=1
}

on_signal() {
  echo "launch.sh: interrupted, stopping every task" >&2
  stopping=1
  interrupted=1
  stop_tasks TERM
}
trap on_signal INT TERM

# Servers first, so that workers find them listening.
for t in $tasks; do [[ $t == ps:* ]] && launch "$t"; done
for t in $tasks; do [[ $t == worker:* ]] && launch "$t"; done

failed=()
remaining=${#task_pids[@]}
while [ "$remaining" -gt 0 ]; do
  finished=""
  wait -n -p finished "${!alive[@]}"
  rc=$?
  # Empty when a signal interrupted the wait: wait again.
  [ -z "$finished" ] && continue
  unset "alive[$finished]"
  remaining=$((remaining - 1))
  task=${pid_task[$finished]}
  if [ "$rc" -ne 0 ]; then
    failed+=("$task (exit $rc)")
    if [ "$stopping" = 0 ]; then
      echo "launch.sh: $task failed with exit status $rc; stopping the others" >&2
      stopping=1
      stop_tasks TERM
      # Anything still running after 10 s is killed.
      ( sleep 10; stop_tasks KILL ) &
    fi
  else
    echo "launch.sh: $task exited 0" >&2
  fi
done
[ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null
wait 2>/dev/null

if [ "$interrupted" = 1 ]; then
  echo "launch.sh: stopped by a signal; run directory $run_dir" >&2
  exit 130
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "launch.sh: failed: ${failed[*]}" >&2
  echo "launch.sh: run directory $run_dir"
  exit 1
fi
echo "launch.sh: every task exited 0; run directory $run_dir"
