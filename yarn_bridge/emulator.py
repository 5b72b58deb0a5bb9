"""A YARN ResourceManager emulator: the RM REST API over a simulated GPU cluster, for tests.

No Hadoop distribution is installable here (``ARCHITECTURE.md`` principle 5), so this module
serves ``/ws/v1/cluster/*`` with the JSON of Hadoop 3.3 / 3.4 (``ResourceManagerRest.md`` and
the ``webapp/dao`` classes; spec ``../shared/spec/yarn-hive-integration.md`` §1.1-1.6, §1.8)
and 3.5 (as a real 3.5.0 RM answered: ``tests/golden/rm-3.5.0``).
The compose cluster runs the real RM; the documented key sets below are what the tests hold
the emulator to (``tests/test_yarn_emulator.py``).

Pieces:

* :class:`SimCluster`: the state (nodes with ``yarn.io/gpu``, memory, vcores; applications;
  Capacity Scheduler configuration or Fair Scheduler weights) and the JSON views. Time is a
  :class:`Clock` the tests can drive (``manual=True``: time moves only by ``advance``); state
  is brought up to date lazily, event by event, whenever it is read.
* :class:`RMEmulator`: a ``ThreadingHTTPServer`` shell around one cluster, with faults on
  demand (outage as connection refused or 503, slow responses, injected malformed/partial
  answers, restart with or without recovered apps). ``RMEmulator(...).start()`` returns its URL.
  The same faults are on HTTP at :data:`FAULTS_PATH` (``/emulator/faults``: ``GET`` shows the
  faults in force, ``POST`` a JSON object changes them; keys in ``yarn_bridge.cli.FAULTS_HELP``)
  so that ``yarn-arbiter emulate-rm`` can be driven from outside the process.
* :class:`RMHAPair`: two emulators over one cluster (the shared state store), one ACTIVE, one
  STANDBY, ``failover()`` on demand.

Application life cycle (per app): submitted -> ``NEW`` for ``new_seconds`` -> ``ACCEPTED`` ->
``RUNNING`` once ``start_seconds`` have passed *and* its AM container (memory, vcores) plus one
container per requested GPU fit on RUNNING nodes (first fit, all or nothing, priority then
submission order; under the Capacity Scheduler also within the queue's maximum capacity) ->
``FINISHED`` / ``SUCCEEDED`` after its duration (``app_seconds``, optionally jittered by a
seeded RNG). Kill -> ``KILLED``; LIFETIME timeout expiry -> ``KILLED`` with Hadoop's
diagnostics; submission to an unknown or STOPPED Capacity queue -> ``FAILED``. A lost node
takes its containers with it: an app whose AM was there starts a new attempt (``ACCEPTED``)
or ``FAILED`` when ``max-app-attempts`` is spent; lost GPU containers are placed again.

Decisions (emulator only, not Hadoop's):

* The REST submission API cannot give an AM a GPU (spec §1.5); a real AM asks for GPU
  containers over AMRM. The emulator stands in for that AM: an ``environment`` entry
  :data:`EMULATOR_GPUS_ENV` in ``am-container-spec`` makes it hold that many 1-GPU containers
  while RUNNING, and :data:`EMULATOR_SECONDS_ENV` sets its duration.
* Capacity Scheduler queues (the default is ``root.{default,hive,ml}`` at 20/40/40, the
  spec §5.3 layout; the compose cluster's ``default,analytics,gpu`` absolute vectors are one
  ``queues=`` away) are percentages or **absolute resource vectors**
  (``[memory=8192,vcores=8,yarn.io/gpu=2]``, memory in MB or with Mi/Gi/Ti, spec §1.6).
  ``PUT /scheduler-conf`` is validated as Hadoop does in legacy mode: percentage siblings sum
  to 100 and ``capacity <= maximum-capacity``; siblings (and a non-root parent and its
  children) share one mode, so a switch to vectors updates them all in one mutation; a vector's
  minimum is at most its maximum vector; a removed queue must be STOPPED and empty. Every
  accepted mutation is recorded (:attr:`SimCluster.conf_log`). Effective resources
  (``effectiveMinResource`` / ``effectiveMaxResource``, and what the scheduler enforces): a
  percentage of the parent's; a vector as configured, a resource missing from a minimum vector
  is 0 and from a maximum vector the parent's maximum, and when siblings' minimums add up to
  more than the parent's (nodes lost) they are scaled down in proportion, as the RM does. In
  absolute mode ``capacity`` / ``absoluteCapacity`` are dominant shares (DominantResourceCalculator
  ``ratio``) of the parent's / cluster's resources.
  The Fair Scheduler is flat (leaves under ``root`` with weights); fair share =
  cluster x weight / sum of the weights of *active* leaves (those with live apps), steady fair
  share the same over all leaves. The scheduler-conf API answers 400 there, as in Hadoop
  (only a ``MutableConfScheduler`` supports it).
* Shapes are the 3.4 ``ResourceManagerRest.md`` examples where they exist and the DAO fields
  otherwise; keys Hadoop omits when null are omitted here too (``trackingUrl`` before RUNNING,
  ``usedResource``/``availableResource`` of inactive nodes, ``resourceInfo`` outside the
  Capacity Scheduler or after the app ends). ``resourceSecondsMap`` is JAXB's
  ``{"entry":[{"key":..,"value":".."}]}`` [check on the compose cluster]. Empty lists answer
  ``{"apps":null}`` / ``{"nodes":null}`` (the known Hadoop quirk). ``GET /scheduler-conf`` is
  ``{"property":[{"name","value"}]}`` (``ConfInfo`` without its root element) [check].
* A standby RM answers ``/ws/v1/cluster/info`` itself (``haState: STANDBY``) and every other
  REST path with ``307`` + ``Location`` to the active RM (``standby_mode="redirect"``, Hadoop
  2.8+) or with the older ``200`` "This is standby RM. Redirecting to the current active RM"
  page and a ``Refresh`` header (``standby_mode="refresh"``).
* Application tags are lower-cased (YARN does); the app's ``queue`` is the leaf name under the
  Capacity Scheduler and the full path under the Fair Scheduler, as Hadoop 3.3 reports them.
* **Hadoop line** (``hadoop_version="3.4"``, the default, or ``"3.3"``; ``emulate-rm
  --hadoop-version``): 3.4 serves the merged 3.4.1 shapes above; 3.3 serves 3.3.6 (the
  version the compose cluster's ``apache/hadoop:3.3.6`` reports) and omits
  :data:`CS_34_ONLY_KEYS` from every Capacity Scheduler queue info and partition
  (``queueCapacityVectorInfo``, ``weight``/``normalizedWeight``, ``mode``, ``queueType``,
  ``creationMethod``, ``autoCreationEligibility``, the ``autoQueue*TemplateProperties``: 3.4's
  weight mode, flexible auto queue creation and capacity vectors; spec §1.3 lists them in the
  3.4-era example and says to parse by key presence). Everything else is served alike
  [check against the compose cluster's RM]. ``"3.5"`` serves 3.5.0 as a real RM answered
  (golden files ``tests/golden/rm-3.5.0``, held to by ``tests/test_emulator_golden.py``):
  its REST layer is Jersey 2 (:attr:`SimCluster.jersey2`), so empty list wrappers are ``{}``
  (``{"apps":{}}``, not ``null``), empty maps and lists are omitted (``attributes`` of a
  ``resourceInformation``, ``resourceRequests``, ``preemptedResourceSecondsMap``),
  ``resourceSecondsMap`` values are numbers, plain-text answers (scheduler-conf) are labelled
  ``application/json``, a NotFoundException's message has no ``java.lang.Exception:`` prefix
  and an app's ``queue`` is the full path (``root.gpu``); ``/metrics`` adds
  :data:`CLUSTER_METRICS_35_KEYS`, nodes :data:`NODE_35_KEYS`. On every line (the capture
  showed the old emulator wrong, and nothing is version-specific about it): a leaf's
  ``users.user[]`` is the whole ``UserInfo`` (:data:`CS_USER_KEYS`), ``deSelects=
  appNodeLabelExpression`` has no effect (Hadoop's ``AppInfo`` sets the field before testing
  it), ``/metrics`` has ``utilizedMBPercent`` / ``utilizedVirtualCoresPercent`` /
  ``rmSchedulerBusyPercent`` and the ``202`` of ``POST /apps`` has no Content-Type.
* ``am_registers=False`` models an AM that never registers (the golden capture's ``sleep``
  AM): its container is allocated and runs, the app stays ``ACCEPTED`` with the RM's
  "waiting for AM container to Register" diagnostics and asks for no GPU containers, until it
  is killed or its lifetime ends.
* **Fault control** over HTTP (:data:`FAULTS_PATH`, outside ``/ws/v1`` so it can never be
  mistaken for a Hadoop endpoint; ``control=False`` turns it off): never delayed, never in a
  503/drop outage, not in :attr:`RMEmulator.requests`. A ``"refused"`` outage closes its port
  too, so it needs ``outage_seconds``; outages and restarts asked for over HTTP start on a
  timer, after the answer is sent. A body is checked whole before anything changes (400 and no
  change on any error).
* ``Authorization: Negotiate <token>`` stands for a SPNEGO-authenticated user (``spnego``); any
  other ``Authorization`` value authenticates no one, as Hadoop's Kerberos handler.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from arbiter.cluster import Cluster

__all__ = [
    "APP_35_EMPTY_ABSENT_KEYS",
    "APP_KEYS",
    "APP_OPTIONAL_KEYS",
    "APP_TIMEOUT_KEYS",
    "CLUSTER_INFO_KEYS",
    "CLUSTER_METRICS_35_KEYS",
    "CLUSTER_METRICS_KEYS",
    "CS_34_ONLY_KEYS",
    "CS_LEAF_QUEUE_KEYS",
    "CS_PARENT_QUEUE_KEYS",
    "CS_ROOT_KEYS",
    "CS_USER_KEYS",
    "EMULATOR_GPUS_ENV",
    "EMULATOR_SECONDS_ENV",
    "FAULTS_PATH",
    "FS_LEAF_QUEUE_KEYS",
    "FS_PARENT_QUEUE_KEYS",
    "FS_SCHEDULER_INFO_KEYS",
    "HADOOP_VERSIONS",
    "NEW_APPLICATION_KEYS",
    "NODE_35_KEYS",
    "NODE_INACTIVE_ABSENT_KEYS",
    "NODE_KEYS",
    "NODE_OPTIONAL_KEYS",
    "RESOURCE_INFORMATION_35_KEYS",
    "RESOURCE_INFORMATION_KEYS",
    "RESOURCE_KEYS",
    "SUBMISSION_CONTEXT_KEYS",
    "Clock",
    "RMEmulator",
    "RMHAPair",
    "SimCluster",
]

WS: Final = "/ws/v1/cluster"
GPU: Final = "yarn.io/gpu"
LONG_MAX: Final = 9223372036854775807
INT_MAX: Final = 2147483647
HADOOP_VERSION: Final = "3.4.1"
#: ``--hadoop-version`` line -> the release whose shapes are served (3.3.6: the compose image;
#: 3.5.0: the local Hadoop of ``yarn_bridge.local_hadoop``, golden files tests/golden/rm-3.5.0).
HADOOP_VERSIONS: Final = {"3.3": "3.3.6", "3.4": HADOOP_VERSION, "3.5": "3.5.0"}
_BUILT_ON: Final = {"3.3": "2023-06-18T08:22Z", "3.4": "2024-10-09T14:57Z",
                    "3.5": "2026-03-24T17:01Z"}  # fmt: skip
CS_PREFIX: Final = "yarn.scheduler.capacity"
EMULATOR_GPUS_ENV: Final = "YARN_EMULATOR_GPUS"
EMULATOR_SECONDS_ENV: Final = "YARN_EMULATOR_SECONDS"
LIFETIME_DIAGNOSTICS: Final = (
    "Application is killed by ResourceManager as it has exceeded the lifetime period."
)
#: What the RM says of an app whose AM container runs but has not registered (``am_registers``).
AM_WAITING_DIAGNOSTICS: Final = (
    "AM container is launched, waiting for AM container to Register with RM"
)

# --------------------------------------------------------------------------------------------
# The documented shapes (key sets). Sources: ResourceManagerRest.md (3.4 examples, fork copy
# brumi1024/hadoop@0895f5c0) and the DAO classes in
# hadoop-yarn-server-resourcemanager/.../webapp/dao (apache/hadoop).
# --------------------------------------------------------------------------------------------

#: ``ClusterInfo`` (doc "Elements of the clusterInfo object").
CLUSTER_INFO_KEYS: Final = frozenset({
    "id", "startedOn", "state", "haState", "rmStateStoreName", "resourceManagerVersion",
    "resourceManagerBuildVersion", "resourceManagerVersionBuiltOn", "hadoopVersion",
    "hadoopBuildVersion", "hadoopVersionBuiltOn", "haZooKeeperConnectionState",
})  # fmt: skip

#: ``ClusterMetricsInfo`` fields (DAO, apache/hadoop@ee91492f; the doc table lists a subset),
#: plus ``utilizedMBPercent``, ``utilizedVirtualCoresPercent`` and ``rmSchedulerBusyPercent``,
#: which a 3.3-era RM already reports (a 2022 ``/metrics`` answer in Elastic's Hadoop
#: integration docs) and the 3.5.0 capture confirms.
#: ``totalReservedResourcesAcrossPartition`` is filled by the Capacity Scheduler only.
CLUSTER_METRICS_KEYS: Final = frozenset({
    "appsSubmitted", "appsCompleted", "appsPending", "appsRunning", "appsFailed", "appsKilled",
    "reservedMB", "availableMB", "allocatedMB", "pendingMB", "reservedVirtualCores",
    "availableVirtualCores", "allocatedVirtualCores", "pendingVirtualCores",
    "containersAllocated", "containersReserved", "containersPending", "totalMB",
    "totalVirtualCores", "totalNodes", "lostNodes", "unhealthyNodes", "decommissioningNodes",
    "decommissionedNodes", "rebootedNodes", "activeNodes", "shutdownNodes",
    "totalUsedResourcesAcrossPartition", "totalClusterResourcesAcrossPartition",
    "totalReservedResourcesAcrossPartition", "totalAllocatedContainersAcrossPartition",
    "crossPartitionMetricsAvailable", "utilizedMBPercent", "utilizedVirtualCoresPercent",
    "rmSchedulerBusyPercent",
})  # fmt: skip
#: ``ClusterMetricsInfo`` keys seen first in the 3.5.0 capture (not served for 3.3 / 3.4: not
#: verified there).
CLUSTER_METRICS_35_KEYS: Final = frozenset({
    "utilizedMB", "utilizedVirtualCores", "containerAssignedPerSecond", "rmEventQueueSize",
    "schedulerEventQueueSize",
})  # fmt: skip

#: ``ResourceInfo`` (3.1+) and one ``resourceInformation`` entry (spec §1.2).
RESOURCE_KEYS: Final = frozenset({"memory", "vCores", "resourceInformations"})
RESOURCE_INFORMATION_KEYS: Final = frozenset({
    "attributes", "maximumAllocation", "minimumAllocation", "name", "resourceType", "units",
    "value",
})  # fmt: skip
#: 3.5 (Jersey 2) omits the empty ``attributes`` map (and every other empty map or list).
RESOURCE_INFORMATION_35_KEYS: Final = RESOURCE_INFORMATION_KEYS - {"attributes"}

#: ``NodeInfo`` (3.x DAO, spec §1.2). Inactive nodes (LOST, DECOMMISSIONED, ...) have no
#: scheduler report, so the RM omits ``usedResource`` and ``availableResource``;
#: ``nodeLabels`` is omitted when empty.
NODE_KEYS: Final = frozenset({
    "rack", "state", "id", "nodeHostName", "nodeHTTPAddress", "lastHealthUpdate", "version",
    "healthReport", "numContainers", "usedMemoryMB", "availMemoryMB", "usedVirtualCores",
    "availableVirtualCores", "numRunningOpportContainers", "usedMemoryOpportGB",
    "usedVirtualCoresOpport", "numQueuedContainers", "allocationTags", "resourceUtilization",
    "usedResource", "availableResource", "nodeAttributesInfo", "totalResource",
})  # fmt: skip
NODE_OPTIONAL_KEYS: Final = frozenset({"nodeLabels"})
#: ``NodeInfo`` keys seen first in the 3.5.0 capture (percentages, as floats).
NODE_35_KEYS: Final = frozenset({"memUtilization", "cpuUtilization"})
NODE_INACTIVE_ABSENT_KEYS: Final = frozenset({"usedResource", "availableResource"})

#: ``AppInfo`` (apache/hadoop@58b6b120, plus ``launchTime`` and ``masterNodeId`` of 3.3).
#: ``APP_OPTIONAL_KEYS`` are null, hence omitted, in some states (see module docstring).
APP_KEYS: Final = frozenset({
    "id", "user", "name", "queue", "state", "finalStatus", "progress", "trackingUI",
    "trackingUrl", "diagnostics", "clusterId", "applicationType", "applicationTags",
    "priority", "startedTime", "launchTime", "finishedTime", "elapsedTime", "amContainerLogs",
    "amHostHttpAddress", "amRPCAddress", "masterNodeId", "allocatedMB", "allocatedVCores",
    "reservedMB", "reservedVCores", "runningContainers", "memorySeconds", "vcoreSeconds",
    "queueUsagePercentage", "clusterUsagePercentage", "resourceSecondsMap",
    "preemptedResourceMB", "preemptedResourceVCores", "numNonAMContainerPreempted",
    "numAMContainerPreempted", "preemptedMemorySeconds", "preemptedVcoreSeconds",
    "preemptedResourceSecondsMap", "resourceRequests", "logAggregationStatus",
    "unmanagedApplication", "appNodeLabelExpression", "amNodeLabelExpression", "resourceInfo",
    "timeouts",
})  # fmt: skip
APP_OPTIONAL_KEYS: Final = frozenset({
    "trackingUrl", "amContainerLogs", "amHostHttpAddress", "amRPCAddress", "resourceInfo",
})  # fmt: skip
APP_TIMEOUT_KEYS: Final = frozenset({"type", "expiryTime", "remainingTimeInSeconds"})
APP_PARTITION_KEYS: Final = frozenset({
    "partitionName", "used", "reserved", "pending", "amUsed", "amLimit", "userAmLimit",
})  # fmt: skip
#: ``AppInfo`` keys 3.5 (Jersey 2) omits when empty: the emulator never preempts and reports
#: no outstanding requests, so it never serves them on that line.
APP_35_EMPTY_ABSENT_KEYS: Final = frozenset({"resourceRequests", "preemptedResourceSecondsMap"})
#: A Capacity Scheduler leaf's ``users.user[]`` (``UserInfo``).
CS_USER_KEYS: Final = frozenset({
    "username", "resourcesUsed", "numPendingApplications", "numActiveApplications",
    "AMResourceUsed", "userResourceLimit", "resources", "userWeight", "isActive",
})  # fmt: skip

#: ``NewApplication`` (root unwrapped).
NEW_APPLICATION_KEYS: Final = frozenset({"application-id", "maximum-resource-capability"})

#: ``ApplicationSubmissionContextInfo`` keys the RM accepts (spec §1.5).
SUBMISSION_CONTEXT_KEYS: Final = frozenset({
    "application-id", "application-name", "queue", "priority", "am-container-spec",
    "unmanaged-AM", "cancel-tokens-when-complete", "max-app-attempts", "resource",
    "application-type", "keep-containers-across-application-attempts", "application-tags",
    "app-node-label-expression", "am-container-node-label-expression",
    "log-aggregation-context", "attempt-failures-validity-interval", "reservation-id",
    "am-black-listing-requests",
})  # fmt: skip

#: Capacity Scheduler, 3.4 doc example: the root ``schedulerInfo``, a parent queue and a leaf.
_CS_QUEUE_BASE = frozenset({
    "queuePath", "capacity", "usedCapacity", "maxCapacity", "absoluteCapacity",
    "absoluteMaxCapacity", "absoluteUsedCapacity", "weight", "normalizedWeight",
    "numApplications", "maxParallelApps", "queueName", "isAbsoluteResource", "state",
    "resourcesUsed", "hideReservationQueues", "nodeLabels", "allocatedContainers",
    "reservedContainers", "pendingContainers", "capacities", "resources",
    "minEffectiveCapacity", "maxEffectiveCapacity", "maximumAllocation", "queueAcls",
    "queuePriority", "orderingPolicyInfo", "autoCreateChildQueueEnabled", "leafQueueTemplate",
    "mode", "queueType", "creationMethod", "autoCreationEligibility",
    "autoQueueTemplateProperties", "autoQueueParentTemplateProperties",
    "autoQueueLeafTemplateProperties",
})  # fmt: skip
CS_PARENT_QUEUE_KEYS: Final = _CS_QUEUE_BASE | {"queues"}
CS_LEAF_QUEUE_KEYS: Final = _CS_QUEUE_BASE | {
    "type", "numActiveApplications", "numPendingApplications", "numContainers",
    "maxApplications", "maxApplicationsPerUser", "userLimit", "users", "userLimitFactor",
    "configuredMaxAMResourceLimit", "AMResourceLimit", "usedAMResource", "userAMResourceLimit",
    "preemptionDisabled", "intraQueuePreemptionDisabled", "defaultPriority",
    "isAutoCreatedLeafQueue", "maxApplicationLifetime", "defaultApplicationLifetime",
}  # fmt: skip
CS_ROOT_KEYS: Final = frozenset({
    "type", "capacity", "usedCapacity", "maxCapacity", "weight", "normalizedWeight",
    "queueCapacityVectorInfo", "queueName", "queuePath", "maxParallelApps",
    "isAbsoluteResource", "queues", "capacities", "health", "maximumAllocation", "queueAcls",
    "queuePriority", "orderingPolicyInfo", "mode", "queueType", "creationMethod",
    "autoCreationEligibility", "autoQueueTemplateProperties",
    "autoQueueParentTemplateProperties", "autoQueueLeafTemplateProperties",
})  # fmt: skip

#: Keys of the Capacity Scheduler's queue infos (root, queues and per-partition capacities)
#: that came with Hadoop 3.4's queue-capacity rework (weight mode, flexible auto queue
#: creation, capacity vectors): a 3.3 RM (``hadoop_version="3.3"``) omits them [check on the
#: compose cluster, apache/hadoop:3.3.6].
CS_34_ONLY_KEYS: Final = frozenset({
    "queueCapacityVectorInfo", "weight", "normalizedWeight", "mode", "queueType",
    "creationMethod", "autoCreationEligibility", "autoQueueTemplateProperties",
    "autoQueueParentTemplateProperties", "autoQueueLeafTemplateProperties",
})  # fmt: skip

#: Fair Scheduler (``FairSchedulerInfo``, ``FairSchedulerQueueInfo`` 3.3 DAO, doc tables).
FS_SCHEDULER_INFO_KEYS: Final = frozenset({"type", "rootQueue"})
_FS_QUEUE_BASE = frozenset({
    "maxApps", "minResources", "maxResources", "usedResources", "amUsedResources",
    "amMaxResources", "demandResources", "steadyFairResources", "fairResources",
    "clusterResources", "reservedResources", "maxContainerAllocation", "pendingContainers",
    "allocatedContainers", "reservedContainers", "queueName", "schedulingPolicy", "preemptable",
})  # fmt: skip
FS_PARENT_QUEUE_KEYS: Final = _FS_QUEUE_BASE | {"childQueues"}
FS_LEAF_QUEUE_KEYS: Final = _FS_QUEUE_BASE | {"type", "numPendingApps", "numActiveApps"}

_JAVA_EXCEPTIONS: Final = {
    "BadRequestException": "org.apache.hadoop.yarn.webapp.BadRequestException",
    "NotFoundException": "org.apache.hadoop.yarn.webapp.NotFoundException",
    "ForbiddenException": "org.apache.hadoop.yarn.webapp.ForbiddenException",
    "AuthorizationException": "org.apache.hadoop.security.authorize.AuthorizationException",
    "WebApplicationException": "javax.ws.rs.WebApplicationException",
}

FINAL = frozenset({"FINISHED", "FAILED", "KILLED"})
LIVE = frozenset({"NEW", "ACCEPTED", "RUNNING"})


# --------------------------------------------------------------------------------------------
# Clock
# --------------------------------------------------------------------------------------------


class Clock:
    """Wall-clock time in epoch milliseconds, plus an offset :meth:`advance` adds to.
    ``manual=True`` freezes it, so only :meth:`advance` moves time (tests)."""

    def __init__(self, *, manual: bool = False, start: float | None = None) -> None:
        self.manual = manual
        self._base = time.time() if start is None else start
        self._t0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            if self.manual:
                return self._base + self._offset
            return self._base + (time.monotonic() - self._t0) + self._offset

    def now_ms(self) -> int:
        return int(self.now() * 1000)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._offset += seconds


# --------------------------------------------------------------------------------------------
# Cluster state
# --------------------------------------------------------------------------------------------


class _HTTPError(Exception):
    def __init__(self, status: int, exception: str, message: str, text: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.exception = exception
        self.message = message
        self.text = text  # answer text/plain (scheduler-conf) rather than a RemoteException


def _bad(message: str) -> _HTTPError:
    return _HTTPError(400, "BadRequestException", message)


def _not_found(message: str) -> _HTTPError:
    return _HTTPError(404, "NotFoundException", message)


@dataclass
class _Node:
    host: str
    port: int
    rack: str
    memory_mb: int
    vcores: int
    gpus: int
    http_port: int = 8042
    state: str = "RUNNING"
    health_report: str = ""
    last_health_update: int = 0

    @property
    def id(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def active(self) -> bool:
        return self.state in ("RUNNING", "UNHEALTHY", "DECOMMISSIONING", "NEW")


@dataclass
class _Container:
    id: str
    node: str
    memory_mb: int
    vcores: int
    gpus: int
    is_am: bool


@dataclass
class _App:
    id: str
    name: str
    user: str
    queue: str  # full path
    app_type: str
    tags: tuple[str, ...]
    priority: int
    am_memory_mb: int
    am_vcores: int
    gpus: int
    duration_ms: int
    submitted_ms: int
    max_attempts: int = 1
    unmanaged: bool = False
    state: str = "NEW"
    final_status: str = "UNDEFINED"
    diagnostics: str = ""
    accepted_ms: int | None = None
    launched_ms: int | None = None
    finished_ms: int | None = None
    progress: float = 0.0
    attempt: int = 1
    am_node: str | None = None
    lifetime_ms: int | None = None
    containers: list[_Container] = field(default_factory=list)
    memory_ms: float = 0.0  # MB x ms
    vcore_ms: float = 0.0
    gpu_ms: float = 0.0
    container_seq: int = 0


def _ri(name: str, units: str, value: int) -> dict[str, Any]:
    return {
        "attributes": {},
        "maximumAllocation": LONG_MAX,
        "minimumAllocation": 0,
        "name": name,
        "resourceType": "COUNTABLE",
        "units": units,
        "value": value,
    }


_Res = tuple[float, ...]  # (memory MB, vcores, GPUs)

#: Resource names an absolute capacity vector may use, and their index in a ``_Res``.
_VECTOR_INDEX: Final = {"memory": 0, "memory-mb": 0, "vcores": 1, GPU: 2}
_VECTOR_RE: Final = re.compile(r"^\s*\[(.*)\]\s*$")
_UNITS: Final = {"": 1, "Mi": 1, "M": 1, "Gi": 1024, "G": 1024, "Ti": 1024 * 1024}


def _parse_vector(raw: str, where: str) -> dict[int, int] | None:
    """``[memory=4096,vcores=4,yarn.io/gpu=2]`` -> {0: 4096, 1: 4, 2: 2}; ``None`` for a
    percentage (anything not in brackets). Memory may carry Mi / Gi / Ti. 400 if malformed."""
    m = _VECTOR_RE.match(raw)
    if not m:
        return None
    out: dict[int, int] = {}
    for part in m.group(1).split(","):
        if not part.strip():
            continue
        name, sep, value = (x.strip() for x in part.partition("="))
        num = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", value)
        if not sep or name not in _VECTOR_INDEX or num is None or num.group(2) not in _UNITS:
            raise _HTTPError(400, "BadRequestException",
                             f"{where}={raw!r}: malformed absolute resource entry {part.strip()!r} "
                             f"(known resources: memory, vcores, {GPU})", text=True)  # fmt: skip
        scale = _UNITS[num.group(2)] if _VECTOR_INDEX[name] == 0 else 1
        out[_VECTOR_INDEX[name]] = int(num.group(1)) * scale
    return out


def _fmt_vector(vec: Mapping[int, float]) -> str:
    names = ("memory", "vcores", GPU)
    return "<" + ", ".join(f"{names[i]}:{int(v)}" for i, v in sorted(vec.items())) + ">"


def _ratio(num: _Res, den: _Res) -> float:
    """The dominant share of ``num`` in ``den`` (DominantResourceCalculator.ratio), <= 1."""
    shares = [a / b for a, b in zip(num, den, strict=True) if b > 0]
    return min(1.0, max(shares, default=0.0))


def _parse_iso(text: str) -> int:
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?$", text.strip())
    if not m:
        raise _bad(f"Invalid date format for expiryTime: {text!r} (expected ISO 8601)")
    zone = (m.group(3) or "+0000").replace("Z", "+0000").replace(":", "")
    frac = (m.group(2) or ".0")[1:]
    when = datetime.strptime(m.group(1) + zone, "%Y-%m-%dT%H:%M:%S%z")
    return int(when.timestamp() * 1000) + int(frac[:3].ljust(3, "0"))


def _iso(ms: int) -> str:
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}+0000"


def _kv(raw: Any, what: str) -> dict[str, str]:
    """JAXB map forms: {"entry":[{"key","value"}]} / {"entry":{..}} / [{"entry":..}] / plain."""
    if raw is None:
        return {}
    if isinstance(raw, list):
        out: dict[str, str] = {}
        for item in raw:
            out.update(_kv(item, what))
        return out
    if not isinstance(raw, dict):
        raise _bad(f"{what}: expected an object")
    if "entry" in raw:
        entries = raw["entry"]
        entries = entries if isinstance(entries, list) else [entries]
        out = {}
        for e in entries:
            if not isinstance(e, dict) or "key" not in e:
                raise _bad(f"{what}: entries need 'key' and 'value'")
            out[str(e["key"])] = "" if e.get("value") is None else str(e["value"])
        return out
    return {str(k): str(v) for k, v in raw.items()}


class SimCluster:
    """The simulated cluster behind one or two emulated RMs. Thread-safe (one lock).

    ``nodes`` x ``gpus_per_node`` identical nodes (or ``machines`` from an arbiter
    :class:`~arbiter.cluster.Cluster`, see :meth:`from_cluster`); ``scheduler`` is
    ``"capacity"`` or ``"fair"``; ``queues`` maps leaf name -> capacity % (Capacity) or weight
    (Fair). Durations are seconds on :attr:`clock`.
    """

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
        self.hadoop_line = hadoop_version
        self.version = HADOOP_VERSIONS[hadoop_version]
        #: 3.5 moved the REST layer to Jersey 2 (module docstring, "Hadoop line").
        self.jersey2 = hadoop_version == "3.5"
        self.am_registers = am_registers
        if app_seconds <= 0:
            raise ValueError("app_seconds must be > 0")
        self.lock = threading.RLock()
        self.clock = clock or Clock(manual=manual_clock)
        self.scheduler = scheduler
        self.app_seconds = app_seconds
        self.new_seconds = new_seconds
        self.start_seconds = start_seconds
        self.duration_jitter = duration_jitter
        self.rng = random.Random(seed)
        self.max_priority = max_priority
        self.max_allocation = (max_allocation_mb, max_allocation_vcores)
        self.gpu_container = (gpu_container_mb, gpu_container_vcores)
        self.recovery = recovery
        self.nodes: dict[str, _Node] = {}
        self.apps: dict[str, _App] = {}
        self.conf: dict[str, str] = {}
        self.fair_weights: dict[str, float] = {}
        self.conf_log: list[dict[str, Any]] = []
        self.conf_version = 0
        self._t = self.clock.now_ms()
        self.cluster_ts = self._t
        self._seq = 0
        self._issued: set[str] = set()
        leaves = dict(queues) if queues else {"default": 20.0, "hive": 40.0, "ml": 40.0}
        if scheduler == "capacity":
            self.conf = {
                f"{CS_PREFIX}.root.queues": ",".join(leaves),
                f"{CS_PREFIX}.resource-calculator":
                    "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
                f"{CS_PREFIX}.maximum-am-resource-percent": "0.5",
            }  # fmt: skip
            for name, cap in leaves.items():
                self.conf[f"{CS_PREFIX}.root.{name}.capacity"] = (
                    cap if isinstance(cap, str) else _num(cap)
                )
            try:
                self._validate_conf(self.conf)
            except _HTTPError as exc:
                raise ValueError(f"queues: {exc.message}") from None
        else:
            if queues is None:
                leaves = {"default": 1.0, "hive": 2.0, "ml": 2.0}
            self.fair_weights = {f"root.{n}": float(w) for n, w in leaves.items()}
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
        with self.lock:
            self.tick()
            node = _Node(host, port, rack, memory_mb, vcores, gpus,
                         last_health_update=self.clock.now_ms())  # fmt: skip
            if node.id in self.nodes and self.nodes[node.id].active:
                raise ValueError(f"node {node.id} is already registered")
            self.nodes[node.id] = node
            self._schedule(self._t)
            return node.id

    def _node(self, node_id: str) -> _Node:
        if node_id not in self.nodes:
            matches = [n for n in self.nodes.values() if n.host == node_id]
            if len(matches) != 1:
                raise KeyError(f"no node {node_id!r}")
            return matches[0]
        return self.nodes[node_id]

    def _deactivate(self, node_id: str, state: str, report: str) -> None:
        with self.lock:
            self.tick()
            node = self._node(node_id)
            node.state = state
            node.health_report = report
            node.last_health_update = self._t
            self._lose_containers(node.id, self._t)
            self._schedule(self._t)

    def lose_node(self, node_id: str) -> None:
        """The NodeManager stops heartbeating: LOST, its containers are gone."""
        self._deactivate(node_id, "LOST", "")

    def remove_node(self, node_id: str) -> None:
        """Decommission the node (it stays listed as DECOMMISSIONED)."""
        self._deactivate(node_id, "DECOMMISSIONED", "")

    def set_unhealthy(self, node_id: str, report: str = "disk failure") -> None:
        self._deactivate(node_id, "UNHEALTHY", report)

    def recover_node(self, node_id: str) -> None:
        """A LOST / UNHEALTHY / DECOMMISSIONED node comes back RUNNING (empty)."""
        with self.lock:
            self.tick()
            node = self._node(node_id)
            node.state, node.health_report = "RUNNING", ""
            node.last_health_update = self._t
            self._schedule(self._t)

    # -- apps (Python API) -------------------------------------------------------------------

    def new_application_id(self) -> str:
        with self.lock:
            self._seq += 1
            app_id = f"application_{self.cluster_ts}_{self._seq:04d}"
            self._issued.add(app_id)
            return app_id

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
        app_id = self.new_application_id()
        with self.lock:
            self._submit(
                app_id=app_id, name=name, user=user, queue=queue, gpus=gpus, seconds=seconds,
                memory_mb=memory_mb, vcores=vcores, tags=tuple(tags), priority=priority,
                app_type=app_type, max_attempts=max_attempts, unmanaged=False,
            )  # fmt: skip
            if lifetime_seconds is not None:
                self.apps[app_id].lifetime_ms = self._t + int(lifetime_seconds * 1000)
            return app_id

    def app_state(self, app_id: str) -> str:
        with self.lock:
            self.tick()
            return self.apps[app_id].state

    def advance(self, seconds: float) -> None:
        """Move the clock (and the cluster) forward."""
        self.clock.advance(seconds)
        with self.lock:
            self.tick()

    def set_fair_weight(self, queue: str, weight: float) -> None:
        """Fair Scheduler: add a leaf queue or change its weight."""
        with self.lock:
            self.fair_weights[queue if queue.startswith("root.") else f"root.{queue}"] = weight

    def restart(self, *, keep_apps: bool) -> None:
        """The RM restarts: new cluster timestamp; with ``keep_apps`` (work-preserving
        recovery from the state store) the apps and their containers survive, otherwise the
        new RM knows no apps (NodeManagers re-register, their containers are killed)."""
        with self.lock:
            self.tick()
            now = self._t
            self.cluster_ts = now
            self._seq = 0
            self._issued.clear()
            if not keep_apps:
                self.apps.clear()
            for node in self.nodes.values():
                node.last_health_update = now

    # -- submission --------------------------------------------------------------------------

    def _resolve_queue(self, name: str) -> str | None:
        if self.scheduler == "fair":
            path = name if name.startswith("root.") else f"root.{name}"
            if path not in self.fair_weights:
                self.fair_weights[path] = 1.0  # the Fair Scheduler creates queues on demand
            return path
        leaves = self._cs_leaves()
        if name in leaves:
            return name
        named = [p for p in leaves if p.rsplit(".", 1)[-1] == name]
        return named[0] if len(named) == 1 else None

    def _submit(self, *, app_id: str, name: str, user: str, queue: str, gpus: int,
                seconds: float | None, memory_mb: int, vcores: int, tags: tuple[str, ...],
                priority: int | None, app_type: str, max_attempts: int,
                unmanaged: bool) -> _App:  # fmt: skip
        self.tick()
        if app_id in self.apps:
            raise _bad(f"Application with id '{app_id}' is already present! Cannot add a "
                       "duplicate!")  # fmt: skip
        max_mb, max_vc = self.max_allocation
        if memory_mb > max_mb or vcores > max_vc or memory_mb < 0 or vcores < 0:
            raise _bad(f"Invalid resource request, requested resource <memory:{memory_mb}, "
                       f"vCores:{vcores}> is outside the allowed range <memory:{max_mb}, "
                       f"vCores:{max_vc}>")  # fmt: skip
        if seconds is None:
            jitter = self.rng.uniform(-self.duration_jitter, self.duration_jitter)
            seconds = self.app_seconds * (1.0 + jitter)
        path = self._resolve_queue(queue)
        if priority is None or priority < 0:
            priority = self._default_priority(path) if path else 0
        app = _App(
            id=app_id, name=name, user=user, queue=path or queue, app_type=app_type,
            tags=tuple(dict.fromkeys(t.strip().lower() for t in tags if t.strip())),
            priority=min(priority, self.max_priority), am_memory_mb=memory_mb,
            am_vcores=vcores, gpus=max(0, gpus), duration_ms=max(1, int(seconds * 1000)),
            submitted_ms=self._t, max_attempts=max(1, max_attempts), unmanaged=unmanaged,
        )  # fmt: skip
        self.apps[app_id] = app
        if path is None:
            self._end(
                app,
                self._t,
                "FAILED",
                "FAILED",
                f"Application {app_id} submitted by user {user} to unknown queue: {queue}",
            )
        elif self.scheduler == "capacity" and self._cs_state(path) != "RUNNING":
            self._end(app, self._t, "FAILED", "FAILED",
                      f"Queue {path} is STOPPED. Cannot accept submission of application: "
                      f"{app_id}")  # fmt: skip
        elif self.new_seconds <= 0:
            app.state, app.accepted_ms = "ACCEPTED", self._t
            self._schedule(self._t)
        return app

    def submit_json(self, body: Any, user: str | None) -> str:
        """``POST /apps`` body -> application id (400 on a malformed context)."""
        if isinstance(body, dict) and "application-submission-context" in body:
            body = body["application-submission-context"]
        if not isinstance(body, dict):
            raise _bad("The request body must be an application-submission-context object")
        app_id = str(body.get("application-id") or "")
        if not re.fullmatch(r"application_\d+_\d+", app_id):
            raise _bad(f"Invalid ApplicationId: {app_id!r}")
        res = body.get("resource") or {}
        if not isinstance(res, dict):
            raise _bad("resource must be an object")
        spec = body.get("am-container-spec") or {}
        env = _kv(spec.get("environment"), "am-container-spec.environment") if isinstance(
            spec, dict) else {}  # fmt: skip
        tags_raw = body.get("application-tags") or {}
        tags = tags_raw.get("tag", []) if isinstance(tags_raw, dict) else tags_raw
        tags = [tags] if isinstance(tags, str) else list(tags or [])
        try:
            gpus = int(env.get(EMULATOR_GPUS_ENV, "0"))
            seconds = float(env[EMULATOR_SECONDS_ENV]) if EMULATOR_SECONDS_ENV in env else None
            memory = int(res.get("memory", 1024))
            cores = int(res.get("vCores", 1))
            prio = int(body["priority"]) if "priority" in body else None
            attempts = int(body.get("max-app-attempts") or 1)
        except (TypeError, ValueError) as exc:
            raise _bad(f"Malformed application-submission-context: {exc}") from None
        with self.lock:
            app = self._submit(
                app_id=app_id, name=str(body.get("application-name") or "N/A"),
                user=user or "dr.who", queue=str(body.get("queue") or "default"), gpus=gpus,
                seconds=seconds, memory_mb=memory, vcores=cores, tags=tuple(map(str, tags)),
                priority=prio, app_type=str(body.get("application-type") or "YARN"),
                max_attempts=attempts, unmanaged=bool(body.get("unmanaged-AM", False)),
            )  # fmt: skip
            return app.id

    # -- app operations ----------------------------------------------------------------------

    def _app(self, app_id: str) -> _App:
        if not re.fullmatch(r"application_\d+_\d+", app_id):
            if self.jersey2 and not app_id.startswith("application_"):
                raise _bad(f"Invalid ApplicationId prefix: {app_id}. The valid ApplicationId "
                           "should start with prefix application")  # fmt: skip
            raise _bad(f"Invalid ApplicationId: {app_id}")
        if app_id not in self.apps:
            raise _not_found(f"{self._exc_prefix}app with id: {app_id} not found")
        return self.apps[app_id]

    def kill(self, app_id: str, diagnostics: str | None = None) -> tuple[int, str]:
        """The kill half of ``PUT /apps/{id}/state``: (HTTP status, state to report)."""
        with self.lock:
            self.tick()
            app = self._app(app_id)
            if app.state in FINAL:
                return 200, app.state
            before = app.state
            self._end(app, self._t, "KILLED", "KILLED",
                      diagnostics or f"Application {app_id} was killed by user")  # fmt: skip
            self._schedule(self._t)
            return 202, before

    def move(self, app_id: str, queue: str) -> str:
        with self.lock:
            self.tick()
            app = self._app(app_id)
            if app.state in FINAL:
                raise _bad(f"App in {app.state} state cannot be moved.")
            path = self._resolve_queue(queue)
            if path is None:
                raise _bad(f"Failed to move app {app_id} to queue {queue}: queue does not exist")
            app.queue = path
            return self._queue_display(path)

    def set_priority(self, app_id: str, priority: int) -> int:
        with self.lock:
            self.tick()
            app = self._app(app_id)
            if self.scheduler != "capacity":
                raise _bad("Application priority is only supported by the CapacityScheduler")
            if app.state in FINAL:
                raise _bad(f"Application {app_id} is in {app.state} state; cannot update "
                           "its priority")  # fmt: skip
            app.priority = max(0, min(int(priority), self.max_priority))
            self._schedule(self._t)
            return app.priority

    def set_lifetime(self, app_id: str, expiry_ms: int) -> None:
        with self.lock:
            self.tick()
            app = self._app(app_id)
            if app.state in FINAL:
                raise _bad(f"Application {app_id} is in {app.state} state; cannot update its "
                           "timeout")  # fmt: skip
            if expiry_ms <= self._t:
                raise _bad("Expire time is less than current time, current-time="
                           f"{_iso(self._t)} expire-time={_iso(expiry_ms)}")  # fmt: skip
            app.lifetime_ms = expiry_ms

    # -- the event loop ----------------------------------------------------------------------

    def tick(self) -> None:
        """Bring the state up to the clock's now, one event at a time (so that a finished
        app frees its GPUs at the moment it finishes, even after a large ``advance``)."""
        with self.lock:
            now = self.clock.now_ms()
            while True:
                t = self._next_event(now)
                if t is None:
                    break
                self._accrue(t)
                self._process(t)
            self._accrue(max(now, self._t))
            self._process(self._t)

    def _next_event(self, now: int) -> int | None:
        best: int | None = None
        for app in self.apps.values():
            times: list[int] = []
            if app.state == "NEW":
                times.append(app.submitted_ms + int(self.new_seconds * 1000))
            elif app.state == "ACCEPTED" and app.accepted_ms is not None:
                times.append(app.accepted_ms + int(self.start_seconds * 1000))
            elif app.state == "RUNNING" and app.launched_ms is not None:
                times.append(app.launched_ms + app.duration_ms)
            if app.state in LIVE and app.lifetime_ms is not None:
                times.append(app.lifetime_ms)
            for t in times:
                if self._t < t <= now and (best is None or t < best):
                    best = t
        return best

    def _accrue(self, t: int) -> None:
        dt = t - self._t
        if dt <= 0:
            return
        for app in self.apps.values():
            for c in app.containers:
                app.memory_ms += c.memory_mb * dt
                app.vcore_ms += c.vcores * dt
                app.gpu_ms += c.gpus * dt
        self._t = t

    def _process(self, t: int) -> None:
        for app in self.apps.values():
            if app.state in LIVE and app.lifetime_ms is not None and app.lifetime_ms <= t:
                self._end(app, t, "KILLED", "KILLED", LIFETIME_DIAGNOSTICS)
            elif (app.state == "RUNNING" and app.launched_ms is not None
                  and app.launched_ms + app.duration_ms <= t):  # fmt: skip
                app.progress = 1.0
                self._end(app, t, "FINISHED", "SUCCEEDED", "")
            elif app.state == "NEW" and app.submitted_ms + int(self.new_seconds * 1000) <= t:
                app.state, app.accepted_ms = "ACCEPTED", t
        self._schedule(t)

    def _end(self, app: _App, t: int, state: str, final: str, diagnostics: str) -> None:
        if app.state == "RUNNING" and app.launched_ms is not None:
            app.progress = min(1.0, (t - app.launched_ms) / app.duration_ms)
        if state == "FINISHED":
            app.progress = 1.0
        app.state, app.final_status, app.finished_ms = state, final, t
        if diagnostics:
            app.diagnostics = diagnostics
        app.containers.clear()

    def _free(self) -> dict[str, list[int]]:
        free = {
            n.id: [n.memory_mb, n.vcores, n.gpus]
            for n in self.nodes.values()
            if n.state == "RUNNING"
        }
        for app in self.apps.values():
            for c in app.containers:
                if c.node in free:
                    f = free[c.node]
                    f[0] -= c.memory_mb
                    f[1] -= c.vcores
                    f[2] -= c.gpus
        return free

    @staticmethod
    def _fit(free: dict[str, list[int]], mem: int, vc: int, gpus: int) -> str | None:
        for node_id, f in free.items():
            if f[0] >= mem and f[1] >= vc and f[2] >= gpus:
                f[0] -= mem
                f[1] -= vc
                f[2] -= gpus
                return node_id
        return None

    def _new_container(self, app: _App, node: str, mem: int, vc: int, gpus: int,
                       is_am: bool) -> _Container:  # fmt: skip
        app.container_seq += 1
        cid = (f"container_{self.cluster_ts}_{app.id.rsplit('_', 1)[-1]}_"
               f"{app.attempt:02d}_{app.container_seq:06d}")  # fmt: skip
        return _Container(cid, node, mem, vc, gpus, is_am)

    def _queue_room(self, path: str, mem: int, vc: int, gpus: int) -> bool:
        if self.scheduler != "capacity":
            return True
        eff = self._cs_effective()
        if path not in eff:
            return True
        room = eff[path][1]
        used = self._used_in(path)
        return (
            used[0] + mem <= room[0] + 1e-6
            and used[1] + vc <= room[1] + 1e-6
            and (gpus == 0 or used[2] + gpus <= math.floor(room[2] + 1e-6))
        )

    def _schedule(self, t: int) -> None:
        free = self._free()
        gmb, gvc = self.gpu_container
        # running apps that lost GPU containers on a lost node take them back first
        for app in self.apps.values():
            if app.state != "RUNNING":
                continue
            have = sum(c.gpus for c in app.containers)
            for _ in range(app.gpus - have):
                node = self._fit(free, gmb, gvc, 1)
                if node is None:
                    break
                app.containers.append(self._new_container(app, node, gmb, gvc, 1, False))
        start_ms = int(self.start_seconds * 1000)
        waiting = sorted(
            (a for a in self.apps.values()
             if a.state == "ACCEPTED" and a.accepted_ms is not None and not a.containers
             and a.accepted_ms + start_ms <= t),
            key=lambda a: (-a.priority, a.submitted_ms, a.id),
        )  # fmt: skip
        for app in waiting:
            # an AM that never registers never asks for its GPU containers
            gpus = app.gpus if self.am_registers else 0
            mem = app.am_memory_mb + gpus * gmb
            vc = app.am_vcores + gpus * gvc
            if not self._queue_room(app.queue, mem, vc, gpus):
                continue
            trial = {k: list(v) for k, v in free.items()}
            am_node = self._fit(trial, app.am_memory_mb, app.am_vcores, 0)
            gpu_nodes = [self._fit(trial, gmb, gvc, 1) for _ in range(gpus)]
            if am_node is None or any(n is None for n in gpu_nodes):
                continue
            free = trial
            app.containers = [
                self._new_container(app, am_node, app.am_memory_mb, app.am_vcores, 0, True)
            ]
            for node in gpu_nodes:
                assert node is not None
                app.containers.append(self._new_container(app, node, gmb, gvc, 1, False))
            app.launched_ms, app.am_node = t, am_node
            if self.am_registers:
                app.state = "RUNNING"
            else:
                app.diagnostics = AM_WAITING_DIAGNOSTICS

    def _lose_containers(self, node_id: str, t: int) -> None:
        for app in self.apps.values():
            if not any(c.node == node_id for c in app.containers):
                continue
            am_lost = any(c.node == node_id and c.is_am for c in app.containers)
            app.containers = [c for c in app.containers if c.node != node_id]
            if not am_lost:
                continue
            if app.attempt < app.max_attempts:
                app.attempt += 1
                app.containers.clear()
                app.state, app.accepted_ms, app.launched_ms = "ACCEPTED", t, None
                app.progress = 0.0
            else:
                self._end(app, t, "FAILED", "FAILED",
                          f"Application {app.id} failed {app.max_attempts} times due to AM "
                          f"Container exited with exitCode: -100. Container released on a "
                          f"*lost* node {node_id}")  # fmt: skip

    # -- aggregates --------------------------------------------------------------------------

    def _cluster_total(self) -> tuple[int, int, int]:
        run = [n for n in self.nodes.values() if n.state == "RUNNING"]
        return (sum(n.memory_mb for n in run), sum(n.vcores for n in run),
                sum(n.gpus for n in run))  # fmt: skip

    def _used(self, apps: Iterable[_App]) -> tuple[int, int, int]:
        cs = [c for a in apps for c in a.containers]
        return (sum(c.memory_mb for c in cs), sum(c.vcores for c in cs),
                sum(c.gpus for c in cs))  # fmt: skip

    def _apps_in(self, path: str) -> list[_App]:
        return [a for a in self.apps.values()
                if a.queue == path or a.queue.startswith(path + ".")]  # fmt: skip

    def _used_in(self, path: str) -> tuple[int, int, int]:
        return self._used(self._apps_in(path))

    def _pending(self, apps: Iterable[_App]) -> tuple[int, int, int, int]:
        """(memory, vcores, gpus, containers) still wanted by live apps."""
        gmb, gvc = self.gpu_container
        mem = vc = gpus = n = 0
        for a in apps:
            if a.state == "ACCEPTED" and a.containers:  # AM launched, never registers
                continue
            if a.state in ("NEW", "ACCEPTED"):
                mem += a.am_memory_mb + a.gpus * gmb
                vc += a.am_vcores + a.gpus * gvc
                gpus += a.gpus
                n += 1 + a.gpus
            elif a.state == "RUNNING":
                missing = a.gpus - sum(c.gpus for c in a.containers)
                mem += missing * gmb
                vc += missing * gvc
                gpus += missing
                n += missing
        return mem, vc, gpus, n

    def _queue_display(self, path: str) -> str:
        if self.scheduler == "capacity" and not self.jersey2:
            return path.rsplit(".", 1)[-1]  # 3.5 reports the full path
        return path

    def _resource(self, mem: int, vc: int, gpus: int) -> dict[str, Any]:
        infos = [_ri("memory-mb", "Mi", mem), _ri("vcores", "", vc), _ri(GPU, "", gpus)]
        if self.jersey2:
            for info in infos:
                del info["attributes"]  # an empty map is omitted
        return {"memory": mem, "vCores": vc,
                "resourceInformations": {"resourceInformation": infos}}  # fmt: skip

    # -- Capacity Scheduler configuration ----------------------------------------------------

    def _cs_children(self, path: str, conf: Mapping[str, str] | None = None) -> list[str]:
        conf = self.conf if conf is None else conf
        raw = conf.get(f"{CS_PREFIX}.{path}.queues", "")
        return [f"{path}.{q.strip()}" for q in raw.split(",") if q.strip()]

    def _cs_all(self, conf: Mapping[str, str] | None = None) -> list[str]:
        out, stack = [], ["root"]
        while stack:
            p = stack.pop()
            out.append(p)
            stack.extend(reversed(self._cs_children(p, conf)))
        return out

    def _cs_leaves(self) -> list[str]:
        return [p for p in self._cs_all() if p != "root" and not self._cs_children(p)]

    def _cs_float(self, path: str, key: str, default: float,
                  conf: Mapping[str, str] | None = None) -> float:  # fmt: skip
        conf = self.conf if conf is None else conf
        raw = conf.get(f"{CS_PREFIX}.{path}.{key}")
        if raw is None or raw == "":
            return default
        try:
            return float(raw)
        except ValueError:
            raise _HTTPError(
                400,
                "BadRequestException",
                f"{CS_PREFIX}.{path}.{key}={raw!r} is not a percentage (an absolute resource "
                "vector needs the queue's capacity and its siblings' in absolute mode too)",
                text=True,
            ) from None

    def _cs_vector(self, path: str, key: str,
                   conf: Mapping[str, str] | None = None) -> dict[int, int] | None:  # fmt: skip
        """The absolute resource vector configured as ``key`` of ``path``, or ``None``."""
        conf = self.conf if conf is None else conf
        raw = conf.get(f"{CS_PREFIX}.{path}.{key}")
        return None if raw is None else _parse_vector(raw, f"{CS_PREFIX}.{path}.{key}")

    def _cs_is_absolute(self, path: str, conf: Mapping[str, str] | None = None) -> bool:
        return path != "root" and self._cs_vector(path, "capacity", conf) is not None

    def _cs_effective(self, conf: Mapping[str, str] | None = None) -> dict[str, tuple[_Res, _Res]]:
        """Queue path -> (effective minimum, effective maximum) resources as (MB, vcores,
        GPUs) over the RUNNING nodes (module docstring: percentages of the parent's, or
        absolute vectors scaled down when the siblings' sum exceeds the parent's)."""
        conf = self.conf if conf is None else conf
        total = tuple(float(x) for x in self._cluster_total())
        out: dict[str, tuple[_Res, _Res]] = {"root": (total, total)}
        for path in self._cs_all(conf):
            kids = self._cs_children(path, conf)
            if not kids:
                continue
            pmin, pmax = out[path]
            vecs = {k: self._cs_vector(k, "capacity", conf) for k in kids}
            sums = [sum(v.get(i, 0) for v in vecs.values() if v is not None) for i in range(3)]
            for k in kids:
                vec = vecs[k]
                if vec is not None:
                    mn = tuple(
                        vec.get(i, 0) * min(1.0, pmin[i] / sums[i]) if sums[i] else 0.0
                        for i in range(3)
                    )
                else:
                    pct = self._cs_float(k, "capacity", 0.0, conf) / 100.0
                    mn = tuple(x * pct for x in pmin)
                mvec = self._cs_vector(k, "maximum-capacity", conf)
                if mvec is not None:
                    mx = tuple(min(pmax[i], float(mvec.get(i, pmax[i]))) for i in range(3))
                else:
                    mpct = self._cs_float(k, "maximum-capacity", 100.0, conf) / 100.0
                    mx = tuple(x * mpct for x in pmax)
                out[k] = (tuple(min(a, b) for a, b in zip(mn, mx, strict=True)), mx)
        return out

    def _cs_cap(self, path: str, key: str) -> float:
        if path == "root":
            return 100.0
        return self._cs_float(path, key, 100.0 if key == "maximum-capacity" else 0.0)

    def _cs_abs(self, path: str, key: str) -> float:
        """Absolute capacity / maximum capacity (% of the cluster), percentage mode."""
        frac = 1.0
        parts = path.split(".")
        for k in range(2, len(parts) + 1):
            frac *= self._cs_cap(".".join(parts[:k]), key) / 100.0
        return frac * 100.0

    def _cs_state(self, path: str) -> str:
        state = self.conf.get(f"{CS_PREFIX}.{path}.state", "RUNNING").upper()
        if "." in path:
            parent = path.rsplit(".", 1)[0]
            if self._cs_state(parent) == "STOPPED":
                return "STOPPED"
        return state

    def _default_priority(self, path: str) -> int:
        if self.scheduler != "capacity":
            return 0
        return int(self._cs_float(path, "default-application-priority", 0.0))

    def _validate_conf(self, conf: Mapping[str, str]) -> None:
        def bad(msg: str) -> _HTTPError:
            return _HTTPError(400, "BadRequestException", msg, text=True)

        for path in self._cs_all(conf):
            kids = self._cs_children(path, conf)
            if kids:
                absolute = {k: self._cs_is_absolute(k, conf) for k in kids}
                if len(set(absolute.values())) > 1:
                    raise bad(f"Failed to re-init queues : the children of queue {path} mix "
                              "absolute resource and percentage capacities: "
                              f"{sorted(k for k, a in absolute.items() if a)} vs "
                              f"{sorted(k for k, a in absolute.items() if not a)}")  # fmt: skip
                if path != "root" and any(absolute.values()) != self._cs_is_absolute(path, conf):
                    raise bad(f"Parent queue '{path}' and child queue '{kids[0]}' should use "
                              "either percentage based capacity configuration or absolute "
                              "resource together.")  # fmt: skip
                if not any(absolute.values()):
                    total = sum(self._cs_float(k, "capacity", 0.0, conf) for k in kids)
                    if abs(total - 100.0) > 1e-3:
                        raise bad(f"Illegal capacity of {total / 100:.3f} for children of "
                                  f"queue {path}")  # fmt: skip
            if path == "root":
                continue
            vec = self._cs_vector(path, "capacity", conf)
            if vec is not None:
                mvec = self._cs_vector(path, "maximum-capacity", conf)
                if mvec is None:
                    mx = self._cs_float(path, "maximum-capacity", 100.0, conf)
                    if not 0.0 <= mx <= 100.0:
                        raise bad(f"Illegal maximum-capacity {mx} of queue {path}: must be in "
                                  "[0, 100]")  # fmt: skip
                elif any(v > mvec[i] for i, v in vec.items() if i in mvec):
                    raise bad(f"Min resource configuration {_fmt_vector(vec)} is greater than "
                              f"its max value:{_fmt_vector(mvec)} in queue:{path}")  # fmt: skip
            else:
                cap = self._cs_float(path, "capacity", 0.0, conf)
                mx = self._cs_float(path, "maximum-capacity", 100.0, conf)
                if not (0.0 <= cap <= 100.0 and 0.0 <= mx <= 100.0):
                    raise bad(f"Illegal capacity {cap} or maximum-capacity {mx} of queue "
                              f"{path}: must be in [0, 100]")  # fmt: skip
                if cap > mx + 1e-9:
                    raise bad(f"Illegal queue capacity setting (abs-capacity={cap}) > "
                              f"(abs-maximum-capacity={mx}) for queue {path}")  # fmt: skip
            state = conf.get(f"{CS_PREFIX}.{path}.state", "RUNNING").upper()
            if state not in ("RUNNING", "STOPPED"):
                raise bad(f"Invalid queue state {state} for {path}")

    def mutate_conf(self, body: Any, user: str | None) -> None:
        """Apply a ``PUT /scheduler-conf`` body (``SchedConfUpdateInfo`` JSON), atomically."""

        def text_bad(msg: str) -> _HTTPError:
            return _HTTPError(400, "BadRequestException", msg, text=True)

        if self.scheduler != "capacity":
            raise text_bad("Configuration change only supported by MutableConfScheduler.")
        if isinstance(body, dict) and "sched-conf" in body:
            body = body["sched-conf"]
        if not isinstance(body, dict):
            raise text_bad("The request body must be a sched-conf object")
        unknown = set(body) - {"add-queue", "remove-queue", "update-queue", "global-updates",
                               "subClusterId"}  # fmt: skip
        if unknown:
            raise text_bad(f"Unknown sched-conf elements: {sorted(unknown)}")

        def queue_infos(key: str) -> list[tuple[str, dict[str, str]]]:
            raw = body.get(key) or []
            items = raw if isinstance(raw, list) else [raw]
            out = []
            for item in items:
                if not isinstance(item, dict) or not item.get("queue-name"):
                    raise text_bad(f"{key}: every entry needs a queue-name")
                out.append((str(item["queue-name"]), _kv(item.get("params"), key)))
            return out

        with self.lock:
            self.tick()
            conf = dict(self.conf)
            existing = set(self._cs_all(conf))
            for path, params in queue_infos("add-queue"):
                if path in existing:
                    raise text_bad(f"Can't add existing queue {path}")
                parent, _, leaf = path.rpartition(".")
                if parent not in existing:
                    raise text_bad(f"Can't add queue {path}: parent {parent} does not exist")
                if any(a.state in LIVE for a in self.apps.values() if a.queue == parent):
                    raise text_bad(f"Can't add queue {path}: leaf {parent} has live apps")
                siblings = [q.rsplit(".", 1)[-1] for q in self._cs_children(parent, conf)]
                conf[f"{CS_PREFIX}.{parent}.queues"] = ",".join([*siblings, leaf])
                for k, v in params.items():
                    conf[f"{CS_PREFIX}.{path}.{k}"] = v
                existing.add(path)
            raw_remove = body.get("remove-queue") or []
            for path in [raw_remove] if isinstance(raw_remove, str) else raw_remove:
                path = str(path)
                if path not in existing or path == "root":
                    raise text_bad(f"Can't remove queue {path}: it does not exist")
                if conf.get(f"{CS_PREFIX}.{path}.state", "RUNNING").upper() != "STOPPED":
                    raise text_bad(f"Can't remove queue {path}: it is not STOPPED")
                if any(a.state in LIVE for a in self._apps_in(path)):
                    raise text_bad(f"Can't remove queue {path}: it has live applications")
                parent, _, leaf = path.rpartition(".")
                siblings = [q.rsplit(".", 1)[-1] for q in self._cs_children(parent, conf)]
                conf[f"{CS_PREFIX}.{parent}.queues"] = ",".join(s for s in siblings if s != leaf)
                for key in [k for k in conf if k.startswith(f"{CS_PREFIX}.{path}.")]:
                    del conf[key]
                existing.discard(path)
            for path, params in queue_infos("update-queue"):
                if path not in existing:
                    raise text_bad(f"Can't update queue {path}: it does not exist")
                for k, v in params.items():
                    conf[f"{CS_PREFIX}.{path}.{k}"] = v
            for k, v in _kv(body.get("global-updates"), "global-updates").items():
                if v == "":
                    conf.pop(k, None)
                else:
                    conf[k] = v
            self._validate_conf(conf)
            self.conf = conf
            self.conf_version += 1
            self.conf_log.append({"version": self.conf_version, "time": self._t, "user": user,
                                  "body": body})  # fmt: skip
            self._schedule(self._t)

    # -- JSON views --------------------------------------------------------------------------

    def cluster_info_json(self, ha_state: str, ha_enabled: bool, started_on: int) -> dict:
        recovery = "org.apache.hadoop.yarn.server.resourcemanager.recovery."
        store = recovery + ("ZKRMStateStore" if self.recovery or ha_enabled else "NullRMStateStore")
        build = (f"{self.version} from yarn-arbiter-emulator by yarn source checksum "
                 "0123456789abcdef0123456789abcdef")  # fmt: skip
        built_on = _BUILT_ON[self.hadoop_line]
        return {
            "clusterInfo": {
                "id": self.cluster_ts,
                "startedOn": started_on,
                "state": "STARTED",
                "haState": ha_state,
                "rmStateStoreName": store,
                "resourceManagerVersion": self.version,
                "resourceManagerBuildVersion": build,
                "resourceManagerVersionBuiltOn": built_on,
                "hadoopVersion": self.version,
                "hadoopBuildVersion": build,
                "hadoopVersionBuiltOn": built_on,
                "haZooKeeperConnectionState": "CONNECTED" if ha_enabled
                else "ResourceManager HA is not enabled.",
            }
        }  # fmt: skip

    def metrics_json(self) -> dict:
        apps = list(self.apps.values())
        total = self._cluster_total()
        used = self._used(apps)
        pend = self._pending(apps)

        def count(state: str) -> int:
            return sum(1 for a in apps if a.state == state)

        def by_state(state: str) -> int:
            return sum(1 for n in self.nodes.values() if n.state == state)

        containers = sum(len(a.containers) for a in apps)
        # what the NodeManagers measure: half of what the containers hold (as in _node_json)
        util_mb = sum(self._node_used(n)[0] // 2 for n in self.nodes.values() if n.active)
        util_vc = sum(self._node_used(n)[1] // 2 for n in self.nodes.values() if n.active)
        m: dict[str, Any] = {
            "appsSubmitted": len(apps),
            "appsCompleted": count("FINISHED"),
            "appsPending": count("ACCEPTED") + count("NEW"),
            "appsRunning": count("RUNNING"),
            "appsFailed": count("FAILED"),
            "appsKilled": count("KILLED"),
            "reservedMB": 0,
            "availableMB": total[0] - used[0],
            "allocatedMB": used[0],
            "pendingMB": pend[0],
            "reservedVirtualCores": 0,
            "availableVirtualCores": total[1] - used[1],
            "allocatedVirtualCores": used[1],
            "pendingVirtualCores": pend[1],
            "containersAllocated": containers,
            "containersReserved": 0,
            "containersPending": pend[3],
            "totalMB": total[0],
            "utilizedMB": util_mb,
            "totalVirtualCores": total[1],
            "utilizedVirtualCores": util_vc,
            "utilizedMBPercent": int(100 * util_mb / total[0]) if total[0] else 0,
            "utilizedVirtualCoresPercent": int(100 * util_vc / total[1]) if total[1] else 0,
            "rmSchedulerBusyPercent": 0,
            "totalNodes": len(self.nodes),
            "lostNodes": by_state("LOST"),
            "unhealthyNodes": by_state("UNHEALTHY"),
            "decommissioningNodes": by_state("DECOMMISSIONING"),
            "decommissionedNodes": by_state("DECOMMISSIONED"),
            "rebootedNodes": by_state("REBOOTED"),
            "activeNodes": by_state("RUNNING"),
            "shutdownNodes": by_state("SHUTDOWN"),
            "containerAssignedPerSecond": 0,
            "totalUsedResourcesAcrossPartition": self._resource(*used),
            "totalClusterResourcesAcrossPartition": self._resource(*total),
            "totalAllocatedContainersAcrossPartition": containers
            if self.scheduler == "capacity" else 0,
            "crossPartitionMetricsAvailable": self.scheduler == "capacity",
        }  # fmt: skip
        if self.scheduler == "capacity":
            m["totalReservedResourcesAcrossPartition"] = self._resource(0, 0, 0)
        m["rmEventQueueSize"] = m["schedulerEventQueueSize"] = 0
        if not self.jersey2:
            for key in CLUSTER_METRICS_35_KEYS:
                del m[key]
        return {"clusterMetrics": m}

    def _node_used(self, node: _Node) -> tuple[int, int, int, int]:
        """(memory, vcores, GPUs, containers) held on ``node``."""
        containers = [c for a in self.apps.values() for c in a.containers if c.node == node.id]
        return (sum(c.memory_mb for c in containers), sum(c.vcores for c in containers),
                sum(c.gpus for c in containers), len(containers))  # fmt: skip

    def _node_json(self, node: _Node, now: int) -> dict[str, Any]:
        *used, n_containers = self._node_used(node)
        active = node.active
        d: dict[str, Any] = {
            "rack": node.rack,
            "state": node.state,
            "id": node.id,
            "nodeHostName": node.host,
            "nodeHTTPAddress": f"{node.host}:{node.http_port}",
            "lastHealthUpdate": now if node.state == "RUNNING" else node.last_health_update,
            "version": self.version,
            "healthReport": node.health_report,
            "numContainers": n_containers if active else 0,
            "usedMemoryMB": used[0] if active else 0,
            "availMemoryMB": node.memory_mb - used[0] if active else 0,
            "usedVirtualCores": used[1] if active else 0,
            "availableVirtualCores": node.vcores - used[1] if active else 0,
        }
        if self.jersey2:
            d["memUtilization"] = (round(100.0 * used[0] / 2 / node.memory_mb, 6)
                                   if active and node.memory_mb else 0.0)  # fmt: skip
            d["cpuUtilization"] = round(100.0 * used[1] / 2 / max(1, node.vcores), 6) \
                if active else 0.0  # fmt: skip
        d.update({
            "numRunningOpportContainers": 0,
            "usedMemoryOpportGB": 0,
            "usedVirtualCoresOpport": 0,
            "numQueuedContainers": 0,
            "allocationTags": {},
            "resourceUtilization": {
                "nodePhysicalMemoryMB": used[0] // 2 if active else 0,
                "nodeVirtualMemoryMB": used[0] // 2 if active else 0,
                "nodeCPUUsage": round(used[1] / max(1, node.vcores), 4) if active else 0.0,
                "aggregatedContainersPhysicalMemoryMB": used[0] // 2 if active else 0,
                "aggregatedContainersVirtualMemoryMB": used[0] // 2 if active else 0,
                "containersCPUUsage": round(used[1] / max(1, node.vcores), 4) if active else 0.0,
            },
            "nodeAttributesInfo": {},
            "totalResource": self._resource(node.memory_mb, node.vcores, node.gpus),
        })  # fmt: skip
        if active:
            d["usedResource"] = self._resource(*used)
            d["availableResource"] = self._resource(
                node.memory_mb - used[0], node.vcores - used[1], node.gpus - used[2]
            )
        return d

    def nodes_json(self, states: str | None) -> dict:
        wanted = {s.strip().upper() for s in states.split(",") if s.strip()} if states else None
        now = self._t
        out = [self._node_json(n, now) for n in self.nodes.values()
               if wanted is None or n.state in wanted]  # fmt: skip
        return {"nodes": {"node": out} if out else self._empty_list()}

    def _empty_list(self) -> dict[str, Any] | None:
        """A list wrapper with no elements: ``null`` up to 3.4 (the Jersey 1 quirk), ``{}``
        from 3.5."""
        return {} if self.jersey2 else None

    def node_json(self, node_id: str) -> dict:
        node = self.nodes.get(node_id)
        if node is None:
            raise _not_found(f"{self._exc_prefix}nodeId, {node_id}, is not found")
        return {"node": self._node_json(node, self._t)}

    @property
    def _exc_prefix(self) -> str:
        """Jersey 1 RMs prefix a NotFoundException's message with its cause's class."""
        return "" if self.jersey2 else "java.lang.Exception: "

    def _entries_map(self, mem_ms: float, vc_ms: float, gpu_ms: float) -> dict[str, Any]:
        secs = {"memory-mb": int(mem_ms // 1000), "vcores": int(vc_ms // 1000),
                GPU: int(gpu_ms // 1000)}  # fmt: skip
        if self.jersey2:  # numbers, in the RM's (hash map) order
            return {"entry": [{"key": k, "value": secs[k]} for k in ("memory-mb", GPU, "vcores")]}
        return {"entry": [{"key": k, "value": str(v)} for k, v in secs.items()]}

    def _timeout_json(self, app: _App) -> dict[str, Any]:
        if app.lifetime_ms is None:
            return {"type": "LIFETIME", "expiryTime": "UNLIMITED", "remainingTimeInSeconds": -1}
        remaining = 0 if app.state in FINAL else max(0, (app.lifetime_ms - self._t) // 1000)
        return {"type": "LIFETIME", "expiryTime": _iso(app.lifetime_ms),
                "remainingTimeInSeconds": remaining}  # fmt: skip

    def app_json(self, app: _App, rm_address: str, deselects: frozenset[str] = frozenset()
                 ) -> dict[str, Any]:  # fmt: skip
        now = self._t
        total = self._cluster_total()
        used = self._used([app])
        am = next((c for c in app.containers if c.is_am), None)
        final = app.state in FINAL
        launched = app.launched_ms is not None
        if app.state == "RUNNING" and app.launched_ms is not None:
            progress = min(1.0, (now - app.launched_ms) / app.duration_ms)
        else:
            progress = app.progress
        d: dict[str, Any] = {
            "id": app.id,
            "user": app.user,
            "name": app.name,
            "queue": self._queue_display(app.queue),
            "state": app.state,
            "finalStatus": app.final_status,
            "progress": round(progress * 100.0, 3),
        }
        if app.state == "RUNNING":
            d["trackingUI"] = "ApplicationMaster"
            d["trackingUrl"] = f"http://{rm_address}/proxy/{app.id}/"
        elif final and launched:
            d["trackingUI"] = "History"
            d["trackingUrl"] = f"http://{rm_address}/cluster/app/{app.id}"
        else:
            d["trackingUI"] = "UNASSIGNED"
        eff = self._cs_effective() if self.scheduler == "capacity" else {}
        queue_total = eff[app.queue][0][0] if app.queue in eff else total[0]
        d.update({
            "diagnostics": app.diagnostics,
            "clusterId": self.cluster_ts,
            "applicationType": app.app_type,
            "applicationTags": ",".join(app.tags),
            "priority": app.priority,
            "startedTime": app.submitted_ms,
            "launchTime": app.launched_ms or 0,
            "finishedTime": app.finished_ms or 0,
            "elapsedTime": (app.finished_ms or now) - app.submitted_ms,
        })  # fmt: skip
        if app.am_node is not None and (am is not None or final):
            host = app.am_node.rsplit(":", 1)[0]
            http = f"{host}:{self.nodes[app.am_node].http_port}" if app.am_node in self.nodes \
                else f"{host}:8042"  # fmt: skip
            d["amContainerLogs"] = (f"http://{http}/node/containerlogs/"
                                    f"{am.id if am else app.id}/{app.user}")  # fmt: skip
            d["amHostHttpAddress"] = http
        if app.state == "RUNNING" and am is not None:
            d["amRPCAddress"] = f"{am.node.rsplit(':', 1)[0]}:{40000 + int(app.id[-4:])}"
        d["masterNodeId"] = am.node if am is not None else (app.am_node or "")
        d.update({
            "allocatedMB": -1 if final else used[0],
            "allocatedVCores": -1 if final else used[1],
            "reservedMB": -1 if final else 0,
            "reservedVCores": -1 if final else 0,
            "runningContainers": -1 if final else len(app.containers),
            "memorySeconds": int(app.memory_ms // 1000),
            "vcoreSeconds": int(app.vcore_ms // 1000),
            "queueUsagePercentage": 0.0 if final or not queue_total
            else round(100.0 * used[0] / queue_total, 4),
            "clusterUsagePercentage": 0.0 if final or not total[0]
            else round(100.0 * used[0] / total[0], 4),
            "resourceSecondsMap": self._entries_map(app.memory_ms, app.vcore_ms, app.gpu_ms),
            "preemptedResourceMB": 0,
            "preemptedResourceVCores": 0,
            "numNonAMContainerPreempted": 0,
            "numAMContainerPreempted": 0,
            "preemptedMemorySeconds": 0,
            "preemptedVcoreSeconds": 0,
            "preemptedResourceSecondsMap": self._entries_map(0, 0, 0),
            "resourceRequests": [],
            "logAggregationStatus": "DISABLED",
            "unmanagedApplication": app.unmanaged,
            "appNodeLabelExpression": "",
            "amNodeLabelExpression": "",
        })  # fmt: skip
        if self.scheduler == "capacity" and app.state in ("ACCEPTED", "RUNNING"):
            pend = self._pending([app])
            am_used = (am.memory_mb, am.vcores, 0) if am is not None else (0, 0, 0)
            limit = self._resource(total[0] // 2, max(1, total[1] // 2), 0)
            d["resourceInfo"] = {"resourceUsagesByPartition": [{
                "partitionName": "",
                "used": self._resource(*used),
                "reserved": self._resource(0, 0, 0),
                "pending": self._resource(pend[0], pend[1], pend[2]),
                "amUsed": self._resource(*am_used),
                "amLimit": limit,
                "userAmLimit": limit,
            }]}  # fmt: skip
        d["timeouts"] = {"timeout": [self._timeout_json(app)]}
        if self.jersey2:
            for key in APP_35_EMPTY_ABSENT_KEYS:
                del d[key]
        for key in deselects:
            d.pop(key, None)
        return d

    def apps_json(self, query: Mapping[str, str], rm_address: str) -> dict:
        def csv(name: str) -> set[str] | None:
            raw = query.get(name)
            return {x.strip().lower() for x in raw.split(",") if x.strip()} if raw else None

        states = csv("states") or csv("state")
        types, tags = csv("applicationTypes"), csv("applicationTags")
        # "appNodeLabelExpression" is accepted but has no effect: AppInfo sets the field
        # before it tests deSelects (Hadoop 3.x; the 3.5.0 capture shows it kept).
        deselect_map = {"resourcerequests": "resourceRequests", "timeouts": "timeouts",
                        "amnodelabelexpression": "amNodeLabelExpression",
                        "resourceinfo": "resourceInfo"}  # fmt: skip
        deselects = frozenset(deselect_map[d] for d in (csv("deSelects") or ())
                              if d in deselect_map)  # fmt: skip
        final_status = query.get("finalStatus")
        user, queue, name = query.get("user"), query.get("queue"), query.get("name")
        try:
            limit = int(query["limit"]) if query.get("limit") else None
            began = int(query.get("startedTimeBegin") or 0)
            ended = int(query.get("startedTimeEnd") or 0) or None
            fbegan = int(query.get("finishedTimeBegin") or 0)
            fended = int(query.get("finishedTimeEnd") or 0) or None
        except ValueError as exc:
            raise _bad(f"Invalid number in query: {exc}") from None
        queue_path = None
        if queue and self.scheduler == "fair":
            queue_path = queue if queue.startswith("root") else f"root.{queue}"
        elif queue:
            queue_path = self._resolve_queue(queue) or queue
        out = []
        for app in self.apps.values():
            if states and app.state.lower() not in states:
                continue
            if types and app.app_type.lower() not in types:
                continue
            if tags and not tags & set(app.tags):
                continue
            if final_status and app.final_status != final_status.upper():
                continue
            if user and app.user != user:
                continue
            if name and app.name != name:
                continue
            if queue and (app.state in FINAL or app.queue != queue_path):
                continue
            if app.submitted_ms < began or (ended is not None and app.submitted_ms > ended):
                continue
            if fbegan or fended is not None:
                if app.finished_ms is None or app.finished_ms < fbegan:
                    continue
                if fended is not None and app.finished_ms > fended:
                    continue
            out.append(self.app_json(app, rm_address, deselects))
            if limit is not None and len(out) >= limit:
                break
        return {"apps": {"app": out} if out else self._empty_list()}

    def new_application_json(self) -> dict:
        app_id = self.new_application_id()
        max_mb, max_vc = self.max_allocation
        max_gpus = max((n.gpus for n in self.nodes.values()), default=0)
        return {
            "application-id": app_id,
            "maximum-resource-capability": self._resource(max_mb, max_vc, max_gpus),
        }

    # Capacity Scheduler view ---------------------------------------------------------------

    def _cs_queue_json(self, path: str, total: tuple[int, int, int],
                       eff: Mapping[str, tuple[_Res, _Res]]) -> dict[str, Any]:  # fmt: skip
        kids = self._cs_children(path)
        apps = self._apps_in(path)
        live = [a for a in apps if a.state in LIVE]
        used = self._used(apps)
        pend = self._pending(live)
        eff_min = tuple(int(x) for x in eff[path][0])
        eff_max = tuple(int(x) for x in eff[path][1])
        vec = self._cs_vector(path, "capacity") if path != "root" else None
        mvec = self._cs_vector(path, "maximum-capacity") if path != "root" else None
        if vec is None:
            cap, mx = self._cs_cap(path, "capacity"), self._cs_cap(path, "maximum-capacity")
            acap, amax = self._cs_abs(path, "capacity"), self._cs_abs(path, "maximum-capacity")
            entries = [(r, f"{cap:.1f}%") for r in ("memory-mb", "vcores", GPU)]
        else:  # absolute mode: the percentages are dominant shares of the parent / cluster
            pmin, pmax = eff[path.rsplit(".", 1)[0]]
            tot = tuple(float(x) for x in total)
            cap, mx = 100.0 * _ratio(eff[path][0], pmin), 100.0 * _ratio(eff[path][1], pmax)
            acap, amax = 100.0 * _ratio(eff[path][0], tot), 100.0 * _ratio(eff[path][1], tot)
            entries = [(r, f"{float(vec.get(i, 0)):.1f}")
                       for i, r in enumerate(("memory-mb", "vcores", GPU))]  # fmt: skip
        used_cap = 100.0 * used[0] / eff_min[0] if eff_min[0] else 0.0
        abs_used = 100.0 * used[0] / total[0] if total[0] else 0.0
        containers = sum(len(a.containers) for a in apps)
        max_alloc = self._resource(
            *self.max_allocation, max((n.gpus for n in self.nodes.values()), default=0)
        )
        zero = self._resource(0, 0, 0)
        configured_min = self._resource(*(vec.get(i, 0) for i in range(3))) if vec else zero
        configured_max = self._resource(*(mvec.get(i, 0) for i in range(3))) if mvec else zero
        vector_info = {
            "configuredCapacityVector": "[" + ",".join(f"{r}={v}" for r, v in entries) + "]",
            "capacityVectorEntries": [{"resourceName": r, "resourceValue": v}
                                      for r, v in entries],
        }  # fmt: skip
        am_pct = float(self.conf.get(f"{CS_PREFIX}.maximum-am-resource-percent", "0.1"))
        am_limit = self._resource(int(eff_max[0] * am_pct), max(1, int(eff_max[1] * am_pct)), 0)
        am_used = self._used_am(apps)
        d: dict[str, Any] = {}
        is_root = path == "root"
        if not kids and not is_root:
            d["type"] = "capacitySchedulerLeafQueueInfo"
        d.update({
            "queuePath": path,
            "capacity": cap,
            "usedCapacity": round(used_cap, 4),
            "maxCapacity": mx,
            "absoluteCapacity": round(acap, 4),
            "absoluteMaxCapacity": round(amax, 4),
            "absoluteUsedCapacity": round(abs_used, 4),
            "weight": -1,
            "normalizedWeight": 0,
            "numApplications": len(live),
            "maxParallelApps": INT_MAX,
            "queueName": path.rsplit(".", 1)[-1],
            "isAbsoluteResource": vec is not None,
            "state": self._cs_state(path),
        })  # fmt: skip
        if kids:
            d["queues"] = {"queue": [self._cs_queue_json(k, total, eff) for k in kids]}
        d.update({
            "resourcesUsed": self._resource(*used),
            "hideReservationQueues": False,
            "nodeLabels": ["*"],
            "allocatedContainers": containers,
            "reservedContainers": 0,
            "pendingContainers": pend[3],
            "capacities": {"queueCapacitiesByPartition": [{
                "partitionName": "",
                "queueCapacityVectorInfo": vector_info,
                "capacity": cap,
                "usedCapacity": round(used_cap, 4),
                "maxCapacity": mx,
                "absoluteCapacity": round(acap, 4),
                "absoluteUsedCapacity": round(abs_used, 4),
                "absoluteMaxCapacity": round(amax, 4),
                "maxAMLimitPercentage": am_pct * 100.0 if not kids else 0,
                "weight": -1,
                "normalizedWeight": 0,
                "configuredMinResource": configured_min,
                "configuredMaxResource": configured_max,
                "effectiveMinResource": self._resource(*eff_min),
                "effectiveMaxResource": self._resource(*eff_max),
            }]},
            "resources": {"resourceUsagesByPartition": [{
                "partitionName": "",
                "used": self._resource(*used),
                "reserved": zero,
                "pending": self._resource(pend[0], pend[1], pend[2]),
                "amUsed": self._resource(*am_used),
                "amLimit": am_limit,
                "userAmLimit": am_limit,
            }]},
            "minEffectiveCapacity": self._resource(*eff_min),
            "maxEffectiveCapacity": self._resource(*eff_max),
            "maximumAllocation": max_alloc,
            "queueAcls": {"queueAcl": [
                {"accessType": "ADMINISTER_QUEUE", "accessControlList": "*"},
                {"accessType": "APPLICATION_MAX_PRIORITY", "accessControlList": "*"},
                {"accessType": "SUBMIT_APP", "accessControlList": "*"},
            ]},
            "queuePriority": 0,
            "orderingPolicyInfo": "fifo" if not kids and not is_root else "utilization",
            "autoCreateChildQueueEnabled": False,
            "leafQueueTemplate": {},
            "mode": "absolute" if vec is not None else "percentage",
            "queueType": "leaf" if not kids and not is_root else "parent",
            "creationMethod": "static",
            "autoCreationEligibility": "off",
            "autoQueueTemplateProperties": {},
            "autoQueueParentTemplateProperties": {},
            "autoQueueLeafTemplateProperties": {},
        })  # fmt: skip
        if is_root:
            del d["autoCreateChildQueueEnabled"], d["leafQueueTemplate"]
        if not kids and not is_root:
            users: dict[str, list[_App]] = {}
            for a in live:
                users.setdefault(a.user, []).append(a)

            def user_json(name: str, xs: list[_App]) -> dict[str, Any]:
                u_pend = self._pending(xs)
                u_am = self._resource(*self._used_am(xs))
                return {
                    "username": name,
                    "resourcesUsed": self._resource(*self._used(xs)),
                    "numPendingApplications": sum(1 for a in xs if not _activated(a)),
                    "numActiveApplications": sum(1 for a in xs if _activated(a)),
                    "AMResourceUsed": u_am,
                    "userResourceLimit": self._resource(*(int(x) for x in eff_min)),
                    "resources": {"resourceUsagesByPartition": [{
                        "partitionName": "",
                        "used": self._resource(*self._used(xs)),
                        "reserved": zero,
                        "pending": self._resource(u_pend[0], u_pend[1], u_pend[2]),
                        "amUsed": u_am,
                        "amLimit": am_limit,
                        "userAmLimit": zero,
                    }]},
                    "userWeight": 1.0,
                    "isActive": u_pend[3] > 0,
                }  # fmt: skip

            d.update({
                "numActiveApplications": sum(1 for a in live if _activated(a)),
                "numPendingApplications": sum(1 for a in live if not _activated(a)),
                "numContainers": containers,
                "maxApplications": int(10000 * acap / 100.0),
                "maxApplicationsPerUser": int(10000 * acap / 100.0),
                "userLimit": 100,
                "users": {"user": [user_json(u, xs) for u, xs in sorted(users.items())]}
                if users else {},
                "userLimitFactor": 1,
                "configuredMaxAMResourceLimit": am_pct,
                "AMResourceLimit": am_limit,
                "usedAMResource": self._resource(*am_used),
                "userAMResourceLimit": am_limit,
                "preemptionDisabled": True,
                "intraQueuePreemptionDisabled": True,
                "defaultPriority": self._default_priority(path),
                "isAutoCreatedLeafQueue": False,
                "maxApplicationLifetime": -1,
                "defaultApplicationLifetime": -1,
            })  # fmt: skip
        return d

    def _used_am(self, apps: Iterable[_App]) -> tuple[int, int, int]:
        cs = [c for a in apps for c in a.containers if c.is_am]
        return sum(c.memory_mb for c in cs), sum(c.vcores for c in cs), 0

    def _cs_scheduler_json(self) -> dict:
        total = self._cluster_total()
        q = self._cs_queue_json("root", total, self._cs_effective())
        root = {
            "type": "capacityScheduler",
            "capacity": 100.0,
            "usedCapacity": q["usedCapacity"],
            "maxCapacity": 100.0,
            "weight": -1,
            "normalizedWeight": 0,
            "queueCapacityVectorInfo": q["capacities"]["queueCapacitiesByPartition"][0][
                "queueCapacityVectorInfo"],
            "queueName": "root",
            "queuePath": "root",
            "maxParallelApps": INT_MAX,
            "isAbsoluteResource": False,
            "queues": q["queues"],
            "capacities": q["capacities"],
            "health": {
                "lastrun": self._t,
                "operationsInfo": [
                    {"operation": op, "nodeId": "N/A", "containerId": "N/A", "queue": "N/A"}
                    for op in ("last-allocation", "last-release", "last-preemption",
                               "last-reservation")
                ],
                "lastRunDetails": [
                    {"operation": op, "count": 0, "resources": self._resource(0, 0, 0)}
                    for op in ("releases", "allocations", "reservations")
                ],
            },
        }  # fmt: skip
        for key in ("maximumAllocation", "queueAcls", "queuePriority", "orderingPolicyInfo",
                    "mode", "queueType", "creationMethod", "autoCreationEligibility",
                    "autoQueueTemplateProperties", "autoQueueParentTemplateProperties",
                    "autoQueueLeafTemplateProperties"):  # fmt: skip
            root[key] = q[key]
        if self.hadoop_line == "3.3":
            _strip_34(root)
        return {"scheduler": {"schedulerInfo": root}}

    # Fair Scheduler view -------------------------------------------------------------------

    def _fs_queue_json(self, path: str, total: tuple[int, int, int], fair: tuple[int, ...],
                       steady: tuple[int, ...], leaf: bool) -> dict[str, Any]:  # fmt: skip
        apps = self._apps_in(path)
        live = [a for a in apps if a.state in LIVE]
        used = self._used(apps)
        pend = self._pending(live)
        max_alloc = self._resource(
            *self.max_allocation, max((n.gpus for n in self.nodes.values()), default=0)
        )
        d: dict[str, Any] = {
            "maxApps": INT_MAX,
            "minResources": self._resource(0, 0, 0),
            "maxResources": self._resource(*total),
            "usedResources": self._resource(*used),
            "amUsedResources": self._resource(*self._used_am(apps)),
            "amMaxResources": self._resource(fair[0] // 2, fair[1] // 2, 0),
            "demandResources": self._resource(used[0] + pend[0], used[1] + pend[1],
                                              used[2] + pend[2]),
            "steadyFairResources": self._resource(*steady),
            "fairResources": self._resource(*fair),
            "clusterResources": self._resource(*total),
            "reservedResources": self._resource(0, 0, 0),
            "maxContainerAllocation": max_alloc,
            "pendingContainers": pend[3],
            "allocatedContainers": sum(len(a.containers) for a in apps),
            "reservedContainers": 0,
            "queueName": path,
            "schedulingPolicy": "fair",
            "preemptable": True,
        }  # fmt: skip
        if leaf:
            d["type"] = "fairSchedulerLeafQueueInfo"
            d["numPendingApps"] = sum(1 for a in live if a.state != "RUNNING")
            d["numActiveApps"] = sum(1 for a in live if a.state == "RUNNING")
        return d

    def fair_shares(self) -> dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]]:
        """Leaf path -> (instantaneous fair share, steady fair share) as (MB, vcores, GPUs)."""
        total = self._cluster_total()
        weights = self.fair_weights
        active = {q for q in weights if any(a.state in LIVE for a in self._apps_in(q))}
        all_w = sum(weights.values()) or 1.0
        act_w = sum(weights[q] for q in active) or 1.0
        out = {}
        for q, w in weights.items():
            steady = (int(total[0] * w / all_w), int(total[1] * w / all_w),
                      int(total[2] * w / all_w))  # fmt: skip
            fair = (int(total[0] * w / act_w), int(total[1] * w / act_w),
                    int(total[2] * w / act_w)) if q in active else (0, 0, 0)  # fmt: skip
            out[q] = (fair, steady)
        return out

    def _fs_scheduler_json(self) -> dict:
        total = self._cluster_total()
        shares = self.fair_shares()
        children = [self._fs_queue_json(q, total, shares[q][0], shares[q][1], leaf=True)
                    for q in sorted(self.fair_weights)]  # fmt: skip
        root = self._fs_queue_json("root", total, total, total, leaf=False)
        root["childQueues"] = {"queue": children}
        return {"scheduler": {"schedulerInfo": {"type": "fairScheduler", "rootQueue": root}}}

    def scheduler_json(self) -> dict:
        return (
            self._cs_scheduler_json()
            if self.scheduler == "capacity"
            else (self._fs_scheduler_json())
        )

    def scheduler_conf_json(self) -> dict:
        if self.scheduler != "capacity":
            raise _HTTPError(400, "BadRequestException",
                             "Configuration change only supported by MutableConfScheduler.",
                             text=True)  # fmt: skip
        return {"property": [{"name": k, "value": v} for k, v in sorted(self.conf.items())]}


def _activated(app: _App) -> bool:
    """Counted as an active application by its queue: RUNNING, or its AM container runs."""
    return app.state == "RUNNING" or (app.state == "ACCEPTED" and bool(app.containers))


def _strip_34(queue: dict[str, Any]) -> None:
    """Remove :data:`CS_34_ONLY_KEYS` from a queue info, its partitions and its children."""
    for key in CS_34_ONLY_KEYS:
        queue.pop(key, None)
    for part in (queue.get("capacities") or {}).get("queueCapacitiesByPartition", []):
        for key in CS_34_ONLY_KEYS:
            part.pop(key, None)
    for child in (queue.get("queues") or {}).get("queue", []):
        _strip_34(child)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# --------------------------------------------------------------------------------------------
# HTTP shell
# --------------------------------------------------------------------------------------------


@dataclass
class _Injection:
    path: str
    method: str | None
    status: int
    body: bytes | None
    transform: Callable[[Any], Any] | None
    truncate: float | None
    disconnect: bool
    content_type: str
    times: int


@dataclass(frozen=True)
class RequestRecord:
    """One request the emulator saw (for tests of auth and routing)."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]


@dataclass
class _Reply:
    status: int
    body: bytes = b""
    content_type: str | None = "application/json"  # None: no Content-Type (an empty 202)
    headers: dict[str, str] = field(default_factory=dict)
    disconnect_after: int | None = None  # send only this many body bytes, then close


def _json_reply(status: int, doc: Any, headers: dict[str, str] | None = None) -> _Reply:
    return _Reply(status, json.dumps(doc).encode(), "application/json", headers or {})


def _error_reply(err: _HTTPError, text_type: str = "text/plain") -> _Reply:
    if err.text:
        return _Reply(err.status, err.message.encode(), text_type)
    return _json_reply(err.status, {"RemoteException": {
        "exception": err.exception,
        "message": err.message,
        "javaClassName": _JAVA_EXCEPTIONS.get(err.exception, err.exception),
    }})  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], emulator: RMEmulator) -> None:
        self.emulator = emulator
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # a client that gave up (timeout) or a cut connection
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # headers and body go out as two writes: without this, Nagle + delayed ACK add 40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.emulator._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.emulator._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        reply = self.server.emulator._handle(method, self.path, dict(self.headers.items()), body)
        if reply is None:  # outage: drop the connection without an answer
            self.close_connection = True
            return
        self.send_response(reply.status)
        if reply.content_type is not None:
            self.send_header("Content-Type", f"{reply.content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(reply.body)))
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if reply.disconnect_after is not None:
            self.wfile.write(reply.body[: reply.disconnect_after])
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(reply.body)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")


#: The emulator's own fault-control endpoint (outside Hadoop's ``/ws/v1``).
FAULTS_PATH: Final = "/emulator/faults"
_FAULT_KEYS: Final = frozenset({"clear", "delay", "outage", "outage_after", "outage_seconds",
                                "inject", "restart", "nodes"})  # fmt: skip
_INJECT_KEYS: Final = frozenset({"path", "body", "status", "truncate", "disconnect",
                                 "content_type", "method", "times"})  # fmt: skip
_UNSET: Any = object()

_APP_PATH = re.compile(r"^/apps/([^/]+)(?:/(state|queue|priority|timeouts|timeout)(?:/([^/]+))?)?$")


class RMEmulator:
    """One emulated ResourceManager (HTTP server) over a :class:`SimCluster`.

    ``RMEmulator(nodes=4, gpus_per_node=4, manual_clock=True).start()`` returns
    ``http://127.0.0.1:<port>``. Keyword arguments other than the ones below go to
    :class:`SimCluster` when no ``cluster`` is given.

    ``ha_state``: ``"ACTIVE"`` or ``"STANDBY"``; ``standby_mode``: ``"redirect"`` (307) or
    ``"refresh"`` (200 page + Refresh header); ``require_auth``: refuse writes that carry neither
    ``user.name`` nor an ``Authorization`` header (403, Hadoop's AuthorizationException);
    ``admins``: users allowed to mutate the scheduler configuration (``None`` = anyone);
    ``control``: serve the fault-control endpoint :data:`FAULTS_PATH` (module docstring).
    """

    def __init__(
        self,
        cluster: SimCluster | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ha_state: Literal["ACTIVE", "STANDBY"] = "ACTIVE",
        standby_mode: Literal["redirect", "refresh"] = "redirect",
        require_auth: bool = False,
        admins: Iterable[str] | None = None,
        control: bool = True,
        **cluster_kwargs: Any,
    ) -> None:
        if cluster is not None and cluster_kwargs:
            raise TypeError(f"cluster given: unexpected arguments {sorted(cluster_kwargs)}")
        self.cluster = cluster if cluster is not None else SimCluster(**cluster_kwargs)
        self.host = host
        self._port = port
        self.ha_state = ha_state
        self.ha_enabled = False
        self.standby_mode = standby_mode
        self.peer: RMEmulator | None = None
        self.require_auth = require_auth
        self.admins = None if admins is None else frozenset(admins)
        self.requests: deque[RequestRecord] = deque(maxlen=1000)
        self.started_on = self.cluster.clock.now_ms()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._outage: Literal["refused", "503", "drop"] | None = None
        self._delay = 0.0
        self._injections: list[_Injection] = []
        self._fault_lock = threading.Lock()
        self._life_lock = threading.Lock()
        self.control = control
        self._timers: list[threading.Timer] = []

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> str:
        """Listen (on ``port``, or a free one) and serve in a daemon thread; returns the URL."""
        with self._life_lock:
            if self._server is None:
                self._open()
        return self.url

    def stop(self) -> None:
        with self._fault_lock:
            timers, self._timers = self._timers, []
        for t in timers:
            t.cancel()
        with self._life_lock:
            self._close()

    def __enter__(self) -> RMEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _open(self) -> None:
        srv = _Server((self.host, self._port), self)
        self._port = srv.server_address[1]
        self._server = srv
        self._thread = threading.Thread(
            target=srv.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"rm-emulator-{self._port}", daemon=True,
        )  # fmt: skip
        self._thread.start()

    def _close(self) -> None:
        srv, self._server = self._server, None
        if srv is None:
            return
        srv.shutdown()
        srv.server_close()
        with self._conn_lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._conn_lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    # -- faults ------------------------------------------------------------------------------

    def set_outage(self, mode: Literal["refused", "503", "drop"] | None) -> None:
        """``"refused"``: close the listening socket (connection refused) and open connections;
        ``"503"``: answer every request 503; ``"drop"``: accept, then close without answering;
        ``None``: back to normal (re-listening on the same port)."""
        if mode not in (None, "refused", "503", "drop"):
            raise ValueError(f"unknown outage mode {mode!r}")
        with self._life_lock:
            was = self._outage
            self._outage = mode
            if mode == "refused" and self._server is not None:
                self._close()
            elif mode != "refused" and was == "refused" and self._server is None:
                self._open()

    def set_delay(self, seconds: float) -> None:
        """Every answer waits this long first (slow RM); 0 to stop."""
        self._delay = max(0.0, seconds)

    def inject(
        self,
        path: str,
        *,
        body: str | bytes | None = None,
        status: int = 200,
        transform: Callable[[Any], Any] | None = None,
        truncate: float | None = None,
        disconnect: bool = False,
        content_type: str = "application/json",
        method: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` requests for ``path`` (``/apps`` or the full
        ``/ws/v1/cluster/apps``; query ignored) differently: a raw ``body``; or the real answer
        passed through ``transform`` (decoded JSON in, JSON-able out); or the real answer cut
        to its first ``truncate`` fraction (a complete HTTP response with partial JSON). With
        ``disconnect`` the full length is announced but the connection closes half-way."""
        if not path.startswith("/ws/"):
            path = WS + (path if path.startswith("/") else "/" + path)
        full = path
        raw = body.encode() if isinstance(body, str) else body
        with self._fault_lock:
            self._injections.append(
                _Injection(
                    full.rstrip("/"),
                    method,
                    status,
                    raw,
                    transform,
                    truncate,
                    disconnect,
                    content_type,
                    times,
                )
            )

    def clear_faults(self) -> None:
        with self._fault_lock:
            self._injections.clear()
            timers, self._timers = self._timers, []
        for t in timers:
            t.cancel()
        self._delay = 0.0
        self.set_outage(None)

    def after(self, seconds: float, action: Callable[[], None]) -> threading.Timer:
        """Run ``action`` in ``seconds`` on a timer thread (cancelled by :meth:`stop` and
        :meth:`clear_faults`)."""
        timer = threading.Timer(max(0.0, seconds), action)
        timer.daemon = True
        with self._fault_lock:
            self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        timer.start()
        return timer

    def schedule_outage(self, mode: Literal["refused", "503", "drop"], *, after: float = 0.0,
                        seconds: float | None = None) -> None:  # fmt: skip
        """An outage of ``mode`` starting in ``after`` seconds and lasting ``seconds`` (``None``:
        until :meth:`set_outage` ``(None)`` or :meth:`clear_faults`)."""
        if mode not in ("refused", "503", "drop"):
            raise ValueError(f"unknown outage mode {mode!r}")
        if seconds is not None and seconds <= 0:
            raise ValueError(f"outage seconds must be > 0, got {seconds}")

        def begin() -> None:
            self.set_outage(mode)
            if seconds is not None:
                self.after(seconds, lambda: self.set_outage(None))

        if after <= 0:
            begin()
        else:
            self.after(after, begin)

    def faults_json(self) -> dict[str, Any]:
        """The faults in force (``GET`` :data:`FAULTS_PATH`)."""
        with self._fault_lock:
            injections = [{"path": i.path, "method": i.method, "status": i.status,
                           "times": i.times} for i in self._injections]  # fmt: skip
            pending = sum(1 for t in self._timers if t.is_alive())
        return {
            "outage": self._outage,
            "delay": self._delay,
            "injections": injections,
            "scheduled": pending,
            "clusterId": self.cluster.cluster_ts,
            "hadoopVersion": self.cluster.version,
        }

    def apply_faults(self, doc: Any) -> None:
        """Apply a ``POST`` :data:`FAULTS_PATH` body (module docstring); ``ValueError`` if
        malformed, before anything changes."""
        if not isinstance(doc, dict):
            raise ValueError("the body must be a JSON object")
        unknown = set(doc) - _FAULT_KEYS
        if unknown:
            raise ValueError(f"unknown fault keys {sorted(unknown)}; known: {sorted(_FAULT_KEYS)}")

        def number(key: str, where: Mapping[str, Any], default: float | None) -> float | None:
            raw = where.get(key, default)
            if raw is None:
                return None
            if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
                raise ValueError(f"{key} must be a number >= 0, got {raw!r}")
            return float(raw)

        delay = number("delay", doc, None)
        outage = doc.get("outage", _UNSET)
        if outage is not _UNSET and outage not in (None, "refused", "503", "drop"):
            raise ValueError(f"outage must be refused, 503, drop or null, got {outage!r}")
        outage_after = number("outage_after", doc, 0.0) or 0.0
        outage_seconds = number("outage_seconds", doc, None)
        if outage == "refused" and outage_seconds is None:
            raise ValueError("outage 'refused' closes this endpoint too: give outage_seconds")
        if outage_seconds == 0:
            raise ValueError("outage_seconds must be > 0")
        raw_inj = doc.get("inject") or []
        injections = raw_inj if isinstance(raw_inj, list) else [raw_inj]
        checked: list[dict[str, Any]] = []
        for inj in injections:
            if not isinstance(inj, dict) or not isinstance(inj.get("path"), str):
                raise ValueError("every inject entry needs a 'path'")
            extra = set(inj) - _INJECT_KEYS
            if extra:
                raise ValueError(f"unknown inject keys {sorted(extra)}")
            status = inj.get("status", 200)
            times = inj.get("times", 1)
            if not isinstance(status, int) or not 100 <= status <= 599:
                raise ValueError(f"inject status must be an HTTP status, got {status!r}")
            if not isinstance(times, int) or times < 1:
                raise ValueError(f"inject times must be an integer >= 1, got {times!r}")
            truncate = number("truncate", inj, None)
            if truncate is not None and truncate > 1:
                raise ValueError(f"inject truncate must be a fraction in [0, 1], got {truncate}")
            body = inj.get("body")
            if body is not None and not isinstance(body, str):
                body = json.dumps(body)
            checked.append({"path": inj["path"], "body": body, "status": status,
                            "truncate": truncate, "disconnect": bool(inj.get("disconnect")),
                            "content_type": str(inj.get("content_type", "application/json")),
                            "method": inj.get("method"), "times": times})  # fmt: skip
        restart = doc.get("restart")
        if restart is not None and not isinstance(restart, dict):
            raise ValueError("restart must be an object {keep_apps, downtime, after}")
        if restart is not None:
            extra = set(restart) - {"keep_apps", "downtime", "after"}
            if extra:
                raise ValueError(f"unknown restart keys {sorted(extra)}")
            number("downtime", restart, 0.0)
            number("after", restart, 0.0)
        nodes = doc.get("nodes") or {}
        if not isinstance(nodes, dict):
            raise ValueError("nodes must map node ids to LOST, UNHEALTHY, DECOMMISSIONED, RUNNING")
        node_actions = {"LOST": self.cluster.lose_node, "UNHEALTHY": self.cluster.set_unhealthy,
                        "DECOMMISSIONED": self.cluster.remove_node,
                        "RUNNING": self.cluster.recover_node}  # fmt: skip
        for node_id, state in nodes.items():
            if str(state).upper() not in node_actions:
                raise ValueError(f"node {node_id}: unknown state {state!r}")
            with self.cluster.lock:
                try:
                    self.cluster._node(str(node_id))
                except KeyError:
                    raise ValueError(f"no node {node_id!r}") from None
        # -- everything checked: apply ---------------------------------------------------
        if doc.get("clear"):
            self.clear_faults()
        if delay is not None:
            self.set_delay(delay)
        for inj in checked:
            path = inj.pop("path")
            self.inject(path, **inj)
        for node_id, state in nodes.items():
            node_actions[str(state).upper()](str(node_id))
        if outage is None:
            self.set_outage(None)
        elif outage is not _UNSET:
            if outage == "refused":  # answer this request before the port closes
                outage_after = max(outage_after, 0.05)
            self.schedule_outage(outage, after=outage_after, seconds=outage_seconds)
        if restart is not None:
            keep = bool(restart.get("keep_apps", True))
            downtime = float(restart.get("downtime", 0.0))
            # on a timer, so that this request is answered before the port closes
            self.after(max(0.05, float(restart.get("after", 0.0))),
                       lambda: self.restart(keep_apps=keep, downtime=downtime))  # fmt: skip

    def _control(self, method: str, body: bytes) -> _Reply:
        if method == "GET":
            return _json_reply(200, self.faults_json())
        if method != "POST":
            return _json_reply(405, {"error": f"{method} not allowed on {FAULTS_PATH}"})
        try:
            self.apply_faults(json.loads(body or b"{}"))
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
            return _json_reply(400, {"error": str(exc)})
        return _json_reply(200, self.faults_json())

    def restart(self, *, keep_apps: bool = True, downtime: float = 0.0) -> None:
        """Restart the RM: the port refuses connections for ``downtime`` seconds, the cluster
        timestamp changes, and the apps survive only with ``keep_apps`` (recovery enabled)."""
        with self._life_lock:
            self._close()
            self.cluster.restart(keep_apps=keep_apps)
            self.started_on = self.cluster.clock.now_ms()
            if downtime > 0:
                time.sleep(downtime)
            if self._outage != "refused":
                self._open()

    # -- conveniences (delegating to the cluster) --------------------------------------------

    def advance(self, seconds: float) -> None:
        self.cluster.advance(seconds)

    def add_node(self, host: str, **kwargs: Any) -> str:
        return self.cluster.add_node(host, **kwargs)

    def lose_node(self, node_id: str) -> None:
        self.cluster.lose_node(node_id)

    def remove_node(self, node_id: str) -> None:
        self.cluster.remove_node(node_id)

    def recover_node(self, node_id: str) -> None:
        self.cluster.recover_node(node_id)

    def add_app(self, **kwargs: Any) -> str:
        return self.cluster.add_app(**kwargs)

    # -- request handling --------------------------------------------------------------------

    def _take_injection(self, method: str, path: str) -> _Injection | None:
        with self._fault_lock:
            for inj in self._injections:
                if inj.path == path and (inj.method is None or inj.method == method):
                    inj.times -= 1
                    if inj.times <= 0:
                        self._injections.remove(inj)
                    return inj
        return None

    def _handle(self, method: str, raw_path: str, headers: Mapping[str, str],
                body: bytes) -> _Reply | None:  # fmt: skip
        if self.control and urlsplit(raw_path).path.rstrip("/") == FAULTS_PATH:
            return self._control(method, body)  # never delayed, never in an outage
        if self._delay > 0:
            time.sleep(self._delay)
        if self._outage == "drop":
            return None
        if self._outage == "503":
            return _Reply(503, b"<html><body><h2>HTTP ERROR 503</h2>Service Unavailable</body>"
                          b"</html>", "text/html")  # fmt: skip
        split = urlsplit(raw_path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        lower_headers = {k.lower(): v for k, v in headers.items()}
        self.requests.append(RequestRecord(method, path, query, lower_headers))
        if self.ha_state != "ACTIVE" and path not in (WS, f"{WS}/info"):
            return self._standby_reply(raw_path)
        inj = self._take_injection(method, path)
        if inj is not None and inj.body is not None:
            return _Reply(inj.status, inj.body, inj.content_type)
        try:
            reply = self._route(method, path, query, lower_headers, body)
        except _HTTPError as err:
            reply = _error_reply(err, self._text_type)
        if inj is not None:
            reply = self._apply_injection(inj, reply)
        return reply

    @staticmethod
    def _apply_injection(inj: _Injection, reply: _Reply) -> _Reply:
        data = reply.body
        if inj.transform is not None:
            data = json.dumps(inj.transform(json.loads(data))).encode()
        if inj.truncate is not None:
            data = data[: max(1, int(len(data) * inj.truncate))]
        if inj.disconnect:
            data = data or b"{}"  # something to cut in half
            return _Reply(inj.status, data, inj.content_type, dict(reply.headers),
                          disconnect_after=len(data) // 2)  # fmt: skip
        return _Reply(inj.status, data, inj.content_type, dict(reply.headers))

    @property
    def _text_type(self) -> str:
        """Content-Type of the RM's plain-text answers (scheduler-conf): 3.5 labels them
        ``application/json`` although the body is not JSON."""
        return "application/json" if self.cluster.jersey2 else "text/plain"

    def _standby_reply(self, raw_path: str) -> _Reply:
        peer = self.peer
        if peer is not None and peer.ha_state == "ACTIVE" and peer.running:
            target = peer.url + raw_path
            if self.standby_mode == "redirect":
                return _Reply(307, f"This is standby RM. The redirect url is: {target}\n".encode(),
                              "text/plain", {"Location": target})  # fmt: skip
        else:
            target = self.url + raw_path
        msg = f"This is standby RM. Redirecting to the current active RM: {target}\n"
        return _Reply(200, msg.encode(), "text/plain", {"Refresh": f"3; url={target}"})

    def _user(self, query: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
        # SPNEGO (KerberosAuthenticationHandler) accepts only "Authorization: Negotiate <token>"
        negotiate = headers.get("authorization", "").startswith("Negotiate ")
        return query.get("user.name") or ("spnego" if negotiate else None)

    def _route(self, method: str, path: str, query: Mapping[str, str],
               headers: Mapping[str, str], body: bytes) -> _Reply:  # fmt: skip
        if not path.startswith(WS):
            raise _not_found(f"no such resource: {path}")
        sub = path[len(WS) :] or "/"
        user = self._user(query, headers)
        if method != "GET" and self.require_auth and user is None:
            raise _HTTPError(
                403, "AuthorizationException", "Unable to obtain user name, user not authenticated"
            )
        doc: Any = None
        if method in ("PUT", "POST") and body:
            try:
                doc = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise _bad(f"Unable to parse the JSON body: {exc}") from None
        rm_address = f"{self.host}:{self._port}"
        c = self.cluster
        with c.lock:
            c.tick()
            if sub in ("/", "/info") and method == "GET":
                return _json_reply(
                    200, c.cluster_info_json(self.ha_state, self.ha_enabled, self.started_on)
                )
            if sub == "/metrics" and method == "GET":
                return _json_reply(200, c.metrics_json())
            if sub == "/scheduler" and method == "GET":
                return _json_reply(200, c.scheduler_json())
            if sub == "/nodes" and method == "GET":
                return _json_reply(200, c.nodes_json(query.get("states")))
            if sub.startswith("/nodes/") and method == "GET":
                return _json_reply(200, c.node_json(sub[len("/nodes/") :]))
            if sub == "/apps" and method == "GET":
                return _json_reply(200, c.apps_json(query, rm_address))
            if sub == "/apps" and method == "POST":
                app_id = c.submit_json(doc, user)
                return _Reply(  # no entity, so no Content-Type (as the RM)
                    202, b"", None, {"Location": f"http://{rm_address}{WS}/apps/{app_id}"}
                )
            if sub == "/apps/new-application" and method == "POST":
                return _json_reply(200, c.new_application_json())
            if sub == "/scheduler-conf" and method == "GET":
                return _json_reply(200, c.scheduler_conf_json())
            if sub == "/scheduler-conf" and method == "PUT":
                if self.admins is not None and user not in self.admins:
                    raise _HTTPError(403, "ForbiddenException",
                                     f"User {user} is not admin; cannot mutate the scheduler "
                                     "configuration", text=True)  # fmt: skip
                c.mutate_conf(doc, user)
                return _Reply(200, b"Configuration change successfully applied.",
                              self._text_type)  # fmt: skip
            m = _APP_PATH.match(sub)
            if m:
                return self._app_route(method, m.group(1), m.group(2), m.group(3), doc,
                                       rm_address, query)  # fmt: skip
        if sub in ("/", "/info", "/metrics", "/scheduler", "/nodes", "/apps", "/scheduler-conf",
                   "/apps/new-application"):  # fmt: skip
            raise _HTTPError(405, "WebApplicationException", f"{method} not allowed on {path}")
        raise _not_found(f"no such resource: {path}")

    def _app_route(self, method: str, app_id: str, what: str | None, extra: str | None,
                   doc: Any, rm_address: str, query: Mapping[str, str]) -> _Reply:  # fmt: skip
        c = self.cluster
        app = c._app(app_id)

        def field_of(key: str) -> Any:
            if not isinstance(doc, dict) or key not in doc:
                raise _bad(f"The request body needs a {key!r} field")
            return doc[key]

        if what is None and method == "GET" and extra is None:
            return _json_reply(200, {"app": c.app_json(app, rm_address)})
        if what == "state" and extra is None:
            if method == "GET":
                return _json_reply(200, {"state": app.state})
            if method == "PUT":
                target = str(field_of("state")).upper()
                if target != "KILLED":
                    raise _bad("Only 'KILLED' is allowed as a target state.")
                status, state = c.kill(app_id, (doc or {}).get("diagnostics"))
                headers = {"Location": f"http://{rm_address}{WS}/apps/{app_id}/state"} if (
                    status == 202) else {}  # fmt: skip
                return _json_reply(status, {"state": state}, headers)
        if what == "queue" and extra is None:
            if method == "GET":
                return _json_reply(200, {"queue": c._queue_display(app.queue)})
            if method == "PUT":
                return _json_reply(200, {"queue": c.move(app_id, str(field_of("queue")))})
        if what == "priority" and extra is None:
            if method == "GET":
                return _json_reply(200, {"priority": app.priority})
            if method == "PUT":
                try:
                    prio = int(field_of("priority"))
                except (TypeError, ValueError):
                    raise _bad("priority must be an integer") from None
                return _json_reply(200, {"priority": c.set_priority(app_id, prio)})
        if what == "timeouts" and method == "GET":
            if extra is None:
                return _json_reply(200, {"timeouts": {"timeout": [c._timeout_json(app)]}})
            if extra.upper() != "LIFETIME":
                raise _bad(f"Invalid timeout type {extra}: only LIFETIME is supported")
            return _json_reply(200, {"timeout": c._timeout_json(app)})
        if what == "timeout" and extra is None and method == "PUT":
            t = field_of("timeout")
            if not isinstance(t, dict) or str(t.get("type", "")).upper() != "LIFETIME":
                raise _bad("Timeout type must be LIFETIME")
            if not t.get("expiryTime"):
                raise _bad("Timeout expiryTime must be given")
            c.set_lifetime(app_id, _parse_iso(str(t["expiryTime"])))
            return _json_reply(200, {"timeout": c._timeout_json(app)})
        raise _HTTPError(
            405, "WebApplicationException", f"{method} not allowed on /apps/{app_id}/{what or ''}"
        )


class RMHAPair:
    """Two emulated RMs over one :class:`SimCluster` (the shared ZooKeeper state store): the
    first ACTIVE, the second STANDBY. :meth:`failover` swaps them."""

    def __init__(
        self,
        cluster: SimCluster | None = None,
        *,
        host: str = "127.0.0.1",
        ports: tuple[int, int] = (0, 0),
        standby_mode: Literal["redirect", "refresh"] = "redirect",
        **cluster_kwargs: Any,
    ) -> None:
        if cluster is None:
            cluster_kwargs.setdefault("recovery", True)
            cluster = SimCluster(**cluster_kwargs)
        self.cluster = cluster
        self.rms = (
            RMEmulator(cluster, host=host, port=ports[0], ha_state="ACTIVE",
                       standby_mode=standby_mode),
            RMEmulator(cluster, host=host, port=ports[1], ha_state="STANDBY",
                       standby_mode=standby_mode),
        )  # fmt: skip
        a, b = self.rms
        a.peer, b.peer = b, a
        a.ha_enabled = b.ha_enabled = True

    def start(self) -> list[str]:
        return [rm.start() for rm in self.rms]

    def stop(self) -> None:
        for rm in self.rms:
            rm.stop()

    def __enter__(self) -> RMHAPair:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def urls(self) -> list[str]:
        return [rm.url for rm in self.rms]

    @property
    def active(self) -> RMEmulator:
        return next(rm for rm in self.rms if rm.ha_state == "ACTIVE")

    @property
    def standby(self) -> RMEmulator:
        return next(rm for rm in self.rms if rm.ha_state != "ACTIVE")

    def failover(self) -> str:
        """The standby becomes ACTIVE, the active STANDBY; returns the new active URL."""
        old, new = self.active, self.standby
        old.ha_state, new.ha_state = "STANDBY", "ACTIVE"
        new.started_on = self.cluster.clock.now_ms()
        return new.url
