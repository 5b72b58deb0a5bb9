"""The live arbiter: a thin facade over its four parts, serialised by one lock (Themis §4.3).

:class:`ArbiterCore` is what the gRPC servicer (:mod:`arbiter.service`), the YARN bridge and the
metrics page call. It owns the lock, the clock, the cluster and the configuration, and composes:

* :class:`~arbiter.sessions.AppSessions`: registered apps, their tokens, sessions and reports;
* :class:`~arbiter.lease_book.LeaseBook`: the journaled leases, drains and attained service;
* :class:`~arbiter.share_hub.ShareHub`: QOOP's max-min share pushed to each query on change;
* :class:`~arbiter.scheduler.SchedulerLoop`: the one scheduling loop, Themis's five-step
  protocol (visibility, offer, bids, allocation, leases; T:1058-1070, spec B.7) for a two-phase
  policy and :mod:`arbiter.live_policy` for the others.

Every public method takes the lock, except the auction step of a two-phase policy, which runs
outside it (the decision cycle: a long solve never holds RPCs up) and is bound under it, and a
heartbeat that finds the lock held (:meth:`ArbiterCore.beat`: the event loop never waits for
the scheduling loop's round; the beat is kept and applied by the next holder). Every
error is a :class:`~arbiter.messages.RequestError` carrying the gRPC status to return. The clock
is injected, so tests drive time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from arbiter.admission import Credentials, anonymous_ok, check_credential, check_quota
from arbiter.auction import Bid
from arbiter.cluster import Cluster
from arbiter.config import Config, ConfigError
from arbiter.decider import Decider, decide_inline
from arbiter.history import PlanSwitchRecord
from arbiter.journal import AppRecord, Journal, hash_token, lease_id, new_token
from arbiter.lease_book import LeaseBook
from arbiter.messages import (
    CLOSE,
    Allocation,
    ArbiterView,
    Code,
    Offer,
    Outbox,
    RequestError,
    Revocation,
)
from arbiter.rounds import ArbiterState, Lease
from arbiter.scheduler import PendingRound, SchedulerLoop
from arbiter.sessions import AppSessions, Progress
from arbiter.share_hub import QueryJob, ShareHub
from arbiter.shares import Resources, ShareCause
from arbiter.sqlite_store import StoreError

__all__ = [
    "CLOSE",
    "Allocation",
    "ArbiterCore",
    "Code",
    "Offer",
    "PendingRound",
    "RequestError",
    "Revocation",
]

log = logging.getLogger("yarn_arbiter.core")

MAX_PLAN_ID = 256  # characters of a plan or stage id in a plan-switch report
MAX_SWITCH_STAGES = 512  # stage ids a plan-switch report may list

# Knobs an admin may change while the arbiter runs (SetKnob); the others need a restart.
RUNTIME_KNOBS = frozenset({
    "arbiter.themis.fairness-knob", "arbiter.lease.seconds", "arbiter.bid.deadline.seconds",
    "arbiter.heartbeat.timeout.seconds", "arbiter.offer.batch-window.seconds",
    "arbiter.auction.rounding", "arbiter.auction.payment-gap",
    "arbiter.auction.time-budget.seconds",
})  # fmt: skip


class ArbiterCore:
    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        journal: Journal,
        *,
        admin_token: str,
        service_token: str | None = None,
        submit_token: str | None = None,
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
        self._lock = threading.RLock()
        # heartbeats that found the lock held, oldest first: (app, reports, when); appended
        # without the lock (a deque's append is atomic), applied by the next holder in order
        self._beats: deque[tuple[str, Sequence[Progress], float]] = deque()
        snap = journal.load(cluster.gpu_ids, trim_unknown=topology_from_rm)
        for key, value in snap.knobs.items():
            self.config = self.config.with_value(key, value, source="journal")
        self.sessions = AppSessions(snap.apps, journal, admin_token=admin_token)
        self.book = LeaseBook(snap.state, journal, now=clock(), drained=snap.drained)
        self.shares = ShareHub(self._declared_capacity, service_token=service_token)
        self._submit_hash = hash_token(submit_token) if submit_token else None
        self.scheduler = SchedulerLoop(self.sessions, self.book)
        self.scheduler.configure(self.config)
        # gRPC calls by method and refusals by status code, counted by the service shell for
        # /metrics (arbiter.metrics); plain counters, no lock (an increment is atomic enough)
        self.rpc_calls: Counter[str] = Counter()
        self.rpc_refused: Counter[str] = Counter()
        # Health: why the journal last failed to commit (None: it commits). Listeners (the gRPC
        # health service) are told every change; see :meth:`_writing`.
        self.journal_error: str | None = None
        self.health_listeners: list[Callable[[bool], None]] = []
        # Plan switches queries report (QOOP Pseudocode 2), for the console's history; the
        # arbiter does not act on them.
        self.plan_switch_listeners: list[Callable[[PlanSwitchRecord], None]] = []
        self._next_probe = 0.0
        self._next_expiry = -math.inf  # abandoned apps are looked for once a second

    # ------------------------------------------------------------------ health

    @property
    def healthy(self) -> bool:
        """Whether the journal commits: what the gRPC health service and ``/healthz`` say."""
        return self.journal_error is None

    def _set_journal_error(self, error: str | None) -> None:
        was = self.journal_error
        self.journal_error = error
        if (was is None) == (error is None):
            return
        if error is not None:
            log.error("the journal cannot commit; refusing changes until it can: %s", error)
        else:
            log.info("the journal commits again")
        for listener in list(self.health_listeners):
            listener(error is None)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A change that is journaled: a journal that cannot commit (a full or read-only
        disk) makes the arbiter unhealthy and the caller gets UNAVAILABLE with the reason. The
        parts write the journal before they change memory, so nothing changed."""
        try:
            yield
        except StoreError as exc:
            self._set_journal_error(str(exc))
            raise RequestError(
                Code.UNAVAILABLE, f"the arbiter's journal cannot commit, nothing changed: {exc}"
            ) from None
        self._set_journal_error(None)

    def _journaled(self, change: Callable[[], object]) -> None:
        with self._writing():
            change()

    def probe_journal(self) -> bool:
        """While unhealthy, try (at most once a second) whether the journal commits again;
        returns whether it is healthy."""
        if self.journal_error is None:
            return True
        now = time.monotonic()
        if now < self._next_probe:
            return False
        self._next_probe = now + 1.0
        probe = getattr(self.journal, "probe", None)
        with self._lock, contextlib.suppress(RequestError):
            self._journaled(probe if probe is not None else (lambda: None))
        return self.journal_error is None

    # ------------------------------------------------------------------ read-only views

    @property
    def state(self) -> ArbiterState:
        """The lease book's current state (leases, round, kept bid tables)."""
        return self.book.state

    @property
    def apps(self) -> Mapping[str, AppRecord]:
        return self.sessions.apps

    @property
    def queries(self) -> Mapping[str, QueryJob]:
        return self.shares.queries

    @property
    def drained(self) -> set[str]:
        return self.book.drained

    @property
    def external_jobs(self) -> int:
        return self.shares.external_jobs

    def snapshot(self) -> ArbiterView:
        """One consistent view, taken under the lock."""
        with self._lock:
            self._apply_beats()
            now = self.clock()
            return ArbiterView(
                round=self.book.state.round,
                free=self.book.offerable(now, self.cluster),
                leases=self.book.state.leases,
                apps=dict(self.sessions.apps),
                connected=frozenset(self.sessions.sessions),
                drained=frozenset(self.book.drained),
                now=now,
                cluster=self.cluster,
                queries=len(self.shares.queries),
                subscribers=self.shares.subscribers(),
                external_jobs=self.shares.external_jobs,
                epoch=self.shares.epoch,
            )

    # ------------------------------------------------------------------ authentication

    def authenticate_app(self, token: str | None) -> str:
        return self.sessions.authenticate_app(token)

    def authorize_app(self, token: str | None, app_id: str) -> None:
        """The token must belong to ``app_id``: an AM acts only for its own app."""
        self.sessions.authorize_app(token, app_id)

    def authorize_admin(self, token: str | None) -> None:
        self.sessions.authorize_admin(token)

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
        credentials: Credentials | None = None,
        request_bytes: int = 0,
    ) -> tuple[str, str]:
        """Register an app; ``yarn_app_id`` binds it to its YARN application, and the YARN
        bridge then acts on that application's events only (a YARN app carrying this app's tag
        is not enough).

        ``credentials``: what a remote caller sent (checked by :mod:`arbiter.admission`; ``None``
        for a caller in this process, the YARN bridge or a test); ``request_bytes`` its size.
        The quotas apply to every caller."""
        jobs = tuple(jobs)
        how = self._check_registration(credentials, request_bytes)
        self._check_jobs(jobs)
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
            how,
        )
        with self._lock:
            cfg = self.config
            check_quota("apps", (a.user for a in self.sessions.apps.values()), user,
                        total=cfg["arbiter.admission.max-apps"],
                        per_user=cfg["arbiter.admission.max-apps-per-user"])  # fmt: skip
            if how == "anonymous":  # credentialed registrations keep the rest of the total
                check_quota("anonymous apps",
                            (a.user for a in self.sessions.apps.values()
                             if a.admitted_by == "anonymous"), user,
                            total=cfg["arbiter.admission.max-anonymous"],
                            per_user=cfg["arbiter.admission.max-apps-per-user"])  # fmt: skip
            self._journaled(lambda: self.sessions.add(record))
        return app_id, token

    def _check_registration(self, credentials: Credentials | None, size: int,
                            services: bool = False) -> str:  # fmt: skip
        """The admission rules for a remote registration (:mod:`arbiter.admission`)."""
        limit = self.config["arbiter.admission.max-register-bytes"]
        if size > limit:
            raise RequestError(
                Code.RESOURCE_EXHAUSTED, f"the request has {size} bytes; the limit is {limit}"
            )
        if credentials is None:
            return "local"
        return check_credential(
            credentials,
            admin_hash=self.sessions.admin_hash,
            submit_hash=self._submit_hash,
            service_hash=self.shares.service_hash,
            anonymous=anonymous_ok(
                self.config["arbiter.admission.anonymous"], self.config["arbiter.grpc.bind-host"]
            ),
            services=services,
        )

    def _expire_abandoned_apps(self, now: float) -> None:
        """Remove the apps that registered and never opened a session, hold no lease and were
        registered ``arbiter.admission.app-idle-expiry.seconds`` ago (under the lock)."""
        limit = self.config["arbiter.admission.app-idle-expiry.seconds"]
        s = self.sessions
        leased = {x.app_id for x in self.book.state.leases if x.end > now}
        gone = [a for a, r in s.apps.items()
                if a not in s.sessions and a not in leased and now - r.registered_at > limit
                and s.heard.get(a, r.registered_at) <= r.registered_at]  # fmt: skip
        for app_id in gone:
            try:
                with self._writing():
                    s.remove(app_id)
            except RequestError:
                return
            log.info("app %s removed: registered %g s ago and never connected", app_id, limit)

    def _check_jobs(self, jobs: tuple[Mapping[str, object], ...]) -> None:
        """Each declared job must be something a policy can use (finite, within the
        cluster), and there may be at most ``arbiter.admission.max-jobs`` of them."""
        limit = self.config["arbiter.admission.max-jobs"]
        if len(jobs) > limit:
            raise RequestError(
                Code.INVALID_ARGUMENT, f"jobs has {len(jobs)} entries; the limit is {limit}"
            )
        n = self.cluster.num_gpus
        for k, job in enumerate(jobs):
            for key in ("gang_size", "max_gpus"):
                value = job.get(key, 0)
                if not isinstance(value, int) or not 0 <= value <= n:
                    raise RequestError(
                        Code.INVALID_ARGUMENT, f"jobs[{k}].{key} must be in [0, {n}], got {value}"
                    )
            for key in ("iters_total", "serial_iter_time_s"):
                value = job.get(key, 0)
                if not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
                    raise RequestError(
                        Code.INVALID_ARGUMENT,
                        f"jobs[{k}].{key} must be a finite number >= 0, got {value}",
                    )
            if len(str(job.get("job_id", ""))) > 256:
                raise RequestError(Code.INVALID_ARGUMENT, f"jobs[{k}].job_id is <= 256 chars")

    def held(self, app_id: str, now: float | None = None) -> frozenset[str]:
        """GPUs ``app_id`` holds at ``now``."""
        return self.book.held(app_id, self.clock() if now is None else now)

    def holdings(self, now: float) -> dict[str, frozenset[str]]:
        """GPUs each app holds at ``now``."""
        return self.book.holdings(now)

    def rho_current(self, app_id: str, now: float, held: frozenset[str] | None = None) -> float:
        """ρ_current of ``app_id`` (``held``: its GPUs at ``now``, if already known)."""
        return self.scheduler.rho_current(app_id, now, held)

    def finish_app(self, app_id: str, reason: str) -> frozenset[str]:
        """The app ended outside the arbiter (YARN reports it FINISHED, FAILED or KILLED): its
        leases end now (their GPUs are offered again), its session closes, its record goes.
        Idempotent; returns the GPUs it held."""
        with self._lock, self._writing():
            freed = self.book.end_app(app_id, self.clock())
            if self.sessions.remove(app_id) is not None:
                log.info("app %s finished (%s); %d GPUs freed", app_id, reason, len(freed))
            return freed

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
            now = self.clock()
            missed: dict[int, list[Lease]] = {}
            for lease in self.book.state.leases:
                if lease.app_id == app_id and lease.round > resume_after_round and lease.end > now:
                    missed.setdefault(lease.round, []).append(lease)
            resend = [Allocation(rnd, tuple(missed[rnd]), 0.0) for rnd in sorted(missed)]
            return self.sessions.open(app_id, outbox, now=now, resend=resend)

    def close_session(self, app_id: str, outbox: Outbox) -> None:
        with self._lock:
            self.sessions.close(app_id, outbox)

    def report_progress(
        self, app_id: str, iters_done: int, iters_remaining: int, iter_time_s: float
    ) -> None:
        """Keep the app's latest progress (remaining time, for SRTF-like policies)."""
        with self._lock:
            self.sessions.report_progress(
                app_id, iters_done, iters_remaining, iter_time_s, self.clock()
            )

    def heartbeat(self, app_id: str) -> None:
        with self._lock:
            self.sessions.heartbeat(app_id, self.clock())

    def beat(self, app_id: str, reports: Sequence[Progress] = (), *, rho: bool = False) -> float:
        """A heartbeat on the Session stream carrying the progress ``reports`` since the last
        one; returns ρ_current after them when ``rho`` (else NaN).

        It never waits for the lock: thousands of Agents' heartbeats arrive on one event loop,
        and the scheduling loop holds the lock for tens of milliseconds while it calls for
        bids or closes a round with thousands of apps (a thread waiting on the lock stops the
        whole loop; measured in ``benchmarks/fanin_probe/stalls.py``). A heartbeat that finds
        the lock free is applied at once, after any kept before it; one that finds it held is
        kept, with its time, and applied in arrival order by the next holder that reads what
        heartbeats change (the scheduling loop's tick, :meth:`snapshot`, the next heartbeat),
        so no decision is taken without it. Its ρ is then read without the lock, from the
        committed lease state, as of the round before the one being bound, if one is."""
        now = self.clock()
        if self._lock.acquire(blocking=False):
            try:
                self._apply_beats()
                self.sessions.beat(app_id, reports, now)
                return self.scheduler.rho_current(app_id, now) if rho else math.nan
            finally:
                self._lock.release()
        self._beats.append((app_id, tuple(reports), now))
        return self.scheduler.rho_current(app_id, now) if rho else math.nan

    def _apply_beats(self) -> None:
        """Under the lock: apply the heartbeats kept while it was held, oldest first."""
        beats = self._beats
        while beats:
            app_id, reports, at = beats.popleft()
            self.sessions.beat(app_id, reports, at)

    def report_rho(self, app_id: str, rho: float) -> None:
        with self._lock:
            self.sessions.report_rho(app_id, rho, self.clock())

    def submit_bid(self, app_id: str, round_no: int, bid: Bid) -> None:
        """Step 3: validate and keep ``app_id``'s bid for the open round."""
        with self._lock:
            now = self.clock()
            self.sessions.heartbeat(app_id, now)
            limit = self.config["arbiter.bid.max-rows"]
            self.scheduler.submit_bid(app_id, round_no, bid, now=now, limit=limit)

    # ------------------------------------------------------------------ leases

    def find_lease(self, app_id: str, lid: str) -> Lease:
        return self.book.find(app_id, lid)

    def release(self, app_id: str, lid: str, gpus: Iterable[str] = ()) -> frozenset[str]:
        with self._lock, self._writing():
            return self.book.release(app_id, lid, frozenset(gpus), self.clock())

    def renew(self, app_id: str, lid: str) -> Lease:
        """Extend a lease to one lease length from now while no other app is waiting for GPUs
        (registered and connected, or heard from within the heartbeat timeout)."""
        with self._lock, self._writing():
            now = self.clock()
            apps = self.sessions.apps
            timeout = self.config["arbiter.heartbeat.timeout.seconds"]
            waiting = [
                a
                for a in self.sessions.active(now, timeout)
                if a != app_id and len(self.book.held(a, now)) < apps[a].max_gpu_demand
            ]
            return self.book.renew(
                app_id, lid, now=now, cluster=self.cluster, waiting=len(waiting),
                seconds=self.config["arbiter.lease.seconds"],
            )  # fmt: skip

    def drain(self, machine: str, grace: float) -> list[str]:
        """Stop offering ``machine``; its leases end after ``grace`` seconds (revocation)."""
        if not any(m.name == machine for m in self.cluster.machines):
            raise RequestError(Code.NOT_FOUND, f"unknown machine {machine!r}")
        if not (grace >= 0 and math.isfinite(grace)):
            raise RequestError(Code.INVALID_ARGUMENT, f"grace_seconds must be >= 0, got {grace}")
        with self._lock, self._writing():
            now = self.clock()
            revocations = self.book.drain(machine, grace, now=now, cluster=self.cluster)
            for r in revocations:
                self.sessions.send(r.lease.app_id, r)
            self.shares.broadcast(ShareCause.CAPACITY_CHANGED)
            return [lease_id(r.original) for r in revocations if r.original is not None]

    def undrain(self, machine: str) -> bool:
        """Offer ``machine``'s GPUs again after :meth:`drain`; returns whether it was drained."""
        if not any(m.name == machine for m in self.cluster.machines):
            raise RequestError(Code.NOT_FOUND, f"unknown machine {machine!r}")
        with self._lock:
            if not self.book.undrain(machine, self.clock()):
                return False
            self.shares.broadcast(ShareCause.CAPACITY_CHANGED)
            return True

    # ------------------------------------------------------------------ the YARN bridge's hooks

    def update_topology(self, cluster: Cluster) -> tuple[frozenset[str], frozenset[str]]:
        """The ResourceManager's nodes changed: serve ``cluster`` from now on. Leases on GPUs
        that left (a node lost or decommissioned) end at once and their apps are told; GPUs that
        arrived are offered. Returns (added, removed) GPU ids."""
        with self._lock, self._writing():
            now = self.clock()
            old = self.cluster.gpu_ids
            added, removed = cluster.gpu_ids - old, old - cluster.gpu_ids
            if not added and not removed and cluster == self.cluster:
                return frozenset(), frozenset()
            revocations = self.book.resize(cluster, removed, now)
            for r in revocations:
                self.sessions.send(r.lease.app_id, r)
            self.cluster = cluster
            if added:
                self.book.mark_freed(now)
            self.scheduler.pending = None  # an open round may offer GPUs that left
            self.shares.broadcast(ShareCause.CAPACITY_CHANGED)
            return added, removed

    def set_analytics(self, external_jobs: int, capacity: Resources | None = None) -> bool:
        """What the ResourceManager shows beyond our query jobs: ``external_jobs`` other
        analytics apps (Hive/Tez, Spark, MapReduce) that count in QOOP's |J|, and the
        ``capacity`` R to share (None: the declared cluster). Pushes a share update to every
        subscriber when either changes; returns whether it did."""
        with self._lock:
            return self.shares.set_analytics(external_jobs, capacity)

    # ------------------------------------------------------------------ queries (QOOP)

    def _declared_capacity(self) -> Resources:
        live = [m for m in self.cluster.machines if m.name not in self.book.drained]
        return Resources(float(sum(m.vcores for m in live)), float(sum(m.memory_mb for m in live)))

    def capacity(self) -> Resources:
        with self._lock:
            return self.shares.capacity()

    def register_query(
        self,
        name: str,
        *,
        user: str = "",
        service_token: str | None = None,
        credentials: Credentials | None = None,
        request_bytes: int = 0,
    ) -> tuple[str, str]:
        """A query joins |J| (``service_token``: registered by a query service; see
        :meth:`arbiter.share_hub.ShareHub.register`). ``credentials`` and ``request_bytes``
        as for :meth:`register_app`; a remote caller's service token comes in
        ``credentials``."""
        with self._lock:
            how = self._check_registration(credentials, request_bytes, services=True)
            if credentials is not None:
                service_token = credentials.service if how == "service" else None
            cfg = self.config
            check_quota("queries", (q.user for q in self.shares.queries.values()), user,
                        total=cfg["arbiter.admission.max-queries"],
                        per_user=cfg["arbiter.admission.max-queries-per-user"])  # fmt: skip
            if how == "anonymous":
                check_quota("anonymous queries",
                            (q.user for q in self.shares.queries.values()
                             if q.admitted_by == "anonymous"), user,
                            total=cfg["arbiter.admission.max-anonymous"],
                            per_user=cfg["arbiter.admission.max-queries-per-user"])  # fmt: skip
            return self.shares.register(
                name, user=user, service_token=service_token, now=self.clock(), admitted_by=how
            )

    def authorize_query(self, token: str | None, job_id: str) -> None:
        with self._lock:
            self.shares.authorize(token, job_id)

    def subscribe_share(self, job_id: str, outbox: Outbox | None = None) -> Outbox:
        with self._lock:
            return self.shares.subscribe(job_id, outbox)

    def unsubscribe_share(self, job_id: str, q: Outbox) -> None:
        with self._lock:
            self.shares.unsubscribe(job_id, q, self.clock())

    def unregister_query(self, job_id: str) -> None:
        with self._lock:
            self.shares.unregister(job_id)

    def report_plan_switch(
        self,
        token: str | None,
        job_id: str,
        *,
        at_s: float,
        from_plan: str,
        to_plan: str,
        vcores: float,
        memory_mb: float,
        cancelled: Iterable[str] = (),
        reused: Iterable[str] = (),
    ) -> PlanSwitchRecord:
        """A registered query's replanner changed its plan: checked, stamped with the query's
        name and user, and handed to the listeners (the console's history)."""
        cancelled, reused = tuple(cancelled), tuple(reused)
        problems = []
        if not (math.isfinite(at_s) and at_s >= 0):
            problems.append(f"at_s must be a finite number >= 0, got {at_s}")
        if not (math.isfinite(vcores) and vcores >= 0 and math.isfinite(memory_mb)
                and memory_mb >= 0):  # fmt: skip
            problems.append(f"share must be finite and >= 0, got {vcores} vcores, {memory_mb} MB")
        for what, plan in (("from_plan", from_plan), ("to_plan", to_plan)):
            if not plan or len(plan) > MAX_PLAN_ID:
                problems.append(f"{what} must be 1-{MAX_PLAN_ID} characters, got {len(plan)}")
        for what, stages in (("cancelled_stages", cancelled), ("reused_stages", reused)):
            if len(stages) > MAX_SWITCH_STAGES or any(len(x) > MAX_PLAN_ID for x in stages):
                problems.append(
                    f"{what}: at most {MAX_SWITCH_STAGES} ids of <= {MAX_PLAN_ID} characters"
                )
        if problems:
            raise RequestError(Code.INVALID_ARGUMENT, "; ".join(problems))
        with self._lock:
            self.shares.authorize(token, job_id)
            q = self.shares.queries[job_id]
            record = PlanSwitchRecord(
                self.clock(), job_id, q.name, q.user, at_s, from_plan, to_plan,
                vcores, memory_mb, cancelled, reused,
            )  # fmt: skip
        for listener in list(self.plan_switch_listeners):
            listener(record)
        return record

    # ------------------------------------------------------------------ admin

    def set_knob(self, key: str, value: str) -> tuple[str, str]:
        if key not in RUNTIME_KNOBS:
            raise RequestError(
                Code.INVALID_ARGUMENT,
                f"key {key!r} cannot change at runtime (changeable: {sorted(RUNTIME_KNOBS)})",
            )
        with self._lock:
            previous = str(self.config[key])
            try:
                config = self.config.with_value(key, value, source="admin")
            except ConfigError as exc:
                raise RequestError(Code.INVALID_ARGUMENT, str(exc)) from None
            self._journaled(lambda: self.journal.put_knob(key, value))  # the journal first
            self.config = config
            self.scheduler.configure(self.config)
            return key, previous

    # ------------------------------------------------------------------ the scheduling loop

    def tick(self) -> None:
        """One step of the scheduling loop (call it every few tens of milliseconds); see
        :mod:`arbiter.scheduler`. A closed round is decided outside the lock and bound under
        it."""
        if not self.probe_journal():
            return  # nothing is scheduled while the journal cannot commit (health says so)
        with self._lock:
            self._apply_beats()  # before the silent Agents are looked for
            now = self.clock()
            idle = self.config["arbiter.query.idle-expiry.seconds"]
            for job_id in self.shares.expire(now, idle):
                log.info("query %s unregistered: no share stream open for %g s", job_id, idle)
            if now >= self._next_expiry:  # a walk over every app; the limit is in hours
                self._next_expiry = now + 1.0
                self._expire_abandoned_apps(now)
            try:
                with self._writing():
                    work = self.scheduler.step(now, self.config, self.cluster)
            except RequestError:  # the journal failed: logged once, by _set_journal_error
                return
        if work is None:
            return
        try:
            decision = self.decider(work.policy, work.snapshot)
        except Exception:  # the decider may fail in any way (a worker process died): log it
            log.exception("round %d could not be decided; its GPUs are offered again",
                          work.round.round)  # fmt: skip
            with self._lock:
                self.scheduler.undecided(self.clock())
            return
        with self._lock, contextlib.suppress(RequestError), self._writing():
            self.scheduler.bind(work.round, decision, self.clock(), self.cluster)
