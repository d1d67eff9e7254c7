#!/usr/bin/env bash
# scripts/run/launch.sh starts worker programs (WorkerTask.program): a
# mixed cluster of examples/torch_cifar10.py's tutorial network (worker:0,
# the chief) and the C++ worker (worker:1); then ResNet-20 (model
# "external") from the example alone; then two workers of the example's own
# loop (--own_loop --clip=1.0); then examples/torchvision_cifar10.py's
# ResNet-18 (its own loop, two workers), MobileNetV2 (train()), the CIFAR
# DenseNet and ShuffleNetV2. Every run reaches its last step and the chief's
# summary adds up.
set -euo pipefail
RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
source "$RUNFILES/scripts/lib/cluster.sh"
TMP=${TEST_TMPDIR:?}
fail() { echo "FAIL: $*" >&2; exit 1; }

check_run() {
  local run=$1 steps=$2
  /usr/bin/python3 - "$run" "$steps" <<'PYEOF' || fail "$run: summary"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["final_global_step"] == int(sys.argv[2]), s
print("summary:", {k: v for k, v in s.items() if k.startswith("server_")})
PYEOF
}

# Every worker of CONFIG runs PROGRAM (checked: each worker line has it).
set_program() {
  local config=$1 program=$2
  sed -i "s|^worker { \(.*\) }$|worker { \1 program: \"$program\" }|" "$config"
  [ "$(grep -c -- "program: \"$program\"" "$config")" = "$(grep -c '^worker {' "$config")" ] ||
    fail "not every worker of $config runs $program"
}

# launch.sh runs every task of $TMP/NAME.pbtxt into $TMP/run-NAME (its
# output in $TMP/NAME.log); WHAT names the run when it fails.
launch() {
  local name=$1 what=$2
  timeout 300 bash "$RUNFILES/scripts/run/launch.sh" --bin_dir="$RUNFILES" \
    --run_dir="$TMP/run-$name" "$TMP/$name.pbtxt" > "$TMP/$name.log" 2>&1 ||
    { cat "$TMP/$name.log"; fail "$what failed"; }
}

data="source: SYNTHETIC synthetic_train_size: 64 synthetic_test_size: 32"
write_cluster_config "$TMP/mixed.pbtxt" mixed workers=2 n=2 batch=8 steps=4 \
  model=cifar10_tutorial data="$data"
sed -i '0,/^worker {/s|^worker { \(.*\) }$|worker { \1 program: "examples/torch_cifar10.py --model=tutorial --threads=1 --log_every=1" }|' \
  "$TMP/mixed.pbtxt"
grep -q 'program: "examples/torch_cifar10.py' "$TMP/mixed.pbtxt" || fail "no program in the config"
launch mixed "the mixed cluster"
grep -q "worker:0 | .*% done" "$TMP/mixed.log" || { cat "$TMP/mixed.log"; fail "no progress line from the Python worker"; }
check_run "$TMP/run-mixed" 4
[ -s "$TMP/run-mixed/worker-1.jsonl" ] || fail "the C++ worker wrote no lines"

write_cluster_config "$TMP/resnet.pbtxt" resnet batch=4 steps=2 model=external \
  data="$data" extra="wire { overlap: true }"
set_program "$TMP/resnet.pbtxt" "examples/torch_cifar10.py --threads=1"
launch resnet "the ResNet-20 run"
check_run "$TMP/run-resnet" 2

# The example's own loop (psgd.torch.Worker) with gradient clipping, two
# workers.
write_cluster_config "$TMP/own.pbtxt" own workers=2 n=2 batch=4 steps=3 \
  model=external data="$data"
set_program "$TMP/own.pbtxt" "examples/torch_cifar10.py --threads=1 --own_loop --clip=1.0"
[ "$(grep -c -- '--own_loop --clip=1.0' "$TMP/own.pbtxt")" = 2 ] || fail "no own-loop program for both workers"
launch own "the own-loop run"
check_run "$TMP/run-own" 3
[ -s "$TMP/run-own/worker-1.jsonl" ] || fail "the second own-loop worker wrote no lines"

# torchvision's models as a PyTorch user writes it (examples/
# torchvision_cifar10.py): ResNet-18 in the example's own loop with
# clipping, two workers; MobileNetV2 through psgd.torch.train, one.
write_cluster_config "$TMP/tv.pbtxt" tv workers=2 n=2 batch=4 steps=2 \
  model=external data="$data"
set_program "$TMP/tv.pbtxt" "examples/torchvision_cifar10.py --model=resnet18 --threads=1 --clip=5"
launch tv "the torchvision ResNet-18 run"
check_run "$TMP/run-tv" 2
write_cluster_config "$TMP/mnv2.pbtxt" mnv2 batch=4 steps=2 model=external \
  data="$data"
set_program "$TMP/mnv2.pbtxt" "examples/torchvision_cifar10.py --model=mobilenet_v2 --threads=1 --train"
launch mnv2 "the torchvision MobileNetV2 run"
check_run "$TMP/run-mnv2" 2
# The CIFAR DenseNet (121 batch norms: their statistics on the servers) and
# ShuffleNetV2 of the example, through its own loop.
for m in densenet shufflenet_v2; do
  write_cluster_config "$TMP/$m.pbtxt" "$m" batch=4 steps=2 model=external \
    data="$data"
  set_program "$TMP/$m.pbtxt" "examples/torchvision_cifar10.py --model=$m --threads=1"
  launch "$m" "the torchvision $m run"
  check_run "$TMP/run-$m" 2
done
echo PASS
