"""What a running arbiter tells its operator: Prometheus metrics, health, and recent history.

A Hadoop operator watches the ResourceManager through its metrics servlet and its web UI; the
arbiter beside it offers the same kind of window (:mod:`arbiter.metrics` serves it over HTTP).
:class:`Telemetry` is everything that window reads, kept beside the core without changing it:

* **metrics** in one ``prometheus_client`` registry per arbiter, named after Prometheus's
  conventions (``yarn_arbiter_`` prefix, base units, ``_total`` on counters): gauges read from
  one :meth:`ArbiterCore.snapshot` at scrape time (GPUs by state, leases by source, apps,
  query jobs, QOOP's |J|), counters (rounds, share changes, gRPC calls and refusals) and four
  histograms: the auction's decision time (Themis §4.3's decision cycle), gRPC latency by
  method (unary calls; a stream's lifetime is not a latency), the journal's commit time, and
  the ResourceManager poll time by outcome. Every label set is bounded: methods are the
  proto's, codes gRPC's, states and sources fixed lists; nothing is labelled by app or user;
* **health**, truthfully: the process is healthy while its scheduling loop ticks (a loop
  that has started but not finished its first tick counts as ticking for ``stall_seconds``
  after its start) and its journal commits (a commit that raised makes it unhealthy until one
  succeeds again; so does the core's own ``journal_error``, set while it refuses changes); it
  is *ready* when, in addition, the loop has finished a tick and every attachment that
  reports readiness (the YARN bridge: the RM answered recently) says so. ``/healthz``
  answers the first, ``/readyz`` the second, so an RM failover makes the arbiter unready,
  never restarted by a liveness probe;
* **history** (:mod:`arbiter.history`): each decided auction (from the decider, which sees the
  bids and the outcome), ρ_current per app and QOOP's share, sampled by the scheduler thread.

The hooks are wrappers around the parts :class:`arbiter.server.RunningArbiter` already hands
the core: :meth:`Telemetry.decider` wraps the decider, :class:`TimedJournal` the journal,
:meth:`Telemetry.interceptor` is one more gRPC server interceptor.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc
from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics
from prometheus_client import Counter as PromCounter
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from arbiter.auction import Bid
from arbiter.decider import Decider
from arbiter.history import History, PlanSwitchRecord, ShareSample, auction_record
from arbiter.journal import AppRecord, Journal, Recovered
from arbiter.policies.base import Decision, Policy, Snapshot
from arbiter.rounds import ArbiterState
from arbiter.shares import fair_share

if TYPE_CHECKING:
    from arbiter.core import ArbiterCore

__all__ = ["Health", "StatusSource", "Telemetry", "TimedJournal"]

log = logging.getLogger("yarn_arbiter.telemetry")

# No ``*_created`` series beside every counter and histogram: Prometheus does not need them and
# they double the page (process-wide; the arbiter is the only exporter in its process).
disable_created_metrics()

# Buckets in seconds: auctions take milliseconds to the time budget (seconds); RPCs and commits
# milliseconds; RM polls tens of milliseconds to the client's deadline (10 s).
_AUCTION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_POLL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# A status source: an attachment's view for the console and its readiness (see Telemetry).
StatusSource = Callable[[], Mapping[str, Any]]


@dataclass(frozen=True)
class Health:
    """What ``/healthz`` (``healthy``) and ``/readyz`` (``ready``) answer, with the checks."""

    healthy: bool
    ready: bool
    checks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "ready": self.ready, "checks": dict(self.checks)}


class TimedJournal:
    """A :class:`~arbiter.journal.Journal` whose writes are timed and whose failures are
    remembered: ``ok`` is False from a write that raised until one succeeds."""

    def __init__(self, inner: Journal, observe_commit: Callable[[float], None]) -> None:
        self.inner = inner
        self._observe = observe_commit
        self.ok = True
        self.last_error: str | None = None
        self.last_commit_at: float | None = None
        self.commits = 0

    def _write(self, fn: Callable[..., None], *args: Any, timed: bool = False) -> None:
        start = time.perf_counter()
        try:
            fn(*args)
        except Exception as exc:
            self.ok, self.last_error = False, f"{type(exc).__name__}: {exc}"
            raise
        if timed:
            self._observe(time.perf_counter() - start)
            self.commits += 1
            self.last_commit_at = time.time()
        self.ok = True

    def load(self, gpus: frozenset[str], *, trim_unknown: bool = False) -> Recovered:
        return self.inner.load(gpus, trim_unknown=trim_unknown)

    def put_app(self, app: AppRecord) -> None:
        self._write(self.inner.put_app, app)

    def remove_app(self, app_id: str) -> None:
        self._write(self.inner.remove_app, app_id)

    def commit_round(
        self,
        state: ArbiterState,
        bids: Iterable[Bid] = (),
        *,
        drained: Iterable[str] | None = None,
    ) -> None:
        self._write(lambda: self.inner.commit_round(state, bids, drained=drained), timed=True)

    def put_knob(self, key: str, value: str) -> None:
        self._write(self.inner.put_knob, key, value)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # anything else the journal offers
        return getattr(self.inner, name)


class _Collector:
    """Gauges and counters computed from one snapshot of the core at scrape time."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.t = telemetry

    def describe(self) -> list[Metric]:
        return []  # not known before a core is bound; collected at scrape time

    def collect(self) -> Iterator[Metric]:
        core = self.t.core
        if core is None:
            return
        snap = core.snapshot()  # one consistent view, taken under the core's lock
        now, cluster = snap.now, snap.cluster
        leases = [lease for lease in snap.leases if lease.live_at(now)]
        leased = {g for lease in leases for g in lease.gpus}
        drained = {g.id for g in cluster.gpus if g.machine in snap.drained} - leased
        by_source = Counter(lease.source.value for lease in leases)
        connected = len(set(snap.apps) & set(snap.connected))
        info = InfoMetricFamily("yarn_arbiter", "The arbiter's policy and cluster.")
        info.add_metric([], {"policy": str(core.config["arbiter.policy"]), "cluster": cluster.name})
        yield info
        yield GaugeMetricFamily(
            "yarn_arbiter_cluster_gpus", "GPUs in the cluster.", value=len(cluster.gpus)
        )
        yield GaugeMetricFamily(
            "yarn_arbiter_cluster_machines", "Machines in the cluster.", value=len(cluster.machines)
        )
        g = GaugeMetricFamily(
            "yarn_arbiter_gpus",
            "GPUs by state: free (offerable), leased (in a live lease), drained (on a drained "
            "machine and not leased).",
            labels=["state"],
        )
        g.add_metric(["free"], len(snap.free))
        g.add_metric(["leased"], len(leased))
        g.add_metric(["drained"], len(drained))
        yield g
        g = GaugeMetricFamily("yarn_arbiter_leases", "Live leases by source.", labels=["source"])
        for s in ("auction", "leftover", "policy"):
            g.add_metric([s], by_source.get(s, 0))
        yield g
        g = GaugeMetricFamily(
            "yarn_arbiter_apps",
            "Registered ML apps, by whether their Agent's session is open.",
            labels=["connected"],
        )
        g.add_metric(["true"], connected)
        g.add_metric(["false"], len(snap.apps) - connected)
        yield g
        yield GaugeMetricFamily(
            "yarn_arbiter_query_jobs", "Registered Hive query jobs.", value=snap.queries
        )
        yield GaugeMetricFamily(
            "yarn_arbiter_share_subscribers", "Open share streams.", value=snap.subscribers
        )
        yield GaugeMetricFamily(
            "yarn_arbiter_analytics_jobs",
            "QOOP's |J|: registered queries plus other analytics apps seen on YARN.",
            value=snap.queries + snap.external_jobs,
        )
        yield CounterMetricFamily(
            "yarn_arbiter_rounds", "Scheduling rounds run so far.", value=snap.round
        )
        yield CounterMetricFamily(
            "yarn_arbiter_share_changes", "Share changes pushed so far.", value=snap.epoch
        )
        c = CounterMetricFamily(
            "yarn_arbiter_rpc_calls", "gRPC calls received, by method.", labels=["method"]
        )
        for method, n in sorted(core.rpc_calls.copy().items()):
            c.add_metric([method], n)
        yield c
        c = CounterMetricFamily(
            "yarn_arbiter_rpc_refused",
            "gRPC calls refused, by status code (bad input, credentials, unknown ids).",
            labels=["code"],
        )
        for code, n in sorted(core.rpc_refused.copy().items()):
            c.add_metric([code], n)
        yield c
        health = self.t.health()
        yield GaugeMetricFamily(
            "yarn_arbiter_healthy", "1 while /healthz answers 200.", value=int(health.healthy)
        )
        yield GaugeMetricFamily(
            "yarn_arbiter_ready", "1 while /readyz answers 200.", value=int(health.ready)
        )
        yield GaugeMetricFamily(
            "yarn_arbiter_journal_healthy",
            "1 while the journal's last write succeeded.",
            value=int(bool(health.checks.get("journal", {}).get("ok", True))),
        )


class _TimeRpcs(grpc.aio.ServerInterceptor):
    """Times every unary call into the RPC histogram, labelled by method (the proto's)."""

    def __init__(self, observe: Callable[[str, float], None]) -> None:
        self._observe = observe

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        inner, observe = handler.unary_unary, self._observe

        async def timed(request, context):
            start = time.perf_counter()
            try:
                return await inner(request, context)
            finally:
                observe(method, time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            timed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class Telemetry:
    """Metrics, health and history of one running arbiter (module docstring).

    Make it, wrap the journal and decider with it, make the core, then :meth:`bind` the core.
    ``stall_seconds``: the scheduling loop counts as stuck (unhealthy) when its last tick is
    older than this; ``sample_seconds``: how often ρ and the share are sampled for history.
    """

    def __init__(
        self,
        *,
        history: History | None = None,
        stall_seconds: float = 60.0,
        sample_seconds: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.history = history if history is not None else History()
        self.stall_seconds = stall_seconds
        self.sample_seconds = sample_seconds
        self.clock = clock
        self.core: ArbiterCore | None = None
        self.journal: TimedJournal | None = None
        self.started_at = time.time()
        self.loop_started: float | None = None  # time.monotonic() when the loop started
        self.last_tick: float | None = None  # time.monotonic() of the last finished tick
        self._last_sample = -math.inf
        self._sources: dict[str, StatusSource] = {}
        self._lock = threading.Lock()
        self.auction_seconds = Histogram(
            "yarn_arbiter_auction_duration_seconds",
            "Time to decide a closed Themis round (the auction and its payments).",
            buckets=_AUCTION_BUCKETS,
            registry=self.registry,
        )
        self.rpc_seconds = Histogram(
            "yarn_arbiter_rpc_duration_seconds",
            "gRPC unary call latency, by method.",
            ["method"],
            buckets=_FAST_BUCKETS,
            registry=self.registry,
        )
        self.commit_seconds = Histogram(
            "yarn_arbiter_journal_commit_duration_seconds",
            "Time to commit a round's leases to the journal (SQLite, WAL).",
            buckets=_FAST_BUCKETS,
            registry=self.registry,
        )
        self.rm_poll_seconds = Histogram(
            "yarn_arbiter_rm_poll_duration_seconds",
            "Time of one ResourceManager poll by the YARN bridge, by outcome (ok, failed).",
            ["outcome"],
            buckets=_POLL_BUCKETS,
            registry=self.registry,
        )
        self.plan_switches = PromCounter(
            "yarn_arbiter_plan_switches_total",
            "Plan switches registered queries reported (QOOP's replanner).",
            registry=self.registry,
        )
        self.registry.register(_Collector(self))

    # ------------------------------------------------------------------ wiring

    def wrap_journal(self, journal: Journal) -> TimedJournal:
        self.journal = TimedJournal(journal, self.commit_seconds.observe)
        return self.journal

    def decider(self, inner: Decider) -> Decider:
        """``inner``, timed, with each decided auction kept in the history."""

        def decide(policy: Policy, snapshot: Snapshot) -> Decision:
            start = time.perf_counter()
            decision = inner(policy, snapshot)
            seconds = time.perf_counter() - start
            self.auction_seconds.observe(seconds)
            if decision.outcome is not None:
                try:
                    record = auction_record(
                        decision.outcome, snapshot.bids, at=snapshot.now, solve_seconds=seconds
                    )
                    self.history.add_auction(record)
                except Exception:  # the history must never cost a round
                    log.exception("could not record round %d", decision.outcome.round)
            return decision

        return decide

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        return _TimeRpcs(lambda method, s: self.rpc_seconds.labels(method).observe(s))

    def observe_rm_poll(self, seconds: float, ok: bool) -> None:
        self.rm_poll_seconds.labels("ok" if ok else "failed").observe(seconds)

    def bind(self, core: ArbiterCore) -> None:
        self.core = core
        core.plan_switch_listeners.append(self._plan_switched)

    def _plan_switched(self, record: PlanSwitchRecord) -> None:
        self.history.add_plan_switch(record)
        self.plan_switches.inc()

    def add_source(self, name: str, source: StatusSource) -> None:
        """An attachment's status: a JSON-able mapping for the console; its ``ready`` key
        (if any) counts in readiness, its ``detail`` says why."""
        with self._lock:
            self._sources[name] = source

    def remove_source(self, name: str) -> None:
        with self._lock:
            self._sources.pop(name, None)

    def sources(self) -> dict[str, Mapping[str, Any]]:
        with self._lock:
            items = list(self._sources.items())
        out: dict[str, Mapping[str, Any]] = {}
        for name, source in items:
            try:
                out[name] = source()
            except Exception as exc:  # a broken source is unready, not a crash
                out[name] = {"ready": False, "detail": f"status failed: {exc}"}
        return out

    # ------------------------------------------------------------------ the scheduler thread

    def loop_starting(self) -> None:
        """Called as the scheduling loop starts: from here it has ``stall_seconds`` to tick."""
        self.loop_started = time.monotonic()

    def ticked(self) -> None:
        """Called by the scheduling loop after each tick: liveness, and history sampling."""
        self.last_tick = time.monotonic()
        if self.last_tick - self._last_sample >= self.sample_seconds:
            self._last_sample = self.last_tick
            try:
                self.sample()
            except Exception:  # sampling must never stop scheduling
                log.exception("history sampling failed")

    def sample(self) -> None:
        """Record every app's ρ_current and, when its epoch moved, QOOP's share."""
        core = self.core
        if core is None:
            return
        snap = core.snapshot()
        held = core.holdings(snap.now)
        none: frozenset[str] = frozenset()
        rows = [
            (a, core.rho_current(a, snap.now, held.get(a, none)), len(held.get(a, none)))
            for a in snap.apps
        ]
        self.history.add_rho(snap.now, rows)
        n = snap.queries + snap.external_jobs
        share = fair_share(core.capacity(), n)
        self.history.add_share(ShareSample(snap.now, snap.epoch, n, share.vcores, share.memory_mb))

    # ------------------------------------------------------------------ health

    def health(self) -> Health:
        checks: dict[str, dict[str, Any]] = {}
        since = self.last_tick if self.last_tick is not None else self.loop_started
        if since is None:
            ticking, detail = False, "not started"
        else:
            age = time.monotonic() - since
            ticking = age <= self.stall_seconds
            detail = (
                f"last tick {age:.1f} s ago"
                if self.last_tick is not None
                else f"starting: no tick yet, {age:.1f} s after the loop started"
            ) + ("" if ticking else f" (stuck: more than {self.stall_seconds:g} s)")
        checks["scheduler"] = {"ok": ticking, "detail": detail}
        journal_ok, detail = True, "no write yet"
        if self.journal is not None:
            journal_ok = self.journal.ok
            detail = (
                f"last write failed: {self.journal.last_error}"
                if not journal_ok
                else f"{self.journal.commits} round commits"
            )
        # The core's own verdict: it keeps why the journal last failed to commit, and refuses
        # changes (UNAVAILABLE) until a commit succeeds again.
        error = getattr(self.core, "journal_error", None) if self.core is not None else None
        if error is not None:
            journal_ok, detail = False, f"the journal cannot commit: {error}"
        checks["journal"] = {"ok": journal_ok, "detail": detail}
        healthy = ticking and journal_ok
        ready = healthy
        if self.last_tick is None:  # live while it starts, ready once the core has run
            checks["first-tick"] = {"ok": False, "detail": "the scheduling loop has not ticked"}
            ready = False
        for name, status in self.sources().items():
            if "ready" in status:
                ok = bool(status["ready"])
                checks[name] = {"ok": ok, "detail": str(status.get("detail", ""))}
                ready = ready and ok
        return Health(healthy, ready, checks)
