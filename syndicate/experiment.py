"""Planning a mode and measuring it on the flow simulator; the §6.4 calibration (spec §6.4,
thesis §4.5.2-4.5.4, T:1721-1779).

:func:`run_mode` plans a DAG under a mode with the microbenchmark cost model and replays the
result on :func:`syndicate.flowsim.simulate`: Syndicate and S-Sched through the enforcer's
sequence (``order``), S-Exec as FIFO per channel, HO, LIFO and FIFO as their runtime policies
on one comm stream. :func:`calibrate` freezes the open compute scale before any ranking is
measured: the factor on every task's time that makes the FIFO-greedy plan idle the compute
stream 35 % of the steady-state iteration on the reference workload (cf. 34.8 %, T:1403), and
:func:`fit_incast` fits the incast slope κ (f₀ = 32 flows, b₀ = 8 KiB held) as the weakest
on a grid for which 1-, 2- and 4-way splining each win a band of sizes, in that order as the
size grows (T:1797; :func:`incast_bands`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from syndicate.cost import MicrobenchCost
from syndicate.dag import TrainingDAG, unroll
from syndicate.flowsim import SimResult, motif_time, simulate
from syndicate.motifs import CommOp, ExecOption, Motif, expand
from syndicate.optimizer import MODES, PlanResult, plan
from syndicate.sched import periodic_sequence
from syndicate.topology import Topology

__all__ = [
    "KAPPA_GRID",
    "Measured",
    "bands_ordered",
    "calibrate",
    "fit_incast",
    "incast_bands",
    "periodic_order",
    "run_mode",
    "simulate_plan",
]

KAPPA_GRID = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05)

_DISPATCH = {
    "syndicate": "order",
    "s_sched": "order",
    "s_exec": "fifo",
    "ho": "priority",
    "lifo": "lifo",
    "fifo": "fifo",
}


@dataclass(frozen=True)
class Measured:
    result: PlanResult
    sim: SimResult

    @property
    def iter_time(self) -> float:
        return self.sim.period


def periodic_order(dag: TrainingDAG, result: PlanResult, iterations: int) -> list[str]:
    """The enforcer's sequence of ``result`` over ``iterations`` iterations (Gap 3.12,
    :func:`syndicate.sched.periodic_sequence`)."""
    data_ops = frozenset(c.op.name for c in dag.comms if c.after is None)
    return periodic_sequence(result.order, result.prefetch, data_ops, iterations)


def simulate_plan(
    dag: TrainingDAG,
    topo: Topology,
    cost: MicrobenchCost,
    result: PlanResult,
    *,
    iterations: int = 6,
    skew: float = 0.0,
    skew_seed: int = 0,
) -> SimResult:
    """Replay ``result`` on the network for ``iterations`` iterations: the enforcer modes issue
    :func:`periodic_order`, the others run their runtime policy. The simulator's period then
    leaves out the first iteration (warm-up). ``skew`` > 0 gives every GPU its own compute
    stream with seeded slowdowns (:func:`syndicate.flowsim.simulate`)."""
    cfg = MODES[result.mode]
    graph = unroll(dag, result.plan, cost, prefetch=result.prefetch, iterations=iterations)
    motifs: dict[str, Motif] = {}
    by_base = {
        mc.id: mc.motif for c in dag.comms for mc in cost.motifs(c.op, result.plan[c.op.name])
    }
    for n in graph.motifs:
        m = by_base[n.id.rsplit("#", 1)[0]]
        assert m is not None
        motifs[n.id] = m
    prio = {op: i for i, op in enumerate(dag.priority)}
    order = periodic_order(dag, result, iterations) if _DISPATCH[result.mode] == "order" else ()
    return simulate(
        topo,
        graph,
        motifs,
        dispatch=_DISPATCH[result.mode],
        streams=cfg.streams,
        order=order,
        priority=prio,
        skew=skew,
        skew_seed=skew_seed,
    )


def run_mode(
    dag: TrainingDAG,
    topo: Topology,
    mode: str,
    *,
    cost: MicrobenchCost | None = None,
    budget: float = 5.0,
    seed: int = 0,
    clock: str = "seconds",
    warmup: int = 200,
    objective: str = "period",
    skew: float = 0.0,
    skew_seed: int = 0,
    skew_aware: bool = True,
) -> Measured:
    """Plan ``dag`` under ``mode`` and replay it on the simulator. With ``skew`` > 0 the
    simulator slows every rank's tasks (:func:`syndicate.flowsim.simulate`) and, if
    ``skew_aware``, the optimizer prices the expected straggler (:meth:`TrainingDAG.skewed`)."""
    cost = cost or MicrobenchCost(topo)
    priced = dag.skewed(skew, topo.n_ranks) if skew > 0 and skew_aware else dag
    result = plan(
        priced,
        cost,
        mode=mode,
        budget=budget,
        seed=seed,
        clock=clock,
        warmup=warmup,
        objective=objective,
    )
    return Measured(result, simulate_plan(dag, topo, cost, result, skew=skew, skew_seed=skew_seed))


def calibrate(
    dag: TrainingDAG,
    topo: Topology,
    *,
    target_idle: float = 0.35,
    cost: MicrobenchCost | None = None,
    lo: float = 0.05,
    hi: float = 50.0,
    steps: int = 30,
) -> float:
    """The compute scale at which FIFO-greedy idles ``target_idle`` of the iteration (by
    bisection on the simulated idle fraction, which falls as compute grows)."""
    cost = cost or MicrobenchCost(topo)

    def idle(scale: float) -> float:
        return run_mode(dag.scaled(scale), topo, "fifo", cost=cost).sim.idle_fraction

    if not idle(lo) > target_idle > idle(hi):
        raise ValueError(f"target idle {target_idle} not bracketed by scales [{lo}, {hi}]")
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        if idle(mid) > target_idle:
            lo = mid
        else:
            hi = mid
    return (lo * hi) ** 0.5


def incast_bands(
    topo: Topology, channel: str = "gpu", sizes: tuple[int, ...] = ()
) -> Mapping[int, int]:
    """For each per-destination row size in bytes, the fastest of 1/2/4-way splining of an
    all-to-all over all ranks (one segment)."""
    n = topo.n_ranks
    sizes = sizes or tuple(int(1024 * 2 ** (k / 2)) for k in range(0, 21))
    out = {}
    for row in sizes:
        op = CommOp("aa", "AA", row, n, 1)
        times = {
            k: sum(motif_time(topo, m) for m in expand(op, ExecOption("aa", 1, k, channel)))
            for k in (1, 2, 4)
            if n % k == 0
        }
        out[row] = min(times, key=lambda k: times[k])
    return out


def bands_ordered(bands: Mapping[int, int]) -> bool:
    """1-, 2- and 4-way each fastest somewhere, and never a narrower splining at a larger size."""
    winners = [bands[s] for s in sorted(bands)]
    return {1, 2, 4} <= set(winners) and winners == sorted(winners)


def fit_incast(topo: Topology, grid: tuple[float, ...] = KAPPA_GRID) -> float:
    """The smallest κ of ``grid`` whose bands are ordered (see the module docstring)."""
    for kappa in grid:
        if bands_ordered(incast_bands(topo.with_params(incast_kappa=kappa))):
            return kappa
    raise ValueError(f"no κ in {grid} reproduces the 1/2/4-way ordering")
