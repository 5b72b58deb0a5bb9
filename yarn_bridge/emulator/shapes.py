"""The YARN ResourceManager REST API's documented JSON shapes and the emulator's constants.

The key sets below are what ``tests/integration/test_yarn_emulator.py`` and
``tests/integration/test_emulator_golden.py`` hold the emulator's answers to: the
``ResourceManagerRest.md`` tables and examples of Hadoop
3.3 / 3.4 and the ``webapp/dao`` classes of the ResourceManager, plus what a real 3.5.0 RM
answered (``tests/golden/rm-3.5.0``). Alongside them: the REST root, the Hadoop lines served,
resource and configuration names, the RM's diagnostics texts and the application states.
"""

from __future__ import annotations

from typing import Final

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
#: ``APP_OPTIONAL_KEYS`` are null, hence omitted, in some states (see the package docstring).
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
