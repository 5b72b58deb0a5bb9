"""The cluster's JSON views: what ``GET /ws/v1/cluster/*`` answers, per Hadoop line.

Imitates the ResourceManager REST API's ``ClusterInfo`` (``/info``), ``ClusterMetricsInfo``
(``/metrics``), ``NodeInfo`` (``/nodes``, ``/nodes/{id}``, with the ``states`` filter),
``AppInfo`` (``/apps`` with its query filters and ``deSelects``, ``/apps/{id}``), the app's
``AppTimeoutInfo`` and ``NewApplication`` (``POST /apps/new-application``), and hands
``/scheduler`` to the scheduler in use (:mod:`~yarn_bridge.emulator.capacity`,
:mod:`~yarn_bridge.emulator.fair`). Hadoop 3.3 / 3.4 answer as Jersey 1 does (empty lists
``null``, ``resourceSecondsMap`` values as strings), 3.5 as Jersey 2 does (``{}``, numbers,
empty maps and lists omitted, the 3.5-only metrics and node keys); the key sets the answers are
held to are in :mod:`~yarn_bridge.emulator.shapes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarn_bridge.emulator.capacity import CapacityScheduler
from yarn_bridge.emulator.fair import FairScheduler
from yarn_bridge.emulator.shapes import (
    _BUILT_ON,
    APP_35_EMPTY_ABSENT_KEYS,
    CLUSTER_METRICS_35_KEYS,
    FINAL,
    GPU,
)
from yarn_bridge.emulator.state import ClusterState, _App, _bad, _iso, _Node, _not_found


class Views:
    """The JSON documents of one cluster (the caller holds the lock and has ticked)."""

    def __init__(
        self, state: ClusterState, capacity: CapacityScheduler, fair: FairScheduler
    ) -> None:
        self.state = state
        self.capacity = capacity
        self.fair = fair

    # -- GET /info, /metrics -----------------------------------------------------------------

    def cluster_info_json(self, ha_state: str, ha_enabled: bool, started_on: int) -> dict:
        s = self.state
        recovery = "org.apache.hadoop.yarn.server.resourcemanager.recovery."
        store = recovery + ("ZKRMStateStore" if s.recovery or ha_enabled else "NullRMStateStore")
        build = (f"{s.version} from yarn-arbiter-emulator by yarn source checksum "
                 "0123456789abcdef0123456789abcdef")  # fmt: skip
        built_on = _BUILT_ON[s.hadoop_line]
        return {
            "clusterInfo": {
                "id": s.cluster_ts,
                "startedOn": started_on,
                "state": "STARTED",
                "haState": ha_state,
                "rmStateStoreName": store,
                "resourceManagerVersion": s.version,
                "resourceManagerBuildVersion": build,
                "resourceManagerVersionBuiltOn": built_on,
                "hadoopVersion": s.version,
                "hadoopBuildVersion": build,
                "hadoopVersionBuiltOn": built_on,
                "haZooKeeperConnectionState": "CONNECTED" if ha_enabled
                else "ResourceManager HA is not enabled.",
            }
        }  # fmt: skip

    def metrics_json(self) -> dict:
        s = self.state
        apps = list(s.apps.values())
        total = s.cluster_total()
        used = s.used(apps)
        pend = s.pending(apps)

        def count(state: str) -> int:
            return sum(1 for a in apps if a.state == state)

        def by_state(state: str) -> int:
            return sum(1 for n in s.nodes.values() if n.state == state)

        containers = sum(len(a.containers) for a in apps)
        # what the NodeManagers measure: half of what the containers hold (as in _node_json)
        util_mb = sum(s.node_used(n)[0] // 2 for n in s.nodes.values() if n.active)
        util_vc = sum(s.node_used(n)[1] // 2 for n in s.nodes.values() if n.active)
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
            "totalNodes": len(s.nodes),
            "lostNodes": by_state("LOST"),
            "unhealthyNodes": by_state("UNHEALTHY"),
            "decommissioningNodes": by_state("DECOMMISSIONING"),
            "decommissionedNodes": by_state("DECOMMISSIONED"),
            "rebootedNodes": by_state("REBOOTED"),
            "activeNodes": by_state("RUNNING"),
            "shutdownNodes": by_state("SHUTDOWN"),
            "containerAssignedPerSecond": 0,
            "totalUsedResourcesAcrossPartition": s.resource(*used),
            "totalClusterResourcesAcrossPartition": s.resource(*total),
            "totalAllocatedContainersAcrossPartition": containers
            if s.scheduler == "capacity" else 0,
            "crossPartitionMetricsAvailable": s.scheduler == "capacity",
        }  # fmt: skip
        if s.scheduler == "capacity":
            m["totalReservedResourcesAcrossPartition"] = s.resource(0, 0, 0)
        m["rmEventQueueSize"] = m["schedulerEventQueueSize"] = 0
        if not s.jersey2:
            for key in CLUSTER_METRICS_35_KEYS:
                del m[key]
        return {"clusterMetrics": m}

    # -- GET /nodes, /nodes/{id} -------------------------------------------------------------

    def _node_json(self, node: _Node, now: int) -> dict[str, Any]:
        s = self.state
        *used, n_containers = s.node_used(node)
        active = node.active
        d: dict[str, Any] = {
            "rack": node.rack,
            "state": node.state,
            "id": node.id,
            "nodeHostName": node.host,
            "nodeHTTPAddress": f"{node.host}:{node.http_port}",
            "lastHealthUpdate": now if node.state == "RUNNING" else node.last_health_update,
            "version": s.version,
            "healthReport": node.health_report,
            "numContainers": n_containers if active else 0,
            "usedMemoryMB": used[0] if active else 0,
            "availMemoryMB": node.memory_mb - used[0] if active else 0,
            "usedVirtualCores": used[1] if active else 0,
            "availableVirtualCores": node.vcores - used[1] if active else 0,
        }
        if s.jersey2:
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
            "totalResource": s.resource(node.memory_mb, node.vcores, node.gpus),
        })  # fmt: skip
        if active:
            d["usedResource"] = s.resource(*used)
            d["availableResource"] = s.resource(
                node.memory_mb - used[0], node.vcores - used[1], node.gpus - used[2]
            )
        return d

    def nodes_json(self, states: str | None) -> dict:
        s = self.state
        wanted = {x.strip().upper() for x in states.split(",") if x.strip()} if states else None
        now = s.time_ms
        out = [self._node_json(n, now) for n in s.nodes.values()
               if wanted is None or n.state in wanted]  # fmt: skip
        return {"nodes": {"node": out} if out else s.empty_list()}

    def node_json(self, node_id: str) -> dict:
        s = self.state
        node = s.nodes.get(node_id)
        if node is None:
            raise _not_found(f"{s.exc_prefix}nodeId, {node_id}, is not found")
        return {"node": self._node_json(node, s.time_ms)}

    # -- GET /apps, /apps/{id}, POST /apps/new-application -----------------------------------

    def _entries_map(self, mem_ms: float, vc_ms: float, gpu_ms: float) -> dict[str, Any]:
        secs = {"memory-mb": int(mem_ms // 1000), "vcores": int(vc_ms // 1000),
                GPU: int(gpu_ms // 1000)}  # fmt: skip
        if self.state.jersey2:  # numbers, in the RM's (hash map) order
            return {"entry": [{"key": k, "value": secs[k]} for k in ("memory-mb", GPU, "vcores")]}
        return {"entry": [{"key": k, "value": str(v)} for k, v in secs.items()]}

    def timeout_json(self, app: _App) -> dict[str, Any]:
        """An app's LIFETIME ``AppTimeoutInfo`` (``GET /apps/{id}/timeouts/LIFETIME``)."""
        if app.lifetime_ms is None:
            return {"type": "LIFETIME", "expiryTime": "UNLIMITED", "remainingTimeInSeconds": -1}
        now = self.state.time_ms
        remaining = 0 if app.state in FINAL else max(0, (app.lifetime_ms - now) // 1000)
        return {"type": "LIFETIME", "expiryTime": _iso(app.lifetime_ms),
                "remainingTimeInSeconds": remaining}  # fmt: skip

    def app_json(self, app: _App, rm_address: str, deselects: frozenset[str] = frozenset()
                 ) -> dict[str, Any]:  # fmt: skip
        s = self.state
        now = s.time_ms
        total = s.cluster_total()
        used = s.used([app])
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
            "queue": s.queue_display(app.queue),
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
        eff = self.capacity.effective() if s.scheduler == "capacity" else {}
        queue_total = eff[app.queue][0][0] if app.queue in eff else total[0]
        d.update({
            "diagnostics": app.diagnostics,
            "clusterId": s.cluster_ts,
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
            http = f"{host}:{s.nodes[app.am_node].http_port}" if app.am_node in s.nodes \
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
        if s.scheduler == "capacity" and app.state in ("ACCEPTED", "RUNNING"):
            pend = s.pending([app])
            am_used = (am.memory_mb, am.vcores, 0) if am is not None else (0, 0, 0)
            limit = s.resource(total[0] // 2, max(1, total[1] // 2), 0)
            d["resourceInfo"] = {"resourceUsagesByPartition": [{
                "partitionName": "",
                "used": s.resource(*used),
                "reserved": s.resource(0, 0, 0),
                "pending": s.resource(pend[0], pend[1], pend[2]),
                "amUsed": s.resource(*am_used),
                "amLimit": limit,
                "userAmLimit": limit,
            }]}  # fmt: skip
        d["timeouts"] = {"timeout": [self.timeout_json(app)]}
        if s.jersey2:
            for key in APP_35_EMPTY_ABSENT_KEYS:
                del d[key]
        for key in deselects:
            d.pop(key, None)
        return d

    def apps_json(self, query: Mapping[str, str], rm_address: str) -> dict:
        s = self.state

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
        if queue and s.scheduler == "fair":
            queue_path = queue if queue.startswith("root") else f"root.{queue}"
        elif queue:
            queue_path = self.capacity.resolve(queue) or queue
        out = []
        for app in s.apps.values():
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
        return {"apps": {"app": out} if out else s.empty_list()}

    def new_application_json(self) -> dict:
        s = self.state
        app_id = s.new_application_id()
        max_mb, max_vc = s.max_allocation
        max_gpus = max((n.gpus for n in s.nodes.values()), default=0)
        return {
            "application-id": app_id,
            "maximum-resource-capability": s.resource(max_mb, max_vc, max_gpus),
        }

    # -- GET /scheduler ----------------------------------------------------------------------

    def scheduler_json(self) -> dict:
        """The ``schedulerInfo`` of the scheduler the cluster runs."""
        return (
            self.capacity.scheduler_json()
            if self.state.scheduler == "capacity"
            else (self.fair.scheduler_json())
        )
