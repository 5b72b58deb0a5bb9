"""``srtf``: shortest remaining time first, preemptive; with ``service=True`` shortest remaining
*service* first (SRSF). Themis thesis baselines "SRTF, SRSF" (T:1219-1221, spec qoop-themis.md
B.11); Tiresias's SRTF oracle and its SRSF normalisation (Tiresias §3.3.2 Table 3.1 and the
Fig 3.7 toy, spec tiresias.md §2.1, §5.3 and checkable facts 5-6).

Every call (arrivals and completions: event mode) ranks the active jobs by their remaining
time, ``remaining_work / ideal_rate`` (the time to finish alone on the best placement of an
empty cluster; in the simulator the true remaining work: an oracle), shortest first, ties by
arrival then id, and applies the preemptive priority rule LAS shares
(:func:`~arbiter.policies.base.admit_and_place`): jobs are admitted in rank order while their
gangs fit in the cluster, admitted jobs that run keep their GPUs, the others are placed with
:class:`~arbiter.policies.base.FreePool`, the rest backfill, running jobs not placed are
preempted. Between two events a running job's remaining time only shrinks and a waiting one's
stays, so no ranking can change without an event and no wake-up is needed.

Decisions on the open choices:

* **Time or service.** The default ranks by remaining *time* (Tiresias's and Themis's SRTF);
  ``service=True`` ranks by remaining time x gang, Tiresias's "remaining service" (its 2D
  normalisation, L1028) and Themis's SRSF. The two differ on the Fig 3.7 toy (one 2-GPU
  machine; J1 = 2 GPUs x 2, J2 = 1 x 8, J3 = 2 x 6): SRSF serves J1, J2, J3 (average JCT 28/3,
  the 9.3 the seed reports); SRTF serves J1, J3, J2 (26/3). Themis's SRSF "allocate[s] one GPU
  at a time": with whole gangs (no job runs on fewer GPUs than its gang here) that is the same
  order, so no separate knob.
* **Placement.** The rank does not depend on the placement a job would get (Tiresias's SRTF uses
  its placement mechanism, Themis's SRTF "with allocations from the available resource": that
  placement-aware variant is ``optimus``); placement is FreePool's best measured rate.
* **Live arbiter.** ``remaining_work`` is the app's latest progress report (iterations left x
  iteration time, ``ideal_rate`` 1: the remaining time at its current speed). A job that never
  reported (a new app cannot report before it runs) is estimated to need as long again as it
  has already run: attained GPU-seconds / gang (attained GPU-seconds under SRSF). That is the
  median remaining life of a heavy-tailed (Pareto, α = 1) duration, the decreasing-hazard
  assumption under which Tiresias prefers least attained service; a new job (0) is tried first,
  runs, and reports. In the simulator every job's remaining work is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from arbiter.policies.base import Decision, JobView, Snapshot, admit_and_place, ideal_rate

__all__ = ["Srtf", "estimated_remaining_time"]


def estimated_remaining_time(job: JobView, ideal: float | None = None) -> float:
    """Remaining time on the best placement: ``remaining_work / rate`` with the job's
    ``ideal_rate`` (or ``ideal``, or 1); without a progress report, the time it has already run
    (module docstring)."""
    if job.remaining_work is None:
        return job.attained_gpu_s / job.gang
    rate = job.ideal_rate or ideal or 1.0
    return job.remaining_work / rate if rate > 0 else math.inf  # NaN: nothing can run it


@dataclass(frozen=True)
class Srtf:
    name: str = "srtf"
    service: bool = False  # SRSF: rank by remaining time x gang
    round_s: float | None = None

    def decide(self, snapshot: Snapshot[None]) -> Decision[None]:
        ideal: dict[tuple[int, int], float] = {}

        def key(job: JobView) -> tuple[float, float, str]:
            known = None
            if not job.ideal_rate and job.perf is not None and job.remaining_work is not None:
                k = (id(job.perf), job.gang)
                if k not in ideal:
                    ideal[k] = ideal_rate(snapshot.cluster, job.gang, job.perf)
                known = ideal[k]
            t = estimated_remaining_time(job, known)
            return (t * job.gang if self.service else t, job.arrival_s, job.job_id)

        return Decision(admit_and_place(snapshot, sorted(snapshot.jobs, key=key)))
