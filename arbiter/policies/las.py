"""``las``: least attained service, max-min fairness over GPU time (Themis's Tiresias baseline).

Every round (default 360 s, Gavel's round length) jobs are ranked by attained service, the
GPU-seconds they have run so far (ties: arrival, then id), and admitted in that order while
their gangs fit in the cluster. A gang that does not fit is skipped so smaller ones behind it
can run (work conservation); an admitted job the free GPUs cannot run (a GPU type with no
throughput for it) gives way to the next in rank. Admitted jobs that already run keep their
GPUs (no needless migration); the others are placed with
:class:`~arbiter.policies.base.FreePool`; jobs not admitted are preempted. Over rounds this
time-slices the cluster so that attained GPU time equalises: max-min fairness over GPU time.
Tiresias's discretised queues and Gittins index are the ``tiresias`` policies.

Apps (Themis §5 baselines rank apps, not jobs): the attained service that ranks a job is its
*app's*, ``JobView.app_attained_gpu_s`` (GPU-seconds run by every job of the app, finished ones
included), when the driver reports it; otherwise the job's own. Ties: arrival, app id, job id,
so the jobs of one app stay together. For single-job apps this is the job-level order.
"""

from __future__ import annotations

from dataclasses import dataclass

from arbiter.policies.base import Decision, JobView, Snapshot, admit_and_place

__all__ = ["Las"]


@dataclass(frozen=True)
class Las:
    name: str = "las"
    round_s: float | None = 360.0

    def decide(self, snapshot: Snapshot[None]) -> Decision[None]:
        ranked = sorted(snapshot.jobs, key=_rank)
        return Decision(admit_and_place(snapshot, ranked))


def _rank(job: JobView) -> tuple[float, float, str, str]:
    service = job.attained_gpu_s if job.app_attained_gpu_s is None else job.app_attained_gpu_s
    return service, job.arrival_s, job.app_id, job.job_id
