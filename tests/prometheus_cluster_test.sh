#!/usr/bin/env bash
# Prometheus end to end: a cluster of 2 ps and 2 workers whose config gives
# ps:0 and worker:1 a metrics_port; while it trains, GET /metrics of each
# answers with the task's counters (pushes by outcome, steps by outcome,
# step phases, bytes), and promtool (Debian's prometheus package) accepts
# both pages. The pages are read while the tasks are sure to be up: worker:0
# is stopped (SIGSTOP) mid-run, so that no step can complete (N = M = 2) and
# nothing ends until it goes on (SIGCONT), well within its 30 s lease. The
# pages answer only a scrape that carries the cluster's token (the default
# token file the tasks made): without it, or with another, 401. A metrics
# port already in use stops the task with an error naming it.
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
command -v promtool >/dev/null || fail "promtool is missing (scripts/setup.sh installs prometheus)"

cfg=$TMP/prom.pbtxt
run=$TMP/runs/prom
mkdir -p "$run"
write_config "$cfg" prom SYNC 2 2 2 1000 30
echo 'model { name: "cifar10_linear" }' >> "$cfg"
ports=($(free_ports 2))
# ps:0 is the first ps line, worker:1 the second worker line.
"$PY" - "$cfg" "${ports[0]}" "${ports[1]}" <<'PYEOF'
import sys
path, p0, p1 = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(path).read().splitlines()
ps = [i for i, l in enumerate(lines) if l.startswith("ps {")]
ws = [i for i, l in enumerate(lines) if l.startswith("worker {")]
lines[ps[0]] = lines[ps[0]].replace(" }", f" metrics_port: {p0} }}")
lines[ws[1]] = lines[ws[1]].replace(" }", f" metrics_port: {p1} }}")
open(path, "w").write("\n".join(lines) + "\n")
PYEOF
grep metrics_port "$cfg"
start_cluster "$cfg" "$run" 2 2
await_global_step "$run/worker-0.jsonl" 20 120 "${w_pids[0]}"
# Hold the run: with worker:0 stopped no step completes, so ps:0 and
# worker:1 (waiting for the step) stay up while their pages are read.
# (Both scrapes give up after 10 s each, within worker:0's 30 s lease.)
kill -STOP "${w_pids[0]}" 2>/dev/null || fail "worker:0 had exited at step 20 (the run was too short)"
for p in "${ps_pids[0]}" "${w_pids[1]}"; do
  kill -0 "$p" 2>/dev/null || fail "a task whose page the test reads had exited"
done

# The cluster's token: the default token file, made by the first task.
token_file=${PSGD_TOKEN_FILE:-${XDG_CONFIG_HOME:-${HOME:-~}/.config}/psgd/tokens/prom.token}
[ -s "$token_file" ] || fail "no default token file $token_file"
token=$(cat "$token_file")

# scrape URL FILE [TOKEN]: the page, once it answers with counters, retried
# for up to 10 s (the worker's page has them after its first step).
scrape() {
  "$PY" - "$1" "$2" "${3-$token}" <<'PYEOF'
import sys, time, urllib.error, urllib.request
url, out, token = sys.argv[1], sys.argv[2], sys.argv[3]
deadline = time.time() + 10
err = "no answer"
while True:
    try:
        request = urllib.request.Request(url)
        if token:
            request.add_header("Authorization", "Bearer " + token)
        body = urllib.request.urlopen(request, timeout=2).read().decode()
        if "_total" in body:
            open(out, "w").write(body)
            sys.exit(0)
    except urllib.error.HTTPError as e:
        if e.code == 401:
            open(out, "w").write("401")
            sys.exit(3)
        err = e
    except Exception as e:  # not up yet
        err = e
    if time.time() > deadline:
        sys.exit(f"{url}: no page: {err}")
    time.sleep(0.2)
PYEOF
}
for who in "" "not-the-token"; do
  for p in "${ports[@]}"; do
    rc=0; scrape "http://127.0.0.1:$p/metrics" "$TMP/stranger.prom" "$who" || rc=$?
    [ "$rc" -eq 3 ] || fail "port $p answered a scrape without the token (exit $rc)"
  done
done
scrape "http://127.0.0.1:${ports[0]}/metrics" "$TMP/ps0.prom" || fail "no /metrics from ps:0"
scrape "http://127.0.0.1:${ports[1]}/metrics" "$TMP/w1.prom" || fail "no /metrics from worker:1"
kill -CONT "${w_pids[0]}"
for f in ps0 w1; do
  promtool check metrics < "$TMP/$f.prom" || fail "promtool refused $f's page"
done
grep -E '^psgd_ps_pushes_total\{shard="0",outcome="applied"\} [1-9]' "$TMP/ps0.prom" ||
  fail "ps:0's page shows no applied pushes"
grep -q '^psgd_ps_live_workers{shard="0"} 2' "$TMP/ps0.prom" || fail "ps:0: live workers"
grep -E '^psgd_worker_steps_total\{worker="1",outcome="(applied|aggregated)"\} [1-9]' "$TMP/w1.prom" ||
  fail "worker:1's page shows no steps"
grep -q '^psgd_worker_phase_seconds_count{worker="1",phase="compute"}' "$TMP/w1.prom" ||
  fail "worker:1: no compute histogram"

for p in "${w_pids[@]}"; do wait_exit "$p" 300 || fail "a worker exited $?"; done
for p in "${ps_pids[@]}"; do wait_exit "$p" 60 || fail "a ps exited $?"; done

# A metrics port in use: the task stops at once, naming the port.
"$PY" - "$TMP/busy.port" <<'PYEOF' &
import socket, sys, time
s = socket.socket()
s.bind(("0.0.0.0", 0))
s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(60)
PYEOF
holder=$!; pids+=($holder)
for _ in $(seq 100); do [ -s "$TMP/busy.port" ] && break; sleep 0.1; done
busy=$(cat "$TMP/busy.port")
write_config "$cfg" prom2 SYNC 1 1 1 10 30
sed -i "0,/^worker {/s/^worker { \(.*\) }/worker { \1 metrics_port: $busy }/" "$cfg"
mkdir -p "$TMP/runs/prom2"
set +e
timeout 60 "$WORKER" --config="$cfg" --task=worker:0 --run_dir="$TMP/runs/prom2" > "$TMP/busy.log" 2>&1
rc=$?
set -e
cat "$TMP/busy.log"
[ "$rc" -ne 0 ] || fail "a worker with its metrics port in use exited 0"
grep -q "worker:0: metrics port 127.0.0.1:$busy: already in use" "$TMP/busy.log" ||
  fail "the error does not name the port in use"
kill "$holder" 2>/dev/null || true
echo PASS
