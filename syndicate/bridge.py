"""Syndicate's predicted iteration time as Themis's placement slowdown S(G) (spec §6.2-6.3;
thesis Eq. 3.1, T:1084-1103, and ch. 4).

Themis prices a GPU set G with ``iter_time(G) = iter_time_serial · S(G) / |G|`` and S from a
1 / 1.1 / 1.3 locality model (T:1103). A job's iteration time on G depends on its
communication plan, and the better placement can flip with the plan (spec §6.3: an all-to-all
over the hosts' NICs runs faster spread than dense). Here the application master plans its own
job on each *placement class* (the per-node GPU counts, plus the host-NIC share) with the
planner, caches the predicted steady-state iteration time per class, and hands the Agent
``arbiter.placement.PredictedSlowdown(SyndicatePredictor(...))``: S(G) = T(G) / T(dense |G|).

:func:`placement_classes` enumerates the classes (k = 4 / 8 / 16 / 32 GPUs on 16 nodes of 8:
5 / 22 / 186 / 2755, spec §6.3); a cache miss costs one planner run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from syndicate.cost import MicrobenchCost
from syndicate.dag import TrainingDAG
from syndicate.optimizer import plan
from syndicate.topology import Topology, hgx2

__all__ = ["SyndicatePredictor", "class_topology", "placement_classes", "predict_iter_time"]


def placement_classes(k: int, nodes: int = 16, per_node: int = 8) -> list[tuple[int, ...]]:
    """Partitions of ``k`` GPUs into at most ``nodes`` parts of at most ``per_node`` each."""

    def parts(n: int, largest: int, slots: int) -> list[tuple[int, ...]]:
        if n == 0:
            return [()]
        if slots == 0:
            return []
        return [
            (first, *rest)
            for first in range(min(n, largest), 0, -1)
            for rest in parts(n - first, first, slots - 1)
        ]

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return parts(k, per_node, nodes)


def class_topology(base: Topology, per_node: Sequence[int]) -> Topology:
    """``base`` with the job's ranks on the first ``per_node[i]`` GPUs of node i."""
    if len(per_node) > base.nodes or any(not 0 < c <= base.gpus_per_node for c in per_node):
        raise ValueError(
            f"class {tuple(per_node)} does not fit {base.nodes} x {base.gpus_per_node} GPUs"
        )
    g = base.gpus_per_node
    return base.subgraph([n * g + i for n, c in enumerate(per_node) for i in range(c)])


def predict_iter_time(
    dag: TrainingDAG,
    topo: Topology,
    *,
    budget: int = 100,
    mode: str = "syndicate",
    seed: int = 0,
    cost: MicrobenchCost | None = None,
) -> float:
    """The planner's steady-state iteration time of ``dag`` on ``topo``'s ranks (§6.2); the
    search budget is in proposals, so the prediction is deterministic."""
    result = plan(
        dag,
        cost or MicrobenchCost(topo),
        mode=mode,
        budget=budget,
        seed=seed,
        clock="proposals",
        warmup=min(budget, 50),
        objective="period",
    )
    return result.iter_time


@dataclass
class SyndicatePredictor:
    """``per-node GPU counts -> seconds`` for :class:`arbiter.placement.PredictedSlowdown`:
    ``dag_for(n_ranks)`` builds the job's DAG for a GPU count; the cluster is ``base`` with the
    job's ``host_nic_share`` of each node's host NICs (YARN leases GPUs, not NICs, §6.2)."""

    dag_for: Callable[[int], TrainingDAG]
    base: Topology = field(default_factory=hgx2)
    host_nic_share: float = 1.0
    budget: int = 100
    mode: str = "syndicate"
    seed: int = 0
    cache: dict[tuple[int, ...], float] = field(default_factory=dict)

    def __call__(self, per_node: tuple[int, ...]) -> float:
        key = tuple(sorted(per_node, reverse=True))
        hit = self.cache.get(key)
        if hit is None:
            base = self.base.with_params(host_nic_share=self.host_nic_share)
            topo = class_topology(base, key)
            hit = predict_iter_time(
                self.dag_for(topo.n_ranks), topo, budget=self.budget, mode=self.mode, seed=self.seed
            )
            self.cache[key] = hit
        return hit
