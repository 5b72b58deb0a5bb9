"""The Fair Scheduler: flat leaf queues with weights, their fair shares, and its view.

What it imitates (Hadoop 3.3 ``FairScheduler``, as far as the bridge uses it): leaf queues under
``root`` with weights, created on demand by a submission to an unknown queue; the
instantaneous fair share (the cluster's resources x weight / the sum of the weights of the
*active* leaves, those with live apps) and the steady fair share (the same over all leaves);
and the Fair Scheduler's ``GET /ws/v1/cluster/scheduler`` answer (``FairSchedulerInfo``,
``FairSchedulerQueueInfo``). It has no scheduler-conf API: ``/scheduler-conf`` answers 400, as
only a ``MutableConfScheduler`` supports it (:mod:`yarn_bridge.emulator.capacity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarn_bridge.emulator.shapes import INT_MAX, LIVE
from yarn_bridge.emulator.state import ClusterState


class FairScheduler:
    """The Fair Scheduler's queues (``state.fair_weights``: leaf path -> weight) and view."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def configure(self, leaves: Mapping[str, float | str]) -> None:
        """The initial leaves under ``root`` and their weights."""
        self.state.fair_weights = {f"root.{n}": float(w) for n, w in leaves.items()}

    def resolve(self, name: str) -> str:
        """The leaf path for queue ``name``, created (weight 1) if it does not exist yet."""
        path = name if name.startswith("root.") else f"root.{name}"
        if path not in self.state.fair_weights:
            self.state.fair_weights[path] = 1.0  # the Fair Scheduler creates queues on demand
        return path

    def set_weight(self, queue: str, weight: float) -> None:
        """Add a leaf queue or change its weight."""
        path = queue if queue.startswith("root.") else f"root.{queue}"
        with self.state.lock:
            self.state.fair_weights[path] = weight

    # -- GET /scheduler ----------------------------------------------------------------------

    def queue_json(self, path: str, total: tuple[int, int, int], fair: tuple[int, ...],
                   steady: tuple[int, ...], leaf: bool) -> dict[str, Any]:  # fmt: skip
        s = self.state
        apps = s.apps_in(path)
        live = [a for a in apps if a.state in LIVE]
        used = s.used(apps)
        pend = s.pending(live)
        max_alloc = s.resource(
            *s.max_allocation, max((n.gpus for n in s.nodes.values()), default=0)
        )
        d: dict[str, Any] = {
            "maxApps": INT_MAX,
            "minResources": s.resource(0, 0, 0),
            "maxResources": s.resource(*total),
            "usedResources": s.resource(*used),
            "amUsedResources": s.resource(*s.used_am(apps)),
            "amMaxResources": s.resource(fair[0] // 2, fair[1] // 2, 0),
            "demandResources": s.resource(used[0] + pend[0], used[1] + pend[1],
                                          used[2] + pend[2]),
            "steadyFairResources": s.resource(*steady),
            "fairResources": s.resource(*fair),
            "clusterResources": s.resource(*total),
            "reservedResources": s.resource(0, 0, 0),
            "maxContainerAllocation": max_alloc,
            "pendingContainers": pend[3],
            "allocatedContainers": sum(len(a.containers) for a in apps),
            "reservedContainers": 0,
            "queueName": path,
            "schedulingPolicy": "fair",
            "preemptable": True,
        }  # fmt: skip
        if leaf:
            d["type"] = "fairSchedulerLeafQueueInfo"
            d["numPendingApps"] = sum(1 for a in live if a.state != "RUNNING")
            d["numActiveApps"] = sum(1 for a in live if a.state == "RUNNING")
        return d

    def fair_shares(self) -> dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]]:
        """Leaf path -> (instantaneous fair share, steady fair share) as (MB, vcores, GPUs)."""
        s = self.state
        total = s.cluster_total()
        weights = s.fair_weights
        active = {q for q in weights if any(a.state in LIVE for a in s.apps_in(q))}
        all_w = sum(weights.values()) or 1.0
        act_w = sum(weights[q] for q in active) or 1.0
        out = {}
        for q, w in weights.items():
            steady = (int(total[0] * w / all_w), int(total[1] * w / all_w),
                      int(total[2] * w / all_w))  # fmt: skip
            fair = (int(total[0] * w / act_w), int(total[1] * w / act_w),
                    int(total[2] * w / act_w)) if q in active else (0, 0, 0)  # fmt: skip
            out[q] = (fair, steady)
        return out

    def scheduler_json(self) -> dict:
        s = self.state
        total = s.cluster_total()
        shares = self.fair_shares()
        children = [self.queue_json(q, total, shares[q][0], shares[q][1], leaf=True)
                    for q in sorted(s.fair_weights)]  # fmt: skip
        root = self.queue_json("root", total, total, total, leaf=False)
        root["childQueues"] = {"queue": children}
        return {"scheduler": {"schedulerInfo": {"type": "fairScheduler", "rootQueue": root}}}
