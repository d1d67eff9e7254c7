#!/usr/bin/env bash
# scripts/test.sh's counting (scripts/lib/test_count.sh) on a made-up bazel
# run: only real passes count as passed; FLAKY and TIMEOUT count as failed;
# a passed test whose log says "SKIP: " and an incompatible target count as
# skipped; a bazel failure with no failing test counts as one failure.
set -euo pipefail
source "${TEST_SRCDIR:?run under bazel test}/psgd/scripts/lib/test_count.sh"
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/count.XXXXXX")
fail() { echo "FAIL: $*"; exit 1; }

cat > "$dir/bazel.log" <<'LOG'
INFO: Build completed, 3 tests FAILED, 40 total actions
//a:one_test                                                             PASSED in 0.4s
//a:two_test                                                    (cached) PASSED in 1.2s
//b/c:winograd_test                                                      PASSED in 0.1s
//b:retried_test                                                          FLAKY, failed in 1 out of 2 in 3.0s
//b:broken_test                                                          FAILED in 2.0s
//b:slow_test                                                           TIMEOUT in 300.0s
//gpu:dense_test                                                         SKIPPED
  /root/.cache/bazel/execroot/psgd/bazel-out/k8-fastbuild/testlogs/b/broken_test/test.log
//not:a summary line PASSED
Executed 6 out of 7 tests: 3 tests pass and 3 fail locally.
LOG
mkdir -p "$dir/testlogs/a/one_test" "$dir/testlogs/b/c/winograd_test"
printf 'ok\nall passed\n' > "$dir/testlogs/a/one_test/test.log"
printf 'x\nSKIP: needs AVX-512\n' > "$dir/testlogs/b/c/winograd_test/test.log"

rc=0
count_tests "$dir/bazel.log" "$dir/testlogs" 3 > "$dir/out" || rc=$?
cat "$dir/out"
[ "$rc" -ne 0 ] || fail "a run with failures returned 0"
[ "$(tail -n 1 "$dir/out")" = "2 passed, 3 failed, 2 skipped" ] ||
  fail "counted: $(tail -n 1 "$dir/out"), want 2 passed, 3 failed, 2 skipped"
grep -q "^  //b/c:winograd_test (needs AVX-512)$" "$dir/out" || fail "the SKIP reason is not named"
for t in //b:retried_test //b:broken_test //b:slow_test; do
  grep -q "^  $t$" "$dir/out" || fail "$t is not listed as failing"
done

# Every test passed but bazel failed (a build error): one failure.
grep -E "PASSED|^INFO" "$dir/bazel.log" > "$dir/build_error.log"
rc=0
count_tests "$dir/build_error.log" "$dir/testlogs" 1 > "$dir/out2" || rc=$?
[ "$rc" -ne 0 ] || fail "a failed bazel run returned 0"
[ "$(tail -n 1 "$dir/out2")" = "2 passed, 1 failed, 1 skipped" ] ||
  fail "build error counted: $(tail -n 1 "$dir/out2")"

# All passed, bazel 0: status 0.
count_tests "$dir/build_error.log" "$dir/testlogs" 0 > "$dir/out3" || fail "a clean run returned non-zero"
echo "PASS"
