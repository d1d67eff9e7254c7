#!/usr/bin/env bash
# Elastic membership with the servers handing out the data (docs/PS.md,
# "Elastic workers" and "The servers hand out the data"), real compute on
# this machine, sync N = 2 fixed (the global batch is 2 x batch whatever
# the workers):
#   fixed:   2 workers, the reference;
#   resize:  4 listed workers, max_workers 8; the live workers go
#            4 -> 8 -> 2 -> 6 (workers beyond the list started at a quarter
#            of the steps, six asked to leave with SIGTERM at half, four
#            started again at three quarters), no other process restarted;
#   churn:   (--churn=K) 2 listed workers, and K times an elastic worker
#            joins, contributes a step and leaves (SIGTERM); then each
#            joiner's first gradient taken (applied or aggregated): its
#            local step and its time since the joiner's run started
#            (wall_time_s), and how many of the K died.
# Prints per run the final global step, the chief's final test loss and
# accuracy, the mean training loss of the last tenth of the steps (all
# workers' lines), and the ledger's check (scripts/ledger_check.py: every
# sample once per complete epoch); then loss_ratio_resize_vs_fixed (the
# final test losses) and train_ce_ratio_resize_vs_fixed (the training cross
# entropy over the last tenth of the steps, every worker's batches); with
# --repeats=R > 1 fixed and resize alternate R times and the ratios are of
# the means, each run's beside them.
#
#   scripts/experiments/elastic.sh [--steps=800] [--batch=32]
#        [--model=cifar10_tutorial] [--data_dir=DIR | --synthetic]
#        [--repeats=1] [--churn=K] [--out=DIR] [--no-build]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=800 batch=32 model=cifar10_tutorial data_dir="" synthetic=0 churn=0 repeats=1
out=runs/elastic-$(date +%Y%m%d-%H%M%S) build=1
for arg in "$@"; do
  case "$arg" in
    --steps=*) steps=${arg#*=} ;;
    --batch=*) batch=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --data_dir=*) data_dir=${arg#*=} ;;
    --synthetic) synthetic=1 ;;
    --churn=*) churn=${arg#*=} ;;
    --repeats=*) repeats=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "elastic.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
for v in steps batch repeats; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "elastic.sh: --$v=${!v} is not a positive integer" >&2; exit 2; }
done
[[ "$churn" =~ ^[0-9]+$ ]] || { echo "elastic.sh: --churn=$churn is not a count" >&2; exit 2; }
[ "$steps" -ge 40 ] || { echo "elastic.sh: --steps must be >= 40" >&2; exit 2; }
if [ "$synthetic" = 1 ]; then
  data="source: SYNTHETIC synthetic_train_size: 4000 synthetic_test_size: 1000"
  samples=4000
else
  [ -n "$data_dir" ] || data_dir=../shared/cifar10/cifar-10-batches-bin
  [ -f "$data_dir/data_batch_1.bin" ] || { echo "elastic.sh: no CIFAR-10 in '$data_dir' (or --synthetic)" >&2; exit 1; }
  data_dir=$(cd "$data_dir" && pwd)
  data="source: CIFAR10 dir: \"$data_dir\" augment: true"
  samples=50000
fi
if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks >&2
fi
PSGD_BIN=${PSGD_BIN:-$PWD/bazel-bin}
source scripts/lib/cluster.sh
mkdir -p "$out"
out=$(cd "$out" && pwd)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

config() {  # FILE NAME WORKERS [EXTRA...]
  local file=$1 name=$2 workers=$3
  shift 3
  write_cluster_config "$file" "$name" mode=SYNC ps=1 workers="$workers" n=2 \
    batch="$batch" steps="$steps" model="$model" \
    training="seed: 7 eval_every: 0 optimizer { kind: SGD learning_rate: 0.05 }" \
    data="$data sharding: SERVERS ledger: true" \
    extra="worker_lease_seconds: 10" \
    extra="checkpoint { dir: \"$out/$name.ckpt\" every_steps: 50 }" "$@"
}

global_step() { [ -f "$1" ] && last_step "$1" || echo 0; }
await_step() {  # RUN STEP
  until [ "$(global_step "$1/worker-0.jsonl")" -ge "$2" ]; do sleep 0.2; done
}
start() {  # CFG RUN TASK [LOG]
  start_task "$1" "$3" "$2" "${4:-$2/${3/:/}.log}"
  pids+=($!)
  eval "pid_${3/:/_}=$!"
}
# leave TASK LOG: SIGTERM; waits until its log says it stopped (it is out
# of the live set then; the process may take seconds more to exit: gRPC's
# shutdown waits for its executor's timer).
leave() {
  local var="pid_${1/:/_}"
  kill -TERM "${!var}"
  until grep -q "stops after" "$2" 2>/dev/null; do sleep 0.05; done
}

report() {  # NAME RUN
  local name=$1 run=$2
  /usr/bin/python3 - "$name" "$run" "$steps" <<'PY'
import glob, json, sys
name, run, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
summary = json.load(open(f"{run}/summary.json"))
evals = [json.loads(l) for l in open(f"{run}/worker-0.jsonl") if '"eval"' in l]
final = [e for e in evals if e.get("final")] or evals
losses = []
for f in glob.glob(f"{run}/worker-*.jsonl"):
    for l in open(f):
        r = json.loads(l)
        if r.get("kind") == "train" and r["step"] >= steps - steps // 10:
            losses.append(r["loss"])
mean = sum(losses) / max(1, len(losses))
print(f"{name}: final_global_step={summary['final_global_step']} "
      f"test_loss={final[-1]['test_loss']:.4f} "
      f"test_accuracy={final[-1]['test_accuracy']:.4f} "
      f"train_loss_last_tenth={mean:.4f}")
PY
  /usr/bin/python3 scripts/ledger_check.py --num_samples "$samples" \
    --chunk_size "$batch" --seed 7 \
    --complete_epochs $(( $(wc -l < "$out/$name.ckpt/ledger.jsonl") * batch / samples )) \
    "$out/$name.ckpt/ledger.jsonl" | sed "s/^/$name: /"
}

echo "elastic.sh: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), $(lscpu | sed -n 's/^Model name: *//p')"

for ((r = 1; r <= repeats; r++)); do
  # Run r's names: fixed and resize, then fixed-2, resize-2, ...
  sfx=""; [ "$r" -gt 1 ] && sfx="-$r"
  # The reference: 2 workers.
  cfg=$out/fixed$sfx.pbtxt run=$out/fixed$sfx
  config "$cfg" "fixed$sfx" 2
  mkdir -p "$run"
  start "$cfg" "$run" ps:0
  for j in 0 1; do start "$cfg" "$run" "worker:$j"; done
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
  report "fixed$sfx" "$run"

  # 4 -> 8 -> 2 -> 6.
  cfg=$out/resize$sfx.pbtxt run=$out/resize$sfx
  config "$cfg" "resize$sfx" 4 extra="max_workers: 8"
  mkdir -p "$run"
  start "$cfg" "$run" ps:0
  for j in 0 1 2 3; do start "$cfg" "$run" "worker:$j"; done
  await_step "$run" $((steps / 4))
  for j in 4 5 6 7; do start "$cfg" "$run" "worker:$j"; done
  echo "resize$sfx: 8 workers from step $(global_step "$run/worker-0.jsonl")"
  await_step "$run" $((steps / 2))
  for j in 2 3 4 5 6 7; do kill -TERM "$(eval echo "\$pid_worker_$j")"; done
  for j in 2 3 4 5 6 7; do
    until grep -q "stops after" "$run/worker$j.log"; do sleep 0.05; done
  done
  echo "resize$sfx: 2 workers from step $(global_step "$run/worker-0.jsonl")"
  await_step "$run" $((3 * steps / 4))
  for j in 2 3 4 5; do start "$cfg" "$run" "worker:$j" "$run/worker$j.again.log"; done
  echo "resize$sfx: 6 workers from step $(global_step "$run/worker-0.jsonl")"
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  report "resize$sfx" "$run"
done

if [ "$churn" -gt 0 ]; then
  cfg=$out/churn.pbtxt run=$out/churn
  steps_churn=$((steps * 100))
  write_cluster_config "$cfg" churn mode=SYNC ps=1 workers=2 n=2 \
    batch="$batch" steps="$steps_churn" model="$model" \
    training="seed: 7 eval_every: 0 replicas_rule: LIVE_MINUS_BACKUPS optimizer { kind: SGD learning_rate: 0.05 }" \
    data="$data sharding: SERVERS ledger: true" extra="max_workers: 6" \
    extra="worker_lease_seconds: 10" \
    extra="checkpoint { dir: \"$out/churn.ckpt\" every_steps: 50 }"
  # N follows the live workers (none are backups): each joiner's gradient
  # is one of the step's N.
  mkdir -p "$run"
  start "$cfg" "$run" ps:0
  for j in 0 1; do start "$cfg" "$run" "worker:$j"; done
  t0=$SECONDS died=0
  for ((k = 0; k < churn; k++)); do
    task="worker:$((2 + k % 4))"
    file="$run/worker-$((2 + k % 4)).jsonl"
    before=$(cat "$file" 2>/dev/null | grep -c '"kind":"train"' || true)
    start "$cfg" "$run" "$task" "$run/churn-$k.log"
    var="pid_${task/:/_}"
    until [ "$(cat "$file" 2>/dev/null | grep -c '"kind":"train"' || true)" -gt "$before" ]; do
      if ! kill -0 "${!var}" 2>/dev/null; then
        died=$((died + 1))
        echo "churn: join $k ($task) died: $(tail -n 1 "$run/churn-$k.log")"
        continue 2
      fi
      sleep 0.05
    done
    leave "$task" "$run/churn-$k.log"
  done
  echo "churn: $churn joins and leaves in $((SECONDS - t0)) s, $died joiners died, at step $(global_step "$run/worker-0.jsonl")"
  # Each joiner's first gradient the servers took: its local step and its
  # time since its run started (the records of one process begin at local
  # step 1).
  /usr/bin/python3 - "$run" <<'PY'
import glob, json, statistics, sys
firsts = []
for f in sorted(glob.glob(sys.argv[1] + "/worker-[2-9].jsonl")):
    taken = None
    for line in open(f):
        r = json.loads(line)
        if r.get("kind") != "train":
            continue
        if r["local_step"] == 1:
            taken = False
        if taken is False and r["outcome"] in ("applied", "aggregated"):
            firsts.append((r["local_step"], r["wall_time_s"]))
            taken = True
steps = [s for s, _ in firsts]
times = sorted(t for _, t in firsts)
if firsts:
    print(f"churn: {len(firsts)} joiners' first gradient taken: at local step 1 in "
          f"{steps.count(1)}, within 2 steps in {sum(s <= 2 for s in steps)}, "
          f"latest at step {max(steps)}; time from the joiner's run start: "
          f"median {statistics.median(times):.3f} s, 90th percentile "
          f"{times[int(0.9 * (len(times) - 1))]:.3f} s, max {max(times):.3f} s")
PY
  # The other listed worker first: the chief, asked to leave, waits for
  # the others, then ends the job.
  leave worker:1 "$run/worker1.log"
  leave worker:0 "$run/worker0.log"
  wait "${pids[0]}" 2>/dev/null || true
  pids=()
  samples_done=$(( $(wc -l < "$out/churn.ckpt/ledger.jsonl") * batch ))
  /usr/bin/python3 scripts/ledger_check.py --num_samples "$samples" \
    --chunk_size "$batch" --seed 7 --complete_epochs $((samples_done / samples)) \
    "$out/churn.ckpt/ledger.jsonl" | sed "s/^/churn: /"
fi

/usr/bin/python3 - "$out" "$repeats" <<'PY'
import json, sys
out, repeats = sys.argv[1], int(sys.argv[2])
import glob
def final_loss(name):
    evals = [json.loads(l) for l in open(f"{out}/{name}/worker-0.jsonl") if '"eval"' in l]
    return evals[-1]["test_loss"]
def train_ce(name):
    # The cross entropy of every worker's batches over the last tenth of
    # the steps: the training loss at the end, far less noisy than one
    # evaluation.
    steps = json.load(open(f"{out}/{name}/summary.json"))["final_global_step"]
    ce = [r["cross_entropy"] for f in glob.glob(f"{out}/{name}/worker-*.jsonl")
          for r in map(json.loads, open(f))
          if r.get("kind") == "train" and r["step"] >= steps - steps // 10]
    return sum(ce) / len(ce)
names = lambda kind: [kind] + [f"{kind}-{r}" for r in range(2, repeats + 1)]
mean = lambda v: sum(v) / len(v)
for what, f in (("test losses", final_loss), ("training cross entropies (last tenth)", train_ce)):
    fixed = [f(n) for n in names("fixed")]
    resize = [f(n) for n in names("resize")]
    print(f"fixed {what}: " + " ".join(f"{v:.4f}" for v in fixed) + f" (mean {mean(fixed):.4f})")
    print(f"resize {what}: " + " ".join(f"{v:.4f}" for v in resize) + f" (mean {mean(resize):.4f})")
    key = "loss_ratio_resize_vs_fixed" if f is final_loss else "train_ce_ratio_resize_vs_fixed"
    print(f"{key}={mean(resize) / mean(fixed):.4f}")
PY
echo "elastic.sh: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg); runs in $out"
