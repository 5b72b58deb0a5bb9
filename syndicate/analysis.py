"""Where a simulated iteration goes, and how much any plan could gain (the diagnosis behind the
ranking benchmark; thesis §4.2, Fig 4.4's compute-stream gaps, T:1403-1419; §4.5.3, T:1738-1779;
spec §6.4, §6.6).

:func:`bounds` gives lower bounds on the steady-state iteration time of *every* plan of the
catalogue under *every* order, on the simulator's own terms (a channel runs one motif at a time,
T:1471, Gap 4.1b; one compute stream in program order, T:1411; a motif never runs faster than
alone on the network, its microbenchmark):

* ``compute``: communication free, the compute stream never waits;
* ``stream``: the busiest comm stream; every comm-op at its fastest option on its channel
  (``floors``), the all-to-alls' channels chosen to balance the two streams;
* ``dag``: the DAG's own limit; every comm-op at its floor, no two ever contending (unlimited
  streams), the data op prefetched as far ahead as it likes; the period of that ASAP schedule;
* ``combined``: per assignment of the all-to-alls to channels, the largest of the three above,
  minimised over the assignments. No schedule of any plan beats it (up to the max-min corner
  that another flow can speed one up, and the incast penalty which only slows).

:func:`breakdown` splits one simulated steady-state iteration into compute and the compute
stream's gaps, each gap charged to the comm-op the next task waited for (the paper's G1-G4),
the share of the period each comm stream is busy, and the utilisation of the busiest link of
each kind (bytes per iteration over capacity times the period; incast not counted).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from syndicate.cost import CostModel, MicrobenchCost, TableCost
from syndicate.dag import TrainingDAG, unroll
from syndicate.flowsim import SimResult, flowset
from syndicate.motifs import ExecOption
from syndicate.optimizer import STEADY_ITERATIONS as STEADY
from syndicate.optimizer import PlanResult, op_order_sequence, op_precedence, standalone
from syndicate.sched import Graph, periodic_sequence, replay_order, steady_period
from syndicate.topology import CHANNELS, Topology

__all__ = [
    "Bounds",
    "Breakdown",
    "OrderOracle",
    "bounds",
    "breakdown",
    "dag_period",
    "link_kind",
    "link_loads",
    "order_oracle",
]

LINK_KINDS: tuple[str, ...] = ("nvl-up", "nvl-down", "pcie-up", "pcie-down", "roce-up")
LINK_KINDS += ("roce-down", "sw-up", "sw-down")


@dataclass(frozen=True)
class Bounds:
    compute: float
    stream: float
    dag: float
    combined: float
    assignment: Mapping[str, str]  # the all-to-alls' channels at ``combined``
    floors: Mapping[str, Mapping[str, float]]  # comm-op -> channel -> fastest option's time

    def as_dict(self) -> dict[str, object]:
        return {
            "compute_s": self.compute,
            "stream_s": self.stream,
            "dag_s": self.dag,
            "combined_s": self.combined,
            "assignment": dict(self.assignment),
            "floors_s": {k: dict(v) for k, v in self.floors.items()},
        }


def _floors(dag: TrainingDAG, cost: CostModel) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for c in dag.comms:
        for o in dag.options[c.op.name]:
            t = standalone(cost, dag, c.op.name, o)
            per = out.setdefault(c.op.name, {})
            per[o.channel] = min(per.get(o.channel, t), t)
    return out


def _asap(graph: Graph) -> dict[str, float]:
    """Compute in program order on one stream, every motif as soon as its parents are done."""
    finish: dict[str, float] = {}
    comp_end = 0.0
    for n in graph.nodes:  # program order; every edge points forward in it
        if any(p not in finish for p in n.parents):
            raise ValueError(f"{n.id} precedes a parent in program order")
        ready = max((finish[p] for p in n.parents), default=0.0)
        if n.comm:
            finish[n.id] = ready + n.dur
        else:
            comp_end = max(comp_end, ready) + n.dur
            finish[n.id] = comp_end
    return finish


def dag_period(dag: TrainingDAG, durations: Mapping[str, float], *, iterations: int = 6) -> float:
    """The steady-state period of the DAG when comm-op ``name`` takes ``durations[name]`` and
    comm-ops never contend (unlimited streams); the data op may be prefetched."""
    unit = ExecOption("aa")
    opts = {c.op.name: unit if c.op.kind == "AA" else ExecOption("ring") for c in dag.comms}
    table = TableCost({(n, o.label): durations[n] for n, o in opts.items()})
    g = unroll(dag, opts, table, prefetch=True, iterations=iterations)
    return steady_period(g, _asap(g))


def bounds(dag: TrainingDAG, cost: CostModel) -> Bounds:
    """See the module docstring."""
    floors = _floors(dag, cost)
    compute = sum(t.time for t in dag.tasks)
    movable = [c.op.name for c in dag.comms if len(floors[c.op.name]) > 1]
    fixed = {c.op.name: min(floors[c.op.name], key=lambda ch: floors[c.op.name][ch])
             for c in dag.comms if c.op.name not in movable}  # fmt: skip
    best: tuple[float, float, float, dict[str, str]] | None = None
    stream_best = dag_best = float("inf")
    for chans in itertools.product(CHANNELS, repeat=len(movable)):
        assign = {**fixed, **dict(zip(movable, chans, strict=True))}
        per_stream = {ch: 0.0 for ch in CHANNELS}
        for name, ch in assign.items():
            per_stream[ch] += floors[name][ch]
        stream = max(per_stream.values())
        dagp = dag_period(dag, {n: floors[n][ch] for n, ch in assign.items()})
        value = max(compute, stream, dagp)
        stream_best, dag_best = min(stream_best, stream), min(dag_best, dagp)
        if best is None or value < best[0]:
            best = (value, stream, dagp, {n: assign[n] for n in movable})
    assert best is not None
    return Bounds(compute, stream_best, dag_best, best[0], best[3], floors)


def link_kind(topo: Topology, link: int) -> str:
    g = topo.gpus_per_node
    idx = link % (8 * g + 2)
    return LINK_KINDS[idx // g] if idx < 8 * g else ("host-up", "host-down")[idx - 8 * g]


def link_loads(
    topo: Topology, dag: TrainingDAG, cost: MicrobenchCost, plan: Mapping[str, ExecOption]
) -> dict[int, float]:
    """Seconds each link is busy per iteration under ``plan`` at full capacity (bytes over
    capacity; incast not counted)."""
    loads: dict[int, float] = {}
    for c in dag.comms:
        for mc in cost.motifs(c.op, plan[c.op.name]):
            assert mc.motif is not None
            fs = flowset(topo, mc.motif)
            for row, nbytes in zip(fs.links, fs.nbytes, strict=True):
                for link in row[row >= 0]:
                    loads[int(link)] = loads.get(int(link), 0.0) + float(nbytes)
    return {k: v / topo.capacity[k] for k, v in loads.items()}


@dataclass(frozen=True)
class Breakdown:
    period: float
    compute: float
    gaps: Mapping[str, float]  # comm-op -> compute-stream idle it caused in the iteration
    stream_busy: Mapping[str, float]  # comm stream -> fraction of the period running a motif
    link_util: Mapping[str, float]  # link kind -> busiest link's load / period

    def as_dict(self) -> dict[str, object]:
        return {
            "period_s": self.period,
            "compute_s": self.compute,
            "gaps_s": dict(self.gaps),
            "stream_busy": dict(self.stream_busy),
            "link_util": dict(self.link_util),
        }


def breakdown(
    dag: TrainingDAG,
    topo: Topology,
    cost: MicrobenchCost,
    result: PlanResult,
    sim: SimResult,
    *,
    iterations: int = 6,
    streams: str = "channel",
) -> Breakdown:
    """The last simulated iteration of ``result``'s replay ``sim`` (see the module docstring);
    ``iterations`` and ``streams`` must be the replay's."""
    g = unroll(dag, result.plan, cost, prefetch=result.prefetch, iterations=iterations)
    last = max(n.iteration for n in g.computes)
    lo, hi = g.iteration_end(last - 1, sim.finish), g.iteration_end(last, sim.finish)
    by_id = {n.id: n for n in g.nodes}
    comps = g.computes
    gaps: dict[str, float] = {}
    for prev, c in itertools.pairwise(comps):
        if c.iteration != last:
            continue
        gap = sim.start[c.id] - sim.finish[prev.id]
        if gap <= 1e-12:
            continue
        blocker = max(c.parents, key=lambda p: sim.finish[p], default=None)
        name = by_id[blocker].op if blocker is not None and by_id[blocker].comm else None
        gaps[name or "other"] = gaps.get(name or "other", 0.0) + gap
    busy: dict[str, float] = {}
    for m in g.motifs:
        s = "comm" if streams == "single" else m.channel
        overlap = min(sim.finish[m.id], hi) - max(sim.start[m.id], lo)
        busy[s] = busy.get(s, 0.0) + max(0.0, overlap)
    period = hi - lo
    util: dict[str, float] = {}
    for link, secs in link_loads(topo, dag, cost, result.plan).items():
        kind = link_kind(topo, link)
        util[kind] = max(util.get(kind, 0.0), secs / period)
    work = sum(c.dur for c in comps if c.iteration == last)
    return Breakdown(period, work, gaps, {k: v / period for k, v in busy.items()}, util)


@dataclass(frozen=True)
class OrderOracle:
    """The best whole-op order found exhaustively for one plan (see :func:`order_oracle`)."""

    period: float  # the modelled steady-state period of the enforcer replaying it
    plan: Mapping[str, ExecOption]
    ops: tuple[str, ...]
    prefetch: bool
    order: tuple[str, ...]  # the two-iteration motif order (as a PlanResult carries it)


def order_oracle(
    dag: TrainingDAG, cost: CostModel, *, iterations: int = STEADY
) -> list[OrderOracle]:
    """For every assignment of the all-to-alls to channels (each comm-op at its fastest option
    on its channel), the best of all whole-op issue orders, with and without the data op's
    prefetch, as the enforcer replays them on the token model; best first. An exhaustive
    reference for the MCMC and optSched on the same cost model (orders that would deadlock
    the strict sequence are skipped)."""
    site = {c.op.name: c for c in dag.comms}
    names = tuple(site)
    data_ops = frozenset(n for n, c in site.items() if c.after is None)
    fastest: dict[tuple[str, str], ExecOption] = {}
    for n in names:
        for o in dag.options[n]:
            key = (n, o.channel)
            t = standalone(cost, dag, n, o)
            if key not in fastest or t < standalone(cost, dag, n, fastest[key]):
                fastest[key] = o
    movable = [n for n in names if (n, "cpu") in fastest and (n, "gpu") in fastest]
    precede = op_precedence(dag)
    out: list[OrderOracle] = []
    for chans in itertools.product(CHANNELS, repeat=len(movable)):
        assign = dict(zip(movable, chans, strict=True))
        plan = {n: fastest.get((n, assign.get(n, "gpu"))) or dag.options[n][0] for n in names}
        best: OrderOracle | None = None
        for pf in (False, True):
            g = unroll(dag, plan, cost, prefetch=pf, iterations=iterations)
            for perm in itertools.permutations(names):
                pos = {n: i for i, n in enumerate(perm)}
                if any(pos[b] > pos[a] for b, a in precede if not (pf and b in data_ops)):
                    continue
                order = op_order_sequence(dag, cost, plan, perm, pf)
                seq = periodic_sequence(order, pf, data_ops, iterations)
                try:
                    p = replay_order(g, seq).period
                except ValueError:  # the strict sequence deadlocks against the DAG
                    continue
                if best is None or p < best.period - 1e-12:
                    best = OrderOracle(p, plan, perm, pf, tuple(order))
        if best is not None:
            out.append(best)
    return sorted(out, key=lambda o: o.period)
