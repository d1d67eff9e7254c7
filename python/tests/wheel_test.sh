#!/bin/bash
# The psgd wheel as a user installs it (docs/PYTHON.md, "Installing"):
# python/wheel/wheel.py packs the built package; a virtual environment made
# from Debian's /usr/bin/python3 with its system packages (numpy, torch)
# pip-installs it offline; `python -m psgd` there says the extension loads
# and names torch; psgd.torch imports; /usr/bin/python3 loads it from a
# pip --target directory, and from its user site after its own pip
# installs it there (and uninstalls it). An interpreter the extension is not
# built for is refused with a message naming the one it needs, and one
# without torch gets a message saying where torch is. The wheel carries the
# cluster's programs (psgd-ps, psgd-ckpt, psgd-cluster-tasks, installed into
# the venv's bin/): with nothing but the venv on PATH (no Bazel), they
# and two psgd.torch workers run a 2 ps x 2 worker sync cluster to its last
# step. The psgd command from the wheel: psgd launch of a 2 ps x 3 worker
# config whose workers run the user's own program, sync and async, psgd
# compare of the two runs, psgd ledger-check of the sync one, psgd status
# of the servers started alone and stopped by Ctrl-C, and a program that
# does not exist refused with nothing started.
set -euo pipefail
RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
tmp=${TEST_TMPDIR:?}
unset PYTHONPATH
fail() { echo "FAIL: $*" >&2; exit 1; }

wheel=$(/usr/bin/python3 "$RUNFILES/python/wheel/wheel.py" \
  "$RUNFILES/python/site/psgd" "$tmp/dist" ps_server="$RUNFILES/ps/ps_server" \
  ckpt_tool="$RUNFILES/ps/checkpoint/ckpt_tool" \
  cluster_tasks="$RUNFILES/configs/cluster_tasks")
case "$(basename "$wheel")" in
  psgd-*-cp311-cp311-linux_*.whl) ;;
  *) fail "wheel name $(basename "$wheel"): not tagged for CPython 3.11" ;;
esac

/usr/bin/python3 -m venv --system-site-packages "$tmp/v"
"$tmp/v/bin/pip" install --no-index --quiet "$wheel" ||
  fail "pip install $wheel into a venv with the system's packages"
cd "$tmp"
out=$("$tmp/v/bin/python" -m psgd)
echo "$out"
grep -q '^psgd 0\.' <<<"$out" || fail "no version line"
grep -q "^psgd .*($tmp/v/lib/python3.11/site-packages/psgd)" <<<"$out" ||
  fail "psgd is not the installed one"
grep -q "^interpreter: cpython 3.11.* ($tmp/v/bin/python)" <<<"$out" ||
  fail "no interpreter line"
grep -q '^extension: loads' <<<"$out" || fail "the extension does not load"
grep -q '^torch: [0-9]' <<<"$out" || fail "no torch line"
"$tmp/v/bin/python" -c "import psgd.torch, psgd.models" ||
  fail "psgd.torch does not import from the venv"
files=$("$tmp/v/bin/pip" show -f psgd)
grep -q "psgd/_psgd.so" <<<"$files" || fail "pip does not list the extension"
for c in psgd-ps psgd-ckpt psgd-cluster-tasks; do
  [ -x "$tmp/v/bin/$c" ] || fail "the wheel installed no $c command"
done

# A whole cluster from the wheel and a config, without Bazel.
only=$tmp/v/bin
! PATH=$only command -v bazel > /dev/null || fail "bazel is on the test's PATH"
read -r p0 p1 <<<$(/usr/bin/python3 "$RUNFILES/scripts/lib/free_ports.py" ports 2 | tr '\n' ' ')
mkdir -p "$tmp/wheel-cluster"
cat > "$tmp/wheel-cluster/c.pbtxt" <<CFG
name: "wheel-cluster"
ps { address: "127.0.0.1:$p0" }
ps { address: "127.0.0.1:$p1" }
worker { address: "127.0.0.1:1" }
worker { address: "127.0.0.1:2" }
training { mode: SYNC replicas_to_aggregate: 2 total_num_replicas: 2 batch_size: 16 steps: 20 }
model { name: "external" }
data { source: SYNTHETIC }
run_root: "$tmp/wheel-cluster/runs"
CFG
cat > "$tmp/wheel-cluster/worker.py" <<'PY'
import sys
import torch
import psgd.torch
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
g = torch.Generator().manual_seed(int(sys.argv[2][-1]))
data = [(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g)) for _ in range(8)]
summary = psgd.torch.train(net, torch.nn.functional.cross_entropy, data, sys.argv[1], sys.argv[2],
                           run_dir=sys.argv[3], log_every=0)
print("final", summary["final_global_step"])
PY
cd "$tmp/wheel-cluster"
tasks=$(PATH=$only psgd-cluster-tasks --config=c.pbtxt) || fail "psgd-cluster-tasks"
[ "$(echo $tasks)" = "ps:0 ps:1 worker:0 worker:1" ] || fail "psgd-cluster-tasks said: $tasks"
pids=()
for i in 0 1; do
  PATH=$only psgd-ps --config=c.pbtxt --task=ps:$i --run_dir="$tmp/wheel-cluster/run" \
    > "ps$i.log" 2>&1 & pids+=($!)
done
for j in 0 1; do
  PATH=$only python worker.py c.pbtxt worker:$j "$tmp/wheel-cluster/run" \
    > "w$j.log" 2>&1 & pids+=($!)
done
for p in "${pids[@]}"; do
  timeout 300 tail --pid="$p" -f /dev/null || fail "a task of the wheel's cluster hung"
  wait "$p" || { cat ps0.log ps1.log w0.log w1.log; fail "a task of the wheel's cluster exited $?"; }
done
grep -q "final 20" w0.log || { cat w0.log; fail "the chief did not reach step 20"; }
/usr/bin/python3 -c "
import json, sys
s = json.load(open('$tmp/wheel-cluster/run/summary.json'))
sys.exit(0 if s['final_global_step'] == 20 else 1)" || fail "summary.json: not step 20"
echo "wheel-only cluster: 2 ps (psgd-ps) x 2 psgd.torch workers reached step 20"
cd "$tmp"

# The psgd command as a PyTorch user has it from the wheel alone (nothing
# but the venv on PATH): psgd launch of a 2 ps x 3 worker sync config whose
# workers run a program of the user's own (the servers hand out the data
# and keep a ledger), the same config async, psgd compare of the two runs
# and psgd ledger-check of the sync one.
[ -x "$only/psgd" ] || fail "the wheel installed no psgd command"
PATH=$only psgd info | grep -q '^extension: loads' || fail "psgd info: the extension does not load"
mkdir -p "$tmp/user" && cd "$tmp/user"
cat > worker.py <<'PY'
import argparse
import torch
import psgd.torch
p = argparse.ArgumentParser()
for flag in ("--config", "--task", "--run_dir"):
    p.add_argument(flag, required=True)
a = p.parse_args()
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
x = torch.randn(48, 4, generator=torch.Generator().manual_seed(5))
data = torch.utils.data.TensorDataset(x, x[:, :3].argmax(1))
w = psgd.torch.Worker(net, a.config, a.task, run_dir=a.run_dir, log_every=0)
for xb, yb in w.batches(torch.utils.data.DataLoader(data, batch_sampler=w.batch_sampler())):
    loss = torch.nn.functional.cross_entropy(net(xb), yb)
    loss.backward()
    w.step(loss=loss)
print("final", w.summary["final_global_step"], w.summary["end_reason"])
PY
for mode in SYNC ASYNC; do
  read -r p0 p1 <<<$(/usr/bin/python3 "$RUNFILES/scripts/lib/free_ports.py" ports 2 | tr '\n' ' ')
  cat > "$mode.pbtxt" <<CFG
name: "user-$mode"
ps { address: "127.0.0.1:$p0" }
ps { address: "127.0.0.1:$p1" }
worker { address: "127.0.0.1:1" program: "worker.py" }
worker { address: "127.0.0.1:2" program: "worker.py" }
worker { address: "127.0.0.1:3" program: "worker.py" }
training { mode: $mode batch_size: 8 epochs: 2 }
model { name: "external" }
data { source: SYNTHETIC sharding: SERVERS num_samples: 48 ledger: true record_samples: true }
checkpoint { dir: "ckpt-$mode" every_steps: 100 }
run_root: "runs"
CFG
  PATH=$only /usr/bin/timeout 300 psgd launch "$mode.pbtxt" --run_dir="run-$mode" > "launch-$mode.log" 2>&1 ||
    { cat "launch-$mode.log"; fail "psgd launch $mode.pbtxt exited $?"; }
  grep -q "every task exited 0; run directory $tmp/user/run-$mode" "launch-$mode.log" ||
    { cat "launch-$mode.log"; fail "psgd launch $mode: no success line"; }
  grep -q "^worker:2 | final .* the data ended (epochs done)" "launch-$mode.log" ||
    { cat "launch-$mode.log"; fail "psgd launch $mode: worker:2's program did not end with the data"; }
  [ -s "run-$mode/token" ] || fail "psgd launch $mode made no token in the run directory"
done
PATH=$only psgd compare run-SYNC run-ASYNC --out report > compare.log 2>&1 ||
  { cat compare.log; fail "psgd compare exited $?"; }
# Sync with N = M = 3 needs every worker's gradient each step; async applies
# on arrival, so a worker whose interpreter started after the others had taken
# all 12 chunks trains nothing and is not in the report's worker count.
# Steps: 48 samples / batch 8 x 2 epochs = 12 batches; sync takes 3 a step.
grep -q "| run-SYNC | sync | 3 | 4 |" report/report.md &&
  grep -Eq "\| run-ASYNC \| async \| [123] \| 12 \|" report/report.md ||
  { cat report/report.md; fail "psgd compare: the report lacks a run"; }
[ -s report/loss.png ] && [ -s report/dropped.png ] || fail "psgd compare wrote no plots"
PATH=$only psgd ledger-check run-SYNC > ledger.log 2>&1 || { cat ledger.log; fail "psgd ledger-check exited $?"; }
cat ledger.log
grep -q "48 samples, chunks of 8, seed 1, epochs 0..1 whole" ledger.log || fail "psgd ledger-check: not the run's bounds"
grep -q "epoch 1: 48 samples, 0 missing, 0 repeated" ledger.log || fail "psgd ledger-check: epoch 1 not whole"
grep -q "epoch 1: 0 trained-but-not-counted, 0 counted-but-not-trained" ledger.log ||
  fail "psgd ledger-check: the records were not joined"
# psgd plan from the install (the planner's modules and default profile in
# the package): a small cluster planned, its first choice written as a
# config that the installed psgd-cluster-tasks reads; a model the registry
# does not know refused, naming it, with nothing written.
PATH=$only psgd plan --model resnet20 --workers 4 --gbit 10 --step_ms 20 \
  --steps 30 --top 3 --out planned.pbtxt > plan.log 2>&1 ||
  { cat plan.log; fail "psgd plan exited $?"; }
[ -s planned.pbtxt ] || { cat plan.log; fail "psgd plan wrote no config"; }
PATH=$only psgd-cluster-tasks --config=planned.pbtxt > planned.tasks 2>&1 ||
  { cat planned.tasks; fail "the planned config does not load"; }
grep -q "worker:3" planned.tasks || { cat planned.tasks; fail "the planned config has not 4 workers"; }
if PATH=$only psgd plan --model resnet21 --workers 4 --gbit 10 --step_ms 20 \
  --out unknown.pbtxt > plan-bad.log 2>&1; then fail "psgd plan took an unknown model"; fi
grep -q "resnet21" plan-bad.log || { cat plan-bad.log; fail "psgd plan did not name the model"; }
[ ! -e unknown.pbtxt ] || fail "psgd plan wrote a config for an unknown model"
# Its time to accuracy reads runs with the installed package's reader: the
# sync run above (a model of its own, not resnet20) is refused by name.
if PATH=$only psgd plan --model resnet20 --workers 4 --gbit 10 --step_ms 20 --steps 30 \
  --curves run-SYNC --out curves.pbtxt > plan-curves.log 2>&1; then
  fail "psgd plan took the curves of another model"
fi
grep -q "^psgd plan: --curves: .*run-SYNC" plan-curves.log || { cat plan-curves.log; fail "psgd plan --curves did not name the run"; }
[ ! -e curves.pbtxt ] || fail "psgd plan wrote a config from refused curves"
# psgd status: the servers alone (--tasks), asked with the run's token;
# Ctrl-C of psgd launch stops them (exit 130), and then none answers. (No
# checkpoint directory: the sync run's would be restored.)
grep -v '^checkpoint' SYNC.pbtxt | sed 's/ ledger: true//' > status.pbtxt
PATH=$only psgd launch status.pbtxt --tasks=ps:0,ps:1 --run_dir=run-status > status-launch.log 2>&1 &
lp=$!
for _ in $(seq 150); do
  PATH=$only psgd status status.pbtxt --run_dir=run-status > status.log 2>&1 && break
  sleep 0.2
done
cat status.log
grep -q "^ps:1 .* waiting for the chief to initialise, step 0, generation .*, live workers 0" status.log ||
  { cat status-launch.log; fail "psgd status: ps:1 is not waiting for the chief"; }
kill -INT "$lp"
rc=0; wait "$lp" || rc=$?
[ "$rc" = 130 ] || { cat status-launch.log; fail "psgd launch exited $rc after Ctrl-C, not 130"; }
if PATH=$only psgd status status.pbtxt --run_dir=run-status --timeout=1 > status.log 2>&1; then
  cat status.log; fail "a server answers after psgd launch was stopped"
fi
grep -q "^ps:0 .* not answering" status.log || { cat status.log; fail "psgd status: ps:0 still answers"; }
# psgd-ps names itself as it was run (not ps_server), and psgd ps is it.
for cmd in psgd-ps "psgd ps"; do
  if err=$(PATH=$only $cmd --config=nope.pbtxt --task=ps:0 2>&1); then fail "$cmd of a missing config succeeded"; fi
  grep -q "^psgd-ps: .*nope.pbtxt" <<<"$err" || fail "$cmd's error does not say psgd-ps and the config: $err"
done
# Bad input starts nothing: a program that does not exist.
sed 's|program: "worker.py"|program: "wrker.py"|' SYNC.pbtxt > typo.pbtxt
if PATH=$only psgd launch typo.pbtxt --run_dir=run-typo > typo.log 2>&1; then fail "psgd launch of a missing program succeeded"; fi
grep -q "worker:0's program 'wrker.py' does not exist" typo.log || { cat typo.log; fail "no clear refusal of the missing program"; }
[ ! -e run-typo ] || fail "psgd launch of a missing program made a run directory"
echo "psgd launch (2 ps x 3 user workers, sync and async), compare, ledger-check: from the wheel alone"
cd "$tmp"

# The system Python itself: the wheel installed by pip into a directory of
# its own (--target, which leaves /usr alone) and put on /usr/bin/python3's
# path.
"$tmp/v/bin/pip" install --no-index --no-deps --quiet --target "$tmp/system" "$wheel" ||
  fail "pip install --target"
sys_out=$(cd "$tmp" && PYTHONPATH=$tmp/system /usr/bin/python3 -m psgd)
grep -q "^psgd .*($tmp/system/psgd)" <<<"$sys_out" || fail "the system Python did not load the wheel's psgd: $sys_out"
grep -q "^interpreter: cpython 3.11.* (/usr/bin/python3)" <<<"$sys_out" || fail "not /usr/bin/python3: $sys_out"
grep -q '^extension: loads' <<<"$sys_out" || fail "the extension does not load under /usr/bin/python3"

# The system Python's own pip (Debian's python3-pip) into its user site,
# which /usr/bin/python3 reads with no PYTHONPATH: Debian marks the system
# Python externally managed (PEP 668), hence --break-system-packages; the
# user base is the test's, so nothing outside it changes.
/usr/bin/python3 -m pip --version > /dev/null 2>&1 ||
  fail "/usr/bin/python3 has no pip: scripts/setup.sh installs python3-pip"
export PYTHONUSERBASE=$tmp/userbase
/usr/bin/python3 -m pip install --user --break-system-packages --no-index --no-deps \
  --quiet --no-warn-script-location "$wheel" || fail "pip install --user into the system Python"
user_out=$(cd "$tmp" && /usr/bin/python3 -m psgd)
echo "$user_out" | head -2
grep -q "^psgd .*($tmp/userbase/lib/python3.11/site-packages/psgd)" <<<"$user_out" ||
  fail "the system Python did not load the user-site psgd: $user_out"
grep -q '^extension: loads' <<<"$user_out" || fail "the user-site extension does not load: $user_out"
grep -q '^torch: [0-9].*psgd.torch usable' <<<"$user_out" || fail "no usable torch for the system Python: $user_out"
/usr/bin/python3 -m pip uninstall --yes --quiet --break-system-packages psgd ||
  fail "pip uninstall from the user site"
[ ! -e "$tmp/userbase/lib/python3.11/site-packages/psgd" ] || fail "pip uninstall left psgd behind"
unset PYTHONUSERBASE

# Built for another interpreter: refused, naming it.
cp -r "$tmp/v/lib/python3.11/site-packages/psgd" "$tmp/other"
mkdir -p "$tmp/elsewhere" && mv "$tmp/other" "$tmp/elsewhere/psgd"
sed -i "s/^PYTHON_VERSION = .*/PYTHON_VERSION = '3.99'/; s|^PYTHON = .*|PYTHON = '/opt/python3.99/bin/python3'|" \
  "$tmp/elsewhere/psgd/_build_info.py"
if err=$(PYTHONPATH=$tmp/elsewhere /usr/bin/python3 -c "import psgd" 2>&1); then
  fail "psgd built for 3.99 imported under 3.11"
fi
echo "$err" | tail -1
grep -q "built for cpython 3.99 (/opt/python3.99/bin/python3); this is cpython 3.11 (/usr/bin/python3)" <<<"$err" ||
  fail "the refusal does not name both interpreters: $err"

# An interpreter without torch (a venv without the system's packages):
# psgd.torch says where torch is.
/usr/bin/python3 -m venv "$tmp/bare"
if err=$(PYTHONPATH=$tmp/v/lib/python3.11/site-packages "$tmp/bare/bin/python" -S -c "
import sys
sys.path = [p for p in sys.path if 'dist-packages' not in p]
import psgd.torch" 2>&1); then
  fail "psgd.torch imported without torch"
fi
echo "$err" | tail -1
grep -q "psgd.torch needs PyTorch, which $tmp/bare/bin/python cannot import\|psgd's extension does not load under $tmp/bare/bin/python" <<<"$err" ||
  fail "no clear error without torch: $err"
echo "PASS"
