#!/usr/bin/env bash
# The bundle's scripts without a GPU (scripts/gpu/bundle/, scripts/gpu/gpu_check.sh):
# run.sh names a missing required CUDA library and where it looked, goes on
# without the optional one, refuses an older glibc, chooses the C++ runtime;
# run_gpu_tests.sh stops a hanging test at its timeout and counts it;
# gpu_check.sh writes its files and ends with the summary; bad arguments are
# refused with a message.
set -uo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
check() {  # check NAME CONDITION...
  local name="$1"; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
has() { grep -qF -- "$2" "$1"; }

# A fake bundle: bin/ with a program that prints its library path, two
# tests (one passes, one hangs), NEEDS, lib/cxx.
B="$t/psgd_gpu"
mkdir -p "$B/bin" "$B/lib/cxx" "$t/cuda" "$t/empty"
cp "$src/bundle/run.sh" "$src/bundle/run_gpu_tests.sh" "$src/gpu_check.sh" "$B/"
printf '#!/bin/sh\necho "LD=$LD_LIBRARY_PATH"\n' > "$B/bin/showenv"
printf '#!/bin/sh\necho fine\n' > "$B/bin/a_test"
printf '#!/bin/sh\necho hanging\nsleep 60\n' > "$B/bin/b_test"
chmod +x "$B/bin/"*
needs() {  # needs GLIBC GLIBCXX
  printf 'glibc_bin_lib=GLIBC_%s\nglibc_cxx=GLIBC_2.2.5\nglibcxx=GLIBCXX_%s\ncxxabi=CXXABI_1.3\ngcc=GCC_3.0\n' "$1" "$2" > "$B/NEEDS"
}
needs 2.2.5 3.4
for l in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do : > "$t/cuda/$l"; done
export PSGD_CUDA_SEARCH="$t/empty"

# run.sh: all required libraries found, the optional one missing.
"$B/run.sh" --cuda-libs "$t/cuda" showenv > "$t/o" 2> "$t/e"; rc=$?
check "run.sh runs with the required libraries" [ "$rc" -eq 0 ]
check "run.sh puts lib/ and the CUDA folder on the path" has "$t/o" "LD=$B/lib:$t/cuda"
check "run.sh uses the machine's C++ runtime when new enough" bash -c "! grep -q 'lib/cxx' '$t/o'"
check "run.sh notes the missing optional libnvrtc" has "$t/e" "optional libnvrtc.so.13 not found"

# A required library missing: a clear message, exit 1.
rm "$t/cuda/libcudnn.so.9"
"$B/run.sh" --cuda-libs "$t/cuda" showenv > "$t/o" 2> "$t/e"; rc=$?
check "run.sh fails without libcudnn.so.9" [ "$rc" -eq 1 ]
check "run.sh names the missing library" has "$t/e" "required CUDA libraries not found: libcudnn.so.9"
check "run.sh says where it looked" has "$t/e" "$t/empty"
: > "$t/cuda/libcudnn.so.9"

# The C++ runtime: a version the machine's libstdc++ lacks -> lib/cxx.
needs 2.2.5 99.9.99
"$B/run.sh" --cuda-libs "$t/cuda" --print-libs showenv > "$t/o" 2>&1
check "run.sh falls back to lib/cxx for a too old libstdc++" has "$t/o" "LD=$B/lib:$B/lib/cxx:$t/cuda"
check "run.sh says why" has "$t/o" "lacks GLIBCXX_99.9.99"

# glibc too old for the bundle.
needs 99.0 3.4
"$B/run.sh" --cuda-libs "$t/cuda" showenv > "$t/o" 2> "$t/e"; rc=$?
check "run.sh refuses an older glibc" [ "$rc" -eq 1 ]
check "run.sh names the glibc needed" has "$t/e" "need glibc >= 99.0"
needs 2.2.5 3.4

"$B/run.sh" --bogus showenv > /dev/null 2> "$t/e"; rc=$?
check "run.sh refuses an unknown option" [ "$rc" -eq 2 ]
check "run.sh names it" has "$t/e" "unknown option --bogus"

# run_gpu_tests.sh: the hang is stopped at its timeout and counted.
export PSGD_CUDA_LIBS="$t/cuda"
"$B/run_gpu_tests.sh" --timeout 2 --logs "$t/logs" > "$t/o" 2>&1; rc=$?
check "run_gpu_tests.sh fails when a test fails" [ "$rc" -ne 0 ]
check "run_gpu_tests.sh reports the timeout" has "$t/o" "FAILED b_test (timed out after 2 s)"
check "run_gpu_tests.sh ends with the count" [ "$(tail -1 "$t/o")" = "1 passed, 1 failed (b_test)" ]
check "run_gpu_tests.sh keeps each log" has "$t/logs/a_test.log" "fine"
"$B/run_gpu_tests.sh" --timeout 60 --deadline $(( $(date +%s) + 12 )) --logs "$t/logs2" > "$t/o" 2>&1
check "run_gpu_tests.sh cuts a test's timeout to the deadline" \
  grep -qE "FAILED b_test \(timed out after (9|1[0-2]) s\)" "$t/o"
"$B/run_gpu_tests.sh" --timeout 60 --deadline $(( $(date +%s) + 3 )) --logs "$t/logs2" > "$t/o" 2>&1
check "run_gpu_tests.sh starts no test past the deadline" has "$t/o" "FAILED a_test (not started"
"$B/run_gpu_tests.sh" --timeout soon > /dev/null 2> "$t/e"; rc=$?
check "run_gpu_tests.sh refuses a bad timeout" [ "$rc" -eq 2 ]

# gpu_check.sh: files under OUT, the summary last.
rm "$B/bin/b_test"
OUT="$t/out" bash "$B/gpu_check.sh" --no-bench --test-timeout 5 > "$t/o" 2>&1; rc=$?
check "gpu_check.sh fails without cuda_smoke_test" [ "$rc" -ne 0 ]
last=$(tail -1 "$t/o")
check "gpu_check.sh ends with the summary" has <(echo "$last") "gpu_check: gpu="
check "gpu_check.sh counts the tests" has <(echo "$last") "tests=[1 passed, 0 failed]"
for f in preflight.txt tests.txt summary.txt gpu_check_logs.tar.gz; do
  check "gpu_check.sh writes $f" [ -s "$t/out/$f" ]
done
check "the archive holds each test's log" has <(tar -tzf "$t/out/gpu_check_logs.tar.gz") "tests/a_test.log"
bash "$B/gpu_check.sh" --out "$t/out2" --bundle "$t/nowhere" > /dev/null 2> "$t/e"; rc=$?
check "gpu_check.sh refuses a missing bundle" [ "$rc" -eq 2 ]
check "gpu_check.sh names it" has "$t/e" "$t/nowhere is not a bundle"
(unset OUT; bash "$B/gpu_check.sh" > /dev/null 2> "$t/e"); rc=$?
check "gpu_check.sh wants an output folder" [ "$rc" -eq 2 ] 
check "gpu_check.sh says so" has "$t/e" "set OUT or pass --out"

# gpu_session.sh: its bad arguments, before anything runs.
S="$src/gpu_session.sh"
bash "$S" --bogus > /dev/null 2> "$t/e"; rc=$?
check "gpu_session.sh refuses an unknown argument" [ "$rc" -eq 2 ]
check "gpu_session.sh names it" has "$t/e" "unknown argument --bogus"
bash "$S" --budget soon > /dev/null 2> "$t/e"; rc=$?
check "gpu_session.sh refuses a budget that is not a number" [ "$rc" -eq 2 ]
check "gpu_session.sh names the value" has "$t/e" "'soon' is not a number"
(unset OUT; bash "$S" > /dev/null 2> "$t/e"); rc=$?
check "gpu_session.sh wants \$OUT" [ "$rc" -eq 2 ]
(cd "$t" && OUT="$t/out3" bash "$S" > /dev/null 2> "$t/e"); rc=$?
check "gpu_session.sh wants the bundle's archive" [ "$rc" -eq 2 ]
check "gpu_session.sh says where it looked" has "$t/e" "no gpu_bundle/psgd_gpu.tar.xz"

echo "$fails failed"
[ "$fails" -eq 0 ]
