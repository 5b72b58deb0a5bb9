"""``fifo``: first come, first served, non-preemptive, gang all-or-nothing (Gavel's FIFO baseline).

Jobs are considered in arrival order; a job that does not fit waits and later, smaller jobs may
start in front of it (work conservation, as Gavel's ``fifo`` policy does). A started job keeps
its GPUs until it finishes. Placement: :class:`~arbiter.policies.base.FreePool`.
"""

from __future__ import annotations

from dataclasses import dataclass

from arbiter.policies.base import Decision, FreePool, Snapshot

__all__ = ["Fifo"]


@dataclass(frozen=True)
class Fifo:
    name: str = "fifo"
    preemptive: bool = False  # the simulator may skip calls when no GPU is free
    round_s: float | None = None

    def decide(self, snapshot: Snapshot) -> Decision:
        alloc = {j.job_id: j.held for j in snapshot.jobs if j.held}
        pool = FreePool(snapshot.cluster, snapshot.free)
        for job in snapshot.jobs:
            if pool.size == 0:
                break
            if not job.held and (gpus := pool.take(job.gang, job.perf)) is not None:
                alloc[job.job_id] = gpus
        return Decision(alloc)
