"""``srtf``: shortest remaining time first, preemptive (Themis thesis baseline T:1184-1221;
Tiresias's SRTF/SRSF oracles, spec tiresias.md §5 items 5-6).

Jobs are ranked by remaining time, ``remaining_work / ideal_rate`` (the time to finish alone on
the best placement), shortest first, and admitted while their gangs fit; admitted jobs that run
keep their GPUs, the others are placed, the rest backfill, running jobs not admitted are
preempted (:func:`~arbiter.policies.base.admit_and_place`, the rule LAS uses with another key).
With ``service=True`` the key is remaining *service*, remaining time x gang (SRSF; Tiresias's
Fig 3.7 toy: average JCT 28/3).

Decisions: SRTF is an oracle in the simulator (true remaining work). In the live arbiter the
remaining time is the app's latest progress report (iterations remaining x iteration time, with
``ideal_rate`` 1); a job that never reported ranks after every job that did, in arrival order.
Ties: arrival, then id. Decisions happen on arrivals and completions only: between them a
running job's remaining time only shrinks and a waiting one's stays, so the order of the
admitted set cannot worsen (no wake-ups needed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from arbiter.policies.base import Decision, JobView, Snapshot, admit_and_place

__all__ = ["Srtf", "remaining_time"]


def remaining_time(job: JobView) -> float:
    """Time to finish alone on the best placement; ∞ when unknown."""
    if job.remaining_work is None or not job.ideal_rate or math.isnan(job.ideal_rate):
        return math.inf
    return job.remaining_work / job.ideal_rate


@dataclass(frozen=True)
class Srtf:
    name: str = "srtf"
    service: bool = False  # SRSF: remaining time x gang
    round_s: float | None = None

    def decide(self, snapshot: Snapshot) -> Decision:
        def key(j: JobView) -> tuple[float, float, str]:
            t = remaining_time(j)
            return (t * j.gang if self.service else t, j.arrival_s, j.job_id)

        return Decision(admit_and_place(snapshot, sorted(snapshot.jobs, key=key)))
