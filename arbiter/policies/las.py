"""``las``: least attained service, max-min fairness over GPU time (Themis's Tiresias baseline).

Every round (default 360 s, Gavel's round length) jobs are ranked by attained service, the
GPU-seconds they have run so far (ties: arrival, then id), and admitted in that order while
their gangs fit in the cluster. A gang that does not fit is skipped so smaller ones behind it
can run (work conservation); an admitted job the free GPUs cannot run (a GPU type with no
throughput for it) gives way to the next in rank. Admitted jobs that already run keep their
GPUs (no needless migration); the others are placed with
:class:`~arbiter.policies.base.FreePool`; jobs not admitted are preempted. Over rounds this
time-slices the cluster so that attained GPU time equalises: max-min fairness over GPU time.
Tiresias's discretised queues and Gittins index are issue 8's ``tiresias`` policies.
"""

from __future__ import annotations

from dataclasses import dataclass

from arbiter.policies.base import Decision, FreePool, Snapshot

__all__ = ["Las"]


@dataclass(frozen=True)
class Las:
    name: str = "las"
    round_s: float | None = 360.0

    def decide(self, snapshot: Snapshot) -> Decision:
        budget = snapshot.cluster.num_gpus
        admitted = []
        ranked = sorted(snapshot.jobs, key=lambda j: (j.attained_gpu_s, j.arrival_s, j.job_id))
        for job in ranked:
            if job.gang <= budget:
                admitted.append(job)
                budget -= job.gang
            if budget == 0:
                break
        alloc = {j.job_id: j.held for j in admitted if j.running}
        kept = set().union(*alloc.values()) if alloc else set()
        pool = FreePool(snapshot.cluster, snapshot.cluster.gpu_ids - kept)
        admitted_ids = {j.job_id for j in admitted}
        backfill = [j for j in ranked if j.job_id not in admitted_ids]
        for job in [j for j in admitted if not j.running] + backfill:
            if pool.size == 0:
                break
            # None only if the free GPUs cannot run this job (e.g. a type without throughput).
            if (gpus := pool.take(job.gang, job.perf)) is not None:
                alloc[job.job_id] = gpus
        return Decision(alloc)
