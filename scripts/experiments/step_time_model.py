#!/usr/bin/python3
"""A discrete-event model of a psgd cluster's step times with M workers.

  scripts/experiments/step_time_model.py --workers=16,100,1000 \\
      --compute=constant:0.055 --stall=0.01:1.0 --slow=0:3.0 \\
      --push_s=0.002 --pull_s=0.002 --backups=0,1,2,3,4 --adaptive \\
      --async --staleness_bound=4 --steps=2000 --seed=1 [--json FILE]

It predicts, at scales one machine cannot run (M = 100, 1000), the step
rate, the gradients applied per second, the step-time percentiles and the
gradients dropped of sync training with N of M workers (b = M - N backup
workers), of adaptive sync (the servers choose N each step) and of async
training (optionally stale-synchronous). Python API: simulate(mode, M, N,
...) -> dict, for scripts that compare it with measured runs. Standard
library only; everything is seeded.

WHAT IS MODELLED (the server's rules, ps/state/sync_aggregator.h,
ps/state/ssp_clock.h, ps/state/async_applier.h):

  Worker loop: pull -> compute -> push -> pull again. A pull is served (the
  server reads the weights) at an instant; the weights then take
  pull_s + transfer_delay_s to reach the worker; it computes for c seconds
  (drawn, below); its push takes transfer_delay_s + push_s to arrive. A
  worker's pull after a push is served at the instant that push is
  processed, right after it (no request round trip is modelled).
  All M workers start at t = 0 with a pull of step 0.

  Sync (N of M). Step k starts when its weights are published. A push
  computed from step g that arrives while the global step is k is
    g == k      aggregated (while step k still needs gradients);
    g == k - 1  dropped as surplus (step g was completed without it);
    g <  k - 1  dropped as stale.
  When the N-th push of step k is aggregated the step completes; step k+1
  is published apply_s later (default 0: at that instant). A push of step
  k arriving during those apply_s seconds is surplus. After its push (kept
  or dropped) a worker pulls with min_step = g + 1: it waits until the
  global step is >= g + 1 and then gets the newest weights, whatever step
  they are (it may skip steps). Simultaneous events: a publish comes
  before arrivals at the same instant; arrivals at one instant in the
  order they were scheduled (at equal scheduling, by worker index).

  Adaptive sync (Dynamic Backup Workers): options n_min <= n_max <= M
  (defaults 1 and M), window W (20), warm-up (5). Every push that arrives
  (aggregated or dropped) records its offset d = arrival time - publish
  time of the step it was computed from, filed under that step. When step
  k+1 is published (step k completed), N for step k+1 is chosen: with fewer
  than `adaptive_warmup` completed steps (steps 0..k), N = n_max; else for
  each n in [n_min, n_max]
    T(n) = mean over the last W completed steps s (k-W+1..k, or all k+1 if
           fewer) of the n-th smallest offset recorded for s so far, or,
           where s has fewer than n offsets recorded, (now - publish time
           of s) (a lower bound: the n-th push of s has not come yet);
  and N = the n that maximises n / T(n) (gradients per second), ties
  (n * T(m) == m * T(n)) going to the larger n. Offsets of pushes that
  arrive after their step completed (dropped ones) count too, so a slow
  worker's offsets raise T(n) for the largest n. Step 0's N is n_max.

  Async. Every push is applied on arrival (global step += 1) unless
  refused; its staleness = global step at arrival - step of its weights.
  max_push_staleness: a push staler than it is refused (dropped, no clock
  tick) and the worker pulls and computes again. staleness_bound (SSP,
  ps/state/ssp_clock.h): a worker's clock is its number of applied pushes;
  its pull waits while clock(w) > min over the other workers of clock + bound
  and is served when a push of the slowest worker releases it. Async has
  no min_step: a pull gets the newest weights.

  Compute time of one worker step: a base time from a distribution
  (constant:S, exp:SHIFT,MEAN = SHIFT + Exp(mean MEAN), pareto:SCALE,ALPHA =
  SCALE * Pareto(ALPHA) >= SCALE, samples:FILE = one number of seconds a
  line drawn uniformly with replacement) times the worker's slow factor;
  plus, with probability stall_p, stall_s seconds (for all workers or the
  stall_workers); plus, with probability tail_p, a delay drawn from the tail
  distribution (for all workers or the tail_workers). Each worker has its
  own random stream, seeded from (seed, worker), drawn in the order base,
  stall, tail, so a worker's k-th step takes the same time in every setting
  of one seed (common random numbers across the rows of a report).

WHAT IS NOT MODELLED: server CPU time and contention (aggregation, apply
and serving cost nothing but a constant apply_s in sync); bandwidth
sharing (every transfer takes pull_s/push_s/transfer_delay_s however many
run at once: give per-transfer times measured at the scale you model);
sharding (one server that sees each push at once; the shards of a real
cluster classify each push independently and agree only when their
transfers take equal times); network jitter other than through the
compute distributions; the round trip of a pull request; overlap of
computation with communication; workers joining, leaving or failing
(leases, membership), checkpoints and the evaluator; and anything about
accuracy (only staleness and dropped gradients are reported).

REPORT. Per M and setting, over `steps` global steps after `warmup` global
steps (sync and adaptive: from the publish of step `warmup` to the publish
of step `warmup + steps`); async: after warmup * M push arrivals, over the
next steps * M push arrivals (applied + refused: each worker pushes about
`steps` times, as in sync b = 0). Steps/s in async is applied pushes/s (the
global step counts pushes). Time percentiles: sync, the global step time
(interval between consecutive publishes); async, the per-worker push
interval (between consecutive arrivals of one worker's pushes, all workers
pooled), since an interval between applies says nothing. Percentiles are
nearest-rank. Normalized speedup = grads applied/s of the setting over
sync b = 0's at the same M, which for sync is [t(0)/t(b)] * N_b/N_0
(TensorFlow OSDI'16 fig. 8: t(0)/t(b) * 50/(50+b) with N fixed and
M = N + b; with M fixed and N = M - b the same useful-gradients-per-second
quantity).
"""
import argparse
import heapq
import itertools
import json
import math
import random
import sys

MODES = ("sync", "adaptive", "async")

SPEEDUP_DEFINITION = (
    "normalized speedup = (gradients applied/s of the setting) / (gradients applied/s of "
    "sync b=0 at the same M) = [t(0)/t(b)] * N_b/N_0 for sync, t = mean step time "
    "(TensorFlow OSDI'16 fig. 8's t(0)/t(b) * 50/(50+b), with M fixed and N = M - b)")
ASYNC_RULE = (
    "async: after warmup*M push arrivals, measured over steps*M arrivals (applied + "
    "refused; about `steps` pushes per worker, as in sync b=0); its steps/s = applied "
    "pushes/s; its time columns are per-worker push intervals (marked *), not step times")


# --------------------------------------------------------------------------
# Distributions and per-worker compute times.


class Dist:
    """Seconds from constant:S, exp:SHIFT,MEAN, pareto:SCALE,ALPHA or samples:FILE."""

    def __init__(self, spec, what="compute"):
        self.spec = spec
        kind, sep, arg = str(spec).partition(":")
        usage = (f"{what} '{spec}': expected constant:S, exp:SHIFT,MEAN, pareto:SCALE,ALPHA "
                 "or samples:FILE")
        if not sep or not arg:
            raise ValueError(usage)
        self.kind = kind
        if kind == "samples":
            try:
                with open(arg) as f:
                    lines = [l.split("#")[0].strip() for l in f]
                values = [float(l) for l in lines if l]
            except OSError as e:
                raise ValueError(f"{what} '{spec}': {e.strerror}") from None
            except ValueError:
                raise ValueError(f"{what} '{spec}': a line is not a number") from None
            if not values:
                raise ValueError(f"{what} '{spec}': no samples")
            if any(not math.isfinite(v) or v < 0 for v in values):
                raise ValueError(f"{what} '{spec}': a sample is negative or not finite")
            self.values = values
            return
        try:
            nums = [float(x) for x in arg.split(",")]
        except ValueError:
            raise ValueError(usage) from None
        if any(not math.isfinite(x) for x in nums):
            raise ValueError(f"{what} '{spec}': not finite")
        want = {"constant": 1, "exp": 2, "pareto": 2}.get(kind)
        if want is None or len(nums) != want:
            raise ValueError(usage)
        if kind == "constant":
            if nums[0] < 0:
                raise ValueError(f"{what} '{spec}': negative time")
            self.value = nums[0]
        elif kind == "exp":
            if nums[0] < 0 or nums[1] < 0:
                raise ValueError(f"{what} '{spec}': SHIFT and MEAN must be >= 0")
            self.shift, self.mean = nums
        else:
            if nums[0] < 0 or nums[1] <= 0:
                raise ValueError(f"{what} '{spec}': SCALE must be >= 0 and ALPHA > 0")
            self.scale, self.alpha = nums

    @property
    def constant(self):
        return self.kind == "constant"

    def draw(self, rng):
        k = self.kind
        if k == "constant":
            return self.value
        if k == "exp":
            return self.shift + (rng.expovariate(1.0 / self.mean) if self.mean > 0 else 0.0)
        if k == "pareto":
            return self.scale * rng.paretovariate(self.alpha)
        return rng.choice(self.values)


def _as_dist(d, what):
    return d if isinstance(d, Dist) else Dist(d, what)


class WorkerCompute:
    """One worker's compute times: base * factor (+ stall_s w.p. stall_p) (+ tail w.p. tail_p)."""

    def __init__(self, base, factor=1.0, stall_p=0.0, stall_s=0.0, tail=None, tail_p=1.0,
                 rng=None):
        self.base, self.factor = base, factor
        self.stall_p, self.stall_s = stall_p, stall_s
        self.tail, self.tail_p = tail, tail_p
        self.rng = rng or random.Random(0)
        self.draws = 0
        self.stalls = 0
        self.tails = 0
        self._fixed = (base.value * factor if base.constant and stall_p == 0 and tail is None
                       else None)

    def draw(self):
        self.draws += 1
        if self._fixed is not None:
            return self._fixed
        rng = self.rng
        c = self.base.draw(rng) * self.factor
        if self.stall_p > 0 and rng.random() < self.stall_p:
            c += self.stall_s
            self.stalls += 1
        if self.tail is not None and (self.tail_p >= 1 or rng.random() < self.tail_p):
            c += self.tail.draw(rng)
            self.tails += 1
        return c


def worker_rng(seed, w):
    """Worker w's random stream (str seeds are hashed by SHA-512: stable across runs)."""
    return random.Random(f"psgd-step-time-model:{seed}:{w}")


# --------------------------------------------------------------------------
# Options.


def _check_prob(name, p):
    if not (isinstance(p, (int, float)) and 0 <= p <= 1):
        raise ValueError(f"{name} = {p}: not a probability in [0, 1]")


def _check_nonneg(name, x):
    if not (isinstance(x, (int, float)) and math.isfinite(x) and x >= 0):
        raise ValueError(f"{name} = {x}: must be a finite number >= 0")


def _worker_list(name, ws, M):
    if ws is None:
        return None
    out = sorted(set(int(w) for w in ws))
    for w in out:
        if not 0 <= w < M:
            raise ValueError(f"{name}: worker index {w} is not in [0, M={M})")
    return out


def parse_slow(spec):
    """'0:3.0,5:2' -> {0: 3.0, 5: 2.0}."""
    out = {}
    for part in filter(None, str(spec).split(",")):
        w, sep, f = part.partition(":")
        try:
            if not sep:
                raise ValueError
            out[int(w)] = float(f)
        except ValueError:
            raise ValueError(f"slow (--slow) '{part}': expected WORKER:FACTOR") from None
    return out


class Config:
    """Validated options of one simulation (the arguments of simulate())."""

    def __init__(self, mode, M, N=None, *, steps=1000, warmup=50, compute="constant:0.055",
                 push_s=0.0, pull_s=0.0, transfer_delay_s=0.0, apply_s=0.0, slow=None,
                 stall_p=0.0, stall_s=0.0, stall_workers=None, tail=None, tail_p=1.0,
                 tail_workers=None, n_min=1, n_max=None, window=20, adaptive_warmup=5,
                 staleness_bound=None, max_push_staleness=None, seed=1):
        if mode not in MODES:
            raise ValueError(f"mode '{mode}': expected one of {', '.join(MODES)}")
        if not isinstance(M, int) or M < 1:
            raise ValueError(f"M (--workers) = {M}: must be an integer >= 1")
        self.mode, self.M = mode, M
        if mode == "sync":
            N = M if N is None else N
            if not isinstance(N, int) or not 1 <= N <= M:
                raise ValueError(f"N = {N}: must be in [1, M={M}] (b = M - N backups, --backups)")
        elif N is not None:
            raise ValueError(f"N is for mode sync only (mode {mode})")
        self.N = N
        for name, v in (("steps (--steps)", steps), ("warmup (--warmup)", warmup)):
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} = {v}: must be an integer >= 0")
        if steps < 1:
            raise ValueError(f"steps (--steps) = {steps}: must be >= 1")
        self.steps, self.warmup = steps, warmup
        self.compute = _as_dist(compute, "compute (--compute)")
        for name, v in (("push_s (--push_s)", push_s), ("pull_s (--pull_s)", pull_s),
                        ("transfer_delay_s (--transfer_delay_s)", transfer_delay_s),
                        ("apply_s (--apply_s)", apply_s), ("stall_s (--stall)", stall_s)):
            _check_nonneg(name, v)
        self.push_s, self.pull_s = push_s, pull_s
        self.transfer_delay_s, self.apply_s = transfer_delay_s, apply_s
        if isinstance(slow, str):
            slow = parse_slow(slow)
        slow = dict(slow or {})
        for w, f in slow.items():
            _worker_list("slow (--slow)", [w], M)
            _check_nonneg(f"slow (--slow) factor of worker {w}", f)
        self.slow = slow
        _check_prob("stall_p (--stall)", stall_p)
        self.stall_p, self.stall_s = stall_p, stall_s
        self.stall_workers = _worker_list("stall_workers (--stall_workers)", stall_workers, M)
        self.tail = None if tail is None else _as_dist(tail, "tail (--tail)")
        _check_prob("tail_p (--tail_p)", tail_p)
        self.tail_p = tail_p
        self.tail_workers = _worker_list("tail_workers (--tail_workers)", tail_workers, M)
        n_max = M if n_max is None else n_max
        for name, v in (("n_min (--n_min)", n_min), ("n_max (--n_max)", n_max),
                        ("window (--window)", window)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} = {v}: must be an integer >= 1")
        if n_max > M:
            raise ValueError(f"n_max (--n_max) = {n_max}: more than M = {M} workers")
        if n_min > n_max:
            raise ValueError(f"n_min (--n_min) = {n_min}: more than n_max = {n_max}")
        if not isinstance(adaptive_warmup, int) or adaptive_warmup < 0:
            raise ValueError(f"adaptive_warmup (--adaptive_warmup) = {adaptive_warmup}: "
                             "must be an integer >= 0")
        self.n_min, self.n_max, self.window = n_min, n_max, window
        self.adaptive_warmup = adaptive_warmup
        for name, v in (("staleness_bound (--staleness_bound)", staleness_bound),
                        ("max_push_staleness (--max_push_staleness)", max_push_staleness)):
            if v is not None and (not isinstance(v, int) or v < 0):
                raise ValueError(f"{name} = {v}: must be an integer >= 0 (None: unset)")
            if v is not None and mode != "async":
                raise ValueError(f"{name} is for mode async only (mode {mode})")
        self.staleness_bound, self.max_push_staleness = staleness_bound, max_push_staleness
        self.seed = seed

    def workers(self):
        out = []
        stall_set = None if self.stall_workers is None else set(self.stall_workers)
        tail_set = None if self.tail_workers is None else set(self.tail_workers)
        for w in range(self.M):
            stalls = stall_set is None or w in stall_set
            tails = self.tail is not None and (tail_set is None or w in tail_set)
            out.append(WorkerCompute(
                self.compute, self.slow.get(w, 1.0),
                self.stall_p if stalls else 0.0, self.stall_s,
                self.tail if tails else None, self.tail_p, worker_rng(self.seed, w)))
        return out


# --------------------------------------------------------------------------
# Statistics.


def percentile(sorted_values, p):
    """Nearest-rank p-th percentile of an ascending list; None when empty."""
    if not sorted_values:
        return None
    k = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[k - 1]


def _dist_stats(prefix, values):
    v = sorted(values)
    return {f"{prefix}_mean": (sum(v) / len(v)) if v else None,
            f"{prefix}_p50": percentile(v, 50), f"{prefix}_p90": percentile(v, 90),
            f"{prefix}_p99": percentile(v, 99), f"{prefix}_max": v[-1] if v else None}


# --------------------------------------------------------------------------
# The adaptive rule.


def choose_n(offsets, publish, completed, now, n_min, n_max, window, warmup):
    """N for step `completed` (steps 0..completed-1 are complete) at time `now`.

    offsets[s]: ascending offsets recorded for step s; publish[s]: its
    publish time. Returns (N, {n: T(n)} or None during the warm-up).
    """
    if completed < warmup:
        return n_max, None
    width = n_max - n_min + 1
    cols = []
    for s in range(max(0, completed - window), completed):
        col = list(offsets.get(s, ())[n_min - 1:n_max])
        if len(col) < width:
            col.extend([now - publish[s]] * (width - len(col)))
        cols.append(col)
    totals = [sum(x) for x in zip(*cols)]
    best_n, best_t = n_min, totals[0]
    for i in range(1, width):
        n, t = n_min + i, totals[i]
        if n * best_t >= best_n * t:  # n / T(n) >= best's; ties to the larger n
            best_n, best_t = n, t
    return best_n, {n_min + i: totals[i] / len(cols) for i in range(width)}


# --------------------------------------------------------------------------
# The simulations.


def _run_sync(cfg, adaptive):
    M = cfg.M
    workers = cfg.workers()
    draw = [wc.draw for wc in workers]
    pre = cfg.pull_s + cfg.transfer_delay_s
    post = cfg.transfer_delay_s + cfg.push_s
    apply_s = cfg.apply_s
    heap = []
    push, pop = heapq.heappush, heapq.heappop
    order = itertools.count()
    step = 0
    pending = False  # step `step` is complete; its successor not published yet
    publish = [0.0]
    N = cfg.n_max if adaptive else cfg.N
    n_of = [N]
    count = 0
    waiting = []
    arrivals = agg = surplus = stale = 0
    w_arr = [0] * M
    w_agg = [0] * M
    last = [None] * M
    intervals = []
    offsets = {}
    window = cfg.window
    warmup, end = cfg.warmup, cfg.warmup + cfg.steps
    snap = (0, 0, 0, 0) if warmup == 0 else None
    for w in range(M):
        push(heap, (((0.0 + pre) + draw[w]()) + post, next(order), w, 0))
    while True:
        t, _, w, g = pop(heap)
        if w < 0:  # publish of step g + 1
            step += 1
            publish.append(t)
            count = 0
            pending = False
            if step == warmup:
                snap = (arrivals, agg, surplus, stale)
            if step == end:
                break
            if adaptive:
                N, _ = choose_n(offsets, publish, step, t, cfg.n_min, cfg.n_max, window,
                                cfg.adaptive_warmup)
                offsets.pop(step - window, None)  # not in the next window
            n_of.append(N)
            for v in waiting:
                push(heap, (((t + pre) + draw[v]()) + post, next(order), v, step))
            waiting = []
            continue
        arrivals += 1
        w_arr[w] += 1
        if snap is not None:
            if last[w] is not None:
                intervals.append(t - last[w])
        last[w] = t
        if adaptive and g > step - window:  # in a window to come
            d = t - publish[g]
            lst = offsets.get(g)
            if lst is None:
                offsets[g] = [d]
            else:
                lst.append(d)
        if g == step and not pending:
            count += 1
            agg += 1
            w_agg[w] += 1
            if count >= N:
                pending = True
                # (t, -1): before every arrival at the same instant.
                push(heap, (t + apply_s, -1, -1, step))
        elif g >= step - 1:
            surplus += 1
        else:
            stale += 1
        if step >= g + 1:  # pull with min_step g + 1
            push(heap, (((t + pre) + draw[w]()) + post, next(order), w, step))
        else:
            waiting.append(w)
    a0, g0, s0, st0 = snap
    t0, t1 = publish[warmup], publish[end]
    duration = t1 - t0
    if duration <= 0:
        raise ValueError("no simulated time passed: give a compute or transfer time > 0")
    times = [publish[k + 1] - publish[k] for k in range(warmup, end)]
    window_arr = arrivals - a0
    dropped = (surplus - s0) + (stale - st0)
    res = {
        "mode": "adaptive" if adaptive else "sync", "M": M,
        "N": None if adaptive else cfg.N, "steps": cfg.steps, "warmup": warmup,
        "start_s": t0, "duration_s": duration,
        "steps_per_s": cfg.steps / duration, "grads_per_s": (agg - g0) / duration,
        "arrivals": window_arr, "aggregated": agg - g0, "dropped": dropped,
        "dropped_surplus": surplus - s0, "dropped_stale": stale - st0,
        "dropped_fraction": dropped / window_arr if window_arr else 0.0,
        "step_times": times, "n_per_step": n_of,
        "mean_n": sum(n_of[warmup:end]) / cfg.steps,
        "per_worker_arrivals": w_arr, "per_worker_aggregated": w_agg,
        "per_worker_dropped": [a - b for a, b in zip(w_arr, w_agg)],
    }
    res.update(_dist_stats("step_time", times))
    res.update(_dist_stats("push_interval", intervals))
    res["stalls"] = sum(wc.stalls for wc in workers)
    res["draws"] = sum(wc.draws for wc in workers)
    return res


def _run_async(cfg):
    M = cfg.M
    workers = cfg.workers()
    draw = [wc.draw for wc in workers]
    pre = cfg.pull_s + cfg.transfer_delay_s
    post = cfg.transfer_delay_s + cfg.push_s
    bound, max_st = cfg.staleness_bound, cfg.max_push_staleness
    heap = []
    push, pop = heapq.heappush, heapq.heappop
    order = itertools.count()
    step = 0
    clock = [0] * M
    hist = {0: M}  # clock value -> workers at it
    gmin = 0
    waiting = []  # heap of (clock, order, worker): SSP pulls not served yet
    ssp_waits = 0
    arrivals = applied = refused = 0
    w_arr = [0] * M
    last = [None] * M
    intervals = []
    staleness = []
    first, end = cfg.warmup * M, (cfg.warmup + cfg.steps) * M
    t0 = 0.0
    measuring = first == 0
    snap = (0, 0, 0)
    for w in range(M):
        push(heap, (((0.0 + pre) + draw[w]()) + post, next(order), w, 0))
    while True:
        t, _, w, g = pop(heap)
        arrivals += 1
        w_arr[w] += 1
        if measuring and last[w] is not None:
            intervals.append(t - last[w])
        last[w] = t
        s = step - g
        if max_st is not None and s > max_st:
            refused += 1
        else:
            applied += 1
            step += 1
            if measuring:
                staleness.append(s)
            c = clock[w]
            clock[w] = c + 1
            hist[c] -= 1
            hist[c + 1] = hist.get(c + 1, 0) + 1
            if c == gmin and hist[c] == 0:
                del hist[c]
                gmin += 1
                if bound is not None:
                    while waiting and waiting[0][0] <= gmin + bound:
                        v = heapq.heappop(waiting)[2]
                        push(heap, (((t + pre) + draw[v]()) + post, next(order), v, step))
        # The pull after the push: SSP waits while clock(w) > min over the others + bound
        # (w waiting is never the only slowest, so that min is the smallest clock of all).
        if bound is not None and clock[w] > gmin + bound:
            heapq.heappush(waiting, (clock[w], next(order), w))
            ssp_waits += 1
        else:
            push(heap, (((t + pre) + draw[w]()) + post, next(order), w, step))
        if arrivals == first:
            t0 = t
            measuring = True
            snap = (arrivals, applied, refused)
        if arrivals == end:
            break
    duration = t - t0
    if duration <= 0:
        raise ValueError("no simulated time passed: give a compute or transfer time > 0")
    a0, ap0, r0 = snap
    window_arr = arrivals - a0
    res = {
        "mode": "async", "M": M, "N": None, "steps": cfg.steps, "warmup": cfg.warmup,
        "staleness_bound": bound, "max_push_staleness": max_st,
        "start_s": t0, "duration_s": duration,
        "steps_per_s": (applied - ap0) / duration, "grads_per_s": (applied - ap0) / duration,
        "arrivals": window_arr, "applied": applied - ap0, "aggregated": applied - ap0,
        "dropped": refused - r0, "refused": refused - r0,
        "dropped_fraction": (refused - r0) / window_arr if window_arr else 0.0,
        "staleness_values": staleness, "ssp_waits": ssp_waits,
        "per_worker_arrivals": w_arr, "per_worker_applied": list(clock),
        "per_worker_dropped": [a - b for a, b in zip(w_arr, clock)],
        "mean_n": None,
    }
    res.update(_dist_stats("push_interval", intervals))
    res.update(_dist_stats("staleness", staleness))
    res["stalls"] = sum(wc.stalls for wc in workers)
    res["draws"] = sum(wc.draws for wc in workers)
    return res


def simulate(mode, M, N=None, **options):
    """Simulates one setting; returns a dict of numbers (see the module docstring).

    mode: 'sync' (N of M, default N = M), 'adaptive' or 'async'. options:
    steps, warmup, compute (a Dist or its spec), push_s, pull_s,
    transfer_delay_s, apply_s, slow ({worker: factor} or '0:3.0,...'),
    stall_p, stall_s, stall_workers, tail, tail_p, tail_workers, n_min,
    n_max, window, adaptive_warmup, staleness_bound, max_push_staleness,
    seed. Raises ValueError, naming the option, on bad input.

    Keys: steps_per_s, grads_per_s, step_time_{mean,p50,p90,p99,max} (sync,
    adaptive) and step_times, push_interval_{...}, arrivals, aggregated,
    dropped (sync: dropped_surplus + dropped_stale; async: refused),
    dropped_fraction (of the arrivals in the measured span), mean_n and
    n_per_step (adaptive; N each step from step 0), staleness_{...} and
    staleness_values (async, applied pushes in the span), per_worker_*
    (whole run, warm-up included), stalls and draws (whole run).
    """
    cfg = Config(mode, M, N, **options)
    if mode == "async":
        return _run_async(cfg)
    return _run_sync(cfg, mode == "adaptive")


# --------------------------------------------------------------------------
# The report.


def _int_list(flag):
    def parse(s):
        try:
            out = [int(x) for x in s.split(",") if x.strip() != ""]
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{s}': expected comma-separated integers")
        if not out:
            raise argparse.ArgumentTypeError(f"'{s}': empty")
        return out
    return parse


def _stall(s):
    p, sep, sec = s.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(p), float(sec)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}': expected PROBABILITY:SECONDS")


def build_parser():
    p = argparse.ArgumentParser(
        prog="step_time_model.py", description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="What is and is not modelled: the module docstring (pydoc).")
    p.add_argument("--workers", type=_int_list("--workers"), default=[16],
                   help="M, a comma-separated list (default 16)")
    p.add_argument("--compute", default="constant:0.055",
                   help="constant:S | exp:SHIFT,MEAN | pareto:SCALE,ALPHA | samples:FILE")
    p.add_argument("--push_s", type=float, default=0.0)
    p.add_argument("--pull_s", type=float, default=0.0)
    p.add_argument("--transfer_delay_s", type=float, default=0.0,
                   help="added before each push and after each pull (a slow link)")
    p.add_argument("--apply_s", type=float, default=0.0,
                   help="sync: publish delay after the N-th push")
    p.add_argument("--slow", default="", help="WORKER:FACTOR,... multiplies base compute")
    p.add_argument("--stall", type=_stall, default=(0.0, 0.0),
                   help="P:SECONDS added w.p. P a step")
    p.add_argument("--stall_workers", type=_int_list("--stall_workers"), default=None,
                   help="the workers that stall (default all)")
    p.add_argument("--tail", default=None,
                   help="extra delay a step: exp:SHIFT,MEAN | pareto:SCALE,ALPHA")
    p.add_argument("--tail_p", type=float, default=1.0, help="probability of the tail delay a step")
    p.add_argument("--tail_workers", type=_int_list("--tail_workers"), default=None)
    p.add_argument("--backups", type=_int_list("--backups"), default=[0],
                   help="sync rows b (N = M - b); b=0 is always run (the speedup's baseline)")
    p.add_argument("--adaptive", action="store_true", help="an adaptive-N sync row")
    p.add_argument("--n_min", type=int, default=1)
    p.add_argument("--n_max", type=int, default=None, help="default M")
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--adaptive_warmup", type=int, default=5)
    p.add_argument("--async", dest="run_async", action="store_true", help="an async row")
    p.add_argument("--staleness_bound", type=int, default=None,
                   help="adds an async row with this SSP bound")
    p.add_argument("--max_push_staleness", type=int, default=None,
                   help="async rows: refuse staler pushes")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None, help="write the numbers here too")
    return p


def _options(args):
    return dict(steps=args.steps, warmup=args.warmup, compute=args.compute,
                push_s=args.push_s, pull_s=args.pull_s, transfer_delay_s=args.transfer_delay_s,
                slow=args.slow, stall_p=args.stall[0], stall_s=args.stall[1],
                stall_workers=args.stall_workers, tail=args.tail, tail_p=args.tail_p,
                tail_workers=args.tail_workers, seed=args.seed)


def settings(args, M):
    """[(label, mode, N, extra options)] for one M; and notes on skipped rows."""
    rows, notes = [], []
    backups = sorted(set([0] + list(args.backups)))
    apply = {"apply_s": args.apply_s}
    for b in backups:
        if b < 0:
            raise ValueError(f"--backups: b = {b} is negative")
        if b >= M:
            notes.append(f"M={M}: sync b={b} skipped (N = M - b < 1)")
            continue
        rows.append((f"sync b={b}", "sync", M - b, apply))
    if args.adaptive:
        rows.append(("adaptive", "adaptive", None,
                     dict(apply, n_min=args.n_min, n_max=args.n_max, window=args.window,
                          adaptive_warmup=args.adaptive_warmup)))
    if args.run_async:
        rows.append(("async*", "async", None, {"max_push_staleness": args.max_push_staleness}))
    if args.staleness_bound is not None:
        rows.append((f"async ssp={args.staleness_bound}*", "async", None,
                     {"max_push_staleness": args.max_push_staleness,
                      "staleness_bound": args.staleness_bound}))
    return rows, notes


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def _ms(x):
    return "-" if x is None else f"{x * 1000:.1f}"


REPORT_KEYS = ("M", "setting", "mode", "N", "steps", "warmup", "duration_s", "steps_per_s",
               "grads_per_s", "time_kind", "time_p50", "time_p90", "time_p99", "time_mean",
               "arrivals", "aggregated", "dropped", "dropped_surplus", "dropped_stale",
               "dropped_fraction", "normalized_speedup", "mean_n", "staleness_mean",
               "staleness_p99", "staleness_max", "staleness_bound", "max_push_staleness",
               "stalls", "draws", "sim_wall_s")


def report_row(label, res, base):
    kind = "push_interval" if res["mode"] == "async" else "step_time"
    row = {"setting": label, "time_kind": kind,
           "time_p50": res[f"{kind}_p50"], "time_p90": res[f"{kind}_p90"],
           "time_p99": res[f"{kind}_p99"], "time_mean": res[f"{kind}_mean"],
           "normalized_speedup": res["grads_per_s"] / base["grads_per_s"]}
    for k in REPORT_KEYS:
        if k not in row:
            row[k] = res.get(k)
    return row


def markdown(rows, args, notes):
    out = ["| M | setting | N | steps/s | grads/s | time p50 (ms) | p90 | p99 | dropped | "
           "dropped % | norm. speedup | mean N | staleness mean | staleness p99 |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append("| " + " | ".join([
            str(r["M"]), r["setting"], _fmt(r["N"], "d"), _fmt(r["steps_per_s"], ".2f"),
            _fmt(r["grads_per_s"], ".1f"), _ms(r["time_p50"]), _ms(r["time_p90"]),
            _ms(r["time_p99"]), str(r["dropped"]), _fmt(100 * r["dropped_fraction"], ".1f"),
            _fmt(r["normalized_speedup"], ".3f"), _fmt(r["mean_n"], ".2f"),
            _fmt(r["staleness_mean"], ".2f"), _fmt(r["staleness_p99"], "d")]) + " |")
    out.append("")
    out.append(f"steps={args.steps} after warmup={args.warmup} global steps (sync/adaptive), "
               f"seed={args.seed}, compute={args.compute}, push_s={args.push_s}, "
               f"pull_s={args.pull_s}, transfer_delay_s={args.transfer_delay_s}, "
               f"apply_s={args.apply_s}, slow={args.slow or 'none'}, "
               f"stall={args.stall[0]}:{args.stall[1]}"
               f"{'' if args.stall_workers is None else ' on ' + str(args.stall_workers)}, "
               f"tail={args.tail or 'none'}.")
    out.append("- " + SPEEDUP_DEFINITION + ".")
    out.append("- " + ASYNC_RULE + ".")
    out.append("- sync/adaptive time columns: global step time (interval between publishes); "
               "percentiles nearest-rank; dropped = surplus + stale pushes (sync), refused "
               "(async, max_push_staleness), over the measured span; staleness: applied pushes.")
    if args.adaptive:
        out.append(f"- adaptive: n in [{args.n_min}, {args.n_max or 'M'}], window "
                   f"{args.window}, warm-up {args.adaptive_warmup} steps at n_max; N = argmax "
                   "n/T(n), ties to the larger n.")
    out.extend("- " + n for n in notes)
    return "\n".join(out)


def main(argv=None):
    import time
    parser = build_parser()
    args = parser.parse_args(argv)
    opts = _options(args)
    plan = []
    try:
        # Every setting is checked before the first (long) simulation.
        for M in args.workers:
            rows, notes = settings(args, M)
            for label, mode, N, extra in rows:
                Config(mode, M, N, **opts, **extra)
            plan.append((M, rows, notes))
    except ValueError as e:
        parser.error(str(e))
    out_rows, all_notes = [], []
    for M, rows, notes in plan:
        all_notes.extend(notes)
        base = None
        for label, mode, N, extra in rows:
            start = time.monotonic()
            try:
                res = simulate(mode, M, N, **opts, **extra)
            except ValueError as e:
                parser.error(f"M={M} {label}: {e}")
            res["sim_wall_s"] = time.monotonic() - start
            if base is None:
                base = res  # sync b=0 comes first
            out_rows.append(report_row(label, res, base))
            print(f"step_time_model: M={M} {label}: {res['sim_wall_s']:.1f} s", file=sys.stderr)
    print(markdown(out_rows, args, all_notes))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items() if k != "json"},
                       "speedup_definition": SPEEDUP_DEFINITION, "async_rule": ASYNC_RULE,
                       "notes": all_notes, "rows": out_rows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
