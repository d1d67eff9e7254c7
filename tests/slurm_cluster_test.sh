#!/usr/bin/env bash
# A Slurm cluster on this machine started by the test (Debian's slurmctld and
# slurmd as root: auth/none, cred/none, proctrack/pgid, task/none, its own
# ports, state and spool directories under the test's TMP), and
# scripts/deploy/psgd.sbatch submitted with sbatch: srun --multi-prog runs 2
# ps and 2 workers of one config, each taking its role and the others'
# addresses from SLURM_* (--cluster_from=slurm), to the last step. The
# daemons are stopped and their directories removed on any exit.
source "$(dirname "$0")/cluster_test_lib.sh"
SBATCH_SCRIPT=$RUNFILES/scripts/deploy/psgd.sbatch
PATH=$PATH:/usr/sbin:/sbin

# Not run here: a line that starts with "SKIP: " and exit 0, which Bazel
# counts as passed and scripts/test.sh as skipped (it reads the test's log).
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: slurmd must run as root here (CI runs as root)"; exit 0
fi
for b in slurmctld slurmd sbatch srun sinfo; do
  command -v "$b" >/dev/null || fail "$b is missing: scripts/setup.sh installs slurmctld, slurmd and slurm-client"
done

# Short: slurmd's Unix sockets in the spool directory allow 108 characters.
S=$(mktemp -d /tmp/psgd-slurm.XXXXXX)
mkdir -p "$S/state" "$S/spool"
cleanup() {
  for f in "$S/slurmd.pid" "$S/slurmctld.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  for f in "$S/slurmd.pid" "$S/slurmctld.pid"; do
    for _ in $(seq 50); do [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null || break; sleep 0.1; done
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  [ -n "${KEEP_SLURM:-}" ] || rm -rf "$S"
}
trap cleanup EXIT

node=$(hostname -s)
ports=($(free_ports 3))
# psgd.sbatch gives task k of a node the port base+k (4 tasks at most here,
# and a fifth for the elastic job's joining worker): a free run of 5, below
# the ephemeral range, so that no connection's local end takes one of them
# between this choice and the tasks' binds.
base=$(free_port_run 5)
cat > "$S/slurm.conf" <<EOC
ClusterName=psgdtest$$
SlurmctldHost=$node
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SrunPortRange=${ports[2]}-$((ports[2]))
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SlurmdParameters=config_overrides
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$node CPUs=8 State=UNKNOWN
PartitionName=psgd Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOC
sed -i '/^SrunPortRange/d' "$S/slurm.conf"
export SLURM_CONF=$S/slurm.conf
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start: $(tail -5 "$S/slurmctld.log")"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start: $(tail -5 "$S/slurmd.log")"
for _ in $(seq 100); do
  sinfo -h -o '%T' 2>/dev/null | grep -q idle && break
  sleep 0.2
done
sinfo -h -o '%T' | grep -q idle || fail "the node is not idle: $(sinfo 2>&1; tail -5 "$S/slurmctld.log")"
echo "slurm: $(sinfo -h -o '%P %D %T %N')"

cfg=$TMP/slurm-sync.pbtxt run=$TMP/runs/slurm-sync
write_config "$cfg" slurm-sync SYNC 2 2 2 100 10
echo 'model { name: "cifar10_linear" }' >> "$cfg"
# The config's own addresses are placeholders: Slurm's node list decides.
timeout 300 sbatch --wait --no-requeue -n 4 -o "$TMP/job.out" "$SBATCH_SCRIPT" "$cfg" \
  --bin_dir="$RUNFILES" --run_dir="$run" --port_base="$base" ||
  { cat "$TMP/job.out"; fail "the job failed"; }
grep -m3 "psgd.sbatch\|this task\|listening" "$TMP/job.out" || true
grep -q "listening on 0.0.0.0:$base (dialled as $node:$base)" "$TMP/job.out" || fail "ps:0 did not listen on the base port $base"
step=$(json_field "$run/summary.json" final_global_step)
echo "slurm-sync: final step $step"
[ "$step" -ge 100 ] || fail "final step $step < 100"
# A Python worker program (WorkerTask.program) beside the C++ worker: the
# tutorial network of examples/torch_cifar10.py as worker:1.
pcfg=$TMP/slurm-python.pbtxt prun=$TMP/runs/slurm-python
# A lease longer than importing torch takes on a loaded machine: the chief
# waits for every worker to join at step 0 and would lose its lease.
write_config "$pcfg" slurm-python SYNC 1 2 2 5 60
echo 'model { name: "cifar10_tutorial" }' >> "$pcfg"
sed -i '0,/^worker {/!{0,/^worker {/s|^worker { \(.*\) }$|worker { \1 program: "examples/torch_cifar10.py --model=tutorial --threads=1 --log_every=1" }|}' "$pcfg"
grep -q 'program: "examples/torch_cifar10.py' "$pcfg" || fail "no program in $pcfg"
timeout 300 sbatch --wait --no-requeue -n 3 -o "$TMP/python.out" "$SBATCH_SCRIPT" "$pcfg" \
  --bin_dir="$RUNFILES" --run_dir="$prun" --port_base="$base" ||
  { cat "$TMP/python.out"; fail "the job with a Python worker failed"; }
grep -q "% done" "$TMP/python.out" || { cat "$TMP/python.out"; fail "no progress line of the Python worker"; }
step=$(json_field "$prun/summary.json" final_global_step)
echo "slurm-python: final step $step"
[ "$step" -ge 5 ] || fail "final step $step < 5"
# Scale-up: a job of 1 ps and 2 workers with max_workers 3, then worker:2
# joins it as a second srun step in the job's allocation, with the cluster
# the chief resolved (RUN_DIR/cluster.pbtxt), contributes gradients, and
# leaves on SIGTERM (scancel --signal=TERM of its step) while the job goes
# on: docs/MULTIHOST.md shows the same commands.
ecfg=$TMP/slurm-elastic.pbtxt erun=$TMP/runs/slurm-elastic
write_cluster_config "$ecfg" slurm-elastic mode=SYNC ps=1 workers=2 n=2 batch=16 \
  steps=100000 model=cifar10_linear \
  training="replicas_rule: LIVE_MINUS_BACKUPS eval_every: 0" \
  data="source: SYNTHETIC synthetic_train_size: 1200 synthetic_test_size: 300 sharding: SERVERS" \
  extra="max_workers: 3" extra="worker_lease_seconds: 60" \
  extra="stragglers { extra_delay { kind: CONSTANT shift_seconds: 0.02 } }"
sbatch --wait --no-requeue -n 3 -o "$TMP/elastic.out" "$SBATCH_SCRIPT" "$ecfg" \
  --bin_dir="$RUNFILES" --run_dir="$erun" --port_base="$base" > "$TMP/elastic.sbatch" 2>&1 &
sbatch_pid=$!
for _ in $(seq 600); do
  grep -q "Submitted batch job" "$TMP/elastic.sbatch" 2>/dev/null && break
  sleep 0.1
done
job=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$TMP/elastic.sbatch")
[ -n "$job" ] || { cat "$TMP/elastic.sbatch"; fail "the elastic job was not submitted"; }
await_steps "$erun/worker-0.jsonl" 5 120 "$sbatch_pid"
[ -f "$erun/cluster.pbtxt" ] || fail "the chief wrote no $erun/cluster.pbtxt"
grep -q "address: \"$node:$base\"" "$erun/cluster.pbtxt" ||
  { cat "$erun/cluster.pbtxt"; fail "cluster.pbtxt does not hold ps:0's Slurm address $node:$base"; }
srun --jobid="$job" --overlap -n 1 "$WORKER" --config="$erun/cluster.pbtxt" \
  --task=worker:2 --run_dir="$erun" > "$TMP/joiner.out" 2>&1 &
joiner=$!
await_steps "$erun/worker-2.jsonl" 3 120 "$joiner"
grep -q '"outcome":"\(applied\|aggregated\)"' "$erun/worker-2.jsonl" ||
  fail "worker:2 joined the Slurm job but contributed no gradient"
step=$(squeue -h -s -j "$job" -o '%i' | grep -v "batch\|extern" | sort -t. -k2 -n | tail -n 1)
[ -n "$step" ] && [ "$step" != "$job.0" ] || { squeue -s -j "$job"; fail "no second step in job $job"; }
scancel --signal=TERM "$step"
wait_exit "$joiner" 60 || { cat "$TMP/joiner.out"; fail "the joiner's step exited $?"; }
grep -q "asked to leave (SIGTERM)" "$TMP/joiner.out" ||
  { cat "$TMP/joiner.out"; fail "worker:2 does not say it left on SIGTERM"; }
before=$(last_step "$erun/worker-0.jsonl")
await_global_step "$erun/worker-0.jsonl" $((before + 5)) 120 "$sbatch_pid"
echo "slurm-elastic: worker:2 joined job $job as step $step, contributed, left on SIGTERM; the job went on past step $((before + 5))"
scancel "$job"
wait "$sbatch_pid" 2>/dev/null || true
# The server's side of the leave: ps:0 (task 0 of the job's output) took
# worker:2's Leave, and did not have to wait for its 60 s lease.
grep -q "^0: .*worker 2 left the live set (its Leave)" "$TMP/elastic.out" ||
  { grep "worker 2" "$TMP/elastic.out" || true; fail "ps:0 logs no Leave of worker:2 (asked to leave, it exited without one)"; }
if grep -q "worker 2 sent nothing" "$TMP/elastic.out"; then
  fail "ps:0 expired worker:2's lease although it left"
fi
# Bad input: a job with the wrong task count is refused by name, at once.
if timeout 120 sbatch --wait --no-requeue -n 3 -o "$TMP/bad.out" "$SBATCH_SCRIPT" "$cfg" --bin_dir="$RUNFILES" --run_dir="$TMP/runs/bad"; then
  fail "a 3-task job of a 4-task config succeeded"
fi
grep -q "SLURM_NTASKS=3, but .* has 4 tasks" "$TMP/bad.out" || { cat "$TMP/bad.out"; fail "the wrong task count was not named"; }
# And srun with the wrong count straight to a binary names the variable.
if timeout 60 srun -n 3 "$WORKER" --config="$cfg" --cluster_from=slurm > "$TMP/srun.out" 2>&1; then
  fail "srun -n 3 of a 4-task config succeeded"
fi
grep -q "SLURM_STEP_NUM_TASKS='3': config 'slurm-sync' has 2 ps and 2 worker tasks (4)" "$TMP/srun.out" || { cat "$TMP/srun.out"; fail "srun -n 3 not named"; }
echo "PASS"
