#!/usr/bin/env bash
# Puts CIFAR-10's binary version where train_local looks by default
# (data/cifar-10-batches-bin/), checked.
#
#   scripts/run/get_cifar10.sh                      download the official archive
#   scripts/run/get_cifar10.sh ARCHIVE.tar.gz       use a local copy of the archive
#   scripts/run/get_cifar10.sh DIR                  use a directory that holds the
#                                               .bin files (or their
#                                               cifar-10-batches-bin/ folder)
#   options: --dest DIR   put cifar-10-batches-bin/ under DIR (default: data/
#                         in the repository)
#            --link       with a DIR source, link the files instead of copying
#
# The download is checked against the archive's published MD5; every source
# is checked for the six files and their sizes (10,000 records of 3,073
# bytes each). Without network access it says what to do instead. Exit
# status: 0 done, 1 failed, 2 usage.
set -euo pipefail

URL="https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
ARCHIVE_MD5="c32a1d4ab5d03f1284b67883e8d87530"
FILES=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin
       data_batch_5.bin test_batch.bin)
FILE_BYTES=30730000

root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/data"
link=0
source=""

usage() {
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() { echo "get_cifar10.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dest) [ $# -ge 2 ] || usage; dest="$2"; shift 2 ;;
    --link) link=1; shift ;;
    -h|--help) usage ;;
    -*) echo "get_cifar10.sh: unknown option '$1'" >&2; usage ;;
    *) [ -z "$source" ] || usage; source="$1"; shift ;;
  esac
done

out="$dest/cifar-10-batches-bin"

# Checks that directory $1 holds the six files with their sizes.
check_dir() {
  local dir="$1" f size
  for f in "${FILES[@]}"; do
    [ -e "$dir/$f" ] || die "$dir/$f is missing"
    size=$(stat -L -c %s "$dir/$f")
    [ "$size" -eq "$FILE_BYTES" ] ||
      die "$dir/$f has $size bytes, expected $FILE_BYTES (truncated or not CIFAR-10's binary version)"
  done
}

# Unpacks archive $1 into $dest and checks the result.
unpack() {
  local archive="$1" tmp
  tmp="$(mktemp -d "$dest/.unpack.XXXXXX")"
  tar -xzf "$archive" -C "$tmp" || { rm -rf "$tmp"; die "$archive is not a readable .tar.gz"; }
  [ -d "$tmp/cifar-10-batches-bin" ] ||
    { rm -rf "$tmp"; die "$archive has no cifar-10-batches-bin/ folder (is it the binary version, cifar-10-binary.tar.gz?)"; }
  check_dir "$tmp/cifar-10-batches-bin"
  rm -rf "$out"
  mv "$tmp/cifar-10-batches-bin" "$out"
  rm -rf "$tmp"
}

md5_of() { md5sum "$1" | awk '{print $1}'; }

mkdir -p "$dest"
# Keep the data out of git.
[ -e "$dest/.gitignore" ] || printf '*\n' > "$dest/.gitignore"

if [ -z "$source" ]; then
  archive="$dest/cifar-10-binary.tar.gz"
  if [ ! -e "$archive" ] || [ "$(md5_of "$archive")" != "$ARCHIVE_MD5" ]; then
    echo "get_cifar10.sh: downloading $URL"
    ok=0
    if command -v curl >/dev/null 2>&1; then
      curl -fL --connect-timeout 15 --retry 2 -o "$archive.part" "$URL" && ok=1
    elif command -v wget >/dev/null 2>&1; then
      wget -q --timeout=15 -O "$archive.part" "$URL" && ok=1
    else
      echo "get_cifar10.sh: neither curl nor wget is installed" >&2
    fi
    if [ "$ok" -ne 1 ]; then
      rm -f "$archive.part"
      cat >&2 <<EOF
get_cifar10.sh: could not download $URL (no network access?).
Do one of these instead:
  - on a machine with internet access, download $URL
    (MD5 $ARCHIVE_MD5, 163 MB), copy it here and run
        scripts/run/get_cifar10.sh /path/to/cifar-10-binary.tar.gz
  - if a copy of the .bin files is at hand (e.g. ../shared/cifar10/), run
        scripts/run/get_cifar10.sh /path/to/cifar-10-batches-bin
    or point train_local at it: --data_dir=/path/to/cifar-10-batches-bin
  - train on the synthetic stand-in: train_local --data=synthetic
EOF
      exit 1
    fi
    mv "$archive.part" "$archive"
    got="$(md5_of "$archive")"
    [ "$got" = "$ARCHIVE_MD5" ] ||
      die "$archive has MD5 $got, expected $ARCHIVE_MD5 (a damaged or different download; delete it and retry)"
  fi
  unpack "$archive"
elif [ -f "$source" ]; then
  got="$(md5_of "$source")"
  if [ "$got" != "$ARCHIVE_MD5" ]; then
    echo "get_cifar10.sh: note: $source has MD5 $got, not the official archive's $ARCHIVE_MD5; checking its contents" >&2
  fi
  unpack "$source"
elif [ -d "$source" ]; then
  src="$source"
  [ -e "$src/${FILES[0]}" ] || [ ! -d "$src/cifar-10-batches-bin" ] || src="$src/cifar-10-batches-bin"
  check_dir "$src"
  src="$(cd "$src" && pwd)"
  [ "$src" != "$(mkdir -p "$out" && cd "$out" && pwd)" ] || { echo "get_cifar10.sh: $out is already in place"; exit 0; }
  for f in "${FILES[@]}" batches.meta.txt; do
    [ -e "$src/$f" ] || continue
    rm -f "$out/$f"
    if [ "$link" -eq 1 ]; then ln -s "$src/$f" "$out/$f"; else cp "$src/$f" "$out/$f"; fi
  done
else
  die "$source: no such file or directory"
fi

check_dir "$out"
echo "get_cifar10.sh: CIFAR-10 is in $out"
echo "  train with: bazel run -c opt //worker:train_local -- --data=cifar10 --data_dir=$out"
