"""The Agent library: what an ML application master links to bid for GPU leases (Themis §4.3).

An :class:`Agent` sits beside the app scheduler (Hyperband, a single trainer, ...). It
registers the app, keeps one ``Session`` stream open, heartbeats (carrying the progress reports
of :meth:`Agent.report_progress`, acked by the arbiter), reports ρ, answers every
offer with one bid computed by the real bid generator (:func:`arbiter.bids.generate_bid`) from
the app's ρ estimator, and hands allocations and revocations to the app through callbacks. On a
broken stream it reconnects with exponential backoff (0.1 s doubling to 5 s,
:data:`arbiter.retry.STREAM_RECONNECT`) and resumes the same app with its token; leases are the
arbiter's, so nothing is lost across reconnects. Messages are read and written with
:mod:`arbiter.wire.appmaster`, the servicer's own conversions.

:func:`estimator_from_scheduler` turns an App-Scheduler (Fig. 8) into the ρ estimator with
Eq. 2 (successive halving) or the performance-curve variant.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import grpc

from arbiter.agent_env import ENV_APP_ID, ENV_APP_TOKEN, ENV_ARBITER_ADDRESS, ENV_ARBITER_TLS_CA
from arbiter.bids import RhoEstimator, generate_bid
from arbiter.channels import CLIENT_KEEPALIVE_S, arbiter_channel
from arbiter.cluster import GPU, Cluster
from arbiter.fairness import AppScheduler, rho_performance_curve, rho_successive_halving
from arbiter.placement import LocalityModel, Placement, SlowdownModel, placement_of
from arbiter.retry import STREAM_RECONNECT, Retry
from arbiter.wire.appmaster import (
    MAX_HEARTBEAT_REPORTS,
    bid_to_pb,
    lease_from_pb,
    offer_from_pb,
)
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

__all__ = [
    "Agent",
    "HeldLease",
    "SchedulerEstimator",
    "agent_kwargs_from_env",
    "arbiter_addresses",
    "estimator_from_scheduler",
]

log = logging.getLogger("yarn_arbiter.agent")

# How long register() keeps trying the addresses of an HA pair that all answer UNAVAILABLE.
REGISTER_FAILOVER_S = 30.0
# Failovers in a row retried at the first backoff step (0.1 s) before backing off as usual: a
# pair's takeover takes about its ZooKeeper session timeout (a few seconds).
FAST_FAILOVERS = 60
# How long a new Session stream may go without a first message from the arbiter (it acks the
# Agent's first heartbeat as soon as the session is open) before the Agent gives it up and
# reconnects; and how long an open session may then stay silent (the arbiter acks every
# heartbeat at once; at least this, or five heartbeats).
SESSION_OPEN_TIMEOUT_S = 10.0
SESSION_SILENT_S = 10.0
# How often a session looks at the time since the arbiter last spoke.
_WATCH_EVERY_S = 0.25
# How long a cancelled stream's read may take to end before the Agent leaves it behind.
_READER_END_S = 1.0
# A stream that lasted this long had a session (a refused or unreachable arbiter fails at once).
SESSION_HELD_S = 2.0


class _Unanswered(grpc.RpcError):
    """A Session stream the arbiter never answered, or stopped answering (see
    :data:`SESSION_OPEN_TIMEOUT_S`): the Agent tries the next address."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return str(self)


# What a stream's reader puts in its inbox once the arbiter ended the stream (status OK).
_STREAM_ENDED = object()


def _read_stream(stream: grpc.Future, inbox: queue.Queue) -> None:
    """Put every message of ``stream`` in ``inbox``, then :data:`_STREAM_ENDED`, or the
    ``grpc.RpcError`` it ended with."""
    try:
        for msg in stream:
            inbox.put(msg)
        inbox.put(_STREAM_ENDED)
    except grpc.RpcError as exc:
        inbox.put(exc)


def arbiter_addresses(target: str) -> tuple[str, ...]:
    """The addresses in ``target`` (``host:port`` or ``a:1,b:2``); ValueError if none.

    >>> arbiter_addresses("a:1, b:2")
    ('a:1', 'b:2')
    """
    out = tuple(t.strip() for t in target.split(",") if t.strip())
    if not out:
        raise ValueError(f"no arbiter address in {target!r}")
    return out


def estimator_from_scheduler(
    scheduler: AppScheduler,
    *,
    t_id: float,
    job_demand_max: int,
    elapsed: Callable[[], float],
    slowdown: SlowdownModel | None = None,
    performance_curve: bool = False,
    app_demand_max: int | None = None,
) -> SchedulerEstimator:
    """ρ(G) of the app behind ``scheduler`` (Eq. 2, or the performance-curve variant)."""
    return SchedulerEstimator(scheduler, t_id, job_demand_max, elapsed,
                              slowdown or LocalityModel(), performance_curve,
                              app_demand_max or job_demand_max)  # fmt: skip


@dataclass(frozen=True)
class SchedulerEstimator:
    """The ρ estimator :func:`estimator_from_scheduler` builds: call it with a GPU set and its
    shape. ``rho_waiting(lease_s)`` is ρ_old for an app holding nothing (spec B.5 Gap 2, decided
    as in :mod:`arbiter.policies.themis`): nothing for one more lease, then the ideal allocation
    of ``app_demand_max`` GPUs; finite, where its true ρ with no GPUs is ∞."""

    scheduler: AppScheduler
    t_id: float
    job_demand_max: int
    elapsed: Callable[[], float]
    slowdown: SlowdownModel
    performance_curve: bool
    app_demand_max: int

    def _rho(self, gpus: Sequence[str], elapsed: float, slowdown: float) -> float:
        rho = rho_performance_curve if self.performance_curve else rho_successive_halving
        return rho(self.scheduler, gpus, elapsed=elapsed, slowdown=slowdown,
                   demand_max=self.job_demand_max, t_id=self.t_id)  # fmt: skip

    def __call__(self, gpus: frozenset[str], placement: Placement) -> float:
        return self._rho(sorted(gpus), self.elapsed(), self.slowdown.slowdown(placement))

    def rho_waiting(self, lease_s: float) -> float:
        ideal = [f"ideal-{i}" for i in range(self.app_demand_max)]
        return self._rho(ideal, self.elapsed() + lease_s, 1.0)


@dataclass(frozen=True)
class HeldLease:
    lease_id: str
    gpus: frozenset[str]
    start: float
    end: float
    source: str


def _held(msg: pb.Lease, source: str | None = None) -> HeldLease:
    """The lease ``msg`` grants, under the id the arbiter gave it; ``source`` overrides the
    message's (a renewed lease or a revocation's remainder keeps the original's)."""
    lease = lease_from_pb(msg)
    return HeldLease(msg.lease_id, lease.gpus, lease.start, lease.end,
                     source or lease.source.value)  # fmt: skip


def agent_kwargs_from_env(environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """What ``yarn-arbiter submit`` handed this application master in its environment
    (:mod:`arbiter.agent_env`): ``target``, ``app_id``, ``token`` and, with a CA bundle,
    TLS ``credentials``, as keyword arguments for :class:`Agent`. Empty when the AM was not
    started by the wrapper (it then registers itself)."""
    env = os.environ if environ is None else environ
    out: dict[str, object] = {}
    if env.get(ENV_ARBITER_ADDRESS):
        out["target"] = env[ENV_ARBITER_ADDRESS]
    if env.get(ENV_APP_ID) and env.get(ENV_APP_TOKEN):
        out["app_id"], out["token"] = env[ENV_APP_ID], env[ENV_APP_TOKEN]
    if env.get(ENV_ARBITER_TLS_CA):
        with open(env[ENV_ARBITER_TLS_CA], "rb") as f:
            out["credentials"] = grpc.ssl_channel_credentials(root_certificates=f.read())
    return out


class Agent:
    """One app's Agent. ``start()`` connects; callbacks run on the Agent's reader thread."""

    def __init__(
        self,
        target: str,
        *,
        estimator: RhoEstimator,
        max_gpu_demand: int,
        app_name: str = "app",
        user: str = "",
        queue_name: str = "default",
        credentials: grpc.ChannelCredentials | None = None,
        app_id: str | None = None,
        token: str | None = None,
        on_allocation: Callable[[Sequence[HeldLease]], None] | None = None,
        on_revocation: Callable[[HeldLease, float], None] | None = None,
        heartbeat_seconds: float = 1.0,
        register_token: str | None = None,
    ) -> None:
        """``target``: the arbiter's ``host:port``, or a comma-separated list of the addresses of
        an active/standby pair (:mod:`arbiter.ha`): on UNAVAILABLE (a standby, or an arbiter
        gone) the Agent tries the next one. ``register_token``: the credential RegisterApp is
        sent with (the arbiter's submitters' credential, ``x-submit-token``; see
        :mod:`arbiter.admission`)."""
        self.targets = arbiter_addresses(target)
        self._which = 0
        self._failovers_in_row = 0  # failovers since the last message from an arbiter
        self.register_token = register_token
        self.estimator = estimator
        self.max_gpu_demand = max_gpu_demand
        self.app_name, self.user, self.queue_name = app_name, user, queue_name
        self.credentials = credentials
        self.app_id, self.token = app_id, token
        self.on_allocation = on_allocation
        self.on_revocation = on_revocation
        self.heartbeat_seconds = heartbeat_seconds
        self.session_open_timeout_s = SESSION_OPEN_TIMEOUT_S
        self.session_silent_s = max(SESSION_SILENT_S, 5 * heartbeat_seconds)
        # pings on its connections (arbiter.channels): every keepalive_s, answered within
        # keepalive_timeout_s (None: as long again)
        self.keepalive_s = CLIENT_KEEPALIVE_S
        self.keepalive_timeout_s: float | None = None
        self.lease_seconds = 600.0  # the arbiter's lease, learnt from its offers
        self.leases: dict[str, HeldLease] = {}
        self.history: list[HeldLease] = []  # every lease ever granted
        self.topology: dict[str, GPU] = {}
        self.errors: list[tuple[str, str]] = []
        self.rounds_bid: list[int] = []
        self.last_round = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.connected = threading.Event()
        # progress reports waiting for the next heartbeat, and what the last ack said
        self._progress: list[pb.ProgressReport] = []
        self._beats: dict[int, float] = {}  # seq -> when sent (monotonic), unacked
        self._seq = 0
        self.heartbeat_rtt: float | None = None  # seconds, the last acked heartbeat's
        self.arbiter_rho: float | None = None  # the arbiter's ρ estimate in that ack

    # -- plumbing ----------------------------------------------------------------------

    @property
    def target(self) -> str:
        """The arbiter address the Agent talks to now."""
        return self.targets[self._which]

    def _failover(self, exc: grpc.RpcError) -> bool:
        """After ``exc``: move to the next arbiter address if it says this one cannot serve
        (UNAVAILABLE); whether it did."""
        code = exc.code() if hasattr(exc, "code") else None
        if code != grpc.StatusCode.UNAVAILABLE or len(self.targets) < 2:
            return False
        was = self.target
        self._which = (self._which + 1) % len(self.targets)
        log.info("agent %s: %s unavailable, trying %s", self.app_id, was, self.target)
        return True

    def _channel(self) -> grpc.Channel:
        return arbiter_channel(
            self.target, self.credentials, self.keepalive_s, self.keepalive_timeout_s
        )

    def register(self) -> str:
        """RegisterApp (once), trying each arbiter address in turn while they answer
        UNAVAILABLE (a pair electing its active), for up to ``REGISTER_FAILOVER_S``."""
        deadline = time.monotonic() + REGISTER_FAILOVER_S
        while True:
            try:
                return self._register()
            except grpc.RpcError as exc:
                if time.monotonic() > deadline or not self._failover(exc):
                    raise
                time.sleep(0.05)

    def _register(self) -> str:
        if self.app_id is None:
            stub = rpc.AppMasterStub(self._channel())
            reply = stub.RegisterApp(
                pb.RegisterAppRequest(
                    app_name=self.app_name,
                    user=self.user,
                    queue=self.queue_name,
                    max_gpu_demand=self.max_gpu_demand,
                ),
                metadata=[("x-submit-token", self.register_token)] if self.register_token else None,
            )
            self.app_id, self.token = reply.app_id, reply.app_token
        return self.app_id

    def start(self) -> Agent:
        self.register()
        self._thread = threading.Thread(target=self._run, name=f"agent-{self.app_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def release_all(self) -> list[str]:
        """Give every held lease back (an app that finished early frees its GPUs at once)."""
        stub = rpc.AppMasterStub(self._channel())
        released = []
        with self._lock:
            leases = list(self.leases.values())
            self.leases.clear()
        for lease in leases:
            try:
                stub.ReleaseLease(
                    pb.ReleaseLeaseRequest(lease_id=lease.lease_id),
                    metadata=[("x-app-token", self.token)],
                    timeout=5,
                )
                released.append(lease.lease_id)
            except grpc.RpcError as exc:  # already expired or revoked: nothing to give back
                log.info("agent %s: release %s: %s", self.app_id, lease.lease_id, exc.code())
        return released

    def stop_async(self) -> None:
        """Ask the Agent to leave (its stream closes; the arbiter frees its leases)."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def held(self, now: float | None = None) -> frozenset[str]:
        now = time.time() if now is None else now
        with self._lock:
            return frozenset(
                g for x in self.leases.values() if x.start <= now < x.end for g in x.gpus
            )

    def _run(self) -> None:
        retry = Retry(STREAM_RECONNECT, stop=self._stop)
        for _ in retry:
            began = time.monotonic()
            try:
                self._session()
                retry.reset()
            except grpc.RpcError as exc:
                if time.monotonic() - began > SESSION_HELD_S:  # it had a session: a new fault
                    self._failovers_in_row = 0
                code = exc.code() if hasattr(exc, "code") else None
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    log.error("agent %s refused: %s", self.app_id, exc)
                    self.errors.append((str(code), str(exc)))
                    return
                log.info("agent %s: stream broke (%s), reconnecting", self.app_id, code)
                if self._failover(exc) and self._failovers_in_row < FAST_FAILOVERS:
                    self._failovers_in_row += 1
                    retry.reset()  # the next address soon: it may be the new active
            self.connected.clear()

    def report_progress(
        self,
        job_id: str,
        iters_done: int,
        iters_remaining: int,
        iter_time_s: float,
        placement_gpu_ids: Sequence[str] = (),
    ) -> None:
        """Report a job's progress: it travels batched in the next heartbeat on the Session
        stream (the arbiter acks the heartbeat with its ρ estimate: :attr:`arbiter_rho`), not
        as a ``ReportProgress`` call of its own. At most the latest
        :data:`arbiter.wire.appmaster.MAX_HEARTBEAT_REPORTS` wait. An arbiter older than the
        stream heartbeat ignores them (call ``ReportProgress`` to reach one)."""
        report = pb.ProgressReport(
            job_id=job_id,
            iters_done=iters_done,
            iters_remaining=iters_remaining,
            iter_time_s=iter_time_s,
            placement_gpu_ids=list(placement_gpu_ids),
        )
        with self._lock:
            self._progress.append(report)
            del self._progress[:-MAX_HEARTBEAT_REPORTS]

    def _heartbeat(self, now: float) -> pb.AgentMessage:
        """The next heartbeat: it asks for an ack and carries the waiting reports."""
        with self._lock:
            reports, self._progress = self._progress, []
            self._seq = seq = self._seq + 1
            self._beats = {k: v for k, v in self._beats.items() if k > seq - 8}
            self._beats[seq] = time.monotonic()
        beat = pb.Heartbeat(sent_unix_s=now, seq=seq, want_ack=True, progress=reports)
        return pb.AgentMessage(heartbeat=beat)

    def _acked(self, ack: pb.HeartbeatAck) -> None:
        with self._lock:
            sent = self._beats.pop(ack.seq, None)
        if sent is not None:
            self.heartbeat_rtt = time.monotonic() - sent
            self.arbiter_rho = ack.rho

    def _session(self) -> None:
        outbox: queue.Queue = queue.Queue()
        hello = pb.SessionHello(app_id=self.app_id, resume_after_round=self.last_round)
        outbox.put(pb.AgentMessage(hello=hello))
        done = threading.Event()

        def requests():
            last_beat = 0.0
            while not (done.is_set() or self._stop.is_set()):
                now = time.time()
                if now - last_beat >= self.heartbeat_seconds:
                    outbox.put(self._heartbeat(now))
                    last_beat = now
                try:
                    yield outbox.get(timeout=0.05)
                except queue.Empty:
                    continue

        stub = rpc.AppMasterStub(self._channel())
        stream = stub.Session(requests(), metadata=[("x-app-token", self.token)])
        # The session counts as open at the arbiter's first message (the ack of the first
        # heartbeat), not at its headers: grpc's initial_metadata() can wait forever for headers
        # on a call that ended without them (seen in failovers under load: 7 of 40 Agents stuck
        # there for over a minute, their streams long gone). A stream the arbiter does not
        # answer in time, or stops answering, is cancelled and the next address tried. The
        # stream is read on a thread of its own: a read that stays blocked after the cancel (a
        # stream cut by its server's shutdown in a failover once kept an Agent's session thread
        # there for over a minute) holds that thread, not the Agent.
        inbox: queue.Queue = queue.Queue()
        reader = threading.Thread(
            target=_read_stream, args=(stream, inbox), name=f"agent-{self.app_id}-reader",
            daemon=True,
        )  # fmt: skip
        reader.start()
        heard = time.monotonic()  # when the arbiter last said anything (or the stream began)
        opened = False
        try:
            while True:
                try:
                    item = inbox.get(timeout=min(_WATCH_EVERY_S, self.session_open_timeout_s / 4))
                except queue.Empty:
                    if self._stop.is_set():
                        stream.cancel()
                        return
                    limit = self.session_silent_s if opened else self.session_open_timeout_s
                    if time.monotonic() - heard > limit:
                        stream.cancel()
                        self._give_up(reader)
                        what = "stopped answering" if opened else "did not open the session"
                        raise _Unanswered(f"{self.target} {what}") from None
                    continue
                if item is _STREAM_ENDED:
                    return
                if isinstance(item, grpc.RpcError):
                    if self._stop.is_set():
                        return
                    raise item
                heard = time.monotonic()
                if not opened:
                    opened = True
                    self.connected.set()
                self._failovers_in_row = 0
                if self._stop.is_set():
                    stream.cancel()
                    return
                self._handle(item, outbox)
        finally:
            done.set()

    def _give_up(self, reader: threading.Thread) -> None:
        """After cancelling a silent stream: its reader should end at once; say so if not."""
        reader.join(_READER_END_S)
        if reader.is_alive():
            log.warning("agent %s: the read of a cancelled stream to %s did not end; "
                        "it is left behind", self.app_id, self.target)  # fmt: skip

    # -- the protocol --------------------------------------------------------------------

    def _handle(self, msg: pb.ArbiterMessage, outbox: queue.Queue) -> None:
        kind = msg.WhichOneof("kind")
        if kind == "offer":
            self._answer(msg.offer, outbox)
        elif kind == "allocation":
            self._allocated(msg.allocation, outbox)
        elif kind == "revocation":
            cut = self._revoked(msg.revocation)
            if cut is not None and self.on_revocation is not None:
                self.on_revocation(cut, msg.revocation.grace_seconds)
        elif kind == "error":
            self.errors.append((msg.error.code, msg.error.message))
            log.warning("agent %s: %s %s", self.app_id, msg.error.code, msg.error.message)
        elif kind == "heartbeat_ack":
            self._acked(msg.heartbeat_ack)
        elif kind == "rho_query":
            outbox.put(pb.AgentMessage(rho_report=pb.RhoReport(rho=self.rho_now())))

    def _revoked(self, r: pb.Revocation) -> HeldLease | None:
        """Book a revocation: the cut part (these GPUs until now + grace) under the id the
        arbiter gave it, and what stays of the original lease under its new id, so that a
        later ``RenewLease``/``ReleaseLease`` names leases the arbiter knows. Without the
        original id (a policy's cut) the held leases overlapping the cut GPUs are split."""
        gone = frozenset(r.gpu_ids)
        now = time.time()
        with self._lock:
            if r.original_lease_id and r.original_lease_id in self.leases:
                hit = [self.leases[r.original_lease_id]]
            else:
                hit = [
                    x for x in self.leases.values() if x.gpus & gone and x.lease_id != r.lease_id
                ]
            if not hit and r.lease_id not in self.leases:
                return None
            source = hit[0].source if hit else self.leases[r.lease_id].source
            start = hit[0].start if hit else self.leases[r.lease_id].start
            for x in hit:
                del self.leases[x.lease_id]
                rest = x.gpus - gone
                if rest and not r.HasField("remainder"):
                    self.leases[x.lease_id] = HeldLease(x.lease_id, rest, x.start, x.end, x.source)
            if r.HasField("remainder"):
                kept = _held(r.remainder, source)
                self.leases[kept.lease_id] = kept
            cut = HeldLease(r.lease_id, gone, start, now + max(0.0, r.grace_seconds), source)
            self.leases[cut.lease_id] = cut
        return cut

    def renew(self, lease_id: str) -> HeldLease | None:
        """``RenewLease``: the longer lease replaces ``lease_id`` here; ``None`` when the arbiter
        refuses (other apps wait for GPUs, a drained machine, an unknown lease)."""
        try:
            reply = rpc.AppMasterStub(self._channel()).RenewLease(
                pb.RenewLeaseRequest(lease_id=lease_id),
                metadata=[("x-app-token", self.token)],
                timeout=5,
            )
        except grpc.RpcError as exc:
            log.info("agent %s: renewal of %s refused: %s", self.app_id, lease_id,
                     exc.code() if hasattr(exc, "code") else exc)  # fmt: skip
            return None
        with self._lock:
            old = self.leases.pop(lease_id, None)
            new = _held(reply.lease, old.source if old else "auction")
            self.leases[new.lease_id] = new
            self.history.append(new)
        return new

    def rho_now(self) -> float:
        held = self.held()
        if not held:
            return self._rho_waiting()
        return self.estimator(held, placement_of(self._cluster(held), held))

    def _rho_waiting(self) -> float:
        """ρ_old while holding nothing: the estimator's ``rho_waiting`` for one more lease
        (:class:`SchedulerEstimator`), else ∞ (an estimator without it: the auction's
        lexicographic rule then applies)."""
        waiting = getattr(self.estimator, "rho_waiting", None)
        return waiting(self.lease_seconds) if waiting is not None else math.inf

    def _cluster(self, extra: frozenset[str]) -> Cluster:
        """The topology the Agent has seen in offers. A GPU it never saw offered (a leftover
        grant) is placed on its own machine and rack: the pessimistic reading."""
        gpus = tuple(
            self.topology.get(g) or GPU(g, f"?{g}", f"?{g}", f"?{g}")
            for g in sorted(set(self.topology) | set(extra))
        )
        return Cluster("offer", (), gpus)

    def _answer(self, msg: pb.Offer, outbox: queue.Queue) -> None:
        offer, gpus = offer_from_pb(msg)
        for g in gpus:
            self.topology[g.id] = g
        self.last_round = max(self.last_round, offer.round)
        if offer.lease_seconds > 0:
            self.lease_seconds = offer.lease_seconds
        held = self.held()
        offered = offer.gpus - held
        waiting = self._rho_waiting() if not held else math.inf

        def priced(gpus: frozenset[str], placement: Placement) -> float:
            return waiting if not gpus else self.estimator(gpus, placement)

        assert self.app_id is not None  # offers come in a session, opened after register()
        bid = generate_bid(
            self.app_id,
            self._cluster(held),
            offered,
            priced,
            demand_max=self.max_gpu_demand,
            held=held,
        )
        outbox.put(pb.AgentMessage(bid=bid_to_pb(bid, offer.round)))
        self.rounds_bid.append(offer.round)

    def _allocated(self, alloc: pb.Allocation, outbox: queue.Queue) -> None:
        now = time.time()
        self.last_round = max(self.last_round, alloc.round)
        fresh = [_held(x) for x in alloc.leases]
        with self._lock:
            self.leases = {k: v for k, v in self.leases.items() if v.end > now}
            self.leases.update((x.lease_id, x) for x in fresh)
            self.history.extend(fresh)
        if self.on_allocation is not None:
            self.on_allocation(fresh)
        outbox.put(pb.AgentMessage(rho_report=pb.RhoReport(round=alloc.round, rho=self.rho_now())))
