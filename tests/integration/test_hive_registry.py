"""hive_hooks without HiveServer2: the checkpoint registry, the share sources and the executor's
pure helpers.

The registry tests use real SQLite files (WAL) in a temporary directory; ``ArbiterShare`` talks
to a real in-process arbiter (``arbiter.server.RunningArbiter``) over a real socket. The
engine-backed tests (stage execution, restarts, gc on the engine) are in ``test_hive_exec.py``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import grpc
import pytest
from support import Clock, wait_for
from support.arbiter import halved_by_another_query

from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.server import RunningArbiter
from hive_hooks.errors import ShareSourceError, clean_engine_text, is_connection_lost
from hive_hooks.executor import (
    checkpoint_history,
    checkpoint_name,
    launchable,
    namespace_of,
    parse_describe,
    passthrough_plan,
    qualify_query,
    stage_vcores,
)
from hive_hooks.registry import (
    CheckpointRecord,
    CheckpointRegistry,
    RetentionPolicy,
    default_registry_path,
    reconcile_plan,
    select_for_gc,
)
from hive_hooks.share import ArbiterShare, ManualShare, ScriptedShare, ShareSource, StaticShare
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from qoop_planner import enumerate_plans
from qoop_planner.cost import TableStats
from qoop_planner.model import Progress, Share
from qoop_planner.replan import CHECKPOINT_PREFIX, rewrite


def rec(
    table: str, *, ns: str = "ns", used: float = 0.0, nbytes: int | None = 100
) -> CheckpointRecord:
    return CheckpointRecord(
        database="ck",
        table=table,
        namespace=ns,
        signature="sig-" + table,
        query_id="q",
        plan_id="q/p0",
        stage_id="join_" + table,
        seconds=1.0,
        created_at=used,
        last_used_at=used,
        rows=10,
        bytes=nbytes,
    )


# ------------------------------------------------------------------------------ registry


def test_registry_round_trip_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "reg" / "registry.db"
    with CheckpointRegistry(path, clock=lambda: 50.0) as reg:
        reg.record_checkpoint(rec("qoop_ckpt_a"))
        reg.record_checkpoint(rec("qoop_ckpt_b", ns="other"))
        reg.update_size("ck", "qoop_ckpt_a", 42, 4096)
        reg.record_measurement("qk", "sig-a", 1.5, 2, 42.0)
        reg.put_table_stats("db.t", "v1", TableStats(rows=7, bytes=70, ndv={"a": 3}))
        reg.start_run("q", "ns", "ck", "SELECT 1")
        reg.log_stage("q", "q/p0", "join_a", "done", "ck.qoop_ckpt_a", 42, 1.5)
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with CheckpointRegistry(path) as reg:  # a new client process would see the same state
        found = reg.lookup("ck", "ns")
        assert list(found) == ["sig-qoop_ckpt_a"]
        r = found["sig-qoop_ckpt_a"]
        assert (r.rows, r.bytes, r.qualified) == (42, 4096, "ck.qoop_ckpt_a")
        h = reg.history("qk")
        assert h["sig-a"].task_s == 1.5 and h["sig-a"].rows_out == 42.0
        assert reg.history("other-query") == {}
        st = reg.table_stats("db.t", "v1")
        assert st is not None and st.rows == 7 and st.ndv == {"a": 3.0}
        assert reg.table_stats("db.t", "v2") is None  # another version of the table
        assert [e.kind for e in reg.stage_log("q")] == ["done"]
        assert reg.runs()[0].state == "running"
        assert reg.live_namespaces("ck", grace_s=60, now=60.0) == {"ns"}
        assert reg.live_namespaces("ck", grace_s=60, now=500.0) == set()  # heartbeat too old


def test_registry_one_record_per_stage_and_schema_guard(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with CheckpointRegistry(path) as reg:
        reg.record_checkpoint(rec("qoop_ckpt_a"))
        # the same stage re-made under another name (e.g. the _r1 retry) replaces the record
        moved = CheckpointRecord(**{**rec("qoop_ckpt_a").__dict__, "table": "qoop_ckpt_a_r1"})
        reg.record_checkpoint(moved)
        assert [r.table for r in reg.checkpoints("ck")] == ["qoop_ckpt_a_r1"]
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.commit()
    db.close()
    with pytest.raises(RuntimeError, match="schema version 99"):
        CheckpointRegistry(path)


def test_default_path_is_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("QOOP_HIVE_REGISTRY", raising=False)
    assert default_registry_path() == Path.home() / ".qoop-hive" / "registry.db"
    monkeypatch.setenv("QOOP_HIVE_REGISTRY", str(tmp_path / "x.db"))
    assert default_registry_path() == tmp_path / "x.db"
    with CheckpointRegistry() as reg:
        assert reg.path == str(tmp_path / "x.db")


def test_reconcile_removes_missing_and_reports_orphans(tmp_path: Path) -> None:
    with CheckpointRegistry(tmp_path / "r.db") as reg:
        for t in ("qoop_ckpt_a", "qoop_ckpt_b"):
            reg.record_checkpoint(rec(t))
        # the server lost qoop_ckpt_b; it has a partial qoop_ckpt_c nobody registered and a
        # table of somebody else's
        report = reg.reconcile("ck", ["QOOP_CKPT_A", "qoop_ckpt_c", "users_table"])
        assert [r.table for r in report.removed] == ["qoop_ckpt_b"]
        assert report.orphans == ("qoop_ckpt_c",)
        assert [r.table for r in reg.checkpoints("ck")] == ["qoop_ckpt_a"]
    assert reconcile_plan([], [f"{CHECKPOINT_PREFIX}x", "t"]).orphans == (f"{CHECKPOINT_PREFIX}x",)


def test_retention_selection() -> None:
    recs = [
        rec("old", used=0.0),
        rec("mid", used=50.0),
        rec("new", used=90.0),
        rec("live", used=1.0, ns="running-query"),
        rec("unsized", used=95.0, nbytes=None),
    ]
    assert select_for_gc(recs, RetentionPolicy(max_age_s=None), 100.0) == {}
    # age counts from the last use; a live query's checkpoints are never selected
    chosen = select_for_gc(recs, RetentionPolicy(max_age_s=40), 100.0, frozenset({"running-query"}))
    assert chosen == {"old": "age", "mid": "age"}
    # size: least recently used first until the rest fits (unknown sizes count 0)
    chosen = select_for_gc(recs, RetentionPolicy(max_age_s=None, max_total_bytes=150), 100.0)
    assert chosen == {"old": "size", "live": "size", "mid": "size"}
    chosen = select_for_gc(
        recs,
        RetentionPolicy(max_age_s=None, max_total_bytes=150),
        100.0,
        frozenset({"running-query"}),
    )
    # live counts toward the total but stays, so one more goes
    assert chosen == {"old": "size", "mid": "size", "new": "size"}
    with pytest.raises(ValueError, match="max_age_s"):
        RetentionPolicy(max_age_s=-1)


def test_registry_is_thread_safe(tmp_path: Path) -> None:
    with CheckpointRegistry(tmp_path / "r.db") as reg:

        def writer(i: int) -> None:
            for j in range(50):
                reg.record_checkpoint(rec(f"qoop_ckpt_{i}_{j}"))
                reg.log_stage("q", "p", f"s{i}", "done")

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(reg.checkpoints("ck")) == 200
        assert len(reg.stage_log("q")) == 200


# ------------------------------------------------------------------------------ share sources


def test_scripted_share_follows_the_profile_in_time() -> None:
    clock = Clock()  # its sleep moves the clock: each wait_change returns at once
    s = ScriptedShare([(0, 8), (0.3, Share(2, 4096)), (0.6, 4)], clock=clock, sleep=clock.sleep)
    assert isinstance(s, ShareSource)
    s.begin("q1")
    t0 = clock()
    first = s.current()
    assert (first.epoch, first.share.vcores) == (0, 8.0)
    nxt = s.wait_change(0, timeout=5)
    t1 = clock() - t0
    assert (nxt.epoch, nxt.share) == (1, Share(2, 4096))
    assert 0.3 <= t1 < 0.31, t1  # at the step's time (not before), well before the timeout
    last = s.wait_change(1, timeout=5)
    assert last.epoch == 2 and 0.6 <= clock() - t0 < 0.61
    t2 = clock()
    assert s.wait_change(2, timeout=0.1).epoch == 2  # the last step lasts forever
    assert 0.1 <= clock() - t2 < 0.11  # so the wait ends at its timeout
    s.begin("q2")  # the profile restarts for every query
    assert s.current().epoch == 0
    with pytest.raises(ValueError, match="t=0"):
        ScriptedShare([(1, 4)])
    with pytest.raises(ValueError, match="increase"):
        ScriptedShare([(0, 4), (1, 2), (1, 3)])


def test_manual_and_static_shares() -> None:
    m = ManualShare(4)
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(m.wait_change(0, timeout=5).epoch))
    t.start()
    time.sleep(0.05)
    m.set(Share(1, 1024))
    t.join()
    assert got == [1] and m.current().share == Share(1, 1024)
    s = StaticShare(2)
    assert s.wait_change(0, timeout=0.05).epoch == 0 and s.current().share.vcores == 2


@pytest.fixture
def arbiter(tmp_path: Path):
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
    }
    a = RunningArbiter(
        load_cluster("themis-testbed"), load_config(environ=env), admin_token="admin-test"
    ).start()
    yield a
    a.stop(0)


def test_arbiter_share_follows_the_stream(arbiter: RunningArbiter) -> None:
    cluster_vcores = load_cluster("themis-testbed").vcores
    share = ArbiterShare(f"localhost:{arbiter.port}", user="alice")
    share.begin("tpch-q5")
    try:
        assert share.job_id is not None and share.job_id.startswith("query-")
        first = share.current()
        assert first.share.vcores == cluster_vcores and first.active_jobs == 1
        # another query arrives: the arbiter pushes the 1-over-2 share
        stub = rpc.QueryShareStub(grpc.insecure_channel(f"localhost:{arbiter.port}"))
        other = stub.RegisterQuery(pb.RegisterQueryRequest(query_name="other"))
        halved = share.wait_change(first.epoch, timeout=10)
        assert halved.epoch > first.epoch
        assert halved.share.vcores == cluster_vcores / 2 and halved.active_jobs == 2
        assert halved.cause == "job_arrived"
        stub.UnregisterQuery(
            pb.UnregisterQueryRequest(job_id=other.job_id),
            metadata=[("x-app-token", other.job_token)],
        )
        back = share.wait_change(halved.epoch, timeout=10)
        assert back.share.vcores == cluster_vcores and back.cause == "job_departed"
    finally:
        job = share.job_id
        share.end("tpch-q5")
    assert share.job_id is None
    # end() unregistered the job: the arbiter no longer knows it
    assert job not in arbiter.core.queries


def _stop(*arbiters: RunningArbiter) -> None:
    for a in arbiters:
        if not getattr(a, "_stopped_by_test", False):
            a._stopped_by_test = True  # type: ignore[attr-defined]
            a.stop(0)


def _arbiter_at(tmp: Path, port: int = 0) -> RunningArbiter:
    env = {"ARBITER_GRPC_PORT": str(port), "ARBITER_JOURNAL_PATH": str(tmp / "journal.db")}
    tmp.mkdir(parents=True, exist_ok=True)
    return RunningArbiter(
        load_cluster("themis-testbed"), load_config(environ=env), admin_token="admin-test"
    ).start()


def test_arbiter_share_registers_again_after_a_restart(tmp_path: Path) -> None:
    """Queries are not journaled: the arbiter restarted on the same port answers the old
    subscription NOT_FOUND; the source registers the query again and follows the new job."""
    a = _arbiter_at(tmp_path / "a")
    port = a.port
    share = ArbiterShare(f"127.0.0.1:{port}", user="alice")
    share.begin("tpch-q5")
    b: RunningArbiter | None = None
    try:
        first_job, first = share.job_id, share.current()
        assert first_job is not None and first.active_jobs == 1
        _stop(a)
        b = _arbiter_at(tmp_path / "a", port)
        b_ = b
        wait_for("the job registered again", lambda: share.job_id in b_.core.queries, timeout=30)
        assert share.job_id != first_job and share.reregistrations == 1
        assert share.failovers == 0  # one address: the same arbiter, back
        q = b.core.queries[share.job_id]
        assert (q.name, q.user) == ("tpch-q5", "alice")
        again = wait_for(
            "an update from the new arbiter", lambda: share.updates > 1 and share.current()
        )
        assert again.epoch > first.epoch  # epochs keep increasing across arbiters
        halved_by_another_query(share, b)
    finally:
        job = share.job_id
        share.end("tpch-q5")
        if b is not None:
            assert job not in b.core.queries  # end() unregistered the new job
            _stop(b)
        _stop(a)


def test_arbiter_share_fails_over_to_the_next_address(tmp_path: Path) -> None:
    """Two arbiters; the first goes: the source moves to the second (UNAVAILABLE), which does
    not know the job (NOT_FOUND), registers the query there and follows its share."""
    a, b = _arbiter_at(tmp_path / "a"), _arbiter_at(tmp_path / "b")
    share = ArbiterShare(f"127.0.0.1:{a.port},127.0.0.1:{b.port}", user="alice")
    try:
        share.begin("tpch-q5")
        first_job = share.job_id
        assert first_job in a.core.queries and share.target == f"127.0.0.1:{a.port}"
        _stop(a)
        wait_for("the job registered at b", lambda: share.job_id in b.core.queries, timeout=30)
        assert share.job_id != first_job and share.reregistrations == 1
        assert share.target == f"127.0.0.1:{b.port}" and share.failovers >= 1
        halved_by_another_query(share, b)
        # the plan switches of the new job reach b
        share.report_switch(2.0, "p0", "p1", Share(4.0, 2048.0), (), ())
        wait_for("the switch at b", lambda: list(b.telemetry.history.plan_switches))
    finally:
        share.end("tpch-q5")
        _stop(a, b)


def test_arbiter_share_registers_at_the_second_address_if_the_first_is_down(
    tmp_path: Path,
) -> None:
    from arbiter.localhost import free_port

    b = _arbiter_at(tmp_path / "b")
    share = ArbiterShare(f"127.0.0.1:{free_port()},127.0.0.1:{b.port}", rpc_timeout=2.0)
    try:
        share.begin("q")
        assert share.job_id in b.core.queries and share.failovers == 1
    finally:
        share.end("q")
        b.stop(0)


def test_plan_switches_reach_the_arbiters_console(arbiter: RunningArbiter) -> None:
    share = ArbiterShare(f"localhost:{arbiter.port}", user="alice")
    share.begin("tpch-q5")
    stub = rpc.QueryShareStub(grpc.insecure_channel(f"localhost:{arbiter.port}"))
    try:
        job = share.job_id
        assert job is not None
        share.report_switch(1.5, "q5-p0", "q5-p2", Share(8.0, 4096.0), ("s3",), ("s1", "s2"))
        history = arbiter.telemetry.history
        (rec,) = wait_for("the switch in the history", lambda: list(history.plan_switches))
        assert (rec.job_id, rec.query_name, rec.user) == (job, "tpch-q5", "alice")
        assert (rec.from_plan, rec.to_plan, rec.at_s) == ("q5-p0", "q5-p2", 1.5)
        assert (rec.vcores, rec.memory_mb, rec.cancelled, rec.reused) == (
            8.0, 4096.0, ("s3",), ("s1", "s2"),
        )  # fmt: skip
        # the server records the switch before it answers; the count follows the answer
        wait_for("the switch acknowledged", lambda: share.switches_reported == 1, timeout=10)
        doc = arbiter.telemetry.history.to_json()
        assert doc["plan_switches"][0]["to_plan"] == "q5-p2"  # type: ignore[index]
        metric = arbiter.telemetry.registry.get_sample_value("yarn_arbiter_plan_switches_total")
        assert metric == 1.0
        # another query's token, or none, is refused and records nothing
        other = stub.RegisterQuery(pb.RegisterQueryRequest(query_name="other"))
        report = pb.PlanSwitchReport(job_id=job, from_plan="a", to_plan="b")
        for token, code in (
            (other.job_token, grpc.StatusCode.PERMISSION_DENIED),
            ("", grpc.StatusCode.UNAUTHENTICATED),
        ):
            with pytest.raises(grpc.RpcError) as err:
                stub.ReportPlanSwitch(report, metadata=[("x-app-token", token)], timeout=10)
            assert err.value.code() == code
        # bad input: every problem named, nothing recorded
        bad = pb.PlanSwitchReport(
            job_id=job, at_s=float("nan"), from_plan="", to_plan="x" * 300,
            share=pb.ResourceVector(vcores=-1.0), cancelled_stages=["s"] * 600,
        )  # fmt: skip
        with pytest.raises(grpc.RpcError) as err:
            stub.ReportPlanSwitch(bad, metadata=[("x-app-token", share._token or "")], timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        for field in ("at_s", "share", "from_plan", "to_plan", "cancelled_stages"):
            assert field in (err.value.details() or "")
        assert len(history.plan_switches) == 1
    finally:
        share.end("tpch-q5")
    # an ended query reports nothing (and does not raise)
    share.report_switch(2.0, "a", "b", Share(1.0, 1.0), (), ())
    assert len(arbiter.telemetry.history.plan_switches) == 1


def test_arbiter_share_unreachable_is_a_clear_error() -> None:
    from arbiter.localhost import free_port

    share = ArbiterShare(f"127.0.0.1:{free_port()}", rpc_timeout=1.0)
    with pytest.raises(ShareSourceError, match="RegisterQuery failed: UNAVAILABLE"):
        share.begin("q")


# ------------------------------------------------------------------------------ executor core


SCHEMA = {
    "db": {
        "a": {"id": "bigint", "x": "int"},
        "b": {"id": "bigint", "a_id": "bigint"},
        "c": {"id": "bigint", "b_id": "bigint", "y": "string"},
    }
}
QUERY = "SELECT a.x, COUNT(*) FROM a JOIN b ON a.id = b.a_id JOIN c ON b.id = c.b_id GROUP BY a.x"


def test_qualify_plan_and_name_checkpoints() -> None:
    sql, tables = qualify_query(QUERY, "db")
    assert tables == ("db.a", "db.b", "db.c")
    stats = {t: TableStats(rows=n) for t, n in (("db.a", 10), ("db.b", 1000), ("db.c", 50))}
    plans = enumerate_plans(sql, SCHEMA, stats, k=4, query_id="q")
    assert len(plans) == 2  # (a.b).c and (b.c).a: no cross products
    ns = namespace_of("key", {"db.a": "v1", "db.b": "v1", "db.c": "v1"})
    assert ns != namespace_of("key", {"db.a": "v2", "db.b": "v1", "db.c": "v1"})  # reloaded data
    assert ns != namespace_of("other-query", {"db.a": "v1", "db.b": "v1", "db.c": "v1"})
    joins = [s for s in plans[0].stages if s.kind == "join"]
    names = {checkpoint_name(ns, s.signature) for s in joins}
    assert len(names) == len(joins) and all(n.startswith(CHECKPOINT_PREFIX) for n in names)
    # the same stage of another plan gets the same name
    shared = {s.signature for s in plans[0].stages} & {s.signature for s in plans[1].stages}
    for sig in shared:
        assert checkpoint_name(ns, sig) == checkpoint_name(ns, sig)
    with pytest.raises(ValueError):
        qualify_query("SELEC oops", "db")
    with pytest.raises(ValueError, match="not a query"):
        qualify_query("DROP TABLE t", "db")


def test_checkpointed_stages_make_their_plans_rank_first() -> None:
    """The top-k enumeration does not know checkpoints; the runner feeds them in as free
    measured stages, so a plan that can resume from a checkpoint is cached and ranked first."""
    sql, _ = qualify_query(QUERY, "db")
    stats = {t: TableStats(rows=n) for t, n in (("db.a", 10), ("db.b", 1000), ("db.c", 50))}
    plans = enumerate_plans(sql, SCHEMA, stats, k=2, query_id="q")
    worse = plans[1]
    only_in_worse = next(
        s for s in worse.stages
        if s.kind == "join" and s.signature not in {x.signature for x in plans[0].stages}
    )  # fmt: skip
    digest = only_in_worse.signature.digest
    records = {digest: rec("qoop_ckpt_x")}
    history = checkpoint_history({}, records)
    assert history[digest].task_s == 0.0 and history[digest].rows_out == 10
    replanned = enumerate_plans(sql, SCHEMA, stats, k=2, query_id="q", history=history)
    assert only_in_worse.signature in {s.signature for s in replanned[0].stages}
    unknown = CheckpointRecord(**{**rec("qoop_ckpt_x").__dict__, "rows": None})
    assert checkpoint_history({}, {digest: unknown}) == {}  # no row count: left alone


def test_launchable_follows_the_dag_and_the_share() -> None:
    sql, _ = qualify_query(QUERY, "db")
    plan = enumerate_plans(sql, SCHEMA, None, k=1, query_id="q")[0]
    scans = frozenset(s.signature for s in plan.stages if s.kind == "scan")
    rem = rewrite(plan, Progress(plan.plan_id, scans))
    first = launchable(rem, scans, set())
    assert [s.kind for s in first] == ["join"] and len(first) == 1  # the second join waits
    assert launchable(rem, scans, {first[0].signature}) == []  # already running
    done = scans | {first[0].signature}
    second = launchable(rewrite(plan, Progress(plan.plan_id, done)), done, set())
    assert [s.kind for s in second] == ["join"]
    assert stage_vcores(first[0], Share(0.5, 1024)) == 1.0  # at least one stage always runs
    p = passthrough_plan("SET x=1", "q")
    assert [s.kind for s in p.stages] == ["final"] and p.stages[0].sql == "SET x=1"


def test_parse_describe_spark_and_hive() -> None:
    spark = [
        ("l_orderkey", "bigint", None),
        ("l_comment", "string", None),
        ("", "", ""),
        ("# Detailed Table Information", "", ""),
        ("Created Time", "Sun Nov 22 09:07:07 UTC 2026", ""),
        ("Table Properties", "[transient_lastDdlTime=1795338427]", ""),
        ("Statistics", "1830857 bytes, 0 rows", ""),
        ("Location", "file:/data/lineitem", ""),
    ]
    info = parse_describe("tpch.lineitem", spark)
    assert info.columns == (("l_orderkey", "bigint"), ("l_comment", "string"))
    assert info.bytes == 1830857.0 and info.rows is None  # 0 rows = not analysed
    assert "1795338427" in info.version and "file:/data/lineitem" in info.version
    hive = [
        ("# col_name", "data_type", "comment"),
        ("id", "int", ""),
        ("", None, None),
        ("# Detailed Table Information", None, None),
        ("CreateTime:", "Sun Nov 22 2026", None),
        ("Table Parameters:", None, None),
        ("", "numRows", "12"),
        ("", "totalSize", "345"),
    ]
    info = parse_describe("d.t", hive)
    assert info.columns == (("id", "int"),) and (info.rows, info.bytes) == (12.0, 345.0)
    assert info.version.startswith("Sun Nov 22 2026")


def test_engine_error_classification() -> None:
    text = (
        "org.apache.hive.service.cli.HiveSQLException: Error running query: "
        "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found.\n\tat org.apache.Foo(Foo.java:1)"
    )
    assert clean_engine_text(text) == "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found."
    assert is_connection_lost(ConnectionResetError())
    assert is_connection_lost(RuntimeError("Invalid SessionHandle: abc"))
    assert not is_connection_lost(RuntimeError("[PARSE_SYNTAX_ERROR] near SELEC"))
