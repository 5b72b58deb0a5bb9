"""Share following: where a running query learns its current resource share (QOOP §2.3).

QOOP's scheduler pushes every job its "1-over-n" fair share whenever it changes (Pseudocode 1,
spec ``qoop-themis.md`` A.1-A.2, T:445-490); the execution engine hands each change to the query
planner, which may switch plans (A.1 steps 1-5). A :class:`ShareSource` is that push channel as
the executor sees it:

* ``begin(query_id)`` when a query starts (an arbiter-backed source registers a query job then),
  ``end(query_id)`` when it finishes (the job is unregistered);
* ``current()`` -> :class:`ShareSnapshot` (``epoch``, ``share``): the epoch changes whenever the
  share does, so the executor compares epochs and calls the planner on every change;
* ``wait_change(after_epoch, timeout)``: block until the epoch differs from ``after_epoch``.

Sources:

* :class:`StaticShare`: a fixed share (the executor's default: no arbiter, no switches).
* :class:`ManualShare`: ``set(share)`` from any thread (tests trigger a change from a stage
  event, deterministically; a CLI or a benchmark can drive it too).
* :class:`ScriptedShare`: a profile of ``(t_seconds, share)`` steps replayed against the clock
  from ``begin()`` (QOOP's micro-benchmarks replay resource profiles the same way, A.7). It needs
  no thread: ``current()`` reads the clock. ``share`` may be a :class:`~qoop_planner.model.Share`
  or a number of vcores.
* :class:`ArbiterShare`: registers the query with the arbiter's QueryShare service over gRPC
  (``RegisterQuery``, token in ``x-app-token`` metadata), follows ``SubscribeShare`` on a
  background thread, and unregisters at ``end()``. A broken stream is re-subscribed with the same
  job and token, backing off 0.1 s doubling to 5 s (:data:`arbiter.retry.STREAM_RECONNECT`, as
  the Agent does); until the first update arrives ``current()`` reports the ``initial`` share.
  Given the addresses of an arbiter HA pair (``a:1,b:2``) it moves to the next one on
  UNAVAILABLE; queries are not journaled, so when the arbiter serving now does not know the job
  (NOT_FOUND after a failover, a restart or an idle expiry) the query is registered again and
  followed under its new job id (:class:`ArbiterShare`).
  Updates are read with :func:`arbiter.wire.share.share_change_from_pb`, the servicer's own
  conversion. The arbiter's epochs are used as they are (strictly increasing per arbiter).
  It is also a :class:`SwitchReporter`: each plan switch is reported (``ReportPlanSwitch``,
  without waiting for the answer) so the arbiter's console lists it beside the share history.

Decisions: the share vector the planner reads is vcores and memory (GPUs are not in QOOP's
vector; spec §0). A share of 0 vcores is passed on as it is; the executor still runs one stage
at a time (HiveServer2 offers no way to hold a query at zero).

**Tagging the query's YARN application** (spec ``yarn-hive-integration.md`` §3.3-3.4; the
arbiter's YARN watcher, ``yarn_bridge/watcher.py``): a query registered with the arbiter is
already one analytics job in QOOP's |J|; the Tez/MapReduce application Hive launches for it must
not be counted a second time. The watcher skips apps tagged ``yarn-arbiter-query:<job_id>``
(:func:`yarn_bridge.rm_events.query_tag`, reused here, not re-implemented). :func:`tag_settings`
gives the session settings that carry that tag, for the source's current registration:

* ``hive.query.tag``: the spec's recipe (§3.4, ``set hive.query.tag=...``); Hive 3/4's
  ``QueryState.setApplicationTag`` copies it into the Tez and MapReduce tags (§3.3);
* ``tez.application.tags`` and ``mapreduce.job.tags``: the two settings that §3.3 names as
  what reaches YARN; set directly too, so a Hive without ``hive.query.tag`` (2.x) passes the
  tag through (Hive 3/4 rewrite them from ``hive.query.tag``, which carries the same tag).

YARN tags are comma-separated sets: a value the user already set for one of these keys
(``--hiveconf``) is kept and the tag appended. Only :class:`ArbiterShare` has a registration;
every other source yields no settings. The Spark Thrift Server used as the local engine accepts
and echoes these keys (``SET k``) but runs every query in its own single application, so there
the tag is only observable as a session setting.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import grpc

from arbiter.agent import FAST_FAILOVERS, REGISTER_FAILOVER_S, arbiter_addresses
from arbiter.channels import CLIENT_KEEPALIVE_S, arbiter_channel
from arbiter.retry import STREAM_RECONNECT, Retry
from arbiter.shares import ShareChange
from arbiter.wire.share import share_change_from_pb
from hive_hooks.errors import ShareSourceError
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from qoop_planner.model import Share
from yarn_bridge.rm_events import query_tag

__all__ = [
    "DEFAULT_SHARE",
    "TAG_KEYS",
    "ArbiterShare",
    "ManualShare",
    "ScriptedShare",
    "ShareEnforcer",
    "ShareSnapshot",
    "ShareSource",
    "StaticShare",
    "SwitchReporter",
    "as_share",
    "tag_settings",
]

log = logging.getLogger("qoop_hive.share")

DEFAULT_SHARE = Share(vcores=4.0, memory_mb=8192.0)


#: Session settings that carry the query's YARN application tag (module docstring).
TAG_KEYS = ("hive.query.tag", "tez.application.tags", "mapreduce.job.tags")


def tag_settings(source: object, user: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings that tag the YARN application of the query ``source`` is registered as
    (empty if it is not registered with an arbiter). A value in ``user`` for one of the keys is
    kept, the tag appended (YARN tags are comma-separated).

    >>> s = ArbiterShare("localhost:1")
    >>> tag_settings(s)
    {}
    >>> s.job_id = "query-00ab"
    >>> tag_settings(s, {"mapreduce.job.tags": "etl"})["mapreduce.job.tags"]
    'etl,yarn-arbiter-query:query-00ab'

    A wrapper that keeps its source in ``inner`` (``qoop-hive``'s reporting wrapper) is seen
    through:

    >>> class Wrapper:
    ...     inner = s
    >>> tag_settings(Wrapper())["hive.query.tag"]
    'yarn-arbiter-query:query-00ab'
    """
    while not isinstance(source, ArbiterShare) and hasattr(source, "inner"):
        source = source.inner
    job_id = getattr(source, "job_id", None) if isinstance(source, ArbiterShare) else None
    if not job_id:
        return {}
    tag = query_tag(job_id)
    user = user or {}
    out = {}
    for key in TAG_KEYS:
        mine = [t for t in str(user.get(key, "")).split(",") if t.strip()]
        out[key] = ",".join([*mine, tag] if tag not in mine else mine)
    return out


def as_share(value: Share | float | int) -> Share:
    """A :class:`Share` from a Share or a number of vcores (memory: 2 GiB per vcore)."""
    if isinstance(value, Share):
        return value
    v = float(value)
    return Share(vcores=v, memory_mb=2048.0 * v)


@dataclass(frozen=True)
class ShareSnapshot:
    """The share in force and its epoch (changes with every share change)."""

    epoch: int
    share: Share
    cause: str = ""
    active_jobs: int | None = None


@runtime_checkable
class ShareSource(Protocol):
    """Current share + change notifications (module docstring)."""

    def begin(self, query_id: str) -> None: ...

    def current(self) -> ShareSnapshot: ...

    def wait_change(self, after_epoch: int, timeout: float) -> ShareSnapshot: ...

    def end(self, query_id: str) -> None: ...


@runtime_checkable
class SwitchReporter(Protocol):
    """A share source that reports each plan switch back to whoever set the share (QOOP
    Pseudocode 2's switch, for the arbiter's console); must not block the caller, the
    executor's decision cycle."""

    def report_switch(
        self,
        at_s: float,
        from_plan: str,
        to_plan: str,
        share: Share,
        cancelled: Sequence[str],
        reused: Sequence[str],
    ) -> None: ...


@runtime_checkable
class ShareEnforcer(Protocol):
    """Turns the shares of the queries an engine serves into its resources (QOOP §2.3: the
    share is what the query *gets*, not only what its planner assumes). The executor calls
    :meth:`apply_share` when a run starts and on every share change, :meth:`release_share` when
    the run ends, and gives every connection of the run :meth:`session_settings` (back to
    :meth:`session_defaults` afterwards). Implemented by
    :class:`hive_hooks.yarn_engine.EngineControl` (executors in YARN containers)."""

    def apply_share(self, query_id: str, share: Share) -> None: ...

    def release_share(self, query_id: str) -> None: ...

    def session_settings(self, query_id: str) -> dict[str, str]: ...

    def session_defaults(self) -> dict[str, str]: ...


class _Feed:
    """A snapshot guarded by a condition variable: what push-driven sources share."""

    def __init__(self, initial: ShareSnapshot) -> None:
        self._cond = threading.Condition()
        self._snap = initial
        self.history: list[tuple[float, ShareSnapshot]] = [(time.monotonic(), initial)]

    def _publish(self, snap: ShareSnapshot) -> None:
        with self._cond:
            self._snap = snap
            self.history.append((time.monotonic(), snap))
            self._cond.notify_all()

    def current(self) -> ShareSnapshot:
        with self._cond:
            return self._snap

    def wait_change(self, after_epoch: int, timeout: float) -> ShareSnapshot:
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._snap.epoch == after_epoch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._snap


class StaticShare(_Feed):
    """A share that never changes."""

    def __init__(self, share: Share | float = DEFAULT_SHARE) -> None:
        super().__init__(ShareSnapshot(0, as_share(share), "static"))

    def begin(self, query_id: str) -> None:
        pass

    def end(self, query_id: str) -> None:
        pass


class ManualShare(_Feed):
    """A share changed by calling :meth:`set` (thread-safe)."""

    def __init__(self, share: Share | float = DEFAULT_SHARE) -> None:
        super().__init__(ShareSnapshot(0, as_share(share), "initial"))

    def set(self, share: Share | float, cause: str = "manual") -> ShareSnapshot:
        with self._cond:
            snap = ShareSnapshot(self._snap.epoch + 1, as_share(share), cause)
            self._publish(snap)
            return snap

    def begin(self, query_id: str) -> None:
        pass

    def end(self, query_id: str) -> None:
        pass


class ScriptedShare:
    """A profile of ``(t_seconds, share)`` steps replayed from :meth:`begin` (module docstring).

    Step ``i`` is in force from ``t_i`` (seconds after ``begin``) to ``t_{i+1}``; the epoch is
    ``i``. The first step must start at 0. Before ``begin`` the clock runs from construction.

    >>> clock = iter([0.0, 0.5, 1.5, 3.0]).__next__
    >>> s = ScriptedShare([(0, 8), (1.0, 2), (2.0, 4)], clock=clock)
    >>> snaps = [s.current() for _ in range(3)]
    >>> [(x.epoch, x.share.vcores) for x in snaps]
    [(0, 8.0), (1, 2.0), (2, 4.0)]
    """

    def __init__(
        self,
        profile: Sequence[tuple[float, Share | float]],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        restart_on_begin: bool = True,
    ) -> None:
        if not profile:
            raise ValueError("profile needs at least one (t_seconds, share) step")
        steps = [(float(t), as_share(s)) for t, s in profile]
        if steps[0][0] != 0.0:
            raise ValueError(f"the first step must start at t=0, got {steps[0][0]}")
        for (t0, _), (t1, _) in itertools.pairwise(steps):
            if not t1 > t0:
                raise ValueError(f"step times must increase strictly: {t0} then {t1}")
        self.steps: tuple[tuple[float, Share], ...] = tuple(steps)
        self.clock = clock
        self.sleep = sleep
        self.restart_on_begin = restart_on_begin
        self._t0 = clock()

    def begin(self, query_id: str) -> None:
        if self.restart_on_begin:
            self._t0 = self.clock()

    def end(self, query_id: str) -> None:
        pass

    def elapsed(self) -> float:
        return self.clock() - self._t0

    def _index(self, elapsed: float) -> int:
        i = 0
        for j, (t, _) in enumerate(self.steps):
            if t <= elapsed:
                i = j
            else:
                break
        return i

    def current(self) -> ShareSnapshot:
        i = self._index(self.elapsed())
        return ShareSnapshot(i, self.steps[i][1], "scripted")

    def wait_change(self, after_epoch: int, timeout: float) -> ShareSnapshot:
        deadline = self.clock() + max(0.0, timeout)
        while True:
            snap = self.current()
            if snap.epoch != after_epoch:
                return snap
            now = self.clock()
            i = snap.epoch + 1
            nxt = self.steps[i][0] + self._t0 if i < len(self.steps) else None
            wake = deadline if nxt is None else min(deadline, nxt)
            if now >= deadline:
                return snap
            self.sleep(max(0.0, wake - now) + 1e-3)


def _snapshot(change: ShareChange) -> ShareSnapshot:
    """The snapshot an arbiter's share change gives the planner: vcores and memory (never
    negative), the cause as a snake-case word (``job_arrived``)."""
    return ShareSnapshot(
        epoch=change.epoch,
        share=Share(
            vcores=max(0.0, change.fair_share.vcores),
            memory_mb=max(0.0, change.fair_share.memory_mb),
        ),
        cause=change.cause.value.replace("-", "_"),
        active_jobs=change.active_jobs,
    )


class ArbiterShare(_Feed):
    """The arbiter's share stream for one query job at a time (module docstring).

    ``target`` is ``host:port`` of the arbiter's gRPC server, or a comma-separated list of the
    addresses of an active/standby pair (:mod:`arbiter.ha`; parsed by
    :func:`arbiter.agent.arbiter_addresses`, as the Agent's): on UNAVAILABLE (a standby, an
    arbiter gone) it moves to the next one. ``credentials`` are TLS channel credentials
    (``None``: insecure channel). ``first_update_timeout`` bounds how long :meth:`begin` waits
    for the first update (the arbiter sends one on subscription).

    **Failover and restarts.** Registered queries are not journaled (module docstring), so an
    arbiter that took over or restarted does not know the job: its ``SubscribeShare`` answers
    NOT_FOUND (or PERMISSION_DENIED if the id is now another query's). A job that was followed
    is then registered again, with the same name, user and queue: ``job_id`` and the token
    change (logged once at INFO), the stream is re-subscribed, and the published epochs keep
    increasing across the arbiters (the new arbiter's own epochs may start lower). An arbiter
    gone with its connection up (frozen, its host dead) leaves the stream quiet: the
    connection's keepalive pings (:mod:`arbiter.channels`) go unanswered, the stream ends
    UNAVAILABLE and the source moves on as above.
    """

    def __init__(
        self,
        target: str,
        *,
        user: str = "",
        queue_name: str = "default",
        credentials: grpc.ChannelCredentials | None = None,
        initial: Share | float = DEFAULT_SHARE,
        first_update_timeout: float = 10.0,
        rpc_timeout: float = 10.0,
    ) -> None:
        super().__init__(ShareSnapshot(0, as_share(initial), "initial"))
        self.targets = arbiter_addresses(target)
        self._which = 0
        self.user = user
        self.queue_name = queue_name
        self.credentials = credentials
        self.first_update_timeout = first_update_timeout
        self.rpc_timeout = rpc_timeout
        self.job_id: str | None = None
        self._token: str | None = None
        self._query_name = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()  # job_id, token and channel change together
        self._thread: threading.Thread | None = None
        self._stream: grpc.Future | None = None
        self._channel: grpc.Channel | None = None
        self._epoch_offset = 0  # added to the arbiter's epochs (see _rebase)
        self._rebase = False  # the next update comes from a new registration
        self.updates = 0
        self.switches_reported = 0  # ReportPlanSwitch calls the arbiter accepted
        self.reregistrations = 0  # jobs registered again after a failover or restart
        self.failovers = 0  # moves to the next arbiter address
        # pings on its connection (arbiter.channels): every keepalive_s, answered within
        # keepalive_timeout_s (None: as long again)
        self.keepalive_s = CLIENT_KEEPALIVE_S
        self.keepalive_timeout_s: float | None = None

    @property
    def target(self) -> str:
        """The arbiter address the source talks to now."""
        return self.targets[self._which]

    def _open_channel(self) -> grpc.Channel:
        # a connection of its own, with keepalive pings: a share stream carries nothing
        # between changes, and only an unanswered ping tells it that its arbiter is gone
        return arbiter_channel(
            self.target, self.credentials, self.keepalive_s, self.keepalive_timeout_s
        )

    def _failover(self, code: grpc.StatusCode | None) -> bool:
        """After an error ``code``: move to the next address (new channel) if this one cannot
        serve (UNAVAILABLE) and there is another; whether it did. Called under ``_lock``."""
        if code != grpc.StatusCode.UNAVAILABLE or len(self.targets) < 2:
            return False
        was = self.target
        self._which = (self._which + 1) % len(self.targets)
        self.failovers += 1
        old, self._channel = self._channel, self._open_channel()
        if old is not None:
            old.close()
        log.info("share source: arbiter %s unavailable, trying %s", was, self.target)
        return True

    def _register(self, deadline: float) -> tuple[str, str]:
        """RegisterQuery at the current address, moving on while the addresses answer
        UNAVAILABLE, until ``deadline``. Called under ``_lock`` with a channel open."""
        while True:
            try:
                reply = rpc.QueryShareStub(self._channel).RegisterQuery(
                    pb.RegisterQueryRequest(
                        query_name=self._query_name, user=self.user, queue=self.queue_name
                    ),
                    timeout=self.rpc_timeout,
                )
                return reply.job_id, reply.job_token
            except grpc.RpcError as e:
                if time.monotonic() > deadline or self._stop.is_set():
                    raise
                if not self._failover(e.code()):
                    raise
                time.sleep(0.05)

    def begin(self, query_id: str) -> None:
        if self.job_id is not None:
            raise ShareSourceError(f"ArbiterShare already follows query job {self.job_id}")
        self._query_name = query_id[:1024]
        self._stop.clear()
        with self._lock:
            self._channel = self._open_channel()
            try:
                self.job_id, self._token = self._register(time.monotonic() + REGISTER_FAILOVER_S)
            except grpc.RpcError as e:
                self._close_channel()
                raise ShareSourceError(
                    f"arbiter {self.target}: RegisterQuery failed: {e.code().name}: {e.details()}"
                ) from e
        start_epoch = self.current().epoch
        self._thread = threading.Thread(
            target=self._follow, name=f"share-{self.job_id}", daemon=True
        )
        self._thread.start()
        snap = self.wait_change(start_epoch, self.first_update_timeout)
        if snap.epoch == start_epoch:
            self.end(query_id)
            raise ShareSourceError(
                f"arbiter {self.target}: no share update within {self.first_update_timeout:.0f} s"
            )

    def _reregister(self) -> bool:
        """Register the query again (its job is unknown to the arbiter now serving); whether
        it is. ``job_id`` and the token change; the next update rebases the epochs."""
        with self._lock:
            if self._stop.is_set() or self._channel is None:
                return False
            was = self.job_id
            try:
                job_id, token = self._register(time.monotonic() + REGISTER_FAILOVER_S)
            except grpc.RpcError as e:
                log.error("query %s: registering again at %s failed: %s: %s",
                          was, self.target, e.code().name, e.details())  # fmt: skip
                return False
            self.job_id, self._token = job_id, token
            self._rebase = True
            self.reregistrations += 1
        log.info("query %s is unknown to the arbiter at %s (failover or restart): registered "
                 "again as %s", was, self.target, job_id)  # fmt: skip
        return True

    def _publish_update(self, change: ShareChange) -> None:
        snap = _snapshot(change)
        if self._rebase:  # the first update of a new registration: keep the epochs increasing
            self._rebase = False
            self._epoch_offset = max(0, self.current().epoch + 1 - snap.epoch)
        if self._epoch_offset:
            snap = dataclasses.replace(snap, epoch=snap.epoch + self._epoch_offset)
        self._publish(snap)

    def _follow(self) -> None:
        retry = Retry(STREAM_RECONNECT, stop=self._stop)
        # the current registration was followed (an update came) or the source moved to
        # another arbiter since: a NOT_FOUND then means the job was lost, not refused
        followed = False
        fast = 0  # failovers in a row without an update (retried at once, as the Agent does)
        for _ in retry:
            with self._lock:
                channel, job_id, token = self._channel, self.job_id, self._token
            if channel is None or self._stop.is_set():
                return
            try:
                stream = rpc.QueryShareStub(channel).SubscribeShare(
                    pb.SubscribeShareRequest(job_id=job_id), metadata=[("x-app-token", token or "")]
                )
            except ValueError:  # the channel was closed under us (end(), or a failover)
                continue
            self._stream = stream
            try:
                for u in stream:
                    retry.reset()
                    followed, fast = True, 0
                    self.updates += 1
                    try:
                        change = share_change_from_pb(u)
                    except ValueError as e:  # a malformed update: keep the share, keep following
                        log.warning("share update of %s ignored: %s", job_id, e)
                        continue
                    self._publish_update(change)
                if self._stop.is_set():
                    return
                log.info("share stream of %s ended; re-subscribing", job_id)
            except grpc.RpcError as e:
                code = e.code()
                if self._stop.is_set() or code == grpc.StatusCode.CANCELLED:
                    return
                if (
                    code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED)
                    and followed
                ):
                    # the arbiter serving now does not know the job (a failover, a restart,
                    # or an idle expiry): join |J| again and follow the new job
                    if not self._reregister():
                        return
                    followed = False
                    retry.reset()
                    continue
                if code in (
                    grpc.StatusCode.UNAUTHENTICATED,
                    grpc.StatusCode.PERMISSION_DENIED,
                    grpc.StatusCode.NOT_FOUND,
                ):
                    log.error("share stream of %s refused: %s", job_id, e.details())
                    return
                log.info("share stream of %s broke (%s); re-subscribing", job_id, code)
                with self._lock:
                    moved = self._failover(code)
                followed = followed or moved
                if moved and fast < FAST_FAILOVERS:
                    fast += 1
                    retry.reset()  # the next address soon: it may be the new active

    def report_switch(
        self,
        at_s: float,
        from_plan: str,
        to_plan: str,
        share: Share,
        cancelled: Sequence[str],
        reused: Sequence[str],
    ) -> None:
        """``ReportPlanSwitch`` for the registered job, fire and forget: a refusal or an
        unreachable arbiter is logged, never raised (the query goes on)."""
        with self._lock:
            channel, job_id, token = self._channel, self.job_id, self._token
        if channel is None or job_id is None:
            return
        request = pb.PlanSwitchReport(
            job_id=job_id,
            at_s=at_s,
            from_plan=from_plan,
            to_plan=to_plan,
            share=pb.ResourceVector(vcores=share.vcores, memory_mb=share.memory_mb),
            cancelled_stages=list(cancelled),
            reused_stages=list(reused),
        )
        try:
            call = rpc.QueryShareStub(channel).ReportPlanSwitch.future(
                request, metadata=[("x-app-token", token or "")], timeout=self.rpc_timeout
            )
        except ValueError:  # the channel was closed under us (the query ended)
            return

        def done(f: grpc.Future) -> None:
            err = f.exception()
            if err is None:
                self.switches_reported += 1
            elif isinstance(err, grpc.RpcError):
                log.warning("plan switch of %s not reported: %s", job_id, err.code().name)

        call.add_done_callback(done)

    def _close_channel(self) -> None:
        ch, self._channel = self._channel, None
        if ch is not None:
            ch.close()

    def end(self, query_id: str) -> None:
        if self.job_id is None:
            return
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.cancel()
        with self._lock:  # after a re-registration in flight (it checks _stop first)
            channel, job_id, token = self._channel, self.job_id, self._token
        if channel is not None:
            try:
                rpc.QueryShareStub(channel).UnregisterQuery(
                    pb.UnregisterQueryRequest(job_id=job_id),
                    metadata=[("x-app-token", token or "")],
                    timeout=self.rpc_timeout,
                )
            except grpc.RpcError as e:  # the arbiter restarted or already dropped the job
                log.info("UnregisterQuery %s: %s", job_id, e.code())
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None
        self._stream = None
        with self._lock:
            self._close_channel()
            self.job_id = None
            self._token = None
