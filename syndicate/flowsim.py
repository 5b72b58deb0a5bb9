"""A flow-level network simulator of the HGX-2-like cluster, the ground truth the optimizer's
channel-token model is measured against (spec §6.4; thesis §4.5, T:1697-1699).

Event-driven. A motif becomes a set of flows, one per (src, dst) rank pair with the bytes of all
its transfers (:func:`syndicate.motifs.flows`), on the paths of its channel
(:meth:`syndicate.topology.Topology.path`); an all-reduce motif's inter-node traffic is striped
over all of the node's RoCE NICs, as NCCL's per-NIC rings do [ASSUMPTION]. Flows share links
max-min fairly (progressive filling), recomputed whenever a flow starts or ends. A NIC's ingress
capacity is divided by the incast penalty φ(f) (spec §3.4), f being the flows larger than b₀
arriving on it per GPU behind it. A motif ends when its last flow ends, plus its latency:
λ + rounds x α of its slowest path (the rounds of a ring are pipelined into one flow per
neighbour pair, their latency kept).

Compute: the job is SPMD and a motif's completion is global. Without skew (the default, and
the calibrated ranking's setting) the GPUs' compute streams run the same tasks at the same
times, so one stream, in program order, stands for all of them. With ``skew`` > 0 every GPU has
its own compute stream in program order, each of its tasks slowed by a seeded factor
1 + skew·U(0, 1) drawn per (GPU, task) from ``default_rng([skew_seed, gpu])``; a compute task
is done when its last GPU is done, so a straggler delays the collectives after it (and a
rank's next task waits only for its own previous one and for the collectives it consumes).

Comm dispatch, per stream (one per channel, or one for all, as in the optimizer):

* ``order``: the enforcer (Pseudocode 5): motifs are issued strictly in the plan's sequence,
  each once its comm-op has been submitted, onto its channel's FIFO queue;
* ``fifo`` / ``lifo`` / ``priority``: when a stream is idle it takes, among the submitted
  motifs, the first submitted, the last submitted, or the first by the hand priority.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from syndicate.motifs import Motif, flows
from syndicate.sched import Graph
from syndicate.topology import Topology

__all__ = ["FlowSet", "SimResult", "flowset", "maxmin", "motif_time", "simulate"]


@dataclass(frozen=True)
class FlowSet:
    links: np.ndarray  # (F, K) link ids, -1 padded
    nbytes: np.ndarray  # (F,)
    ingress: np.ndarray  # (F,) incast-prone ingress link or -1
    big: np.ndarray  # (F,) bool: the flow's pair carries more than b0 bytes
    latency: float


def flowset(topo: Topology, motif: Motif) -> FlowSet:
    """The flows of ``motif`` on ``topo`` (self-copies dropped: they use no link)."""
    p = topo.params
    rows: list[tuple[tuple[int, ...], float, int, bool]] = []
    alpha = 0.0
    for (s, d), nbytes in flows(motif).items():
        if s == d or nbytes == 0:
            continue
        big = nbytes > p.incast_b0
        inter = topo.node_of(s) != topo.node_of(d)
        if motif.striped and inter and motif.channel == "gpu":
            g = topo.gpus_per_node
            for nic in range(g):
                path = topo.path(s, d, "gpu", nic)
                rows.append(
                    (path.links, nbytes / g, -1 if path.ingress is None else path.ingress, big)
                )
                alpha = max(alpha, path.alpha)
        else:
            path = topo.path(s, d, motif.channel)
            rows.append(
                (path.links, float(nbytes), -1 if path.ingress is None else path.ingress, big)
            )
            alpha = max(alpha, path.alpha)
    width = max((len(r[0]) for r in rows), default=1)
    links = np.full((len(rows), width), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        links[i, : len(r[0])] = r[0]
    return FlowSet(
        links,
        np.array([r[1] for r in rows], dtype=float),
        np.array([r[2] for r in rows], dtype=np.int64),
        np.array([r[3] for r in rows], dtype=bool),
        p.motif_overhead + motif.rounds * alpha,
    )


def maxmin(links: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Max-min fair rates by progressive filling; ``links`` (F, K) -1 padded, ``caps`` per
    link. Every flow must cross at least one link."""
    n_links = len(caps)
    lk = np.where(links < 0, n_links, links)
    rem = np.append(caps.astype(float), np.inf)
    full = rem.copy()
    rate = np.zeros(len(lk))
    active = np.ones(len(lk), dtype=bool)
    while active.any():
        cnt = np.bincount(lk[active].ravel(), minlength=n_links + 1).astype(float)
        cnt[-1] = 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(cnt > 0, rem / cnt, np.inf)
        inc = share.min()
        if not math.isfinite(inc):
            raise ValueError("a flow crosses no link")
        rate[active] += inc
        rem -= inc * cnt
        saturated = (cnt > 0) & (rem <= 1e-9 * full)
        saturated[-1] = False
        hit = saturated[lk].any(axis=1) & active
        if not hit.any():  # numerical corner: freeze the tightest link's flows
            hit = (lk == int(np.argmin(share))).any(axis=1) & active
        active &= ~hit
    return rate


@dataclass(frozen=True)
class SimResult:
    start: Mapping[str, float]
    finish: Mapping[str, float]
    makespan: float
    period: float
    idle_fraction: float  # compute-stream gaps in the steady-state iteration
    events: int


class _Net:
    """Active flows of running motifs and their max-min rates."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.caps = np.array(topo.capacity, dtype=float)
        self.endpoints = np.array(topo.endpoints, dtype=float)
        self.sets: dict[str, FlowSet] = {}
        self.left: dict[str, np.ndarray] = {}
        self.rates: dict[str, np.ndarray] = {}

    def add(self, mid: str, fs: FlowSet) -> None:
        self.sets[mid] = fs
        self.left[mid] = fs.nbytes.copy()
        self._rerate()

    def _rerate(self) -> None:
        ids = list(self.sets)
        if not ids:
            self.rates = {}
            return
        pads = max(self.sets[m].links.shape[1] for m in ids)
        parts = []
        for m in ids:
            lk = self.sets[m].links[self.left[m] > 0]
            if lk.shape[1] < pads:
                lk = np.pad(lk, ((0, 0), (0, pads - lk.shape[1])), constant_values=-1)
            parts.append(lk)
        links = np.concatenate(parts)
        ingress = np.concatenate([self.sets[m].ingress[self.left[m] > 0] for m in ids])
        big = np.concatenate([self.sets[m].big[self.left[m] > 0] for m in ids])
        caps = self.caps.copy()
        sel = (ingress >= 0) & big
        if sel.any():
            fan = np.bincount(ingress[sel], minlength=len(caps)) / self.endpoints
            p = self.topo.params
            caps /= 1.0 + p.incast_kappa * np.maximum(0.0, fan - p.incast_f0)
        rate = maxmin(links, caps) if len(links) else np.zeros(0)
        self.rates = {}
        k = 0
        for m in ids:
            alive = self.left[m] > 0
            r = np.zeros(len(alive))
            n = int(alive.sum())
            r[alive] = rate[k : k + n]
            k += n
            self.rates[m] = r

    def next_done(self) -> float:
        best = math.inf
        for m, left in self.left.items():
            alive = left > 0
            if alive.any():
                best = min(best, float(np.min(left[alive] / self.rates[m][alive])))
        return best

    def advance(self, dt: float) -> list[str]:
        """Move every flow on by ``dt``; return the motifs whose last flow ended."""
        ended, changed = [], False
        for m in list(self.left):
            left = self.left[m]
            before = left > 0
            left -= self.rates[m] * dt
            tol = 1e-9 * self.sets[m].nbytes + 1e-6
            left[left <= tol] = 0.0
            if (before & (left <= 0)).any():
                changed = True
            if not (left > 0).any():
                ended.append(m)
                del self.left[m], self.sets[m]
        if changed:
            self._rerate()
        return ended


def simulate(
    topo: Topology,
    graph: Graph,
    motifs: Mapping[str, Motif],
    *,
    dispatch: str = "order",
    streams: str = "channel",
    order: Sequence[str] = (),
    priority: Mapping[str, int] | None = None,
    skew: float = 0.0,
    skew_seed: int = 0,
) -> SimResult:
    """Run ``graph`` (compute durations from its nodes, motif durations from the network) with
    ``motifs`` mapping each comm node id to its motif; see the module docstring (``skew``:
    per-GPU compute streams with seeded slowdowns; 0 is the single SPMD stream)."""
    if dispatch not in ("order", "fifo", "lifo", "priority"):
        raise ValueError(f"unknown dispatch {dispatch!r}")
    if not (skew >= 0 and math.isfinite(skew)):
        raise ValueError(f"skew must be a finite number >= 0, got {skew}")
    by_id = {n.id: n for n in graph.nodes}
    comm_ids = [n.id for n in graph.nodes if n.comm]
    if dispatch == "order" and sorted(order) != sorted(comm_ids):
        raise ValueError("the order must name every motif of the graph exactly once")
    missing = [m for m in comm_ids if m not in motifs]
    if missing:
        raise ValueError(f"no motif for comm nodes {missing[:3]}...")
    prio = priority or {}
    stream_of = {m: ("comm" if streams == "single" else by_id[m].channel) for m in comm_ids}
    cache: dict[str, FlowSet] = {}
    net = _Net(topo)
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    submit: dict[str, float] = {}
    busy: dict[str, str | None] = {s: None for s in set(stream_of.values())}
    queues: dict[str, list[str]] = {s: [] for s in busy}
    issued: set[str] = set()
    ptr_issue = 0
    comps = graph.computes
    n_streams = topo.n_ranks if skew > 0 else 1
    slow = np.ones((n_streams, len(comps)))
    if skew > 0:
        for r in range(n_streams):
            slow[r] = 1.0 + skew * np.random.default_rng([skew_seed, r]).random(len(comps))
    ptrs = [0] * n_streams
    comp_busy = [False] * n_streams
    done_on: dict[str, int] = {}  # compute id -> GPUs done with it
    rank_done: list[set[str]] = [set() for _ in range(n_streams)]
    rank_of: dict[int, int] = {}  # timer tick -> the GPU of that compute task
    timers: list[tuple[float, int, str]] = []
    tick = 0
    t = 0.0
    events = 0

    def ready(nid: str) -> bool:
        return all(p in finish for p in by_id[nid].parents)

    def submitted(mid: str) -> bool:
        # the comm-op was submitted: every compute parent done, motif parents issued
        return all(
            (p in finish) if not by_id[p].comm else (p in issued) for p in by_id[mid].parents
        )

    def sub_time(mid: str) -> float:
        if mid not in submit:
            ts = [submit[p] if by_id[p].comm else finish[p] for p in by_id[mid].parents]
            submit[mid] = max(ts, default=0.0)
        return submit[mid]

    def start_motif(mid: str) -> None:
        nonlocal tick
        busy[stream_of[mid]] = mid
        start[mid] = t
        fs = cache.get(mid)
        if fs is None:
            fs = cache[mid] = flowset(topo, motifs[mid])
        if len(fs.nbytes):
            net.add(mid, fs)
        else:
            tick += 1
            heapq.heappush(timers, (t + fs.latency, tick, mid))

    def ready_on(r: int, nid: str) -> bool:
        if n_streams == 1:
            return ready(nid)
        return all(
            (p in finish) if by_id[p].comm else (p in rank_done[r]) for p in by_id[nid].parents
        )

    def dispatch_all() -> None:
        nonlocal tick, ptr_issue
        for r in range(n_streams):
            i = ptrs[r]
            if not comp_busy[r] and i < len(comps) and ready_on(r, comps[i].id):
                c = comps[i]
                start.setdefault(c.id, t)
                comp_busy[r] = True
                ptrs[r] += 1
                tick += 1
                rank_of[tick] = r
                dur = c.dur if n_streams == 1 else c.dur * float(slow[r, i])
                heapq.heappush(timers, (t + dur, tick, c.id))
        if dispatch == "order":
            while ptr_issue < len(order) and submitted(order[ptr_issue]):
                mid = order[ptr_issue]
                issued.add(mid)
                queues[stream_of[mid]].append(mid)
                ptr_issue += 1
            for s, q in queues.items():
                if busy[s] is None and q and ready(q[0]):
                    start_motif(q.pop(0))
            return
        for s in busy:
            if busy[s] is not None:
                continue
            cands = [m for m in comm_ids if stream_of[m] == s and m not in start and ready(m)]
            if not cands:
                continue
            if dispatch == "fifo":
                pick = min(cands, key=lambda m: (sub_time(m), by_id[m].prog))
            elif dispatch == "lifo":
                pick = max(cands, key=lambda m: (sub_time(m), by_id[m].prog))
            else:
                big = len(prio) + 1
                pick = min(
                    cands,
                    key=lambda m: (prio.get(by_id[m].op or "", big), sub_time(m), by_id[m].prog),
                )
            issued.add(pick)
            start_motif(pick)

    total = len(graph.nodes)
    while len(finish) < total:
        dispatch_all()
        t_timer = timers[0][0] if timers else math.inf
        t_flow = t + net.next_done() if net.sets else math.inf
        t_next = min(t_timer, t_flow)
        if not math.isfinite(t_next):
            raise RuntimeError(f"simulation stalled at t={t:.6f}: {total - len(finish)} left")
        ended = net.advance(t_next - t) if net.sets else []
        t = t_next
        events += 1
        for mid in ended:
            tick += 1
            heapq.heappush(timers, (t + cache[mid].latency, tick, mid))
        while timers and timers[0][0] <= t + 1e-15:
            _, tk, nid = heapq.heappop(timers)
            if by_id[nid].comm:
                finish[nid] = t
                busy[stream_of[nid]] = None
                continue
            r = rank_of.pop(tk)
            comp_busy[r] = False
            rank_done[r].add(nid)
            done_on[nid] = done_on.get(nid, 0) + 1
            if done_on[nid] == n_streams:  # done on its last GPU
                finish[nid] = t
    makespan = max(finish.values(), default=0.0)
    iters = sorted({c.iteration for c in comps})
    if len(iters) >= 2:
        # Two iterations: Gap 3.9's period; more: the mean period after the first (warm-up).
        warm = iters[0] if len(iters) == 2 else iters[1]
        end1 = graph.iteration_end(warm, finish)
        end2 = graph.iteration_end(iters[-1], finish)
        period = (end2 - end1) / (iters[-1] - warm)
        work = sum(c.dur for c in comps if c.iteration == iters[-1])
    else:
        period = makespan
        work = sum(c.dur for c in comps)
    idle = 1.0 - work / period if period > 0 else 0.0
    return SimResult(start, finish, makespan, period, idle, events)


def motif_time(topo: Topology, motif: Motif) -> float:
    """The standalone time of ``motif`` on ``topo`` (the microbenchmark of the cost model)."""
    fs = flowset(topo, motif)
    if not len(fs.nbytes):
        return fs.latency
    net = _Net(topo)
    net.add(motif.id, fs)
    t = 0.0
    while net.sets:
        dt = net.next_done()
        net.advance(dt)
        t += dt
    return t + fs.latency
