"""The simulated cluster behind one or two emulated RMs: :class:`SimCluster`, a facade.

:class:`SimCluster` is the Python API of the emulated cluster (the tests and ``emulate-rm``
drive it; :class:`~yarn_bridge.emulator.server.RMEmulator` serves it over HTTP). It owns no
behaviour of its own; it composes the parts, which share one
:class:`~yarn_bridge.emulator.state.ClusterState`:

* ``state``: :class:`~yarn_bridge.emulator.state.ClusterState` (settings, nodes, apps,
  scheduler configuration, time; its attributes are readable and writable on the facade too,
  e.g. ``sim.apps``, ``sim.conf``, ``sim.clock``);
* ``capacity``: :class:`~yarn_bridge.emulator.capacity.CapacityScheduler`;
* ``fair``: :class:`~yarn_bridge.emulator.fair.FairScheduler`;
* ``engine``: :class:`~yarn_bridge.emulator.engine.Engine` (event loop, placement);
* ``ops``: :class:`~yarn_bridge.emulator.operations.Operations` (nodes, submissions, app
  updates, RM restart);
* ``views``: :class:`~yarn_bridge.emulator.views.Views` (the ``GET`` answers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from yarn_bridge.emulator.capacity import CapacityScheduler
from yarn_bridge.emulator.engine import Engine
from yarn_bridge.emulator.fair import FairScheduler
from yarn_bridge.emulator.operations import Operations
from yarn_bridge.emulator.shapes import HADOOP_VERSIONS
from yarn_bridge.emulator.state import Clock, ClusterState, _App
from yarn_bridge.emulator.views import Views

if TYPE_CHECKING:
    from arbiter.cluster import Cluster


class _Shared:
    """A :class:`SimCluster` attribute that lives on its :class:`ClusterState` (read and
    write), so that the facade and every part see the same value."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: SimCluster | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj.state, self.name)

    def __set__(self, obj: SimCluster, value: Any) -> None:
        setattr(obj.state, self.name, value)


class SimCluster:
    """The simulated cluster behind one or two emulated RMs. Thread-safe (one lock).

    ``nodes`` x ``gpus_per_node`` identical nodes (or ``machines`` from an arbiter
    :class:`~arbiter.cluster.Cluster`, see :meth:`from_cluster`); ``scheduler`` is
    ``"capacity"`` or ``"fair"``; ``queues`` maps leaf name -> capacity % (Capacity) or weight
    (Fair). Durations are seconds on :attr:`clock`. The parts it is made of are in the module
    docstring (:mod:`yarn_bridge.emulator.cluster`).
    """

    hadoop_line = _Shared()
    version = _Shared()
    jersey2 = _Shared()
    am_registers = _Shared()
    lock = _Shared()
    clock = _Shared()
    scheduler = _Shared()
    app_seconds = _Shared()
    new_seconds = _Shared()
    start_seconds = _Shared()
    duration_jitter = _Shared()
    rng = _Shared()
    max_priority = _Shared()
    max_allocation = _Shared()
    gpu_container = _Shared()
    recovery = _Shared()
    nodes = _Shared()
    apps = _Shared()
    conf = _Shared()
    fair_weights = _Shared()
    conf_log = _Shared()
    conf_version = _Shared()
    cluster_ts = _Shared()

    def __init__(
        self,
        *,
        nodes: int = 4,
        gpus_per_node: int = 4,
        memory_mb: int = 65536,
        vcores: int = 32,
        scheduler: Literal["capacity", "fair"] = "capacity",
        queues: Mapping[str, float | str] | None = None,
        app_seconds: float = 60.0,
        new_seconds: float = 0.0,
        start_seconds: float = 1.0,
        duration_jitter: float = 0.0,
        seed: int = 0,
        clock: Clock | None = None,
        manual_clock: bool = False,
        max_priority: int = 10,
        max_allocation_mb: int = 8192,
        max_allocation_vcores: int = 4,
        gpu_container_mb: int = 2048,
        gpu_container_vcores: int = 1,
        recovery: bool = False,
        rack: str = "/default-rack",
        hadoop_version: str = "3.4",
        am_registers: bool = True,
    ) -> None:
        if scheduler not in ("capacity", "fair"):
            raise ValueError(f"scheduler must be 'capacity' or 'fair', got {scheduler!r}")
        if hadoop_version not in HADOOP_VERSIONS:
            raise ValueError(
                f"hadoop_version must be one of {sorted(HADOOP_VERSIONS)}, got {hadoop_version!r}"
            )
        if app_seconds <= 0:
            raise ValueError("app_seconds must be > 0")
        self.state = ClusterState(
            scheduler=scheduler,
            hadoop_version=hadoop_version,
            am_registers=am_registers,
            clock=clock or Clock(manual=manual_clock),
            app_seconds=app_seconds,
            new_seconds=new_seconds,
            start_seconds=start_seconds,
            duration_jitter=duration_jitter,
            seed=seed,
            max_priority=max_priority,
            max_allocation=(max_allocation_mb, max_allocation_vcores),
            gpu_container=(gpu_container_mb, gpu_container_vcores),
            recovery=recovery,
        )
        self.capacity = CapacityScheduler(self.state)
        self.fair = FairScheduler(self.state)
        self.engine = Engine(self.state, self.capacity)
        self.ops = Operations(self.state, self.engine, self.capacity, self.fair)
        self.views = Views(self.state, self.capacity, self.fair)
        leaves = dict(queues) if queues else {"default": 20.0, "hive": 40.0, "ml": 40.0}
        if scheduler == "capacity":
            self.capacity.configure(leaves)
        else:
            if queues is None:
                leaves = {"default": 1.0, "hive": 2.0, "ml": 2.0}
            self.fair.configure(leaves)
        for k in range(nodes):
            self.add_node(f"node-{k:02d}", gpus=gpus_per_node, memory_mb=memory_mb,
                          vcores=vcores, rack=rack)  # fmt: skip

    @classmethod
    def from_cluster(cls, cluster: Cluster, *, memory_mb: int = 65536, vcores: int = 32,
                     **kwargs: Any) -> SimCluster:  # fmt: skip
        """One NodeManager per arbiter machine: host = machine name (so a YARN node id maps
        back to the arbiter's machine), rack ``/<rack>``, GPUs = the machine's, memory and
        vcores from the spec or the defaults given here."""
        sim = cls(nodes=0, **kwargs)
        for m in cluster.machines:
            sim.add_node(m.name, gpus=m.num_gpus, memory_mb=m.memory_mb or memory_mb,
                         vcores=m.vcores or vcores, rack=f"/{m.rack}")  # fmt: skip
        return sim

    # -- nodes -------------------------------------------------------------------------------

    def add_node(self, host: str, *, gpus: int = 4, memory_mb: int = 65536, vcores: int = 32,
                 rack: str = "/default-rack", port: int = 8041) -> str:  # fmt: skip
        """Register a NodeManager (RUNNING); returns its node id ``host:port``."""
        return self.ops.add_node(host, gpus=gpus, memory_mb=memory_mb, vcores=vcores, rack=rack,
                                 port=port)  # fmt: skip

    def lose_node(self, node_id: str) -> None:
        """The NodeManager stops heartbeating: LOST, its containers are gone."""
        self.ops.lose_node(node_id)

    def remove_node(self, node_id: str) -> None:
        """Decommission the node (it stays listed as DECOMMISSIONED)."""
        self.ops.remove_node(node_id)

    def set_unhealthy(self, node_id: str, report: str = "disk failure") -> None:
        self.ops.set_unhealthy(node_id, report)

    def recover_node(self, node_id: str) -> None:
        """A LOST / UNHEALTHY / DECOMMISSIONED node comes back RUNNING (empty)."""
        self.ops.recover_node(node_id)

    # -- apps (Python API) -------------------------------------------------------------------

    def new_application_id(self) -> str:
        return self.state.new_application_id()

    def add_app(
        self,
        *,
        name: str = "app",
        user: str = "emulator",
        queue: str = "default",
        gpus: int = 0,
        seconds: float | None = None,
        memory_mb: int = 1024,
        vcores: int = 1,
        tags: Iterable[str] = (),
        priority: int | None = None,
        app_type: str = "YARN",
        lifetime_seconds: float | None = None,
        max_attempts: int = 1,
    ) -> str:
        """Submit an application directly (as if through ``POST /apps``, but with the GPUs its
        AM will hold once RUNNING); returns its id."""
        return self.ops.add_app(
            name=name, user=user, queue=queue, gpus=gpus, seconds=seconds, memory_mb=memory_mb,
            vcores=vcores, tags=tags, priority=priority, app_type=app_type,
            lifetime_seconds=lifetime_seconds, max_attempts=max_attempts,
        )  # fmt: skip

    def app_state(self, app_id: str) -> str:
        return self.ops.app_state(app_id)

    def advance(self, seconds: float) -> None:
        """Move the clock (and the cluster) forward."""
        self.ops.advance(seconds)

    def set_fair_weight(self, queue: str, weight: float) -> None:
        """Fair Scheduler: add a leaf queue or change its weight."""
        self.fair.set_weight(queue, weight)

    def restart(self, *, keep_apps: bool) -> None:
        """The RM restarts: new cluster timestamp; with ``keep_apps`` (work-preserving
        recovery from the state store) the apps and their containers survive, otherwise the
        new RM knows no apps (NodeManagers re-register, their containers are killed)."""
        self.ops.restart(keep_apps=keep_apps)

    def tick(self) -> None:
        """Bring the state up to the clock's now, one event at a time."""
        self.engine.tick()

    # -- REST operations ---------------------------------------------------------------------

    def submit_json(self, body: Any, user: str | None) -> str:
        """``POST /apps`` body -> application id (400 on a malformed context)."""
        return self.ops.submit_json(body, user)

    def kill(self, app_id: str, diagnostics: str | None = None) -> tuple[int, str]:
        """The kill half of ``PUT /apps/{id}/state``: (HTTP status, state to report)."""
        return self.ops.kill(app_id, diagnostics)

    def move(self, app_id: str, queue: str) -> str:
        return self.ops.move(app_id, queue)

    def set_priority(self, app_id: str, priority: int) -> int:
        return self.ops.set_priority(app_id, priority)

    def set_lifetime(self, app_id: str, expiry_ms: int) -> None:
        self.ops.set_lifetime(app_id, expiry_ms)

    def mutate_conf(self, body: Any, user: str | None) -> None:
        """Apply a ``PUT /scheduler-conf`` body (``SchedConfUpdateInfo`` JSON), atomically."""
        self.capacity.mutate_conf(body, user, self.engine)

    # -- JSON views --------------------------------------------------------------------------

    def cluster_info_json(self, ha_state: str, ha_enabled: bool, started_on: int) -> dict:
        return self.views.cluster_info_json(ha_state, ha_enabled, started_on)

    def metrics_json(self) -> dict:
        return self.views.metrics_json()

    def nodes_json(self, states: str | None) -> dict:
        return self.views.nodes_json(states)

    def node_json(self, node_id: str) -> dict:
        return self.views.node_json(node_id)

    def app_json(self, app: _App, rm_address: str, deselects: frozenset[str] = frozenset()
                 ) -> dict[str, Any]:  # fmt: skip
        return self.views.app_json(app, rm_address, deselects)

    def apps_json(self, query: Mapping[str, str], rm_address: str) -> dict:
        return self.views.apps_json(query, rm_address)

    def new_application_json(self) -> dict:
        return self.views.new_application_json()

    def fair_shares(self) -> dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]]:
        """Leaf path -> (instantaneous fair share, steady fair share) as (MB, vcores, GPUs)."""
        return self.fair.fair_shares()

    def scheduler_json(self) -> dict:
        return self.views.scheduler_json()

    def scheduler_conf_json(self) -> dict:
        return self.capacity.conf_json()

    def _cs_leaves(self) -> list[str]:
        """The Capacity Scheduler's leaf queue paths (:meth:`CapacityScheduler.leaves`)."""
        return self.capacity.leaves()
