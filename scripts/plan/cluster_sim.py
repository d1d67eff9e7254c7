#!/usr/bin/python3
"""A discrete-event simulation of a psgd cluster: hosts, links, shards, workers.

  scripts/plan/cluster_sim.py --model=resnet20 --workers=1024 --shards=64 \\
      --compute=constant:0.004 --gbit=10 --worker_hosts=256 --ps_hosts=16 \\
      --mode=sync --backups=8 --wire=bf16 [--overlap] [--steps=100]

It extends scripts/experiments/step_time_model.py (whose worker compute
times, stragglers and adaptive rule it reuses: the same seed draws the same
compute times) with the parts that model leaves out: the links, the
shards' CPUs and the protocol of docs/PS.md, "One decision per push".

WHAT IS MODELLED

  Hosts. Each host has one NIC of a rate (bytes/s) and a one-way latency to
  the switch; a message between hosts a and b takes latency(a) + latency(b)
  + the transport's latency. A NIC's two directions are two resources, each
  shared FIFO by every task of the host (a transfer waits until the
  direction is free, then takes bytes / rate; store-and-forward is not
  charged twice: a transfer ends no sooner than the sender's last byte plus
  the latency). Tasks on the same host exchange messages without the NIC.
  Resources are reserved when the transfer is issued, in event order.

  Shards. S shards, parameters split evenly (the real placement is by whole
  variables, docs/SHARDING.md), each with one CPU (a FIFO resource) that pays,
  from the profile (scripts/plan/machine_profile.py), per message and per byte: the
  stage of a push (check, copy, the transport), the sum of a gradient into a
  step (sync), the optimizer's update, the serving of a pull, the decisions.

  The protocol (docs/PS.md). A worker's whole push goes first to every
  shard but shard 0 (staged there); when they have replied, the worker
  sends shard 0 its part with DecidePush, which shard 0 checks and decides
  on arrival (a lone shard decides every push on arrival). With overlap the
  push goes in parts to every shard at once, and once every shard has
  replied the worker commits it to shard 0 (one more trip and a message on
  shard 0's CPU). Shard 0 decides in the order the pushes (or commits)
  reach it:
    sync (N of M, fixed backups or adaptive N: the rules of
    step_time_model.py): g == step: aggregated (summed on shard 0), the N-th
    completes the step (shard 0 applies the optimizer, then relays the
    decision to every other shard, one message each, which sums its N staged
    copies and applies); g == step - 1: surplus; older: stale. Dropped pushes
    are relayed too (their staged copies go). A step is published when every
    shard has applied it; a worker whose gradient counted pulls the next
    step from every shard, one whose gradient was dropped pulls the newest.
    async: every push applied (its staleness recorded) unless its staleness
    exceeds max_push_staleness (refused: the worker pulls and computes
    again); staleness_bound holds a worker's pull as in ps/state/ssp_clock.h.
    A worker then pulls every shard once it has applied its push.
  Wire: bf16/fp16 halve the bytes on the wire; the shards keep float32.
  Overlap: the push may start backward_fraction x compute before the
  compute ends (never ending before it), and (sync) the compute may start
  forward_fraction x compute before the pull's last byte arrives.

  One machine's cores (cores=C, --cores): when every task runs on one
  machine of C cores (namespace hosts on one computer, as validate.sh's real
  runs are), each piece of CPU work, a shard's and a worker's, also needs
  one of the C cores (the one free first, reserved in event order), and the
  workers pay their transport's CPU per byte pushed and pulled
  (worker.ns_per_byte.<transport>) on them. Without it every shard has a CPU
  of its own and the workers' transport costs nothing. With cpu_compute
  (--cpu_compute, CPU workers of one compute thread each on that machine)
  each worker's compute takes one of the C cores as well, for its whole
  time: M workers on C < M cores queue for them.

WHAT IS NOT MODELLED: more than one core per shard (a shard is one serial
CPU); cores per host for clusters of several machines (cores=C is one
machine shared by every task); fair sharing of a link between flows (FIFO instead: the same total,
other orders); the workers' CPU for the transport without cores=C; the relay's flow control
(64 decisions in flight) and batching; lining up after a shard is a step
ahead; failures, leases, membership, checkpoints, the evaluator; accuracy
(scripts/plan/accuracy.py joins measured curves to the simulated step rate).

REPORT (simulate() -> dict): steps_per_s, grads_per_s, images_per_s,
step_time_{p50,p90,p99,mean} (sync: between publishes on every shard;
async: a worker's push interval), dropped_surplus, dropped_stale, refused,
applied per step, staleness, each link direction's and each shard CPU's
utilisation, the mean critical path of a step (sync: the push that
completed it) and `bound`: what limits the step, with the reason.
"""
import argparse
import heapq
import itertools
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "experiments"))
sys.path.insert(0, HERE)
import step_time_model as stm  # noqa: E402
from machine_profile import Profile, ProfileError, WIRES, OPTIMIZERS, TRANSPORTS  # noqa: E402,F401

WIRE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


class Host:
    """A host's NIC: its rate each way, its latency to the switch and, for a
    link shaped by a token bucket (tc's tbf, as the namespace hosts of the
    tests are), the bucket's depth in bytes each way (0: a NIC's line rate,
    no burst)."""

    def __init__(self, name, bytes_per_s, latency_s, burst_bytes=0.0):
        if not (bytes_per_s > 0 and math.isfinite(bytes_per_s)):
            raise ValueError(f"host {name}: link rate {bytes_per_s} bytes/s must be > 0")
        if not (latency_s >= 0 and math.isfinite(latency_s)):
            raise ValueError(f"host {name}: latency {latency_s} s must be >= 0")
        if not (burst_bytes >= 0 and math.isfinite(burst_bytes)):
            raise ValueError(f"host {name}: burst {burst_bytes} bytes must be >= 0")
        self.name, self.rate, self.latency = name, bytes_per_s, latency_s
        self.burst = burst_bytes


class Cluster:
    """hosts: [Host]; ps_host[s], worker_host[w]: indices into hosts."""

    def __init__(self, hosts, ps_host, worker_host):
        self.hosts = list(hosts)
        for what, lst in (("ps", ps_host), ("worker", worker_host)):
            if not lst:
                raise ValueError(f"no {what} tasks")
            for i, h in enumerate(lst):
                if not (isinstance(h, int) and 0 <= h < len(self.hosts)):
                    raise ValueError(f"{what}:{i}: host {h} is not one of the "
                                     f"{len(self.hosts)} hosts")
        self.ps_host, self.worker_host = list(ps_host), list(worker_host)

    @classmethod
    def spread(cls, M, S, worker_hosts, ps_hosts, gbit, latency_s=0.0, burst_bytes=0.0):
        """M workers over worker_hosts hosts and S shards over ps_hosts other
        hosts (ps_hosts 0: the shards share the workers' hosts, round robin),
        every NIC at `gbit` Gbit/s (with a token bucket of burst_bytes each
        way: a tbf-shaped link)."""
        rate = gbit * 1e9 / 8
        hosts = [Host(f"w{i}", rate, latency_s, burst_bytes) for i in range(worker_hosts)]
        if ps_hosts:
            hosts += [Host(f"p{i}", rate, latency_s, burst_bytes)
                      for i in range(ps_hosts)]
            ps = [worker_hosts + s % ps_hosts for s in range(S)]
        else:
            ps = [s % worker_hosts for s in range(S)]
        per = math.ceil(M / worker_hosts)
        return cls(hosts, ps, [w // per for w in range(M)])


class Costs:
    """The profile's figures for one setting, in seconds."""

    def __init__(self, profile, wire, optimizer, transport, overlap, mode):
        if wire not in WIRES:
            raise ValueError(f"wire '{wire}': expected one of {', '.join(WIRES)}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer '{optimizer}': expected one of {', '.join(OPTIMIZERS)}")
        if transport not in TRANSPORTS:
            raise ValueError(f"transport '{transport}': expected one of "
                             f"{', '.join(TRANSPORTS)}")
        g = profile.get
        self.wire_bytes = WIRE_BYTES[wire]
        tb = g(f"transport.{transport}.server_ns_per_byte", f"the {transport} transport") * 1e-9
        self.stage_per_byte = g(f"server.stage_ns_per_byte.{wire}", f"{wire} pushes") * 1e-9 + tb
        self.serve_per_byte = g(f"server.serve_ns_per_byte.{wire}", f"{wire} pulls") * 1e-9 + tb
        self.sum_per_param = (g("server.sum_ns_per_param", "sync steps") * 1e-9
                              if mode != "async" else 0.0)
        self.apply_per_param = g(f"server.apply_ns_per_param.{optimizer}",
                                 f"the {optimizer} optimizer") * 1e-9
        self.msg = (g("server.us_per_message", "every request") +
                    g(f"transport.{transport}.us_per_message", f"the {transport} transport")) * 1e-6
        self.tlat = g(f"transport.{transport}.latency_us", f"the {transport} transport") * 1e-6
        self.efficiency = g("link.efficiency", "the links")
        if not 0 < self.efficiency <= 1:
            raise ProfileError(f"profile {profile.path}: link.efficiency = {self.efficiency} "
                               "must be in (0, 1]")
        self.bwd = g("overlap.backward_fraction", "overlap") if overlap else 0.0
        self.fwd = g("overlap.forward_fraction", "overlap") if overlap and mode != "async" else 0.0


def simulate(cluster, params, profile, mode="sync", N=None, wire="fp32", optimizer="adam",
             transport="grpc", overlap=False, batch=128, push_extra_s=0.0, pull_extra_s=0.0,
             cores=None, cpu_compute=False, **options):
    """One setting. mode: sync (N of M, default N = M), adaptive or async.
    options: those of step_time_model.simulate (compute, steps, warmup,
    slow, stall_p, stall_s, tail..., n_min, n_max, window, adaptive_warmup,
    staleness_bound, max_push_staleness, seed). push_extra_s / pull_extra_s:
    fixed delays added to every push / pull (measured transfer times, as the
    step-time model's push_s / pull_s). cores: every task on one machine of
    that many cores (the docstring's "One machine's cores"); cpu_compute:
    the workers' compute is CPU work on those cores too (needs cores).
    Raises ValueError (ProfileError for a missing figure) naming what is
    wrong."""
    M, S = len(cluster.worker_host), len(cluster.ps_host)
    if not isinstance(params, int) or params < S:
        raise ValueError(f"{params} parameters cannot be split over {S} shards")
    for name, v in (("push_extra_s", push_extra_s), ("pull_extra_s", pull_extra_s)):
        if not (v >= 0 and math.isfinite(v)):
            raise ValueError(f"{name} = {v}: must be >= 0")
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch = {batch}: must be an integer >= 1")
    if cores is not None and (not isinstance(cores, int) or cores < 1):
        raise ValueError(f"cores = {cores}: must be an integer >= 1 (or none: a CPU a shard)")
    if cpu_compute and cores is None:
        raise ValueError("cpu_compute: the workers' compute on the machine's cores needs cores")
    cfg = stm.Config(mode, M, N, **options)
    costs = Costs(profile, wire, optimizer, transport, overlap, mode)
    worker_per_byte = 0.0
    if cores is not None:
        worker_per_byte = profile.get(f"worker.ns_per_byte.{transport}",
                                      f"the workers' CPU on {cores} shared cores") * 1e-9
    return _Sim(cluster, params, cfg, costs, batch, push_extra_s, pull_extra_s, cores,
                worker_per_byte, cpu_compute).run()


class _Sim:
    def __init__(self, cluster, params, cfg, costs, batch, push_extra, pull_extra, cores=None,
                 worker_per_byte=0.0, cpu_compute=False):
        self.c, self.cfg, self.k, self.batch = cluster, cfg, costs, batch
        self.push_extra, self.pull_extra = push_extra, pull_extra
        S = len(cluster.ps_host)
        self.S, self.M = S, cfg.M
        base, extra = divmod(params, S)
        self.params = [base + (1 if s < extra else 0) for s in range(S)]
        self.gbytes = [p * costs.wire_bytes for p in self.params]  # on the wire, each way
        eff = costs.efficiency
        self.rate = [h.rate * eff for h in cluster.hosts]
        self.lat = [h.latency for h in cluster.hosts]
        # A token bucket's depth in seconds at the rate (0: none).
        self.burst = [h.burst / r for h, r in zip(cluster.hosts, self.rate)]
        hosts = sorted(set(cluster.ps_host))
        self.ps_hosts = hosts
        self.host_shards = {h: [s for s in range(S) if cluster.ps_host[s] == h] for h in hosts}
        self.host_bytes = {h: sum(self.gbytes[s] for s in self.host_shards[h]) for h in hosts}
        H = len(cluster.hosts)
        self.egress = [0.0] * H
        self.ingress = [0.0] * H
        self.egress_busy = [0.0] * H
        self.ingress_busy = [0.0] * H
        self.cpu = [0.0] * S
        self.cpu_busy = [0.0] * S
        # One machine's cores (None: a CPU a shard, the workers free): when
        # each is free, and the workers' CPU a push's (and a pull's) bytes.
        self.cores = [0.0] * cores if cores else None
        self.worker_busy = 0.0
        self.cpu_compute = cpu_compute
        self.worker_cost = sum(self.gbytes) * worker_per_byte
        self.stage_cost = [costs.msg + b * costs.stage_per_byte for b in self.gbytes]
        self.serve_cost = [costs.msg + b * costs.serve_per_byte for b in self.gbytes]
        # A push in parts (overlap) is committed by a message of its own on
        # shard 0; a whole one is decided in the call that carries it.
        self.commit_msg = costs.msg if S > 1 and costs.bwd else 0.0
        self.heap = []
        self.order = itertools.count()

    # ---- resources -----------------------------------------------------
    def _core(self, start, cost):
        """With one machine's cores: the core free first takes `cost` seconds
        of work that may start at `start`; returns when it starts."""
        cores = self.cores
        if cores is None:
            return start
        i = min(range(len(cores)), key=cores.__getitem__)
        if cores[i] > start:
            start = cores[i]
        cores[i] = start + cost
        return start

    def _cpu(self, s, ready, cost):
        t = self._core(max(ready, self.cpu[s]), cost) + cost
        self.cpu[s] = t
        self.cpu_busy[s] += cost
        return t

    def _worker_cpu(self, ready):
        """A worker's transport CPU for one push's (or pull's) bytes, on the
        machine's cores; returns when it is done (`ready` without cores)."""
        if self.cores is None or not self.worker_cost:
            return ready
        self.worker_busy += self.worker_cost
        return self._core(ready, self.worker_cost) + self.worker_cost

    def _link(self, a, b):
        return self.lat[a] + self.lat[b]

    def _send(self, free, h, t, d):
        """d seconds of bytes (at the rate) through host h's link direction
        `free` (self.egress or self.ingress: when its queue has drained at
        the rate), offered at t; returns (start, end). FIFO at the rate; a
        token bucket of depth b seconds banks up to b of idle time (the
        queue's clock may lag real time by b): free' = max(free, t - b) + d,
        start = max(t, free), end = max(t, free'); a full bucket sends its
        first b at once (end = t + max(0, d - b)). With b = 0, plain FIFO:
        end = max(t, free) + d."""
        start = max(t, free[h])
        v = max(free[h], t - self.burst[h]) + d
        free[h] = v
        return start, max(t, v)

    def push(self, w, t_end, c):
        """w's push; returns the time shard 0 decides it (a lone shard: the
        time it has checked it). Without overlap (docs/PS.md, "One decision
        per push") the worker stages the whole push on every other shard,
        then sends shard 0 its part with DecidePush, which shard 0 decides
        on arrival: two legs, the second after the first's last reply. With
        overlap the push goes in parts to every shard at once, and once every
        shard has replied the worker commits it to shard 0 (one more trip)."""
        k, hw = self.k, self.c.worker_host[w]
        start0 = t_end - k.bwd * c
        if self.cores is not None:  # the worker encodes, then sends
            t_end = self._worker_cpu(t_end)
            start0 = t_end - k.bwd * c
        if self.S == 1:
            checked, _ = self._stage(hw, start0, t_end, [0])
            return checked + self.push_extra
        h0 = self.c.ps_host[0]
        to_h0 = k.tlat + (self._link(hw, h0) if hw != h0 else 0.0)
        if k.bwd:
            _, replied = self._stage(hw, start0, t_end, range(self.S))
            return replied + to_h0 + self.push_extra
        _, replied = self._stage(hw, start0, t_end, range(1, self.S))
        decided, _ = self._stage(hw, replied, replied, [0])
        return decided + self.push_extra

    def _stage(self, hw, start0, t_end, shards):
        """Sends the gradients of `shards` from host hw (its egress may start
        at start0 and ends no sooner than t_end); each shard checks (and
        stages) its part on its CPU. Returns (when the last shard is done,
        when its reply is back at the worker)."""
        k = self.k
        by_host = {}
        for s in shards:
            by_host.setdefault(self.c.ps_host[s], []).append(s)
        remote = sum(self.gbytes[s] for h, ss in by_host.items() if h != hw for s in ss)
        if remote:
            d = remote / self.rate[hw]
            e_start, e_end = self._send(self.egress, hw, start0, d)
            e_end = max(e_end, t_end)
            self.egress_busy[hw] += d
        done = replied = 0.0
        cpu, cost = self.cpu, self.stage_cost
        for h in sorted(by_host):
            if h == hw:
                arr = t_end + k.tlat
                back = k.tlat
            else:
                lat = self._link(hw, h)
                d = sum(self.gbytes[s] for s in by_host[h]) / self.rate[h]
                _, i_end = self._send(self.ingress, h, e_start + lat, d)
                i_end = max(i_end, e_end + lat)
                self.ingress_busy[h] += d
                arr = i_end + k.tlat
                back = lat + k.tlat
            for s in by_host[h]:
                x = cost[s]
                t = self._core(arr if arr > cpu[s] else cpu[s], x) + x
                cpu[s] = t
                self.cpu_busy[s] += x
                done = max(done, t)
                replied = max(replied, t + back)
        return done, replied

    def pull(self, w, r, ready):
        """w asks every shard at r for weights shard s has at ready[s]; returns
        (first part's arrival, last part's arrival)."""
        k, hw = self.k, self.c.worker_host[w]
        first, last = math.inf, 0.0
        cpu, cost = self.cpu, self.serve_cost
        for h in self.ps_hosts:
            req = r + k.tlat + (self._link(hw, h) if h != hw else 0.0)
            served = 0.0
            for s in self.host_shards[h]:
                x = cost[s]
                t = self._core(max(req, ready[s], cpu[s]), x) + x
                cpu[s] = t
                self.cpu_busy[s] += x
                if t > served:
                    served = t
            if h == hw:
                done = served + k.tlat
            else:
                lat = self._link(h, hw)
                d = self.host_bytes[h] / self.rate[h]
                e_start, e_end = self._send(self.egress, h, served, d)
                self.egress_busy[h] += d
                d2 = self.host_bytes[h] / self.rate[hw]
                _, i_end = self._send(self.ingress, hw, e_start + lat, d2)
                i_end = max(i_end, e_end + lat)
                self.ingress_busy[hw] += d2
                done = i_end + k.tlat
            if done < first:
                first = done
            if done > last:
                last = done
        last = self._worker_cpu(last)  # the worker decodes what it pulled
        return first + self.pull_extra, last + self.pull_extra

    def relay(self, t0, apply_followers):
        """Shard 0 sends a decision at t0 to every other shard; each spends
        apply_followers[s] seconds on it. Returns each shard's time done
        (shard 0's: t0)."""
        k = self.k
        h0 = self.c.ps_host[0]
        done = [t0] * self.S
        for s in range(1, self.S):
            hs = self.c.ps_host[s]
            arr = t0 + k.tlat + (self._link(h0, hs) if hs != h0 else 0.0)
            done[s] = self._cpu(s, arr, k.msg + apply_followers[s])
        if self.S > 1:  # the senders' messages, on shard 0's CPU after the decision
            self._cpu(0, t0, k.msg * (self.S - 1))
        return done

    def start_compute(self, w, first, last, g):
        c = self.draw[w]()
        tc = last
        if self.k.fwd:
            tc = max(first, last - self.k.fwd * c)
        if self.cpu_compute:  # the compute waits for a core, then holds it
            tc = self._core(tc, c)
            self.worker_busy += c
        self.path_pull[w] = last - self.pull_issue[w]
        heapq.heappush(self.heap, (tc + c, 1, next(self.order), w, g, c))

    # ---- the run -------------------------------------------------------
    def run(self):
        cfg = self.cfg
        self.workers = cfg.workers()
        self.draw = [wc.draw for wc in self.workers]
        self.pull_issue = [0.0] * self.M
        self.path_pull = [0.0] * self.M
        self.path_push = [0.0] * self.M
        self.path_compute = [0.0] * self.M
        wall = time.monotonic()
        if cfg.mode == "async":
            res = self._run_async()
        else:
            res = self._run_sync(cfg.mode == "adaptive")
        res["sim_wall_s"] = time.monotonic() - wall
        res["images_per_s"] = res["grads_per_s"] * self.batch
        res["bytes_per_push"] = sum(self.gbytes)
        res["S"], res["M"] = self.S, self.M
        return res

    def _snapshot(self):
        return (list(self.egress_busy), list(self.ingress_busy), list(self.cpu_busy),
                self.worker_busy)

    def _utilisation(self, snap, duration):
        e0, i0, c0, _ = snap
        hosts = self.c.hosts
        links = {}
        for h in range(len(hosts)):
            for name, now, then in (("out", self.egress_busy, e0), ("in", self.ingress_busy, i0)):
                u = (now[h] - then[h]) / duration
                if u > 0:
                    links[f"{hosts[h].name} {name}"] = u
        cpus = {f"ps:{s}": (self.cpu_busy[s] - c0[s]) / duration for s in range(self.S)}
        return links, cpus

    SATURATED = 0.8

    def _bound(self, res, path, step_s, snap, duration):
        """What limits the step: a link direction or a shard's CPU at
        SATURATED utilisation or more (the busiest); else the largest part of
        the step's critical path, the pull and the push counted together as
        its transfers; transfers that spend at least half their time as one
        link's busy time are bound by that link's rate."""
        links, cpus = self._utilisation(snap, duration)
        res["link_utilisation"] = links
        res["cpu_utilisation"] = cpus
        if self.cores is not None:
            work = (sum(self.cpu_busy) - sum(snap[2])) + (self.worker_busy - snap[3])
            res["cores_utilisation"] = work / (len(self.cores) * duration)
            if res["cores_utilisation"] >= self.SATURATED:
                res["bound"] = "machine CPU"
                res["bound_detail"] = (f"the machine's {len(self.cores)} cores "
                                       f"({res['cores_utilisation']:.0%} busy: the shards' "
                                       f"and the workers' CPU work"
                                       f"{', compute included' if self.cpu_compute else ''})")
                return res
        link = max(links, key=links.get) if links else None
        cpu = max(cpus, key=cpus.get)
        busiest = (f"busiest: link {link} {links[link]:.0%}, " if link else "busiest: ") + \
            f"CPU of {cpu} {cpus[cpu]:.0%}"
        if link and links[link] >= self.SATURATED and links[link] >= cpus[cpu]:
            res["bound"], res["bound_detail"] = "link", f"link {link} ({links[link]:.0%} busy)"
            return res
        if cpus[cpu] >= self.SATURATED:
            res["bound"] = "server CPU"
            res["bound_detail"] = f"server CPU of {cpu} ({cpus[cpu]:.0%} busy)"
            return res
        parts = {k: v for k, v in path.items() if k not in ("pull", "push")}
        if "pull" in path:
            parts["transfers"] = path["pull"] + path["push"]
        part = max(parts, key=parts.get)
        share = parts[part] / step_s if step_s else 0.0
        if part == "compute":
            res["bound"] = "compute"
            med = res.get("compute_median_s") or 0.0
            if res["mode"] != "async" and path["compute"] > 1.3 * med:
                res["bound_detail"] = (f"compute, stragglers: the step's last needed gradient "
                                       f"took {path['compute'] * 1e3:.1f} ms to compute, the "
                                       f"median {med * 1e3:.1f} ms ({share:.0%} of the step)")
            else:
                res["bound_detail"] = f"compute ({share:.0%} of the step; {busiest})"
        elif part == "relay":
            res["bound"] = "relay"
            res["bound_detail"] = (f"the relay of shard 0's decisions ({share:.0%} of the step; "
                                   f"{busiest})")
        elif part == "decide":
            res["bound"] = "server CPU"
            res["bound_detail"] = f"shard 0's decisions ({share:.0%} of the step; {busiest})"
        else:
            # A host's two directions: a sync step's pulls use one, its
            # pushes the other, one after the other.
            duplex = {}
            for name, u in links.items():
                host = name.rsplit(" ", 1)[0]
                duplex[host] = duplex.get(host, 0.0) + u
            host = max(duplex, key=duplex.get) if duplex else None
            busy = duplex[host] * step_s if host else 0.0
            if host and busy >= 0.5 * parts[part]:
                res["bound"] = "link"
                res["bound_detail"] = (
                    f"link {host}'s rate (in {links.get(host + ' in', 0):.0%} + out "
                    f"{links.get(host + ' out', 0):.0%} busy; the pull and push "
                    f"{parts[part] * 1e3:.1f} ms, {share:.0%} of the step)")
            else:
                res["bound"] = "transfers"
                res["bound_detail"] = (f"the pull and push: latency and serving, no link "
                                       f"saturated ({share:.0%} of the step; {busiest})")
        return res

    def _run_sync(self, adaptive):
        cfg, M, S = self.cfg, self.M, self.S
        heap, order = self.heap, self.order
        push, pop = heapq.heappush, heapq.heappop
        step = 0  # shard 0's
        published = 0  # on every shard
        shard_pub = {0: [0.0] * S}  # step -> each shard's publish time
        pub0 = [0.0]  # shard 0's publish (decision) times
        pub_all = [0.0]
        N = cfg.n_max if adaptive else cfg.N
        n_of = [N]
        count = 0
        waiting = []
        arrivals = agg = surplus = stale = 0
        w_agg = [0] * M
        w_arr = [0] * M
        members, drops = {}, {}  # step -> the workers it averaged; its pushes dropped
        offsets = {}
        window = cfg.window
        warmup, end = cfg.warmup, cfg.warmup + cfg.steps
        snap = self._snapshot() if warmup == 0 else None
        counts0 = (0, 0, 0, 0)
        crit = []  # per measured step: (pull, compute, push, decide, relay)
        compute_all = []
        sumc, applyc = self.k.sum_per_param, self.k.apply_per_param
        for w in range(M):
            self.start_compute(w, 0.0, 0.0, 0)
        while True:
            t, kind, _, w, g, c = pop(heap)
            if kind == 0:  # step g published on every shard
                published = g
                pub_all.append(t)
                if g == warmup:
                    snap = self._snapshot()
                    counts0 = (arrivals, agg, surplus, stale)
                if g == end:
                    break
                ready = shard_pub[g]
                for v, r in waiting:
                    self.pull_issue[v] = max(r, t)
                    first, last = self.pull(v, r, ready)
                    self.start_compute(v, first, last, g)
                waiting = []
                shard_pub.pop(g - 2, None)
                continue
            if kind == 1:  # w's compute done: push, commit
                self.path_compute[w] = c
                if published >= warmup:
                    compute_all.append(c)
                ta = self.push(w, t, c)
                self.path_push[w] = ta - t
                push(heap, (ta, 2, next(order), w, g, c))
                continue
            # kind 2: w's commit at shard 0
            arrivals += 1
            w_arr[w] += 1
            d = self._cpu(0, t, self.commit_msg)
            if adaptive and g > step - window:
                offsets.setdefault(g, []).append(t - pub0[g])
            h0, hw = self.c.ps_host[0], self.c.worker_host[w]
            r = d + self.k.tlat + (self._link(h0, hw) if h0 != hw else 0.0)
            if g == step:
                count += 1
                agg += 1
                w_agg[w] += 1
                members.setdefault(g, []).append(w)
                d = self._cpu(0, d, sumc * self.params[0])
                if count >= N:
                    p0 = self._cpu(0, d, applyc * self.params[0])
                    done = self.relay(p0, [N * sumc * p + applyc * p for p in self.params])
                    step += 1
                    pub0.append(p0)
                    shard_pub[step] = done
                    t_all = max(done)
                    push(heap, (t_all, 0, next(order), -1, step, 0.0))
                    if step > warmup and step <= end:
                        crit.append((self.path_pull[w], self.path_compute[w], self.path_push[w],
                                     p0 - t, t_all - p0))
                    count = 0
                    if adaptive:
                        N, _ = stm.choose_n(offsets, pub0, step, t, cfg.n_min, cfg.n_max,
                                            window, cfg.adaptive_warmup)
                        offsets.pop(step - window, None)
                    n_of.append(N)
                    r = p0 + (r - d)
                self.pull_issue[w] = r
                if published >= g + 1:
                    first, last = self.pull(w, r, shard_pub[published])
                    self.start_compute(w, first, last, published)
                else:
                    waiting.append((w, r))
            else:
                drops[g] = drops.get(g, 0) + 1
                if g == step - 1:
                    surplus += 1
                else:
                    stale += 1
                if S > 1:
                    self.relay(d, [0.0] * S)
                # It pulls the newest weights, lined up: shard 0's step, once on
                # every shard.
                self.pull_issue[w] = r
                if published >= step:
                    first, last = self.pull(w, r, shard_pub[published])
                    self.start_compute(w, first, last, published)
                else:
                    waiting.append((w, r))
        a0, g0, s0, st0 = counts0
        t0, t1 = pub_all[warmup], pub_all[end]
        duration = t1 - t0
        if duration <= 0:
            raise ValueError("no simulated time passed: give a compute or transfer time > 0")
        times = [pub_all[i + 1] - pub_all[i] for i in range(warmup, end)]
        res = {"mode": "adaptive" if adaptive else "sync", "N": None if adaptive else cfg.N,
               "steps": cfg.steps, "warmup": warmup, "duration_s": duration,
               "steps_per_s": cfg.steps / duration, "grads_per_s": (agg - g0) / duration,
               "arrivals": arrivals - a0, "aggregated": agg - g0,
               "dropped_surplus": surplus - s0, "dropped_stale": stale - st0,
               "refused": 0, "n_per_step": n_of, "per_worker_arrivals": w_arr,
               "per_worker_aggregated": w_agg, "step_members": members,
               "dropped_by_step": drops,
               "mean_n": sum(n_of[warmup:end]) / cfg.steps}
        res["dropped"] = res["dropped_surplus"] + res["dropped_stale"]
        res["dropped_fraction"] = res["dropped"] / res["arrivals"] if res["arrivals"] else 0.0
        res.update(_stats("step_time", times))
        res["step_times"] = times
        names = ("pull", "compute", "push", "decide", "relay")
        path = {n: sum(x[i] for x in crit) / len(crit) for i, n in enumerate(names)} if crit \
            else {n: 0.0 for n in names}
        res["critical_path_s"] = path
        res["compute_median_s"] = stm.percentile(sorted(compute_all), 50) if compute_all else 0
        return self._bound(res, path, duration / cfg.steps, snap, duration)

    def _run_async(self):
        cfg, M, S = self.cfg, self.M, self.S
        heap, order = self.heap, self.order
        push, pop = heapq.heappush, heapq.heappop
        bound, max_st = cfg.staleness_bound, cfg.max_push_staleness
        step = 0
        latest = [0.0] * S  # when each shard applied its newest push
        clock = [0] * M
        hist = {0: M}
        gmin = 0
        waiting = []
        ssp_waits = 0
        arrivals = applied = refused = 0
        last_arr = [None] * M
        intervals, staleness, computes = [], [], []
        first_n, end_n = cfg.warmup * M, (cfg.warmup + cfg.steps) * M
        t0 = 0.0
        measuring = first_n == 0
        snap = self._snapshot()
        counts0 = (0, 0, 0)
        applyc = self.k.apply_per_param
        h0 = self.c.ps_host[0]
        for w in range(M):
            self.start_compute(w, 0.0, 0.0, 0)
        while True:
            t, kind, _, w, g, c = pop(heap)
            if kind == 1:
                if measuring:
                    computes.append(c)
                ta = self.push(w, t, c)
                push(heap, (ta, 2, next(order), w, g, c))
                continue
            arrivals += 1
            if measuring and last_arr[w] is not None:
                intervals.append(t - last_arr[w])
            last_arr[w] = t
            d = self._cpu(0, t, self.commit_msg)
            hw = self.c.worker_host[w]
            back = self.k.tlat + (self._link(h0, hw) if h0 != hw else 0.0)
            s = step - g
            if max_st is not None and s > max_st:
                refused += 1
                if S > 1:
                    self.relay(d, [0.0] * S)
                first, last = self.pull(w, d + back, latest)
                self.start_compute(w, first, last, step)
            else:
                applied += 1
                step += 1
                if measuring:
                    staleness.append(s)
                p0 = self._cpu(0, d, applyc * self.params[0])
                latest = self.relay(p0, [applyc * p for p in self.params])
                cw = clock[w]
                clock[w] = cw + 1
                hist[cw] -= 1
                hist[cw + 1] = hist.get(cw + 1, 0) + 1
                if cw == gmin and hist[cw] == 0:
                    del hist[cw]
                    gmin += 1
                    if bound is not None:
                        while waiting and waiting[0][0] <= gmin + bound:
                            v = heapq.heappop(waiting)[2]
                            first, last = self.pull(v, p0, latest)
                            self.start_compute(v, first, last, step)
                if bound is not None and clock[w] > gmin + bound:
                    heapq.heappush(waiting, (clock[w], next(order), w))
                    ssp_waits += 1
                else:
                    first, last = self.pull(w, p0 + back, latest)
                    self.start_compute(w, first, last, step)
            if arrivals == first_n:
                t0, measuring = t, True
                snap = self._snapshot()
                counts0 = (arrivals, applied, refused)
            if arrivals == end_n:
                break
        duration = t - t0
        if duration <= 0:
            raise ValueError("no simulated time passed: give a compute or transfer time > 0")
        a0, ap0, r0 = counts0
        res = {"mode": "async", "N": None, "steps": cfg.steps, "warmup": cfg.warmup,
               "staleness_bound": bound, "max_push_staleness": max_st,
               "duration_s": duration, "steps_per_s": (applied - ap0) / duration,
               "grads_per_s": (applied - ap0) / duration, "arrivals": arrivals - a0,
               "aggregated": applied - ap0, "applied": applied - ap0,
               "dropped_surplus": 0, "dropped_stale": 0, "refused": refused - r0,
               "dropped": refused - r0, "ssp_waits": ssp_waits, "mean_n": None,
               "staleness_values": staleness, "per_worker_applied": list(clock)}
        res["dropped_fraction"] = res["dropped"] / res["arrivals"] if res["arrivals"] else 0.0
        res.update(_stats("step_time", intervals))
        res.update(_stats("staleness", staleness))
        mean_c = sum(computes) / len(computes) if computes else 0.0
        mean_i = res["step_time_mean"] or duration
        res["critical_path_s"] = {"compute": mean_c, "transfers": max(0.0, mean_i - mean_c)}
        res["compute_median_s"] = stm.percentile(sorted(computes), 50) if computes else 0
        return self._bound(res, res["critical_path_s"], mean_i, snap, duration)


def _stats(prefix, values):
    v = sorted(values)
    return {f"{prefix}_mean": (sum(v) / len(v)) if v else None,
            f"{prefix}_p50": stm.percentile(v, 50), f"{prefix}_p90": stm.percentile(v, 90),
            f"{prefix}_p99": stm.percentile(v, 99), f"{prefix}_max": v[-1] if v else None}


def describe(res):
    """One paragraph of a result, for people."""
    p = res["critical_path_s"]
    ms = lambda x: "-" if x is None else f"{x * 1e3:.2f}"  # noqa: E731
    lines = [f"{res['mode']} M={res['M']} S={res['S']}: {res['steps_per_s']:.2f} steps/s, "
             f"{res['images_per_s']:.0f} images/s, step p50 {ms(res['step_time_p50'])} ms, "
             f"p99 {ms(res['step_time_p99'])} ms; dropped {res['dropped']} "
             f"({100 * res['dropped_fraction']:.1f}%)"]
    if res["mode"] == "async":
        lines.append(f"  staleness mean {res['staleness_mean'] or 0:.1f}, p99 "
                     f"{res['staleness_p99']}, refused {res['refused']}")
    else:
        lines.append("  critical path (ms): " + ", ".join(f"{k} {ms(v)}" for k, v in p.items()))
    busiest = sorted(res["link_utilisation"].items(), key=lambda kv: -kv[1])[:3]
    cpus = sorted(res["cpu_utilisation"].items(), key=lambda kv: -kv[1])[:3]
    lines.append("  busiest links: " + (", ".join(f"{k} {v:.0%}" for k, v in busiest) or "none")
                 + "; busiest shard CPUs: " + ", ".join(f"{k} {v:.0%}" for k, v in cpus))
    if "cores_utilisation" in res:
        lines.append(f"  the machine's cores: {res['cores_utilisation']:.0%} busy")
    lines.append(f"  bound: {res['bound_detail']}")
    return "\n".join(lines)


def main(argv=None, prog="cluster_sim.py"):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default=None, help="default: scripts/plan/default.profile")
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--worker_hosts", type=int, default=None, help="default: one per worker")
    ap.add_argument("--ps_hosts", type=int, default=None, help="default: one per shard")
    ap.add_argument("--gbit", type=float, default=10.0)
    ap.add_argument("--latency_us", type=float, default=5.0, help="per host, to the switch")
    ap.add_argument("--burst_kib", type=float, default=0.0,
                    help="each link's token bucket each way (tc tbf's burst; 0: a NIC)")
    ap.add_argument("--compute", default="constant:0.004")
    ap.add_argument("--mode", choices=("sync", "adaptive", "async"), default="sync")
    ap.add_argument("--backups", type=int, default=0)
    ap.add_argument("--staleness_bound", type=int, default=None)
    ap.add_argument("--max_push_staleness", type=int, default=None)
    ap.add_argument("--wire", default="fp32")
    ap.add_argument("--transport", default="grpc")
    ap.add_argument("--optimizer", default="adam")
    ap.add_argument("--overlap", action="store_true")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--stall", default="0:0", help="P:SECONDS")
    ap.add_argument("--slow", default="")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cores", type=int, default=None,
                    help="every task on one machine of this many cores (default: a CPU a "
                    "shard, the workers' CPU free)")
    ap.add_argument("--cpu_compute", action="store_true",
                    help="with --cores: each worker's compute takes one of those cores too "
                    "(CPU workers of one compute thread each)")
    ap.add_argument("--json", default=None, help="write the figures here: every link's and "
                    "shard CPU's utilisation, the critical path, the bound")
    a = ap.parse_args(argv)
    try:
        prof = Profile.load(a.profile)
        models = prof.models()
        if a.model not in models:
            raise ValueError(f"--model={a.model}: unknown model (known: {', '.join(models)})")
        cl = Cluster.spread(a.workers, a.shards, a.worker_hosts or a.workers,
                            a.shards if a.ps_hosts is None else a.ps_hosts, a.gbit,
                            a.latency_us * 1e-6, a.burst_kib * 1024)
        p, _, s = a.stall.partition(":")
        kw = dict(compute=a.compute, steps=a.steps, warmup=a.warmup, seed=a.seed, slow=a.slow,
                  stall_p=float(p), stall_s=float(s or 0))
        N = a.workers - a.backups if a.mode == "sync" else None
        if a.mode == "async":
            kw.update(staleness_bound=a.staleness_bound, max_push_staleness=a.max_push_staleness)
        res = simulate(cl, models[a.model], prof, a.mode, N, wire=a.wire, optimizer=a.optimizer,
                       transport=a.transport, overlap=a.overlap, batch=a.batch, cores=a.cores,
                       cpu_compute=a.cpu_compute, **kw)
    except ValueError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    print(describe(res))
    print(f"simulated {a.steps} steps in {res['sim_wall_s']:.1f} s of wall-clock time")
    if a.json:
        import json
        big = ("step_times", "staleness_values", "step_members", "dropped_by_step",
               "n_per_step", "per_worker_arrivals", "per_worker_aggregated",
               "per_worker_applied")
        try:
            with open(a.json, "w") as f:
                json.dump({k: v for k, v in res.items() if k not in big}, f, indent=1)
                f.write("\n")
        except OSError as e:
            print(f"{prog}: --json={a.json}: {e.strerror}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
