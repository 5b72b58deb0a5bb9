"""HiveServer2 4.0.1 with Tez on the real local YARN, its hooks speaking to an arbiter whose
YARN bridge watches the same ResourceManager.

Hive's Tez session AM and its task containers run in the ``analytics`` queue; the bridge sees
that AM and does not count it as a job of QOOP's |J|, while the hooks make the query running
in it one registered job of the arbiter for as long as it runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import wait_for
from support.hive import canon, connector

from arbiter.config import load_config
from arbiter.server import RunningArbiter
from hive_hooks.engine import HOST
from hive_hooks.executor import QueryRunner
from hive_hooks.hive_engine import HiveOnTez
from hive_hooks.registry import CheckpointRegistry
from hive_hooks.share import StaticShare
from hive_hooks.tpcload import load_tpc
from qoop_planner.tpc import load_tpc as tpc_queries
from yarn_bridge.bridge_cli import Bridge, initial_cluster
from yarn_bridge.rm import RMClient

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

TOKEN = "hs2-on-yarn-credential"


def hive_apps(rm_url: str, *, live: bool = True) -> list[Any]:
    with RMClient(rm_url) as rm:
        apps = [a for a in rm.apps() if a.application_type == "TEZ" and a.name.startswith("HIVE-")]
    return [a for a in apps if not a.is_final] if live else apps


@pytest.fixture(scope="module")
def bridged(yarn_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    d = tmp_path_factory.mktemp("arb")
    cluster = initial_cluster([yarn_cluster.rm_url], wait_s=60)
    env = {"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(d / "journal.db")}
    arb = RunningArbiter(cluster, load_config(environ=env), admin_token="admin",
                         service_token=TOKEN, topology_from_rm=True).start()  # fmt: skip
    bridge = Bridge(arb.core, yarn_cluster.rm_url, poll_s=0.5, confirm_polls=1, enforce=False)
    yield arb, bridge
    arb.stop(0)


@pytest.fixture(scope="module")
def server(bridged, yarn_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    arb, _ = bridged
    root = tmp_path_factory.mktemp("hive-yarn")
    token = root / "service-token"
    token.write_text(TOKEN + "\n")
    srv = HiveOnTez(work_dir=root / "hive", tez="yarn", yarn_conf_dir=yarn_cluster.conf_dir,
                    arbiter=f"{HOST}:{arb.port}", service_token_file=token).start()  # fmt: skip
    try:
        yield srv
    finally:
        srv.stop()
        with RMClient(yarn_cluster.rm_url) as rm:  # the session AMs would end within 30 s
            for a in hive_apps(yarn_cluster.rm_url):
                rm.kill_app(a.id)


@pytest.fixture(scope="module")
def connect(server: HiveOnTez, tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("data")  # the containers read it: same host, same user
    load_tpc(connector(server.port, "default"), "tpch", 0.01, "tpch", data_dir=data)
    return connector(server.port)


@pytest.fixture(scope="module")
def session(connect: Callable[[], Any]) -> Iterator[Any]:
    """One JDBC session of the module's own (not the replanner's): each session opens its own
    Tez AM on YARN on its first query (deploy/conf/hive-site.xml), some 15 to 40 s here, so the
    direct SQL and the plain user's query share one."""
    conn = connect()
    try:
        yield conn
    finally:
        conn.close()


def test_tpch_on_tez_on_yarn(
    connect: Callable[[], Any], session: Any, yarn_cluster, tmp_path: Path
) -> None:
    queries = tpc_queries("tpch", 0.01).queries
    reg = CheckpointRegistry(tmp_path / "registry.db")
    with QueryRunner(connect, registry=reg, checkpoint_db="ck_yarn", share=StaticShare(4)) as r:
        for n in (3,):
            res = r.run(queries[n], query_id=f"yarn-q{n}")
            cur = session.cursor()
            cur.execute(queries[n])
            assert canon(res.rows) == canon([tuple(row) for row in cur.fetchall()])
            assert len(res.stages) > 1
    reg.close()
    apps = hive_apps(yarn_cluster.rm_url, live=False)
    assert apps and {a.queue for a in apps} == {"root.analytics"}
    assert any(not a.is_final for a in apps)  # the sessions' AMs are kept for the next query


def test_the_bridge_counts_the_query_not_hiveserver2s_session(
    bridged, server: HiveOnTez, session: Any, yarn_cluster
) -> None:
    arb, bridge = bridged
    cur = session.cursor()
    cur.execute("SELECT COUNT(*) FROM nation")  # this session's Tez AM is up
    assert cur.fetchall() == [(25,)]
    slow = ("SELECT COUNT(*) FROM nation WHERE reflect('java.lang.Thread', 'sleep', "
            "CAST(400 AS BIGINT)) IS NULL")  # fmt: skip
    done: dict[str, Any] = {}

    def run() -> None:
        cur.execute(slow)
        done["rows"] = cur.fetchall()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_for("the query registered", lambda: len(arb.core.queries) == 1, timeout=120)
    assert bridge.tick()  # the bridge polls the RM while the query runs
    sessions = [a for a in bridge.view.apps.values() if a.hs2_session and a.live]
    assert sessions and all(a.queue == "root.analytics" for a in sessions)
    assert arb.core.external_jobs == 0  # the AM is not a job; the query is, through the hook
    assert len(arb.core.queries) + arb.core.external_jobs == 1  # QOOP's |J|
    t.join(180)
    assert done.get("rows") == [(0,)]
    wait_for("the query unregistered", lambda: not arb.core.queries, timeout=30)
