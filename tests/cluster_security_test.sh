#!/usr/bin/env bash
# End to end with a token and TLS: scripts/run/launch.sh runs 1 ps and 2
# workers (sync, 20 steps) from a config whose security block names a token
# file and a certificate made here (tests/make_test_certs.sh); every process
# exits 0. Then a chief with another token is refused (UNAUTHENTICATED, exit
# 1) by a server of that cluster, which stays at step 0 with nothing
# initialised and exits 0 on SIGTERM.
source "$(dirname "$0")/cluster_test_lib.sh"

certs=$TMP/certs
bash "$RUNFILES/tests/make_test_certs.sh" "$certs" || fail "make_test_certs.sh"
printf 'e2e-cluster-token\n' > "$TMP/token"
chmod 600 "$TMP/token"  # a token file others may read is refused

# secure_config FILE NAME TOKEN_LINE
secure_config() {
  write_config "$1" "$2" SYNC 1 2 2 20 30
  cat >> "$1" <<CFG
security {
  $3
  tls {
    cert_file: "$certs/server.pem"
    key_file: "$certs/server.key"
    ca_file: "$certs/ca.pem"
  }
}
CFG
}

echo "=== a cluster with the token, over TLS"
cfg=$TMP/secure.pbtxt
run=$TMP/runs/secure
secure_config "$cfg" e2e-secure "token_file: \"$TMP/token\""
timeout 600 "$LAUNCH" --bin_dir="$RUNFILES" --run_dir="$run" "$cfg" \
  || fail "launch.sh exited $?"
step=$(json_field "$run/summary.json" final_global_step)
[ "$step" -ge 20 ] || fail "final step $step < 20"
grep -q "e2e-cluster-token" "$run/config.pbtxt" && fail "the token was copied into the run"
grep -q "e2e-cluster-token" "$run/cluster.pbtxt" && fail "the token was copied into the run's cluster.pbtxt"
echo "secure cluster: final step $step"

echo "=== a chief with another token"
cfg=$TMP/intruder.pbtxt
run=$TMP/runs/intruder
secure_config "$cfg" e2e-intruder "token_file: \"$TMP/token\""
sed 's|token_file: .*|token: "not-the-token"|' "$cfg" > "$TMP/wrong.pbtxt"
mkdir -p "$run"
start_task "$cfg" ps:0 "$run" "$TMP/ps.log"
ps_pid=$!
rc=0
timeout 120 "$WORKER" --config="$TMP/wrong.pbtxt" --task=worker:0 --run_dir="$run" \
  > "$TMP/intruder.log" 2>&1 || rc=$?
cat "$TMP/intruder.log"
[ "$rc" -eq 1 ] || fail "the intruder exited $rc, not 1"
grep -q "UNAUTHENTICATED" "$TMP/intruder.log" || fail "no UNAUTHENTICATED in its log"
grep -q "missing or wrong cluster token" "$TMP/intruder.log" || fail "no reason in its log"
kill -0 "$ps_pid" || fail "the server died"
kill -TERM "$ps_pid"
wait "$ps_pid" || fail "ps_server exited $?"
cat "$TMP/ps.log"
summary=$run/ps-0.summary.json
[ -s "$summary" ] || fail "$summary missing"
[ "$(json_field "$summary" step)" -eq 0 ] || fail "the server moved"
grep -q '"refused": *0' "$summary" || fail "the server counted a push"
grep -q "1 call(s) without the cluster's token" "$TMP/ps.log" \
  || fail "the server did not count the refused call"
echo "PASS"
