"""``gandiva``: greedy placement efficiency, as Themis implemented its Gandiva baseline
(spec qoop-themis.md "Baselines as Themis implemented them"; T:1184-1221, P:390-398).

Themis's Gandiva is "ideal efficiency": apps report placement preferences and the arbiter,
on any resource availability, allocates greedily to the highest preference first; Gandiva's
time-slicing and packing are not modelled. Here a waiting job's preference is its placement
score on what is free now: the rate of the best placement :class:`FreePool` can give it over
its rate on an empty cluster (1 = as good as it gets). Jobs are served in decreasing score
(ties: arrival, then id), each taking that best placement, and the scores are recomputed after
every grant (the free pool changed). Running jobs keep their GPUs: no preemption, no migration.

Decisions: a job whose best free placement scores below ``min_score`` (default 0: never) is
left waiting for a better one. In the live arbiter (no perf model) every score is 1, so
Gandiva degenerates to FIFO with backfill, which is what it does without profiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from arbiter.placement import placement_of
from arbiter.policies.base import Decision, FreePool, JobView, Snapshot

__all__ = ["Gandiva", "placement_score"]


def placement_score(snapshot: Snapshot, job: JobView, pool: FreePool) -> float:
    """Best free placement's rate / ideal rate (1 without a perf model); -1 if none fits."""
    if pool.size < job.gang:
        return -1.0
    probe = FreePool(snapshot.cluster, [g for gs in pool.by_machine.values() for g in gs])
    gpus = probe.take(job.gang, job.perf)
    if gpus is None:
        return -1.0
    if job.perf is None or not job.ideal_rate or math.isnan(job.ideal_rate):
        return 1.0
    return job.perf.rate(placement_of(snapshot.cluster, gpus)) / job.ideal_rate


@dataclass(frozen=True)
class Gandiva:
    name: str = "gandiva"
    preemptive: bool = False  # the simulator may skip calls when no GPU is free
    min_score: float = 0.0
    round_s: float | None = None

    def decide(self, snapshot: Snapshot) -> Decision:
        alloc = {j.job_id: j.held for j in snapshot.jobs if j.held}
        pool = FreePool(snapshot.cluster, snapshot.free)
        waiting = [j for j in snapshot.jobs if not j.held]
        while waiting and pool.size:
            scored = [(placement_score(snapshot, j, pool), j) for j in waiting]
            scored = [(s, j) for s, j in scored if s >= 0 and s >= self.min_score]
            if not scored:
                break
            _, best = min(scored, key=lambda sj: (-sj[0], sj[1].arrival_s, sj[1].job_id))
            gpus = pool.take(best.gang, best.perf)
            assert gpus is not None  # the probe found it on the same pool
            alloc[best.job_id] = gpus
            waiting.remove(best)
        return Decision(alloc)
