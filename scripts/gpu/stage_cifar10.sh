#!/usr/bin/env bash
# Real CIFAR-10 on the lent GPU machine, whose device calls carry at most
# 64 MiB each (docs/GPU.md, "CIFAR-10 on the GPU machine"). The six binary
# files are 176 MiB: packed here (xz, 136 MiB) into numbered parts of at
# most 56 MiB (a call's 64 MiB includes the checkout's own files, 2 MB),
# carried one part per call and kept on the warm machine outside the
# checkout, then reassembled and verified there.
#
#   here:  scripts/gpu/stage_cifar10.sh pack [--src DIR] [--out DIR] [--part-mib N]
#   there: scripts/gpu/stage_cifar10.sh receive PARTDIR [--stage DIR]   (one call per part)
#   there: scripts/gpu/stage_cifar10.sh assemble [--stage DIR] [--dest DIR]
#   both:  scripts/gpu/stage_cifar10.sh status [--stage DIR]
#
# pack: DIR defaults to data/cifar-10-batches-bin, else
# ../shared/cifar10/cifar-10-batches-bin; it must hold data_batch_1..5.bin
# and test_batch.bin. It writes OUT (default gpu_data/, ignored by git):
# OUT/1/, OUT/2/, ...: each one part of the xz-compressed tar
# (cifar10.tar.xz.partK) with the checksums (SUMS: sha256 of every part,
# md5 of every file), so that any one folder can be carried alone: the
# device call for part K carries OUT/K.
# receive: checks the part's sha256 and copies it into the stage folder
# (default /tmp/psgd_cifar10_stage; it survives between calls while the
# machine stays warm), then prints which parts are still missing.
# assemble: checks that every part is there with its sha256, unpacks into
# DEST (default data, so that DEST/cifar-10-batches-bin is what the
# configs read) and checks each file's md5. Last line: `cifar10: ...`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
files=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin
       data_batch_5.bin test_batch.bin)

die() { echo "stage_cifar10: $*" >&2; exit 2; }
usage() { sed -n '2,25p' "$0"; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd="$1"; shift
src=""; out="gpu_data"; part_mib=56; stage="/tmp/psgd_cifar10_stage"; dest="data"; partdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --src|--out|--part-mib|--stage|--dest)
      [ $# -ge 2 ] || die "$1 needs a value" ;;
  esac
  case "$1" in
    --src) src="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --part-mib) part_mib="$2"; shift 2 ;;
    --stage) stage="$2"; shift 2 ;;
    --dest) dest="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (stage_cifar10.sh --help)" ;;
    *) [ -z "$partdir" ] || die "unexpected argument $1"; partdir="$1"; shift ;;
  esac
done
case "$part_mib" in ''|*[!0-9]*) die "--part-mib wants a number of MiB" ;; esac
[ "$part_mib" -ge 1 ] && [ "$part_mib" -le 60 ] || die "--part-mib must be 1..60 (a call carries 64 MiB with the checkout)"

# The SUMS file of any part folder or of the stage.
sums_of() { local d; for d in "$@"; do [ -f "$d/SUMS" ] && { echo "$d/SUMS"; return; }; done; }
missing_parts() {  # missing_parts SUMS DIR: the part names DIR lacks
  awk '$2 ~ /\.part[0-9]+$/ {print $2}' "$1" | while read -r p; do
    [ -f "$2/$p" ] || echo "$p"
  done
}

case "$cmd" in
  pack)
    [ -z "$partdir" ] || die "pack takes no PARTDIR"
    if [ -z "$src" ]; then
      for c in "$root/data/cifar-10-batches-bin" "$root/../shared/cifar10/cifar-10-batches-bin"; do
        [ -f "$c/data_batch_1.bin" ] && { src="$c"; break; }
      done
      [ -n "$src" ] || die "no CIFAR-10 found in data/cifar-10-batches-bin or ../shared/cifar10; pass --src DIR"
    fi
    [ -d "$src" ] || die "--src $src: no such folder"
    for f in "${files[@]}"; do [ -f "$src/$f" ] || die "$src/$f is missing"; done
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "stage_cifar10: compressing ${#files[@]} files from $src (xz; about 3 to 6 minutes on 2 cores)"
    tar -C "$src/.." -cf - $(printf 'cifar-10-batches-bin/%s ' "${files[@]}") \
      | xz -6 -T0 -c > "$tmp/cifar10.tar.xz"
    (cd "$tmp" && split -b "${part_mib}M" --numeric-suffixes=1 -a 1 cifar10.tar.xz cifar10.tar.xz.part && rm cifar10.tar.xz)
    {
      (cd "$tmp" && sha256sum cifar10.tar.xz.part*)
      (cd "$src" && md5sum "${files[@]}" | sed 's|  |  cifar-10-batches-bin/|')
    } > "$tmp/SUMS"
    rm -rf "$out"
    k=0
    for p in "$tmp"/cifar10.tar.xz.part*; do
      k=$((k + 1))
      mkdir -p "$out/$k"
      mv "$p" "$out/$k/"
      cp "$tmp/SUMS" "$out/$k/SUMS"
    done
    echo "stage_cifar10: $k parts in $out/ ($(du -sh "$out" | cut -f1)):"
    for d in "$out"/*/; do echo "  ${d%/}: $(du -m "$d" | cut -f1) MiB"; done
    echo "stage_cifar10: one device call per part, one right after the other:"
    for d in "$out"/*/; do
      echo "  carry [\"${d%/}\"]  command: bash scripts/gpu/stage_cifar10.sh receive ${d%/}"
    done
    echo "  then: bash scripts/gpu/stage_cifar10.sh assemble   (docs/GPU.md)"
    ;;
  receive)
    [ -n "$partdir" ] || die "receive needs the part's folder (e.g. gpu_data/1)"
    [ -d "$partdir" ] || die "$partdir: no such folder (was it named in carry?)"
    [ -f "$partdir/SUMS" ] || die "$partdir has no SUMS"
    mkdir -p "$stage"
    n=0
    for p in "$partdir"/cifar10.tar.xz.part*; do
      [ -f "$p" ] || continue
      name=$(basename "$p")
      want=$(awk -v n="$name" '$2 == n {print $1}' "$partdir/SUMS")
      got=$(sha256sum "$p" | cut -d' ' -f1)
      [ "$want" = "$got" ] || die "$p: sha256 $got, SUMS says $want (a broken transfer: carry it again)"
      cp "$p" "$stage/$name.tmp" && mv "$stage/$name.tmp" "$stage/$name"
      n=$((n + 1))
    done
    [ "$n" -gt 0 ] || die "$partdir holds no cifar10.tar.xz.part*"
    cp "$partdir/SUMS" "$stage/SUMS"
    left=$(missing_parts "$stage/SUMS" "$stage" | tr '\n' ' ')
    if [ -n "$left" ]; then
      echo "stage_cifar10: $n part(s) staged in $stage; still missing: $left"
    else
      echo "stage_cifar10: $n part(s) staged in $stage; all parts there: run assemble"
    fi
    ;;
  status|assemble)
    [ -z "$partdir" ] || die "$cmd takes no PARTDIR"
    sums=$(sums_of "$stage")
    [ -n "$sums" ] || die "nothing staged in $stage (run receive for each part first; the machine may have been given back, which empties it)"
    left=$(missing_parts "$sums" "$stage" | tr '\n' ' ')
    if [ "$cmd" = status ]; then
      if [ -n "$left" ]; then echo "stage_cifar10: $stage: missing: $left"; else echo "stage_cifar10: $stage: complete"; fi
      exit 0
    fi
    [ -z "$left" ] || die "parts missing in $stage: $left(run receive for them)"
    (cd "$stage" && grep '\.part[0-9]*$' SUMS | sha256sum -c --quiet) \
      || die "a staged part does not match its sha256"
    mkdir -p "$dest"
    cat $(awk '$2 ~ /\.part[0-9]+$/ {print $2}' "$sums" | sort -V | sed "s|^|$stage/|") \
      | xz -d -c | tar -x -C "$dest"
    (cd "$dest" && grep 'cifar-10-batches-bin/' "$sums" | md5sum -c --quiet) \
      || die "unpacked files do not match their md5"
    echo "cifar10: ${#files[@]} files verified (md5) in $dest/cifar-10-batches-bin"
    ;;
  *) usage >&2; die "unknown command $cmd (pack, receive, assemble, status)" ;;
esac
