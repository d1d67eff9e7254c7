#!/usr/bin/env bash
# run.sh [--cuda-libs DIR[:DIR]] [--print-libs] PROGRAM [ARGS...]: runs a
# program of this bundle (bin/PROGRAM, or any command) with its libraries.
#
# 1. glibc: the machine's must be at least NEEDS' glibc_bin_lib (what bin/
#    and lib/ need); otherwise it says so and stops.
# 2. The C++ runtime: the machine's own libstdc++.so.6 and libgcc_s.so.1
#    when they define the newest GLIBCXX, CXXABI and GCC versions in NEEDS;
#    otherwise the copies in lib/cxx (which need NEEDS' glibc_cxx).
# 3. The CUDA libraries come from the machine: libcublas.so.13 and
#    libcublasLt.so.13 (cuBLAS 13) and libcudnn.so.9 (cuDNN 9) are required,
#    libnvrtc.so.13 is optional; the driver's libcuda.so.1 is found by the
#    loader. Looked for in --cuda-libs, $PSGD_CUDA_LIBS, ldconfig's cache,
#    the lib folders of python3's nvidia pip packages (PyTorch's
#    nvidia-cublas-cu13 and nvidia-cudnn-cu13 wheels), and
#    /usr/local/cuda*/lib64, /usr/local/cuda*/targets/x86_64-linux/lib,
#    /usr/lib/x86_64-linux-gnu. A missing required library stops it with a
#    message naming it and the places searched.
# --print-libs prints the choices (and runs PROGRAM if one is given).
# PSGD_CUDA_SEARCH=DIR[:DIR] replaces the search after --cuda-libs (no
# ldconfig, no python3): for odd layouts and for scripts/gpu/bundle_test.sh.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dirs="${PSGD_CUDA_LIBS:-}"
print=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda-libs)
      [ $# -ge 2 ] || { echo "run.sh: --cuda-libs needs DIR[:DIR]" >&2; exit 2; }
      dirs="$2"; shift 2 ;;
    --print-libs) print=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) echo "run.sh: unknown option $1 (run.sh --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ] && [ "$print" = 0 ]; then sed -n '2,23p' "$0" >&2; exit 2; fi

need() { sed -n "s/^$1=//p" "$here/NEEDS" 2>/dev/null; }
# version_ge A B: A >= B for dotted versions (A empty: false; B empty: true).
version_ge() {
  [ -z "$2" ] && return 0
  [ -z "$1" ] && return 1
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]
}

# --- 1. glibc -------------------------------------------------------------------
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
want_glibc=$(need glibc_bin_lib); want_glibc=${want_glibc#GLIBC_}
if [ -n "$glibc" ] && ! version_ge "$glibc" "$want_glibc"; then
  echo "run.sh: this machine has glibc $glibc; the bundle's binaries and" \
       "libraries (gRPC, protobuf, Abseil from Debian 12) need glibc" \
       ">= $want_glibc. Rebuild the bundle on a system no newer than this one" \
       "(docs/GPU.md, \"The bundle\")." >&2
  exit 1
fi

# --- 2. the C++ runtime -----------------------------------------------------------
# system_lib SONAME: its path in ldconfig's cache (x86-64 entries), or in
# the usual folders.
system_lib() {
  local p
  p=$(ldconfig -p 2>/dev/null | awk -v l="$1" '$1 == l && /x86-64/ {print $NF; exit}')
  if [ -z "$p" ]; then
    for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
      [ -e "$d/$1" ] && { p="$d/$1"; break; }
    done
  fi
  echo "$p"
}
# defines FILE TAG: FILE names version TAG (e.g. GLIBCXX_3.4.30) in its
# version definitions; a library that has a version has all older ones.
defines() { [ -z "$2" ] || grep -qaF "$2" "$1" 2>/dev/null; }
cxx_dir=""
cxx_why=""
sys_stdcxx=$(system_lib libstdc++.so.6)
sys_gcc=$(system_lib libgcc_s.so.1)
if [ -z "$sys_stdcxx" ] || [ -z "$sys_gcc" ]; then
  cxx_why="the machine has no libstdc++.so.6 / libgcc_s.so.1"
elif ! defines "$sys_stdcxx" "$(need glibcxx)" || ! defines "$sys_stdcxx" "$(need cxxabi)"; then
  cxx_why="$sys_stdcxx lacks $(need glibcxx) or $(need cxxabi)"
elif ! defines "$sys_gcc" "$(need gcc)"; then
  cxx_why="$sys_gcc lacks $(need gcc)"
fi
if [ -n "$cxx_why" ]; then
  want=$(need glibc_cxx); want=${want#GLIBC_}
  if [ -n "$glibc" ] && ! version_ge "$glibc" "$want"; then
    echo "run.sh: $cxx_why, and the bundle's own copies (lib/cxx) need glibc" \
         ">= $want; this machine has $glibc. Install a newer libstdc++ (GCC 12" \
         "or later) or rebuild the bundle on an older system." >&2
    exit 1
  fi
  cxx_dir="$here/lib/cxx"
fi

# --- 3. the CUDA libraries -----------------------------------------------------
required=(libcublas.so.13 libcublasLt.so.13 libcudnn.so.9)
optional=(libnvrtc.so.13)

# The places to look, in order (each an existing folder).
search=()
for d in ${dirs//:/ }; do search+=("$d"); done
py_dirs=()
if [ -n "${PSGD_CUDA_SEARCH:-}" ]; then
  for d in ${PSGD_CUDA_SEARCH//:/ }; do search+=("$d"); done
else
  if command -v python3 >/dev/null 2>&1; then
    # Where the pip packages are, without importing them: nvidia is a
    # namespace package (one folder per wheel: nvidia/cu13/lib,
    # nvidia/cudnn/lib, ...); some torch wheels carry the libraries in
    # torch/lib. Bounded: those folders only, no recursive search.
    mapfile -t py_dirs < <(timeout 60 python3 -c '
import importlib.util as u
for name, sub in (("nvidia", "*/lib"), ("torch", "lib")):
    try:
        s = u.find_spec(name)
    except Exception:
        continue
    for p in (s.submodule_search_locations or []) if s else []:
        print(p + "/" + sub)' 2>/dev/null)
  fi
  for g in "${py_dirs[@]+"${py_dirs[@]}"}"; do
    for d in $g; do search+=("$d"); done
  done
  for d in /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib \
           /usr/lib/x86_64-linux-gnu /usr/lib64; do
    search+=("$d")
  done
fi

find_lib() {  # prints the folder holding $1, or nothing
  local d p
  for d in ${dirs//:/ }; do [ -e "$d/$1" ] && { echo "$d"; return 0; }; done
  if [ -z "${PSGD_CUDA_SEARCH:-}" ]; then
    p=$(ldconfig -p 2>/dev/null | awk -v l="$1" '$1 == l && /x86-64/ {print $NF; exit}')
    if [ -n "$p" ]; then dirname "$p"; return 0; fi
  fi
  for d in "${search[@]}"; do
    [ -e "$d/$1" ] && { echo "$d"; return 0; }
  done
  return 0
}

found=""
missing=()
notes=()
for lib in "${required[@]}" "${optional[@]}"; do
  d=$(find_lib "$lib")
  if [ -z "$d" ]; then
    case " ${required[*]} " in
      *" $lib "*) missing+=("$lib") ;;
      *) notes+=("optional $lib not found (cuDNN's runtime-compiled kernels are then unavailable)") ;;
    esac
    continue
  fi
  [ "$print" = 1 ] && notes+=("$lib: $d/$lib -> $(readlink -f "$d/$lib")")
  case ":$found:" in *":$d:"*) ;; *) found="${found:+$found:}$d" ;; esac
done
if [ ${#missing[@]} -gt 0 ]; then
  {
    echo "run.sh: required CUDA libraries not found: ${missing[*]}"
    echo "  looked in: --cuda-libs/\$PSGD_CUDA_LIBS (${dirs:-none}), ldconfig -p,"
    for d in "${search[@]}"; do [ -d "$d" ] && echo "    $d"; done
    [ ${#py_dirs[@]} -eq 0 ] && echo "  (python3 has neither an 'nvidia' nor a 'torch' package)"
    echo "  This build needs cuBLAS 13 (libcublas.so.13, libcublasLt.so.13) and"
    echo "  cuDNN 9 (libcudnn.so.9): PyTorch's nvidia-cublas and nvidia-cudnn-cu13"
    echo "  wheels or the CUDA 13 toolkit, or pass --cuda-libs DIR. A PyTorch built"
    echo "  for CUDA 12 ships libcublas.so.12, which this build cannot use."
  } >&2
  exit 1
fi

export LD_LIBRARY_PATH="$here/lib${cxx_dir:+:$cxx_dir}:$found${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ "$print" = 1 ]; then
  echo "run.sh: glibc ${glibc:-?} (bundle needs >= ${want_glibc:-?})"
  if [ -n "$cxx_dir" ]; then
    echo "run.sh: C++ runtime: the bundle's lib/cxx ($cxx_why)"
  else
    echo "run.sh: C++ runtime: the machine's $sys_stdcxx -> $(readlink -f "$sys_stdcxx"), $sys_gcc"
  fi
  for n in "${notes[@]+"${notes[@]}"}"; do echo "run.sh: $n"; done
  echo "run.sh: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [ $# -eq 0 ] && exit 0
else
  for n in "${notes[@]+"${notes[@]}"}"; do echo "run.sh: $n" >&2; done
fi
prog="$1"; shift
case "$prog" in */*) ;; *) [ -x "$here/bin/$prog" ] && prog="$here/bin/$prog" ;; esac
exec "$prog" "$@"
