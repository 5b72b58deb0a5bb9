"""The AppMaster service's wire format: GPUs, leases, jobs, bids, offers, allocations,
revocations and session errors between their protobuf messages and the arbiter's domain types
(:mod:`arbiter.cluster`, :mod:`arbiter.rounds`, :mod:`arbiter.auction`, :mod:`arbiter.messages`).

The servicer (:mod:`arbiter.service`) sends with the ``*_to_pb`` functions and reads bids with
:func:`bid_from_pb`; the Agent (:mod:`arbiter.agent`) reads offers and leases with the
``*_from_pb`` functions and sends its bids with :func:`bid_to_pb`; ``yarn-arbiter submit``
declares its job with :func:`job_to_pb`. A lease's id on the wire is
:func:`arbiter.journal.lease_id` of the lease.

Decisions: a lease source the client does not know (unspecified, or added by a newer arbiter)
reads as ``auction``, the Agent's long-standing reading; a malformed bid is refused with
:class:`~arbiter.messages.RequestError` (``INVALID_ARGUMENT``) naming the field, before it can
reach the core.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Container, Mapping

from arbiter.auction import Bid
from arbiter.cluster import GPU, Cluster
from arbiter.journal import lease_id
from arbiter.messages import Allocation, Code, Offer, RequestError, Revocation
from arbiter.rounds import Lease, LeaseSource
from arbiter.sessions import Progress
from protos.yarnarbiter.v1 import arbiter_pb2 as pb

__all__ = [
    "allocation_to_pb",
    "bid_from_pb",
    "bid_to_pb",
    "gpu_from_pb",
    "gpu_to_pb",
    "heartbeat_from_pb",
    "job_from_pb",
    "job_to_pb",
    "lease_from_pb",
    "lease_source_from_pb",
    "lease_source_to_pb",
    "lease_to_pb",
    "offer_from_pb",
    "offer_to_pb",
    "progress_from_pb",
    "revocation_to_pb",
    "session_error_to_pb",
]

_SOURCE_TO_PB: Mapping[LeaseSource, pb.LeaseSource] = {
    LeaseSource.AUCTION: pb.LEASE_SOURCE_AUCTION,
    LeaseSource.LEFTOVER: pb.LEASE_SOURCE_LEFTOVER,
    LeaseSource.POLICY: pb.LEASE_SOURCE_POLICY,
}
_SOURCE_FROM_PB: Mapping[int, LeaseSource] = {v: k for k, v in _SOURCE_TO_PB.items()}
_JOB_FIELDS = ("job_id", "gang_size", "max_gpus", "iters_total", "serial_iter_time_s")


def lease_source_to_pb(source: LeaseSource) -> pb.LeaseSource:
    return _SOURCE_TO_PB[source]


def lease_source_from_pb(value: int) -> LeaseSource | None:
    """The source a wire value names; ``None`` for unspecified or unknown values.

    >>> lease_source_from_pb(pb.LEASE_SOURCE_LEFTOVER), lease_source_from_pb(0)
    (<LeaseSource.LEFTOVER: 'leftover'>, None)
    """
    return _SOURCE_FROM_PB.get(value)


@functools.lru_cache(maxsize=65536)
def gpu_to_pb(g: GPU) -> pb.Gpu:
    """The message for GPU ``g`` (cached: GPUs are immutable; callers must not mutate it)."""
    return pb.Gpu(id=g.id, slot=g.slot, machine=g.machine, rack=g.rack, gpu_type=g.gpu_type)


def gpu_from_pb(msg: pb.Gpu) -> GPU:
    return GPU(msg.id, msg.slot, msg.machine, msg.rack, msg.gpu_type)


def lease_to_pb(lease: Lease) -> pb.Lease:
    return pb.Lease(
        lease_id=lease_id(lease),
        app_id=lease.app_id,
        gpu_ids=sorted(lease.gpus),
        start_unix_s=lease.start,
        end_unix_s=lease.end,
        round=lease.round,
        source=lease_source_to_pb(lease.source),
    )


def lease_from_pb(msg: pb.Lease) -> Lease:
    """The lease ``msg`` describes (its id is ``msg.lease_id``); an unknown source reads as
    ``auction``."""
    return Lease(
        app_id=msg.app_id,
        gpus=frozenset(msg.gpu_ids),
        start=msg.start_unix_s,
        end=msg.end_unix_s,
        round=msg.round,
        source=lease_source_from_pb(msg.source) or LeaseSource.AUCTION,
    )


def job_to_pb(job: Mapping[str, object]) -> pb.JobSpec:
    """A job of ``RegisterApp`` from its mapping form (keys: the ``JobSpec`` field names; a
    missing key is the field's default). An unknown key raises :class:`ValueError`, a value of
    the wrong type :class:`TypeError` (protobuf's own checks)."""
    unknown = sorted(set(job) - set(_JOB_FIELDS))
    if unknown:
        raise ValueError(f"JobSpec has no field {', '.join(unknown)}")
    msg = pb.JobSpec()
    for key, value in job.items():
        setattr(msg, key, value)
    return msg


def job_from_pb(msg: pb.JobSpec) -> dict[str, object]:
    """The mapping form :meth:`arbiter.core.ArbiterCore.register_app` takes."""
    return {key: getattr(msg, key) for key in _JOB_FIELDS}


def bid_to_pb(bid: Bid, round: int) -> pb.Bid:
    """``bid`` as the answer to the offer of ``round``: ρ_old and one row per non-empty set."""
    rows = [pb.BidRow(gpu_ids=sorted(k), rho=v) for k, v in bid.rows.items() if k]
    return pb.Bid(round=round, rho_old=bid.rho_old, rows=rows)


def bid_from_pb(app_id: str, msg: pb.Bid) -> Bid:
    """A domain Bid from the wire, or RequestError(INVALID_ARGUMENT) naming the field."""
    rows: dict[frozenset[str], float] = {}
    if math.isnan(msg.rho_old) or msg.rho_old <= 0:
        raise RequestError(Code.INVALID_ARGUMENT, f"bid.rho_old must be > 0, got {msg.rho_old}")
    rows[frozenset()] = msg.rho_old
    for k, row in enumerate(msg.rows):
        key = frozenset(row.gpu_ids)
        if not key or len(key) != len(row.gpu_ids):
            raise RequestError(
                Code.INVALID_ARGUMENT, f"bid.rows[{k}].gpu_ids must be non-empty and distinct"
            )
        if math.isnan(row.rho) or row.rho <= 0:
            raise RequestError(
                Code.INVALID_ARGUMENT, f"bid.rows[{k}].rho must be a positive number, got {row.rho}"
            )
        if key in rows:
            raise RequestError(Code.INVALID_ARGUMENT, f"bid.rows[{k}] repeats a GPU set")
        rows[key] = row.rho
    try:
        return Bid(app_id, rows)
    except ValueError as exc:
        raise RequestError(Code.INVALID_ARGUMENT, str(exc)) from None


def progress_from_pb(msg: pb.ProgressReport, gpus: Container[str], where: str = "") -> Progress:
    """A progress report (``ReportProgress``, or one batched in a heartbeat) from the wire, or
    RequestError(INVALID_ARGUMENT) naming the field (prefixed by ``where``); the GPUs it names
    must be in ``gpus`` (the cluster).

    >>> progress_from_pb(pb.ProgressReport(iters_done=3, iter_time_s=0.5), set())
    Progress(iters_done=3.0, iters_remaining=0.0, iter_time_s=0.5)
    >>> progress_from_pb(pb.ProgressReport(iter_time_s=-1), set(), "p[0].")
    Traceback (most recent call last):
    arbiter.messages.RequestError: p[0].iter_time_s must be a finite number >= 0, got -1.0
    """
    if not (math.isfinite(msg.iter_time_s) and msg.iter_time_s >= 0):
        raise RequestError(
            Code.INVALID_ARGUMENT,
            f"{where}iter_time_s must be a finite number >= 0, got {msg.iter_time_s}",
        )
    unknown = [g for g in msg.placement_gpu_ids if g not in gpus]
    if unknown:
        raise RequestError(
            Code.INVALID_ARGUMENT, f"{where}placement_gpu_ids names unknown GPUs: {unknown[:5]}"
        )
    return Progress(float(msg.iters_done), float(msg.iters_remaining), float(msg.iter_time_s))


# Progress reports one heartbeat may carry (an Agent reporting every job of a large search
# each second fits; a flood does not reach the core).
MAX_HEARTBEAT_REPORTS = 64


def heartbeat_from_pb(msg: pb.Heartbeat, gpus: Container[str]) -> tuple[Progress, ...]:
    """The progress reports a heartbeat carries, validated all before any is applied (a bad one
    refuses the whole heartbeat with RequestError(INVALID_ARGUMENT) naming it).

    >>> beat = pb.Heartbeat(progress=[pb.ProgressReport(iter_time_s=0.1)] * 2)
    >>> [p.iter_time_s for p in heartbeat_from_pb(beat, set())]
    [0.1, 0.1]
    >>> heartbeat_from_pb(pb.Heartbeat(progress=[pb.ProgressReport()] * 65), set())
    Traceback (most recent call last):
    arbiter.messages.RequestError: heartbeat.progress has 65 reports; the limit is 64
    """
    n = len(msg.progress)
    if n > MAX_HEARTBEAT_REPORTS:
        raise RequestError(
            Code.INVALID_ARGUMENT,
            f"heartbeat.progress has {n} reports; the limit is {MAX_HEARTBEAT_REPORTS}",
        )
    return tuple(
        progress_from_pb(r, gpus, f"heartbeat.progress[{k}].") for k, r in enumerate(msg.progress)
    )


def offer_to_pb(offer: Offer, cluster: Cluster) -> pb.Offer:
    """The offer with each GPU's place in ``cluster`` (the Agent prices placements)."""
    return pb.Offer(
        round=offer.round,
        gpus=[gpu_to_pb(cluster.gpu(g)) for g in sorted(offer.gpus)],
        lease_seconds=offer.lease_seconds,
        bid_deadline_unix_s=offer.deadline,
    )


def offer_from_pb(msg: pb.Offer) -> tuple[Offer, tuple[GPU, ...]]:
    """The offer and the offered GPUs with their places (in the message's order)."""
    gpus = tuple(gpu_from_pb(g) for g in msg.gpus)
    offer = Offer(
        round=msg.round,
        gpus=frozenset(g.id for g in gpus),
        lease_seconds=msg.lease_seconds,
        deadline=msg.bid_deadline_unix_s,
    )
    return offer, gpus


def allocation_to_pb(allocation: Allocation) -> pb.Allocation:
    return pb.Allocation(
        round=allocation.round,
        leases=[lease_to_pb(x) for x in allocation.leases],
        hidden_payment=allocation.hidden_payment,
    )


def revocation_to_pb(revocation: Revocation) -> pb.Revocation:
    """The cut part by id and GPUs, the grace, and (when known) the original lease's id and
    what stays of it."""
    r = revocation
    return pb.Revocation(
        lease_id=lease_id(r.lease),
        gpu_ids=sorted(r.lease.gpus),
        grace_seconds=r.grace_seconds,
        reason=r.reason,
        original_lease_id=lease_id(r.original) if r.original else "",
        remainder=lease_to_pb(r.remainder) if r.remainder else None,
    )


def session_error_to_pb(err: RequestError) -> pb.SessionError:
    return pb.SessionError(code=err.code.value, message=err.message)
