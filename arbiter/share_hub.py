"""The share hub: QOOP's max-min share for analytics queries, pushed to each query on change.

The third part of the live arbiter (QOOP §3: the cluster scheduler tells each query its share,
and the query replans when it changes). Queries register (directly, or through a query service
such as HiveServer2's hook holding the service credential); each subscribes to a stream of
:class:`~arbiter.shares.ShareChange`. The share is 1/|J| of the analytics capacity, where |J|
counts the registered queries and the other analytics apps the YARN bridge sees on the
ResourceManager; every change of |J| or of the capacity bumps the epoch and is pushed to every
subscriber.

Not thread-safe on its own: :class:`arbiter.core.ArbiterCore` serialises every call under its
lock.
"""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from arbiter.journal import hash_token, new_token, token_matches
from arbiter.messages import CLOSE, Code, Outbox, RequestError
from arbiter.shares import Resources, ShareCause, ShareChange, fair_share

__all__ = ["QueryJob", "ShareHub"]


@dataclass
class QueryJob:
    """A registered query and its open share streams."""

    job_id: str
    token_hash: str
    name: str
    user: str = ""
    via_service: bool = False  # registered by a query service (HiveServer2's hook)
    subscribers: list[Outbox] = field(default_factory=list)
    idle_since: float | None = None  # when its last share stream closed (None: one is open)
    admitted_by: str = ""  # the credential it registered with (arbiter.admission)


class ShareHub:
    """Registered queries, their subscribers, and the share they are told.

    ``declared_capacity`` gives the capacity to share when the ResourceManager reports none
    (the declared cluster minus drained machines).

    >>> from arbiter.shares import Resources
    >>> hub = ShareHub(lambda: Resources(64.0, 256_000.0))
    >>> job, token = hub.register("q1")
    >>> stream = hub.subscribe(job)
    >>> hub.set_analytics(1, None)  # another analytics app arrived on YARN: |J| = 2
    True
    >>> _, first = stream.get_nowait(); _, second = stream.get_nowait()
    >>> first.fair_share.vcores, second.fair_share.vcores
    (64.0, 32.0)
    """

    def __init__(
        self, declared_capacity: Callable[[], Resources], *, service_token: str | None = None
    ) -> None:
        self._declared = declared_capacity
        self.service_hash = hash_token(service_token) if service_token else None
        self.queries: dict[str, QueryJob] = {}
        self.external_jobs = 0  # analytics apps the bridge sees on YARN (QOOP's |J|)
        self.analytics_capacity: Resources | None = None
        self.epoch = 0

    def capacity(self) -> Resources:
        if self.analytics_capacity is not None:  # reported by the ResourceManager (bridge)
            return self.analytics_capacity
        return self._declared()

    def register(
        self,
        name: str,
        *,
        user: str = "",
        service_token: str | None = None,
        now: float = 0.0,
        admitted_by: str = "",
    ) -> tuple[str, str]:
        """A query joins |J|. ``service_token`` (a query service such as HiveServer2's hook,
        registering its users' queries) must be the credential this arbiter issued to query
        services; a wrong one is refused and nothing is registered."""
        via_service = service_token is not None
        if service_token is not None and (
            self.service_hash is None or not token_matches(service_token, self.service_hash)
        ):
            raise RequestError(Code.UNAUTHENTICATED, "wrong query-service token")
        token = new_token()
        job_id = f"query-{uuid.uuid4().hex[:12]}"
        self.queries[job_id] = QueryJob(
            job_id,
            hash_token(token),
            name,
            user,
            via_service,
            idle_since=now,
            admitted_by=admitted_by,
        )
        self.broadcast(ShareCause.JOB_ARRIVED)
        return job_id, token

    def authorize(self, token: str | None, job_id: str) -> None:
        if not token:
            raise RequestError(Code.UNAUTHENTICATED, "missing x-app-token metadata")
        job = self.queries.get(job_id)
        if job is None:
            raise RequestError(Code.NOT_FOUND, f"unknown query job {job_id}")
        if not token_matches(token, job.token_hash):
            raise RequestError(Code.PERMISSION_DENIED, f"token does not belong to {job_id}")

    def subscribe(self, job_id: str, outbox: Outbox | None = None) -> Outbox:
        q = outbox if outbox is not None else queue.Queue()
        self.queries[job_id].subscribers.append(q)
        self.queries[job_id].idle_since = None
        self.epoch += 1
        q.put((job_id, self.share(ShareCause.SUBSCRIBED)))
        return q

    def unsubscribe(self, job_id: str, q: Outbox, now: float = 0.0) -> None:
        job = self.queries.get(job_id)
        if job is not None and q in job.subscribers:
            job.subscribers.remove(q)
            if not job.subscribers:
                job.idle_since = now

    def expire(self, now: float, idle_s: float) -> list[str]:
        """Unregister the queries with no open share stream for more than ``idle_s`` (an
        abandoned registration must not shrink every real query's share forever)."""
        gone = [j.job_id for j in self.queries.values()
                if j.idle_since is not None and now - j.idle_since > idle_s]  # fmt: skip
        for job_id in gone:
            self.unregister(job_id)
        return gone

    def unregister(self, job_id: str) -> None:
        job = self.queries.pop(job_id, None)
        if job is None:
            raise RequestError(Code.NOT_FOUND, f"unknown query job {job_id}")
        for q in job.subscribers:
            q.put(CLOSE)
        self.broadcast(ShareCause.JOB_DEPARTED)

    def set_analytics(self, external_jobs: int, capacity: Resources | None) -> bool:
        """``external_jobs`` other analytics apps count in |J| and ``capacity`` is R (None:
        the declared cluster). Pushes an update when either changes; returns whether it did."""
        if external_jobs < 0:
            raise RequestError(
                Code.INVALID_ARGUMENT, f"external_jobs must be >= 0: {external_jobs}"
            )
        if (external_jobs, capacity) == (self.external_jobs, self.analytics_capacity):
            return False
        cause = (
            ShareCause.CAPACITY_CHANGED
            if capacity != self.analytics_capacity
            else ShareCause.JOB_ARRIVED
            if external_jobs > self.external_jobs
            else ShareCause.JOB_DEPARTED
        )
        self.external_jobs, self.analytics_capacity = external_jobs, capacity
        self.broadcast(cause)
        return True

    def share(self, cause: ShareCause) -> ShareChange:
        n = len(self.queries) + self.external_jobs
        return ShareChange(self.epoch, fair_share(self.capacity(), n), n, cause)

    def broadcast(self, cause: ShareCause) -> None:
        self.epoch += 1
        change = self.share(cause)
        for job in self.queries.values():
            for q in job.subscribers:
                q.put((job.job_id, change))

    def subscribers(self) -> int:
        return sum(len(q.subscribers) for q in self.queries.values())
