#!/usr/bin/env bash
# Packs built binaries and the shared libraries they need into one folder
# (and a .tar.xz of it) that runs on a CUDA machine without Bazel, gRPC,
# protobuf, Abseil, oneDNN or OpenBLAS: the lent GPU machine (docs/GPU.md).
#
#   scripts/pack_gpu_bundle.sh [--out DIR] [--no-build] [--config CFG]
#                              [--data FILE]... [TARGET...]
#
# TARGET defaults to every test tagged gpu under //worker/gpu,
# //worker/gpu:gpu_options_test, //worker/gpu:gpu_bench, and //ps:ps_server
# and //worker:worker when they exist. Binaries are built with
# `bazel build -c opt --strip=always` unless --no-build (then bazel-bin's are
# taken as they are). --data copies a file (e.g. a CIFAR-10 .bin) into
# DIR/data/, xz-compressed, for the device tool to carry beside the bundle.
#
# DIR (default gpu_bundle/, ignored by git) gets the folder DIR/psgd_gpu/,
# its archive DIR/psgd_gpu.tar.xz (what the device tool carries; the script
# says whether it fits the tool's 64 MiB), and DIR/data/. In the folder:
#   bin/       the binaries
#   lib/       every library `ldd` resolves for them except the C library
#              family (libc, libm, libdl, librt, libpthread, ld-linux, ...),
#              the driver (libcuda) and the CUDA libraries the target must
#              have: libcublas.so.13, libcublasLt.so.13, libcudnn*.so.9 (too
#              big to carry: 54 + 541 MB and about 500 MB; see docs/GPU.md)
#   run.sh     run.sh PROGRAM ARGS...: finds the CUDA libraries on the
#              target, sets LD_LIBRARY_PATH and runs PROGRAM
#   run_gpu_tests.sh  runs every bin/*_test and prints `N passed, M failed`
#   gpu_bench.sh      scripts/gpu_bench.sh, to compare with PyTorch there
#   peers/     ../shared/peers/torch_cifar10_step.py when this checkout has it
#   MANIFEST   what is in it, with sizes
set -euo pipefail
cd "$(dirname "$0")/.."

dir=gpu_bundle
build=1
config=()
data=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) dir="$2"; shift 2 ;;
    --data) data+=("$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    --config) config+=("--config=$2"); shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) echo "pack_gpu_bundle: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

if [ ${#targets[@]} -eq 0 ]; then
  # Tests tagged gpu (bazel query lists them even where they are
  # incompatible, so check the toolkit first).
  if ! bazel query 'attr(tags, "\bgpu\b", tests(//worker/gpu/...))' >/dev/null 2>&1; then
    echo "pack_gpu_bundle: bazel query failed" >&2; exit 1
  fi
  mapfile -t targets < <(bazel query 'attr(tags, "\bgpu\b", tests(//worker/gpu/...))' 2>/dev/null)
  targets+=(//worker/gpu:gpu_options_test //worker/gpu:gpu_bench)
  for t in //ps:ps_server //worker:worker; do
    if bazel query "$t" >/dev/null 2>&1; then targets+=("$t"); fi
  done
fi
echo "pack_gpu_bundle: ${#targets[@]} targets"

if [ "$build" = 1 ]; then
  bazel build -c opt --strip=always "${config[@]+"${config[@]}"}" -- "${targets[@]}"
fi
bin_dir=$(bazel info -c opt "${config[@]+"${config[@]}"}" bazel-bin 2>/dev/null)

out="$dir/psgd_gpu"
rm -rf "$out" "$out.tar.xz"
mkdir -p "$out/bin" "$out/lib"

# Libraries the target provides or that must match its kernel and driver.
skip_re='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libutil|libcuda|libnvidia-|libcublas|libcublasLt|libcudnn|libnvrtc)(\.|-|_)'

for t in "${targets[@]}"; do
  # //a/b:c -> bazel-bin/a/b/c
  rel="${t#//}"
  pkg="${rel%%:*}"
  name="${rel#*:}"
  [ "$name" = "$rel" ] && name="${pkg##*/}"
  path="$bin_dir/$pkg/$name"
  if [ ! -x "$path" ]; then
    echo "pack_gpu_bundle: $t is not built ($path); skipped" >&2
    continue
  fi
  cp -L "$path" "$out/bin/$name"
  chmod u+w "$out/bin/$name"
  # ldd: "libfoo.so.1 => /path/libfoo.so.1 (0x...)" or "not found".
  while read -r soname arrow libpath _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$libpath" = "not" ]; then
      case "$soname" in
        libcublas*|libcudnn*|libnvrtc*|libcuda.*) continue ;;
      esac
      echo "pack_gpu_bundle: $name needs $soname, which is not found here" >&2
      exit 1
    fi
    if [[ "$soname" =~ $skip_re ]]; then continue; fi
    [ -e "$out/lib/$soname" ] || cp -L "$libpath" "$out/lib/$soname"
  done < <(ldd "$path")
done
chmod -R u+w "$out/lib"

# --- run.sh ----------------------------------------------------------------
cat > "$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# run.sh PROGRAM [ARGS...]: runs a program of this bundle with its libraries.
# The CUDA libraries come from the machine: libcublas.so.13 and
# libcublasLt.so.13 (cuBLAS 13), libcudnn.so.9 and its sub-libraries
# (cuDNN 9), optionally libnvrtc.so.13 (cuDNN's runtime-compiled kernels),
# and the driver's libcuda.so.1 (driver 580 or newer for CUDA 13). They are
# looked for in --cuda-libs DIR[:DIR] (before PROGRAM), then with ldconfig,
# in the pip packages of python3's PyTorch (nvidia/*/lib), in
# /usr/local/cuda*/lib64, and finally with find /. The directories found are
# cached in .cuda_lib_dirs here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dirs=""
if [ "${1:-}" = "--cuda-libs" ]; then dirs="$2"; shift 2; fi
[ $# -ge 1 ] || { sed -n '2,10p' "$0"; exit 2; }

needed=(libcublas.so.13 libcublasLt.so.13 libcudnn.so.9)
optional=(libnvrtc.so.13)

find_lib() {  # prints the directory holding $1, or nothing
  local lib="$1" d
  for d in ${dirs//:/ }; do [ -e "$d/$lib" ] && { echo "$d"; return; }; done
  d=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
  [ -n "$d" ] && { dirname "$d"; return; }
  local py
  py=$(python3 -c 'import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]) + "/nvidia")' 2>/dev/null || true)
  for d in $py /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib; do
    [ -d "$d" ] || continue
    local f
    f=$(find "$d" -name "$lib" -print -quit 2>/dev/null)
    [ -n "$f" ] && { dirname "$f"; return; }
  done
  d=$(find / -xdev \( -path /proc -o -path /sys \) -prune -o -name "$lib" -print -quit 2>/dev/null)
  [ -n "$d" ] && dirname "$d"
}

if [ -z "$dirs" ] && [ -f "$here/.cuda_lib_dirs" ]; then
  dirs=$(cat "$here/.cuda_lib_dirs")
fi
found=""
missing=()
for lib in "${needed[@]}" "${optional[@]}"; do
  d=$(find_lib "$lib")
  if [ -z "$d" ]; then
    case " ${needed[*]} " in *" $lib "*) missing+=("$lib") ;; esac
    continue
  fi
  case ":$found:" in *":$d:"*) ;; *) found="${found:+$found:}$d" ;; esac
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "run.sh: missing ${missing[*]} (CUDA 13 cuBLAS / cuDNN 9). Install" \
       "PyTorch's nvidia-cublas and nvidia-cudnn-cu13 wheels or the CUDA 13" \
       "toolkit, or pass --cuda-libs DIR. A PyTorch built for CUDA 12 ships" \
       "libcublas.so.12, which this build (CUDA 13) cannot use." >&2
  exit 1
fi
echo "$found" > "$here/.cuda_lib_dirs" 2>/dev/null || true
export LD_LIBRARY_PATH="$here/lib:$found${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
prog="$1"; shift
case "$prog" in */*) ;; *) [ -x "$here/bin/$prog" ] && prog="$here/bin/$prog" ;; esac
exec "$prog" "$@"
EOF

# --- run_gpu_tests.sh --------------------------------------------------------
cat > "$out/run_gpu_tests.sh" <<'EOF'
#!/usr/bin/env bash
# Runs every test of the bundle (bin/*_test) through run.sh; prints each
# result and ends with `N passed, M failed`. Arguments go to every test
# (Catch2's, e.g. -s for all assertions).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
passed=0; failed=0; failing=()
for t in "$here"/bin/*_test; do
  name=$(basename "$t")
  start=$(date +%s)
  if (cd "$here" && "$here/run.sh" "$t" "$@" > "$here/$name.log" 2>&1); then
    passed=$((passed + 1)); echo "PASSED $name ($(( $(date +%s) - start )) s)"
  else
    failed=$((failed + 1)); failing+=("$name"); echo "FAILED $name ($(( $(date +%s) - start )) s)"
    tail -40 "$here/$name.log" | sed 's/^/    /'
  fi
done
echo "$passed passed, $failed failed${failing:+ (${failing[*]})}"
[ "$failed" -eq 0 ]
EOF
chmod +x "$out/run.sh" "$out/run_gpu_tests.sh"
cp scripts/gpu_bench.sh "$out/gpu_bench.sh"
if [ -f ../shared/peers/torch_cifar10_step.py ]; then
  mkdir -p "$out/peers"
  cp ../shared/peers/torch_cifar10_step.py "$out/peers/"
fi

# --- manifest and archive -------------------------------------------------------
{
  echo "gpu bundle from $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "needs on the target: libcuda.so.1 (driver >= 580), libcublas.so.13, libcublasLt.so.13, libcudnn.so.9"
  (cd "$out" && find . -type f ! -name MANIFEST -printf '%10s  %p\n' | sort -k2)
} > "$out/MANIFEST"
tar -C "$dir" -cJf "$out.tar.xz" psgd_gpu
size=$(stat -c %s "$out.tar.xz")
echo "pack_gpu_bundle: $out ($(du -sh "$out" | cut -f1)), $out.tar.xz $((size / 1024 / 1024)) MiB"
if [ ${#data[@]} -gt 0 ]; then
  rm -rf "$dir/data"
  mkdir -p "$dir/data"
  for f in "${data[@]}"; do
    xz -6 -T0 -c "$f" > "$dir/data/$(basename "$f").xz"
  done
  size=$((size + $(du -cb "$dir/data" | tail -1 | cut -f1)))
  echo "pack_gpu_bundle: $dir/data $(du -sh "$dir/data" | cut -f1)"
fi
if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
  echo "pack_gpu_bundle: WARNING: $((size / 1024 / 1024)) MiB is over the device tool's 64 MiB" >&2
fi
