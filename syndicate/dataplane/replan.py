"""Re-planning with a refreshed cost model (thesis §4.4.3, T:1494, T:1672; spec §4.3 Gap 4.5).

The enforcers report each motif's execution time with their busy-waits; when the waits pass
5 % of the iteration, the coordinator re-plans. Gap 4.5: "refresh the cost model before the
search". :func:`refine` is the coordinator's ``observe`` callback: it feeds every finished
iteration's motif times (the slowest rank's, keyed by
:func:`~syndicate.dataplane.protocol.motif_key`) into a
:class:`~syndicate.cost.RefinedCost`; :func:`reoptimizer` is its ``make_plan``: it reruns the
MCMC optimizer (:func:`syndicate.optimizer.plan`, Syndicate's own mode) on the refined prices
and turns the result into the plan the ranks install by two-phase commit
(:func:`installable`: with the optimizer's prefetch decision, the data ops at δ = +1, so the
app must submit them one iteration ahead, T:1771).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from syndicate.cost import RefinedCost
from syndicate.dag import TrainingDAG
from syndicate.dataplane.protocol import InstalledPlan, from_schedule, parse_motif_key
from syndicate.motifs import CommOp
from syndicate.optimizer import PlanResult
from syndicate.optimizer import plan as optimize

__all__ = ["data_ops", "installable", "refine", "reoptimizer"]

log = logging.getLogger("syndicate.replan")


def data_ops(dag: TrainingDAG) -> frozenset[str]:
    """The comm-ops that need only their batch (no compute before them): a2a-data-prep."""
    return frozenset(c.op.name for c in dag.comms if c.after is None)


def installable(dag: TrainingDAG, result: PlanResult, version: int) -> InstalledPlan:
    """``result`` as the plan to install, carrying its prefetch decision (δ = +1 data ops)."""
    pf = data_ops(dag) if result.prefetch else frozenset()
    return from_schedule(result.plan, result.order, version, pf)


def refine(cost: RefinedCost, ops: Sequence[CommOp]) -> Callable[[Mapping[str, float]], None]:
    """The callback that folds one iteration's motif times into ``cost``. A time that names
    no comm-op of ``ops``, no motif of its option, or is not a time is logged and skipped
    (one bad report must not stop the re-plan loop)."""
    by_name = {op.name: op for op in ops}

    def observe(times: Mapping[str, float]) -> None:
        for key, seconds in times.items():
            try:
                name, opt, motif_id = parse_motif_key(key)
                if name not in by_name:
                    raise ValueError(f"no comm-op {name!r} in this job")
                cost.observe(by_name[name], opt, motif_id, float(seconds))
            except ValueError as exc:
                log.warning("motif time %r ignored: %s", key, exc)

    return observe


def reoptimizer(
    dag: TrainingDAG,
    cost: RefinedCost,
    *,
    budget: float,
    clock: str = "proposals",
    warmup: int = 20,
    objective: str = "period",
    seed: int = 0,
    on_plan: Callable[[PlanResult], None] | None = None,
) -> Callable[[int], InstalledPlan]:
    """``make_plan(version)``: Syndicate's optimizer rerun on ``cost`` as refined so far (the
    period objective: the steady-state iteration the enforcer runs), installed as
    ``version``. ``on_plan`` sees each optimizer result."""

    def make_plan(version: int) -> InstalledPlan:
        result = optimize(
            dag, cost, mode="syndicate", budget=budget, clock=clock, warmup=warmup,
            objective=objective, seed=seed + version,
        )  # fmt: skip
        if on_plan is not None:
            on_plan(result)
        return installable(dag, result, version)

    return make_plan
