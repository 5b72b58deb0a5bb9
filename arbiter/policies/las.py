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
"""

from __future__ import annotations

from dataclasses import dataclass

from arbiter.policies.base import Decision, Snapshot, admit_and_place

__all__ = ["Las"]


@dataclass(frozen=True)
class Las:
    name: str = "las"
    round_s: float | None = 360.0

    def decide(self, snapshot: Snapshot) -> Decision:
        ranked = sorted(snapshot.jobs, key=lambda j: (j.attained_gpu_s, j.arrival_s, j.job_id))
        return Decision(admit_and_place(snapshot, ranked))
