#!/usr/bin/env bash
# The whole GPU check in one device call (docs/GPU.md, "On a lent GPU
# machine"): preflight, cuda_smoke_test, every gpu test under its own
# timeout, the benchmark against PyTorch, all logs in one archive, and a
# one-line summary last.
#
#   bash scripts/gpu/gpu_check.sh [--bundle PATH] [--out DIR] [--budget S]
#                             [--test-timeout S] [--bench-timeout S]
#                             [--no-bench] [--batches "128 512"] [--steps N]
#
# PATH is the bundle: its folder (psgd_gpu/, from scripts/gpu/pack_gpu_bundle.sh)
# or its archive psgd_gpu.tar.xz, which is unpacked into a temporary folder.
# Default: the bundle this script sits in, else gpu_bundle/psgd_gpu.tar.xz
# or gpu_bundle/psgd_gpu under the current folder or this checkout.
# DIR defaults to $OUT (the device tool's output folder). S: seconds. The
# tests and the benchmark share --budget (default 540, under the device
# tool's 600 per call): each test gets --test-timeout (default 150) or what
# is left after keeping --bench-timeout (default 200) for the benchmark,
# whichever is less.
#
# Writes to DIR (at most 5 files, all small), each as soon as its step
# ends: preflight.txt, tests.txt, bench.txt, summary.txt, and
# gpu_check_logs.tar.gz (every log in full: each test's output, the
# benchmark's details, the preflight). Prints the same as it goes; the last
# line on stdout is the summary, `gpu_check: ...`. Exit status 0 only when
# every test passed and the benchmark ran.
set -uo pipefail
start=$(date +%s)
here="$(cd "$(dirname "$0")" && pwd)"

bundle=""
out="${OUT:-}"
budget=540
test_timeout=150
bench_timeout=200
bench=1
batches="128 512"
steps=200
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle|--out|--budget|--test-timeout|--bench-timeout|--batches|--steps)
      [ $# -ge 2 ] || { echo "gpu_check: $1 needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    --bundle) bundle="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --test-timeout) test_timeout="$2"; shift 2 ;;
    --bench-timeout) bench_timeout="$2"; shift 2 ;;
    --no-bench) bench=0; shift ;;
    --batches) batches="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (gpu_check.sh --help)" >&2; exit 2 ;;
  esac
done
for v in "$budget" "$test_timeout" "$bench_timeout" "$steps"; do
  case "$v" in ''|*[!0-9]*) echo "gpu_check: '$v' is not a number of seconds/steps" >&2; exit 2 ;; esac
done
if [ -z "$out" ]; then
  echo "gpu_check: no output folder: set OUT or pass --out DIR" >&2; exit 2
fi
mkdir -p "$out" || { echo "gpu_check: cannot create $out" >&2; exit 2; }
out="$(cd "$out" && pwd)"

# --- the bundle -------------------------------------------------------------------
if [ -z "$bundle" ]; then
  if [ -x "$here/run.sh" ] && [ -d "$here/bin" ]; then
    bundle="$here"
  else
    for c in "$PWD/gpu_bundle/psgd_gpu.tar.xz" "$here/../../gpu_bundle/psgd_gpu.tar.xz" \
             "$PWD/gpu_bundle/psgd_gpu" "$here/../../gpu_bundle/psgd_gpu"; do
      [ -e "$c" ] && { bundle="$c"; break; }
    done
  fi
  [ -n "$bundle" ] || { echo "gpu_check: no bundle found (gpu_bundle/psgd_gpu.tar.xz); make one with scripts/gpu/pack_gpu_bundle.sh or pass --bundle PATH" >&2; exit 2; }
fi
if [ -f "$bundle" ]; then
  case "$bundle" in
    *.tar.xz) ;;
    *) echo "gpu_check: --bundle $bundle: want a folder or a .tar.xz" >&2; exit 2 ;;
  esac
  unpack=$(mktemp -d /tmp/psgd_gpu_check.XXXXXX)
  if ! tar -xJf "$bundle" -C "$unpack" 2>/dev/null; then
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$bundle" "$unpack" \
      || { echo "gpu_check: cannot unpack $bundle" >&2; exit 2; }
  fi
  bundle="$unpack/psgd_gpu"
fi
if [ ! -x "$bundle/run.sh" ] || [ ! -d "$bundle/bin" ]; then
  echo "gpu_check: $bundle is not a bundle (no run.sh or bin/)" >&2; exit 2
fi
B="$(cd "$bundle" && pwd)"
logs=$(mktemp -d /tmp/psgd_gpu_logs.XXXXXX)
mkdir -p "$logs/tests"
left() { echo $(( budget - ($(date +%s) - start) )); }

# --- preflight ----------------------------------------------------------------------
{
  echo "== gpu_check preflight $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}")"
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -1)"
  echo "== nvidia-smi"
  if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
    timeout 30 nvidia-smi 2>&1 | head -20
  else
    echo "nvidia-smi: not found"
  fi
  echo "== python3 / torch"
  timeout 90 python3 -c '
import sys
print("python", sys.version.split()[0])
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          "cudnn", torch.backends.cudnn.version(),
          "cuda available", torch.cuda.is_available())
    if torch.cuda.is_available():
        print("device", torch.cuda.get_device_name(0))
except Exception as e:
    print("torch: not usable:", e)
' 2>&1 || echo "python3: not usable"
  echo "== the bundle"
  head -3 "$B/MANIFEST" 2>/dev/null
  cat "$B/NEEDS" 2>/dev/null
  echo "== libraries as run.sh resolves them"
  "$B/run.sh" --print-libs 2>&1
  echo "== ldd bin/gpu_bench under run.sh: what the machine provides (the rest is the bundle's lib/)"
  if [ -x "$B/bin/gpu_bench" ]; then
    "$B/run.sh" ldd "$B/bin/gpu_bench" 2>&1 | while read -r so arrow path rest; do
      case "$path" in "$B"/*) continue ;; esac
      if [ "$arrow" = "=>" ] && [ -e "$path" ]; then
        echo "$so => $path -> $(readlink -f "$path")"
      else
        echo "$so $arrow $path $rest"
      fi
    done
  fi
} > "$logs/preflight.txt" 2>&1
cp "$logs/preflight.txt" "$out/preflight.txt"
cat "$logs/preflight.txt"
gpu=$(grep -A1 '^name, driver_version' "$logs/preflight.txt" | tail -1 | cut -d, -f1,2 | sed 's|, |/driver=|; s| |_|g')
[ -n "$gpu" ] && [ "${gpu#name}" = "$gpu" ] || gpu="none"
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
torch=$(grep -o '^torch [^ ]*' "$logs/preflight.txt" | cut -d' ' -f2)

# --- cuda_smoke_test, then every test --------------------------------------------
# run_gpu_tests.sh runs bin/*_test (cuda_smoke_test among them) in name
# order; the smoke test first, on its own, so that its versions lead.
smoke="absent"
if [ -x "$B/bin/cuda_smoke_test" ]; then
  if (cd "$B" && timeout -k 5 60 "$B/run.sh" "$B/bin/cuda_smoke_test" -s) > "$logs/tests/cuda_smoke_test.first.log" 2>&1; then
    smoke="passed"
  else
    smoke="FAILED"
  fi
fi
# Each test gets --test-timeout, or less when the budget left after the
# benchmark's share runs short (run_gpu_tests.sh --deadline).
reserve=$(( bench == 1 ? bench_timeout : 0 ))
deadline=$(( start + budget - reserve ))
{
  echo "== smoke: $smoke"
  sed 's/^/    /' "$logs/tests/cuda_smoke_test.first.log" 2>/dev/null | head -30
  echo "== tests (each at most $test_timeout s, all within $(( deadline - $(date +%s) )) s)"
  "$B/run_gpu_tests.sh" --timeout "$test_timeout" --deadline "$deadline" --logs "$logs/tests"
} 2>&1 | tee "$out/tests.txt"
cp "$out/tests.txt" "$logs/tests.txt"
tests=$(tail -1 "$logs/tests.txt")
case "$tests" in *" passed, "*" failed"*) ;; *) tests="no result" ;; esac

# --- the benchmark --------------------------------------------------------------------
bench_line="skipped"
if [ "$bench" = 1 ]; then
  t=$(left); [ "$t" -gt "$bench_timeout" ] && t=$bench_timeout
  if [ "$t" -lt 30 ]; then
    bench_line="no time left"
    echo "gpu_check: $(left) s left of --budget: benchmark skipped" | tee "$logs/bench.txt"
  else
    echo "== benchmark (at most $t s)"
    TMPDIR="$logs" timeout -k 5 "$t" bash "$B/gpu_bench.sh" --batches "$batches" --steps "$steps" \
      2>&1 | tee "$out/bench.txt"
    rc=${PIPESTATUS[0]}
    cp "$out/bench.txt" "$logs/bench.txt"
    case "$rc" in
      0) bench_line=$(tail -1 "$logs/bench.txt") ;;
      124|137) bench_line="timed out after $t s" ;;
      *) bench_line="FAILED (exit $rc; bench.txt)" ;;
    esac
    # ResNet-20 (a layer-graph network) against PyTorch at batch 128.
    t=$(left); [ "$t" -gt "$bench_timeout" ] && t=$bench_timeout
    if [ "$rc" = 0 ] && [ "$t" -ge 30 ]; then
      echo "== benchmark: resnet20 (at most $t s)"
      TMPDIR="$logs" timeout -k 5 "$t" bash "$B/gpu_bench.sh" --model resnet20 --batches 128 \
        --steps "$steps" 2>&1 | tee "$out/bench_resnet20.txt"
      rc=${PIPESTATUS[0]}
      cp "$out/bench_resnet20.txt" "$logs/bench_resnet20.txt"
      case "$rc" in
        0) bench_line="$bench_line resnet20_$(tail -1 "$logs/bench_resnet20.txt")" ;;
        *) bench_line="FAILED (resnet20: exit $rc; bench_resnet20.txt)" ;;
      esac
    fi
  fi
fi

# --- archive and summary --------------------------------------------------------------
elapsed=$(( $(date +%s) - start ))
summary="gpu_check: gpu=$gpu glibc=${glibc:-?} torch=${torch:-none} smoke=$smoke tests=[$tests] bench=[$bench_line] ${elapsed}s"
echo "$summary" > "$logs/summary.txt"
cp "$logs/summary.txt" "$out/summary.txt"
tar -C "$logs" -czf "$out/gpu_check_logs.tar.gz" . 2>/dev/null \
  || echo "gpu_check: could not write $out/gpu_check_logs.tar.gz" >&2
echo "$summary"
ok=1
[ "$smoke" = passed ] || ok=0
case "$tests" in *" passed, 0 failed"*) ;; *) ok=0 ;; esac
case "$bench_line" in skipped|ratio_*) ;; *) ok=0 ;; esac
[ "$ok" = 1 ]
