"""A diverse plan cache: plans that differ, not the k cheapest by work (QOOP §2.4, §2.5).

Pseudocode 2 (QOOP §2.4, seed 000 L577-584) first drops near-duplicate plans: ordered by their
per-task demand ``a_i``, a plan is kept only if its work is at most half the work of the last
plan kept (L583, spec A.5); the evaluation likewise "retained plans with significant
differences in cost" (L634). A cache of the ``k`` cheapest join orders by work holds
near-duplicates instead (orders within a few percent of each other), so a share change never
finds a plan worth switching to.

:func:`diverse_cache` keeps, from a pool of candidate plans (join orders times physical
profiles, :mod:`qoop_planner.physical`):

1. every plan that is the best (earliest estimated finish from scratch, by the same Tetris
   packing the re-planner uses, :func:`qoop_planner.packing.estimate`) at some share of a grid
   (:func:`share_grid`): the plans the re-planner would actually pick somewhere;
2. the plans Pseudocode 2's pruning retains (:func:`retain_by_work`), with ``a_i`` the plan's
   largest per-task demand in vcore-equivalents (:func:`demand_floor`) and ``w_i`` its work;

ordered by how many grid shares each wins (then by work), at most ``max_plans``.
:func:`switch_gain` is the audit's measure of what a cache offers: the estimate at share b of
the plan best at share a, over the best at b. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from qoop_planner.model import Plan, Progress, Share
from qoop_planner.packing import estimate

__all__ = [
    "DEFAULT_GRID_VCORES",
    "best_at",
    "demand_floor",
    "diverse_cache",
    "retain_by_work",
    "share_grid",
    "switch_gain",
]

DEFAULT_GRID_VCORES: tuple[float, ...] = (2, 4, 8, 16, 32, 64, 128, 256, 512)


def share_grid(vcores: Sequence[float], mb_per_vcore: float) -> tuple[Share, ...]:
    """Shares of ``v`` vcores and ``v * mb_per_vcore`` MB, one per ``v``.

    >>> share_grid([2, 8], 4096.0)
    (Resources(vcores=2, memory_mb=8192.0), Resources(vcores=8, memory_mb=32768.0))
    """
    if not mb_per_vcore > 0:
        raise ValueError(f"mb_per_vcore must be > 0, got {mb_per_vcore}")
    return tuple(Share(v, v * mb_per_vcore) for v in vcores)


def _finish(plan: Plan, share: Share) -> float:
    return estimate(plan, Progress(), share).finish_s


def best_at(plans: Sequence[Plan], share: Share) -> Plan:
    """The plan with the earliest estimated finish from scratch under ``share`` (ties: less
    work, then the smaller plan id); the least-work plan if none can run under it."""
    if not plans:
        raise ValueError("best_at needs at least one plan")
    return min(plans, key=lambda p: (_finish(p, share), p.total_cost, p.plan_id))


def demand_floor(plan: Plan, mb_per_vcore: float) -> float:
    """Pseudocode 2's ``a_i`` for a DAG plan: its largest per-task demand in vcores, memory
    counted as ``memory_mb / mb_per_vcore`` vcores (the smallest share that runs every task).

    >>> from qoop_planner.model import *
    >>> sig = StageSignature(frozenset({Relation("a", "t")}))
    >>> st = Stage("s", "scan", (), sig, (), "", StageCost(4, 1.0, Resources(1, 6144)))
    >>> demand_floor(Plan("p", "q", (st,), "s", 4.0), 4096.0)
    1.5
    """
    return max(
        (max(s.cost.demand.vcores, s.cost.demand.memory_mb / mb_per_vcore) for s in plan.stages),
        default=0.0,
    )


def retain_by_work(plans: Sequence[Plan], mb_per_vcore: float, ratio: float = 2.0) -> list[Plan]:
    """Pseudocode 2's pruning: ordered by ``(a_i, w_i)``, keep a plan only if its work is at most
    ``1/ratio`` of the last plan kept (the first is always kept); as
    :func:`qoop_planner.online.retained_indices` on the a x b model.

    >>> from qoop_planner.model import *
    >>> def plan(pid, a, w):
    ...     sig = StageSignature(frozenset({Relation(pid, "t")}))
    ...     st = Stage("s", "scan", (), sig, (), "", StageCost(1, w, Resources(a, 0)))
    ...     return Plan(pid, "q", (st,), "s", w)
    >>> [p.plan_id for p in retain_by_work([plan("x", 1, 100), plan("y", 2, 60),
    ...                                     plan("z", 4, 40)], 4096.0)]
    ['x', 'z']
    """
    if not ratio > 1:
        raise ValueError(f"ratio must be > 1, got {ratio}")
    ordered = sorted(plans, key=lambda p: (demand_floor(p, mb_per_vcore), p.total_cost))
    kept: list[Plan] = []
    for p in ordered:
        if not kept or p.total_cost * ratio <= kept[-1].total_cost:
            kept.append(p)
    return kept


def diverse_cache(
    plans: Sequence[Plan],
    grid: Sequence[Share],
    *,
    max_plans: int = 8,
    mb_per_vcore: float | None = None,
    ratio: float = 2.0,
) -> list[Plan]:
    """The diverse cache of ``plans`` (module docstring), least work first.

    ``mb_per_vcore`` for :func:`demand_floor` defaults to the grid's first share's ratio.
    """
    if max_plans < 1:
        raise ValueError(f"max_plans must be >= 1, got {max_plans}")
    if not plans:
        return []
    if not grid:
        raise ValueError("diverse_cache needs a share grid")
    if mb_per_vcore is None:
        s0 = grid[0]
        mb_per_vcore = s0.memory_mb / s0.vcores if s0.vcores > 0 else 4096.0
    wins: dict[str, int] = {}
    by_id = {p.plan_id: p for p in plans}
    for share in grid:
        b = best_at(plans, share)
        if math.isfinite(_finish(b, share)):
            wins[b.plan_id] = wins.get(b.plan_id, 0) + 1
    order = sorted(wins, key=lambda pid: (-wins[pid], by_id[pid].total_cost, pid))
    for p in retain_by_work(plans, mb_per_vcore, ratio):
        if p.plan_id not in wins:
            order.append(p.plan_id)
    if not order:  # nothing runs at any grid share: the least-work plan, for the record
        order = [min(plans, key=lambda p: (p.total_cost, p.plan_id)).plan_id]
    kept = [by_id[pid] for pid in order[:max_plans]]
    return sorted(kept, key=lambda p: (p.total_cost, p.plan_id))


def switch_gain(plans: Sequence[Plan], share_a: Share, share_b: Share) -> float:
    """What a switch could gain: the estimate at ``share_b`` of the plan best at ``share_a``,
    over the best estimate at ``share_b`` (1.0: the plan best at a is still best at b).
    ``math.inf`` if the plan best at a cannot run at b but another can."""
    a = best_at(plans, share_a)
    b = best_at(plans, share_b)
    ta, tb = _finish(a, share_b), _finish(b, share_b)
    if math.isinf(tb):
        return 1.0
    return ta / tb if tb > 0 else 1.0
