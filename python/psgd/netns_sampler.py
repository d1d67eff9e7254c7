#!/usr/bin/env python3
"""Samples the interface counters of network-namespace hosts.

    netns_sampler.py --run_dir=DIR --hosts=h0,h1,h2 [--interval=1]

Once per interval, for each host (a namespace made by scripts/run/netns_hosts.sh)
appends to DIR/HOST/net-HOST.jsonl a line
    {"kind": "net", "host": H, "unix_time": T, "tx_bytes": .., "rx_bytes": ..,
     "cap_bits_per_s": C}
with the bytes its eth0 has sent and received so far (what crossed the host's
link: payload and protocol overhead) and the tbf cap of its upload (0: none).
psgd launch --netns (scripts/run/launch.sh --netns) runs it for the run; psgd compare turns the
counters into bytes per second. Ends on SIGTERM or when --parent exits,
after one last sample.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time


# ip and tc live in /usr/sbin, which a test's PATH may lack.
os.environ["PATH"] = os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"


def link(host):
    out = subprocess.run(["ip", "-j", "-s", "-n", host, "link", "show", "eth0"],
                         capture_output=True, text=True, check=True).stdout
    stats = json.loads(out)[0]["stats64"]
    return stats["tx"]["bytes"], stats["rx"]["bytes"]


def cap(host):
    out = subprocess.run(["tc", "-j", "-n", host, "qdisc", "show", "dev", "eth0"],
                         capture_output=True, text=True).stdout
    try:
        for q in json.loads(out or "[]"):
            if q.get("kind") == "tbf":
                return int(q["options"]["rate"]) * 8
    except (ValueError, KeyError, IndexError):
        pass
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run_dir", required=True)
    p.add_argument("--hosts", required=True)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--parent", type=int, default=0)
    a = p.parse_args()
    hosts = [h for h in a.hosts.split(",") if h]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    caps = {h: cap(h) for h in hosts}
    files = {}
    for h in hosts:
        os.makedirs(os.path.join(a.run_dir, h), exist_ok=True)
        files[h] = open(os.path.join(a.run_dir, h, f"net-{h}.jsonl"), "a")
    def sample():
        now = time.time()
        for h in hosts:
            try:
                tx, rx = link(h)
            except (subprocess.CalledProcessError, IndexError, KeyError, ValueError):
                continue  # the namespace went away
            files[h].write(json.dumps({"kind": "net", "host": h, "unix_time": now,
                                       "tx_bytes": tx, "rx_bytes": rx,
                                       "cap_bits_per_s": caps[h]}) + "\n")
            files[h].flush()

    while not stop:
        sample()
        if a.parent and not os.path.exists(f"/proc/{a.parent}"):
            break
        time.sleep(a.interval)
    # A last sample at the end, so that a run shorter than two intervals
    # still has its counters at both ends (compare.py needs two).
    sample()
    return 0


if __name__ == "__main__":
    sys.exit(main())
