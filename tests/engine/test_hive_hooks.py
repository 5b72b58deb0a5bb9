"""HiveServer2's hooks (``java/hive-hooks``) on a real HiveServer2 4.0.1 and a real arbiter.

A plain client (pyhive here, as beeline would) runs queries on a HiveServer2 whose
``hive-site.xml`` names the hooks; the arbiter counts each query that runs on the cluster while
it runs, with the query-service credential it issued, and forgets it when the query ends,
fails or is cancelled. With the arbiter unreachable or the credential wrong, queries run
exactly as before and the server logs one warning. The server is given a pair of arbiter
addresses whose first is down, so every registration is made through the hooks' fail-over.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyhive import hive
from support import free_port, wait_for

from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.server import RunningArbiter
from hive_hooks.engine import HOST
from hive_hooks.hive_engine import HiveOnTez

pytestmark = pytest.mark.slow

SERVICE_TOKEN = "hs2-service-credential"
# a Tez job (an aggregation over a table) whose one row sleeps: long enough to be seen running
SLOW = ("SELECT COUNT(*) FROM hooks.one WHERE reflect('java.lang.Thread', 'sleep', "
        "CAST({ms} AS BIGINT)) IS NULL")  # fmt: skip


@pytest.fixture(scope="module")
def arbiter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningArbiter]:
    d = tmp_path_factory.mktemp("arb")
    env = {"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(d / "journal.db")}
    arb = RunningArbiter(load_cluster("themis-testbed"), load_config(environ=env),
                         admin_token="admin", service_token=SERVICE_TOKEN).start()  # fmt: skip
    yield arb
    arb.stop(0)


def start_server(root: Path, arbiter_addr: str, token: str) -> HiveOnTez:
    root.mkdir(parents=True, exist_ok=True)
    token_file = root / "service-token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    return HiveOnTez(work_dir=root / "hive", arbiter=arbiter_addr,
                     service_token_file=token_file).start()  # fmt: skip


@pytest.fixture(scope="module")
def server(arbiter: RunningArbiter, tmp_path_factory: pytest.TempPathFactory):
    # a pair of arbiter addresses whose first is down (as after the active's death): every
    # query below is registered through the hooks' fail-over to the live one
    pair = f"{HOST}:{free_port()},{HOST}:{arbiter.port}"
    srv = start_server(tmp_path_factory.mktemp("hooked"), pair, SERVICE_TOKEN)
    conn = connect(srv)
    cur = conn.cursor()
    for sql in ("CREATE DATABASE IF NOT EXISTS hooks", "CREATE TABLE hooks.one (x INT)",
                "INSERT INTO hooks.one VALUES (1)"):  # fmt: skip
        cur.execute(sql)
    conn.close()
    yield srv
    srv.stop()


def connect(srv: HiveOnTez) -> Any:
    return hive.connect(host=HOST, port=srv.port, auth="NOSASL", username="ann")


def calls(arbiter: RunningArbiter) -> tuple[int, int]:
    c = arbiter.core.rpc_calls
    return c["RegisterQuery"], c["UnregisterQuery"]


def settle(arbiter: RunningArbiter) -> None:
    """No query of an earlier test registered any more."""
    wait_for("no registered query", lambda: not arbiter.core.queries, timeout=30)


def run_async(srv: HiveOnTez, sql: str) -> tuple[Any, threading.Thread, dict[str, Any]]:
    conn = connect(srv)
    cur = conn.cursor()
    out: dict[str, Any] = {}

    def go() -> None:
        try:
            cur.execute(sql)
            out["rows"] = cur.fetchall()
        except Exception as e:  # the failure is what some tests want
            out["error"] = e
        finally:
            conn.close()

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return cur, t, out


def test_a_plain_query_counts_while_it_runs(server: HiveOnTez, arbiter: RunningArbiter) -> None:
    settle(arbiter)
    before = calls(arbiter)
    _, t, out = run_async(server, SLOW.format(ms=3000))
    jobs = wait_for("the query registered", lambda: list(arbiter.core.queries.values()))
    assert len(jobs) == 1
    job = jobs[0]
    assert job.via_service and job.user == "ann"
    assert re.fullmatch(r"\w+_\d{14}_[0-9a-f-]{36}", job.name), job.name  # Hive's query id
    t.join(120)
    assert out.get("rows") == [(0,)], out.get("error")
    settle(arbiter)
    assert calls(arbiter) == (before[0] + 1, before[1] + 1)
    # the pre-execution hook recorded the plan Hive chose and the share at that moment
    lines = [json.loads(x) for x in server.plan_log.read_text().splitlines()]
    mine = [x for x in lines if x["query_id"] == job.name]
    assert mine and mine[0]["job_id"] == job.job_id
    assert mine[0]["share"]["active_jobs"] == 1 and mine[0]["share"]["vcores"] > 0
    assert mine[0]["tables"] == ["hooks.one"]


def test_two_queries_share_the_cluster(server: HiveOnTez, arbiter: RunningArbiter) -> None:
    settle(arbiter)
    runs = [run_async(server, SLOW.format(ms=8000)) for _ in range(2)]
    wait_for("both queries registered", lambda: len(arbiter.core.queries) == 2)
    for _, t, out in runs:
        t.join(120)
        assert out.get("rows") == [(0,)], out.get("error")
    settle(arbiter)
    names = {j["query_id"] for j in map(json.loads, server.plan_log.read_text().splitlines())}
    shares = [json.loads(x)["share"] for x in server.plan_log.read_text().splitlines()]
    assert len(names) >= 3 and any(s and s["active_jobs"] == 2 for s in shares)


def test_statements_without_cluster_work_do_not_count(
    server: HiveOnTez, arbiter: RunningArbiter
) -> None:
    settle(arbiter)
    before = calls(arbiter)
    conn = connect(server)
    cur = conn.cursor()
    for sql in ("USE hooks", "CREATE TABLE IF NOT EXISTS two (y INT)", "SHOW TABLES",
                "SELECT * FROM hooks.one", "DROP TABLE two"):  # fmt: skip
        cur.execute(sql)
    conn.close()
    assert calls(arbiter) == before


def test_a_failing_query_is_unregistered(server: HiveOnTez, arbiter: RunningArbiter) -> None:
    settle(arbiter)
    before = calls(arbiter)
    conn = connect(server)
    cur = conn.cursor()
    with pytest.raises(Exception, match=r"(?i)assert|fail"):
        cur.execute("SELECT COUNT(*) FROM hooks.one WHERE assert_true(x > 5) IS NULL")
    conn.close()
    settle(arbiter)
    # Hive may run a failed query again (hive.query.reexecution): each execution is a job
    registered, unregistered = calls(arbiter)
    assert registered > before[0] and registered - before[0] == unregistered - before[1]


def test_bad_sql_never_registers(server: HiveOnTez, arbiter: RunningArbiter) -> None:
    settle(arbiter)
    before = calls(arbiter)
    conn = connect(server)
    with pytest.raises(Exception, match="ParseException"):
        conn.cursor().execute("SELEC 1 FROM hooks.one")
    conn.close()
    assert calls(arbiter) == before and not arbiter.core.queries


def test_a_cancelled_query_is_unregistered(server: HiveOnTez, arbiter: RunningArbiter) -> None:
    from TCLIService.ttypes import TOperationState

    settle(arbiter)
    conn = connect(server)
    cur = conn.cursor()
    cur.execute(SLOW.format(ms=60000), async_=True)  # one thread: thrift is not thread-safe
    wait_for("the query registered", lambda: len(arbiter.core.queries) == 1)
    cur.cancel()
    settle(arbiter)  # gone well before the 60 s sleep would have ended
    ended = (TOperationState.CANCELED_STATE, TOperationState.ERROR_STATE)
    wait_for("the operation ended", lambda: cur.poll().operationState in ended)
    assert cur.poll().operationState == TOperationState.CANCELED_STATE
    conn.close()


def test_unreachable_arbiter_or_wrong_credential_never_stops_a_query(
    arbiter: RunningArbiter, tmp_path: Path
) -> None:
    """Hooks pointed at a port nobody listens on, then with a wrong credential: queries run
    as usual, the server logs one warning per outage (not one per query), and the arbiter
    registers nothing."""
    cases = (("down", f"{HOST}:{free_port()}", SERVICE_TOKEN),
             ("wrong", f"{HOST}:{arbiter.port}", "not-the-credential"))  # fmt: skip
    for name, addr, token in cases:
        before = calls(arbiter)
        srv = start_server(tmp_path / name, addr, token)
        try:
            conn = connect(srv)
            cur = conn.cursor()
            cur.execute("CREATE TABLE t (x INT)")
            cur.execute("INSERT INTO t VALUES (1), (2)")
            t0 = time.monotonic()
            for _ in range(3):
                cur.execute("SELECT COUNT(*) FROM t WHERE x > 0")
                assert cur.fetchall() == [(2,)]
            elapsed = time.monotonic() - t0
            conn.close()
        finally:
            srv.stop(remove_dir=False)
        warnings = [x for x in srv.log_path.read_text().splitlines()
                    if " WARN " in x and "yarn-arbiter" in x]  # fmt: skip
        assert len(warnings) == 1, warnings
        assert elapsed < 60  # every call has its 2 s deadline: no hang
        assert not arbiter.core.queries
        if name == "wrong":  # it reached the arbiter, which refused it
            assert calls(arbiter)[0] > before[0] and calls(arbiter)[1] == before[1]


def test_a_session_cannot_redirect_or_read_the_hooks_credential(server: HiveOnTez) -> None:
    """deploy/conf/hive-site.xml restricts yarn.arbiter.* and hides the credential."""
    conn = connect(server)
    cur = conn.cursor()
    with pytest.raises(Exception, match=r"(?i)cannot modify yarn\.arbiter\.address"):
        cur.execute("SET yarn.arbiter.address=127.0.0.1:1")
    cur.execute("SET yarn.arbiter.service.token.file")
    shown = " ".join(str(v) for r in cur.fetchall() for v in r)
    conn.close()
    assert "hidden" in shown and SERVICE_TOKEN not in shown


def test_a_beeline_query_counts_while_it_runs(server: HiveOnTez, arbiter: RunningArbiter) -> None:
    """Hive's own BeeLine, as an operator would run it."""
    import subprocess

    from hive_hooks.hive_engine import beeline_command

    settle(arbiter)
    url = f"{server.jdbc_url};auth=noSasl"
    cmd = beeline_command(url, "-n", "bob", "--silent=true", "-e", SLOW.format(ms=3000))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        jobs = wait_for("the query registered", lambda: list(arbiter.core.queries.values()))
        assert [j.user for j in jobs] == ["bob"] and jobs[0].via_service
        _, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    settle(arbiter)


def test_a_replanned_query_is_one_job_not_one_per_stage(
    server: HiveOnTez, arbiter: RunningArbiter, tmp_path: Path
) -> None:
    """qoop-hive registers its query itself and tags its statements; the hooks do not count
    its stages (each a Hive query with a Tez task) as more jobs. Its planning statistics
    (a COUNT(*) job, before the query registers) count once, through the hooks."""
    from hive_hooks.executor import QueryRunner
    from hive_hooks.registry import CheckpointRegistry
    from hive_hooks.share import ArbiterShare

    settle(arbiter)
    before = calls(arbiter)
    logged = len(server.plan_log.read_text().splitlines())
    seen: list[int] = []

    def on_event(e: Any) -> None:
        if e.kind == "start":
            seen.append(len(arbiter.core.queries))

    def conn() -> Any:
        return hive.connect(host=HOST, port=server.port, auth="NOSASL", database="hooks")

    reg = CheckpointRegistry(tmp_path / "registry.db")
    sql = ("SELECT a.x, COUNT(*) FROM hooks.one a JOIN hooks.one b ON a.x = b.x "
           "JOIN hooks.one c ON b.x = c.x GROUP BY a.x")  # fmt: skip
    with QueryRunner(conn, registry=reg, checkpoint_db="ck_hooks", on_event=on_event,
                     max_concurrency=1,  # Tez local: one DAG at a time (test_hive_real.py)
                     share=ArbiterShare(f"{HOST}:{arbiter.port}")) as runner:  # fmt: skip
        res = runner.run(sql, query_id="replanned")
    reg.close()
    assert res.rows == [(1, 1)] and len(res.stages) > 1
    assert seen and set(seen) == {1}  # only the qoop-hive query, at every stage
    lines = [json.loads(x) for x in server.plan_log.read_text().splitlines()[logged:]]
    stages = [x for x in lines if x["query"].startswith("CREATE TABLE ck_hooks.")]
    assert len(stages) == len(res.stages) - 1 and all(x["job_id"] is None for x in stages)
    counted = [x["query"] for x in lines if x["job_id"]]
    assert all(q.startswith("SELECT COUNT(*)") for q in counted)  # planning statistics only
    assert calls(arbiter)[0] == before[0] + 1 + len(counted)
