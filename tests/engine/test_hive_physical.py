"""Physical join alternatives pinned on a real HiveServer2 (the Spark Thrift Server), TPC-H sf 0.01.

The runner caches the plan space of one physical profile at a time
(``QueryRunner(physical=...)``) and pins every join stage's method and partitions on the engine
(``pin_settings`` / ``pin_hint``). Each pinned run must return exactly the rows of the direct
SQL, and Spark's physical plan of a pinned join must be the pinned strategy (broadcast hash,
shuffled hash, sort-merge) even where Spark would choose another one by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.hive import canon, connector, run_direct

from hive_hooks.engine import LocalHiveServer
from hive_hooks.executor import QueryRunner, pin_hint, pin_settings
from hive_hooks.registry import CheckpointRegistry
from hive_hooks.share import StaticShare
from hive_hooks.tpcload import load_tpc
from qoop_planner.cost import CostConfig
from qoop_planner.model import Plan
from qoop_planner.physical import PROFILES
from qoop_planner.tpc import load_tpc as tpc_queries

pytestmark = pytest.mark.slow

ENGINE_CONF = {"spark.hadoop.datanucleus.connectionPoolingType": "None"}
BY_NAME = {p.name: p for p in PROFILES}
# pin -> (profile, cost config, the join method every join gets, Spark's operator for it);
# a container no larger than its base memory leaves no room for a hash table: sort-merge
PINS = {
    "broadcast": (BY_NAME["broadcast"], CostConfig(), "broadcast", "BroadcastHashJoin"),
    "shuffle_hash": (BY_NAME["shuffle_wide"], CostConfig(), "shuffle_hash", "ShuffledHashJoin"),
    "merge": (
        BY_NAME["shuffle"],
        CostConfig(base_memory_mb=1024, max_memory_mb=1024),
        "merge",
        "SortMergeJoin",
    ),
}
OPERATORS = ("BroadcastHashJoin", "ShuffledHashJoin", "SortMergeJoin")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    srv = LocalHiveServer(work_dir=tmp_path_factory.mktemp("hs2"), extra_conf=ENGINE_CONF)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def connect(engine: LocalHiveServer, tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("data")
    load_tpc(connector(engine.port, "default"), "tpch", 0.01, "tpch", data_dir=data)
    return connector(engine.port)


@pytest.fixture(scope="module")
def queries() -> dict[int, str]:
    return tpc_queries("tpch", 0.01).queries


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory):
    reg = CheckpointRegistry(tmp_path_factory.mktemp("reg") / "registry.db")
    yield reg
    reg.close()


def _inline(plan: Plan, stage_id: str) -> str:
    st = plan.stage(stage_id)
    sql = st.sql
    for i in st.inputs:
        sql = sql.replace("{{" + i + "}}", f"({_inline(plan, i)})")
    return sql


def _explain(connect: Callable[[], Any], statements: list[str], sql: str) -> str:
    conn = connect()
    try:
        cur = conn.cursor()
        for s in statements:
            cur.execute(s)
        cur.execute("EXPLAIN " + sql)
        return "\n".join(str(r[0]) for r in cur.fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("pin", list(PINS))
def test_pinned_plan_equals_direct_and_runs_its_join_method(
    pin: str,
    n: int,
    connect: Callable[[], Any],
    queries: dict[int, str],
    registry: CheckpointRegistry,
) -> None:
    profile, cfg, method, operator = PINS[pin]
    with QueryRunner(
        connect,
        registry=registry,
        checkpoint_db=f"ck_pin_{pin}",
        share=StaticShare(4),
        physical=(profile,),
        k=1,
        cost_config=cfg,
        metadata_ttl_s=3600,
    ) as runner:
        (est,) = runner.explain(queries[n])
        plan = est.plan
        joins = [s for s in plan.stages if s.kind == "join"]
        assert joins and {s.method for s in joins} == {method}
        assert all(s.partitions >= 1 for s in joins)
        # what the executor sends pins the form: the settings, then the hinted statement
        first = est.statements[joins[0].stage_id]
        assert "SET spark.sql.shuffle.partitions=" in first and "/*+ " in first
        res = runner.run(queries[n], query_id=f"pin-{pin}-q{n}")
    assert canon(res.rows) == canon(run_direct(connect, queries[n]))
    assert {s.outcome for s in res.stages} == {"done"}
    # Spark's own choice on these small tables would broadcast every join; the pinned
    # strategy wins (a join of two scans, so it is the only join in the statement)
    leaf = next(
        s for s in joins if all(plan.stage(i).kind == "scan" for i in s.inputs)
    )  # every join tree has one
    text = _explain(
        connect,
        list(pin_settings(leaf, "spark")),
        pin_hint(_inline(plan, leaf.stage_id), leaf, "spark"),
    )
    assert operator in text, text
    assert not any(op in text for op in OPERATORS if op != operator), text
