"""What the YARN watcher sees, as pure data: views of the RM's apps and nodes and the events
between two observations.

The functional core of :mod:`yarn_bridge.watcher` (no I/O, no clock). Spec:
``../shared/spec/yarn-hive-integration.md`` §1.2 (nodes, ``yarn.io/gpu`` in
``totalResource``), §1.3 (scheduler queues), §1.4 (apps, tags, GPU use in ``resourceInfo``).
:func:`app_view` / :func:`node_view` classify what the typed client (:mod:`yarn_bridge.rm`)
parsed; :func:`diff` takes the last *confirmed* view of the RM (:class:`RMView`) and one poll's
:class:`Observation` and returns the next view and the events; :func:`cluster_from_nodes`,
:func:`external_jobs` and :func:`analytics_capacity` compute what the arbiter is told. The
decisions behind these rules are in :mod:`yarn_bridge.watcher`'s docstring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final

from arbiter.cluster import Cluster, Machine
from arbiter.shares import Resources
from yarn_bridge.env import ML_APP_TAG
from yarn_bridge.rm import (
    FINAL_STATES,
    App,
    CapacityQueue,
    ClusterMetrics,
    Node,
    Queue,
    SchedulerInfo,
)

__all__ = [
    "ANALYTICS",
    "ARBITER_APP_TAG_PREFIX",
    "CLUSTER_NAME",
    "DEFAULT_ANALYTICS_QUEUES",
    "DEFAULT_CONFIRM_POLLS",
    "GONE_NODE_STATES",
    "LIVE_STATES",
    "ML",
    "PRESENT_NODE_STATES",
    "QUERY_TAG_PREFIX",
    "AppArrived",
    "AppEnded",
    "AppView",
    "CapacityChanged",
    "Event",
    "NodeAdded",
    "NodeChanged",
    "NodeDraining",
    "NodeRemoved",
    "NodeView",
    "Observation",
    "RMView",
    "analytics_capacity",
    "analytics_queues_of",
    "app_view",
    "arbiter_app_id",
    "arbiter_app_tag",
    "cluster_from_nodes",
    "diff",
    "external_jobs",
    "machine_of",
    "node_view",
    "query_tag",
]


ARBITER_APP_TAG_PREFIX: Final = "yarn-arbiter-app:"
QUERY_TAG_PREFIX: Final = "yarn-arbiter-query:"
ML: Final = "ml"
ANALYTICS: Final = "analytics"
#: Every state of a live app (YarnApplicationState before FINISHED / FAILED / KILLED).
LIVE_STATES: Final = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
#: Node states in which the RM has taken the node's containers away.
GONE_NODE_STATES: Final = frozenset({"LOST", "UNHEALTHY", "DECOMMISSIONED", "SHUTDOWN", "REBOOTED"})
#: Node states whose containers run (DECOMMISSIONING: until they finish, no new ones).
PRESENT_NODE_STATES: Final = frozenset({"RUNNING", "DECOMMISSIONING"})
DEFAULT_CONFIRM_POLLS: Final = 3
# After an RM (re)start, NodeManagers re-register within their RM retry interval (30 s by
# default); an absent node is not counted as gone before this. The RM itself marks a node
# that never comes back LOST after its liveness expiry, which acts at once.
DEFAULT_NODE_RESYNC_S: Final = 120.0
#: The analytics queue of deploy/conf/capacity-scheduler.xml (root.analytics: Hive on Tez).
DEFAULT_ANALYTICS_QUEUES: Final = ("analytics",)
CLUSTER_NAME: Final = "yarn"


# --------------------------------------------------------------------------------------------
# Tags
# --------------------------------------------------------------------------------------------


def arbiter_app_tag(app_id: str) -> str:
    """The YARN tag that carries an arbiter app id.

    >>> arbiter_app_tag("app-0123456789ab")
    'yarn-arbiter-app:app-0123456789ab'
    """
    return f"{ARBITER_APP_TAG_PREFIX}{app_id}".lower()


def query_tag(job_id: str) -> str:
    """The YARN tag (``SET hive.query.tag=...``) that marks a registered qoop-hive query's app.

    >>> query_tag("query-0123456789ab")
    'yarn-arbiter-query:query-0123456789ab'
    """
    return f"{QUERY_TAG_PREFIX}{job_id}".lower()


def _tag_value(tags: Iterable[str], prefix: str) -> str | None:
    for t in tags:
        if t.startswith(prefix) and len(t) > len(prefix):
            return t[len(prefix) :]
    return None


def arbiter_app_id(tags: Iterable[str]) -> str | None:
    """The arbiter app id in an app's tags, if any.

    >>> arbiter_app_id(["yarn-arbiter-ml", "yarn-arbiter-app:app-42", "team-a"])
    'app-42'
    >>> arbiter_app_id(["hive"]) is None
    True
    """
    return _tag_value(tags, ARBITER_APP_TAG_PREFIX)


# --------------------------------------------------------------------------------------------
# Core: views of apps and nodes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppView:
    """What the watcher keeps of one YARN application. ``gpus_used`` is the app's live
    ``yarn.io/gpu`` allocation when the RM reports it (Capacity Scheduler), else ``None``."""

    yarn_id: str
    state: str
    kind: str  # ML | ANALYTICS
    arbiter_id: str | None = None
    query_id: str | None = None
    application_type: str = ""
    queue: str = ""
    gpus_used: int | None = None
    final_status: str = "UNDEFINED"
    diagnostics: str = ""
    hs2_session: bool = False  # a HiveServer2 Tez session AM (module docstring)

    @property
    def live(self) -> bool:
        return self.state not in FINAL_STATES


def app_view(app: App) -> AppView:
    """Classify one parsed app (module docstring: ML by tag, everything else analytics)."""
    tags = tuple(t.lower() for t in app.tags)
    ml = ML_APP_TAG in tags
    return AppView(
        yarn_id=app.id,
        state=app.state,
        kind=ML if ml else ANALYTICS,
        arbiter_id=arbiter_app_id(tags) if ml else None,
        query_id=_tag_value(tags, QUERY_TAG_PREFIX),
        application_type=app.application_type,
        queue=app.queue,
        gpus_used=app.allocated_gpus if not app.is_final else 0,
        final_status=app.final_status,
        diagnostics=app.diagnostics[:200],
        hs2_session=is_hs2_session(app.application_type, app.name),
    )


def is_hs2_session(application_type: str, name: str) -> bool:
    """Whether an app is a HiveServer2 Tez session AM (Hive names them ``HIVE-<session id>``).

    >>> is_hs2_session("TEZ", "HIVE-95426549-8815-4e20-9e5a-0f5e10d133fa")
    True
    >>> is_hs2_session("TEZ", "my-dag"), is_hs2_session("SPARK", "HIVE-x")
    (False, False)
    """
    return application_type.upper() == "TEZ" and name.startswith("HIVE-")


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the watcher keeps of one NodeManager: its state and ``totalResource``."""

    node_id: str
    host: str
    rack: str
    state: str
    gpus: int
    vcores: int
    memory_mb: int

    @property
    def present(self) -> bool:
        return self.state in PRESENT_NODE_STATES

    @property
    def gone(self) -> bool:
        return self.state in GONE_NODE_STATES

    def same_capacity(self, other: NodeView) -> bool:
        return (self.host, self.rack, self.gpus, self.vcores, self.memory_mb) == (
            other.host,
            other.rack,
            other.gpus,
            other.vcores,
            other.memory_mb,
        )


def node_view(node: Node) -> NodeView:
    return NodeView(
        node_id=node.id,
        host=node.host,
        rack=node.rack,
        state=node.state,
        gpus=node.total.gpus,
        vcores=node.total.vcores,
        memory_mb=node.total.memory_mb,
    )


# --------------------------------------------------------------------------------------------
# Core: observations, the confirmed view, events, diff
# --------------------------------------------------------------------------------------------


def _empty() -> Mapping:
    return MappingProxyType({})


@dataclass(frozen=True)
class Observation:
    """One successful poll. ``apps``: the live apps the RM listed, plus apps looked up by id
    (possibly in a final state) and ended ML apps found for registered arbiter apps; an app
    absent from ``apps`` was not reported. ``nodes``: every node listed, any state.
    ``capacity``: the analytics capacity this poll suggests; ``active_nodes``: the RM's
    ``activeNodes`` (``None``: not checked); ``rm_uptime_s``: how long the answering RM has
    been up (``None``: unknown), so that NodeManagers still re-registering after an RM restart
    or failover are not taken for lost."""

    apps: Mapping[str, AppView] = field(default_factory=_empty)
    nodes: Mapping[str, NodeView] = field(default_factory=_empty)
    capacity: Resources | None = None
    active_nodes: int | None = None
    rm_uptime_s: float | None = None


@dataclass(frozen=True)
class RMView:
    """The confirmed view of the RM: live apps and present nodes, with how many consecutive
    polls each confirmed app or node has been missing, and the analytics capacity."""

    apps: Mapping[str, AppView] = field(default_factory=_empty)
    nodes: Mapping[str, NodeView] = field(default_factory=_empty)
    missing_apps: Mapping[str, int] = field(default_factory=_empty)
    missing_nodes: Mapping[str, int] = field(default_factory=_empty)
    capacity: Resources | None = None
    polls: int = 0

    def ml_apps(self) -> list[AppView]:
        return [a for a in self.apps.values() if a.kind == ML]

    def analytics_apps(self) -> list[AppView]:
        return [a for a in self.apps.values() if a.kind == ANALYTICS]


def _node(n: NodeView) -> str:
    return f"{n.node_id} ({n.state}, {n.gpus} GPUs, {n.vcores} vcores, {n.memory_mb} MB)"


def _res(r: Resources | None) -> str:
    return "none" if r is None else f"{r.vcores:g} vcores, {r.memory_mb:g} MB"


@dataclass(frozen=True, slots=True)
class AppArrived:
    app: AppView

    def __str__(self) -> str:
        return f"YARN app {self.app.yarn_id} arrived ({self.app.kind}, {self.app.state})"


@dataclass(frozen=True, slots=True)
class AppEnded:
    """``app`` ended: ``confirmed_by`` is ``"state"`` (the RM reported a final state) or
    ``"absence"`` (not reported for ``confirm_polls`` polls)."""

    app: AppView
    reason: str
    confirmed_by: str

    def __str__(self) -> str:
        return f"YARN app {self.app.yarn_id} ended: {self.reason} (by {self.confirmed_by})"


@dataclass(frozen=True, slots=True)
class NodeAdded:
    node: NodeView

    def __str__(self) -> str:
        return f"node added: {_node(self.node)}"


@dataclass(frozen=True, slots=True)
class NodeChanged:
    old: NodeView
    new: NodeView

    def __str__(self) -> str:
        return f"node changed: {_node(self.old)} -> {_node(self.new)}"


@dataclass(frozen=True, slots=True)
class NodeDraining:
    node: NodeView

    def __str__(self) -> str:
        return f"node decommissioning: {_node(self.node)}"


@dataclass(frozen=True, slots=True)
class NodeRemoved:
    node: NodeView
    reason: str

    def __str__(self) -> str:
        return f"{self.reason}: node removed, its {self.node.gpus} GPUs with it"


@dataclass(frozen=True, slots=True)
class CapacityChanged:
    old: Resources | None
    new: Resources

    def __str__(self) -> str:
        return f"analytics capacity changed: {_res(self.old)} -> {_res(self.new)}"


Event = (
    AppArrived | AppEnded | NodeAdded | NodeChanged | NodeDraining | NodeRemoved | CapacityChanged
)

TOPOLOGY_EVENTS: Final = (NodeAdded, NodeChanged, NodeRemoved)


def _ended_reason(app: AppView) -> str:
    why = f"YARN {app.yarn_id} {app.state}"
    if app.final_status not in ("", "UNDEFINED", app.state):
        why += f" ({app.final_status})"
    return why


def diff(
    view: RMView,
    obs: Observation,
    *,
    confirm_polls: int = DEFAULT_CONFIRM_POLLS,
    node_resync_s: float = DEFAULT_NODE_RESYNC_S,
) -> tuple[RMView, tuple[Event, ...]]:
    """The next confirmed view and the events between ``view`` and ``obs`` (rules in the module
    docstring: final states and gone nodes act at once, absence after ``confirm_polls``; a
    node's absence does not count while the RM has been up less than ``node_resync_s``).

    >>> a = AppView("application_1_0001", "RUNNING", ANALYTICS, application_type="TEZ")
    >>> v, ev = diff(RMView(), Observation(apps={a.yarn_id: a}))
    >>> [type(e).__name__ for e in ev], len(v.apps)
    (['AppArrived'], 1)
    >>> v, ev = diff(v, Observation())            # not listed once: nothing yet
    >>> ev, dict(v.missing_apps)
    ((), {'application_1_0001': 1})
    >>> v, ev = diff(v, Observation(apps={a.yarn_id: a}))   # back: the count resets
    >>> ev, dict(v.missing_apps)
    ((), {})
    """
    if confirm_polls < 1:
        raise ValueError(f"confirm_polls must be >= 1, got {confirm_polls}")
    events: list[Event] = []
    apps = dict(view.apps)
    missing_apps = dict(view.missing_apps)
    for yid, app in obs.apps.items():
        known = view.apps.get(yid)
        if app.live:
            if known is None:
                events.append(AppArrived(app))
            apps[yid] = app
            missing_apps.pop(yid, None)
        elif known is not None:
            events.append(AppEnded(app, _ended_reason(app), "state"))
            del apps[yid]
            missing_apps.pop(yid, None)
        elif app.kind == ML and app.arbiter_id:
            # An ML app that ended while nobody watched (the bridge restarted): still final.
            events.append(AppEnded(app, _ended_reason(app), "state"))
    for yid, app in view.apps.items():
        if yid in obs.apps:
            continue
        n = missing_apps.get(yid, 0) + 1
        if n >= confirm_polls:
            reason = f"YARN {yid} not reported by the RM for {n} polls"
            events.append(AppEnded(app, reason, "absence"))
            del apps[yid]
            missing_apps.pop(yid, None)
        else:
            missing_apps[yid] = n

    nodes = dict(view.nodes)
    missing_nodes = dict(view.missing_nodes)
    seen_present: set[str] = set()
    for nid, node in obs.nodes.items():
        old = view.nodes.get(nid)
        if node.present:
            seen_present.add(nid)
            if old is None:
                events.append(NodeAdded(node))
            elif not node.same_capacity(old):
                events.append(NodeChanged(old, node))
            if node.state == "DECOMMISSIONING" and (old is None or old.state != node.state):
                events.append(NodeDraining(node))
            nodes[nid] = node
            missing_nodes.pop(nid, None)
        elif node.gone and old is not None:
            seen_present.add(nid)  # settled: not absent
            events.append(NodeRemoved(old, f"node {nid} {node.state}"))
            del nodes[nid]
            missing_nodes.pop(nid, None)
    resyncing = obs.rm_uptime_s is not None and obs.rm_uptime_s < node_resync_s
    for nid, node in view.nodes.items():
        if nid in seen_present or resyncing:
            continue
        n = missing_nodes.get(nid, 0) + 1
        if n >= confirm_polls:
            events.append(NodeRemoved(node, f"node {nid} not reported RUNNING for {n} polls"))
            del nodes[nid]
            missing_nodes.pop(nid, None)
        else:
            missing_nodes[nid] = n

    capacity = view.capacity
    running = sum(1 for n in nodes.values() if n.state == "RUNNING")
    consistent = obs.active_nodes is None or obs.active_nodes == running
    if obs.capacity is not None and consistent and obs.capacity != capacity:
        events.append(CapacityChanged(capacity, obs.capacity))
        capacity = obs.capacity
    new_view = RMView(
        apps=MappingProxyType(apps),
        nodes=MappingProxyType(nodes),
        missing_apps=MappingProxyType(missing_apps),
        missing_nodes=MappingProxyType(missing_nodes),
        capacity=capacity,
        polls=view.polls + 1,
    )
    return new_view, tuple(events)


# --------------------------------------------------------------------------------------------
# Core: what the arbiter is told
# --------------------------------------------------------------------------------------------


def cluster_from_nodes(
    nodes: Iterable[NodeView], name: str = CLUSTER_NAME, known: Iterable[NodeView] = ()
) -> Cluster:
    """The arbiter's cluster for the present GPU nodes (module docstring), ordered by node id.

    >>> c = cluster_from_nodes([NodeView("gpu-1:8041", "gpu-1", "/r1", "RUNNING", 2, 8, 8192),
    ...                         NodeView("cpu-1:8041", "cpu-1", "/r1", "RUNNING", 0, 8, 8192)])
    >>> sorted(c.gpu_ids), c.machines[0].rack
    (['gpu-1/s0/g0', 'gpu-1/s0/g1'], 'r1')

    Two NodeManagers on one host are named by node id, and stay so while one of them is LOST
    (the RM still lists it) or is only ``known`` (seen in an earlier poll): the survivor's GPU
    ids, and so its leases, do not change.

    >>> two = [NodeView("h:1", "h", "/r", "RUNNING", 1, 8, 8192),
    ...        NodeView("h:2", "h", "/r", "LOST", 1, 8, 8192)]
    >>> [m.name for m in cluster_from_nodes(two).machines]
    ['h:1']
    """
    nodes = list(nodes)
    chosen = sorted((n for n in nodes if n.present and n.gpus > 0), key=lambda n: n.node_id)
    hosts = _nms_per_host(({n.node_id: n for n in known} | {n.node_id: n for n in nodes}).values())
    machines = []
    for n in chosen:
        machine = n.host if n.host and hosts[n.host] == 1 else n.node_id
        machines.append(
            Machine(
                name=machine.replace("/", "_"),
                rack=n.rack.lstrip("/") or "default-rack",
                slots=1,
                gpus_per_slot=n.gpus,
                gpu_type="gpu",
                vcores=max(0, n.vcores),
                memory_mb=max(0, n.memory_mb),
            )
        )
    return Cluster.from_machines(name, machines)


def _nms_per_host(nodes: Iterable[NodeView]) -> dict[str, int]:
    """GPU NodeManagers per host among every node the RM lists, whatever its state."""
    hosts: dict[str, int] = {}
    for n in nodes:
        if n.gpus > 0:
            hosts[n.host] = hosts.get(n.host, 0) + 1
    return hosts


def machine_of(node: NodeView, nodes: Iterable[NodeView], known: Iterable[NodeView] = ()) -> str:
    """The machine name :func:`cluster_from_nodes` gives ``node`` among ``nodes``."""
    by_id = {n.node_id: n for n in known} | {n.node_id: n for n in nodes} | {node.node_id: node}
    on_host = _nms_per_host(by_id.values()).get(node.host, 0)
    name = node.host if node.host and on_host <= 1 else node.node_id
    return name.replace("/", "_")


def bound(apps: Mapping[str, AppView], bindings: Mapping[str, str]) -> dict[str, AppView]:
    """``apps`` with every ML app's link to an arbiter app checked against the YARN id that app
    registered with (``bindings``: arbiter app id -> YARN application id, ``""`` when it
    registered without one): a YARN app whose ``yarn-arbiter-app:<id>`` tag names an app that
    is not bound to *it* is unlinked (``arbiter_id=None``), so it can neither end that app nor
    borrow its leases. A tag is text anyone submitting to YARN can write; only the binding
    made at registration (``yarn-arbiter submit`` registers with the YARN id) is evidence. An
    app registered without a YARN id (a standalone AM) is therefore never ended by a YARN app:
    it ends by its own heartbeat timeout and lease expiry.

    >>> a = AppView("application_1_0002", "RUNNING", ML, arbiter_id="app-1")
    >>> bound({a.yarn_id: a}, {"app-1": "application_1_0001"})[a.yarn_id].arbiter_id is None
    True
    >>> bound({a.yarn_id: a}, {"app-1": ""})[a.yarn_id].arbiter_id is None
    True
    >>> bound({a.yarn_id: a}, {"app-1": "application_1_0002"})[a.yarn_id].arbiter_id
    'app-1'
    """
    out = {}
    for yid, app in apps.items():
        want = bindings.get(app.arbiter_id or "", "")
        if app.kind == ML and app.arbiter_id and want != yid:
            app = replace(app, arbiter_id=None)
        out[yid] = app
    return out


def external_jobs(apps: Iterable[AppView]) -> int:
    """QOOP's external |J|: live analytics apps, except a registered query's app and
    HiveServer2's Tez sessions (module docstring).

    >>> external_jobs([AppView("a1", "RUNNING", ANALYTICS),
    ...                AppView("a2", "RUNNING", ANALYTICS, query_id="query-1"),
    ...                AppView("a3", "RUNNING", ML),
    ...                AppView("a4", "RUNNING", ANALYTICS, hs2_session=True)])
    1
    """
    return sum(
        1
        for a in apps
        if a.kind == ANALYTICS and a.live and a.query_id is None and not a.hs2_session
    )


def _lookup(scheduler: SchedulerInfo, names: Iterable[str]) -> list[Queue]:
    found: dict[str, Queue] = {}
    for name in dict.fromkeys(names):
        try:
            q = scheduler.queue(name)
        except KeyError:
            continue
        found.setdefault(q.path, q)
    # a queue under another chosen one is already in its parent's resources
    return [q for p, q in found.items() if not any(p.startswith(o + ".") for o in found)]


def analytics_queues_of(
    scheduler: SchedulerInfo | None,
    analytics_queues: Iterable[str],
    app_queues: Iterable[str] = (),
) -> list[Queue]:
    """The queues whose resources make R (module docstring): the named ones the scheduler
    reports; under the Fair Scheduler, failing those, the live analytics apps' queues."""
    if scheduler is None or scheduler.root is None:
        return []
    chosen = _lookup(scheduler, analytics_queues)
    if not chosen and scheduler.type == "fairScheduler":
        chosen = _lookup(scheduler, app_queues)
    return chosen


def _guaranteed(q: Queue, metrics: ClusterMetrics) -> tuple[float, float]:
    """(vcores, MB) ``q`` is entitled to (module docstring)."""
    if isinstance(q, CapacityQueue):
        if q.effective_min is not None:
            return float(q.effective_min.vcores), float(q.effective_min.memory_mb)
        frac = q.absolute_capacity / 100.0  # a 3.0-era RM: no effective resources
        return metrics.total_vcores * frac, metrics.total_mb * frac
    share = q.fair_share
    if share.memory_mb <= 0 and share.vcores <= 0:
        share = q.steady_fair_share  # an idle queue: its steady share
    return float(share.vcores), float(share.memory_mb)


def analytics_capacity(
    metrics: ClusterMetrics,
    scheduler: SchedulerInfo | None,
    analytics_queues: Iterable[str],
    app_queues: Iterable[str] = (),
) -> Resources:
    """R for the analytics share (module docstring): what the analytics queues are entitled to
    (Capacity Scheduler: effective guaranteed resources; Fair Scheduler: fair shares), else the
    cluster's total CPU and memory.

    >>> from yarn_bridge.rm import Resource
    >>> m = ClusterMetrics(*([0] * 10), 131072, *([0] * 4), 64, *([0] * 11))
    >>> cs = SchedulerInfo("capacityScheduler", CapacityQueue("root", "root", False, children=(
    ...     CapacityQueue("root.analytics", "analytics", True,
    ...                   effective_min=Resource(8192, 8)),)))
    >>> r = analytics_capacity(m, cs, ["analytics"])
    >>> r.vcores, r.memory_mb
    (8.0, 8192.0)
    >>> r = analytics_capacity(m, cs, ["hive"])   # not reported: the cluster's total
    >>> r.vcores, r.memory_mb
    (64.0, 131072.0)
    """
    chosen = analytics_queues_of(scheduler, analytics_queues, app_queues)
    if chosen:
        vcores = memory = 0.0
        for q in chosen:
            v, mb = _guaranteed(q, metrics)
            vcores += v
            memory += mb
        return Resources(vcores, memory)
    return Resources(float(metrics.total_vcores), float(metrics.total_mb))
