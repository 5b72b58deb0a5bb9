"""LocalHiveServer: a real Spark Thrift Server (HiveServer2) driven through pyhive.

One server is started for the whole module (startup is 15 to 25 s; see
../shared/spec/local-hive-engine.md). ``test_stop_frees_port`` stops it, so it is the last test
in the file; the fixture's own teardown calls ``stop()`` again, which is a no-op.
"""

from __future__ import annotations

import contextlib
import time

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyhive")

from pyhive import exc

from hive_hooks.engine import LocalHiveServer, port_is_open

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = LocalHiveServer(work_dir=tmp_path_factory.mktemp("hs2"))
    srv.start()
    print(f"\nSpark Thrift Server ready in {srv.start_seconds:.1f} s at {srv.jdbc_url}")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def cursor(server):
    conn = server.connect()
    cur = conn.cursor()
    yield cur
    # The server may already be stopped by test_stop_frees_port; closing then fails harmlessly.
    with contextlib.suppress(Exception):
        cur.close()
        conn.close()


def test_select_one(server, cursor):
    assert server.jdbc_url == f"jdbc:hive2://127.0.0.1:{server.port}/default"
    assert (server.work_dir / "metastore_db").is_dir()
    cursor.execute("SELECT 1")
    assert cursor.fetchall() == [(1,)]


def test_ctas_and_read_back(server, cursor):
    cursor.execute("DROP TABLE IF EXISTS ctas_t")
    cursor.execute("CREATE TABLE ctas_t STORED AS PARQUET AS SELECT id, id * 10 AS v FROM range(5)")
    # A second connection sees the table: tables are global, not per session.
    conn = server.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT id, v FROM ctas_t ORDER BY id")
        assert cur.fetchall() == [(i, i * 10) for i in range(5)]
    finally:
        conn.close()
    assert (server.work_dir / "warehouse" / "ctas_t").is_dir()


def test_bad_sql_raises_and_server_keeps_working(cursor):
    with pytest.raises(exc.OperationalError, match="TABLE_OR_VIEW_NOT_FOUND"):
        cursor.execute("SELECT * FROM no_such_table_xyz")
    with pytest.raises(exc.OperationalError):
        cursor.execute("SELEC oops")
    cursor.execute("SELECT 2 + 3")
    assert cursor.fetchall() == [(5,)]


def test_stop_frees_port(server):
    """Runs last: stops the module's server."""
    assert server.running and port_is_open(server.port)
    server.stop()
    assert not server.running
    deadline = time.monotonic() + 10
    while port_is_open(server.port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not port_is_open(server.port)
    server.stop()  # idempotent
