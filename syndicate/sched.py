"""optSched and the list schedulers that price a plan (thesis §4.4.2, Pseudocode 4 lines 10-23,
T:1574-1615; spec §3.3 and Gaps 3.6-3.10).

The literal pseudocode has no outer loop and stalls when a queue empties (Gap 3.6); this is the
spec's corrected reference. Nodes are compute tasks (one compute stream, program order, T:1411)
and motifs; a motif holds a set of *link tokens* (Gap 3.7a: its channel, ``gpu`` or ``cpu``, or
the single token ``comm`` when comm-ops run one at a time) and two motifs sharing a token never
overlap (T:1615). The critical path is the b-level (Gap 3.8).

Policies, one loop: at each step the next compute task runs if it is ready and the compute
clock is behind the comm clock (or nothing else is ready); otherwise one ready motif is placed
at its earliest start on its tokens:

* ``crit`` (optSched): the highest b-level, then the earliest start, then program order;
* ``fifo``, ``lifo``, ``priority``: among the motifs that can start earliest, the first
  submitted, the last submitted (ByteScheduler-like, T:1727), or a hand priority by comm-op
  then submission (HO, T:1755).

The objective is the two-iteration makespan (Gap 3.9, literal); :attr:`Schedule.period` is the
iteration time Gap 3.9 reports beside it (end of iteration 2's last compute minus iteration
1's). A non-periodic schedule can shorten that one period by delaying iteration 1's end, so
:attr:`Schedule.mean_period` (the last compute's end minus the first compute's start, over the
number of iterations: the data-prep prologue excluded) is the robust figure the optimizer's
``period`` objective uses.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "POLICIES",
    "Graph",
    "Node",
    "Schedule",
    "list_schedule",
    "periodic_sequence",
    "replay_order",
    "steady_period",
]

POLICIES = ("crit", "fifo", "lifo", "priority")


@dataclass(frozen=True, slots=True)
class Node:
    """A compute task (``op`` None) or a motif of comm-op ``op``, in iteration ``iteration``."""

    id: str
    dur: float
    parents: tuple[str, ...]
    prog: int  # program (submission) order
    iteration: int
    op: str | None = None  # the comm-op's name (without the iteration)
    channel: str = ""

    @property
    def comm(self) -> bool:
        return self.op is not None


@dataclass(frozen=True)
class Graph:
    """The unrolled DAG under one execution plan; compute nodes appear in program order."""

    nodes: tuple[Node, ...]

    def __post_init__(self) -> None:
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate node ids in the graph")
        known = set(ids)
        for n in self.nodes:
            missing = [p for p in n.parents if p not in known]
            if missing:
                raise ValueError(f"node {n.id} has unknown parents {missing}")

    @property
    def computes(self) -> list[Node]:
        return [n for n in self.nodes if not n.comm]

    @property
    def motifs(self) -> list[Node]:
        return [n for n in self.nodes if n.comm]

    def b_levels(self) -> dict[str, float]:
        """dur(v) + the longest path below v (compute program order counts as an edge)."""
        children: dict[str, list[str]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for p in n.parents:
                children[p].append(n.id)
        comps = self.computes
        for a, b in itertools.pairwise(comps):
            children[a.id].append(b.id)
        by_id = {n.id: n for n in self.nodes}
        bl: dict[str, float] = {}
        for nid in _topological(self.nodes, children):
            bl[nid] = by_id[nid].dur + max((bl[c] for c in children[nid]), default=0.0)
        return bl

    def iteration_end(self, iteration: int, finish: Mapping[str, float]) -> float:
        return max(finish[n.id] for n in self.computes if n.iteration == iteration)


def _topological(nodes: Sequence[Node], children: Mapping[str, list[str]]) -> list[str]:
    """Node ids, children first (a reverse topological order); raises on a cycle."""
    indeg = {n.id: 0 for n in nodes}
    for kids in children.values():
        for c in kids:
            indeg[c] += 1
    stack = [n.id for n in nodes if indeg[n.id] == 0]
    order = []
    while stack:
        v = stack.pop()
        order.append(v)
        for c in children[v]:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(c)
    if len(order) != len(nodes):
        raise ValueError("the graph has a cycle")
    return order[::-1]


@dataclass(frozen=True)
class Schedule:
    """Start and finish of every node; ``order`` the motifs in scheduling order (the sequence
    numbers the enforcer installs)."""

    start: Mapping[str, float]
    finish: Mapping[str, float]
    order: tuple[str, ...]
    makespan: float
    period: float
    policy: str
    mean_period: float = 0.0


def _tokens(node: Node, streams: str) -> tuple[str, ...]:
    return ("comm",) if streams == "single" else (node.channel,)


def list_schedule(
    graph: Graph,
    policy: str = "crit",
    *,
    streams: str = "channel",
    priority: Mapping[str, int] | None = None,
) -> Schedule:
    """Schedule ``graph`` (see module docstring); ``streams`` is ``channel`` (one token per
    channel) or ``single`` (one comm stream)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    if streams not in ("channel", "single"):
        raise ValueError(f"streams must be 'channel' or 'single', got {streams!r}")
    prio = priority or {}
    bl = graph.b_levels() if policy == "crit" else {}
    by_id = {n.id: n for n in graph.nodes}
    comp_seq = graph.computes
    waiting = {n.id: len(n.parents) for n in graph.nodes}
    children: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    for n in graph.nodes:
        for p in n.parents:
            children[p].append(n.id)
    ready: set[str] = {n.id for n in graph.nodes if n.comm and not n.parents}
    free: dict[str, float] = {}
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    order: list[str] = []
    comp_time = comm_time = 0.0
    ptr = 0

    def parents_done(n: Node) -> float:
        return max((finish[p] for p in n.parents), default=0.0)

    # A motif's submission time is its comm-op's: when its producer finished (a motif after
    # another motif of the same op inherits the op's submission, as the simulator does).
    sub: dict[str, float] = {}

    def submitted_at(m: str) -> float:
        if m not in sub:
            n = by_id[m]
            sub[m] = max((sub[p] if by_id[p].comm else finish[p] for p in n.parents), default=0.0)
        return sub[m]

    def done(nid: str) -> None:
        for c in children[nid]:
            waiting[c] -= 1
            if waiting[c] == 0 and by_id[c].comm:
                ready.add(c)
                submitted_at(c)

    while len(finish) < len(graph.nodes):
        nc = comp_seq[ptr] if ptr < len(comp_seq) and waiting[comp_seq[ptr].id] == 0 else None
        if nc is not None and (comp_time < comm_time or not ready):
            s = max(comp_time, parents_done(nc))
            start[nc.id], finish[nc.id] = s, s + nc.dur
            comp_time = finish[nc.id]
            ptr += 1
            done(nc.id)
            continue
        if not ready:
            raise ValueError("deadlock: no compute or motif can run (a cycle through streams)")
        est = {
            m: max(parents_done(by_id[m]), *(free.get(t, 0.0) for t in _tokens(by_id[m], streams)))
            for m in ready
        }
        if policy == "crit":
            m = max(ready, key=lambda m: (bl[m], -est[m], -by_id[m].prog))
        else:
            earliest = min(est.values())
            cands = [m for m in ready if est[m] <= earliest + 1e-12]
            sub_of = {m: submitted_at(m) for m in cands}
            if policy == "fifo":
                m = min(cands, key=lambda m: (sub_of[m], by_id[m].prog))
            elif policy == "lifo":
                m = max(cands, key=lambda m: (sub_of[m], by_id[m].prog))
            else:
                big = len(prio) + 1
                m = min(
                    cands,
                    key=lambda m: (prio.get(by_id[m].op or "", big), sub_of[m], by_id[m].prog),
                )
        node = by_id[m]
        start[m], finish[m] = est[m], est[m] + node.dur
        for t in _tokens(node, streams):
            free[t] = finish[m]
        comm_time = max(comm_time, finish[m])
        ready.discard(m)
        order.append(m)
        done(m)
    makespan = max(finish.values(), default=0.0)
    iters = sorted({n.iteration for n in comp_seq})
    period = (
        graph.iteration_end(iters[-1], finish) - graph.iteration_end(iters[-2], finish)
        if len(iters) >= 2
        else makespan
    )
    first = min((start[c.id] for c in comp_seq), default=0.0)
    mean = (graph.iteration_end(iters[-1], finish) - first) / len(iters) if iters else 0.0
    return Schedule(start, finish, tuple(order), makespan, period, policy, mean)


def periodic_sequence(
    order: Sequence[str], prefetch: bool, data_ops: frozenset[str], iterations: int
) -> list[str]:
    """The enforcer's sequence over ``iterations`` iterations from a two-iteration order
    (Gap 3.12): iteration 1's motifs in their order, with a prefetched data op's iteration-2
    motifs at their places relabelled k+1 (δ = +1), repeated for every iteration k; with the
    prefetch, iteration 1's data op runs first as a prologue. Motif ids are ``op/...#k``."""
    template: list[tuple[str, int]] = []
    prologue: list[str] = []
    for m in order:
        base, k_text = m.rsplit("#", 1)
        k, op = int(k_text), base.split("/", 1)[0]
        prefetched = prefetch and op in data_ops
        if k == 1 and not prefetched:
            template.append((base, 0))
        elif k == 1:
            prologue.append(m)
        elif k == 2 and prefetched:
            template.append((base, 1))
    seq = list(prologue)
    for k in range(1, iterations + 1):
        seq += [f"{base}#{k + d}" for base, d in template if k + d <= iterations]
    return seq


def steady_period(graph: Graph, finish: Mapping[str, float]) -> float:
    """The mean iteration time after the first iteration (or the one period of two)."""
    iters = sorted({n.iteration for n in graph.computes})
    if len(iters) < 2:
        return max(finish.values(), default=0.0)
    warm = iters[0] if len(iters) == 2 else iters[1]
    end = graph.iteration_end(iters[-1], finish)
    return (end - graph.iteration_end(warm, finish)) / (iters[-1] - warm)


def replay_order(graph: Graph, sequence: Sequence[str], *, streams: str = "channel") -> Schedule:
    """What the enforcer does with ``sequence`` under fixed motif durations: motifs are issued
    strictly in sequence once their comm-op is submitted, onto their stream's FIFO queue, and
    run when the stream is free and their deps are done (Pseudocode 5, Gap 4.1b); compute runs
    in program order. The returned ``period`` is :func:`steady_period`."""
    by_id = {n.id: n for n in graph.nodes}
    comm = [n.id for n in graph.nodes if n.comm]
    if sorted(sequence) != sorted(comm):
        raise ValueError("the sequence must name every motif of the graph exactly once")
    comps = graph.computes
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    issued: set[str] = set()
    queues: dict[str, list[str]] = {}
    busy: dict[str, bool] = {}
    timers: list[tuple[float, int, str]] = []
    t, tick, ptr, ip, comp_busy = 0.0, 0, 0, 0, False

    def stream(m: str) -> str:
        return _tokens(by_id[m], streams)[0]

    def push(nid: str) -> None:
        nonlocal tick
        start[nid] = t
        tick += 1
        heapq.heappush(timers, (t + by_id[nid].dur, tick, nid))

    while len(finish) < len(graph.nodes):
        if not comp_busy and ptr < len(comps) and all(p in finish for p in comps[ptr].parents):
            push(comps[ptr].id)
            comp_busy, ptr = True, ptr + 1
        while ip < len(sequence) and all(
            (p in issued) if by_id[p].comm else (p in finish) for p in by_id[sequence[ip]].parents
        ):
            issued.add(sequence[ip])
            queues.setdefault(stream(sequence[ip]), []).append(sequence[ip])
            ip += 1
        for s, q in queues.items():
            if not busy.get(s) and q and all(p in finish for p in by_id[q[0]].parents):
                busy[s] = True
                push(q.pop(0))
        if not timers:
            raise ValueError(f"deadlock replaying the sequence at t={t}")
        t, _, nid = heapq.heappop(timers)
        finish[nid] = t
        if by_id[nid].comm:
            busy[stream(nid)] = False
        else:
            comp_busy = False
    makespan = max(finish.values(), default=0.0)
    period = steady_period(graph, finish)
    return Schedule(start, finish, tuple(sequence), makespan, period, "order", period)
