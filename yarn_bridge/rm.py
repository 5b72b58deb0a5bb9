"""Typed client for the YARN ResourceManager REST API (``/ws/v1/cluster``), Hadoop 3.3 / 3.4.

Spec: ``../shared/spec/yarn-hive-integration.md`` §1 (endpoint table §1.1, node and GPU shapes
§1.2, scheduler shapes §1.3, app shapes §1.4, submission §1.5, scheduler-conf mutation §1.6,
GPU configuration §1.8) and §2.1 (why a thin typed httpx client rather than yarn-api-client:
its two useful ideas, active-RM probing and simple auth, are re-done here).

Layout: a functional core and a thin shell.

* **Core** (pure, no I/O): frozen dataclasses (:class:`App`, :class:`Node`, :class:`Resource`,
  :class:`ClusterMetrics`, :class:`CapacityQueue`, :class:`FairQueue`, ...) and ``parse_*``
  functions from a decoded JSON document to them, plus the request builders
  :class:`AppSubmission` and :class:`SchedConfUpdate` (``to_json``). They are unit-testable
  with plain dicts.
* **Shell**: :class:`RMClient` (sync, httpx) does HA, retries, auth and error mapping, then
  calls the core. :class:`AsyncRMClient` runs the same calls in a worker thread
  (``asyncio.to_thread``) for the asyncio arbiter: one code path, no second HA state machine.

Decisions (where Hadoop or the spec leaves a choice):

* **GPUs** are the ``yarn.io/gpu`` entry of ``resourceInformations.resourceInformation[]`` in
  every ``ResourceInfo`` (§1.2); :class:`Resource` keeps memory, vcores, GPUs and any other
  countable resource. Absent GPU entry = 0 GPUs. Per-app GPU use is only visible through
  ``resourceInfo`` (Capacity Scheduler, live apps) and ``resourceSecondsMap`` (§1.4):
  :attr:`App.used` is ``None`` when the RM does not say.
* **Tolerant parsing**: ``{"apps":null}`` / ``{"nodes":null}`` are empty lists; optional keys may
  be missing (Hadoop omits nulls: ``trackingUrl`` before RUNNING, ``usedResource`` of a LOST
  node); a JAXB one-element list may arrive as an object. A few keys per object are required
  (an app's ``id`` and ``state``, a node's ``id`` and ``state``, ...). A missing required key,
  a wrong type or undecodable JSON raises :class:`RMResponseError` naming the endpoint and the
  field. Malformed answers are not retried (a retry would hide a real incompatibility).
* **RM HA**: the client is given every RM URL and remembers the active one. A standby RM
  answers REST calls with ``307`` + ``Location`` (Hadoop 2.8+ ``RMWebAppFilter``) or with a
  ``200`` text page "This is standby RM. Redirecting to the current active RM: <url>" plus a
  ``Refresh`` header (older RMs, or when it does not know the active); ``/ws/v1/cluster/info`` is
  never redirected and reports ``haState``. All three are handled: a named target is tried
  next (and learned if it was not in the list), otherwise the next configured RM.
* **Retries**: a *round* tries every RM once; connection errors, timeouts, 502/503/504 and
  standby answers move to the next RM; after a failed round the client sleeps
  ``backoff * 2**k`` (capped at ``max_backoff``, no jitter so tests are deterministic) and tries
  again, up to ``max_attempts`` rounds and never past ``deadline`` seconds per call (each
  request's timeout is clipped to what is left). Then :class:`RMUnavailable`. ``POST /apps``
  (submission) is re-sent only when it never reached the RM (connection refused, connect
  timeout, a standby or a 503): after a read timeout or a cut connection the RM may have
  accepted it, so the client raises and the caller looks the application id up.
* **Auth**: ``user=`` adds Hadoop simple auth's ``user.name`` query parameter; the RM's
  ``hadoop.auth`` cookie is kept by the httpx client. ``auth=`` is a hook
  ``(method, url) -> headers`` called for every attempt (SPNEGO: return
  ``{"Authorization": "Negotiate <token>"}`` for ``HTTP@<host of url>``).
* **Kill** is asynchronous in YARN: ``PUT /apps/{id}/state`` first answers 202 with the current
  state; :meth:`RMClient.kill_app` repeats the PUT until the RM answers 200 (or the deadline).
* **Scheduler-conf** JSON bodies follow the JAXB mapping of ``SchedConfUpdateInfo``
  (``{"update-queue":[{"queue-name":..,"params":{"entry":[{"key":..,"value":..}]}}], ...}``,
  §1.6 [check] on the compose cluster); ``GET /scheduler-conf`` is read whether or not the
  ``configuration`` root element is kept.
* **Tags** are lower-cased by YARN (§1.4); :class:`AppSubmission` lower-cases them so what is
  read back equals what was sent.

Example (the watcher / enforcer / submit side)::

    from yarn_bridge.rm import AppSubmission, RMClient, SchedConfUpdate

    with RMClient("http://rm1:8088,http://rm2:8088", user="yarn") as rm:
        free = {n.id: n.gpus_available for n in rm.nodes(states=["RUNNING"])}
        ml = rm.apps(states=["ACCEPTED", "RUNNING"], tags=["yarn-arbiter-ml"])
        rm.kill_app(ml[0].id)                          # waits for KILLED
        rm.set_app_lifetime(ml[1].id, time.time() + 600)
        rm.update_scheduler_conf(SchedConfUpdate(update_queue={"root.ml": {"capacity": 60},
                                                               "root.hive": {"capacity": 20}}))
        app_id = rm.new_application().application_id
        rm.submit_app(AppSubmission(app_id, "trainer", "<AM command>", queue="ml",
                                    tags=("yarn-arbiter-ml",)))

Errors: :class:`RMUnavailable` (no active RM in time), :class:`RMResponseError` (answer not in
the documented shape), :class:`RMHTTPError` and its :class:`RMBadRequest` /
:class:`RMAuthError` / :class:`RMNotFound` (the RM refused); all are :class:`RMError`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import httpx

from yarn_bridge.env import ENV_RM_URL

__all__ = [
    "FINAL_STATES",
    "GPU",
    "WS_PATH",
    "App",
    "AppSubmission",
    "AppTimeout",
    "AsyncRMClient",
    "AuthHook",
    "CapacityQueue",
    "ClusterInfo",
    "ClusterMetrics",
    "FairQueue",
    "LocalResource",
    "NewApplication",
    "Node",
    "Queue",
    "RMAuthError",
    "RMBadRequest",
    "RMClient",
    "RMError",
    "RMHTTPError",
    "RMNotFound",
    "RMResponseError",
    "RMUnavailable",
    "Resource",
    "SchedConfUpdate",
    "SchedulerInfo",
    "format_expiry",
    "parse_app",
    "parse_apps",
    "parse_cluster_info",
    "parse_cluster_metrics",
    "parse_expiry",
    "parse_new_application",
    "parse_node",
    "parse_nodes",
    "parse_resource",
    "parse_scheduler",
    "parse_scheduler_conf",
    "parse_timeout",
    "parse_timeouts",
]

WS_PATH: Final = "/ws/v1/cluster"
GPU: Final = "yarn.io/gpu"
MEMORY: Final = "memory-mb"
VCORES: Final = "vcores"
FINAL_STATES: Final = frozenset({"FINISHED", "FAILED", "KILLED"})
STANDBY_MARKER: Final = "This is standby RM"

# (method, url) -> extra headers for this attempt (e.g. SPNEGO "Authorization: Negotiate ...").
AuthHook = Callable[[str, str], Mapping[str, str]]


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class RMError(Exception):
    """Base class: something went wrong talking to the ResourceManager.

    ``endpoint`` names the call (``"GET /ws/v1/cluster/apps"``) when known.
    """

    def __init__(self, message: str, *, endpoint: str | None = None) -> None:
        super().__init__(f"{endpoint}: {message}" if endpoint else message)
        self.endpoint = endpoint
        self.detail = message


class RMUnavailable(RMError):
    """No active RM answered within the retries and the deadline. ``attempts`` lists what each
    try saw (``"http://rm1:8088: connection refused"``, ``"...: standby"``)."""

    def __init__(self, message: str, *, endpoint: str | None = None,
                 attempts: Sequence[str] = ()) -> None:  # fmt: skip
        super().__init__(message, endpoint=endpoint)
        self.attempts = tuple(attempts)


class RMResponseError(RMError):
    """The RM answered, but not with the documented shape: undecodable or truncated JSON, a
    missing required key, a wrong type. The message names the endpoint and the field."""


class RMHTTPError(RMError):
    """The RM refused the request (4xx, or a 5xx other than 502/503/504). ``status`` is the
    HTTP code, ``exception`` Hadoop's exception name (``"NotFoundException"``) when given."""

    def __init__(self, message: str, *, endpoint: str | None = None, status: int = 0,
                 exception: str | None = None) -> None:  # fmt: skip
        super().__init__(message, endpoint=endpoint)
        self.status = status
        self.exception = exception


class RMBadRequest(RMHTTPError):
    """400: the RM rejected the request (invalid id, invalid queue configuration, ...)."""


class RMAuthError(RMHTTPError):
    """401 / 403: not authenticated (no ``user.name`` / SPNEGO) or not authorised."""


class RMNotFound(RMHTTPError):
    """404: no such application / node."""


# --------------------------------------------------------------------------------------------
# Core: dataclasses
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class LocalResource:
    """One entry of ``am-container-spec.local-resources`` (size and timestamp must match the
    HDFS file, from WebHDFS ``GETFILESTATUS``)."""

    resource: str
    size: int
    timestamp: int
    type: str = "FILE"  # FILE | ARCHIVE | PATTERN
    visibility: str = "APPLICATION"  # PUBLIC | PRIVATE | APPLICATION

    def to_json(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "type": self.type,
            "visibility": self.visibility,
            "size": self.size,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True, slots=True)
class AppSubmission:
    """An ``ApplicationSubmissionContext`` for ``POST /apps`` (spec §1.5). The REST API gives
    the AM memory and vcores only: GPUs are requested later by the AM itself (§1.5, §1.8)."""

    application_id: str
    name: str
    command: str
    queue: str = "default"
    memory_mb: int = 1024
    vcores: int = 1
    priority: int = 0
    application_type: str = "YARN"
    tags: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    local_resources: Mapping[str, LocalResource] = field(default_factory=dict)
    max_app_attempts: int = 1
    unmanaged_am: bool = False
    keep_containers: bool = False
    app_node_label_expression: str | None = None
    am_node_label_expression: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON body (``ApplicationSubmissionContextInfo`` field names)."""
        spec: dict[str, Any] = {"commands": {"command": self.command}}
        if self.local_resources:
            spec["local-resources"] = {
                "entry": [{"key": k, "value": v.to_json()} for k, v in self.local_resources.items()]
            }
        if self.environment:
            spec["environment"] = {
                "entry": [{"key": k, "value": v} for k, v in self.environment.items()]
            }
        body: dict[str, Any] = {
            "application-id": self.application_id,
            "application-name": self.name,
            "queue": self.queue,
            "priority": self.priority,
            "am-container-spec": spec,
            "unmanaged-AM": self.unmanaged_am,
            "max-app-attempts": self.max_app_attempts,
            "resource": {"memory": self.memory_mb, "vCores": self.vcores},
            "application-type": self.application_type,
            "keep-containers-across-application-attempts": self.keep_containers,
        }
        if self.tags:
            body["application-tags"] = {"tag": [t.lower() for t in self.tags]}
        if self.app_node_label_expression is not None:
            body["app-node-label-expression"] = self.app_node_label_expression
        if self.am_node_label_expression is not None:
            body["am-container-node-label-expression"] = self.am_node_label_expression
        return body


def _entries(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"entry": [{"key": k, "value": str(v)} for k, v in params.items()]}


@dataclass(frozen=True, slots=True)
class SchedConfUpdate:
    """A ``PUT /scheduler-conf`` mutation (``SchedConfUpdateInfo``, spec §1.6). Queue params
    use short keys (``capacity``, ``maximum-capacity``, ``state``); ``global_updates`` full keys.

    >>> SchedConfUpdate(update_queue={"root.ml": {"capacity": 60}}).to_json()
    {'update-queue': [{'queue-name': 'root.ml', 'params': {'entry': [{'key': 'capacity', \
'value': '60'}]}}]}
    """

    update_queue: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    add_queue: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    remove_queue: tuple[str, ...] = ()
    global_updates: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.add_queue:
            body["add-queue"] = [
                {"queue-name": q, "params": _entries(p)} for q, p in self.add_queue.items()
            ]
        if self.remove_queue:
            body["remove-queue"] = list(self.remove_queue)
        if self.update_queue:
            body["update-queue"] = [
                {"queue-name": q, "params": _entries(p)} for q, p in self.update_queue.items()
            ]
        if self.global_updates:
            body["global-updates"] = _entries(self.global_updates)
        return body


# --------------------------------------------------------------------------------------------
# Core: parsing (pure)
# --------------------------------------------------------------------------------------------

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


_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:?\d\d)?$")


def parse_expiry(text: str) -> datetime:
    """Hadoop's ISO 8601 (``2016-12-05T22:51:00.104+0530``; also ``+05:30``, ``Z``)."""
    m = _ISO.match(text.strip())
    if not m:
        raise ValueError(f"not an ISO 8601 time: {text!r}")
    stamp, zone = m.group(1), m.group(2) or "Z"
    if zone == "Z":
        zone = "+0000"
    zone = zone.replace(":", "")
    fmt = "%Y-%m-%dT%H:%M:%S.%f%z" if "." in stamp else "%Y-%m-%dT%H:%M:%S%z"
    return datetime.strptime(stamp + zone, fmt)


def format_expiry(when: datetime | float) -> str:
    """A datetime (naive = UTC) or epoch seconds -> Hadoop's ``yyyy-MM-dd'T'HH:mm:ss.SSSZ``."""
    if not isinstance(when, datetime):
        when = datetime.fromtimestamp(float(when), UTC)
    elif when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (
        when.strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{when.microsecond // 1000:03d}"
        + (when.strftime("%z"))
    )


# --------------------------------------------------------------------------------------------
# Shell: the HTTP client
# --------------------------------------------------------------------------------------------


def _base(url: str) -> str:
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url


def _split_urls(urls: str | Iterable[str]) -> list[str]:
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = [_base(u) for u in items if u and u.strip()]
    if not out:
        raise ValueError("RMClient needs at least one ResourceManager URL")
    return list(dict.fromkeys(out))


_ACTIVE_RM = re.compile(r"active RM:?\s*(https?://\S+)", re.IGNORECASE)
_REFRESH_URL = re.compile(r"url=(\S+)", re.IGNORECASE)
_RETRYABLE_STATUS = frozenset({502, 503, 504})
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)  # the request never reached the RM


class _Standby(Exception):
    def __init__(self, target: str | None) -> None:
        super().__init__(target)
        self.target = target


def _standby_target(resp: httpx.Response) -> tuple[bool, str | None]:
    """Is this a standby RM's answer, and which base URL does it point to?"""
    location = resp.headers.get("location")
    text = ""
    if resp.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        text = resp.text[:2000]
    if 300 <= resp.status_code < 400 and location:
        return True, _origin(location)
    if STANDBY_MARKER in text:
        m = _ACTIVE_RM.search(text)
        if m:
            return True, _origin(m.group(1))
        m = _REFRESH_URL.search(resp.headers.get("refresh", ""))
        return True, _origin(m.group(1)) if m else None
    return False, None


def _origin(url: str) -> str | None:
    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    if not u.scheme or not u.host:
        return None
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme}://{u.host}{port}"


def _error_message(resp: httpx.Response) -> tuple[str, str | None]:
    """Hadoop's ``{"RemoteException":{"exception","message","javaClassName"}}`` or text."""
    try:
        doc = resp.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("RemoteException"), dict):
        rex = doc["RemoteException"]
        return str(rex.get("message", "")), str(rex.get("exception") or "") or None
    text = resp.text.strip()
    return (text[:500] or resp.reason_phrase), None


class RMClient:
    """A typed, HA-aware client for the RM REST API. Thread-safe; one instance per process.

    ``urls``: every RM web address (``"http://rm1:8088,http://rm2:8088"`` or a list);
    ``user``: simple-auth user name; ``auth``: a header hook (SPNEGO); ``timeout``: per
    request; ``deadline``: per call, retries included; ``max_attempts``: rounds over the RMs;
    ``backoff`` / ``max_backoff``: seconds between rounds.
    """

    def __init__(
        self,
        urls: str | Iterable[str],
        *,
        user: str | None = None,
        auth: AuthHook | None = None,
        timeout: float = 10.0,
        deadline: float = 30.0,
        max_attempts: int = 4,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        verify: bool | str = True,
        trust_env: bool = False,
    ) -> None:
        self._urls = _split_urls(urls)
        self._active = 0
        self._lock = threading.Lock()
        self.user = user
        self.auth = auth
        self.timeout = timeout
        self.deadline = deadline
        self.max_attempts = max(1, max_attempts)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._http = httpx.Client(
            follow_redirects=False,
            verify=verify,
            trust_env=trust_env,
            headers={"Accept": "application/json"},
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> RMClient:
        """Build from ``YARN_ARBITER_RM_URL`` (comma-separated, ``yarn_bridge.env``)."""
        env = os.environ if environ is None else environ
        if not env.get(ENV_RM_URL):
            raise ValueError(f"{ENV_RM_URL} is not set (comma-separated RM web URLs)")
        return cls(env[ENV_RM_URL], **kwargs)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(self._urls)

    @property
    def active_url(self) -> str:
        """The RM that answered last (the first URL until one has)."""
        with self._lock:
            return self._urls[self._active]

    # -- transport ---------------------------------------------------------------------------

    def _index_of(self, base: str) -> int:
        with self._lock:
            if base not in self._urls:
                self._urls.append(base)  # learned from a standby's redirect
            return self._urls.index(base)

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = True,
        check: Callable[[httpx.Response], None] | None = None,
    ) -> httpx.Response:
        endpoint = f"{method} {path}"
        start = time.monotonic()
        deadline = start + self.deadline
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if self.user is not None:
            query["user.name"] = self.user
        seen: list[str] = []
        for round_no in range(self.max_attempts):
            with self._lock:
                first = self._active
                n = len(self._urls)
            order = [(first + k) % n for k in range(n)]
            tried: set[int] = set()
            while order:
                idx = order.pop(0)
                if idx in tried:
                    continue
                tried.add(idx)
                base = self._urls[idx]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RMUnavailable(
                        f"no answer within the {self.deadline:g} s deadline ({len(seen)} attempts)",
                        endpoint=endpoint,
                        attempts=seen,
                    )
                url = base + path
                headers = dict(self.auth(method, url)) if self.auth is not None else {}
                try:
                    resp = self._http.request(
                        method,
                        url,
                        params=query,
                        json=body,
                        headers=headers,
                        timeout=min(self.timeout, remaining),
                    )
                except httpx.TransportError as exc:
                    timeout = isinstance(exc, httpx.TimeoutException)
                    seen.append(
                        f"{base}: timeout ({type(exc).__name__})"
                        if timeout
                        else f"{base}: {type(exc).__name__}: {exc}"
                    )
                    if not idempotent and not isinstance(exc, _NOT_SENT):
                        raise RMUnavailable(
                            f"{'timed out' if timeout else 'connection lost'} after sending; "
                            "the RM may have acted on it (not re-sent)",
                            endpoint=endpoint,
                            attempts=seen,
                        ) from exc
                    continue
                is_standby, target = _standby_target(resp)
                if not is_standby and check is not None:
                    try:
                        check(resp)
                    except _Standby as sb:
                        is_standby, target = True, sb.target
                if is_standby:
                    seen.append(f"{base}: standby" + (f" (active: {target})" if target else ""))
                    if target is not None:
                        t = self._index_of(target)
                        if t not in tried:
                            order.insert(0, t)
                    continue
                if resp.status_code in _RETRYABLE_STATUS:
                    seen.append(f"{base}: HTTP {resp.status_code}")
                    continue
                with self._lock:
                    self._active = idx
                return resp
            if round_no + 1 < self.max_attempts:
                pause = min(self.backoff * (2**round_no), self.max_backoff)
                pause = min(pause, max(0.0, deadline - time.monotonic()))
                if pause > 0:
                    time.sleep(pause)
        raise RMUnavailable(
            f"no active ResourceManager after {self.max_attempts} rounds over "
            f"{', '.join(self._urls)}",
            endpoint=endpoint,
            attempts=seen,
        )

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        ok: Iterable[int] = (200,),
        idempotent: bool = True,
        check: Callable[[httpx.Response], None] | None = None,
    ) -> httpx.Response:
        resp = self._request(
            method, path, params=params, body=body,
            idempotent=idempotent, check=check,
        )  # fmt: skip
        if resp.status_code in set(ok):
            return resp
        endpoint = f"{method} {path}"
        message, exception = _error_message(resp)
        status = resp.status_code
        detail = f"HTTP {status}" + (f" {exception}" if exception else "") + f": {message}"
        kind: type[RMHTTPError]
        if status == 400:
            kind = RMBadRequest
        elif status in (401, 403):
            kind = RMAuthError
        elif status == 404:
            kind = RMNotFound
        else:
            kind = RMHTTPError
        raise kind(detail, endpoint=endpoint, status=status, exception=exception)

    @staticmethod
    def _decode(resp: httpx.Response, endpoint: str) -> Any:
        ctype = resp.headers.get("content-type", "").split(";")[0].strip()
        text = resp.text
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            snippet = text[max(0, exc.pos - 30) : exc.pos + 30]
            what = "empty body" if not text.strip() else f"{exc.msg} at char {exc.pos}"
            raise RMResponseError(
                f"malformed JSON ({what}; content-type {ctype or 'none'}; "
                f"{len(text)} chars; near {snippet!r})",
                endpoint=endpoint,
            ) from None

    def _get(self, path: str, params: Mapping[str, Any] | None = None,
             check: Callable[[httpx.Response], None] | None = None) -> Any:  # fmt: skip
        resp = self._call("GET", path, params=params, check=check)
        return self._decode(resp, f"GET {path}")

    # -- cluster -----------------------------------------------------------------------------

    def cluster_info(self) -> ClusterInfo:
        """``GET /info`` of the *active* RM (a standby's own answer, ``haState: STANDBY``,
        sends the client on to the next RM)."""
        path = f"{WS_PATH}/info"

        def check(resp: httpx.Response) -> None:
            if resp.status_code != 200:
                return
            try:
                info = parse_cluster_info(self._decode(resp, f"GET {path}"), f"GET {path}")
            except RMResponseError:
                return  # reported by the caller's parse below
            if info.ha_state == "STANDBY":
                raise _Standby(None)

        return parse_cluster_info(self._get(path, check=check), f"GET {path}")

    def cluster_metrics(self) -> ClusterMetrics:
        path = f"{WS_PATH}/metrics"
        return parse_cluster_metrics(self._get(path), f"GET {path}")

    def scheduler(self) -> SchedulerInfo:
        path = f"{WS_PATH}/scheduler"
        return parse_scheduler(self._get(path), f"GET {path}")

    def nodes(self, states: Iterable[str] | None = None) -> list[Node]:
        path = f"{WS_PATH}/nodes"
        params = {"states": ",".join(states)} if states else None
        return parse_nodes(self._get(path, params), f"GET {path}")

    def node(self, node_id: str) -> Node:
        path = f"{WS_PATH}/nodes/{node_id}"
        return parse_node(self._get(path), f"GET {path}")

    def gpu_capacity(self) -> tuple[int, int]:
        """(GPUs on RUNNING nodes, GPUs in use on them): the sum over :meth:`nodes`."""
        running = [n for n in self.nodes() if n.usable]
        return sum(n.gpus_total for n in running), sum(n.gpus_used for n in running)

    # -- apps --------------------------------------------------------------------------------

    def apps(
        self,
        *,
        states: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        queue: str | None = None,
        user: str | None = None,
        application_types: Iterable[str] | None = None,
        final_status: str | None = None,
        name: str | None = None,
        limit: int | None = None,
        started_time_begin: int | None = None,
        deselects: Iterable[str] | None = None,
    ) -> list[App]:
        """``GET /apps`` with the RM's own filters (tags match *any*; ``queue`` matches only
        unfinished apps, as in Hadoop)."""
        params = {
            "states": ",".join(states) if states else None,
            "applicationTags": ",".join(tags) if tags else None,
            "queue": queue,
            "user": user,
            "applicationTypes": ",".join(application_types) if application_types else None,
            "finalStatus": final_status,
            "name": name,
            "limit": limit,
            "startedTimeBegin": started_time_begin,
            "deSelects": ",".join(deselects) if deselects else None,
        }
        path = f"{WS_PATH}/apps"
        return parse_apps(self._get(path, params), f"GET {path}")

    def app(self, app_id: str) -> App:
        path = f"{WS_PATH}/apps/{app_id}"
        return parse_app(self._get(path), f"GET {path}")

    def app_state(self, app_id: str) -> str:
        path = f"{WS_PATH}/apps/{app_id}/state"
        return _Obj(self._get(path), f"GET {path}", "response").str("state")

    def kill_app(self, app_id: str, *, wait: bool = True, poll: float = 0.1) -> str:
        """``PUT /apps/{id}/state {"state":"KILLED"}``. YARN answers 202 (with the state at the
        time) while the kill is in flight; with ``wait`` the PUT is repeated until a 200 or the
        deadline. Returns the last state the RM reported (``KILLED``, or the final state of an
        app that had already ended)."""
        path = f"{WS_PATH}/apps/{app_id}/state"
        end = time.monotonic() + self.deadline
        while True:
            resp = self._call("PUT", path, body={"state": "KILLED"}, ok=(200, 202))
            state = _Obj(self._decode(resp, f"PUT {path}"), f"PUT {path}", "response").str("state")
            if resp.status_code == 200 or not wait or time.monotonic() + poll > end:
                return state
            time.sleep(poll)

    def app_queue(self, app_id: str) -> str:
        path = f"{WS_PATH}/apps/{app_id}/queue"
        return _Obj(self._get(path), f"GET {path}", "response").str("queue")

    def move_app(self, app_id: str, queue: str) -> str:
        """``PUT /apps/{id}/queue``; returns the queue the RM reports afterwards."""
        path = f"{WS_PATH}/apps/{app_id}/queue"
        resp = self._call("PUT", path, body={"queue": queue})
        return _Obj(self._decode(resp, f"PUT {path}"), f"PUT {path}", "response").str("queue")

    def app_priority(self, app_id: str) -> int:
        path = f"{WS_PATH}/apps/{app_id}/priority"
        return _Obj(self._get(path), f"GET {path}", "response").int("priority")

    def set_app_priority(self, app_id: str, priority: int) -> int:
        """``PUT /apps/{id}/priority`` (Capacity Scheduler only); returns the priority the RM
        applied (capped at ``yarn.cluster.max-application-priority``)."""
        path = f"{WS_PATH}/apps/{app_id}/priority"
        resp = self._call("PUT", path, body={"priority": int(priority)})
        return _Obj(self._decode(resp, f"PUT {path}"), f"PUT {path}", "response").int("priority")

    def app_timeouts(self, app_id: str) -> tuple[AppTimeout, ...]:
        path = f"{WS_PATH}/apps/{app_id}/timeouts"
        return parse_timeouts(self._get(path), f"GET {path}")

    def app_timeout(self, app_id: str, kind: str = "LIFETIME") -> AppTimeout:
        path = f"{WS_PATH}/apps/{app_id}/timeouts/{kind}"
        return parse_timeout(self._get(path), f"GET {path}")

    def set_app_lifetime(self, app_id: str, expiry: datetime | float) -> AppTimeout:
        """``PUT /apps/{id}/timeout`` with ``LIFETIME`` ending at ``expiry`` (a datetime or epoch
        seconds): YARN kills the app then. Returns the timeout as the RM now reports it."""
        path = f"{WS_PATH}/apps/{app_id}/timeout"
        body = {"timeout": {"type": "LIFETIME", "expiryTime": format_expiry(expiry)}}
        resp = self._call("PUT", path, body=body)
        return parse_timeout(self._decode(resp, f"PUT {path}"), f"PUT {path}")

    def new_application(self) -> NewApplication:
        path = f"{WS_PATH}/apps/new-application"
        resp = self._call("POST", path)
        return parse_new_application(self._decode(resp, f"POST {path}"), f"POST {path}")

    def submit_app(self, submission: AppSubmission | Mapping[str, Any]) -> str:
        """``POST /apps`` (202 + ``Location``); returns the application id. A submission that
        timed out or lost its connection after being sent is not re-sent
        (:class:`RMUnavailable` says so; look the id up with :meth:`app`)."""
        body = submission.to_json() if isinstance(submission, AppSubmission) else dict(submission)
        path = f"{WS_PATH}/apps"
        resp = self._call("POST", path, body=body, ok=(200, 202), idempotent=False)
        location = resp.headers.get("location", "")
        app_id = location.rstrip("/").rsplit("/", 1)[-1] if location else ""
        app_id = app_id or str(body.get("application-id", ""))
        if not app_id:
            raise RMResponseError(
                "no Location header and no application-id", endpoint=f"POST {path}"
            )
        return app_id

    # -- scheduler configuration -------------------------------------------------------------

    def scheduler_conf(self) -> dict[str, str]:
        """``GET /scheduler-conf``: the mutable scheduler configuration (name -> value)."""
        path = f"{WS_PATH}/scheduler-conf"
        return parse_scheduler_conf(self._get(path), f"GET {path}")

    def update_scheduler_conf(self, update: SchedConfUpdate | Mapping[str, Any]) -> str:
        """``PUT /scheduler-conf``. Needs a mutable conf store and YARN admin rights; an invalid
        resulting configuration is an :class:`RMBadRequest` carrying the RM's reason."""
        body = update.to_json() if isinstance(update, SchedConfUpdate) else dict(update)
        path = f"{WS_PATH}/scheduler-conf"
        resp = self._call("PUT", path, body=body)
        return resp.text.strip()


def _async_method(name: str) -> Any:
    async def method(self: AsyncRMClient, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"AsyncRMClient.{name}"
    method.__doc__ = f"Awaitable :meth:`RMClient.{name}` (runs in a worker thread)."
    return method


class AsyncRMClient:
    """The same calls as :class:`RMClient`, awaitable. Each call runs the sync client in a
    worker thread (``asyncio.to_thread``): same HA state, retries and errors, no second
    implementation to keep in step. Construct with the same arguments as :class:`RMClient`."""

    def __init__(self, urls: str | Iterable[str], **kwargs: Any) -> None:
        self.sync = RMClient(urls, **kwargs)

    @property
    def active_url(self) -> str:
        return self.sync.active_url

    async def aclose(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> AsyncRMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    cluster_info = _async_method("cluster_info")
    cluster_metrics = _async_method("cluster_metrics")
    scheduler = _async_method("scheduler")
    nodes = _async_method("nodes")
    node = _async_method("node")
    gpu_capacity = _async_method("gpu_capacity")
    apps = _async_method("apps")
    app = _async_method("app")
    app_state = _async_method("app_state")
    kill_app = _async_method("kill_app")
    app_queue = _async_method("app_queue")
    move_app = _async_method("move_app")
    app_priority = _async_method("app_priority")
    set_app_priority = _async_method("set_app_priority")
    app_timeouts = _async_method("app_timeouts")
    app_timeout = _async_method("app_timeout")
    set_app_lifetime = _async_method("set_app_lifetime")
    new_application = _async_method("new_application")
    submit_app = _async_method("submit_app")
    scheduler_conf = _async_method("scheduler_conf")
    update_scheduler_conf = _async_method("update_scheduler_conf")
