# Shared by the experiment scripts (staleness.sh, batch_sweep.sh): a
# cluster config written for one setting, and one run of it on this machine.
# Sourced from the repository's root; the caller sets `data_dir` (absolute),
# `model` (a registry name, its --model) and `bn` (its --bn: SERVER, LOCAL
# or empty, where the model's batch norm statistics live; empty writes
# none, which is SERVER for a model with batch norm).
source scripts/lib/cluster.sh

# experiment_config FILE NAME MODE PS WORKERS BATCH TRAINING_EXTRA [THREADS]
# Writes a config of PS servers and WORKERS workers (THREADS compute threads
# each, default 1) on free 127.0.0.1 ports (scripts/lib/cluster.sh), of
# $model ($bn), CIFAR-10 from $data_dir. TRAINING_EXTRA goes into the
# training block (optimizer, seed, steps or epochs, max_seconds, staleness
# controls ...).
experiment_config() {
  write_cluster_config "$1" "$2" mode="$3" ps="$4" workers="$5" batch="$6" training="$7" \
    threads="${8:-1}" model="$model" bn="$bn" \
    data="source: CIFAR10 dir: \"$data_dir\" augment: true sharding: SHARD"
}

# experiment_check_model: $model and $bn against the registry of the worker
# binary ($bin_dir or bazel-bin; scripts/lib/cluster.sh's check_model), or
# exit 2 naming the bad value. A --dry-run before any build has no binary:
# then only the default model without --bn passes.
experiment_check_model() {
  local worker=${bin_dir:-bazel-bin}/worker/worker
  if [ ! -x "$worker" ] && [ "$model" = cifar10_tutorial ] && [ -z "$bn" ]; then
    return 0
  fi
  check_model "$worker" "$model" "$bn" || exit 2
}

# experiment_run CONFIG RUN_DIR: runs every task of CONFIG (the binaries in
# $bin_dir when the caller sets it, else bazel-bin built with -c opt), its
# output in RUN_DIR.log and the load average before and
# after in RUN_DIR.load.txt; on failure prints the log's tail and returns 1.
experiment_run() {
  local cfg=$1 dir=$2
  mkdir -p "$dir"
  echo "before $(cut -d' ' -f1-3 /proc/loadavg)" > "$dir.load.txt"
  if ! bash scripts/run/launch.sh --no-build ${bin_dir:+--bin_dir="$bin_dir"} --run_dir="$dir" "$cfg" > "$dir.log" 2>&1; then
    tail -30 "$dir.log" >&2
    echo "$(basename "$0"): the run $(basename "$dir") failed (log: $dir.log)" >&2
    return 1
  fi
  echo "after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir.load.txt"
}

# experiment_data_dir DIR: the absolute CIFAR-10 directory, or exit naming it.
experiment_data_dir() {
  local d=$1
  if [ ! -f "$d/data_batch_1.bin" ] || [ ! -f "$d/test_batch.bin" ]; then
    echo "$(basename "$0"): no CIFAR-10 binary files in '$d' (give --data_dir=DIR)" >&2
    exit 1
  fi
  (cd "$d" && pwd)
}
