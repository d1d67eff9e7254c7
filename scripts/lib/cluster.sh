# What every script that runs a cluster on this machine shares: a config
# written from parameters, free ports, a config's processes started and
# stopped, their exits awaited. (run/launch.sh is psgd launch,
# python/psgd/launch.py, which starts tasks as start_task does.) Sourced
# (it sets no shell options) by bench/soak.sh, bench/cluster_overhead.sh,
# bench/ps_bench_cluster.sh, bench/ucx_echo.sh, experiments/lib.sh,
# experiments/netns_sync_cluster.sh, tests/cluster_test_lib.sh and
# worker/bench/ucx_echo_bench_test.sh:
#
#   source "$(dirname "$0")/../lib/cluster.sh"
#
# The binaries come from $PSGD_BIN (ps/ps_server, worker/worker,
# configs/cluster_tasks below it: bazel-bin, a --bin_dir, a test's
# runfiles); the caller sets it before start_task. Configs are read back by
# configs/cluster_tasks only (the real loader), never parsed here.
#
#   free_ports N [HOST]          N free TCP ports on HOST (127.0.0.1), one a
#                                line (bound together, then released), below
#                                the kernel's ephemeral range
#   write_cluster_config FILE NAME [KEY=VALUE...]
#                                a config; the keys are listed at the function
#   start_task [--netns=NS] [--strace=FILE] CONFIG TASK RUN_DIR LOG [FLAGS...]
#                                TASK (ps:I, worker:J) in the background, in
#                                network namespace NS when given, under
#                                `strace -f -e trace=%file -o FILE` (every
#                                path the task touches) when given; a worker
#                                with a program (WorkerTask.program: a
#                                Python script gets /usr/bin/python3 and
#                                $PSGD_BIN/python/site on PYTHONPATH) runs it
#                                instead of worker/worker, without FLAGS;
#                                stdout and
#                                stderr to LOG, or with LOG "-" to this
#                                script's stdout, each line prefixed by TASK.
#                                $! is its pid, also kept in task_pid[TASK],
#                                pid_task[PID] and task_pids
#   stop_tasks [SIGNAL]          SIGNAL (TERM) to every task started
#   stop_tasks_on_exit           on exit, SIGKILL every task still running
#   wait_task PID SECONDS        the task's exit status, or 124 (and a line
#                                on stderr) while it still runs after SECONDS
#   await_line FILE PID PATTERN [SECONDS]
#                                true once FILE has a line matching PATTERN
#                                (grep); false when process PID exits, or
#                                after SECONDS (10), without one
#   task_program CONFIG TASK     the worker program of TASK (empty: the C++
#                                worker)
#   last_step FILE               the step of the last complete train line of
#                                a task's metrics (0 when none), as
#                                scripts/lib/runs.py reads it
#   check_model WORKER NAME [BN] NAME a model of the registry (WORKER
#                                --list_models: worker/worker's path) and BN
#                                empty, or SERVER or LOCAL for a model with
#                                batch norm; otherwise a line on stderr
#                                naming the bad value (and the known
#                                models), status 2

_cluster_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
declare -gA task_pid=() pid_task=()
declare -ga task_pids=()

# free_ports N [HOST]: N free ports on HOST (default 127.0.0.1), one a
# line; free_port_run N [HOST]: a port P with P..P+N-1 all free on HOST
# (default 0.0.0.0), for a launcher that gives task k the port P+k
# (psgd.sbatch's --port_base). Both below the kernel's ephemeral range, so
# that no connection's local end takes one before the task binds it
# (free_ports.py).
free_ports() {
  /usr/bin/python3 "$_cluster_lib_dir/free_ports.py" ports "$1" "${2:-127.0.0.1}"
}
free_port_run() {
  /usr/bin/python3 "$_cluster_lib_dir/free_ports.py" run "$1" "${2:-0.0.0.0}"
}

# write_cluster_config FILE NAME [KEY=VALUE...]: the config of cluster NAME.
# Tasks: ps=P and workers=W (1 and 1) on 127.0.0.1 at free ports; or
# ps_hosts=H,... and worker_hosts=H,... (a task per host named: a ps at
# H:2222 listening on 0.0.0.0:2222, a worker at H:2300), for network
# namespaces or real hosts. Every other key is optional and is written only
# when given:
#   threads=T        compute threads per worker (default 1; empty: none
#                    written, the binary's default)
#   ps_extra=TEXT    inside every ps block; {host} becomes the task's host
#   mode=SYNC|ASYNC  (SYNC)      n=N  replicas_to_aggregate
#   batch=B  steps=S training=TEXT (more of the training block)
#   model=NAME       data=TEXT (inside the data block)
#   bn=SERVER|LOCAL  model.batch_norm_statistics (needs model=)
#   extra=TEXT       a top-level line (checkpoint, wire, leases ...); repeatable
# One line per task and one training line, "training { mode: MODE ...": the
# tests edit those lines.
write_cluster_config() {
  local file=$1 name=$2; shift 2
  local mode=SYNC ps=1 workers=1 ps_hosts="" worker_hosts="" threads=1 ps_extra=""
  local n="" batch="" steps="" training="" model="" bn="" data="" kv key value i
  local extras=() hosts=() ports=()
  for kv in "$@"; do
    key=${kv%%=*} value=${kv#*=}
    case "$key" in
      mode|ps|workers|ps_hosts|worker_hosts|threads|ps_extra|n|batch|steps|training|model|bn|data)
        printf -v "$key" '%s' "$value" ;;
      extra) extras+=("$value") ;;
      *) echo "write_cluster_config: unknown key '$key' in '$kv'" >&2; return 2 ;;
    esac
  done
  {
    echo "# Written by $(basename "$0") (scripts/lib/cluster.sh)."
    echo "name: \"$name\""
    if [ -n "$ps_hosts$worker_hosts" ]; then
      IFS=, read -r -a hosts <<<"$ps_hosts"
      for i in "${hosts[@]}"; do
        echo "ps { address: \"$i:2222\" listen_address: \"0.0.0.0:2222\"${ps_extra:+ ${ps_extra//\{host\}/$i}} }"
      done
      IFS=, read -r -a hosts <<<"$worker_hosts"
      for i in "${hosts[@]}"; do
        echo "worker { address: \"$i:2300\"${threads:+ threads: $threads} }"
      done
    else
      ports=($(free_ports $((ps + workers))))
      for ((i = 0; i < ps; i++)); do
        echo "ps { address: \"127.0.0.1:${ports[i]}\"${ps_extra:+ ${ps_extra//\{host\}/127.0.0.1}} }"
      done
      for ((i = 0; i < workers; i++)); do
        echo "worker { address: \"127.0.0.1:${ports[ps + i]}\"${threads:+ threads: $threads} }"
      done
    fi
    echo "training { mode: $mode${n:+ replicas_to_aggregate: $n}${batch:+ batch_size: $batch}${steps:+ steps: $steps}${training:+ $training} }"
    [ -z "$model" ] || echo "model { name: \"$model\"${bn:+ batch_norm_statistics: $bn} }"
    [ -z "$data" ] || echo "data { $data }"
    for i in "${extras[@]+"${extras[@]}"}"; do echo "$i"; done
  } > "$file"
}

start_task() {
  local netns="" strace_to=""
  while :; do
    case "$1" in
      --netns=*) netns=${1#--netns=}; shift ;;
      --strace=*) strace_to=${1#--strace=}; shift ;;
      *) break ;;
    esac
  done
  local cfg=$1 task=$2 run=$3 log=$4
  shift 4
  local command=()
  case "$task" in
    ps:*) command=("$PSGD_BIN/ps/ps_server") ;;
    worker:*)
      command=($(task_program "$cfg" "$task")) || return 2
      if [ ${#command[@]} -eq 0 ]; then
        command=("$PSGD_BIN/worker/worker")
      else
        # A worker program (WorkerTask.program): the FLAGS are the C++
        # binaries', not passed on.
        set --
        [[ ${command[0]} != *.py ]] || command=(/usr/bin/python3 "${command[@]}")
      fi ;;
    *) echo "start_task: '$task' is neither ps:I nor worker:J" >&2; return 2 ;;
  esac
  local in=()
  [ -z "$netns" ] || in=(ip netns exec "$netns")
  # The psgd package (//python:psgd) for Python worker programs.
  in+=(env "PYTHONPATH=$PSGD_BIN/python/site${PYTHONPATH:+:$PYTHONPATH}")
  [ -z "$strace_to" ] || in+=(strace -f -qq -e trace=%file -o "$strace_to")
  if [ "$log" = - ]; then
    "${in[@]}" "${command[@]}" --config="$cfg" --task="$task" --run_dir="$run" "$@" \
      > >(sed -u "s/^/$(printf '%-9s|' "$task") /") 2>&1 &
  else
    "${in[@]}" "${command[@]}" --config="$cfg" --task="$task" --run_dir="$run" "$@" \
      > "$log" 2>&1 &
  fi
  task_pid[$task]=$!
  pid_task[$!]=$task
  task_pids+=($!)
}

stop_tasks() {
  local pid
  for pid in "${task_pids[@]+"${task_pids[@]}"}"; do kill "-${1:-TERM}" "$pid" 2>/dev/null; done
  return 0
}

stop_tasks_on_exit() {
  trap 'stop_tasks KILL' EXIT
}

wait_task() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      echo "${pid_task[$pid]:-process $pid} still running after $2 s" >&2
      return 124
    fi
    sleep 0.2
  done
  wait "$pid"
}

await_line() {
  local file=$1 pid=$2 pattern=$3 deadline=$((SECONDS + ${4:-10}))
  while [ $SECONDS -lt $deadline ]; do
    grep -q "$pattern" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -q "$pattern" "$file" 2>/dev/null
}

task_program() {
  # Scripts that run only C++ workers may not have built cluster_tasks.
  [ -x "$PSGD_BIN/configs/cluster_tasks" ] || return 0
  "$PSGD_BIN/configs/cluster_tasks" --config="$1" --program="$2"
}

last_step() {
  /usr/bin/python3 "$_cluster_lib_dir/runs.py" last-step "$1"
}

check_model() {
  local worker=$1 name=$2 bn=${3:-} me list line
  me=$(basename "$0")
  if [ -n "$bn" ] && [ "$bn" != SERVER ] && [ "$bn" != LOCAL ]; then
    echo "$me: --bn=$bn is neither SERVER nor LOCAL" >&2; return 2
  fi
  if [ ! -x "$worker" ]; then
    echo "$me: cannot check --model=$name: no worker binary $worker" \
      "(build //worker:worker, or give --bin_dir=DIR)" >&2
    return 2
  fi
  list=$("$worker" --list_models) || { echo "$me: $worker --list_models failed" >&2; return 2; }
  line=$(awk -v n="$name" '$1 == n' <<<"$list")
  if [ -z "$line" ]; then
    echo "$me: --model=$name: unknown model (known: $(awk '{print $1}' <<<"$list" | paste -sd, - | sed 's/,/, /g'))" >&2
    return 2
  fi
  if [ -n "$bn" ] && [[ "$line" != *", batch norm" ]]; then
    echo "$me: --bn=$bn: model $name has no batch norm (leave --bn out)" >&2
    return 2
  fi
}
