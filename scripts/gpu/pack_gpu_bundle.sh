#!/usr/bin/env bash
# Packs built binaries and the shared libraries they need into one folder
# (and a .tar.xz of it) that runs on a CUDA machine without Bazel, gRPC,
# protobuf, Abseil, oneDNN or OpenBLAS: the lent GPU machine (docs/GPU.md).
#
#   scripts/gpu/pack_gpu_bundle.sh [--out DIR] [--no-build] [--config CFG]
#                              [--data FILE]... [TARGET...]
#
# TARGET defaults to every test tagged gpu under //worker/gpu,
# //worker/gpu/tests:gpu_options_test, //third_party/cuda:cuda_smoke_test,
# //worker/bench:gpu_bench, and //ps:ps_server and //worker:worker when they
# exist. Binaries are built with
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
#              the driver (libcuda), the C++ runtime and the CUDA libraries
#              the target must have: libcublas.so.13, libcublasLt.so.13,
#              libcudnn*.so.9 (too big to carry: 54 + 541 MB and about
#              500 MB; see docs/GPU.md)
#   lib/cxx/   this machine's libstdc++.so.6 and libgcc_s.so.1, which run.sh
#              uses only when the target's own are older than the binaries
#              need
#   NEEDS      the newest symbol versions the binaries and lib/ need
#              (GLIBC, GLIBCXX, CXXABI, GCC), measured with objdump -T
#   run.sh     run.sh PROGRAM ARGS...: checks glibc, chooses the C++
#              runtime, finds the CUDA libraries on the target, sets
#              LD_LIBRARY_PATH and runs PROGRAM
#   run_gpu_tests.sh  runs every bin/*_test, each under a timeout, and
#              prints `N passed, M failed`
#   gpu_check.sh      scripts/gpu/gpu_check.sh: the whole GPU check in one call
#   gpu_bench.sh      scripts/gpu/gpu_bench.sh, to compare with PyTorch there
#   peers/     ../shared/peers/torch_cifar10_step.py when this checkout has it
#   MANIFEST   what is in it, with sizes
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=gpu_bundle
build=1
config=()
data=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--data|--config)
      [ $# -ge 2 ] || { echo "pack_gpu_bundle: $1 needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    --out) dir="$2"; shift 2 ;;
    --data)
      [ -f "$2" ] || { echo "pack_gpu_bundle: --data $2: no such file" >&2; exit 2; }
      data+=("$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    --config) config+=("--config=$2"); shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
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
  targets+=(//worker/gpu/tests:gpu_options_test //third_party/cuda:cuda_smoke_test
            //worker/bench:gpu_bench)
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
mkdir -p "$out/bin" "$out/lib/cxx"

# Libraries the target provides or that must match its kernel and driver.
skip_re='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libutil|libcuda|libnvidia-|libcublas|libcublasLt|libcudnn|libnvrtc)(\.|-|_)'
# The C++ runtime: run.sh prefers the target's own (docs/GPU.md).
cxx_re='^(libstdc\+\+|libgcc_s)\.'

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
    dest="$out/lib"
    if [[ "$soname" =~ $cxx_re ]]; then dest="$out/lib/cxx"; fi
    [ -e "$dest/$soname" ] || cp -L "$libpath" "$dest/$soname"
  done < <(ldd "$path")
done
chmod -R u+w "$out/lib"

# --- NEEDS: the newest symbol versions required ------------------------------
# objdump -T lists undefined symbols as "... *UND* ... (GLIBC_2.34) name" (or
# without parentheses); the newest of each family is what the target needs.
newest() {  # newest FAMILY FILE...: the newest FAMILY_x.y.z the files need
  local fam="$1"; shift
  objdump -T "$@" 2>/dev/null | awk '/\*UND\*/' \
    | grep -oE "\b${fam}_[0-9][0-9.]*" | sort -u -V | tail -1
}
{
  echo "# The newest symbol versions this bundle needs (objdump -T, *UND*)."
  echo "# run.sh compares them with the target; docs/GPU.md explains."
  echo "glibc_bin_lib=$(newest GLIBC "$out"/bin/* "$out"/lib/*.so*)"
  echo "glibc_cxx=$(newest GLIBC "$out"/lib/cxx/*)"
  echo "glibcxx=$(newest GLIBCXX "$out"/bin/* "$out"/lib/*.so*)"
  echo "cxxabi=$(newest CXXABI "$out"/bin/* "$out"/lib/*.so*)"
  echo "gcc=$(newest GCC "$out"/bin/* "$out"/lib/*.so*)"
} > "$out/NEEDS"
sed 's/^/pack_gpu_bundle: NEEDS /' "$out/NEEDS" | grep -v '# '

# --- the scripts -----------------------------------------------------------------
# run.sh and run_gpu_tests.sh live in scripts/gpu/bundle/ (bash -n checked and
# tested there: scripts/gpu/bundle_test.sh).
cp scripts/gpu/bundle/run.sh scripts/gpu/bundle/run_gpu_tests.sh "$out/"
cp scripts/gpu/gpu_check.sh "$out/gpu_check.sh"
chmod +x "$out/run.sh" "$out/run_gpu_tests.sh" "$out/gpu_check.sh"
cp scripts/gpu/gpu_bench.sh "$out/gpu_bench.sh"
# The layer-graph networks' peer and the networks it imports.
mkdir -p "$out/peers"
cp worker/bench/torch_network_step.py worker/models/torch_check/torch_networks.py "$out/peers/"
if [ -f ../shared/peers/torch_cifar10_step.py ]; then
  mkdir -p "$out/peers"
  cp ../shared/peers/torch_cifar10_step.py "$out/peers/"
fi

# --- manifest and archive -------------------------------------------------------
{
  echo "gpu bundle from $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "built with: $(ls -l /usr/local/cuda 2>/dev/null | sed 's/.*-> //') ($("${CUDA_PATH:-/usr/local/cuda}"/bin/nvcc --version 2>/dev/null | grep -o 'release [0-9.]*'); libcudart_static linked in), $(gcc --version | head -1), $(getconf GNU_LIBC_VERSION)"
  echo "needs on the target: libcuda.so.1 (driver >= 580), libcublas.so.13, libcublasLt.so.13, libcudnn.so.9; $(grep '^glibc_bin_lib=' "$out/NEEDS")"
  (cd "$out" && find . -type f ! -name MANIFEST -printf '%10s  %p\n' | sort -k2)
} > "$out/MANIFEST"
tar -C "$dir" -cJf "$out.tar.xz" psgd_gpu
size=$(stat -c %s "$out.tar.xz")
echo "pack_gpu_bundle: $out ($(du -sh "$out" | cut -f1)), $out.tar.xz $(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1048576 }') MiB (a device call carries 64 MiB)"
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
