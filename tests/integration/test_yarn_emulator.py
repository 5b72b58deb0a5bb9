"""``yarn_bridge.emulator``: the JSON shapes of every endpoint against the documented Hadoop
key sets (raw HTTP, no client), the application life cycle on a driven clock, node GPU
capacity, standby answers, faults, and the ``emulate-rm`` command."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import httpx
import pytest
from support import REPO

from arbiter.cluster import load_cluster
from yarn_bridge.cli import FAULTS_HELP, add_parsers, build_emulator
from yarn_bridge.emulator import (
    APP_KEYS,
    APP_OPTIONAL_KEYS,
    APP_PARTITION_KEYS,
    APP_TIMEOUT_KEYS,
    CLUSTER_INFO_KEYS,
    CLUSTER_METRICS_KEYS,
    CS_34_ONLY_KEYS,
    CS_LEAF_QUEUE_KEYS,
    CS_PARENT_QUEUE_KEYS,
    CS_ROOT_KEYS,
    FAULTS_PATH,
    FS_LEAF_QUEUE_KEYS,
    FS_PARENT_QUEUE_KEYS,
    FS_SCHEDULER_INFO_KEYS,
    LIFETIME_DIAGNOSTICS,
    NEW_APPLICATION_KEYS,
    NODE_INACTIVE_ABSENT_KEYS,
    NODE_KEYS,
    RESOURCE_INFORMATION_KEYS,
    RESOURCE_KEYS,
    RMEmulator,
    RMHAPair,
    SimCluster,
)
from yarn_bridge.env import ENV_RM_URL
from yarn_bridge.rm import RMClient, RMUnavailable

WS = "/ws/v1/cluster"
ROOT = REPO


@pytest.fixture
def rm():
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the emulator's waits, recorded (and really waited)
        slept.append(seconds)
        time.sleep(seconds)

    emu = RMEmulator(
        nodes=2, gpus_per_node=4, manual_clock=True, new_seconds=1, start_seconds=1,
        app_seconds=10, sleep=sleep,
    )  # fmt: skip
    emu.slept = slept  # type: ignore[attr-defined]
    emu.start()
    with httpx.Client(base_url=emu.url + WS) as http:
        emu.http = http  # type: ignore[attr-defined]
        yield emu
    emu.stop()


def get(rm, path: str, **params) -> dict:
    r = rm.http.get(path, params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    return r.json()


def assert_resource(res: dict, gpus: int | None = None) -> None:
    assert set(res) == RESOURCE_KEYS
    infos = res["resourceInformations"]["resourceInformation"]
    assert [i["name"] for i in infos] == ["memory-mb", "vcores", "yarn.io/gpu"]
    for info in infos:
        assert set(info) == RESOURCE_INFORMATION_KEYS and info["resourceType"] == "COUNTABLE"
    assert infos[0]["value"] == res["memory"] and infos[1]["value"] == res["vCores"]
    if gpus is not None:
        assert infos[2]["value"] == gpus


# -- shapes ------------------------------------------------------------------------------


def test_cluster_info_and_metrics_shapes(rm) -> None:
    for path in ("", "/info"):
        info = get(rm, path)
        assert set(info) == {"clusterInfo"} and set(info["clusterInfo"]) == CLUSTER_INFO_KEYS
    metrics = get(rm, "/metrics")["clusterMetrics"]
    assert set(metrics) == CLUSTER_METRICS_KEYS
    assert (metrics["totalMB"], metrics["totalVirtualCores"], metrics["activeNodes"]) == (
        131072, 64, 2)  # fmt: skip
    assert_resource(metrics["totalClusterResourcesAcrossPartition"], gpus=8)
    with RMEmulator(scheduler="fair", manual_clock=True) as fair:
        fm = httpx.get(fair.url + WS + "/metrics").json()["clusterMetrics"]
    assert set(fm) == CLUSTER_METRICS_KEYS - {"totalReservedResourcesAcrossPartition"}
    assert fm["crossPartitionMetricsAvailable"] is False


def test_node_shapes_and_gpu_capacity(rm) -> None:
    rm.add_app(gpus=3, seconds=100)
    rm.advance(2)
    nodes = get(rm, "/nodes")["nodes"]["node"]
    assert len(nodes) == 2
    for node in nodes:
        assert set(node) == NODE_KEYS
        assert_resource(node["totalResource"], gpus=4)
    used = [n["usedResource"]["resourceInformations"]["resourceInformation"][2]["value"]
            for n in nodes]  # fmt: skip
    avail = [n["availableResource"]["resourceInformations"]["resourceInformation"][2]["value"]
             for n in nodes]  # fmt: skip
    assert used == [3, 0] and avail == [1, 4]
    n0 = nodes[0]
    assert n0["usedMemoryMB"] == 1024 + 3 * 2048 and n0["numContainers"] == 4
    assert n0["usedMemoryMB"] + n0["availMemoryMB"] == 65536
    assert get(rm, "/nodes/node-00:8041")["node"] == get(rm, "/nodes")["nodes"]["node"][0]
    rm.lose_node("node-01:8041")
    lost = get(rm, "/nodes", states="lost")["nodes"]["node"]
    assert [n["state"] for n in lost] == ["LOST"]
    assert set(lost[0]) == NODE_KEYS - NODE_INACTIVE_ABSENT_KEYS  # no scheduler report
    assert get(rm, "/nodes", states="DECOMMISSIONED") == {"nodes": None}
    err = rm.http.get("/nodes/ghost:1")
    assert err.status_code == 404
    assert err.json()["RemoteException"]["exception"] == "NotFoundException"


def test_nodes_from_an_arbiter_cluster_spec() -> None:
    spec = load_cluster("themis-testbed")
    with RMEmulator(SimCluster.from_cluster(spec, manual_clock=True)) as emu:
        nodes = httpx.get(emu.url + WS + "/nodes").json()["nodes"]["node"]
    assert len(nodes) == len(spec.machines) == 20
    gpus = {n["nodeHostName"]: n["totalResource"]["resourceInformations"][
        "resourceInformation"][2]["value"] for n in nodes}  # fmt: skip
    assert gpus == {m.name: m.num_gpus for m in spec.machines} and sum(gpus.values()) == 64
    assert {n["rack"] for n in nodes} == {f"/{r}" for r in spec.racks}


def test_app_shapes_through_the_life_cycle(rm) -> None:
    app_id = rm.add_app(gpus=1, queue="ml", tags=["Lease-7"])
    new = get(rm, f"/apps/{app_id}")["app"]
    assert set(new) == APP_KEYS - APP_OPTIONAL_KEYS  # no attempt yet: no AM, no resourceInfo
    assert (new["state"], new["trackingUI"], new["applicationTags"]) == (
        "NEW", "UNASSIGNED", "lease-7")  # fmt: skip
    rm.advance(1)
    accepted = get(rm, f"/apps/{app_id}")["app"]
    assert accepted["state"] == "ACCEPTED"
    assert set(accepted) == APP_KEYS - {"trackingUrl", "amContainerLogs", "amHostHttpAddress",
                                        "amRPCAddress"}  # fmt: skip
    rm.advance(1)
    running = get(rm, f"/apps/{app_id}")["app"]
    assert running["state"] == "RUNNING" and set(running) == APP_KEYS
    (part,) = running["resourceInfo"]["resourceUsagesByPartition"]
    assert set(part) == APP_PARTITION_KEYS
    assert_resource(part["used"], gpus=1)
    assert (running["allocatedMB"], running["runningContainers"]) == (1024 + 2048, 2)
    assert running["masterNodeId"] == "node-00:8041"
    (timeout,) = running["timeouts"]["timeout"]
    assert set(timeout) == APP_TIMEOUT_KEYS and timeout["expiryTime"] == "UNLIMITED"
    rm.advance(10)
    done = get(rm, f"/apps/{app_id}")["app"]
    assert (done["state"], done["finalStatus"], done["trackingUI"]) == (
        "FINISHED", "SUCCEEDED", "History")  # fmt: skip
    assert set(done) == APP_KEYS - {"resourceInfo", "amRPCAddress"}
    assert (done["allocatedMB"], done["runningContainers"]) == (-1, -1)
    assert done["finishedTime"] - done["launchTime"] == 10_000
    assert done["finishedTime"] - done["startedTime"] == done["elapsedTime"] == 12_000
    seconds = {e["key"]: int(e["value"]) for e in done["resourceSecondsMap"]["entry"]}
    assert seconds == {"memory-mb": 3072 * 10, "vcores": 2 * 10, "yarn.io/gpu": 10}
    listed = get(rm, "/apps")["apps"]["app"]
    assert listed == [done]
    slim = get(rm, "/apps", deSelects="resourceRequests,timeouts")["apps"]["app"][0]
    assert set(slim) == set(done) - {"resourceRequests", "timeouts"}


def test_capacity_scheduler_shapes(rm) -> None:
    info = get(rm, "/scheduler")["scheduler"]["schedulerInfo"]
    assert set(info) == CS_ROOT_KEYS and info["type"] == "capacityScheduler"
    leaves = info["queues"]["queue"]
    assert [q["queuePath"] for q in leaves] == ["root.default", "root.hive", "root.ml"]
    for q in leaves:
        assert set(q) == CS_LEAF_QUEUE_KEYS and q["type"] == "capacitySchedulerLeafQueueInfo"
        (caps,) = q["capacities"]["queueCapacitiesByPartition"]
        assert_resource(caps["effectiveMinResource"])
    assert [q["capacity"] for q in leaves] == [20.0, 40.0, 40.0]
    body = {"add-queue": [{"queue-name": "root.hive.etl", "params": {"entry": [
        {"key": "capacity", "value": "100"}]}}]}  # fmt: skip
    assert rm.http.put("/scheduler-conf", json=body).status_code == 200
    hive = get(rm, "/scheduler")["scheduler"]["schedulerInfo"]["queues"]["queue"][1]
    assert set(hive) == CS_PARENT_QUEUE_KEYS and hive["queueType"] == "parent"
    assert set(hive["queues"]["queue"][0]) == CS_LEAF_QUEUE_KEYS
    conf = get(rm, "/scheduler-conf")
    assert {"name": "yarn.scheduler.capacity.root.hive.queues", "value": "etl"} in conf["property"]


def test_hadoop_33_shapes_omit_the_34_keys() -> None:
    with (
        RMEmulator(nodes=2, manual_clock=True, hadoop_version="3.3") as old,
        RMEmulator(nodes=2, manual_clock=True) as new,
    ):
        for emu, version in ((old, "3.3.6"), (new, "3.4.1")):
            info = httpx.get(emu.url + WS + "/info").json()["clusterInfo"]
            assert set(info) == CLUSTER_INFO_KEYS
            assert info["hadoopVersion"] == info["resourceManagerVersion"] == version
            node = httpx.get(emu.url + WS + "/nodes").json()["nodes"]["node"][0]
            assert node["version"] == version and set(node) == NODE_KEYS
        root = httpx.get(old.url + WS + "/scheduler").json()["scheduler"]["schedulerInfo"]
        assert set(root) == CS_ROOT_KEYS - CS_34_ONLY_KEYS
        for q in root["queues"]["queue"]:
            assert set(q) == CS_LEAF_QUEUE_KEYS - CS_34_ONLY_KEYS
            (part,) = q["capacities"]["queueCapacitiesByPartition"]
            assert not CS_34_ONLY_KEYS & set(part) and "effectiveMinResource" in part
        root34 = httpx.get(new.url + WS + "/scheduler").json()["scheduler"]["schedulerInfo"]
        assert set(root34) >= CS_34_ONLY_KEYS
        assert {"mode", "queueType", "weight"} <= set(root34["queues"]["queue"][0])
    with pytest.raises(ValueError, match="hadoop_version"):
        SimCluster(hadoop_version="2.10")


# The compose cluster's queues (deploy/conf/capacity-scheduler.xml), scaled to two emulated
# nodes of 65536 MB, 32 vcores and 4 GPUs each.
ABSOLUTE = {
    "default": "[memory=32768,vcores=16]",
    "analytics": "[memory=65536,vcores=32]",
    "gpu": "[memory=32768,vcores=16,yarn.io/gpu=8]",
}


def _queues(emu: RMEmulator) -> dict[str, dict]:
    info = httpx.get(emu.url + WS + "/scheduler").json()["scheduler"]["schedulerInfo"]
    return {q["queueName"]: q for q in info["queues"]["queue"]}


def _effective(q: dict, key: str = "effectiveMinResource") -> tuple[int, int, int]:
    (part,) = q["capacities"]["queueCapacitiesByPartition"]
    res = part[key]
    return (
        res["memory"],
        res["vCores"],
        res["resourceInformations"]["resourceInformation"][2]["value"],
    )


def test_absolute_resource_queues_shapes_scaling_and_limits() -> None:
    with RMEmulator(nodes=2, gpus_per_node=4, queues=ABSOLUTE, manual_clock=True,
                    start_seconds=0) as emu:  # fmt: skip
        qs = _queues(emu)
        assert {n: (q["mode"], q["isAbsoluteResource"]) for n, q in qs.items()} == {
            n: ("absolute", True) for n in ABSOLUTE
        }
        assert _effective(qs["analytics"]) == (65536, 32, 0)
        assert _effective(qs["gpu"]) == (32768, 16, 8)
        assert _effective(qs["gpu"], "effectiveMaxResource") == (131072, 64, 8)  # unset: all
        assert qs["analytics"]["absoluteCapacity"] == 50.0  # dominant share of the cluster
        assert qs["gpu"]["absoluteCapacity"] == 100.0  # all the GPUs
        (part,) = qs["gpu"]["capacities"]["queueCapacitiesByPartition"]
        gpus = part["configuredMinResource"]["resourceInformations"]["resourceInformation"][2]
        assert gpus == {**gpus, "name": "yarn.io/gpu", "value": 8}
        vector = part["queueCapacityVectorInfo"]["configuredCapacityVector"]
        assert vector == "[memory-mb=32768.0,vcores=16.0,yarn.io/gpu=8.0]"
        emu.lose_node("node-01:8041")  # half the cluster: guarantees scale down with it
        qs = _queues(emu)
        assert _effective(qs["analytics"]) == (32768, 16, 0)
        assert _effective(qs["gpu"]) == (16384, 8, 4)
        emu.recover_node("node-01:8041")
        # a maximum vector caps the queue's GPUs: 3 of them, so a 4-GPU app waits
        with httpx.Client(base_url=emu.url + WS) as http:
            body = {"update-queue": [{"queue-name": "root.gpu", "params": {"entry": [
                {"key": "capacity", "value": "[memory=32768,vcores=16,yarn.io/gpu=3]"},
                {"key": "maximum-capacity", "value": "[memory=131072,vcores=64,yarn.io/gpu=3]"},
            ]}}]}  # fmt: skip
            assert http.put("/scheduler-conf", json=body).status_code == 200
        big = emu.add_app(queue="gpu", gpus=4, seconds=100)
        small = emu.add_app(queue="gpu", gpus=3, seconds=100)
        emu.advance(1)
        assert (emu.cluster.app_state(big), emu.cluster.app_state(small)) == (
            "ACCEPTED", "RUNNING")  # fmt: skip
        assert _effective(_queues(emu)["gpu"], "effectiveMaxResource")[2] == 3


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"root.gpu": {"capacity": "40"}}, "mix absolute resource and percentage"),
        (
            {
                "root.gpu": {
                    "capacity": "[memory=1024,vcores=1,yarn.io/gpu=9]",
                    "maximum-capacity": "[memory=2048,vcores=2,yarn.io/gpu=4]",
                }
            },
            "is greater than its max value",
        ),
        ({"root.gpu": {"capacity": "[memory=1024,disks=2]"}}, "malformed absolute resource"),
        ({"root.gpu": {"capacity": "[memory=lots]"}}, "malformed absolute resource"),
    ],
)
def test_absolute_resource_mutations_are_validated(update, message) -> None:
    with RMEmulator(nodes=1, queues=ABSOLUTE, manual_clock=True) as emu:
        entries = [{"queue-name": q, "params": {"entry": [{"key": k, "value": v}
                    for k, v in params.items()]}} for q, params in update.items()]  # fmt: skip
        r = httpx.put(emu.url + WS + "/scheduler-conf", json={"update-queue": entries})
        assert r.status_code == 400 and message in r.text
        assert emu.cluster.conf_log == []
    with pytest.raises(ValueError, match="mix absolute"):
        SimCluster(queues={"a": "[memory=1024,vcores=1]", "b": 100})


def test_fair_scheduler_shapes_and_shares() -> None:
    with RMEmulator(scheduler="fair", nodes=2, gpus_per_node=4, manual_clock=True,
                    start_seconds=0) as emu:  # fmt: skip
        emu.add_app(queue="hive", gpus=2, seconds=100)
        emu.add_app(queue="ml", gpus=2, seconds=100)
        emu.advance(1)
        info = httpx.get(emu.url + WS + "/scheduler").json()["scheduler"]["schedulerInfo"]
    assert set(info) == FS_SCHEDULER_INFO_KEYS and info["type"] == "fairScheduler"
    root = info["rootQueue"]
    assert set(root) == FS_PARENT_QUEUE_KEYS
    kids = {q["queueName"]: q for q in root["childQueues"]["queue"]}
    assert list(kids) == ["root.default", "root.hive", "root.ml"]
    for q in kids.values():
        assert set(q) == FS_LEAF_QUEUE_KEYS and q["type"] == "fairSchedulerLeafQueueInfo"

    def gpus(res: dict) -> int:
        return res["resourceInformations"]["resourceInformation"][2]["value"]

    # weights 1:2:2; only hive and ml are active
    assert [gpus(kids[q]["fairResources"]) for q in kids] == [0, 4, 4]
    assert [gpus(kids[q]["steadyFairResources"]) for q in kids] == [1, 3, 3]
    assert kids["root.ml"]["numActiveApps"] == 1 and gpus(kids["root.ml"]["usedResources"]) == 2


def test_new_application_submit_and_operations_raw(rm) -> None:
    new = rm.http.post("/apps/new-application").json()
    assert set(new) == NEW_APPLICATION_KEYS
    assert_resource(new["maximum-resource-capability"], gpus=4)
    app_id = new["application-id"]
    body = {
        "application-id": app_id,
        "application-name": "x",
        "queue": "hive",
        "am-container-spec": {"commands": {"command": "sleep 1"}},
        "resource": {"memory": 512, "vCores": 1},
        "application-tags": {"tag": ["T1"]},
    }
    r = rm.http.post("/apps", json=body, params={"user.name": "carol"})
    assert r.status_code == 202 and r.headers["location"].endswith(f"{WS}/apps/{app_id}")
    app = get(rm, f"/apps/{app_id}")["app"]
    assert (app["user"], app["queue"], app["applicationTags"]) == ("carol", "hive", "t1")
    rm.advance(2)
    assert get(rm, f"/apps/{app_id}/state") == {"state": "RUNNING"}
    assert rm.http.put(f"/apps/{app_id}/priority", json={"priority": 4}).json() == {"priority": 4}
    assert rm.http.put(f"/apps/{app_id}/queue", json={"queue": "ml"}).json() == {"queue": "ml"}
    expiry = {"timeout": {"type": "LIFETIME", "expiryTime": "2999-01-01T00:00:00.000+0000"}}
    t = rm.http.put(f"/apps/{app_id}/timeout", json=expiry).json()["timeout"]
    assert set(t) == APP_TIMEOUT_KEYS and t["expiryTime"] == "2999-01-01T00:00:00.000+0000"
    assert get(rm, f"/apps/{app_id}/timeouts/LIFETIME") == {"timeout": t}
    kill = rm.http.put(f"/apps/{app_id}/state", json={"state": "KILLED"})
    assert kill.status_code == 202 and kill.json() == {"state": "RUNNING"}
    again = rm.http.put(f"/apps/{app_id}/state", json={"state": "KILLED"})
    assert again.status_code == 200 and again.json() == {"state": "KILLED"}
    bad = rm.http.put(f"/apps/{app_id}/state", json={"state": "RUNNING"})
    assert bad.status_code == 400
    assert set(bad.json()["RemoteException"]) == {"exception", "message", "javaClassName"}
    assert rm.http.put("/scheduler-conf", json={"update-queue": [{"queue-name": "root.ml",
        "params": {"entry": {"key": "capacity", "value": "55"}}}]}).status_code == 400  # fmt: skip
    assert rm.http.delete("/apps").status_code == 405


# -- life cycle on the driven clock ------------------------------------------------------


def test_apps_wait_for_gpus_and_run_in_priority_order() -> None:
    sim = SimCluster(nodes=1, gpus_per_node=4, manual_clock=True, start_seconds=0,
                     app_seconds=10)  # fmt: skip
    big = sim.add_app(gpus=2, seconds=10)
    low = sim.add_app(gpus=3, seconds=5)
    high = sim.add_app(gpus=3, seconds=5, priority=5)
    assert [sim.app_state(a) for a in (big, low, high)] == ["RUNNING", "ACCEPTED", "ACCEPTED"]
    sim.advance(25)  # one jump: big ends at 10, high runs 10-15, low 15-20
    apps = sim.apps
    assert (apps[high].launched_ms - apps[big].submitted_ms) == 10_000
    assert (apps[low].launched_ms - apps[big].submitted_ms) == 15_000
    assert all(a.state == "FINISHED" for a in apps.values())
    assert round(apps[big].gpu_ms / 1000) == 20


def test_queue_maximum_capacity_holds_apps_back() -> None:
    sim = SimCluster(nodes=1, gpus_per_node=8, manual_clock=True, start_seconds=0,
                     queues={"default": 50, "ml": 50})  # fmt: skip
    sim.mutate_conf({"update-queue": [{"queue-name": "root.ml", "params": {"entry": [
        {"key": "maximum-capacity", "value": "50"}]}}]}, user="admin")  # fmt: skip
    first = sim.add_app(queue="ml", gpus=4, seconds=100)
    second = sim.add_app(queue="ml", gpus=1, seconds=100)
    other = sim.add_app(queue="default", gpus=4, seconds=100)
    assert [sim.app_state(a) for a in (first, second, other)] == [
        "RUNNING", "ACCEPTED", "RUNNING"]  # fmt: skip


def test_lost_nodes_retry_or_fail_attempts() -> None:
    sim = SimCluster(nodes=2, gpus_per_node=2, manual_clock=True, start_seconds=0)
    once = sim.add_app(seconds=100)
    twice = sim.add_app(seconds=100, max_attempts=2)
    assert sim.apps[once].am_node == sim.apps[twice].am_node == "node-00:8041"
    sim.lose_node("node-00")
    assert sim.app_state(once) == "FAILED" and "*lost* node" in sim.apps[once].diagnostics
    assert sim.app_state(twice) == "RUNNING" and sim.apps[twice].attempt == 2
    assert sim.apps[twice].am_node == "node-01:8041"


def test_lifetime_kill_and_unknown_or_stopped_queues() -> None:
    sim = SimCluster(manual_clock=True, start_seconds=0)
    short = sim.add_app(lifetime_seconds=5, seconds=100)
    sim.advance(5)
    assert sim.app_state(short) == "KILLED" and sim.apps[short].diagnostics == LIFETIME_DIAGNOSTICS
    assert sim.app_state(sim.add_app(queue="nope")) == "FAILED"
    sim.mutate_conf({"update-queue": {"queue-name": "root.hive", "params": {"state": "STOPPED"}}},
                    user=None)  # fmt: skip
    assert sim.app_state(sim.add_app(queue="hive")) == "FAILED"


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="Illegal capacity"):
        SimCluster(queues={"a": 50, "b": 40})
    with pytest.raises(ValueError, match="scheduler"):
        SimCluster(scheduler="fifo")  # type: ignore[arg-type]


# -- standby, faults ---------------------------------------------------------------------


def test_standby_answers() -> None:
    with RMHAPair(nodes=1, manual_clock=True) as pair:
        active, standby = pair.active.url, pair.standby.url
        r = httpx.get(standby + WS + "/apps?states=RUNNING")
        assert (
            r.status_code == 307 and r.headers["location"] == active + WS + "/apps?states=RUNNING"
        )
        assert "This is standby RM" in r.text
        info = httpx.get(standby + WS + "/info").json()["clusterInfo"]
        assert info["haState"] == "STANDBY" and set(info) == CLUSTER_INFO_KEYS
        assert info["haZooKeeperConnectionState"] == "CONNECTED"
        pair.standby.standby_mode = "refresh"
        page = httpx.get(standby + WS + "/metrics")
        assert page.status_code == 200 and page.headers["refresh"] == f"3; url={active}{WS}/metrics"
        assert "Redirecting to the current active RM: " + active in page.text
        assert pair.failover() == standby
        assert httpx.get(active + WS + "/metrics").status_code == 307


def test_outage_modes_and_injection(rm) -> None:
    rm.set_outage("503")
    assert rm.http.get("/metrics").status_code == 503
    rm.set_outage("refused")
    with pytest.raises(httpx.ConnectError):
        httpx.get(rm.url + WS + "/metrics")
    rm.set_outage(None)
    assert get(rm, "/metrics")["clusterMetrics"]["activeNodes"] == 2
    rm.inject("/metrics", truncate=0.5, times=2)
    for _ in range(2):
        text = rm.http.get("/metrics").text
        with pytest.raises(ValueError):
            httpx.Response(200, text=text).json()
    assert get(rm, "/metrics")
    rm.inject(f"{WS}/apps", transform=lambda d: {"apps": {"app": "oops"}}, method="GET")
    assert get(rm, "/apps") == {"apps": {"app": "oops"}}


def test_fault_control_endpoint(rm) -> None:
    faults = rm.url + FAULTS_PATH
    state = httpx.get(faults).json()
    assert state["outage"] is None and state["delay"] == 0 and state["injections"] == []
    assert state["hadoopVersion"] == "3.4.1"
    r = httpx.post(faults, json={"delay": 0.3})
    assert r.status_code == 200 and r.json()["delay"] == 0.3
    t0 = time.monotonic()
    assert get(rm, "/metrics")
    assert time.monotonic() - t0 >= 0.3
    assert rm.slept == [0.3]  # that wait was the delay
    httpx.get(faults)  # the control endpoint itself is never slowed down
    assert rm.slept == [0.3]  # no wait for it
    assert httpx.post(faults, json={"outage": "503", "delay": 0}).json()["outage"] == "503"
    assert rm.http.get("/metrics").status_code == 503
    assert httpx.post(faults, json={"outage": None}).json()["outage"] is None
    assert rm.http.get("/metrics").status_code == 200
    body = {"inject": [{"path": "/apps", "body": '{"apps":{"app":[{"id":', "times": 2}]}
    assert httpx.post(faults, json=body).json()["injections"][0]["times"] == 2
    assert rm.http.get("/apps").text == '{"apps":{"app":[{"id":'
    r = httpx.post(faults, json={"nodes": {"node-01:8041": "LOST"}})
    assert r.status_code == 200 and rm.cluster.nodes["node-01:8041"].state == "LOST"
    cleared = httpx.post(faults, json={"clear": True}).json()
    assert cleared["injections"] == [] and get(rm, "/apps") == {"apps": None}
    # malformed requests change nothing
    for bad, why in (
        ({"outage": "down"}, "outage must be"),
        ({"outage": "refused"}, "outage_seconds"),
        ({"delay": -1}, "delay must be"),
        ({"inject": {"status": 200}}, "'path'"),
        ({"nodes": {"nope:1": "LOST"}}, "no node"),
        ({"delay": 1, "restart": {"keep": True}}, "unknown restart keys"),
        ({"delays": 1}, "unknown fault keys"),
    ):
        r = httpx.post(faults, json=bad)
        assert r.status_code == 400 and why in r.json()["error"], (bad, r.text)
    assert httpx.post(faults, content=b"{oops").status_code == 400
    assert httpx.get(faults).json()["delay"] == 0 and rm.http.get("/metrics").status_code == 200
    assert all(r.path != FAULTS_PATH for r in rm.requests)  # not in the RM's request log


def test_fault_control_timed_outage_and_restart_over_http() -> None:
    with RMEmulator(nodes=1, gpus_per_node=2, manual_clock=True) as emu:
        faults = emu.url + FAULTS_PATH
        app = emu.add_app(seconds=100)
        r = httpx.post(faults, json={"outage": "refused", "outage_seconds": 0.6})
        assert r.status_code == 200
        time.sleep(0.3)
        with pytest.raises(httpx.ConnectError):
            httpx.get(emu.url + WS + "/info")
        # a client with a long enough deadline rides the outage out
        with RMClient(emu.url, timeout=1.0, deadline=5.0, backoff=0.1, max_backoff=0.2) as c:
            assert c.app(app).id == app
            old_id = c.cluster_info().id
            emu.cluster.advance(1)  # a new cluster timestamp on restart
            r = httpx.post(faults, json={"restart": {"keep_apps": False, "downtime": 0.3}})
            assert r.status_code == 200
            deadline = time.monotonic() + 5
            while c.cluster_info().id == old_id:
                assert time.monotonic() < deadline, "the RM never restarted"
                time.sleep(0.05)
            assert c.apps() == []  # restarted without recovery: the apps are gone
        r = httpx.post(faults, json={"outage": "drop", "outage_after": 0.0, "outage_seconds": 5})
        assert r.json()["outage"] == "drop"
        with (
            RMClient(emu.url, timeout=0.3, deadline=0.8, backoff=0.05) as c,
            pytest.raises(RMUnavailable),
        ):
            c.cluster_metrics()
    with RMEmulator(nodes=1, control=False, manual_clock=True) as off:
        assert httpx.get(off.url + FAULTS_PATH).status_code == 404


# -- the command -------------------------------------------------------------------------


def test_emulate_rm_parser_and_builder() -> None:
    parser = argparse.ArgumentParser(prog="yarn-arbiter")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    argv = "emulate-rm --port 0 --nodes 3 --gpus-per-node 2 --scheduler fair --apps 4 --seed 3"
    args = parser.parse_args(argv.split())
    emu = build_emulator(args)
    assert isinstance(emu, RMEmulator) and emu.cluster.scheduler == "fair"
    with emu:
        nodes = httpx.get(emu.url + WS + "/nodes").json()["nodes"]["node"]
        apps = httpx.get(emu.url + WS + "/apps").json()["apps"]["app"]
    assert len(nodes) == 3 and len(apps) == 4
    pair = build_emulator(parser.parse_args(["emulate-rm", "--port", "0", "--standby-port", "0",
                                             "--cluster", "nodes:2:8"]))  # fmt: skip
    assert isinstance(pair, RMHAPair)
    assert sum(n.gpus for n in pair.cluster.nodes.values()) == 16
    with pytest.raises(ValueError, match="--app-seconds"):
        build_emulator(parser.parse_args(["emulate-rm", "--app-seconds", "0"]))
    args = parser.parse_args(["emulate-rm", "--port", "0", "--hadoop-version", "3.3", "--delay",
                              "0.25", "--queue", "default=20", "--queue",
                              "analytics=[memory=8192,vcores=8]"])  # fmt: skip
    with pytest.raises(ValueError, match="mix absolute"):
        build_emulator(args)
    args.queue = [("default", 50.0), ("analytics", 50.0)]
    emu = build_emulator(args)
    assert isinstance(emu, RMEmulator) and emu.cluster.version == "3.3.6"
    assert emu._delay == 0.25 and emu.control
    assert [q.rsplit(".", 1)[-1] for q in emu.cluster._cs_leaves()] == ["default", "analytics"]
    for argv, message in (
        (["--outage-after", "1", "--outage-mode", "refused"], "needs --outage-seconds"),
        (["--outage-seconds", "1"], "needs --outage-after"),
        (["--delay", "-1"], "--delay"),
        (["--outage-after", "1", "--no-faults-endpoint"], "faults endpoint"),
    ):
        with pytest.raises(ValueError, match=message):
            build_emulator(parser.parse_args(["emulate-rm", *argv]))
    with pytest.raises(SystemExit):
        parser.parse_args(["emulate-rm", "--queue", "analytics"])
    assert FAULTS_PATH in FAULTS_HELP and '"outage_seconds"' in FAULTS_HELP


def test_emulate_rm_command_runs_and_stops() -> None:
    code = (
        "import argparse, sys\n"
        "from yarn_bridge.cli import add_parsers\n"
        "p = argparse.ArgumentParser()\n"
        "add_parsers(p.add_subparsers(dest='command', required=True))\n"
        "a = p.parse_args(sys.argv[1:])\n"
        "sys.exit(a.func(a))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, "emulate-rm", "--port", "0", "--nodes", "2",
         "--duration", "0.5"],
        capture_output=True, text=True, timeout=30, env=env, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Hadoop 3.4.1, capacity scheduler, 2 nodes, 8 GPUs" in out.stdout
    assert f"export {ENV_RM_URL}=http://127.0.0.1:" in out.stdout
    assert FAULTS_PATH in out.stdout
    helped = subprocess.run(
        [sys.executable, "-c", code, "emulate-rm", "--help"],
        capture_output=True, text=True, timeout=30, env=env, cwd=ROOT,
    )  # fmt: skip
    for flag in ("--delay", "--outage-after", "--outage-seconds", "--hadoop-version", "--queue",
                 f"POST {FAULTS_PATH}", '"restart"'):  # fmt: skip
        assert flag in helped.stdout, flag
    bad = subprocess.run(
        [sys.executable, "-c", code, "emulate-rm", "--nodes", "-1"],
        capture_output=True, text=True, timeout=30, env=env, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2 and "--nodes must be >= 0" in bad.stderr
