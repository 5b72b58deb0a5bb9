"""The YARN watcher: what the ResourceManager shows, turned into events for the arbiter.

Spec: ``../shared/spec/yarn-hive-integration.md`` §1.1 (endpoints), §1.2 (nodes, ``yarn.io/gpu``
in ``totalResource``), §1.3 (scheduler queues, fair shares), §1.4 (apps, tags, GPU use in
``resourceInfo``), §0.1 (everything the arbiter reads is on the RM REST API).

A functional core and a thin shell (``ARCHITECTURE.md`` principle 1):

* **Core** (pure, no I/O, no clock): :func:`app_view` / :func:`node_view` classify what the
  typed client (:mod:`yarn_bridge.rm`) parsed; :func:`diff` takes the last *confirmed* view of
  the RM (:class:`RMView`) and one poll's :class:`Observation` and returns the next view and the
  events (:class:`AppArrived`, :class:`AppEnded`, :class:`NodeAdded`, :class:`NodeChanged`,
  :class:`NodeDraining`, :class:`NodeRemoved`, :class:`CapacityChanged`);
  :func:`cluster_from_nodes`, :func:`external_jobs` and :func:`analytics_capacity` compute what
  the arbiter is told.
* **Shell**: :class:`Watcher` polls the RM through an :class:`~yarn_bridge.rm.RMClient` (which
  retries, follows RM HA and raises :class:`~yarn_bridge.rm.RMError`) and applies the events to
  the arbiter (:class:`~yarn_bridge.arbiter_port.ArbiterPort`): an ML app that ended ->
  ``finish_app``; nodes added, lost or resized -> ``update_topology`` with a cluster built from
  the RM's nodes; a node being decommissioned -> ``drain``; analytics apps and capacity ->
  ``set_analytics``.

Decisions (the spec and the papers leave these open):

* **Which apps are ML apps.** An app tagged :data:`yarn_bridge.env.ML_APP_TAG` is an ML app; its
  arbiter app id travels in a second tag ``yarn-arbiter-app:<app_id>`` (:func:`arbiter_app_tag`),
  written by ``yarn-arbiter submit``. A tag rather than the application name or an environment
  variable because the RM filters on tags (``GET /apps?applicationTags=``) and shows them in
  every app listing; arbiter ids (``app-<hex>``) are lower case, so YARN's lower-casing of tags
  (§1.4) leaves them intact. Every other app (Hive/Tez, Spark, MapReduce, anything) is an
  *analytics* app.
* **Which analytics apps count in QOOP's |J|.** Every live (NEW ... RUNNING) analytics app except
  those tagged ``yarn-arbiter-query:<job_id>`` (:func:`query_tag`): those belong to ``qoop-hive``
  queries that registered with the arbiter themselves (through ``hive.query.tag``), so counting
  them again would count a query twice; a query-tagged Tez session that outlives its query is
  idle, not a competing job. Nor do HiveServer2's Tez session AMs (type ``TEZ``, named
  ``HIVE-<session id>``, :func:`is_hs2_session`): HiveServer2 keeps one per JDBC session and
  reuses it across that session's queries, idle in between, so an AM is not a job; the queries
  are, and HiveServer2's hooks (``java/hive-hooks``) register each with the arbiter while it
  runs. A HiveServer2 without the hooks is therefore not seen in |J| at all.
* **Capacity R for the analytics share** (:func:`analytics_capacity`, spec §1.3): the
  scheduler's own view of what the *analytics queues* are entitled to, memory and vcores (GPUs
  are not part of R: they go through leases).

  - *Which queues*: the ones named by ``analytics_queues`` (``yarn-arbiter serve
    --analytics-queue``, repeatable; full path ``root.analytics`` or a unique leaf name), by
    default :data:`DEFAULT_ANALYTICS_QUEUES` = ``("analytics",)``, the queue
    ``deploy/conf/capacity-scheduler.xml`` gives Hive on Tez (``tez.queue.name``). Named
    queues the scheduler does not report are ignored; a queue nested under another named one
    is not counted twice.
  - **Capacity Scheduler** (what the compose cluster runs): the sum of the named queues'
    effective guaranteed resources, ``effectiveMinResource`` of the default partition
    (``capacities.queueCapacitiesByPartition[partitionName=""]``, else the queue's
    ``minEffectiveCapacity``). That is the queue's capacity in percentage and in absolute-
    resource mode alike, already scaled by the RM to the nodes that are up. The guarantee and
    not ``effectiveMaxResource``: elasticity above it lasts only while other queues are idle,
    and a share computed from it would be promised to queries and then preempted away. An RM
    too old to report effective resources (3.0) gives ``absoluteCapacity`` % of the cluster's
    total. No named queue reported -> the cluster's total, and the watcher logs a warning once
    (an operator should name the queue: ``--analytics-queue``).
  - **Fair Scheduler**: the sum of the named queues' instantaneous fair shares (an idle queue
    contributes its steady fair share); no named queue reported -> the queues of the live
    analytics apps (Fair Scheduler queues appear on demand, so the apps say where analytics
    runs); none -> the cluster's total.
  - FIFO scheduler: the cluster's total (``totalVirtualCores``, ``totalMB`` of ``/metrics``).
* **An unreachable or confused RM is not an empty cluster.** A poll is all or nothing: if any
  request fails (:class:`~yarn_bridge.rm.RMUnavailable` after the client's retries, a malformed
  or partial answer, an HTTP error) nothing changes and the next poll tries again. Inside a good
  poll, *positive* evidence acts at once: an app the RM reports in a final state (FINISHED,
  FAILED, KILLED) has ended; a node it lists as LOST, UNHEALTHY, DECOMMISSIONED, SHUTDOWN or
  REBOOTED is gone (the RM has killed its containers). *Absence* is not evidence: an app or a
  node that is simply not listed (an RM restarting and recovering its apps, NodeManagers
  re-registering, ``{"apps":null}``) is dropped only after ``confirm_polls`` consecutive polls
  (default 3) without it, and a node not at all while the RM has been up less than
  ``node_resync_s`` (default 120 s, from the RM's ``startedOn``): measured on a real RM
  restart, polls 0.5 s apart saw a node missing for 3 polls before its NodeManager
  re-registered, which revoked a healthy lease. An app that drops out of the live listing is
  looked up by id (``GET /apps/{id}``; at most ``max_lookups`` per poll) so that a normal
  finish is seen in one poll; a 404 counts as absence.
* **Capacity during an RM restart.** The observed capacity is used only when the RM's
  ``activeNodes`` equals the number of RUNNING nodes in the confirmed view; otherwise the last
  capacity stays (a restarting RM reports 0 MB while NodeManagers re-register, which would
  otherwise shrink every query's share for nothing).
* **Topology** (:func:`cluster_from_nodes`): one :class:`~arbiter.cluster.Machine` per RUNNING
  or DECOMMISSIONING node with at least one ``yarn.io/gpu``: name = the node's host (the
  emulator's ``SimCluster.from_cluster`` maps machines to hosts the same way; ``host:port`` when
  two NodeManagers share a host), rack = the node's rack without the leading ``/``, one slot
  holding all its GPUs, vcores and memory from ``totalResource``. CPU-only nodes add to the
  analytics capacity but not to the arbiter's cluster (a machine without GPUs would only
  confuse per-GPU arithmetic in the policies).
* **Graceful decommission.** A DECOMMISSIONING node keeps its running containers, so it stays in
  the topology but is drained (``core.drain`` with ``arbiter.revocation.grace.seconds``): no new
  leases there, current ones end after the grace. It leaves when the RM reports it
  DECOMMISSIONED. (A node recommissioned before that stays drained until it leaves the RM's
  listing: the core has no undrain.)
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from arbiter.messages import RequestError
from yarn_bridge.env import ML_APP_TAG
from yarn_bridge.rm import FINAL_STATES, RMClient, RMError, RMNotFound
from yarn_bridge.rm_events import (
    ANALYTICS,
    CLUSTER_NAME,
    DEFAULT_ANALYTICS_QUEUES,
    DEFAULT_CONFIRM_POLLS,
    DEFAULT_NODE_RESYNC_S,
    LIVE_STATES,
    ML,
    TOPOLOGY_EVENTS,
    AppArrived,
    AppEnded,
    CapacityChanged,
    Event,
    NodeAdded,
    NodeChanged,
    NodeDraining,
    NodeRemoved,
    NodeView,
    Observation,
    RMView,
    analytics_capacity,
    analytics_queues_of,
    app_view,
    bound,
    cluster_from_nodes,
    diff,
    external_jobs,
    machine_of,
    node_view,
)

if TYPE_CHECKING:
    from yarn_bridge.arbiter_port import ArbiterPort

__all__ = ["PollStats", "Watcher"]


log = logging.getLogger("yarn_arbiter.bridge.watcher")


# --------------------------------------------------------------------------------------------
# Shell
# --------------------------------------------------------------------------------------------

_DESELECTS = ("resourceRequests", "timeouts", "appNodeLabelExpression", "amNodeLabelExpression")


@dataclass
class PollStats:
    """Counters of the watcher's polls (for logs, tests and a future status command)."""

    polls: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    lookups: int = 0
    last_error: str | None = None
    events: int = 0
    applied: dict[str, int] = field(default_factory=dict)
    last_ok_at: float | None = None  # time.time() of the last successful poll
    last_poll_seconds: float | None = None  # how long the last poll took


class Watcher:
    """Polls the RM and applies what changed to ``core`` (module docstring).

    :meth:`poll_once` is one poll (all or nothing); :meth:`start` runs it every ``poll_s``
    seconds on a daemon thread until :meth:`stop`. ``on_poll`` is called after every
    successful poll with the new confirmed view (a hook for a standalone watcher; the
    :class:`~yarn_bridge.bridge_cli.Bridge` runs its enforcer after :meth:`poll_once` itself).
    """

    def __init__(
        self,
        core: ArbiterPort,
        rm: RMClient,
        *,
        poll_s: float = 5.0,
        confirm_polls: int = DEFAULT_CONFIRM_POLLS,
        analytics_queues: Iterable[str] | None = None,
        max_lookups: int = 20,
        cluster_name: str = CLUSTER_NAME,
        on_poll: Callable[[RMView], None] | None = None,
        node_resync_s: float = DEFAULT_NODE_RESYNC_S,
    ) -> None:
        if not poll_s > 0:
            raise ValueError(f"poll_s must be > 0, got {poll_s}")
        if confirm_polls < 1:
            raise ValueError(f"confirm_polls must be >= 1, got {confirm_polls}")
        self.core = core
        self.rm = rm
        self.poll_s = poll_s
        self.confirm_polls = confirm_polls
        self.node_resync_s = node_resync_s
        self.analytics_queues = tuple(
            DEFAULT_ANALYTICS_QUEUES if analytics_queues is None else analytics_queues
        )
        self._warned_queues: tuple[str, ...] | None = None
        self.max_lookups = max_lookups
        self.cluster_name = cluster_name
        self.on_poll = on_poll
        self.view = RMView()
        self.stats = PollStats()
        self._reconciled: frozenset[str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one poll at a time
        # Called with each poll's duration and whether it succeeded (the arbiter's telemetry).
        self.poll_timer: Callable[[float, bool], None] | None = None
        self._forged: set[str] = set()  # YARN apps whose arbiter tag was refused (logged once)
        # Every node the RM ever listed (machine names: NMs sharing a host keep host:port).
        self.known_nodes: dict[str, NodeView] = {}

    # -- observing ---------------------------------------------------------------------------

    def observe(self) -> Observation:
        """One poll's worth of RM answers. Raises :class:`~yarn_bridge.rm.RMError` if any
        request fails (the caller then changes nothing)."""
        rm = self.rm
        nodes = {n.id: node_view(n) for n in rm.nodes()}
        apps = {a.id: app_view(a) for a in rm.apps(states=LIVE_STATES, deselects=_DESELECTS)}
        vanished = [a for a in self.view.apps.values() if a.yarn_id not in apps]
        vanished.sort(key=lambda a: (a.kind != ML, a.yarn_id))  # ML apps first: GPUs wait
        for app in vanished[: self.max_lookups]:
            self.stats.lookups += 1
            # A 404 (an RM restarted without recovery) counts as absence.
            with contextlib.suppress(RMNotFound):
                apps[app.yarn_id] = app_view(rm.app(app.yarn_id))
        records = self.core.snapshot().apps
        bindings = {k: getattr(r, "yarn_app_id", "") for k, r in records.items()}
        forged = sorted(
            y for y, a in apps.items()
            if a.arbiter_id and a.arbiter_id in bindings and bindings[a.arbiter_id] != y
        )  # fmt: skip
        for yid in forged:
            if yid not in self._forged:
                self._forged.add(yid)
                log.warning("YARN app %s carries the tag of arbiter app %s, which is bound to %s: "
                            "ignored", yid, apps[yid].arbiter_id,
                            bindings[apps[yid].arbiter_id or ""] or "no YARN app")  # fmt: skip
        apps = bound(apps, bindings)
        registered = frozenset(records)
        linked = {a.arbiter_id for a in apps.values() if a.kind == ML and a.live}
        unlinked = registered - linked
        if unlinked and unlinked != self._reconciled:
            # Arbiter apps with no live YARN app: did it end while nobody was watching?
            ended = rm.apps(tags=[ML_APP_TAG], states=sorted(FINAL_STATES), deselects=_DESELECTS)
            for app in ended:
                v = next(iter(bound({app.id: app_view(app)}, bindings).values()))
                if v.arbiter_id in unlinked and v.yarn_id not in apps:
                    apps[v.yarn_id] = v
        metrics = rm.cluster_metrics()
        scheduler = rm.scheduler()
        # The RM's age matters only while a known node is not listed (resync after a restart).
        info = rm.cluster_info() if set(self.view.nodes) - set(nodes) else None
        uptime = None
        if info is not None and info.started_on:
            uptime = max(0.0, time.time() - info.started_on / 1000)
        app_queues = tuple(
            a.queue for a in apps.values() if a.kind == ANALYTICS and a.live and a.queue
        )
        capacity = analytics_capacity(metrics, scheduler, self.analytics_queues, app_queues)
        if (
            scheduler.type == "capacityScheduler"
            and not analytics_queues_of(scheduler, self.analytics_queues)
            and self._warned_queues != self.analytics_queues
        ):
            self._warned_queues = self.analytics_queues
            log.warning(
                "no analytics queue %s in the Capacity Scheduler (queues: %s): the analytics "
                "capacity is the whole cluster; name the queue with --analytics-queue",
                ", ".join(self.analytics_queues) or "named",
                ", ".join(q.path for q in scheduler.leaves()),
            )
        self._reconciled = unlinked  # only now: every request of this poll succeeded
        return Observation(
            apps=MappingProxyType(apps),
            nodes=MappingProxyType(nodes),
            capacity=capacity,
            active_nodes=metrics.active_nodes,
            rm_uptime_s=uptime,
        )

    # -- one poll ----------------------------------------------------------------------------

    def poll_once(self) -> tuple[Event, ...] | None:
        """Observe, diff, apply. Returns the events applied, or ``None`` when the poll failed
        (the RM unreachable or its answer malformed: logged, nothing changed)."""
        with self._lock:
            self.stats.polls += 1
            started = time.perf_counter()
            try:
                obs = self.observe()
            except RMError as exc:
                self._timed(started, ok=False)
                self.stats.failures += 1
                self.stats.consecutive_failures += 1
                self.stats.last_error = str(exc)
                log.warning(
                    "RM poll failed (%d in a row); the arbiter keeps its view: %s",
                    self.stats.consecutive_failures,
                    exc,
                )
                return None
            self._timed(started, ok=True)
            self.stats.last_ok_at = time.time()
            if self.stats.consecutive_failures:
                log.info("RM answers again after %d failed polls", self.stats.consecutive_failures)
            self.stats.consecutive_failures = 0
            view, events = diff(self.view, obs, confirm_polls=self.confirm_polls,
                                node_resync_s=self.node_resync_s)  # fmt: skip
            self.known_nodes.update(obs.nodes)
            try:
                self.apply(events, view)
            except RequestError as exc:
                # The arbiter refused (its journal cannot commit): the view stays where it
                # was, so the same events come again next poll (applying them is idempotent).
                self.stats.failures += 1
                self.stats.last_error = exc.message
                log.warning("the arbiter refused this poll's events; again next poll: %s",
                            exc.message)  # fmt: skip
                return None
            self.view = view
            self.stats.events += len(events)
        if self.on_poll is not None:
            self.on_poll(view)
        return events

    def _timed(self, started: float, *, ok: bool) -> None:
        seconds = time.perf_counter() - started
        self.stats.last_poll_seconds = seconds
        if self.poll_timer is not None:
            self.poll_timer(seconds, ok)

    def apply(self, events: Iterable[Event], view: RMView) -> None:
        """Carry ``events`` to the core (finish, topology, drain, analytics)."""
        core = self.core
        events = tuple(events)
        counts = self.stats.applied
        for ev in events:
            if isinstance(ev, AppArrived):
                link = f", arbiter app {ev.app.arbiter_id}" if ev.app.arbiter_id else ""
                log.info("YARN app %s arrived (%s%s)", ev.app.yarn_id, ev.app.kind, link)
            elif isinstance(ev, AppEnded):
                log.info("YARN app %s ended: %s", ev.app.yarn_id, ev.reason)
                if ev.app.kind == ML and ev.app.arbiter_id:
                    freed = core.finish_app(ev.app.arbiter_id, ev.reason)
                    counts["finish_app"] = counts.get("finish_app", 0) + 1
                    log.info(
                        "arbiter app %s finished; %d GPUs freed", ev.app.arbiter_id, len(freed)
                    )
            elif isinstance(ev, NodeRemoved | NodeAdded | NodeChanged | CapacityChanged):
                log.info("%s", ev)
        if any(isinstance(ev, TOPOLOGY_EVENTS) for ev in events):
            cluster = cluster_from_nodes(
                view.nodes.values(), self.cluster_name, self.known_nodes.values()
            )
            changed = cluster != core.cluster
            added, removed = core.update_topology(cluster)
            if changed:
                counts["update_topology"] = counts.get("update_topology", 0) + 1
            log.info(
                "topology from the RM: %d GPUs on %d nodes (+%d, -%d GPUs)",
                cluster.num_gpus,
                len(cluster.machines),
                len(added),
                len(removed),
            )
        for ev in events:
            if isinstance(ev, NodeDraining):
                machine = machine_of(ev.node, view.nodes.values(), self.known_nodes.values())
                if ev.node.gpus > 0 and any(m.name == machine for m in core.cluster.machines):
                    grace = float(core.config["arbiter.revocation.grace.seconds"])
                    revoked = core.drain(machine, grace)
                    counts["drain"] = counts.get("drain", 0) + 1
                    log.info(
                        "node %s decommissioning: machine %s drained, %d leases end in %g s",
                        ev.node.node_id,
                        machine,
                        len(revoked),
                        grace,
                    )
        # Idempotent: the core pushes a share update only when |J| or R changed.
        if core.set_analytics(external_jobs(view.apps.values()), view.capacity):
            counts["set_analytics"] = counts.get("set_analytics", 0) + 1

    # -- the loop ----------------------------------------------------------------------------

    def start(self) -> Watcher:
        if self._thread is not None:
            raise RuntimeError("watcher already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="yarn-watcher", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:  # a bug must not stop the watching; it is logged in full
                log.exception("watcher poll crashed; trying again in %g s", self.poll_s)
            self._stop.wait(self.poll_s)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
