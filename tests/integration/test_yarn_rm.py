"""``yarn_bridge.rm``: the typed RM client against the emulator over real HTTP sockets.

Every endpoint, RM HA (307 redirect and the older "This is standby RM" page), retries through
outages and restarts then :class:`RMUnavailable`, slow answers under the deadline, malformed or
partial JSON served on demand, ``{"apps":null}``, auth, plus the pure parsers on plain dicts.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from yarn_bridge.emulator import (
    EMULATOR_GPUS_ENV,
    EMULATOR_SECONDS_ENV,
    SUBMISSION_CONTEXT_KEYS,
    RMEmulator,
    RMHAPair,
)
from yarn_bridge.env import ENV_RM_URL
from yarn_bridge.rm import (
    GPU,
    AppSubmission,
    AsyncRMClient,
    LocalResource,
    RMAuthError,
    RMBadRequest,
    RMClient,
    RMError,
    RMHTTPError,
    RMNotFound,
    RMResponseError,
    RMUnavailable,
    SchedConfUpdate,
    format_expiry,
    parse_apps,
    parse_expiry,
    parse_node,
    parse_nodes,
    parse_resource,
    parse_scheduler,
    parse_scheduler_conf,
)

FAST = {"timeout": 2.0, "deadline": 4.0, "backoff": 0.02, "max_backoff": 0.1}


#: Tests marked with this run against both Hadoop lines the emulator serves (3.3: the compose
#: cluster's apache/hadoop:3.3.6; 3.4).
BOTH_VERSIONS = pytest.mark.parametrize("emu", ["3.4", "3.3"], indirect=True)


@pytest.fixture
def emu(request):
    rm = RMEmulator(
        nodes=2, gpus_per_node=4, manual_clock=True, new_seconds=1, start_seconds=1,
        app_seconds=10, hadoop_version=getattr(request, "param", "3.4"),
    )  # fmt: skip
    rm.start()
    yield rm
    rm.stop()


@pytest.fixture
def client(emu):
    with RMClient(emu.url, user="alice", **FAST) as c:
        yield c


# -- cluster, nodes ------------------------------------------------------------------------


@BOTH_VERSIONS
def test_cluster_info_and_metrics(emu, client) -> None:
    info = client.cluster_info()
    assert info.ha_state == "ACTIVE" and info.state == "STARTED"
    assert info.id == emu.cluster.cluster_ts and info.rm_version == emu.cluster.version
    assert info.hadoop_version == {"3.3": "3.3.6", "3.4": "3.4.1"}[emu.cluster.hadoop_line]
    m = client.cluster_metrics()
    assert (m.total_nodes, m.active_nodes) == (2, 2)
    assert m.total_mb == 2 * 65536 and m.total_vcores == 64
    assert m.total_resources is not None and m.total_resources.gpus == 8
    emu.add_app(gpus=3, queue="ml")
    emu.advance(2)
    m = client.cluster_metrics()
    assert (m.apps_submitted, m.apps_running, m.containers_allocated) == (1, 1, 4)
    assert m.used_resources is not None and m.used_resources.gpus == 3


@BOTH_VERSIONS
def test_nodes_report_gpu_capacity_and_use(emu, client) -> None:
    nodes = client.nodes()
    assert [n.id for n in nodes] == ["node-00:8041", "node-01:8041"]
    assert all(n.gpus_total == 4 and n.gpus_available == 4 and n.usable for n in nodes)
    emu.add_app(gpus=3, queue="ml", seconds=100)
    second = emu.add_app(gpus=3, queue="ml", seconds=100)
    emu.advance(2)
    assert [n.gpus_used for n in client.nodes()] == [4, 2]  # first fit, one GPU per container
    assert client.gpu_capacity() == (8, 6)
    node = client.node("node-01:8041")
    assert (node.gpus_used, node.gpus_available, node.host) == (2, 2, "node-01")
    emu.lose_node("node-01:8041")
    lost = client.nodes(states=["LOST"])
    assert [n.id for n in lost] == ["node-01:8041"]
    assert lost[0].gpus_total == 4 and lost[0].gpus_used == 0 and not lost[0].usable
    assert client.gpu_capacity() == (4, 4)
    assert client.app(second).allocated_gpus == 1  # its AM survived; two GPUs went with the node
    emu.recover_node("node-01:8041")
    assert client.app(second).allocated_gpus == 3 and client.gpu_capacity() == (8, 6)
    with pytest.raises(RMNotFound) as err:
        client.node("nope:1")
    assert err.value.status == 404 and err.value.exception == "NotFoundException"
    assert "GET /ws/v1/cluster/nodes/nope:1" in str(err.value)


def test_empty_lists_come_back_as_null_and_parse_as_empty() -> None:
    with RMEmulator(nodes=0, manual_clock=True) as rm:
        assert httpx.get(rm.url + "/ws/v1/cluster/apps").json() == {"apps": None}
        assert httpx.get(rm.url + "/ws/v1/cluster/nodes").json() == {"nodes": None}
        with RMClient(rm.url, **FAST) as c:
            assert c.apps() == [] and c.nodes() == [] and c.gpu_capacity() == (0, 0)


# -- apps ----------------------------------------------------------------------------------


@BOTH_VERSIONS
def test_submit_and_follow_an_app_through_its_life(emu, client) -> None:
    new = client.new_application()
    assert new.application_id.startswith(f"application_{emu.cluster.cluster_ts}_")
    assert new.maximum_capability.memory_mb == 8192 and new.maximum_capability.gpus == 4
    sub = AppSubmission(
        application_id=new.application_id,
        name="trainer",
        command="{{JAVA_HOME}}/bin/java -Xmx256m Am",
        queue="ml",
        tags=("Lease-42", "yarn-arbiter-ml"),
        environment={EMULATOR_GPUS_ENV: "2", EMULATOR_SECONDS_ENV: "5"},
        local_resources={"am.jar": LocalResource("hdfs://nn/am.jar", 123, 456)},
        priority=3,
    )
    assert set(sub.to_json()) <= SUBMISSION_CONTEXT_KEYS
    app_id = client.submit_app(sub)
    assert app_id == new.application_id
    app = client.app(app_id)
    assert (app.state, app.user, app.queue, app.name) == ("NEW", "alice", "ml", "trainer")
    assert app.tags == ("lease-42", "yarn-arbiter-ml") and app.priority == 3
    assert app.tracking_url is None and app.lifetime is not None and app.lifetime.unlimited
    emu.advance(1)
    assert client.app_state(app_id) == "ACCEPTED"
    emu.advance(1)
    app = client.app(app_id)
    assert app.state == "RUNNING" and app.used is not None and app.allocated_gpus == 2
    assert app.tracking_url and app.am_host_http_address
    emu.advance(2.5)
    assert client.app(app_id).progress == pytest.approx(50.0)
    emu.advance(2.5)
    done = client.app(app_id)
    assert (done.state, done.final_status, done.progress) == ("FINISHED", "SUCCEEDED", 100.0)
    assert done.gpu_seconds == 10 and done.allocated_mb == -1 and done.used is None
    assert done.finished_time - done.launch_time == 5000


def test_app_filters(emu, client) -> None:
    a = emu.add_app(name="a", user="ann", queue="ml", tags=["lease-1"], seconds=100)
    b = emu.add_app(name="b", user="bob", queue="hive", tags=["hive"], app_type="TEZ")
    c = emu.add_app(name="c", user="bob", queue="ml", seconds=1)
    emu.advance(3)
    assert {x.id for x in client.apps()} == {a, b, c}
    assert [x.id for x in client.apps(states=["FINISHED"])] == [c]
    assert [x.id for x in client.apps(tags=["lease-1", "other"])] == [a]
    assert [x.id for x in client.apps(queue="ml")] == [a]  # unfinished apps only
    assert {x.id for x in client.apps(user="bob")} == {b, c}
    assert [x.id for x in client.apps(application_types=["tez"])] == [b]
    assert len(client.apps(limit=2)) == 2
    bare = client.apps(states=["RUNNING"], deselects=["timeouts", "resourceInfo"])
    assert bare and all(x.timeouts == () and x.used is None for x in bare)


def test_kill_priority_queue_and_lifetime(emu, client) -> None:
    app_id = emu.add_app(queue="ml", gpus=1, seconds=1000)
    other = emu.add_app(queue="default", seconds=1000)
    emu.advance(2)
    assert client.app_priority(app_id) == 0
    assert client.set_app_priority(app_id, 7) == 7
    assert client.set_app_priority(app_id, 99) == 10  # capped at the cluster maximum
    assert client.app_queue(app_id) == "ml"
    assert client.move_app(app_id, "root.hive") == "hive"
    assert client.app(app_id).queue == "hive"
    with pytest.raises(RMBadRequest, match="nosuch"):
        client.move_app(app_id, "nosuch")
    (lifetime,) = client.app_timeouts(app_id)
    assert lifetime.type == "LIFETIME" and lifetime.unlimited
    now = datetime.fromtimestamp(emu.cluster.clock.now(), UTC)
    t = client.set_app_lifetime(app_id, now + timedelta(seconds=30))
    assert t.remaining_seconds == 30 and t.expiry == (now + timedelta(seconds=30)).replace(
        microsecond=(now.microsecond // 1000) * 1000
    )
    assert client.app_timeout(app_id).expiry_time == t.expiry_time
    emu.advance(31)
    gone = client.app(app_id)
    assert (gone.state, gone.final_status) == ("KILLED", "KILLED")
    assert "exceeded the lifetime" in gone.diagnostics
    assert client.kill_app(other) == "KILLED"  # 202 (RUNNING) first, then 200
    assert client.app_state(other) == "KILLED"
    assert client.kill_app(other, wait=False) == "KILLED"  # already final: 200
    with pytest.raises(RMBadRequest, match="KILLED state"):
        client.set_app_priority(other, 1)


def test_http_errors_map_to_typed_exceptions(emu, client) -> None:
    missing = f"application_{emu.cluster.cluster_ts}_9999"
    with pytest.raises(RMNotFound, match="not found"):
        client.app(missing)
    with pytest.raises(RMBadRequest, match="Invalid ApplicationId"):
        client.app("application_bogus")
    with pytest.raises(RMBadRequest, match="already present"):
        app_id = emu.add_app()
        client.submit_app(AppSubmission(app_id, "dup", "true"))
    with pytest.raises(RMBadRequest, match="outside the allowed range"):
        client.submit_app(AppSubmission(client.new_application().application_id, "big", "true",
                                        memory_mb=1 << 20))  # fmt: skip
    assert issubclass(RMNotFound, RMHTTPError) and issubclass(RMHTTPError, RMError)


# -- scheduler ------------------------------------------------------------------------------


@BOTH_VERSIONS
def test_capacity_scheduler_and_conf_mutation(emu, client) -> None:
    emu.add_app(queue="ml", gpus=2, seconds=100)
    emu.advance(2)
    sched = client.scheduler()
    assert sched.type == "capacityScheduler"
    assert [q.path for q in sched.leaves()] == ["root.default", "root.hive", "root.ml"]
    ml = sched.queue("ml")
    assert ml.is_leaf and ml.capacity == 40.0 and ml.used.gpus == 2
    assert ml.num_active_applications == 1 and ml.effective_min is not None
    assert ml.guaranteed is not None and ml.guaranteed.gpus == 3  # floor(8 x 40 %)
    conf = client.scheduler_conf()
    assert conf["yarn.scheduler.capacity.root.queues"] == "default,hive,ml"
    client.update_scheduler_conf(
        SchedConfUpdate(update_queue={"root.ml": {"capacity": 60}, "root.hive": {"capacity": 20}})
    )
    assert client.scheduler().queue("root.ml").capacity == 60.0
    assert client.scheduler_conf()["yarn.scheduler.capacity.root.ml.capacity"] == "60"
    with pytest.raises(RMBadRequest, match="Illegal capacity"):
        client.update_scheduler_conf(SchedConfUpdate(update_queue={"root.ml": {"capacity": 70}}))
    assert client.scheduler().queue("ml").capacity == 60.0  # a rejected change changes nothing
    with pytest.raises(RMBadRequest, match="live apps"):  # ml has a live app: no children
        client.update_scheduler_conf(SchedConfUpdate(add_queue={"root.ml.a": {"capacity": 100}}))
    client.update_scheduler_conf(
        SchedConfUpdate(
            add_queue={"root.batch": {"capacity": 10, "state": "STOPPED"}},
            update_queue={"root.default": {"capacity": 10}},
            global_updates={"yarn.scheduler.capacity.maximum-am-resource-percent": "0.3"},
        )
    )
    assert "root.batch" in [q.path for q in client.scheduler().leaves()]
    client.update_scheduler_conf(
        SchedConfUpdate(
            remove_queue=("root.batch",), update_queue={"root.default": {"capacity": 20}}
        )
    )
    assert "root.batch" not in [q.path for q in client.scheduler().leaves()]
    assert [e["version"] for e in emu.cluster.conf_log] == [1, 2, 3]
    assert emu.cluster.conf_log[0]["user"] == "alice"


@BOTH_VERSIONS
def test_absolute_resource_queues_parse_and_update(emu, client) -> None:
    vectors = {
        "root.default": "[memory=32768,vcores=16]",
        "root.hive": "[memory=65536,vcores=32]",
        "root.ml": "[memory=32768,vcores=16,yarn.io/gpu=8]",
    }
    # siblings change mode together, in one mutation (a partial switch is refused)
    with pytest.raises(RMBadRequest, match="mix absolute resource and percentage"):
        client.update_scheduler_conf(
            SchedConfUpdate(update_queue={"root.ml": {"capacity": vectors["root.ml"]}})
        )
    client.update_scheduler_conf(
        SchedConfUpdate(update_queue={q: {"capacity": v} for q, v in vectors.items()})
    )
    sched = client.scheduler()
    hive, ml = sched.queue("hive"), sched.queue("root.ml")
    assert hive.effective_min is not None and ml.effective_min is not None
    assert (hive.effective_min.memory_mb, hive.effective_min.vcores) == (65536, 32)
    assert (ml.effective_min.gpus, ml.absolute_capacity) == (8, 100.0)
    assert client.scheduler_conf()["yarn.scheduler.capacity.root.ml.capacity"] == vectors["root.ml"]
    emu.lose_node("node-01:8041")  # the RM scales guarantees to what is left
    assert client.scheduler().queue("hive").effective_min.memory_mb == 32768


def test_fair_scheduler_shares() -> None:
    with RMEmulator(nodes=2, gpus_per_node=4, scheduler="fair", manual_clock=True,
                    start_seconds=0) as rm, RMClient(rm.url, **FAST) as c:  # fmt: skip
        sched = c.scheduler()
        assert sched.type == "fairScheduler" and sched.root is not None
        ml = sched.queue("root.ml")
        assert ml.is_leaf and ml.steady_fair_share.gpus == 3 and ml.fair_share.gpus == 0
        rm.add_app(queue="ml", gpus=2, seconds=100)
        rm.advance(1)
        ml = c.scheduler().queue("ml")
        assert ml.fair_share.gpus == 8 and ml.used.gpus == 2 and ml.num_active_apps == 1
        assert c.apps()[0].queue == "root.ml"
        with pytest.raises(RMBadRequest, match="MutableConfScheduler"):
            c.update_scheduler_conf(SchedConfUpdate(update_queue={"root.ml": {"weight": 3}}))
        app_id = c.apps()[0].id
        with pytest.raises(RMBadRequest, match="CapacityScheduler"):
            c.set_app_priority(app_id, 3)


# -- RM HA ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["redirect", "refresh"])
def test_ha_follows_the_active_rm_across_failover(mode) -> None:
    with RMHAPair(nodes=1, gpus_per_node=2, manual_clock=True, standby_mode=mode) as pair:
        rm1, rm2 = pair.urls
        app_id = pair.cluster.add_app(queue="ml")
        with RMClient([rm2, rm1], **FAST) as c:  # the standby first
            assert c.active_url == rm2
            assert [a.id for a in c.apps()] == [app_id]
            assert c.active_url == rm1
            assert c.cluster_info().ha_state == "ACTIVE"
            pair.failover()
            assert c.kill_app(app_id) == "KILLED"
            assert c.active_url == rm2
            info = c.cluster_info()
            assert info.ha_state == "ACTIVE" and c.active_url == rm2
        with RMClient(rm1, **FAST) as only_standby:  # learns the active from the redirect
            assert only_standby.app(app_id).state == "KILLED"
            assert only_standby.active_url == rm2 and rm2 in only_standby.urls


def test_ha_cluster_info_skips_a_standby_that_answers_itself() -> None:
    with RMHAPair(nodes=1, manual_clock=True) as pair:
        rm1, rm2 = pair.urls
        raw = httpx.get(rm2 + "/ws/v1/cluster/info").json()["clusterInfo"]
        assert raw["haState"] == "STANDBY"
        with RMClient([rm2, rm1], **FAST) as c:
            assert c.cluster_info().ha_state == "ACTIVE" and c.active_url == rm1


def test_no_active_rm_is_unavailable() -> None:
    with RMHAPair(nodes=1, manual_clock=True) as pair:
        pair.active.ha_state = "STANDBY"
        c = RMClient(pair.urls, timeout=1, deadline=2, backoff=0.01, max_attempts=3)
        with c, pytest.raises(RMUnavailable) as err:
            c.apps()
        assert any("standby" in a for a in err.value.attempts)
        assert "3 rounds" in str(err.value)


# -- outages, slowness, restarts -------------------------------------------------------------


def test_outage_is_retried_then_unavailable(emu) -> None:
    emu.set_outage("refused")
    with RMClient(emu.url, timeout=0.5, deadline=1.0, backoff=0.05, max_backoff=0.2,
                  max_attempts=50) as c:  # fmt: skip
        t0 = time.monotonic()
        with pytest.raises(RMUnavailable) as err:
            c.cluster_metrics()
        elapsed = time.monotonic() - t0
    assert elapsed >= 0.9  # it kept trying until the deadline...
    assert len(err.value.attempts) < 50  # ...which ended it, not the 50 rounds
    assert "deadline" in str(err.value) and "ConnectError" in err.value.attempts[0]
    assert err.value.endpoint == "GET /ws/v1/cluster/metrics"
    emu.set_outage(None)
    with RMClient(emu.url, **FAST) as c:
        assert c.cluster_metrics().active_nodes == 2


@pytest.mark.parametrize("mode", ["refused", "503", "drop"])
def test_transient_outage_is_ridden_out(emu, mode) -> None:
    emu.set_outage(mode)
    threading.Timer(0.3, emu.set_outage, args=(None,)).start()
    with RMClient(emu.url, timeout=1, deadline=5, backoff=0.05, max_backoff=0.2,
                  max_attempts=30) as c:  # fmt: skip
        assert c.cluster_metrics().active_nodes == 2


def test_503_for_ever_names_the_status(emu) -> None:
    emu.set_outage("503")
    c = RMClient(emu.url, timeout=1, deadline=2, backoff=0.01, max_attempts=3)
    with c, pytest.raises(RMUnavailable) as err:
        c.nodes()
    assert err.value.attempts == (f"{emu.url}: HTTP 503",) * 3


def test_slow_answers_within_and_beyond_the_deadline(emu) -> None:
    emu.set_delay(0.3)
    with RMClient(emu.url, timeout=1.0, deadline=2.0) as c:
        t0 = time.monotonic()
        assert c.cluster_info().ha_state == "ACTIVE"
        assert time.monotonic() - t0 >= 0.3
    emu.set_delay(1.0)
    c = RMClient(emu.url, timeout=0.3, deadline=0.8, backoff=0.01)
    with c, pytest.raises(RMUnavailable) as err:
        c.cluster_info()
    # each try times out at 0.3 s; the 0.8 s deadline ends the call, not the rounds
    assert "deadline" in str(err.value)
    assert "timeout" in err.value.attempts[0]
    emu.set_delay(0)


def test_submission_is_not_resent_after_a_read_timeout(emu) -> None:
    with RMClient(emu.url, timeout=0.3, deadline=3) as c:
        app_id = c.new_application().application_id
        emu.set_delay(0.6)
        with pytest.raises(RMUnavailable, match="not re-sent"):
            c.submit_app(AppSubmission(app_id, "once", "true"))
        emu.set_delay(0)
        time.sleep(0.8)  # the slow submission lands (0.6 s after it was sent)
        assert c.app(app_id).name == "once"
        assert sum(1 for r in emu.requests if r.method == "POST" and r.path.endswith("/apps")) == 1
        second = c.new_application().application_id
        emu.inject("/apps", method="POST", status=202, disconnect=True)  # cut after acting
        with pytest.raises(RMUnavailable, match="connection lost after sending"):
            c.submit_app(AppSubmission(second, "cut", "true"))
        assert c.app(second).name == "cut"


@pytest.mark.parametrize("keep_apps", [True, False])
def test_restart_with_and_without_recovery(emu, keep_apps) -> None:
    app_id = emu.add_app(queue="ml", gpus=1, seconds=100)
    emu.advance(2)
    with RMClient(emu.url, timeout=1, deadline=5, backoff=0.05, max_backoff=0.2,
                  max_attempts=30) as c:  # fmt: skip
        before = c.cluster_info().id
        emu.advance(1)
        restart = threading.Thread(target=emu.restart,
                                   kwargs={"keep_apps": keep_apps, "downtime": 0.3})  # fmt: skip
        restart.start()
        time.sleep(0.1)
        apps = c.apps()  # rides out the downtime
        restart.join()
        assert c.cluster_info().id != before
        if keep_apps:
            assert [(a.id, a.state) for a in apps] == [(app_id, "RUNNING")]
        else:
            assert apps == []
            assert c.new_application().application_id.endswith("_0001")


# -- malformed answers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fault", "call", "message"),
    [
        ("/metrics", {"truncate": 0.5}, "cluster_metrics", "malformed JSON"),
        ("/nodes", {"body": "<html><body>Error 500</body></html>",
                    "content_type": "text/html"}, "nodes", "content-type text/html"),
        ("/scheduler", {"body": ""}, "scheduler", "empty body"),
        ("/apps", {"transform": lambda d: {"apps": {"app": [
            {k: v for k, v in d["apps"]["app"][0].items() if k != "id"}]}}},
         "apps", "missing required field apps.app[0].id"),
        ("/metrics", {"transform": lambda d: {"clusterMetrics": {
            **d["clusterMetrics"], "totalMB": "lots"}}},
         "cluster_metrics", "clusterMetrics.totalMB should be an integer"),
        ("/info", {"transform": lambda d: {"clusterinfo": d["clusterInfo"]}},
         "cluster_info", "missing top-level key 'clusterInfo'"),
        ("/nodes", {"transform": lambda d: {"nodes": {"node": [{**d["nodes"]["node"][0],
            "totalResource": [1, 2]}]}}},
         "nodes", "nodes.node[0].totalResource should be an object"),
        ("/scheduler", {"transform": lambda d: {"scheduler": {"schedulerInfo": {
            **d["scheduler"]["schedulerInfo"], "queueName": None}}}},
         "scheduler", "missing required field scheduler.schedulerInfo.queueName"),
    ],
)  # fmt: skip
def test_malformed_answers_raise_a_clear_error(emu, client, path, fault, call, message) -> None:
    emu.add_app()
    emu.inject(path, **fault)
    with pytest.raises(RMResponseError) as err:
        getattr(client, call)()
    assert message in str(err.value)
    assert err.value.endpoint == f"GET /ws/v1/cluster{path}"
    getattr(client, call)()  # the next answer is whole again (not retried, not cached)


def test_a_connection_cut_mid_body_is_retried(emu, client) -> None:
    emu.inject("/apps", disconnect=True)
    emu.add_app()
    assert len(client.apps()) == 1


# -- auth, async, env -----------------------------------------------------------------------


def test_simple_auth_and_auth_hook(emu) -> None:
    emu.require_auth = True
    app_id = emu.add_app(seconds=100)
    seen = []

    def spnego(method: str, url: str) -> dict[str, str]:
        seen.append((method, httpx.URL(url).host))
        return {"Authorization": "Negotiate dG9rZW4="}

    with RMClient(emu.url, **FAST) as anonymous:
        anonymous.apps()  # reads are open
        with pytest.raises(RMAuthError) as err:
            anonymous.kill_app(app_id)
        assert err.value.status == 403 and "not authenticated" in str(err.value)
    with RMClient(emu.url, auth=spnego, **FAST) as c:
        assert c.set_app_priority(app_id, 2) == 2
    assert seen == [("PUT", "127.0.0.1")]
    assert emu.requests[-1].headers["authorization"] == "Negotiate dG9rZW4="
    with RMClient(emu.url, user="bob", **FAST) as c:
        assert c.kill_app(app_id) == "KILLED"
    assert emu.requests[-1].query["user.name"] == "bob"


def test_async_client(emu) -> None:
    emu.add_app(gpus=1)
    emu.advance(2)

    async def main() -> tuple[int, int, str]:
        async with AsyncRMClient(emu.url, **FAST) as c:
            nodes, apps = await asyncio.gather(c.nodes(), c.apps(states=["RUNNING"]))
            return sum(n.gpus_used for n in nodes), len(apps), c.active_url

    assert asyncio.run(main()) == (1, 1, emu.url)


def test_from_env_reads_comma_separated_urls() -> None:
    c = RMClient.from_env({ENV_RM_URL: "rm1:8088, http://rm2:8088/"})
    assert c.urls == ("http://rm1:8088", "http://rm2:8088")
    c.close()
    with pytest.raises(ValueError, match=ENV_RM_URL):
        RMClient.from_env({})


# -- the pure core ----------------------------------------------------------------------------


def test_parsers_are_tolerant_of_optional_and_jaxb_quirks() -> None:
    # a one-element JAXB list arrives as an object; values may be strings
    r = parse_resource({"memory": "2048", "vCores": 2, "resourceInformations": {
        "resourceInformation": {"name": "yarn.io/gpu", "value": 2}}})  # fmt: skip
    assert (r.memory_mb, r.vcores, r.gpus) == (2048, 2, 2)
    assert len({r, parse_resource({"memory": 2048, "vCores": 2, "resourceInformations": {
        "resourceInformation": [{"name": "yarn.io/gpu", "value": 2}]}})}) == 1  # fmt: skip
    # Hadoop 3.0 node: no resource objects at all
    old = parse_node({"node": {"id": "h:1", "state": "RUNNING", "usedMemoryMB": 1024,
                               "availMemoryMB": 3072, "usedVirtualCores": 1,
                               "availableVirtualCores": 3}})  # fmt: skip
    assert (old.total.memory_mb, old.total.vcores, old.total.gpus, old.host) == (4096, 4, 0, "h")
    assert parse_nodes({"nodes": {"node": {"id": "h:1", "state": "LOST"}}})[0].state == "LOST"
    raw = {"id": "application_1_0001", "state": "RUNNING", "resourceSecondsMap": {GPU: 7}}
    app = parse_apps({"apps": {"app": [raw]}})[0]
    assert app.gpu_seconds == 7 and app.used is None and app.tags == ()
    assert parse_scheduler({"scheduler": {"schedulerInfo": {"type": "fifoScheduler"}}}).root is None
    conf = {"property": [{"name": "a", "value": "1"}]}
    assert parse_scheduler_conf(conf) == parse_scheduler_conf({"configuration": conf}) == {"a": "1"}
    with pytest.raises(RMResponseError, match=r"apps\.app should be a list"):
        parse_apps({"apps": {"app": "x"}})
    with pytest.raises(RMResponseError, match="response should be an object, got a list"):
        parse_apps([])


def test_expiry_round_trip_and_request_builders() -> None:
    when = datetime(2016, 12, 5, 17, 21, 0, 104000, tzinfo=UTC)
    assert format_expiry(when) == "2016-12-05T17:21:00.104+0000"
    assert parse_expiry("2016-12-05T22:51:00.104+0530") == when
    assert parse_expiry("2016-12-05T17:21:00Z") == when.replace(microsecond=0)
    assert format_expiry(when.timestamp()) == format_expiry(when)
    body = SchedConfUpdate(remove_queue=("root.x",), global_updates={"k": 1}).to_json()
    assert body == {"remove-queue": ["root.x"], "global-updates": {"entry": [
        {"key": "k", "value": "1"}]}}  # fmt: skip
    sub = AppSubmission("application_1_0001", "n", "cmd", tags=("A",)).to_json()
    assert sub["application-tags"] == {"tag": ["a"]}
    assert sub["am-container-spec"] == {"commands": {"command": "cmd"}}
