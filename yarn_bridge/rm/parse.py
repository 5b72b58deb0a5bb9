"""Parsing of the ResourceManager's JSON answers (``/ws/v1/cluster/info``, ``/metrics``,
``/nodes``, ``/apps``, ``/apps/{id}/timeouts``, ``/apps/new-application``, ``/scheduler``,
``/scheduler-conf``) into the dataclasses of :mod:`yarn_bridge.rm.model`. Pure: a decoded JSON
document in, typed values out; unit-testable with plain dicts.

Parsing is tolerant where Hadoop varies: ``{"apps":null}`` / ``{"nodes":null}`` are empty
lists; optional keys may be missing (Hadoop omits nulls: ``trackingUrl`` before RUNNING,
``usedResource`` of a LOST node); a JAXB one-element list may arrive as an object; the scheduler
is recognised by key presence, not by Hadoop version. A few keys per object are required (an
app's ``id`` and ``state``, a node's ``id`` and ``state``, ...): a missing required key or a
wrong type raises :class:`~yarn_bridge.rm.errors.RMResponseError` naming the endpoint and the
field.
"""

from __future__ import annotations

from typing import Any

from yarn_bridge.rm.errors import RMResponseError
from yarn_bridge.rm.model import (
    GPU,
    MEMORY,
    VCORES,
    WS_PATH,
    App,
    AppTimeout,
    CapacityQueue,
    ClusterInfo,
    ClusterMetrics,
    FairQueue,
    NewApplication,
    Node,
    Resource,
    SchedulerInfo,
)

__all__ = [
    "parse_app",
    "parse_apps",
    "parse_cluster_info",
    "parse_cluster_metrics",
    "parse_new_application",
    "parse_node",
    "parse_nodes",
    "parse_resource",
    "parse_scheduler",
    "parse_scheduler_conf",
    "parse_timeout",
    "parse_timeouts",
]

_MISSING: Any = object()


class _Obj:
    """Typed access to one JSON object; every failure names the endpoint and the key path."""

    __slots__ = ("d", "endpoint", "where")

    def __init__(self, d: Any, endpoint: str, where: str) -> None:
        if not isinstance(d, dict):
            raise RMResponseError(f"{where} should be an object, got {_kind(d)}", endpoint=endpoint)
        self.d = d
        self.endpoint = endpoint
        self.where = where

    def _get(self, key: str, default: Any) -> Any:
        value = self.d.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise RMResponseError(
                    f"missing required field {self.where}.{key}", endpoint=self.endpoint
                )
            return _MISSING
        return value

    def _bad(self, key: str, want: str, value: Any) -> RMResponseError:
        return RMResponseError(
            f"field {self.where}.{key} should be {want}, got {_kind(value)} {value!r:.60}",
            endpoint=self.endpoint,
        )

    def str(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self._bad(key, "a string", value)
        return str(value)

    def int(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is _MISSING:
            return default
        if isinstance(value, bool):
            raise self._bad(key, "an integer", value)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise self._bad(key, "an integer", value)

    def float(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is _MISSING:
            return default
        if isinstance(value, bool):
            raise self._bad(key, "a number", value)
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)  # Hadoop writes NaN as the string "NaN"
            except ValueError:
                pass
        raise self._bad(key, "a number", value)

    def bool(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is _MISSING:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise self._bad(key, "a boolean", value)

    def obj(self, key: str, required: bool = False) -> _Obj | None:
        value = self._get(key, _MISSING if required else None)
        if value is _MISSING:
            return None
        return _Obj(value, self.endpoint, f"{self.where}.{key}")

    def list(self, key: str) -> list[Any]:
        """A JSON list; ``null``/missing -> []; a lone object (JAXB one-element list) -> [it]."""
        value = self.d.get(key)
        if value is None:
            return []
        if isinstance(value, list):
            return value
        if isinstance(value, dict):
            return [value]
        raise self._bad(key, "a list", value)


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _root(doc: Any, key: str, endpoint: str, nullable: bool = False) -> _Obj | None:
    top = _Obj(doc, endpoint, "response")
    if key not in top.d:
        raise RMResponseError(f"missing top-level key {key!r}", endpoint=endpoint)
    if top.d[key] is None:
        if nullable:
            return None
        raise RMResponseError(f"top-level key {key!r} is null", endpoint=endpoint)
    return _Obj(top.d[key], endpoint, key)


def _resource(o: _Obj | None) -> Resource:
    if o is None:
        return Resource()
    values: dict[str, int] = {}
    infos = o.obj("resourceInformations")
    if infos is not None:
        for k, raw in enumerate(infos.list("resourceInformation")):
            ri = _Obj(raw, o.endpoint, f"{infos.where}.resourceInformation[{k}]")
            values[ri.str("name")] = ri.int("value", 0)
    memory = o.int("memory", values.get(MEMORY, 0))
    vcores = o.int("vCores", values.get(VCORES, 0))
    other = {n: v for n, v in values.items() if n not in (MEMORY, VCORES, GPU)}
    return Resource(memory, vcores, values.get(GPU, 0), other)


def parse_resource(obj: Any, endpoint: str = "resource") -> Resource:
    """``{"memory":..,"vCores":..,"resourceInformations":{"resourceInformation":[..]}}``.

    >>> parse_resource({"memory": 2048, "vCores": 4, "resourceInformations":
    ...     {"resourceInformation": [{"name": "yarn.io/gpu", "value": 3}]}}).gpus
    3
    """
    return _resource(_Obj(obj, endpoint, "resource"))


def _opt_resource(o: _Obj, key: str) -> Resource | None:
    sub = o.obj(key)
    return None if sub is None else _resource(sub)


def parse_cluster_info(doc: Any, endpoint: str = f"GET {WS_PATH}/info") -> ClusterInfo:
    o = _root(doc, "clusterInfo", endpoint)
    assert o is not None
    return ClusterInfo(
        id=o.int("id"),
        started_on=o.int("startedOn", 0),
        state=o.str("state"),
        ha_state=o.str("haState", "ACTIVE"),
        rm_version=o.str("resourceManagerVersion", ""),
        hadoop_version=o.str("hadoopVersion", ""),
        rm_state_store=o.str("rmStateStoreName", ""),
        ha_zookeeper_connection_state=o.str("haZooKeeperConnectionState", ""),
    )


def parse_cluster_metrics(doc: Any, endpoint: str = f"GET {WS_PATH}/metrics") -> ClusterMetrics:
    o = _root(doc, "clusterMetrics", endpoint)
    assert o is not None
    i = o.int
    return ClusterMetrics(
        apps_submitted=i("appsSubmitted"),
        apps_completed=i("appsCompleted", 0),
        apps_pending=i("appsPending", 0),
        apps_running=i("appsRunning", 0),
        apps_failed=i("appsFailed", 0),
        apps_killed=i("appsKilled", 0),
        reserved_mb=i("reservedMB", 0),
        available_mb=i("availableMB", 0),
        allocated_mb=i("allocatedMB", 0),
        pending_mb=i("pendingMB", 0),
        total_mb=i("totalMB"),
        reserved_vcores=i("reservedVirtualCores", 0),
        available_vcores=i("availableVirtualCores", 0),
        allocated_vcores=i("allocatedVirtualCores", 0),
        pending_vcores=i("pendingVirtualCores", 0),
        total_vcores=i("totalVirtualCores"),
        containers_allocated=i("containersAllocated", 0),
        containers_reserved=i("containersReserved", 0),
        containers_pending=i("containersPending", 0),
        total_nodes=i("totalNodes", 0),
        active_nodes=i("activeNodes"),
        lost_nodes=i("lostNodes", 0),
        unhealthy_nodes=i("unhealthyNodes", 0),
        decommissioning_nodes=i("decommissioningNodes", 0),
        decommissioned_nodes=i("decommissionedNodes", 0),
        rebooted_nodes=i("rebootedNodes", 0),
        shutdown_nodes=i("shutdownNodes", 0),
        total_resources=_opt_resource(o, "totalClusterResourcesAcrossPartition"),
        used_resources=_opt_resource(o, "totalUsedResourcesAcrossPartition"),
    )


def _node(o: _Obj) -> Node:
    used_mb, avail_mb = o.int("usedMemoryMB", 0), o.int("availMemoryMB", 0)
    used_vc, avail_vc = o.int("usedVirtualCores", 0), o.int("availableVirtualCores", 0)
    total = _opt_resource(o, "totalResource")
    used = _opt_resource(o, "usedResource")
    avail = _opt_resource(o, "availableResource")
    if used is None:  # an inactive (LOST, DECOMMISSIONED) node has no scheduler report
        used = Resource(used_mb, used_vc, 0)
    if total is None:  # Hadoop < 3.1
        total = Resource(used_mb + avail_mb, used_vc + avail_vc, 0)
    if avail is None:
        avail = total - used if o.d.get("usedResource") is not None else Resource()
    labels = tuple(str(x) for x in o.list("nodeLabels"))
    return Node(
        id=o.str("id"),
        host=o.str("nodeHostName", "") or o.str("id").rsplit(":", 1)[0],
        rack=o.str("rack", ""),
        state=o.str("state"),
        http_address=o.str("nodeHTTPAddress", ""),
        total=total,
        used=used,
        available=avail,
        num_containers=o.int("numContainers", 0),
        health_report=o.str("healthReport", ""),
        last_health_update=o.int("lastHealthUpdate", 0),
        version=o.str("version", ""),
        labels=labels,
    )


def parse_nodes(doc: Any, endpoint: str = f"GET {WS_PATH}/nodes") -> list[Node]:
    """``{"nodes":{"node":[..]}}``; ``{"nodes":null}`` (no nodes) is ``[]``."""
    o = _root(doc, "nodes", endpoint, nullable=True)
    if o is None:
        return []
    return [_node(_Obj(n, endpoint, f"nodes.node[{k}]")) for k, n in enumerate(o.list("node"))]


def parse_node(doc: Any, endpoint: str = f"GET {WS_PATH}/nodes/{{id}}") -> Node:
    o = _root(doc, "node", endpoint)
    assert o is not None
    return _node(o)


def _map_entries(o: _Obj, key: str) -> dict[str, int]:
    """``resourceSecondsMap``: ``{"entry":[{"key":..,"value":"12"}]}`` (JAXB) or a plain map."""
    raw = o.d.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise o._bad(key, "an object", raw)
    if "entry" in raw:
        sub = _Obj(raw, o.endpoint, f"{o.where}.{key}")
        out: dict[str, int] = {}
        for k, e in enumerate(sub.list("entry")):
            entry = _Obj(e, o.endpoint, f"{sub.where}.entry[{k}]")
            out[entry.str("key")] = entry.int("value", 0)
        return out
    flat = _Obj(raw, o.endpoint, f"{o.where}.{key}")
    return {str(k): flat.int(str(k), 0) for k in raw}


def _timeout(o: _Obj) -> AppTimeout:
    return AppTimeout(
        type=o.str("type", "LIFETIME"),
        expiry_time=o.str("expiryTime", "UNLIMITED"),
        remaining_seconds=o.int("remainingTimeInSeconds", -1),
    )


def _app_used(o: _Obj) -> Resource | None:
    info = o.obj("resourceInfo")
    if info is None:
        return None
    parts = info.list("resourceUsagesByPartition")
    for k, raw in enumerate(parts):
        p = _Obj(raw, o.endpoint, f"{info.where}.resourceUsagesByPartition[{k}]")
        if p.str("partitionName", "") == "":
            return _opt_resource(p, "used") or Resource()
    return None


def _app(o: _Obj) -> App:
    tags = o.str("applicationTags", "")
    timeouts_obj = o.obj("timeouts")
    timeouts: tuple[AppTimeout, ...] = ()
    if timeouts_obj is not None:
        timeouts = tuple(
            _timeout(_Obj(t, o.endpoint, f"{timeouts_obj.where}.timeout[{k}]"))
            for k, t in enumerate(timeouts_obj.list("timeout"))
        )
    return App(
        id=o.str("id"),
        state=o.str("state"),
        name=o.str("name", ""),
        user=o.str("user", ""),
        queue=o.str("queue", ""),
        final_status=o.str("finalStatus", "UNDEFINED"),
        progress=o.float("progress", 0.0),
        application_type=o.str("applicationType", ""),
        tags=tuple(t for t in tags.split(",") if t),
        priority=o.int("priority", 0),
        started_time=o.int("startedTime", 0),
        launch_time=o.int("launchTime", 0),
        finished_time=o.int("finishedTime", 0),
        elapsed_time=o.int("elapsedTime", 0),
        allocated_mb=o.int("allocatedMB", 0),
        allocated_vcores=o.int("allocatedVCores", 0),
        running_containers=o.int("runningContainers", 0),
        memory_seconds=o.int("memorySeconds", 0),
        vcore_seconds=o.int("vcoreSeconds", 0),
        resource_seconds=_map_entries(o, "resourceSecondsMap"),
        queue_usage_percentage=o.float("queueUsagePercentage", 0.0),
        cluster_usage_percentage=o.float("clusterUsagePercentage", 0.0),
        diagnostics=o.str("diagnostics", ""),
        tracking_url=o.str("trackingUrl", None),
        am_host_http_address=o.str("amHostHttpAddress", None),
        cluster_id=o.int("clusterId", 0),
        unmanaged=o.bool("unmanagedApplication", False),
        used=_app_used(o),
        timeouts=timeouts,
    )


def parse_apps(doc: Any, endpoint: str = f"GET {WS_PATH}/apps") -> list[App]:
    """``{"apps":{"app":[..]}}``; ``{"apps":null}`` (no apps) is ``[]``.

    >>> parse_apps({"apps": None})
    []
    """
    o = _root(doc, "apps", endpoint, nullable=True)
    if o is None:
        return []
    return [_app(_Obj(a, endpoint, f"apps.app[{k}]")) for k, a in enumerate(o.list("app"))]


def parse_app(doc: Any, endpoint: str = f"GET {WS_PATH}/apps/{{id}}") -> App:
    o = _root(doc, "app", endpoint)
    assert o is not None
    return _app(o)


def parse_timeouts(doc: Any, endpoint: str = f"GET {WS_PATH}/apps/{{id}}/timeouts"
                   ) -> tuple[AppTimeout, ...]:  # fmt: skip
    o = _root(doc, "timeouts", endpoint, nullable=True)
    if o is None:
        return ()
    return tuple(
        _timeout(_Obj(t, endpoint, f"timeouts.timeout[{k}]"))
        for k, t in enumerate(o.list("timeout"))
    )


def parse_timeout(doc: Any, endpoint: str = f"GET {WS_PATH}/apps/{{id}}/timeouts/LIFETIME"
                  ) -> AppTimeout:  # fmt: skip
    o = _root(doc, "timeout", endpoint)
    assert o is not None
    return _timeout(o)


def parse_new_application(doc: Any, endpoint: str = f"POST {WS_PATH}/apps/new-application"
                          ) -> NewApplication:  # fmt: skip
    o = _Obj(doc, endpoint, "response")
    return NewApplication(
        application_id=o.str("application-id"),
        maximum_capability=_resource(o.obj("maximum-resource-capability")),
    )


def _cs_queue(o: _Obj, parent_path: str | None) -> CapacityQueue:
    name = o.str("queueName")
    path = o.str("queuePath", None) or (f"{parent_path}.{name}" if parent_path else name)
    subs = o.obj("queues")
    children = tuple(
        _cs_queue(_Obj(q, o.endpoint, f"{subs.where}.queue[{k}]"), path)
        for k, q in enumerate(subs.list("queue") if subs is not None else [])
    )
    eff_min = eff_max = None
    caps = o.obj("capacities")
    if caps is not None:
        for k, raw in enumerate(caps.list("queueCapacitiesByPartition")):
            p = _Obj(raw, o.endpoint, f"{caps.where}.queueCapacitiesByPartition[{k}]")
            if p.str("partitionName", "") == "":
                eff_min = _opt_resource(p, "effectiveMinResource")
                eff_max = _opt_resource(p, "effectiveMaxResource")
    if eff_min is None:
        eff_min = _opt_resource(o, "minEffectiveCapacity")
    if eff_max is None:
        eff_max = _opt_resource(o, "maxEffectiveCapacity")
    is_leaf = o.str("type", "") == "capacitySchedulerLeafQueueInfo" or (
        subs is None and o.str("queueType", "leaf") == "leaf" and parent_path is not None
    )
    return CapacityQueue(
        path=path,
        name=name,
        is_leaf=is_leaf,
        state=o.str("state", "RUNNING"),
        capacity=o.float("capacity", 0.0),
        used_capacity=o.float("usedCapacity", 0.0),
        max_capacity=o.float("maxCapacity", 100.0),
        absolute_capacity=o.float("absoluteCapacity", 100.0 if parent_path is None else 0.0),
        absolute_used_capacity=o.float("absoluteUsedCapacity", 0.0),
        absolute_max_capacity=o.float("absoluteMaxCapacity", 100.0),
        weight=o.float("weight", -1.0),
        num_applications=o.int("numApplications", 0),
        num_active_applications=o.int("numActiveApplications", 0),
        num_pending_applications=o.int("numPendingApplications", 0),
        used=_resource(o.obj("resourcesUsed")),
        effective_min=eff_min,
        effective_max=eff_max,
        default_priority=o.int("defaultPriority", 0),
        max_application_lifetime=o.int("maxApplicationLifetime", -1),
        children=children,
    )


def _fair_queue(o: _Obj) -> FairQueue:
    path = o.str("queueName")
    subs = o.obj("childQueues")
    children = tuple(
        _fair_queue(_Obj(q, o.endpoint, f"{subs.where}.queue[{k}]"))
        for k, q in enumerate(subs.list("queue") if subs is not None else [])
    )
    return FairQueue(
        path=path,
        name=path.rsplit(".", 1)[-1],
        is_leaf=o.str("type", "") == "fairSchedulerLeafQueueInfo" or subs is None,
        scheduling_policy=o.str("schedulingPolicy", "fair"),
        max_apps=o.int("maxApps", 0),
        min_resources=_resource(o.obj("minResources")),
        max_resources=_resource(o.obj("maxResources")),
        used=_resource(o.obj("usedResources")),
        demand=_resource(o.obj("demandResources")),
        steady_fair_share=_resource(o.obj("steadyFairResources")),
        fair_share=_resource(o.obj("fairResources")),
        cluster_resources=_resource(o.obj("clusterResources")),
        num_active_apps=o.int("numActiveApps", 0),
        num_pending_apps=o.int("numPendingApps", 0),
        preemptable=o.bool("preemptable", True),
        children=children,
    )


def parse_scheduler(doc: Any, endpoint: str = f"GET {WS_PATH}/scheduler") -> SchedulerInfo:
    """Capacity, Fair or FIFO scheduler; parsed by key presence, not by Hadoop version."""
    sched = _root(doc, "scheduler", endpoint)
    assert sched is not None
    info = sched.obj("schedulerInfo", required=True)
    assert info is not None
    kind = info.str("type")
    if kind == "capacityScheduler":
        return SchedulerInfo(kind, _cs_queue(info, None))
    if kind == "fairScheduler":
        root = info.obj("rootQueue", required=True)
        assert root is not None
        return SchedulerInfo(kind, _fair_queue(root))
    return SchedulerInfo(kind, None)


def parse_scheduler_conf(doc: Any, endpoint: str = f"GET {WS_PATH}/scheduler-conf"
                         ) -> dict[str, str]:  # fmt: skip
    """``{"property":[{"name":..,"value":..}]}``, with or without a ``configuration`` root."""
    o = _Obj(doc, endpoint, "response")
    if "configuration" in o.d:
        inner = o.obj("configuration", required=True)
        assert inner is not None
        o = inner
    out: dict[str, str] = {}
    for k, raw in enumerate(o.list("property")):
        p = _Obj(raw, endpoint, f"property[{k}]")
        out[p.str("name")] = p.str("value", "")
    return out
