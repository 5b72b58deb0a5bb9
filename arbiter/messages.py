"""What the live arbiter says to its shells: messages to Agents, errors, and its typed view.

The arbiter's core (:mod:`arbiter.core`) talks to the gRPC servicer, the YARN bridge and the
metrics page only in these types. An Agent's session receives :class:`Offer` (Themis's
non-binding offer of free GPUs, step 2 of the five-step protocol of §4.3), :class:`Allocation`
(step 5: the leases won, with the hidden payment) and :class:`Revocation` (a lease cut short by a
drain, a lost node or a non-auction policy); :data:`CLOSE` ends a stream. Every refusal is a
:class:`RequestError` carrying the gRPC status (:class:`Code`) the servicer returns.
:class:`ArbiterView` is one consistent read-only view of the arbiter, taken under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from arbiter.cluster import Cluster
from arbiter.journal import AppRecord
from arbiter.rounds import Lease

__all__ = [
    "CLOSE",
    "Allocation",
    "ArbiterView",
    "Code",
    "Offer",
    "Outbox",
    "RequestError",
    "Revocation",
]


class Code(Enum):
    """The gRPC status a :class:`RequestError` maps to (names as in grpc.StatusCode)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"  # a quota (apps, queries, sizes) is reached
    UNAVAILABLE = "UNAVAILABLE"  # the journal cannot commit (full or read-only disk)


class RequestError(Exception):
    """A request the arbiter refuses; nothing changed. ``code`` is the status to return."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Offer:
    """Step 2: the same non-binding offer of ``gpus`` to every app called in ``round``."""

    round: int
    gpus: frozenset[str]
    lease_seconds: float
    deadline: float


@dataclass(frozen=True)
class Allocation:
    """Step 5: the leases an app won in ``round`` and the hidden payment (1 - c_i) it paid."""

    round: int
    leases: tuple[Lease, ...]
    hidden_payment: float


@dataclass(frozen=True)
class Revocation:
    """A lease cut short: ``lease`` is the cut part, ending after ``grace_seconds``."""

    lease: Lease  # the cut part
    grace_seconds: float
    reason: str
    original: Lease | None = None  # the lease the app held before the cut
    remainder: Lease | None = None  # what stays of it (a new lease id)


CLOSE = object()  # sentinel that ends a session's outbound stream


class Outbox(Protocol):
    """Where the core delivers a session's or subscriber's messages (thread-safe ``put``)."""

    def put(self, item: object) -> None: ...


@dataclass(frozen=True)
class ArbiterView:
    """One consistent view of the live arbiter at ``now`` (taken under its lock)."""

    round: int
    free: frozenset[str]  # GPUs that may be offered (drained machines left out)
    leases: tuple[Lease, ...]
    apps: Mapping[str, AppRecord]
    connected: frozenset[str]  # apps with an open session
    drained: frozenset[str]  # machine names
    now: float
    cluster: Cluster
    queries: int  # registered query jobs (QOOP's own |J| part)
    subscribers: int  # open share-change streams
    external_jobs: int  # other analytics apps the bridge sees on YARN
    epoch: int  # share epoch
