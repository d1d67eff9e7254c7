#!/usr/bin/env bash
# The main command: on a fresh machine, sets up and builds, runs a sync and
# an async cluster of the same model (2 parameter servers, 4 workers) for the
# same wall-clock budget, and writes the comparison report.
#
#   scripts/demo.sh [--minutes=M] [--model=NAME] [--data_dir=DIR] [--synthetic]
#
# --minutes=M     the budget of each run (default 3)
# --model=NAME    the model, any of the registry (worker --list_models;
#                 default cifar10_tutorial, TensorFlow's tutorial network;
#                 a larger one such as resnet20 needs more minutes)
# --data_dir=DIR  CIFAR-10's binary files (default data/cifar-10-batches-bin,
#                 which scripts/run/get_cifar10.sh fills; the demo runs it when
#                 the directory is empty)
# --synthetic     use the synthetic data set
#
# Without CIFAR-10 (no directory, no network) it says so and uses the
# synthetic set. Everything goes to runs/demo-TIMESTAMP/; the last line
# names the report.
set -uo pipefail
here=$(pwd)
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/cluster.sh  # check_model

minutes=3
model=cifar10_tutorial
data_dir=""
synthetic=0
for a in "$@"; do
  case "$a" in
    --minutes=*) minutes="${a#--minutes=}" ;;
    --model=*) model="${a#--model=}" ;;
    --data_dir=*) data_dir="${a#--data_dir=}"
                  case "$data_dir" in /*) ;; *) data_dir="$here/$data_dir" ;; esac ;;
    --synthetic) synthetic=1 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || ! awk -v m="$minutes" 'BEGIN { exit !(m > 0) }'; then
  echo "demo.sh: --minutes=$minutes is not a positive number" >&2
  exit 2
fi
# The model against the registry: now when a worker is built already, so
# that a bad name fails before the setup, and after the build in any case.
if [ -x bazel-bin/worker/worker ]; then check_model bazel-bin/worker/worker "$model" || exit 2; fi

echo "== demo.sh: setting up"
bash scripts/setup.sh || exit 1
echo "== demo.sh: building"
bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks 2>&1 | tail -3
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "demo.sh: build failed" >&2; exit 1; }
check_model bazel-bin/worker/worker "$model" || exit 2

has_cifar() {
  local d=$1
  [ -f "$d/test_batch.bin" ] || [ -f "$d/cifar-10-batches-bin/test_batch.bin" ]
}
if [ "$synthetic" = 0 ]; then
  if [ -z "$data_dir" ]; then
    data_dir="$PWD/data/cifar-10-batches-bin"
    if ! has_cifar "$data_dir"; then
      echo "== demo.sh: no CIFAR-10 in $data_dir; trying scripts/run/get_cifar10.sh"
      bash scripts/run/get_cifar10.sh || true
    fi
  fi
  if ! has_cifar "$data_dir"; then
    echo "demo.sh: WARNING: no CIFAR-10 data (looked in $data_dir, and the download did not work)." >&2
    echo "demo.sh: WARNING: using the SYNTHETIC data set instead; its accuracies say nothing about CIFAR-10." >&2
    echo "demo.sh: WARNING: get the data with scripts/run/get_cifar10.sh [ARCHIVE|DIR], or pass --data_dir=DIR." >&2
    synthetic=1
  fi
fi

out="runs/demo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out" || exit 1
seconds=$(awk "BEGIN { print int($minutes * 60) }")
# The shipped 2 ps x 4 worker configs, with the time budget, a test-set
# subset for the periodic evaluations, the chosen model and the chosen data.
make_config() {
  local src=$1 dst=$2
  local data
  if [ "$synthetic" = 1 ]; then
    data='source: SYNTHETIC'
  else
    data="source: CIFAR10 dir: \"$data_dir\""
  fi
  sed -e "s|epochs: 10|epochs: 100 max_seconds: $seconds eval_examples: 2000|" \
      -e "s|eval_every: [0-9]*|eval_every: 100|" \
      -e "s|source: CIFAR10 dir: \"data/cifar-10-batches-bin\"|$data|" \
      -e "s|^name: \"\(.*\)\"|name: \"demo-\1\"|" \
      -e "s|^model { name: \"cifar10_tutorial\" }|model { name: \"$model\" }|" \
      "$src" > "$dst"
}
make_config configs/sync_2ps_4workers.pbtxt "$out/sync.pbtxt"
make_config configs/async_2ps_4workers.pbtxt "$out/async.pbtxt"
for mode in sync async; do
  grep -q "^model { name: \"$model\" }" "$out/$mode.pbtxt" || {
    echo "demo.sh: configs/${mode}_2ps_4workers.pbtxt has no line 'model { name: \"cifar10_tutorial\" }' for --model to replace" >&2
    exit 1
  }
done

for mode in sync async; do
  echo "== demo.sh: $mode run of $model, $minutes minute(s)"
  bash scripts/run/launch.sh --no-build --run_dir="$out/$mode" "$out/$mode.pbtxt" || {
    echo "demo.sh: the $mode run failed (logs above; run directory $out/$mode)" >&2
    exit 1
  }
done

echo "== demo.sh: comparing"
/usr/bin/python3 scripts/run/compare.py "$out/sync" "$out/async" --out "$out/report" || exit 1
[ "$synthetic" = 1 ] && echo "demo.sh: (synthetic data: see the warning above)"
echo "demo.sh: report: $PWD/$out/report/report.md"
