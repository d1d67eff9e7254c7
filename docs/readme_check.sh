#!/usr/bin/env bash
# Checks that README.md says only what exists and stays a first screen:
#   - the demo and test commands (`bash scripts/demo.sh`, and the test
#     command that .ci/run runs) within its first 30 lines;
#   - at most 130 lines;
#   - every relative markdown link and every docs/...md path it names exists;
#   - every scripts/..., configs/..., tests/... and examples/... path exists;
#   - every Bazel target //pkg:name it names is a rule in pkg/BUILD.bazel;
#   - every doc in docs/, docs/history/ and docs/dev/ is linked from it;
#   - no issue numbers in README.md and docs/*.md (they belong in
#     docs/history/).
# Prints each problem and exits 1 if there is any.
#
#   bash docs/readme_check.sh          # by hand, from anywhere
#   bazel test //docs:readme_check_test
set -uo pipefail

# The repository root. Under `bazel test` the runfiles hold README.md as a
# link into the source tree: follow it, so that scripts/, configs/ and the
# BUILD files are seen as they are. By hand: this script's parent folder.
if [ -n "${TEST_SRCDIR:-}" ]; then
  runfiles_readme="$TEST_SRCDIR/${TEST_WORKSPACE:-psgd}/README.md"
  if [ ! -e "$runfiles_readme" ]; then
    echo "readme_check: no README.md in the runfiles ($runfiles_readme)" >&2
    exit 1
  fi
  root=$(dirname "$(readlink -f "$runfiles_readme")")
else
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fi
readme="$root/README.md"
cd "$root" || exit 1

problems=0
problem() {
  echo "readme_check: $*"
  problems=$((problems + 1))
}

if [ ! -f "$readme" ]; then
  echo "readme_check: no README.md in $root" >&2
  exit 1
fi

# --- the first screen -------------------------------------------------------
lines=$(wc -l <"$readme")
if [ "$lines" -gt 130 ]; then
  problem "README.md has $lines lines (at most 130)"
fi

# The test command: the one .ci/run runs (CI greps for it), else the default.
test_cmd="bash scripts/test.sh"
if [ -f .ci/run ] && ! grep -qE '^bash scripts/test\.sh( |$)' .ci/run; then
  problem ".ci/run no longer runs 'bash scripts/test.sh': update this check and the README together"
fi
for cmd in "bash scripts/demo.sh" "$test_cmd"; do
  first=$(grep -nF -- "$cmd" "$readme" | head -1 | cut -d: -f1)
  if [ -z "$first" ]; then
    problem "README.md does not give the command '$cmd'"
  elif [ "$first" -gt 30 ]; then
    problem "README.md gives '$cmd' at line $first (it must be within the first 30 lines)"
  fi
done

# --- links and paths --------------------------------------------------------
# Relative markdown links: ](target) that is not a URL or an anchor alone.
while IFS= read -r target; do
  path=${target%%#*}
  [ -z "$path" ] && continue
  case "$path" in
    http://* | https://* | mailto:*) continue ;;
  esac
  if [ ! -e "$path" ]; then
    problem "README.md links to '$target', which does not exist"
  elif [[ "$target" == *.md#* ]]; then
    # The anchor: a heading of that page, as GitHub makes its id.
    anchor=${target#*#}
    if ! grep -E '^#{1,6} ' "$path" | sed -E 's/^#+ +//' | tr 'A-Z' 'a-z' \
         | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g' | grep -qxF -- "$anchor"; then
      problem "README.md links to '$target': $path has no heading with that anchor"
    fi
  fi
done < <(grep -oE '\]\([^)[:space:]]+\)' "$readme" | sed -E 's/^\]\((.*)\)$/\1/')

# Paths named in the text (code spans, commands, links alike).
while IFS= read -r path; do
  path=${path%%#*}
  path=${path%.}
  path=${path%,}
  case "$path" in
    *'*'* | *...*) continue ;;  # a pattern, not a file
  esac
  if [ ! -e "$path" ]; then
    problem "README.md names '$path', which does not exist"
  fi
done < <(grep -oE '(^|[^A-Za-z0-9_./-])(docs|scripts|configs|tests|examples)/[A-Za-z0-9_./*#-]+' "$readme" \
           | sed -E 's/^[^A-Za-z0-9_.]//' | sort -u)

# Bazel targets: //pkg:name (or //pkg, meaning //pkg:pkg); //... and
# //pkg/... are patterns.
while IFS= read -r label; do
  case "$label" in
    *...*) continue ;;
  esac
  pkg=${label#//}
  if [[ "$pkg" == *:* ]]; then
    name=${pkg#*:}
    pkg=${pkg%%:*}
  else
    name=${pkg##*/}
  fi
  build=""
  for f in "$pkg/BUILD.bazel" "$pkg/BUILD"; do
    [ -f "$f" ] && build=$f && break
  done
  if [ -z "$build" ]; then
    problem "README.md names '$label', but there is no $pkg/BUILD.bazel"
  elif ! grep -qE "name = \"$name\"" "$build" &&
       ! grep -qF "\"$name\"" <(sed -n '/exports_files/,/)/p' "$build"); then
    problem "README.md names '$label', but $build has no rule named \"$name\""
  fi
done < <(grep -oE '//[A-Za-z0-9_./-]*(:[A-Za-z0-9_.+-]+)?' "$readme" \
           | grep -vE '^//$' | sort -u)

# Every doc is linked from the README.
for doc in docs/*.md docs/history/*.md docs/dev/*.md; do
  [ -e "$doc" ] || continue
  if ! grep -qF "]($doc" "$readme"; then
    problem "README.md does not link to $doc"
  fi
done

# --- issue numbers ----------------------------------------------------------
hits=$(grep -nHiE 'issues? #?[0-9]|\(#[0-9]+\)' README.md docs/*.md)
if [ -n "$hits" ]; then
  problem "issue numbers in user-facing docs (they belong in docs/history/):"
  echo "$hits" | sed 's/^/  /'
fi

if [ "$problems" -gt 0 ]; then
  echo "readme_check: $problems problem(s)"
  exit 1
fi
echo "readme_check: README.md ($lines lines) and docs/ are consistent"
