#!/usr/bin/env bash
# Files another user chose, against a real ps_server (docs/RELIABILITY.md,
# "Security"; issue 60, items 3 and 4). Where this test runs as root (as CI
# does) the other user is uid 65534 (nobody) through setpriv and the server
# is root's. Each must be refused with a status naming the file and what is
# wrong, the server not started (no "listening on"), and no file outside
# its directories changed or made:
#   1. PSGD_TOKEN_FILE naming a token planted (0644) in a directory others
#      may write (1777);
#   2. --token_file naming a 0600 token in a directory of the other user's;
#   3. PSGD_TOKEN_FILE naming a link to the other user's own token;
#   4. PSGD_TOKEN_FILE=/dev/zero (read without end before: std::bad_alloc,
#      exit 134) and a FIFO (must not wait for a writer);
#   5. a config's security.token_file planted as in 1;
#   6. --port_file in the other user's directory, with links planted at its
#      name and at NAME.tmp (the old fixed temporary name) to a root-only
#      file;
#   7. the ledger's name in the checkpoint directory a link into a
#      root-only directory (and that directory the other user's).
source "$(dirname "$0")/cluster_test_lib.sh"

pids=()
box=""
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [ -n "$box" ] && rm -rf "$box"
}
trap cleanup EXIT
# Where the other user plants: a directory it can reach.
export XDG_CONFIG_HOME=$TMP/config
other_user_init planted

# The victims: a file only the server's user may read, and a directory
# where nothing may appear.
victim=$TMP/victim
printf 'root-only secret\n' > "$victim"
chmod 600 "$victim"
victim_sum=$(sha256sum "$victim")
rootonly=$TMP/root-only
mkdir -m 700 "$rootonly"

cfg=$TMP/planted.pbtxt
write_config "$cfg" planted ASYNC 1 1 1 100 30

# refused NAME EXPECTED_TEXT [ENV=VALUE...] -- FLAGS...: ps_server with
# FLAGS must exit non-zero within 20 s, never listen, and say EXPECTED_TEXT.
refused() {
  local name=$1 expected=$2 envs=() rc=0
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 20 "$PS_SERVER" "$@" > "$TMP/$name.log" 2>&1 || rc=$?
  cat "$TMP/$name.log"
  [ "$rc" -ne 0 ] || fail "$name: the server exited 0"
  [ "$rc" -ne 124 ] || fail "$name: the server hung (timeout)"
  [ "$rc" -ne 134 ] || fail "$name: the server aborted (exit 134)"
  grep -q "listening on" "$TMP/$name.log" && fail "$name: the server started"
  grep -qF -- "$expected" "$TMP/$name.log" || fail "$name: no '$expected' in its error"
  echo "$name: refused (exit $rc)"
}

# A directory others may write, as /tmp is, with a token of theirs in it.
shared=$box/shared
mkdir -p "$shared"
chmod 1777 "$shared"
as_other sh -c "umask 022; printf 'their-token\n' > '$shared/planted.token'"

echo "=== 1. PSGD_TOKEN_FILE planted in a directory others may write"
refused env_planted "token file '$shared/planted.token' refused: directory '$shared' has mode 1777" \
  PSGD_TOKEN_FILE="$shared/planted.token" -- --config="$cfg" --task=ps:0

echo "=== 2. --token_file in a directory of the other user's"
theirs=$box/theirs
mkdir -p "$theirs"
printf 'a-token\n' > "$theirs/t.token"
chmod 600 "$theirs/t.token"
give_other "$theirs"
chown root:root "$theirs/t.token" 2>/dev/null || true
if have_other; then
  refused flag_their_dir "token file '$theirs/t.token' refused: directory '$theirs' belongs to uid 65534" \
    -- --token_file="$theirs/t.token" --listen_address=127.0.0.1:0
else
  chmod 777 "$theirs"
  refused flag_their_dir "token file '$theirs/t.token' refused: directory '$theirs' has mode 0777" \
    -- --token_file="$theirs/t.token" --listen_address=127.0.0.1:0
fi

echo "=== 3. PSGD_TOKEN_FILE a link to the other user's own token"
mine=$TMP/mine
mkdir -m 700 "$mine"
mkdir -m 700 "$box/own"
printf 'their-own-token\n' > "$box/own/own.token"
chmod 600 "$box/own/own.token"
give_other "$box/own"
ln -s "$box/own/own.token" "$mine/linked.token"
refused env_link "token file '$mine/linked.token' is a symbolic link" \
  PSGD_TOKEN_FILE="$mine/linked.token" -- --config="$cfg" --task=ps:0

echo "=== 4. PSGD_TOKEN_FILE=/dev/zero, a link to it, and a FIFO"
refused env_dev_zero "token file '/dev/zero' is not a regular file of at most 4 KiB" \
  PSGD_TOKEN_FILE=/dev/zero -- --config="$cfg" --task=ps:0
ln -s /dev/zero "$mine/zero.token"
refused env_zero_link "token file '$mine/zero.token' is a symbolic link" \
  PSGD_TOKEN_FILE="$mine/zero.token" -- --config="$cfg" --task=ps:0
mkfifo -m 600 "$mine/fifo.token"
refused env_fifo "token file '$mine/fifo.token' is not a regular file of at most 4 KiB" \
  PSGD_TOKEN_FILE="$mine/fifo.token" -- --config="$cfg" --task=ps:0

echo "=== 5. a config's token_file planted in a directory others may write"
cat "$cfg" > "$TMP/named.pbtxt"
printf 'security { token_file: "%s" }\n' "$shared/planted.token" >> "$TMP/named.pbtxt"
refused config_planted "token file '$shared/planted.token' refused: directory '$shared' has mode 1777" \
  -- --config="$TMP/named.pbtxt" --task=ps:0

echo "=== 6. --port_file in the other user's directory, links planted"
ports=$box/ports
mkdir -p "$ports"
ln -s "$victim" "$ports/ps.port"
ln -s "$victim" "$ports/ps.port.tmp"
give_other "$ports"
if have_other; then
  refused port_file "port file '$ports/ps.port' not written: directory '$ports' belongs to uid 65534" \
    -- --config="$cfg" --task=ps:0 --port_file="$ports/ps.port"
else
  chmod 777 "$ports"
  refused port_file "port file '$ports/ps.port' not written: directory '$ports' has mode 0777" \
    -- --config="$cfg" --task=ps:0 --port_file="$ports/ps.port"
fi
[ "$(sha256sum "$victim")" = "$victim_sum" ] || fail "the port file was written into the victim"
[ -L "$ports/ps.port" ] && [ -L "$ports/ps.port.tmp" ] || fail "a planted link was replaced"
# In a directory of the server user's own the port file is written (a
# link at its name replaced, never followed).
mkdir -m 755 "$TMP/ports"
ln -s "$victim" "$TMP/ports/ps.port"
"$PS_SERVER" --config="$cfg" --task=ps:0 --port_file="$TMP/ports/ps.port" > "$TMP/port_ok.log" 2>&1 &
pid=$!; pids+=($pid)
for _ in $(seq 100); do grep -q "listening on" "$TMP/port_ok.log" && break; sleep 0.1; done
grep -q "listening on" "$TMP/port_ok.log" || { cat "$TMP/port_ok.log"; fail "the server did not start"; }
[ ! -L "$TMP/ports/ps.port" ] && grep -qE '^[0-9]+$' "$TMP/ports/ps.port" || fail "no port file"
kill -TERM "$pid"; wait "$pid" || fail "ps_server exited $?"
[ "$(sha256sum "$victim")" = "$victim_sum" ] || fail "the port file was written into the victim"

echo "=== 7. the ledger's name a link into a root-only directory"
lcfg=$TMP/ledger.pbtxt
write_cluster_config "$lcfg" ledgered mode=ASYNC ps=1 workers=1 batch=16 steps=100 \
  data="source: SYNTHETIC synthetic_train_size: 1200 synthetic_test_size: 300 sharding: SERVERS ledger: true" \
  extra="worker_lease_seconds: 30"
ckpt=$box/ckpt
mkdir -p "$ckpt"
ln -s "$rootonly/made" "$ckpt/ledger.jsonl"
give_other "$ckpt"
printf 'checkpoint { dir: "%s" every_steps: 0 keep: 3 }\n' "$ckpt" >> "$lcfg"
if have_other; then
  refused ledger_their_dir "the ledger $ckpt/ledger.jsonl: directory '$ckpt' belongs to uid 65534" \
    -- --config="$lcfg" --task=ps:0
fi
# In a directory of the server user's own, the link itself is refused.
mine_ckpt=$TMP/ckpt
mkdir -m 755 "$mine_ckpt"
ln -s "$rootonly/made" "$mine_ckpt/ledger.jsonl"
sed -i "s|$ckpt|$mine_ckpt|" "$lcfg"
refused ledger_link "cannot open the ledger $mine_ckpt/ledger.jsonl" -- --config="$lcfg" --task=ps:0
grep -q "symbolic link" "$TMP/ledger_link.log" || fail "ledger_link: no 'symbolic link' in its error"
[ ! -e "$rootonly/made" ] || fail "a file was made in the root-only directory"
[ -z "$(ls -A "$rootonly")" ] || fail "the root-only directory changed: $(ls -A "$rootonly")"
[ "$(sha256sum "$victim")" = "$victim_sum" ] || fail "the victim changed"
echo PASS
