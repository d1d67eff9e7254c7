#!/usr/bin/env bash
# What the Python worker (docs/PYTHON.md) costs, in one run:
#  1. the tutorial model in a 1 ps x 1 worker sync cluster, once with the
#     C++ worker and once with a Python worker (examples/torch_cifar10.py
#     --model=tutorial): the mean pull + push + wait per step of each
#     (after the first 5 steps), as comm_ratio_python_vs_cpp;
#  2. ResNet-20 (examples/torch_cifar10.py's) in a 1 ps x 1 worker sync
#     cluster against the same PyTorch loop without psgd (torch.optim.SGD),
#     images/s of each, as images_ratio_psgd_vs_torch. --model=resnet18,
#     mobilenet_v2, densenet or shufflenet_v2: torchvision's
#     (examples/torchvision_cifar10.py's); part 1 is skipped.
#     --overlap: the cluster's wire { overlap: true }; --wire=bf16 (or
#     fp16): its gradients and weights in that dtype on the wire (the
#     servers keep float32; default float32); --shm: its wire {
#     shared_memory: true } (the worker and the server, both on this
#     machine, exchange the tensors through shared memory).
#
# Part 2 runs both sides in the worker's one process
# (scripts/bench/python_overhead_worker.py): the same module, Dataset and
# DataLoader, trained by examples/torchvision_cifar10.py's loop through
# psgd.torch and by the loop alone, each timed by the wall clock from the
# end of its 5th step to the end of its last (what happens between steps
# counts on both sides). One process, because on a virtual machine the
# same loop's speed differs from process to process by up to 1.8x and
# stays put within one. Each round is one cluster run; which side goes
# first alternates between rounds. The ratio is taken in each round;
# images_ratio_psgd_vs_torch is the median of the rounds' ratios, printed
# with their spread and each side's median and spread.
#
# --block=K (default 5): within each round the two sides take turns, K
# steps each (python_overhead_worker.py --block), so that a machine whose
# speed drifts over the round's seconds slows both alike; --block=0 runs
# one side, then the other (the figures of 2026-12-03 and before).
#
# --malloc=fixed (the default) runs the cluster with glibc's malloc
# thresholds fixed (MALLOC_MMAP_THRESHOLD_=32 MiB, MALLOC_TRIM_THRESHOLD_=
# 1 GiB, unless set already): left dynamic, they decide from the process's
# history whether PyTorch's large buffers are mapped and faulted in afresh
# at every step, which moved the same loop between 52 and 100 images/s
# here; --malloc=default leaves them as they are.
#
#   scripts/bench/python_overhead.sh [--steps=N] [--batch=B] [--threads=T]
#                                    [--rounds=R] [--model=NAME] [--overlap]
#                                    [--wire=float32|bf16|fp16] [--shm]
#                                    [--malloc=fixed|default] [--block=K]
#                                    [--no-build]
#                                    [--bin_dir=DIR]
#
# Defaults: 40 steps of batch 128, 2 threads, 5 rounds (the median is
# reported), ResNet-20; synthetic data (the comparison needs no download).
# --bin_dir=DIR: the programs of another build (DIR/ps/ps_server,
# DIR/worker/worker, DIR/configs/cluster_tasks, DIR/python/site; implies
# --no-build), to time a build before a change against one after it.
# The last lines: comm_ratio_python_vs_cpp=X (ResNet-20 only) and
# images_ratio_psgd_vs_torch=Y.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib/cluster.sh

steps=40 batch=128 threads=2 rounds=5 build=1 model=resnet20 overlap=false
wire=float32 shm=false malloc=fixed bin=bazel-out/k8-opt/bin block=5
for a in "$@"; do
  case "$a" in
    --model=*) model=${a#--model=} ;;
    --overlap) overlap=true ;;
    --wire=*) wire=${a#--wire=} ;;
    --shm) shm=true ;;
    --malloc=*) malloc=${a#--malloc=} ;;
    --steps=*) steps=${a#--steps=} ;;
    --batch=*) batch=${a#--batch=} ;;
    --threads=*) threads=${a#--threads=} ;;
    --rounds=*) rounds=${a#--rounds=} ;;
    --block=*) block=${a#--block=} ;;
    --no-build) build=0 ;;
    --bin_dir=*) bin=${a#--bin_dir=}; build=0 ;;
    -h|--help) sed -n '2,55p' "$0"; exit 0 ;;
    *) echo "python_overhead.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
if ! [[ "$block" =~ ^(0|[1-9][0-9]*)$ ]]; then
  echo "python_overhead.sh: --block=$block is not an integer of 0 or more" >&2; exit 2
fi
for v in steps batch threads rounds; do
  if ! [[ "${!v}" =~ ^[1-9][0-9]*$ ]]; then
    echo "python_overhead.sh: --$v=${!v} is not a positive integer" >&2; exit 2
  fi
done
[ "$steps" -gt 10 ] || { echo "python_overhead.sh: --steps must be > 10" >&2; exit 2; }
case "$wire" in
  float32) wire_dtypes="" ;;
  bf16) wire_dtypes=" gradients: BF16 weights: BF16" ;;
  fp16) wire_dtypes=" gradients: FP16 weights: FP16" ;;
  *) echo "python_overhead.sh: --wire=$wire: expected float32, bf16 or fp16" >&2; exit 2 ;;
esac
case "$malloc" in
  fixed) export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-33554432}
         export MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-1073741824} ;;
  default) ;;
  *) echo "python_overhead.sh: --malloc=$malloc: expected fixed or default" >&2; exit 2 ;;
esac
case "$model" in
  resnet20|resnet18|mobilenet_v2|densenet|shufflenet_v2) ;;
  *) echo "python_overhead.sh: --model=$model: expected resnet20, resnet18, mobilenet_v2, densenet or shufflenet_v2" >&2; exit 2 ;;
esac
if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks \
    //python:psgd >/dev/null 2>&1 || { echo "python_overhead.sh: build failed" >&2; exit 1; }
fi
# The -c opt outputs by their own path (the default --bin_dir): bazel-bin
# follows the last build's configuration (a `bazel test` points it at
# fastbuild binaries).
for b in ps/ps_server worker/worker configs/cluster_tasks; do
  [ -x "$bin/$b" ] || { echo "python_overhead.sh: no $bin/$b: build with -c opt first" >&2; exit 1; }
done
[ -d "$bin/python/site/psgd" ] || { echo "python_overhead.sh: no $bin/python/site/psgd" >&2; exit 1; }

out=$(mktemp -d /tmp/psgd_python_overhead.XXXXXX)
data="source: SYNTHETIC synthetic_train_size: $((steps * batch + batch)) synthetic_test_size: 500"
program="examples/torch_cifar10.py --log_every=0 --threads=$threads"
write_cluster_config "$out/cpp.pbtxt" py-overhead-cpp threads="$threads" \
  batch="$batch" steps="$steps" model=cifar10_tutorial data="$data"
sed "s|^worker { \(.*\) }$|worker { \1 program: \"$program --model=tutorial\" }|" \
  "$out/cpp.pbtxt" > "$out/python.pbtxt"
write_cluster_config "$out/resnet.pbtxt" py-overhead-resnet threads="$threads" \
  batch="$batch" steps="$steps" model=external data="$data" \
  training="optimizer { kind: SGD learning_rate: 0.1 }" \
  extra="wire { overlap: $overlap shared_memory: $shm$wire_dtypes }"
# The worker program of part 2, without its --first and --result (each
# round's config adds them).
model_program="scripts/bench/python_overhead_worker.py --threads=$threads --model=$model --steps=$steps --block=$block"

# mean FILE: the mean phases of the train lines after the first 5.
mean() {
  /usr/bin/python3 - "$1" <<'EOF'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"][5:]
m = lambda k: sum(r.get(k, 0.0) for r in steps) / len(steps)
comm = m("pull_s") + m("push_s") + m("wait_s")
print(f"comm_s={comm:.4f} step_s={m('step_s'):.4f} compute_s={m('compute_s'):.4f}")
EOF
}

run_cluster() {  # CONFIG RUN_DIR
  bash scripts/run/launch.sh --bin_dir="$bin" --run_dir="$2" "$1" \
    >"$2.log" 2>&1 || { echo "python_overhead.sh: $1 failed:" >&2; tail -20 "$2.log" >&2; exit 1; }
}

cpp=() py=() psgd=() plain=()
for ((r = 1; r <= rounds; r++)); do
  if [ "$model" = resnet20 ]; then
    run_cluster "$out/cpp.pbtxt" "$out/cpp-$r"
    run_cluster "$out/python.pbtxt" "$out/python-$r"
    c=$(mean "$out/cpp-$r/worker-0.jsonl")
    p=$(mean "$out/python-$r/worker-0.jsonl")
    echo "round $r: tutorial, C++ worker     $c"
    echo "round $r: tutorial, Python worker  $p"
    cpp+=("$(sed 's/ .*//; s/comm_s=//' <<<"$c")")
    py+=("$(sed 's/ .*//; s/comm_s=//' <<<"$p")")
  fi
  # Which side goes first alternates between rounds.
  first=psgd
  ((r % 2)) || first=alone
  sed "s|^worker { \(.*\) }$|worker { \1 program: \"$model_program --first=$first --result=$out/images-$r.json\" }|" \
    "$out/resnet.pbtxt" > "$out/resnet-$r.pbtxt"
  run_cluster "$out/resnet-$r.pbtxt" "$out/resnet-$r"
  s=$(mean "$out/resnet-$r/worker-0.jsonl")
  read -r a b < <(/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.1f %.1f" % (r["psgd_images_per_s"], r["alone_images_per_s"]))' "$out/images-$r.json") ||
    { echo "python_overhead.sh: no result in $out/images-$r.json" >&2; exit 1; }
  echo "round $r ($first first, blocks of $block): $model, psgd 1x1 sync (overlap $overlap, wire $wire, shm $shm, malloc $malloc) images_per_s=$a $s"
  echo "round $r ($first first): $model, PyTorch alone images_per_s=$b"
  psgd+=("$a")
  plain+=("$b")
done
echo "malloc: $malloc (MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-dynamic} MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-dynamic})"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); runs in $out"
/usr/bin/python3 - "${cpp[*]}" "${py[*]}" "${psgd[*]}" "${plain[*]}" "$model" <<'EOF'
import statistics, sys
cpp, py, psgd, plain = ([float(x) for x in a.split()] for a in sys.argv[1:5])
if cpp:
    c, p = statistics.median(cpp), statistics.median(py)
    print(f"median pull+push+wait per step: C++ worker {c:.4f} s, Python worker {p:.4f} s")
    print(f"comm_ratio_python_vs_cpp={p / c:.3f}")
ratios = [a / b for a, b in zip(psgd, plain)]
spread = lambda xs: f"{min(xs):.1f}-{max(xs):.1f}"
print(f"images/s over {len(ratios)} rounds: {sys.argv[5]} with psgd median "
      f"{statistics.median(psgd):.1f} ({spread(psgd)}), without median "
      f"{statistics.median(plain):.1f} ({spread(plain)})")
print("ratio by round: " + ", ".join(f"{r:.3f}" for r in ratios)
      + f"; spread {min(ratios):.3f}-{max(ratios):.3f}")
print(f"images_ratio_psgd_vs_torch={statistics.median(ratios):.3f}")
EOF
