#!/usr/bin/env bash
# scripts/plan/validate.sh --dry-run: every scenario's config loads with the
# real config loader (configs/cluster_tasks) and is the cluster the scenario
# names (its shards, workers, N or async, the emulated compute), and the
# report has the simulator's prediction for each; a scenario that does not
# exist is refused by name, nothing written.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tasks=$(pwd)/configs/cluster_tasks
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/validate_dry_run_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bash "$src/scripts/plan/validate.sh" --dry-run --out="$tmp/out" > "$tmp/stdout"
n=0
while read -r name shards workers mode backups cap; do
  n=$((n + 1))
  cfg=$tmp/out/$name.pbtxt
  "$tasks" --config="$cfg" > /dev/null || { echo "FAIL: $name.pbtxt does not load"; cat "$cfg"; exit 1; }
  [ "$(grep -c '^ps {' "$cfg")" -eq "$shards" ] || { echo "FAIL: $name: not $shards shards"; exit 1; }
  [ "$(grep -c '^worker {' "$cfg")" -eq "$workers" ] || { echo "FAIL: $name: not $workers workers"; exit 1; }
  if [ "$mode" = sync ]; then
    grep -q "replicas_to_aggregate: $((workers - backups))" "$cfg" ||
      { echo "FAIL: $name: N is not $((workers - backups))"; cat "$cfg"; exit 1; }
  else
    grep -q "mode: ASYNC" "$cfg" || { echo "FAIL: $name: not async"; exit 1; }
    if [[ $mode =~ ^ssp([0-9]+)$ ]]; then
      grep -q "staleness_bound: ${BASH_REMATCH[1]}" "$cfg" ||
        { echo "FAIL: $name: no staleness_bound ${BASH_REMATCH[1]}"; cat "$cfg"; exit 1; }
      grep -q "^| $name | .* | async, staleness_bound ${BASH_REMATCH[1]} |" "$tmp/out/report.md" ||
        { echo "FAIL: $name: the report does not say its bound"; exit 1; }
    else
      ! grep -q "staleness_bound" "$cfg" || { echo "FAIL: $name: a staleness_bound"; exit 1; }
    fi
  fi
  grep -q "shift_seconds: 0.004024" "$cfg" || { echo "FAIL: $name: compute not 4.024 ms"; exit 1; }
  grep -q "^| $name | $shards | $workers | .* | $cap | [0-9.]* | [0-9.]* | - | - |" "$tmp/out/report.md" ||
    { echo "FAIL: no prediction for $name"; cat "$tmp/out/report.md"; exit 1; }
done < "$tmp/out/scenarios.txt"
[ "$n" -eq 15 ] || { echo "FAIL: $n scenarios, not 15"; exit 1; }
if bash "$src/scripts/plan/validate.sh" --dry-run --only=s9-m9 --out="$tmp/bad" 2> "$tmp/err"; then
  echo "FAIL: an unknown scenario was taken"; exit 1
fi
grep -q "no scenario 's9-m9'" "$tmp/err" || { echo "FAIL: message: $(cat "$tmp/err")"; exit 1; }
[ ! -e "$tmp/bad" ] || { echo "FAIL: $tmp/bad written"; exit 1; }
echo PASS
