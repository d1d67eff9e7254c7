#!/usr/bin/env bash
# The project's C++ as clang-format (Debian 12's, version 14) writes it with
# the project's .clang-format (Google style): lists every tracked .cc, .h,
# .cu and .cuh file that differs and exits 1, or says how many are clean.
#   scripts/check_format.sh          check (CI runs this)
#   scripts/check_format.sh --fix    rewrite the files that differ
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format.sh: no clang-format (scripts/setup.sh installs it)" >&2
  exit 2
fi
fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  *) echo "check_format.sh: unknown option '$1' (expected --fix)" >&2; exit 2 ;;
esac
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
differ=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    differ+=("$f")
  fi
done
if [ ${#differ[@]} -eq 0 ]; then
  echo "check_format.sh: ${#files[@]} files as clang-format writes them ($(clang-format --version))"
  exit 0
fi
if [ "$fix" -eq 1 ]; then
  clang-format -i "${differ[@]}"
  echo "check_format.sh: rewrote ${#differ[@]} files"
  exit 0
fi
echo "check_format.sh: ${#differ[@]} of ${#files[@]} files differ from clang-format (scripts/check_format.sh --fix rewrites them):"
printf '  %s\n' "${differ[@]}"
exit 1
