#!/usr/bin/env bash
# What the Python worker (docs/PYTHON.md) costs, in one run:
#  1. the tutorial model in a 1 ps x 1 worker sync cluster, once with the
#     C++ worker and once with a Python worker (examples/torch_cifar10.py
#     --model=tutorial): the mean pull + push + wait per step of each
#     (after the first 5 steps), as comm_ratio_python_vs_cpp;
#  2. ResNet-20 (examples/torch_cifar10.py) in a 1 ps x 1 worker sync
#     cluster against the same PyTorch loop without psgd (torch.optim.SGD
#     in the process), images/s of each, as images_ratio_psgd_vs_torch.
#     --model=resnet18, mobilenet_v2, densenet or shufflenet_v2:
#     torchvision's
#     (examples/torchvision_cifar10.py, its own loop and DataLoader) against
#     the same model, DataLoader and SGD without psgd; part 1 is skipped.
#     --overlap: the cluster's wire { overlap: true }; --wire=bf16 (or
#     fp16): its gradients and weights in that dtype on the wire (the
#     servers keep float32; default float32); --shm: its wire {
#     shared_memory: true } (the worker and the server, both on this
#     machine, exchange the tensors through shared memory).
#
#   scripts/bench/python_overhead.sh [--steps=N] [--batch=B] [--threads=T]
#                                    [--rounds=R] [--model=NAME] [--overlap]
#                                    [--wire=float32|bf16|fp16] [--shm]
#                                    [--no-build]
#
# Defaults: 40 steps of batch 128, 2 threads, 2 rounds (the median is
# reported), ResNet-20; synthetic data (the comparison needs no download).
# The last lines: comm_ratio_python_vs_cpp=X (ResNet-20 only) and
# images_ratio_psgd_vs_torch=Y.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source scripts/lib/cluster.sh

steps=40 batch=128 threads=2 rounds=2 build=1 model=resnet20 overlap=false
wire=float32 shm=false
for a in "$@"; do
  case "$a" in
    --model=*) model=${a#--model=} ;;
    --overlap) overlap=true ;;
    --wire=*) wire=${a#--wire=} ;;
    --shm) shm=true ;;
    --steps=*) steps=${a#--steps=} ;;
    --batch=*) batch=${a#--batch=} ;;
    --threads=*) threads=${a#--threads=} ;;
    --rounds=*) rounds=${a#--rounds=} ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "python_overhead.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
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
case "$model" in
  resnet20|resnet18|mobilenet_v2|densenet|shufflenet_v2) ;;
  *) echo "python_overhead.sh: --model=$model: expected resnet20, resnet18, mobilenet_v2, densenet or shufflenet_v2" >&2; exit 2 ;;
esac
if [ "$build" = 1 ]; then
  bazel build -c opt //ps:ps_server //worker:worker //configs:cluster_tasks \
    //python:psgd >/dev/null 2>&1 || { echo "python_overhead.sh: build failed" >&2; exit 1; }
fi
# The -c opt outputs by their own path: bazel-bin follows the last build's
# configuration (a `bazel test` points it at fastbuild binaries).
bin=bazel-out/k8-opt/bin
for b in ps/ps_server worker/worker configs/cluster_tasks; do
  [ -x "$bin/$b" ] || { echo "python_overhead.sh: no $bin/$b: build with -c opt first" >&2; exit 1; }
done

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
if [ "$model" = resnet20 ]; then
  model_program="$program --model=resnet20"
else
  model_program="examples/torchvision_cifar10.py --log_every=0 --threads=$threads --model=$model"
fi
sed -i "s|^worker { \(.*\) }$|worker { \1 program: \"$model_program\" }|" \
  "$out/resnet.pbtxt"

# mean FILE: the mean phases and images/s of the train lines after the first 5.
mean() {
  /usr/bin/python3 - "$1" <<'EOF'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"][5:]
m = lambda k: sum(r.get(k, 0.0) for r in steps) / len(steps)
comm = m("pull_s") + m("push_s") + m("wait_s")
images = sum(r["batch_size"] for r in steps) / sum(r["step_s"] for r in steps)
print(f"comm_s={comm:.4f} step_s={m('step_s'):.4f} compute_s={m('compute_s'):.4f} images_per_s={images:.1f}")
EOF
}

# The examples' loop without psgd: ResNet-20 of examples/torch_cifar10.py
# on slices of the synthetic set, or torchvision's model of
# examples/torchvision_cifar10.py through the same Dataset and DataLoader.
torch_loop() {
  PYTHONPATH=$bin/python/site${PYTHONPATH:+:$PYTHONPATH} /usr/bin/python3 - "$steps" "$batch" "$threads" "$model" <<'EOF'
import sys, time
import torch, torch.nn.functional as F
sys.path.insert(0, "examples")
import importlib.util
spec = importlib.util.spec_from_file_location("ex", "examples/torch_cifar10.py")
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
steps, batch, threads = map(int, sys.argv[1:4])
name = sys.argv[4]
torch.set_num_threads(threads)
torch.manual_seed(1)
images, labels = ex.synthetic(steps * batch + batch, 1)
if name == "resnet20":
    model = ex.resnet20()
    batches = ((images[i * batch:(i + 1) * batch], labels[i * batch:(i + 1) * batch])
               for i in range(steps))
else:
    tv = importlib.import_module("torchvision_cifar10")
    model = tv.make_model(name)
    batches = iter(torch.utils.data.DataLoader(
        tv.Images(images, labels), batch_size=batch, shuffle=True, drop_last=True))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
times = []
for i in range(steps):
    t0 = time.perf_counter()
    x, y = next(batches)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    times.append(time.perf_counter() - t0)
print(f"images_per_s={batch * len(times[5:]) / sum(times[5:]):.1f}")
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
  # The order alternates between rounds, so that both see the same drift.
  if ((r % 2)); then
    run_cluster "$out/resnet.pbtxt" "$out/resnet-$r"
    t=$(torch_loop) || exit 1
  else
    t=$(torch_loop) || exit 1
    run_cluster "$out/resnet.pbtxt" "$out/resnet-$r"
  fi
  s=$(mean "$out/resnet-$r/worker-0.jsonl")
  echo "round $r: $model, psgd 1x1 sync (overlap $overlap, wire $wire, shm $shm) $s"
  echo "round $r: $model, PyTorch alone $t"
  psgd+=("$(sed 's/.*images_per_s=//' <<<"$s")")
  plain+=("$(sed 's/.*images_per_s=//' <<<"$t")")
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); runs in $out"
/usr/bin/python3 - "${cpp[*]}" "${py[*]}" "${psgd[*]}" "${plain[*]}" "$model" <<'EOF'
import statistics, sys
cpp, py, psgd, plain = ([float(x) for x in a.split()] for a in sys.argv[1:5])
s, t = statistics.median(psgd), statistics.median(plain)
if cpp:
    c, p = statistics.median(cpp), statistics.median(py)
    print(f"median pull+push+wait per step: C++ worker {c:.4f} s, Python worker {p:.4f} s")
    print(f"comm_ratio_python_vs_cpp={p / c:.3f}")
print(f"median images/s: {sys.argv[5]} with psgd {s:.1f}, without {t:.1f}")
print(f"images_ratio_psgd_vs_torch={s / t:.3f}")
EOF
