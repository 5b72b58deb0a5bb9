"""The bridge against a real ResourceManager (Hadoop 3.5.0 from its jars, ``yarn_cluster``).

What YARN itself reports is what is asserted: node states, app states, queue capacities read
back from the RM. The bridge is driven tick by tick (``Bridge.tick``) so every wait is on a
condition the RM reports, with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import wait_for

from arbiter.config import load_config
from arbiter.core import ArbiterCore
from arbiter.journal import SQLiteJournal
from arbiter.rounds import ArbiterState, Lease
from yarn_bridge.bridge_cli import Bridge, initial_cluster
from yarn_bridge.env import ML_APP_TAG
from yarn_bridge.local_hadoop import HadoopError, LocalHadoop, LocalHadoopSpec, port_busy
from yarn_bridge.rm import AppSubmission, RMClient, RMError
from yarn_bridge.rm_events import (
    AppArrived,
    AppEnded,
    NodeRemoved,
    analytics_capacity,
    arbiter_app_tag,
    cluster_from_nodes,
    node_view,
)

pytestmark = [pytest.mark.yarn, pytest.mark.slow]


def submit_sleeper(rm: RMClient, *, queue: str = "analytics", tags: tuple[str, ...] = (),
                   name: str = "sleeper", seconds: int = 600, app_id: str = "") -> str:  # fmt: skip
    """A YARN app whose AM container runs ``sleep``: it never registers (so YARN keeps it
    ACCEPTED), but it holds a real container until it is killed (:func:`am_running`).
    ``app_id``: an id from ``rm.new_application()`` (else a new one)."""
    app_id = app_id or rm.new_application().application_id
    rm.submit_app(AppSubmission(app_id, name, f"sleep {seconds}", queue=queue, memory_mb=512,
                                tags=tags))  # fmt: skip
    return app_id


def am_running(rm: RMClient, app_id: str) -> bool:
    app = rm.app(app_id)
    return app.state in ("ACCEPTED", "RUNNING") and app.running_containers >= 1


def live(rm: RMClient, app_id: str) -> bool:
    try:
        return rm.app(app_id).state in ("ACCEPTED", "RUNNING")
    except RMError:
        return False


def core_for(rm: RMClient, tmp_path: Path, rm_url: str) -> ArbiterCore:
    cluster = initial_cluster(rm_url, wait_s=30)
    journal = SQLiteJournal(tmp_path / "j.db")
    return ArbiterCore(cluster, load_config(environ={"ARBITER_POLICY": "fifo"}), journal,
                       admin_token="adm")  # fmt: skip


def test_the_local_cluster_is_a_real_yarn(yarn_cluster) -> None:
    info = httpx.get(f"{yarn_cluster.rm_url}/ws/v1/cluster/info").json()["clusterInfo"]
    assert info["resourceManagerVersion"] == "3.5.0" and info["haState"] == "ACTIVE"
    with RMClient(yarn_cluster.rm_url) as rm:
        nodes = rm.nodes()
        assert sorted(n.id for n in nodes) == sorted(yarn_cluster.node_ids)
        assert all(n.state == "RUNNING" and n.gpus_total == 4 for n in nodes)
        leaves = {q.name for q in rm.scheduler().leaves()}
        assert {"default", "analytics", "gpu"} <= leaves
    out = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "hadoop", "status", "--json",
         "--workdir", str(yarn_cluster.workdir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["active_rm"] == yarn_cluster.rm_url
    assert all(d["alive"] and d["rss_mb"] > 50 for d in status["daemons"])


def test_the_arbiter_cluster_comes_from_the_real_nodes(yarn_cluster) -> None:
    with RMClient(yarn_cluster.rm_url) as rm:
        cluster = cluster_from_nodes(node_view(n) for n in rm.nodes())
        sched, metrics = rm.scheduler(), rm.cluster_metrics()
    assert cluster.num_gpus == 8
    assert sorted(m.name for m in cluster.machines) == sorted(yarn_cluster.node_ids)
    capacity = analytics_capacity(metrics, sched, ["analytics"])
    # deploy/conf/capacity-scheduler.xml guarantees analytics [memory=8192,vcores=8]
    assert (capacity.vcores, capacity.memory_mb) == (8, 8192)


def test_watcher_sees_real_apps_arrive_and_end(yarn_cluster, tmp_path: Path) -> None:
    with RMClient(yarn_cluster.rm_url) as rm:
        core = core_for(rm, tmp_path, yarn_cluster.rm_url)
        bridge = Bridge(core, yarn_cluster.rm_url, poll_s=0.2, confirm_polls=2)
        bridge.tick()
        app_id = submit_sleeper(rm)
        wait_for("the sleeper to run", lambda: am_running(rm, app_id))
        events: list = []

        def sees(kind: type) -> bool:
            events.extend(bridge.watcher.poll_once() or ())
            return any(isinstance(e, kind) and e.app.yarn_id == app_id for e in events)

        wait_for("AppArrived", lambda: sees(AppArrived))
        assert core.snapshot().external_jobs >= 1
        assert rm.kill_app(app_id) == "KILLED"
        wait_for("AppEnded", lambda: sees(AppEnded))
        bridge.stop()


def test_gpu_queue_capacity_follows_the_leases_on_the_real_rm(yarn_cluster, tmp_path) -> None:
    with RMClient(yarn_cluster.rm_url) as rm:
        core = core_for(rm, tmp_path, yarn_cluster.rm_url)
        bridge = Bridge(core, yarn_cluster.rm_url, poll_s=0.2, gpu_queue="root.gpu")
        app, _ = core.register_app(app_name="ml", user="u", queue_name="gpu", max_gpu_demand=8)
        gpus = sorted(core.cluster.gpu_ids)[:3]
        now = time.time()
        lease = Lease(app, frozenset(gpus), now, now + 600, 1)
        core.book.commit(ArbiterState(core.cluster.gpu_ids, (lease,), 1), now=core.clock())

        def gpu_queue_capacity() -> str:
            bridge.tick()
            q = rm.scheduler().queue("gpu")
            conf = rm.scheduler_conf()
            return "yarn.io/gpu=3" in conf.get("yarn.scheduler.capacity.root.gpu.capacity", "") \
                and q.name  # fmt: skip

        wait_for("root.gpu capacity to carry yarn.io/gpu=3", gpu_queue_capacity)
        # The RM's scheduler (not only its stored configuration) now guarantees 3 GPUs.
        raw = httpx.get(f"{yarn_cluster.rm_url}/ws/v1/cluster/scheduler").json()
        queues = raw["scheduler"]["schedulerInfo"]["queues"]["queue"]
        gpu_q = next(q for q in queues if q["queueName"] == "gpu")
        infos = gpu_q["capacities"]["queueCapacitiesByPartition"][0]["effectiveMinResource"]
        rows = infos["resourceInformations"]["resourceInformation"]
        by_name = {r["name"]: r["value"] for r in rows}
        assert by_name["yarn.io/gpu"] == 3
        # Restore the configured guarantee for the other tests.
        core.book.commit(ArbiterState(core.cluster.gpu_ids, (), 2), now=core.clock())
        key = "yarn.scheduler.capacity.root.gpu.capacity"
        wait_for(
            "root.gpu back to 0 leased GPUs",
            lambda: bridge.tick() and "yarn.io/gpu=0" in rm.scheduler_conf().get(key, ""),
        )
        # A stopping bridge gives YARN's scheduler the whole cluster's GPUs back.
        bridge.stop()
        conf = rm.scheduler_conf()
        assert "yarn.io/gpu=8" in conf[key]
        assert "yarn.io/gpu=8" in conf["yarn.scheduler.capacity.root.gpu.maximum-capacity"]


def test_enforcer_kills_an_ml_app_it_can_account_for(yarn_cluster, tmp_path: Path) -> None:
    """An ML app linked to a registered arbiter app that finished in the arbiter is ended in
    YARN; a forged link to another app's id does not end that other app's registration."""
    with RMClient(yarn_cluster.rm_url) as rm:
        core = core_for(rm, tmp_path, yarn_cluster.rm_url)
        bridge = Bridge(core, yarn_cluster.rm_url, poll_s=0.2, confirm_polls=2)
        # As `yarn-arbiter submit` does: the YARN id first, the arbiter app bound to it.
        yarn_id = rm.new_application().application_id
        app, _ = core.register_app(app_name="ml", user="u", queue_name="gpu", max_gpu_demand=4,
                                   yarn_app_id=yarn_id)  # fmt: skip
        tags = (ML_APP_TAG, arbiter_app_tag(app))
        submit_sleeper(rm, queue="gpu", tags=tags, app_id=yarn_id)
        # Another YARN app forging the same link, ended first: the arbiter app stays.
        forged = submit_sleeper(rm, queue="gpu", tags=tags, name="forged")
        wait_for("both apps to run", lambda: am_running(rm, yarn_id) and am_running(rm, forged))
        wait_for("the watcher to see them",
                 lambda: bridge.tick() and {yarn_id, forged} <= set(bridge.view.apps))  # fmt: skip
        rm.kill_app(forged)
        wait_for("YARN to report the forged app KILLED", lambda: rm.app(forged).state == "KILLED")
        polls = 0
        while polls < 4:  # the confirm polls an app's end needs, and more: all must succeed
            polls += bridge.tick()
        assert app in core.snapshot().apps
        rm.kill_app(yarn_id)
        wait_for("the arbiter app to be finished by the watcher",
                 lambda: bridge.tick() and app not in core.snapshot().apps)  # fmt: skip
        bridge.stop()


def test_a_killed_nodemanager_goes_lost_and_leaves_the_topology(yarn_cluster) -> None:
    with RMClient(yarn_cluster.rm_url) as rm:
        victim = yarn_cluster.node_ids[1]
        name = yarn_cluster.nm_name(victim)
        yarn_cluster.kill(name)
        try:
            # conftest lowers yarn.nm.liveness-monitor.expiry-interval-ms to 4 s
            wait_for(f"{victim} LOST", lambda: rm.node(victim).state == "LOST", timeout=60)
            views = [node_view(n) for n in rm.nodes(states=["RUNNING", "LOST"])]
            assert cluster_from_nodes(views).num_gpus == 4
            assert any(v.gone for v in views if v.node_id == victim)
        finally:
            yarn_cluster.restart(name)
        assert rm.node(victim).state == "RUNNING"


def test_watcher_reports_a_lost_node(yarn_cluster, tmp_path: Path) -> None:
    with RMClient(yarn_cluster.rm_url) as rm:
        core = core_for(rm, tmp_path, yarn_cluster.rm_url)
        bridge = Bridge(core, yarn_cluster.rm_url, poll_s=0.2)
        bridge.tick()
        victim = yarn_cluster.node_ids[0]
        name = yarn_cluster.nm_name(victim)
        yarn_cluster.kill(name)
        events: list = []
        try:
            wait_for("NodeRemoved", lambda: events.extend(bridge.watcher.poll_once() or ())
                     or any(isinstance(e, NodeRemoved) for e in events), timeout=60)  # fmt: skip
            assert core.snapshot().cluster.num_gpus == 4
        finally:
            yarn_cluster.restart(name)
        wait_for("the node back in the arbiter",
                 lambda: bridge.tick() and core.snapshot().cluster.num_gpus == 8)  # fmt: skip
        bridge.stop()


def test_rm_restart_keeps_running_apps(yarn_cluster, tmp_path: Path) -> None:
    """Work-preserving RM restart: the app keeps its id and its AM container, and the watcher
    ends nothing across the restart."""
    with RMClient(yarn_cluster.rm_url) as rm:
        core = core_for(rm, tmp_path, yarn_cluster.rm_url)
        bridge = Bridge(core, yarn_cluster.rm_url, poll_s=0.2, confirm_polls=3)
        app_id = submit_sleeper(rm, name="survivor")
        wait_for("the app to run", lambda: am_running(rm, app_id))
        wait_for("the watcher to see it", lambda: bridge.tick() and app_id in bridge.view.apps)
        yarn_cluster.kill("rm1")
        yarn_cluster.restart("rm1")
        events: list = []
        for _ in range(10):
            events.extend(bridge.watcher.poll_once() or ())
        assert not [e for e in events if isinstance(e, AppEnded)], events
        # Recovered from the state store: same id, still live. (Whether an AM that never
        # registered gets its container back depends on when the NodeManager resyncs; the
        # lease AM's tests cover containers of a registered AM across a restart.)
        wait_for("the app on the restarted RM", lambda: live(rm, app_id))
        rm.kill_app(app_id)
        bridge.stop()


def test_rm_ha_pair_fails_over_on_zookeeper(make_yarn_cluster) -> None:
    cluster = make_yarn_cluster(ha=True, nodes=1)
    urls = cluster.rm_urls
    with RMClient(list(urls)) as rm:
        states = {u: httpx.get(f"{u}/ws/v1/cluster/info").json()["clusterInfo"]["haState"]
                  for u in urls}  # fmt: skip
        assert sorted(states.values()) == ["ACTIVE", "STANDBY"], states
        first = next(u for u, s in states.items() if s == "ACTIVE")
        app_id = submit_sleeper(rm, name="ha")
        wait_for("the app to run", lambda: am_running(rm, app_id))
        active = "rm1" if states[urls[0]] == "ACTIVE" else "rm2"
        cluster.kill(active)
        wait_for("the standby to take over",
                 lambda: cluster.local.active_rm() not in (None, first), timeout=120)  # fmt: skip
        # the client followed the failover, and the new active RM recovered the app from ZooKeeper
        wait_for("the app on the new active RM", lambda: live(rm, app_id), timeout=120)
        assert rm.app(app_id).queue.endswith("analytics")


def test_launcher_errors_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(HadoopError, match=r"JAVA_HOME=.*no bin/java"):
        LocalHadoop(tmp_path / "w").up()
    monkeypatch.delenv("JAVA_HOME")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert port_busy(busy)
        with pytest.raises(HadoopError, match=rf"port {busy} .* busy"):
            LocalHadoop(tmp_path / "w").up(LocalHadoopSpec(tmp_path / "w", rm_webapp_port=busy))
