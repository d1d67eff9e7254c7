#!/usr/bin/env bash
# Test hosts on one machine: N network namespaces joined by a bridge, for
# running a cluster "across hosts" (docs/MULTIHOST.md).
#
#   scripts/run/netns_hosts.sh up N [--rate=RATE] [--prefix=P]
#   scripts/run/netns_hosts.sh down [--prefix=P]
#   scripts/run/netns_hosts.sh status [--prefix=P]
#
# `up` makes namespaces P0..P(N-1) (default prefix "h": h0, h1, ...), each
# with one interface, eth0, at 198.18.0.(10+i)/24 (198.18.0.0/15 is set aside
# for network benchmarks, RFC 2544), joined by the bridge P-br on this
# machine. Each namespace resolves every host's name through
# /etc/netns/P<i>/hosts (which `ip netns exec` puts over /etc/hosts), and has
# no route but its own /24: nothing leaves these namespaces, the bridge has
# no address, nothing is forwarded or NATed. With --rate (tc's units:
# 100mbit, 1gbit, 10gbit, ...) every host's link is capped in both
# directions by tc's tbf (egress of eth0 inside the namespace and of its
# peer on the bridge; the kernel here has no netem).
#
# `down` removes the namespaces, their /etc/netns folders, the veth pairs and
# the bridge. `up` when P is already up, or `down` when nothing of P is up,
# says so, changes nothing and exits 1. Needs root and iproute2.
set -euo pipefail
# ip and tc live in /usr/sbin, which a test's PATH may lack.
PATH=$PATH:/usr/sbin:/sbin

usage() {
  sed -n '4,7p' "$0" | sed 's/^# //' >&2
  exit 2
}

[ $# -ge 1 ] || usage
cmd=$1; shift
n=""; rate=""; prefix=h
if [ "$cmd" = up ]; then
  [ $# -ge 1 ] || usage
  n=$1; shift
fi
for arg in "$@"; do
  case "$arg" in
    --rate=*) rate=${arg#--rate=} ;;
    --prefix=*) prefix=${arg#--prefix=} ;;
    *) echo "netns_hosts.sh: unknown argument '$arg'" >&2; usage ;;
  esac
done
# Interface names are at most 15 characters: "<prefix><i>-br" must fit.
if ! [[ $prefix =~ ^[a-z][a-z0-9]{0,7}$ ]]; then
  echo "netns_hosts.sh: --prefix='$prefix': 1 to 8 lower-case letters and digits, starting with a letter" >&2
  exit 2
fi
bridge="$prefix-br"
state=/run/psgd-netns/$prefix

# The namespaces of prefix P that exist: P followed by digits only.
existing() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}[0-9]+\$" || true
}

tbf() {  # tbf DEV-ARGS...: caps egress of a device at $rate
  # burst: 5 ms at the rate, at least 64 KiB (one GSO packet).
  local bits burst
  bits=$(rate_bits "$rate")
  burst=$((bits / 8 / 200)); [ "$burst" -ge 65536 ] || burst=65536
  "$@" root tbf rate "$rate" burst "$burst" latency 100ms
}

# rate_bits RATE: tc's rate in bit/s (kbit, mbit, gbit, with or without "it").
rate_bits() {
  local r=${1,,} num unit
  num=${r%%[a-z]*}; unit=${r#"$num"}
  case "$unit" in
    bit|"") echo "$num" ;;
    kbit) echo $((num * 1000)) ;;
    mbit) echo $((num * 1000000)) ;;
    gbit) echo $((num * 1000000000)) ;;
    *) return 1 ;;
  esac
}

case "$cmd" in
  up)
    if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then
      echo "netns_hosts.sh: up N: N='$n' is not in 1..200" >&2; exit 2
    fi
    if [ -n "$rate" ] && { ! [[ ${rate,,} =~ ^[1-9][0-9]*(bit|kbit|mbit|gbit)$ ]] || ! rate_bits "$rate" >/dev/null; }; then
      echo "netns_hosts.sh: --rate='$rate' is not a rate such as 100mbit, 1gbit or 10gbit" >&2; exit 2
    fi
    if [ "$(id -u)" -ne 0 ]; then echo "netns_hosts.sh: needs root (ip netns)" >&2; exit 1; fi
    if [ -n "$(existing)" ] || ip link show "$bridge" >/dev/null 2>&1; then
      echo "netns_hosts.sh: hosts with prefix '$prefix' are already up ($(existing | tr '\n' ' ')); run 'down' first" >&2
      exit 1
    fi
    trap 'echo "netns_hosts.sh: up failed; removing what was made" >&2; "$0" down --prefix="$prefix" >/dev/null 2>&1 || true' ERR
    mkdir -p "$state"
    ip link add "$bridge" type bridge
    ip link set "$bridge" up
    hosts_file=$state/hosts
    { echo "127.0.0.1 localhost"; echo "::1 localhost ip6-localhost ip6-loopback"
      for ((i = 0; i < n; i++)); do echo "198.18.0.$((10 + i)) $prefix$i"; done; } > "$hosts_file"
    for ((i = 0; i < n; i++)); do
      ns=$prefix$i
      ip netns add "$ns"
      mkdir -p "/etc/netns/$ns"
      cp "$hosts_file" "/etc/netns/$ns/hosts"
      ip link add "$ns-br" type veth peer name "$ns-in"
      ip link set "$ns-in" netns "$ns"
      ip -n "$ns" link set "$ns-in" name eth0
      ip -n "$ns" addr add "198.18.0.$((10 + i))/24" dev eth0
      ip -n "$ns" link set lo up
      ip -n "$ns" link set eth0 up
      ip link set "$ns-br" master "$bridge"
      ip link set "$ns-br" up
      if [ -n "$rate" ]; then
        tbf tc -n "$ns" qdisc add dev eth0       # the host's upload
        tbf tc qdisc add dev "$ns-br"            # its download
      fi
    done
    echo "${rate:-none}" > "$state/rate"
    echo "$n" > "$state/count"
    echo "netns_hosts.sh: up: $n hosts ${prefix}0..$prefix$((n - 1)) at 198.18.0.10..198.18.0.$((9 + n)), bridge $bridge, link cap ${rate:-none}"
    ;;
  down)
    if [ "$(id -u)" -ne 0 ]; then echo "netns_hosts.sh: needs root (ip netns)" >&2; exit 1; fi
    found=$(existing)
    if [ -z "$found" ] && ! ip link show "$bridge" >/dev/null 2>&1 && [ ! -d "$state" ]; then
      echo "netns_hosts.sh: nothing with prefix '$prefix' is up" >&2
      exit 1
    fi
    for ns in $found; do
      # Processes still in the namespace keep it alive: end them.
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
      ip link del "$ns-br" 2>/dev/null || true
      ip netns del "$ns"
      rm -rf "/etc/netns/$ns"
    done
    ip link del "$bridge" 2>/dev/null || true
    rm -rf "$state"
    echo "netns_hosts.sh: down: removed $(echo $found | wc -w) hosts with prefix '$prefix' and bridge $bridge"
    ;;
  status)
    found=$(existing)
    if [ -z "$found" ]; then echo "netns_hosts.sh: nothing with prefix '$prefix' is up"; exit 1; fi
    echo "hosts: $(echo $found | tr '\n' ' ')link cap: $(cat "$state/rate" 2>/dev/null || echo unknown)"
    ;;
  *) usage ;;
esac
