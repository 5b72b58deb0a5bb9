"""The typed answers of the ResourceManager REST API (``/ws/v1/cluster``): frozen
dataclasses for the cluster (``/info``, ``/metrics``), NodeManagers (``/nodes``), applications
(``/apps``, their timeouts, ``/apps/new-application``) and the scheduler's queue tree
(``/scheduler``: Capacity, Fair or FIFO scheduler), plus the resource names and constants they
share. Pure data, no I/O; :mod:`yarn_bridge.rm.parse` builds them from the RM's JSON.

GPUs are the ``yarn.io/gpu`` entry of every ``ResourceInfo`` (spec §1.2); :class:`Resource` keeps
memory, vcores, GPUs and any other countable resource. Per-app GPU use is only visible through
``resourceInfo`` (Capacity Scheduler, live apps) and ``resourceSecondsMap`` (§1.4):
:attr:`App.used` is ``None`` when the RM does not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from yarn_bridge.rm.times import parse_expiry

__all__ = [
    "FINAL_STATES",
    "GPU",
    "MEMORY",
    "VCORES",
    "WS_PATH",
    "App",
    "AppTimeout",
    "CapacityQueue",
    "ClusterInfo",
    "ClusterMetrics",
    "FairQueue",
    "NewApplication",
    "Node",
    "Queue",
    "Resource",
    "SchedulerInfo",
]

WS_PATH: Final = "/ws/v1/cluster"
GPU: Final = "yarn.io/gpu"
MEMORY: Final = "memory-mb"
VCORES: Final = "vcores"
FINAL_STATES: Final = frozenset({"FINISHED", "FAILED", "KILLED"})


@dataclass(frozen=True, slots=True)
class Resource:
    """A YARN ``ResourceInfo``: memory (MB), vcores, GPUs and any other countable resource
    (``other``: name -> value, e.g. ``{"yarn.io/fpga": 1}``)."""

    memory_mb: int = 0
    vcores: int = 0
    gpus: int = 0
    other: Mapping[str, int] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.memory_mb, self.vcores, self.gpus, tuple(sorted(self.other.items()))))

    def __sub__(self, rhs: Resource) -> Resource:
        names = set(self.other) | set(rhs.other)
        return Resource(
            self.memory_mb - rhs.memory_mb,
            self.vcores - rhs.vcores,
            self.gpus - rhs.gpus,
            {n: self.other.get(n, 0) - rhs.other.get(n, 0) for n in names},
        )

    def __add__(self, rhs: Resource) -> Resource:
        names = set(self.other) | set(rhs.other)
        return Resource(
            self.memory_mb + rhs.memory_mb,
            self.vcores + rhs.vcores,
            self.gpus + rhs.gpus,
            {n: self.other.get(n, 0) + rhs.other.get(n, 0) for n in names},
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """``GET /ws/v1/cluster/info`` (``ClusterInfo`` DAO)."""

    id: int
    started_on: int
    state: str  # NOTINITED | INITED | STARTED | STOPPED
    ha_state: str  # INITIALIZING | ACTIVE | STANDBY | STOPPED
    rm_version: str = ""
    hadoop_version: str = ""
    rm_state_store: str = ""
    ha_zookeeper_connection_state: str = ""


@dataclass(frozen=True, slots=True)
class ClusterMetrics:
    """``GET /ws/v1/cluster/metrics`` (``ClusterMetricsInfo``). No GPU totals here in Hadoop
    3.3 except ``total_resources`` / ``used_resources`` (``*AcrossPartition``, when the
    scheduler fills them); otherwise sum the nodes' :attr:`Node.total`."""

    apps_submitted: int
    apps_completed: int
    apps_pending: int
    apps_running: int
    apps_failed: int
    apps_killed: int
    reserved_mb: int
    available_mb: int
    allocated_mb: int
    pending_mb: int
    total_mb: int
    reserved_vcores: int
    available_vcores: int
    allocated_vcores: int
    pending_vcores: int
    total_vcores: int
    containers_allocated: int
    containers_reserved: int
    containers_pending: int
    total_nodes: int
    active_nodes: int
    lost_nodes: int
    unhealthy_nodes: int
    decommissioning_nodes: int
    decommissioned_nodes: int
    rebooted_nodes: int
    shutdown_nodes: int
    total_resources: Resource | None = None
    used_resources: Resource | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """One NodeManager (``NodeInfo``). GPU capacity and use come from ``yarn.io/gpu`` in
    ``totalResource`` / ``usedResource`` / ``availableResource``."""

    id: str  # host:port, the NodeId
    host: str
    rack: str
    state: str  # NEW | RUNNING | UNHEALTHY | DECOMMISSIONING | DECOMMISSIONED | LOST | ...
    http_address: str
    total: Resource
    used: Resource
    available: Resource
    num_containers: int = 0
    health_report: str = ""
    last_health_update: int = 0
    version: str = ""
    labels: tuple[str, ...] = ()

    @property
    def gpus_total(self) -> int:
        return self.total.gpus

    @property
    def gpus_used(self) -> int:
        return self.used.gpus

    @property
    def gpus_available(self) -> int:
        return self.available.gpus

    @property
    def usable(self) -> bool:
        """RUNNING nodes receive containers; every other state does not."""
        return self.state == "RUNNING"


@dataclass(frozen=True, slots=True)
class AppTimeout:
    """An application timeout (``AppTimeoutInfo``); YARN knows only ``LIFETIME``.
    ``expiry_time`` is ISO 8601 or ``"UNLIMITED"``; ``remaining_seconds`` is -1 without one."""

    type: str
    expiry_time: str
    remaining_seconds: int

    @property
    def unlimited(self) -> bool:
        return self.expiry_time == "UNLIMITED" or self.remaining_seconds < 0

    @property
    def expiry(self) -> datetime | None:
        return None if self.expiry_time == "UNLIMITED" else parse_expiry(self.expiry_time)


@dataclass(frozen=True, slots=True)
class App:
    """One application (``AppInfo``). ``used`` is the live allocation of partition ``""`` from
    ``resourceInfo`` (Capacity Scheduler only; ``None`` when the RM does not report it)."""

    id: str
    state: str  # NEW | NEW_SAVING | SUBMITTED | ACCEPTED | RUNNING | FINISHED | FAILED | KILLED
    name: str = ""
    user: str = ""
    queue: str = ""
    final_status: str = "UNDEFINED"  # UNDEFINED | SUCCEEDED | FAILED | KILLED
    progress: float = 0.0  # percent
    application_type: str = ""
    tags: tuple[str, ...] = ()
    priority: int = 0
    started_time: int = 0
    launch_time: int = 0
    finished_time: int = 0
    elapsed_time: int = 0
    allocated_mb: int = 0  # -1 once finished
    allocated_vcores: int = 0
    running_containers: int = 0
    memory_seconds: int = 0
    vcore_seconds: int = 0
    resource_seconds: Mapping[str, int] = field(default_factory=dict)
    queue_usage_percentage: float = 0.0
    cluster_usage_percentage: float = 0.0
    diagnostics: str = ""
    tracking_url: str | None = None
    am_host_http_address: str | None = None
    cluster_id: int = 0
    unmanaged: bool = False
    used: Resource | None = None
    timeouts: tuple[AppTimeout, ...] = ()

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def gpu_seconds(self) -> int:
        return self.resource_seconds.get(GPU, 0)

    @property
    def allocated_gpus(self) -> int | None:
        return None if self.used is None else self.used.gpus

    @property
    def lifetime(self) -> AppTimeout | None:
        return next((t for t in self.timeouts if t.type == "LIFETIME"), None)


@dataclass(frozen=True, slots=True)
class NewApplication:
    """``POST /apps/new-application``: a fresh application id and the largest container."""

    application_id: str
    maximum_capability: Resource


@dataclass(frozen=True, slots=True)
class CapacityQueue:
    """A Capacity Scheduler queue (``CapacitySchedulerQueueInfo`` / ``...LeafQueueInfo``).
    Capacities are percentages; ``effective_min`` / ``effective_max`` (partition ``""``) are the
    guaranteed and maximum resources, GPUs included when configured."""

    path: str
    name: str
    is_leaf: bool
    state: str = "RUNNING"
    capacity: float = 0.0
    used_capacity: float = 0.0
    max_capacity: float = 100.0
    absolute_capacity: float = 0.0
    absolute_used_capacity: float = 0.0
    absolute_max_capacity: float = 100.0
    weight: float = -1.0
    num_applications: int = 0
    num_active_applications: int = 0
    num_pending_applications: int = 0
    used: Resource = field(default_factory=Resource)
    effective_min: Resource | None = None
    effective_max: Resource | None = None
    default_priority: int = 0
    max_application_lifetime: int = -1
    children: tuple[CapacityQueue, ...] = ()

    @property
    def guaranteed(self) -> Resource | None:
        return self.effective_min


@dataclass(frozen=True, slots=True)
class FairQueue:
    """A Fair Scheduler queue (``FairSchedulerQueueInfo`` / ``...LeafQueueInfo``).
    ``fair_share`` is the instantaneous fair share (active queues only), ``steady_fair_share``
    the share over all queues."""

    path: str
    name: str
    is_leaf: bool
    scheduling_policy: str = "fair"
    max_apps: int = 0
    min_resources: Resource = field(default_factory=Resource)
    max_resources: Resource = field(default_factory=Resource)
    used: Resource = field(default_factory=Resource)
    demand: Resource = field(default_factory=Resource)
    steady_fair_share: Resource = field(default_factory=Resource)
    fair_share: Resource = field(default_factory=Resource)
    cluster_resources: Resource = field(default_factory=Resource)
    num_active_apps: int = 0
    num_pending_apps: int = 0
    preemptable: bool = True
    children: tuple[FairQueue, ...] = ()

    @property
    def guaranteed(self) -> Resource | None:
        return self.fair_share


Queue = CapacityQueue | FairQueue


@dataclass(frozen=True, slots=True)
class SchedulerInfo:
    """``GET /ws/v1/cluster/scheduler``: the scheduler type and its queue tree (``root`` is
    ``None`` for the FIFO scheduler)."""

    type: str  # capacityScheduler | fairScheduler | fifoScheduler
    root: Queue | None

    def queues(self) -> list[Queue]:
        """Every queue, depth first, root included."""
        out: list[Queue] = []
        stack = [self.root] if self.root is not None else []
        while stack:
            q = stack.pop()
            out.append(q)
            stack.extend(reversed(q.children))
        return out

    def leaves(self) -> list[Queue]:
        return [q for q in self.queues() if q.is_leaf]

    def queue(self, name: str) -> Queue:
        """Look a queue up by full path (``root.ml``) or, if unique, by leaf name (``ml``)."""
        qs = self.queues()
        for q in qs:
            if q.path == name:
                return q
        named = [q for q in qs if q.name == name]
        if len(named) == 1:
            return named[0]
        raise KeyError(name)
