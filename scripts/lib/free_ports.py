#!/usr/bin/env python3
"""Free ports for a test's or a script's tasks, below the ephemeral range.

Each port is seen free, and lies below the kernel's ephemeral range
(ip_local_port_range): a port the kernel picks for a connection's local end,
or for a server's port 0, is never one of these, so nothing can take it
between this choice and the task's own bind. A fault-matrix server once
found its port taken that way ("Address already in use"); a Slurm test's
second ps did too, when its pair was port 0's answer and the next.

  free_ports.py ports N [HOST]  N free ports, one a line (HOST 127.0.0.1)
  free_ports.py run N [HOST]    P with P .. P+N-1 all free (HOST 0.0.0.0),
                                for a launcher that gives task k port P+k

scripts/lib/cluster.sh's free_ports and free_port_run call it.
"""
import random
import socket
import sys


def _range():
    """The ports to draw from: up to 12000 below the ephemeral range."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    return max(1024, ephemeral - 12000), ephemeral


def _bound(host, port):
    s = socket.socket()
    try:
        s.bind((host, port))
        return s
    except OSError:
        s.close()
        return None


def _in_random_order(first, end):
    """Each port of first .. end-1 once, in a random order (none when
    end <= first)."""
    ports = list(range(first, end))
    random.shuffle(ports)
    return ports


def free_ports(n, host="127.0.0.1"):
    """N distinct ports, each free on HOST when drawn."""
    first, end = _range()
    socks = []
    try:
        for p in _in_random_order(first, end):
            s = _bound(host, p)
            if s:
                socks.append(s)
                if len(socks) == n:
                    return [s.getsockname()[1] for s in socks]
        raise RuntimeError(f"free_ports: fewer than {n} free ports in {first}-{end - 1}")
    finally:
        for s in socks:
            s.close()


def free_port_run(n, host="0.0.0.0"):
    """P such that P, P+1, ..., P+N-1 were all free on HOST together."""
    first, end = _range()
    for p in _in_random_order(first, end - n + 1):
        run = [_bound(host, p + k) for k in range(n)]
        for s in run:
            if s:
                s.close()
        if all(run):
            return p
    raise RuntimeError(f"free_port_run: no {n} free ports in a row in {first}-{end - 1}")


def main(argv):
    if (len(argv) not in (3, 4) or argv[1] not in ("ports", "run")
            or not argv[2].isdigit() or int(argv[2]) < 1):
        sys.exit("usage: free_ports.py ports|run N [HOST] (N >= 1)")
    mode, n = argv[1], int(argv[2])
    try:
        if mode == "ports":
            print("\n".join(str(p) for p in free_ports(n, *argv[3:])))
        else:
            print(free_port_run(n, *argv[3:]))
    except RuntimeError as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main(sys.argv)
