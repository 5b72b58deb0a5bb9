"""QOOP's resource feedback: the "1-over-n" max-min fair share (QOOP §2.3, Pseudocode 1).

``fairShare = R / |J|``: every resource of the cluster divided by the number of active jobs, a
minimum guarantee pushed to *every* job whenever |J| or R changes (T:359, T:455-490; spec A.2
and D.1). Pure functions; the gRPC QueryShare service is the shell that streams them.

Decisions: GPUs are not part of this vector (they go through Themis leases; spec §0); with no
active job the share is the whole cluster (a job subscribing alone gets everything); epochs
increase by one per change, across all jobs, so a subscriber can order updates.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Resources", "ShareCause", "ShareChange", "fair_share", "share_changes"]


@dataclass(frozen=True, slots=True)
class Resources:
    vcores: float = 0.0
    memory_mb: float = 0.0
    disk_mb_per_s: float = 0.0
    network_mb_per_s: float = 0.0

    def __truediv__(self, n: float) -> Resources:
        return Resources(
            self.vcores / n, self.memory_mb / n, self.disk_mb_per_s / n, self.network_mb_per_s / n
        )


class ShareCause(StrEnum):
    SUBSCRIBED = "subscribed"
    JOB_ARRIVED = "job-arrived"
    JOB_DEPARTED = "job-departed"
    CAPACITY_CHANGED = "capacity-changed"


@dataclass(frozen=True, slots=True)
class ShareChange:
    epoch: int
    fair_share: Resources
    active_jobs: int
    cause: ShareCause


def fair_share(capacity: Resources, active_jobs: int) -> Resources:
    """R / |J| (Pseudocode 1 line 10); the whole cluster when no job is active."""
    if active_jobs < 0:
        raise ValueError(f"active_jobs must be >= 0, got {active_jobs}")
    return capacity / max(1, active_jobs)


def share_changes(
    capacity: Resources, active_jobs: int, epoch: int, cause: ShareCause
) -> ShareChange:
    """The update every job receives after an event (Pseudocode 1 lines 8-12)."""
    return ShareChange(epoch, fair_share(capacity, active_jobs), active_jobs, cause)
