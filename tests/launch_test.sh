#!/usr/bin/env bash
# scripts/run/launch.sh stops every task when one fails: with stand-in binaries
# (--bin_dir), worker:1 exits 3 while the others run on; launch.sh must send
# the others SIGTERM, kill one that ignores it (after its 10 s grace), exit 3
# naming the failed task, and leave no task running. A run where every task
# exits 0 exits 0.
set -euo pipefail
LAUNCH=${TEST_SRCDIR:?run under bazel test}/psgd/scripts/run/launch.sh
TMP=${TEST_TMPDIR:?}

fail() { echo "FAIL: $*" >&2; exit 1; }

# make_bin DIR BEHAVIOUR: stand-ins for ps_server, worker and cluster_tasks.
# BEHAVIOUR "fail": worker:1 exits 3 after a moment, ps:1 ignores SIGTERM,
# the others run until SIGTERM. "ok": every task exits 0 at once.
make_bin() {
  local dir=$1 behaviour=$2
  mkdir -p "$dir/ps" "$dir/worker" "$dir/configs"
  cat > "$dir/configs/cluster_tasks" <<'EOS'
#!/usr/bin/env bash
case "$*" in
  *--field=name*) echo stand-in ;;
  *--field=run_root*) echo "$STUB_DIR/runs" ;;
  *--program=*) echo ;;
  *) printf '%s\n' ps:0 ps:1 worker:0 worker:1 worker:2 ;;
esac
EOS
  cat > "$dir/task" <<EOS
#!/usr/bin/env bash
task=""
for a in "\$@"; do case "\$a" in --task=*) task=\${a#--task=} ;; esac; done
echo \$\$ > "\$STUB_DIR/\$task.pid"
if [ "$behaviour" = ok ]; then exit 0; fi
case "\$task" in
  worker:1) sleep 1; exit 3 ;;
  ps:1) trap '' TERM ;;
  *) trap 'echo term > "\$STUB_DIR/\$task.term"; exit 143' TERM ;;
esac
for _ in \$(seq 600); do sleep 0.1; done
exit 0
EOS
  chmod +x "$dir/configs/cluster_tasks" "$dir/task"
  cp "$dir/task" "$dir/ps/ps_server"
  cp "$dir/task" "$dir/worker/worker"
}

export STUB_DIR=$TMP/stub-fail
mkdir -p "$STUB_DIR"
make_bin "$TMP/bin-fail" fail
echo 'name: "stand-in"' > "$TMP/cluster.pbtxt"
set +e
timeout 120 bash "$LAUNCH" --bin_dir="$TMP/bin-fail" --run_dir="$TMP/run-fail" \
  "$TMP/cluster.pbtxt" > "$TMP/launch.log" 2>&1
rc=$?
set -e
cat "$TMP/launch.log"
[ "$rc" -eq 3 ] || fail "launch.sh exited $rc, expected 3 (worker:1's)"
grep -q "worker:1 failed with exit status 3; stopping the others" "$TMP/launch.log" ||
  fail "launch.sh did not say which task failed"
grep -q "launch.sh: failed: .*worker:1 (exit 3)" "$TMP/launch.log" ||
  fail "launch.sh's last words do not name worker:1"
for t in ps:0 ps:1 worker:0 worker:1 worker:2; do
  [ -f "$STUB_DIR/$t.pid" ] || fail "$t was never started"
  pid=$(cat "$STUB_DIR/$t.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
    fail "$t (pid $pid) still runs after launch.sh returned"
  fi
done
for t in ps:0 worker:0 worker:2; do
  [ -f "$STUB_DIR/$t.term" ] || fail "$t did not get SIGTERM"
done

export STUB_DIR=$TMP/stub-ok
mkdir -p "$STUB_DIR"
make_bin "$TMP/bin-ok" ok
timeout 60 bash "$LAUNCH" --bin_dir="$TMP/bin-ok" --run_dir="$TMP/run-ok" \
  "$TMP/cluster.pbtxt" > "$TMP/launch-ok.log" 2>&1 ||
  { cat "$TMP/launch-ok.log"; fail "launch.sh failed a run where every task exited 0"; }
grep -q "every task exited 0" "$TMP/launch-ok.log" || fail "no success line"
echo PASS
