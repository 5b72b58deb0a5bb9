"""The arbiter's stateful shell: apps, sessions, rounds, leases, shares (Themis §4.3).

:class:`ArbiterCore` owns the mutable state of a running arbiter and drives the two-phase,
five-step protocol of Themis's semi-optimistic architecture (T:1058-1070, spec B.7) for a
two-phase policy (:class:`arbiter.policies.themis.Themis`, the same object and ``decide`` the
simulator runs):

1. visibility: each round the core takes ρ_current of every connected app (its latest
   ``RhoReport``, else what its last bid table implies, else ∞ when it holds nothing);
2. the policy calls the worst (1 - f) of them; each receives the same non-binding **offer** of
   the free GPUs;
3. each answers with one **bid** before the deadline (late or missing bids drop out);
4. allocation: the policy's auction step (PA auction, hidden payments, leftover) decides on a
   snapshot outside the lock; the result is committed to the journal in one transaction;
5. each Agent is told its leases (``Allocation``), auction and leftover alike.

Every other policy is one-phase: its decision becomes leases through
:mod:`arbiter.live_policy`.

It also expires leases, revokes the leases of Agents silent past the heartbeat timeout,
drains machines with a grace period, and computes QOOP's 1-over-n share for Hive queries.
Every method takes the lock: the *decision* cycle is serial (ARCHITECTURE.md principle 1); the
gRPC servicer (:mod:`arbiter.service`) is a thin translation layer over this class, and every
error it raises is a :class:`RequestError` carrying the gRPC status to return. The clock is
injected, so tests can drive time.
"""

from __future__ import annotations

import logging
import math
import queue
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from types import MappingProxyType
from typing import Protocol

from arbiter.auction import Bid
from arbiter.cluster import Cluster
from arbiter.config import Config
from arbiter.decider import Decider, decide_inline
from arbiter.journal import (
    AppRecord,
    Journal,
    hash_token,
    lease_id,
    new_token,
    token_matches,
)
from arbiter.live_policy import plan_leases
from arbiter.policies.base import Decision, JobView, check_decision
from arbiter.policies.base import Snapshot as PolicySnapshot
from arbiter.rounds import (
    ArbiterState,
    InvariantViolation,
    Lease,
    check_invariants,
    expire_leases,
    free_gpus,
    offer_due,
    rho_after_grant,
)
from arbiter.shares import Resources, ShareCause, ShareChange, fair_share

__all__ = ["ArbiterCore", "Code", "Offer", "PendingRound", "RequestError", "Revocation"]

log = logging.getLogger("yarn_arbiter.core")


class Code(Enum):
    """The gRPC status a :class:`RequestError` maps to (names as in grpc.StatusCode)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    ALREADY_EXISTS = "ALREADY_EXISTS"


class RequestError(Exception):
    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Offer:
    round: int
    gpus: frozenset[str]
    lease_seconds: float
    deadline: float


@dataclass(frozen=True)
class Allocation:
    round: int
    leases: tuple[Lease, ...]
    hidden_payment: float


@dataclass(frozen=True)
class Revocation:
    lease: Lease  # the cut part
    grace_seconds: float
    reason: str
    original: Lease | None = None  # the lease the app held before the cut
    remainder: Lease | None = None  # what stays of it (a new lease id)


CLOSE = object()  # sentinel that ends a session's outbound stream


@dataclass
class PendingRound:
    round: int
    offered: frozenset[str]
    participants: tuple[str, ...]
    others: tuple[str, ...]
    deadline: float
    bids: dict[str, Bid] = field(default_factory=dict)


class Outbox(Protocol):
    """Where the core delivers a session's or subscriber's messages (thread-safe ``put``)."""

    def put(self, item: object) -> None: ...


@dataclass
class _Session:
    outbox: Outbox
    last_seen: float


@dataclass
class _QueryJob:
    job_id: str
    token_hash: str
    name: str
    user: str = ""
    via_service: bool = False  # registered by a query service (HiveServer2's hook)
    subscribers: list[Outbox] = field(default_factory=list)


class ArbiterCore:
    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        journal: Journal,
        *,
        admin_token: str,
        service_token: str | None = None,
        clock: Callable[[], float] = time.time,
        decider: Decider = decide_inline,
        topology_from_rm: bool = False,
    ) -> None:
        """``topology_from_rm``: the cluster comes from the ResourceManager (YARN bridge), so
        journaled leases on GPUs it no longer has are trimmed at load instead of refused."""
        self.cluster = cluster
        self.decider = decider
        self.config = config
        self.journal = journal
        self.clock = clock
        self._admin_hash = hash_token(admin_token)
        self._service_hash = hash_token(service_token) if service_token else None
        self._lock = threading.RLock()
        snap = journal.load(cluster.gpu_ids, trim_unknown=topology_from_rm)
        self.apps: dict[str, AppRecord] = dict(snap.apps)
        self._by_token: dict[str, str] = {a.token_hash: a.app_id for a in self.apps.values()}
        self.state: ArbiterState = snap.state
        for key, value in snap.knobs.items():
            self.config = self.config.with_value(key, value, source="journal")
        self.sessions: dict[str, _Session] = {}
        # gRPC calls by method and refusals by status code, counted by the service shell for
        # /metrics (arbiter.metrics); plain counters, no lock (an increment is atomic enough)
        self.rpc_calls: Counter[str] = Counter()
        self.rpc_refused: Counter[str] = Counter()
        self.rho_reports: dict[str, float] = {}
        self.progress: dict[str, dict[str, float]] = {}
        self.pending: PendingRound | None = None
        self.first_freed_at: float | None = None
        self.drained: set[str] = set()
        self.queries: dict[str, _QueryJob] = {}
        self.external_jobs = 0  # analytics apps the bridge sees on YARN (QOOP's |J|)
        self.analytics_capacity: Resources | None = None
        self.epoch = 0
        self._index_of: tuple[Lease, ...] | None = None
        self._by_app: dict[str, list[Lease]] = {}
        # Non-auction policies (arbiter.live_policy): accounting and the policy's memory.
        self.attained: dict[str, float] = {}  # GPU-seconds received per app (see _accrue)
        self._accrued_at = self.clock()
        self.first_start: dict[str, float] = {}
        self.policy_state: object = None
        self._policy_key: tuple[str, str] | None = None
        self._policy = None
        self._policy_due = 0.0
        self._policy_members: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ authentication

    def authenticate_app(self, token: str | None) -> str:
        if not token:
            raise RequestError(Code.UNAUTHENTICATED, "missing x-app-token metadata")
        app_id = self._by_token.get(hash_token(token))  # one hash and a dict look-up
        if app_id is None:
            raise RequestError(Code.UNAUTHENTICATED, "unknown app token")
        return app_id

    def authorize_app(self, token: str | None, app_id: str) -> None:
        """The token must belong to ``app_id``: an AM acts only for its own app."""
        owner = self.authenticate_app(token)
        if owner != app_id:
            raise RequestError(
                Code.PERMISSION_DENIED, f"this token belongs to {owner}, not to {app_id}"
            )

    def authorize_admin(self, token: str | None) -> None:
        if not token:
            raise RequestError(Code.UNAUTHENTICATED, "missing x-admin-token metadata")
        if not token_matches(token, self._admin_hash):
            raise RequestError(Code.PERMISSION_DENIED, "wrong admin token")

    # ------------------------------------------------------------------ apps

    def register_app(
        self,
        *,
        app_name: str,
        user: str,
        queue_name: str,
        max_gpu_demand: int,
        jobs: Iterable[Mapping[str, object]] = (),
        yarn_app_id: str = "",
    ) -> tuple[str, str]:
        """Register an app; ``yarn_app_id`` binds it to its YARN application, and the YARN
        bridge then acts on that application's events only (a YARN app carrying this app's tag
        is not enough)."""
        if yarn_app_id and not re.fullmatch(r"application_\d+_\d+", yarn_app_id):
            raise RequestError(
                Code.INVALID_ARGUMENT,
                f"yarn_application_id {yarn_app_id[:80]!r} is not application_<ts>_<n>",
            )
        if not 1 <= max_gpu_demand <= self.cluster.num_gpus:
            raise RequestError(
                Code.INVALID_ARGUMENT,
                f"max_gpu_demand must be in [1, {self.cluster.num_gpus}], got {max_gpu_demand}",
            )
        if len(app_name) > 256 or len(user) > 256 or len(queue_name) > 256:
            raise RequestError(Code.INVALID_ARGUMENT, "app_name, user and queue are <= 256 chars")
        token = new_token()
        app_id = f"app-{uuid.uuid4().hex[:12]}"
        record = AppRecord(
            app_id,
            hash_token(token),
            app_name,
            user,
            queue_name or "default",
            max_gpu_demand,
            tuple(dict(j) for j in jobs),
            self.clock(),
            yarn_app_id,
        )
        with self._lock:
            self.journal.put_app(record)
            self.apps[app_id] = record
            self._by_token[record.token_hash] = app_id
        return app_id, token

    def held(self, app_id: str, now: float | None = None) -> frozenset[str]:
        """GPUs ``app_id`` holds at ``now`` (through a per-app index of the leases, which is
        rebuilt whenever the lease tuple changes: heartbeats ask for it a thousand times a
        second under load)."""
        t = self.clock() if now is None else now
        mine = self._lease_index().get(app_id, ())
        return frozenset().union(*(x.gpus for x in mine if x.live_at(t)))

    def _lease_index(self) -> dict[str, list[Lease]]:
        leases = self.state.leases
        if self._index_of is not leases:
            index: dict[str, list[Lease]] = {}
            for lease in leases:
                index.setdefault(lease.app_id, []).append(lease)
            self._by_app, self._index_of = index, leases
        return self._by_app

    def holdings(self, now: float) -> dict[str, frozenset[str]]:
        """GPUs each app holds at ``now``, in one pass over the leases (not one per app)."""
        out: dict[str, set[str]] = {}
        for lease in self.state.leases:
            if lease.live_at(now):
                out.setdefault(lease.app_id, set()).update(lease.gpus)
        return {a: frozenset(g) for a, g in out.items()}

    def rho_current(self, app_id: str, now: float, held: frozenset[str] | None = None) -> float:
        """ρ_current of ``app_id`` (``held``: its GPUs at ``now``, if already known)."""
        if app_id in self.rho_reports:
            return self.rho_reports[app_id]
        if held is None:
            held = self.held(app_id, now)
        if not held:
            return math.inf
        bid = self.state.last_bids.get(app_id)
        return rho_after_grant(bid, held) if bid is not None else 1.0

    # ------------------------------------------------------------------ sessions

    def open_session(
        self, app_id: str, outbox: Outbox | None = None, resume_after_round: int = 0
    ) -> Outbox:
        """Start ``app_id``'s session; messages for it go to ``outbox`` (anything with a
        thread-safe ``put``; a new queue by default).

        A reconnecting Agent says the last round it saw; the live leases it was granted in
        later rounds (while it was away) are sent again as one Allocation per round.
        """
        with self._lock:
            old = self.sessions.get(app_id)
            if old is not None:
                old.outbox.put(CLOSE)  # a reconnect replaces the old stream
            session = _Session(outbox if outbox is not None else queue.Queue(), self.clock())
            self.sessions[app_id] = session
            now = self.clock()
            missed: dict[int, list[Lease]] = {}
            for lease in self.state.leases:
                if lease.app_id == app_id and lease.round > resume_after_round and lease.end > now:
                    missed.setdefault(lease.round, []).append(lease)
            for rnd in sorted(missed):
                session.outbox.put(Allocation(rnd, tuple(missed[rnd]), 0.0))
            return session.outbox

    def close_session(self, app_id: str, outbox: Outbox) -> None:
        with self._lock:
            current = self.sessions.get(app_id)
            if current is not None and current.outbox is outbox:
                del self.sessions[app_id]

    def report_progress(
        self, app_id: str, iters_done: int, iters_remaining: int, iter_time_s: float
    ) -> None:
        """Keep the app's latest progress (remaining time, for SRTF-like policies)."""
        with self._lock:
            self.progress[app_id] = {
                "iters_done": float(iters_done),
                "iters_remaining": float(iters_remaining),
                "iter_time_s": float(iter_time_s),
            }
            self.heartbeat(app_id)

    def heartbeat(self, app_id: str) -> None:
        with self._lock:
            if app_id in self.sessions:
                self.sessions[app_id].last_seen = self.clock()

    def report_rho(self, app_id: str, rho: float) -> None:
        if math.isnan(rho) or rho <= 0:
            raise RequestError(Code.INVALID_ARGUMENT, f"rho_report.rho must be > 0, got {rho}")
        with self._lock:
            self.rho_reports[app_id] = rho
            self.heartbeat(app_id)

    def submit_bid(self, app_id: str, round_no: int, bid: Bid) -> None:
        """Step 3: validate and keep ``app_id``'s bid for the open round."""
        with self._lock:
            self.heartbeat(app_id)
            p = self.pending
            if p is None or p.round != round_no:
                raise RequestError(
                    Code.FAILED_PRECONDITION,
                    f"bid.round {round_no} is not the open round ({p.round if p else 'none open'})",
                )
            if app_id not in p.participants:
                raise RequestError(
                    Code.PERMISSION_DENIED, f"{app_id} was not offered round {round_no}"
                )
            if app_id in p.bids:
                raise RequestError(Code.ALREADY_EXISTS, f"{app_id} already bid in this round")
            limit = self.config["arbiter.bid.max-rows"]
            if len(bid.rows) > limit:
                raise RequestError(
                    Code.INVALID_ARGUMENT, f"bid.rows has {len(bid.rows)} rows, limit {limit}"
                )
            room = self.apps[app_id].max_gpu_demand - len(self.held(app_id))
            for key in bid.rows:
                stray = key - p.offered
                if stray:
                    raise RequestError(
                        Code.INVALID_ARGUMENT,
                        f"bid.rows names GPUs not offered in round {round_no}: {sorted(stray)[:5]}",
                    )
                if len(key) > room:
                    raise RequestError(
                        Code.INVALID_ARGUMENT,
                        f"bid.rows asks for {len(key)} GPUs, above the app's room of {room}",
                    )
            p.bids[app_id] = bid

    # ------------------------------------------------------------------ leases

    def find_lease(self, app_id: str, lid: str) -> Lease:
        for lease in self.state.leases:
            if lease_id(lease) == lid:
                if lease.app_id != app_id:
                    raise RequestError(Code.PERMISSION_DENIED, f"lease {lid} is not {app_id}'s")
                return lease
        raise RequestError(Code.NOT_FOUND, f"no live lease {lid}")

    def release(self, app_id: str, lid: str, gpus: Iterable[str] = ()) -> frozenset[str]:
        with self._lock:
            lease = self.find_lease(app_id, lid)
            gpus = frozenset(gpus) or lease.gpus
            if not gpus <= lease.gpus:
                raise RequestError(
                    Code.INVALID_ARGUMENT,
                    f"gpu_ids not in lease {lid}: {sorted(gpus - lease.gpus)}",
                )
            now = self.clock()
            rest = lease.gpus - gpus
            leases = [x for x in self.state.leases if x is not lease]
            if rest:
                leases.append(replace(lease, gpus=rest))
            if lease.start > now:  # a reserved (future) leftover lease: just drop the part
                pass
            self._commit(replace(self.state, leases=tuple(leases)))
            self._mark_freed(now)
            return gpus

    def renew(self, app_id: str, lid: str) -> Lease:
        """Extend a lease by one lease length while no other app is waiting for GPUs."""
        with self._lock:
            lease = self.find_lease(app_id, lid)
            now = self.clock()
            drained = sorted({self.cluster.gpu(g).machine for g in lease.gpus} & self.drained)
            if drained:
                raise RequestError(
                    Code.FAILED_PRECONDITION,
                    f"lease {lid} holds GPUs on drained machine(s) {', '.join(drained)}: it ends "
                    "at its term",
                )
            waiting = [
                a
                for a in self.sessions
                if a != app_id and len(self.held(a, now)) < self.apps[a].max_gpu_demand
            ]
            if waiting:
                raise RequestError(
                    Code.FAILED_PRECONDITION,
                    f"{len(waiting)} other app(s) wait for GPUs; the lease ends at its term "
                    "and its GPUs go back to auction",
                )
            longer = replace(lease, end=max(lease.end, now) + self.config["arbiter.lease.seconds"])
            leases = tuple(longer if x is lease else x for x in self.state.leases)
            self._commit(replace(self.state, leases=leases))
            return longer

    # ------------------------------------------------------------------ queries (QOOP)

    def capacity(self) -> Resources:
        if self.analytics_capacity is not None:  # reported by the ResourceManager (bridge)
            return self.analytics_capacity
        live = [m for m in self.cluster.machines if m.name not in self.drained]
        return Resources(float(sum(m.vcores for m in live)), float(sum(m.memory_mb for m in live)))

    # ------------------------------------------------------------------ the YARN bridge's hooks

    def set_analytics(self, external_jobs: int, capacity: Resources | None = None) -> bool:
        """What the ResourceManager shows beyond our query jobs: ``external_jobs`` other
        analytics apps (Hive/Tez, Spark, MapReduce) that count in QOOP's |J|, and the
        ``capacity`` R to share (None: the declared cluster). Pushes a share update to every
        subscriber when either changes; returns whether it did."""
        if external_jobs < 0:
            raise RequestError(
                Code.INVALID_ARGUMENT, f"external_jobs must be >= 0: {external_jobs}"
            )
        with self._lock:
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
            self._broadcast_share(cause)
            return True

    def finish_app(self, app_id: str, reason: str) -> frozenset[str]:
        """The app ended outside the arbiter (YARN reports it FINISHED, FAILED or KILLED): its
        leases end now (their GPUs are offered again), its session closes, its record goes.
        Idempotent; returns the GPUs it held."""
        with self._lock:
            now = self.clock()
            freed = self.held(app_id, now)
            kept = tuple(x for x in self.state.leases if x.app_id != app_id)
            if len(kept) != len(self.state.leases):
                self._commit(replace(self.state, leases=kept))
                self._mark_freed(now)
            session = self.sessions.pop(app_id, None)
            if session is not None:
                session.outbox.put(CLOSE)
            record = self.apps.pop(app_id, None)
            if record is not None:
                self._by_token.pop(record.token_hash, None)
                self.journal.remove_app(app_id)
                log.info("app %s finished (%s); %d GPUs freed", app_id, reason, len(freed))
            self.rho_reports.pop(app_id, None)
            self.progress.pop(app_id, None)
            return freed

    def update_topology(self, cluster: Cluster) -> tuple[frozenset[str], frozenset[str]]:
        """The ResourceManager's nodes changed: serve ``cluster`` from now on. Leases on GPUs
        that left (a node lost or decommissioned) end at once and their apps are told; GPUs that
        arrived are offered. Returns (added, removed) GPU ids."""
        with self._lock:
            now = self.clock()
            old = self.cluster.gpu_ids
            added, removed = cluster.gpu_ids - old, old - cluster.gpu_ids
            if not added and not removed and cluster == self.cluster:
                return frozenset(), frozenset()
            leases: list[Lease] = []
            for lease in self.state.leases:
                gone = lease.gpus & removed
                if not gone:
                    leases.append(lease)
                    continue
                cut = replace(lease, gpus=gone, end=max(lease.start + 1e-6, now))
                rest = replace(lease, gpus=lease.gpus - gone) if lease.gpus - gone else None
                self._send(lease.app_id, Revocation(cut, 0.0, "node lost", lease, rest))
                if rest is not None:
                    leases.append(rest)
            self.cluster = cluster
            self.drained &= {m.name for m in cluster.machines}
            self._commit(replace(self.state, gpus=cluster.gpu_ids, leases=tuple(leases)))
            if added:
                self._mark_freed(now)
            self.pending = None  # an open round may offer GPUs that left
            self._broadcast_share(ShareCause.CAPACITY_CHANGED)
            return added, removed

    def register_query(
        self, name: str, *, user: str = "", service_token: str | None = None
    ) -> tuple[str, str]:
        """A query joins |J|. ``service_token`` (a query service such as HiveServer2's hook,
        registering its users' queries) must be the credential this arbiter issued to query
        services; a wrong one is refused and nothing is registered."""
        via_service = service_token is not None
        if via_service and (
            self._service_hash is None or not token_matches(service_token, self._service_hash)
        ):
            raise RequestError(Code.UNAUTHENTICATED, "wrong query-service token")
        token = new_token()
        job_id = f"query-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self.queries[job_id] = _QueryJob(job_id, hash_token(token), name, user, via_service)
            self._broadcast_share(ShareCause.JOB_ARRIVED)
        return job_id, token

    def authorize_query(self, token: str | None, job_id: str) -> None:
        if not token:
            raise RequestError(Code.UNAUTHENTICATED, "missing x-app-token metadata")
        with self._lock:
            job = self.queries.get(job_id)
            if job is None:
                raise RequestError(Code.NOT_FOUND, f"unknown query job {job_id}")
            if not token_matches(token, job.token_hash):
                raise RequestError(Code.PERMISSION_DENIED, f"token does not belong to {job_id}")

    def subscribe_share(self, job_id: str, outbox: Outbox | None = None) -> Outbox:
        with self._lock:
            q = outbox if outbox is not None else queue.Queue()
            self.queries[job_id].subscribers.append(q)
            self.epoch += 1
            q.put((job_id, self._share(ShareCause.SUBSCRIBED)))
            return q

    def unsubscribe_share(self, job_id: str, q: Outbox) -> None:
        with self._lock:
            job = self.queries.get(job_id)
            if job is not None and q in job.subscribers:
                job.subscribers.remove(q)

    def unregister_query(self, job_id: str) -> None:
        with self._lock:
            job = self.queries.pop(job_id, None)
            if job is None:
                raise RequestError(Code.NOT_FOUND, f"unknown query job {job_id}")
            for q in job.subscribers:
                q.put(CLOSE)
            self._broadcast_share(ShareCause.JOB_DEPARTED)

    def _share(self, cause: ShareCause) -> ShareChange:
        n = len(self.queries) + self.external_jobs
        return ShareChange(self.epoch, fair_share(self.capacity(), n), n, cause)

    def _broadcast_share(self, cause: ShareCause) -> None:
        self.epoch += 1
        change = self._share(cause)
        for job in self.queries.values():
            for q in job.subscribers:
                q.put((job.job_id, change))

    # ------------------------------------------------------------------ admin

    def set_knob(self, key: str, value: str) -> tuple[str, str]:
        from arbiter.config import ConfigError

        runtime = {"arbiter.themis.fairness-knob", "arbiter.lease.seconds",
                   "arbiter.bid.deadline.seconds", "arbiter.heartbeat.timeout.seconds",
                   "arbiter.offer.batch-window.seconds", "arbiter.auction.rounding",
                   "arbiter.auction.payment-gap",
                   "arbiter.auction.time-budget.seconds"}  # fmt: skip
        if key not in runtime:
            raise RequestError(
                Code.INVALID_ARGUMENT,
                f"key {key!r} cannot change at runtime (changeable: {sorted(runtime)})",
            )
        with self._lock:
            previous = str(self.config[key])
            try:
                self.config = self.config.with_value(key, value, source="admin")
            except ConfigError as exc:
                raise RequestError(Code.INVALID_ARGUMENT, str(exc)) from None
            self.journal.put_knob(key, value)
            return key, previous

    def drain(self, machine: str, grace: float) -> list[str]:
        """Stop offering ``machine``; its leases end after ``grace`` seconds (revocation)."""
        if not any(m.name == machine for m in self.cluster.machines):
            raise RequestError(Code.NOT_FOUND, f"unknown machine {machine!r}")
        if not (grace >= 0 and math.isfinite(grace)):
            raise RequestError(Code.INVALID_ARGUMENT, f"grace_seconds must be >= 0, got {grace}")
        with self._lock:
            self.drained.add(machine)
            now = self.clock()
            revoked, leases = [], []
            for lease in self.state.leases:
                on_machine = frozenset(
                    g for g in lease.gpus if self.cluster.gpu(g).machine == machine
                )
                if on_machine and lease.end > now + grace:
                    # Only the drained machine's GPUs end early; the rest of the lease stays.
                    cut = replace(lease, gpus=on_machine, end=max(lease.start + 1e-6, now + grace))
                    rest = (replace(lease, gpus=lease.gpus - on_machine)
                            if lease.gpus - on_machine else None)  # fmt: skip
                    revoked.append(lease_id(lease))
                    why = f"machine {machine} drained"
                    self._send(lease.app_id, Revocation(cut, grace, why, lease, rest))
                    leases.append(cut)
                    if rest is not None:
                        leases.append(rest)
                else:
                    leases.append(lease)
            self._commit(replace(self.state, leases=tuple(leases)))
            self._broadcast_share(ShareCause.CAPACITY_CHANGED)
            return revoked

    # ------------------------------------------------------------------ the round loop

    def _send(self, app_id: str, message: object) -> None:
        session = self.sessions.get(app_id)
        if session is not None:
            session.outbox.put(message)

    def _commit(self, state: ArbiterState, bids: Iterable[Bid] = ()) -> None:
        check_invariants(state)
        self.journal.commit_round(state, bids)
        if state.leases is not self.state.leases:
            self._accrue(self.clock())
        self.state = state

    @staticmethod
    def _service(lease: Lease, since: float, now: float) -> float:
        return len(lease.gpus) * max(0.0, min(lease.end, now) - max(lease.start, since))

    def _accrue(self, now: float) -> None:
        """Add the GPU-seconds every lease gave its app since the last accrual to
        ``attained``; called before the lease set changes (cuts, renewals, expiries)."""
        since = self._accrued_at
        if now <= since:
            return
        for x in self.state.leases:
            used = self._service(x, since, now)
            if used > 0:
                self.attained[x.app_id] = self.attained.get(x.app_id, 0.0) + used
        self._accrued_at = now

    def _mark_freed(self, now: float) -> None:
        if self.first_freed_at is None:
            self.first_freed_at = now

    def _offerable(self, now: float) -> frozenset[str]:
        return frozenset(
            g for g in free_gpus(self.state, now) if self.cluster.gpu(g).machine not in self.drained
        )

    def tick(self) -> None:
        """One step of the scheduler loop (call it every few tens of milliseconds).

        A two-phase policy (Themis) first calls for bids (under the lock: filtering only);
        when every participant answered or the deadline passed, its auction step runs outside
        the lock on a snapshot (the decision cycle), so RPCs are not held up by a long solve;
        its leases are then bound only if every GPU it grants is still free (the binding
        cycle), else the round is dropped and the GPUs are offered again.
        """
        with self._lock:
            now = self.clock()
            state, freed = expire_leases(self.state, now)
            if freed or state is not self.state:
                self._commit(state)
                self._mark_freed(now)
            self._drop_silent_agents(now)
            policy = self._current_policy()
            if not getattr(policy, "two_phase", False):
                self.pending = None
                self._policy_round(now)
                return
            if self.pending is None:
                self._call_for_bids(policy, now)
                return
            p = self.pending
            if now < p.deadline and set(p.bids) != set(p.participants):
                return
            self.pending = None
            self.first_freed_at = None
            snapshot = self._bidding_snapshot(now, p.bids)
        try:
            decision = self.decider(policy, snapshot)
        except Exception:
            log.exception("round %d could not be decided; its GPUs are offered again", p.round)
            with self._lock:
                self.policy_state = None
                self._mark_freed(self.clock())
            return
        with self._lock:
            self._bind(p, decision)

    def _bidding_snapshot(self, now: float,
                          bids: Mapping[str, Bid] | None = None) -> PolicySnapshot:  # fmt: skip
        """What a two-phase policy sees: the connected apps with their ρ_current (reported, or
        from their kept bid tables) and max demand, the lease book, the GPUs that may be
        offered (drained machines left out) and the bids answering the open call."""
        holdings = self.holdings(now)
        none: frozenset[str] = frozenset()
        members = sorted(a for a in self.sessions if a in self.apps)
        jobs = tuple(self._job_view(a, now, holdings.get(a, none)) for a in members)
        book = replace(self.state, last_bids=MappingProxyType({}))  # the policy keeps its own
        return PolicySnapshot(
            now, self.cluster, jobs, self.policy_state, book=book,
            rho={a: self.rho_current(a, now, holdings.get(a, none)) for a in members},
            demand={a: self.apps[a].max_gpu_demand for a in members},
            bids=dict(bids or {}), offerable=self._offerable(now),
        )  # fmt: skip

    def _bind(self, p: PendingRound, decision: Decision) -> None:
        self.policy_state = decision.policy_state
        outcome = decision.outcome
        if outcome is None:
            # Nobody answered: count the round, so that the next offer uses a fresh number.
            self._commit(replace(self.state, round=max(self.state.round, p.round)))
            return
        granted = outcome.granted
        bids = [p.bids[a] for a in outcome.participants]
        last_bids = dict(self.state.last_bids)
        last_bids.update((b.app_id, b) for b in bids)
        state = replace(
            self.state,
            leases=self.state.leases + granted,
            round=max(self.state.round, p.round),
            last_bids=MappingProxyType(last_bids),
        )
        try:
            self._commit(state, bids)
        except InvariantViolation:  # a GPU was leased meanwhile (release, drain): offer again
            log.warning("round %d dropped: its GPUs changed while it was decided", p.round)
            self._mark_freed(self.clock())
            return
        if outcome.result.budget_stops:
            log.info(
                "round %d: %d solves stopped at the time budget (%d bidders); the best "
                "allocation found was used",
                p.round,
                outcome.result.budget_stops,
                len(bids),
            )
        for b in bids:  # the arbiter keeps the table; ρ now comes from it
            self.rho_reports.pop(b.app_id, None)
        per_app: dict[str, list[Lease]] = {}
        for lease in granted:
            per_app.setdefault(lease.app_id, []).append(lease)
        for app_id, leases in per_app.items():
            payment = 1.0 - outcome.result.c.get(app_id, 1.0)
            self._send(app_id, Allocation(p.round, tuple(leases), payment))

    def _drop_silent_agents(self, now: float) -> None:
        timeout = self.config["arbiter.heartbeat.timeout.seconds"]
        for app_id, session in list(self.sessions.items()):
            if now - session.last_seen > timeout:
                session.outbox.put(CLOSE)
                del self.sessions[app_id]
                self.rho_reports.pop(app_id, None)
                kept = tuple(x for x in self.state.leases if x.app_id != app_id)
                if len(kept) != len(self.state.leases):
                    self._commit(replace(self.state, leases=kept))
                    self._mark_freed(now)

    def _eligible(
        self, now: float, holdings: Mapping[str, frozenset[str]] | None = None
    ) -> dict[str, int]:
        held = self.holdings(now) if holdings is None else holdings
        none: frozenset[str] = frozenset()
        room = {
            a: self.apps[a].max_gpu_demand - len(held.get(a, none))
            for a in self.sessions
            if a in self.apps
        }
        return {a: r for a, r in room.items() if r > 0}

    def _call_for_bids(self, policy, now: float) -> None:
        """Step 1-2 of the protocol: when GPUs pooled past the batch window can be offered and
        some app has room, the policy picks the participants; each is sent the offer."""
        offered = self._offerable(now)
        if not offered or not self._eligible(now):
            return
        window = self.config["arbiter.offer.batch-window.seconds"]
        if self.first_freed_at is None:
            self.first_freed_at = now
        if not offer_due(self.first_freed_at, now, window):
            return
        try:
            decision = policy.decide(self._bidding_snapshot(now))
        except Exception:
            log.exception("policy %s could not call for bids; nothing changed", policy.name)
            return
        self.policy_state = decision.policy_state
        call = decision.call
        if call is None:
            return
        deadline = now + self.config["arbiter.bid.deadline.seconds"]
        self.pending = PendingRound(call.round, call.gpus, call.participants, call.others,
                                    deadline)  # fmt: skip
        offer = Offer(call.round, call.gpus, call.lease_s, deadline)
        for a in call.participants:
            self._send(a, offer)

    # ------------------------------------------------------------------ other policies

    def _current_policy(self):
        """The configured policy, rebuilt when its name or knobs change (Themis also takes
        its knobs from the arbiter's own settings: f, lease, rounding, payment gap, budget)."""
        from arbiter.config import parse_knobs
        from arbiter.policies import make_policy

        name = self.config["arbiter.policy"]
        knobs = parse_knobs(self.config["arbiter.policy.knobs"])
        if name == "themis":
            knobs = {
                **knobs,
                "fairness_knob": self.config["arbiter.themis.fairness-knob"],
                "lease_s": self.config["arbiter.lease.seconds"],
                "rounding": self.config["arbiter.auction.rounding"],
                "payment_gap": self.config["arbiter.auction.payment-gap"],
                "time_budget": self.config["arbiter.auction.time-budget.seconds"] or None,
            }
        key = (name, repr(sorted(knobs.items())))
        if key != self._policy_key:
            self._policy = make_policy(name, **knobs)
            self._policy_key, self.policy_state = key, None
            self.pending = None
            self._policy_due = 0.0
        return self._policy

    def _attained(self, app_id: str, now: float) -> float:
        since = self._accrued_at
        live = sum(self._service(x, since, now) for x in self._lease_index().get(app_id, ()))
        return self.attained.get(app_id, 0.0) + live

    def _policy_cluster(self) -> Cluster:
        if not self.drained:
            return self.cluster
        machines = tuple(m for m in self.cluster.machines if m.name not in self.drained)
        names = {m.name for m in machines}
        return Cluster(
            self.cluster.name, machines, tuple(g for g in self.cluster.gpus if g.machine in names)
        )

    def _gang(self, app_id: str) -> int:
        app = self.apps[app_id]
        gangs = [int(j.get("gang_size") or 0) for j in app.jobs]
        return min(max([g for g in gangs if g > 0], default=app.max_gpu_demand), app.max_gpu_demand)

    def _job_view(self, app_id: str, now: float, held: frozenset[str]) -> JobView:
        app = self.apps[app_id]
        gang = self._gang(app_id)
        progress = self.progress.get(app_id)
        remaining = None
        if progress and progress["iter_time_s"] > 0:
            remaining = progress["iters_remaining"] * progress["iter_time_s"]
        return JobView(
            job_id=app_id,
            app_id=app_id,
            queue=app.queue,
            arrival_s=app.registered_at,
            gang=gang,
            held=held,
            attained_gpu_s=self._attained(app_id, now),
            first_start_s=self.first_start.get(app_id),
            remaining_work=remaining,
            ideal_rate=1.0 if remaining is not None else None,
        )

    def _policy_round(self, now: float) -> None:
        """Run the configured non-auction policy when due and apply its decision as leases
        (:mod:`arbiter.live_policy`)."""
        policy = self._current_policy()
        members = frozenset(a for a in self.sessions if a in self.apps)
        window = self.config["arbiter.offer.batch-window.seconds"]
        freed = self.first_freed_at is not None and offer_due(self.first_freed_at, now, window)
        if not (now >= self._policy_due or freed or members != self._policy_members):
            return
        cluster = self._policy_cluster()
        holdings = self.holdings(now)
        order = sorted(members, key=lambda a: (self.apps[a].registered_at, a))
        partial_ok = getattr(policy, "holds_partial_gangs", False)
        held = {a: holdings.get(a, frozenset()) & cluster.gpu_ids for a in order}
        if not partial_ok:  # a gang cut by a lost node cannot run: the policy places it anew
            held = {a: g if len(g) >= self._gang(a) else frozenset() for a, g in held.items()}
        jobs = tuple(self._job_view(a, now, held[a]) for a in order)
        # GPUs still leased to apps without a session look free to the policy; a grant of one
        # starts when that lease ends (plan_leases), so no GPU is ever in two live leases.
        snapshot = PolicySnapshot(now, cluster, jobs, self.policy_state)
        try:
            decision = policy.decide(snapshot)
            check_decision(snapshot, decision)
        except Exception:
            log.exception("policy %s failed; nothing changed", policy.name)
            self._policy_due = now + self.config["arbiter.policy.interval.seconds"]
            return
        allocation = {a: frozenset(g) for a, g in decision.allocation.items() if a in members}
        plan = plan_leases(
            self.state.leases,
            allocation,
            apps=members,
            now=now,
            lease_seconds=self.config["arbiter.lease.seconds"],
            grace=self.config["arbiter.revocation.grace.seconds"],
            round_no=self.state.round + 1,
        )
        self._commit(replace(self.state, leases=plan.leases, round=self.state.round + 1))
        self.policy_state = decision.policy_state
        self._policy_members = members
        self.first_freed_at = None
        interval = self.config["arbiter.policy.interval.seconds"]
        due = now + (policy.round_s or interval)
        if decision.wake_at is not None and decision.wake_at > now:
            due = min(due, decision.wake_at)
        self._policy_due = due
        for lease in plan.revoked:
            self._send(lease.app_id, Revocation(lease, max(0.0, lease.end - now), policy.name))
        for app_id, leases in plan.granted.items():
            self.first_start.setdefault(app_id, min(x.start for x in leases))
            self._send(app_id, Allocation(self.state.round, leases, 0.0))

    # ------------------------------------------------------------------ views

    def snapshot(self) -> Mapping[str, object]:
        with self._lock:
            now = self.clock()
            return MappingProxyType(
                {
                    "round": self.state.round,
                    "free": self._offerable(now),
                    "leases": self.state.leases,
                    "apps": dict(self.apps),
                    "connected": set(self.sessions),
                    "drained": set(self.drained),
                    "now": now,
                    "cluster": self.cluster,
                    "queries": len(self.queries),
                    "subscribers": sum(len(q.subscribers) for q in self.queries.values()),
                    "external_jobs": self.external_jobs,
                    "epoch": self.epoch,
                }
            )
