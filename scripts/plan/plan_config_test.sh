#!/usr/bin/env bash
# The cluster configs scripts/plan/plan.py writes load with the real config
# loader (configs/cluster_tasks) and name what the plan chose, for sync with
# backups, adaptive N over UCX with overlap, and async with a staleness bound.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tasks=$(pwd)/configs/cluster_tasks
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/plan_config_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
plan=(/usr/bin/python3 "$src/scripts/plan/plan.py" --model=resnet20 --workers=8 --hosts=2
  --step_ms=4 --gbit=10 --shards=2 --steps=30 --overlap=off)
check() {  # NAME WANT...: the config loads and has every WANT line
  local name=$1; shift
  "$tasks" --config="$tmp/$name.pbtxt" >/dev/null ||
    { echo "FAIL: $name.pbtxt does not load"; cat "$tmp/$name.pbtxt"; exit 1; }
  for want in "$@"; do
    grep -qF -- "$want" "$tmp/$name.pbtxt" ||
      { echo "FAIL: $name.pbtxt lacks '$want'"; cat "$tmp/$name.pbtxt"; exit 1; }
  done
}
"${plan[@]}" --modes=sync --backups=1 --wires=bf16 --out="$tmp/sync.pbtxt" >/dev/null
check sync "replicas_to_aggregate: 7" "total_num_replicas: 8" "gradients: BF16" 'device: "gpu:3"'
"${plan[@]}" --modes=adaptive --overlap=on --transports=ucx --device=cpu \
  --out="$tmp/adaptive.pbtxt" >/dev/null
check adaptive "adaptive_backups { }" "overlap: true" "data_plane: UCX"
"${plan[@]}" --modes=async --staleness_bound=2 --async_margin=0 --out="$tmp/async.pbtxt" >/dev/null
check async "mode: ASYNC"
[ "$(grep -c '^worker {' "$tmp/sync.pbtxt")" -eq 8 ] || { echo "FAIL: not 8 workers"; exit 1; }
[ "$(grep -c '^ps {' "$tmp/sync.pbtxt")" -eq 2 ] || { echo "FAIL: not 2 shards"; exit 1; }
echo PASS
