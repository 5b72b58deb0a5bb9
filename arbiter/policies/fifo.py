"""``fifo``: first come, first served, non-preemptive, gang all-or-nothing (Gavel's FIFO baseline).

Jobs are considered in arrival order. With ``backfill`` (the default) a job that does not fit
waits and later, smaller jobs may start in front of it (work conservation); without it the head
of the queue blocks everyone behind it, as Gavel's ``fifo`` does. A started job keeps its GPUs
until it finishes. Placement: :class:`~arbiter.policies.base.FreePool`.

Apps (Themis §5 baselines rank apps): the snapshot's order is arrival, then app id, then job id
(the simulator sorts so; the live arbiter has one job per app), and a hyper-parameter app
submits all its jobs at once (:mod:`arbiter.sim.apps`), so FIFO serves apps first come, first
served and the jobs of one app together, in job id order.
"""

from __future__ import annotations

from dataclasses import dataclass

from arbiter.policies.base import Decision, FreePool, Snapshot

__all__ = ["Fifo"]


@dataclass(frozen=True)
class Fifo:
    name: str = "fifo"
    preemptive: bool = False  # the simulator may skip calls when no GPU is free
    backfill: bool = True
    round_s: float | None = None

    def decide(self, snapshot: Snapshot[None]) -> Decision[None]:
        alloc = {j.job_id: j.held for j in snapshot.jobs if j.held}
        pool = FreePool(snapshot.cluster, snapshot.free)
        for job in snapshot.jobs:
            if pool.size == 0:
                break
            if job.held:
                continue
            if (gpus := pool.take(job.gang, job.perf)) is not None:
                alloc[job.job_id] = gpus
            elif not self.backfill:
                break
        return Decision(alloc)
