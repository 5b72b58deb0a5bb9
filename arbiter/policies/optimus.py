"""``optimus``: shortest remaining time under the offered resources, as Themis implemented its
Optimus baseline (spec qoop-themis.md "Baselines as Themis implemented them"; P:390-398:
"ideal average app completion time ... apps report remaining time under the offered resources;
allocate SRTF").

Unlike ``srtf`` (remaining time on an ideal placement, preemptive), Optimus is consulted when
resources free up and each waiting app reports how long it would take to finish *on the GPUs
it would get from what is free now* (the best placement :class:`FreePool` finds); the shortest
is served first and the reports are redone after every grant. Running jobs keep their GPUs (no
preemption: Themis's baselines act on resource availability).

Decisions: the thesis describes Optimus differently (throughput scaling, highest marginal gain
first); we follow the paper, whose max-ρ factor (1.75x) the reproduction report checks. In the
live arbiter the remaining time is the app's progress report on its current speed, so the
offered placement does not change it (no perf model); apps that never reported go last, in
arrival order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from arbiter.placement import placement_of
from arbiter.policies.base import Decision, FreePool, JobView, Snapshot

__all__ = ["Optimus"]


def _offered_remaining(snapshot: Snapshot, job: JobView, pool: FreePool) -> float | None:
    """Remaining time on the best placement of the free pool; None if the gang does not fit."""
    if pool.size < job.gang:
        return None
    probe = FreePool(snapshot.cluster, [g for gs in pool.by_machine.values() for g in gs])
    gpus = probe.take(job.gang, job.perf)
    if gpus is None:
        return None
    if job.remaining_work is None:
        return math.inf
    if job.perf is None:
        return job.remaining_work / (job.ideal_rate or 1.0)
    rate = job.perf.rate(placement_of(snapshot.cluster, gpus))
    return job.remaining_work / rate if rate > 0 else None


@dataclass(frozen=True)
class Optimus:
    name: str = "optimus"
    preemptive: bool = False  # the simulator may skip calls when no GPU is free
    round_s: float | None = None

    def decide(self, snapshot: Snapshot) -> Decision:
        alloc = {j.job_id: j.held for j in snapshot.jobs if j.held}
        pool = FreePool(snapshot.cluster, snapshot.free)
        waiting = [j for j in snapshot.jobs if not j.held]
        while waiting and pool.size:
            offers = [(_offered_remaining(snapshot, j, pool), j) for j in waiting]
            offers = [(t, j) for t, j in offers if t is not None]
            if not offers:
                break
            _, best = min(offers, key=lambda tj: (tj[0], tj[1].arrival_s, tj[1].job_id))
            gpus = pool.take(best.gang, best.perf)
            assert gpus is not None
            alloc[best.job_id] = gpus
            waiting.remove(best)
        return Decision(alloc)
