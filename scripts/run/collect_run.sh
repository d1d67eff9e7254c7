#!/usr/bin/env bash
# Gathers a run whose tasks wrote on their own hosts into one directory, one
# folder per host, for scripts/run/compare.py:
#
#   scripts/run/collect_run.sh OUT SOURCE [SOURCE...]
#
# A SOURCE is HOST:DIR (copied over ssh with rsync, or scp when rsync is
# missing) or a local DIR (e.g. a namespace host's folder, or a copy already
# fetched); each lands in OUT/<name>/, the name being HOST (or the DIR's base
# name for a local one). Nothing is deleted; a folder that OUT already has is
# refused. Then: scripts/run/compare.py OUT.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
out=$1; shift
mkdir -p "$out"
for src in "$@"; do
  if [[ $src == *:* && ! -e $src ]]; then
    host=${src%%:*}; dir=${src#*:}; name=$host
  else
    host=""; dir=$src; name=$(basename "$src")
    [ -d "$dir" ] || { echo "collect_run.sh: '$dir' is not a directory" >&2; exit 1; }
  fi
  if [ -e "$out/$name" ]; then
    echo "collect_run.sh: $out/$name is already there (two sources named '$name'?)" >&2
    exit 1
  fi
  mkdir -p "$out/$name"
  if [ -z "$host" ]; then
    cp -a "$dir/." "$out/$name/"
  elif command -v rsync >/dev/null 2>&1; then
    rsync -a "$host:$dir/" "$out/$name/"
  else
    scp -qr "$host:$dir/." "$out/$name/"
  fi
  echo "collect_run.sh: $src -> $out/$name"
done
echo "collect_run.sh: now scripts/run/compare.py $out"
