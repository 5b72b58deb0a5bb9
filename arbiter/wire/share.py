"""The QueryShare service's wire format: resource vectors and share changes between their
protobuf messages and :mod:`arbiter.shares`.

The servicer (:mod:`arbiter.service`) streams :func:`share_change_to_pb`; the share follower of
the query engine (:class:`hive_hooks.share.ArbiterShare`) reads :func:`share_change_from_pb`.

Decision: a ``ShareUpdate`` without a cause, or with one this side does not know, is refused
with :class:`ValueError` (the arbiter names a cause in every update).

>>> from arbiter.shares import Resources, ShareCause, ShareChange
>>> change = ShareChange(7, Resources(vcores=4.0, memory_mb=8192.0), 2, ShareCause.JOB_ARRIVED)
>>> msg = share_change_to_pb("query-1", change)
>>> msg.job_id, msg.epoch, msg.cause == pb.SHARE_CAUSE_JOB_ARRIVED
('query-1', 7, True)
>>> share_change_from_pb(msg) == change
True
"""

from __future__ import annotations

from collections.abc import Mapping

from arbiter.shares import Resources, ShareCause, ShareChange
from protos.yarnarbiter.v1 import arbiter_pb2 as pb

__all__ = [
    "resources_from_pb",
    "resources_to_pb",
    "share_change_from_pb",
    "share_change_to_pb",
]

_CAUSE_TO_PB: Mapping[ShareCause, pb.ShareCause] = {
    ShareCause.SUBSCRIBED: pb.SHARE_CAUSE_SUBSCRIBED,
    ShareCause.JOB_ARRIVED: pb.SHARE_CAUSE_JOB_ARRIVED,
    ShareCause.JOB_DEPARTED: pb.SHARE_CAUSE_JOB_DEPARTED,
    ShareCause.CAPACITY_CHANGED: pb.SHARE_CAUSE_CAPACITY_CHANGED,
}
_CAUSE_FROM_PB: Mapping[int, ShareCause] = {v: k for k, v in _CAUSE_TO_PB.items()}


def resources_to_pb(r: Resources) -> pb.ResourceVector:
    return pb.ResourceVector(
        vcores=r.vcores,
        memory_mb=r.memory_mb,
        disk_mb_per_s=r.disk_mb_per_s,
        network_mb_per_s=r.network_mb_per_s,
    )


def resources_from_pb(msg: pb.ResourceVector) -> Resources:
    return Resources(
        vcores=msg.vcores,
        memory_mb=msg.memory_mb,
        disk_mb_per_s=msg.disk_mb_per_s,
        network_mb_per_s=msg.network_mb_per_s,
    )


def share_change_to_pb(job_id: str, change: ShareChange) -> pb.ShareUpdate:
    """The update query job ``job_id`` receives for ``change``."""
    return pb.ShareUpdate(
        job_id=job_id,
        epoch=change.epoch,
        fair_share=resources_to_pb(change.fair_share),
        active_jobs=change.active_jobs,
        cause=_CAUSE_TO_PB[change.cause],
    )


def share_change_from_pb(msg: pb.ShareUpdate) -> ShareChange:
    """The change an update carries (whose job it is, ``msg.job_id``, is left out)."""
    cause = _CAUSE_FROM_PB.get(msg.cause)
    if cause is None:
        raise ValueError(f"ShareUpdate.cause {msg.cause} is not a known share cause")
    return ShareChange(
        epoch=int(msg.epoch),
        fair_share=resources_from_pb(msg.fair_share),
        active_jobs=int(msg.active_jobs),
        cause=cause,
    )
