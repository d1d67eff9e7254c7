# How scripts/test.sh counts the targets of a `bazel test` run, sourced by it
# and by scripts/test_count_test.sh.
#
#   count_tests LOG TESTLOGS RC
#
# LOG: bazel's output (with --test_summary=short); TESTLOGS: the
# bazel-testlogs directory; RC: bazel's exit status. Prints what was skipped
# and failed and, last, one line `N passed, M failed, K skipped`; returns 0
# only when nothing failed and bazel exited 0.
#   passed:  PASSED, (cached) PASSED, unless the test's log has a line that
#            starts with "SKIP: " (the test cannot run here and said so);
#   skipped: those, and SKIPPED (incompatible with this machine);
#   failed:  everything else: FAILED, TIMEOUT, FLAKY (failed, then passed on
#            a retry), NO STATUS, INCOMPLETE, FAILED TO BUILD, ...; and one
#            when bazel failed before reporting a failing test.
count_tests() {
  local log=$1 testlogs=$2 rc=$3
  local summary passing incompatible failing failed passed skipped target rel reason
  local skipped_run=()
  # Summary lines look like "//ps:store_test   (cached) PASSED in 0.4s".
  summary=$(grep -E '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|REMOTE FAILURE|FAILED TO BUILD|SKIPPED)' "$log" || true)
  passing=$(grep -E ' (\(cached\) )?PASSED( |$)' <<<"$summary" | awk 'NF {print $1}' || true)
  incompatible=$(grep -E ' SKIPPED( |$)' <<<"$summary" | awk 'NF {print $1}' || true)
  failing=$(grep -vE ' (\(cached\) )?(PASSED|SKIPPED)( |$)' <<<"$summary" | awk 'NF {print $1}' || true)
  failed=$(grep -c . <<<"$failing" || true)
  passed=0
  while read -r target; do
    [ -n "$target" ] || continue
    rel=${target#//}
    rel=${rel/://}
    reason=""
    if [ -n "$testlogs" ] && [ -f "$testlogs/$rel/test.log" ]; then
      reason=$(grep -m1 '^SKIP: ' "$testlogs/$rel/test.log" || true)
    fi
    if [ -n "$reason" ]; then
      skipped_run+=("$target (${reason#SKIP: })")
    else
      passed=$((passed + 1))
    fi
  done <<<"$passing"
  skipped=$(($(grep -c . <<<"$incompatible" || true) + ${#skipped_run[@]}))

  echo
  if [ -n "$incompatible" ]; then
    echo "skipped (incompatible with this machine, e.g. no CUDA toolkit): $(grep -c . <<<"$incompatible")"
  fi
  if [ ${#skipped_run[@]} -gt 0 ]; then
    echo "skipped (the test said SKIP: it cannot run here):"
    printf '  %s\n' "${skipped_run[@]}"
  fi
  if [ "$failed" -gt 0 ]; then
    echo "failing targets:"
    sed 's/^/  /' <<<"$failing"
  fi
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    # bazel failed before any test ran (a build or analysis error).
    echo "bazel exited with status $rc before reporting a failing test (see the errors above)"
    failed=1
  fi
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ] && [ "$rc" -eq 0 ]
}
