"""The pure core of staged execution: from SQL to stages, checkpoint names and schedules.

QOOP runs a query stage by stage and keeps each finished stage as a checkpoint (QOOP §2.3), and
may switch plans when the share changes (QOOP §2.4). This module holds the decisions of that
execution that need no server: qualifying the query's tables and naming its checkpoint
namespace (:func:`qualify_query`, :func:`namespace_of`, :func:`checkpoint_name`), reading table
descriptions and statistics (:func:`parse_describe`, :func:`parse_statistics`), feeding the
planner the checkpoints as free stages (:func:`checkpoint_history`), turning stages into
statements (:func:`resolve_sql`, :func:`is_base_scan`, :func:`passthrough_plan`), pinning a
join stage's physical form on the engine (:func:`pin_settings`, :func:`pin_hint`), which stages
may start under a share (:func:`stage_vcores`, :func:`launchable`, :func:`needed_signatures`)
and the plan-switching policy (:func:`greedy_policy`). No I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify_tables import qualify_tables

from hive_hooks.registry import CheckpointRecord
from qoop_planner.cost import History, StageMeasurement
from qoop_planner.model import (
    Plan,
    Progress,
    Resources,
    Share,
    Stage,
    StageCost,
    StageSignature,
)
from qoop_planner.replan import checkpoint_table, decide

__all__ = [
    "STORAGE",
    "ReplanPolicy",
    "TableInfo",
    "checkpoint_history",
    "checkpoint_name",
    "greedy_policy",
    "is_base_scan",
    "launchable",
    "namespace_of",
    "needed_signatures",
    "parse_describe",
    "parse_statistics",
    "passthrough_plan",
    "pin_hint",
    "pin_settings",
    "qualify_query",
    "resolve_sql",
    "stage_vcores",
]

# The CTAS storage clause per engine: Spark's own Parquet writer is 30-50 % faster than its
# Hive-serde path for the small stages measured here (``USING`` is Spark-only syntax).
STORAGE: Mapping[str, str] = MappingProxyType(
    {"spark": "USING parquet", "hive": "STORED AS PARQUET"}
)


@dataclass(frozen=True)
class TableInfo:
    """A described table: ``db.table``, its columns, version and size hints."""

    name: str
    columns: tuple[tuple[str, str], ...]
    version: str
    bytes: float | None = None
    rows: float | None = None


# (plans, progress, share, current plan id or None) -> the plan to run from now on
ReplanPolicy = Callable[[Sequence[Plan], Progress, Share, "str | None"], Plan]


def greedy_policy(hysteresis: float = 0.15) -> ReplanPolicy:
    """QOOP's greedy choice with hysteresis (:func:`qoop_planner.replan.decide`)."""

    def choose(
        plans: Sequence[Plan], progress: Progress, share: Share, current: str | None
    ) -> Plan:
        return decide(plans, progress, share, hysteresis=hysteresis, current_plan_id=current).plan

    return choose


def qualify_query(sql: str, database: str) -> tuple[str, tuple[str, ...]]:
    """The query with every table reference qualified by ``database`` (CTE names excepted), and
    the tables it reads (``db.table``, lower case). Raises ValueError for SQL sqlglot cannot
    parse as one query.

    >>> sql, tables = qualify_query("WITH c AS (SELECT * FROM t) SELECT * FROM c, x.u", "d")
    >>> sql
    'WITH c AS (SELECT * FROM d.t AS t) SELECT * FROM c AS c CROSS JOIN x.u AS u'
    >>> tables
    ('d.t', 'x.u')
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read="hive") if s is not None]
    except SqlglotError as e:
        raise ValueError(f"cannot parse: {e}") from e
    if len(statements) != 1:
        raise ValueError(f"expected one statement, got {len(statements)}")
    stmt = statements[0]
    if not isinstance(stmt, exp.Query):
        raise ValueError(f"not a query: {stmt.key.upper()}")
    try:
        q = qualify_tables(stmt.copy(), db=database, dialect="hive")
    except SqlglotError as e:
        raise ValueError(f"cannot qualify tables: {e}") from e
    ctes = {c.alias_or_name.lower() for c in q.find_all(exp.CTE)}
    tables: set[str] = set()
    for t in q.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier):
            raise ValueError(f"unsupported FROM item {t.sql(dialect='hive')}")
        if not t.args.get("db"):
            if t.name.lower() in ctes:
                continue
            raise ValueError(f"table {t.name} could not be qualified")
        if t.args.get("catalog"):
            raise ValueError(f"catalog-qualified table {t.sql(dialect='hive')}")
        tables.add(f"{t.db}.{t.name}".lower())
    return q.sql(dialect="hive"), tuple(sorted(tables))


def namespace_of(query_key: str, versions: Mapping[str, str]) -> str:
    """The checkpoint namespace of a query over tables at the given versions."""
    text = query_key + "|" + "|".join(f"{t}@{versions[t]}" for t in sorted(versions))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def checkpoint_name(namespace: str, signature: StageSignature) -> str:
    """Name of the checkpoint table of a stage of the query ``namespace``
    (:func:`qoop_planner.replan.checkpoint_table` of the signature within the namespace)."""
    scoped = StageSignature(
        relations=signature.relations,
        predicates=signature.predicates,
        top=f"{signature.top}@{namespace}",
    )
    return checkpoint_table(scoped)


def parse_describe(name: str, rows: Sequence[Sequence[Any]]) -> TableInfo:
    """Columns, version and size hints from ``DESCRIBE FORMATTED`` rows (Spark or Hive).

    >>> info = parse_describe("d.t", [("a", "bigint", None), ("b", "string", ""), ("", "", ""),
    ...     ("# Detailed Table Information", "", ""), ("Created Time", "Sun Nov 22", ""),
    ...     ("Location", "file:/w/t", ""), ("Statistics", "1830 bytes, 7 rows", "")])
    >>> info.columns, info.bytes, info.rows, info.version
    ((('a', 'bigint'), ('b', 'string')), 1830.0, 7.0, 'Sun Nov 22|file:/w/t||')
    """
    columns: list[tuple[str, str]] = []
    meta: dict[str, str] = {}
    in_columns = True
    started = False
    for row in rows:
        c0 = str(row[0] or "").strip()
        c1 = str(row[1] or "").strip() if len(row) > 1 else ""
        c2 = str(row[2] or "").strip() if len(row) > 2 else ""
        if in_columns:
            if c0.startswith("#") or not c0:
                if started:
                    in_columns = False
                continue  # Hive's "# col_name" header before the columns
            started = True
            columns.append((c0, c1))
            continue
        if c0:
            meta[c0.rstrip(":").strip()] = c1
        elif c1:  # Hive table parameters: ("", key, value)
            meta[c1.rstrip(":").strip()] = c2
    version = "|".join(
        meta.get(k, "")
        for k in ("Created Time", "Location", "Table Properties", "transient_lastDdlTime")
    )
    if meta.get("CreateTime"):
        version = meta["CreateTime"] + "|" + version
    nbytes: float | None = None
    nrows: float | None = None
    st = meta.get("Statistics", "")
    m = re.search(r"(\d+)\s+bytes", st)
    if m:
        nbytes = float(m.group(1))
    m = re.search(r"(\d+)\s+rows", st)
    if m and int(m.group(1)) > 0:
        nrows = float(m.group(1))
    if nbytes is None and meta.get("totalSize", "").isdigit():
        nbytes = float(meta["totalSize"])
    if nrows is None and meta.get("numRows", "").isdigit() and int(meta["numRows"]) > 0:
        nrows = float(meta["numRows"])
    return TableInfo(name, tuple(columns), version, nbytes, nrows)


def parse_statistics(text: str) -> tuple[int | None, int | None]:
    """(rows, bytes) from the ``Statistics:`` line of Spark's ``SHOW TABLE EXTENDED``
    information (a row count of 0 is "not recorded": Spark's size-only update writes it).

    >>> parse_statistics("Type: MANAGED\\nStatistics: 1224 bytes, 0 rows\\nLocation: file:/w")
    (None, 1224)
    >>> parse_statistics("Statistics: 10 bytes, 3 rows"), parse_statistics("Type: VIEW")
    ((3, 10), (None, None))
    """
    m = re.search(r"Statistics:\s*(\d+)\s+bytes(?:,\s*(\d+)\s+rows)?", text)
    if m is None:
        return None, None
    rows = int(m.group(2)) if m.group(2) and int(m.group(2)) > 0 else None
    return rows, int(m.group(1))


def checkpoint_history(
    history: Mapping[str, StageMeasurement], records: Mapping[str, CheckpointRecord]
) -> History:
    """``history`` with every checkpointed stage (signature digest -> record) as a stage of no
    work and its measured rows, so plan enumeration ranks plans that reuse checkpoints first.
    A checkpoint whose row count is unknown (and not in the history) is left as it was."""
    merged = dict(history)
    for digest, rec in records.items():
        rows = rec.rows
        if rows is None and digest in history:
            rows = int(history[digest].rows_out)
        if rows is not None:
            merged[digest] = StageMeasurement(task_s=0.0, tasks=1, rows_out=float(rows))
    return History(merged)


def is_base_scan(stage: Stage) -> bool:
    """A scan stage that reads one base table (no subquery, no CTE): cheap to re-read."""
    if stage.kind != "scan":
        return False
    try:
        sel = sqlglot.parse_one(stage.sql, read="hive")
    except SqlglotError:
        return False
    if not isinstance(sel, exp.Select) or sel.args.get("joins") or sel.args.get("with_"):
        return False
    src = sel.args.get("from_")
    table = src.this if src is not None else None
    return isinstance(table, exp.Table) and bool(table.args.get("db"))


def resolve_sql(plan: Plan, stage: Stage, sources: Mapping[StageSignature, str]) -> str:
    """``stage.sql`` with each ``{{input}}`` replaced by the source holding that input (a
    checkpoint table name or an inline subquery ``(SELECT ...)``)."""
    sql = stage.sql
    for i in stage.inputs:
        src = sources[plan.stage(i).signature]
        sql = sql.replace("{{" + i + "}}", src)
    return sql


# The session settings that pin a join's form, per engine; a stage without a form resets them.
# Spark: adaptive execution would re-plan the join and coalesce its partitions, so it is off
# for a pinned join; the hint picks the strategy, the shuffle partitions the tasks.
# Hive: the map join is the automatic conversion (with the MAPJOIN hint honoured), the reducers
# the task count of a shuffle join.
_PIN_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "spark": ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions"),
        "hive": ("hive.auto.convert.join", "hive.ignore.mapjoin.hint", "mapreduce.job.reduces"),
    }
)
_SPARK_HINT: Mapping[str, str] = MappingProxyType(
    {"broadcast": "BROADCAST", "shuffle_hash": "SHUFFLE_HASH", "merge": "MERGE"}
)
BUILD_ALIAS = "r"  # the join stage's build (smaller) input, qoop_planner.sqlplan


def pin_settings(stage: Stage, engine: str) -> tuple[str, ...]:
    """The statements that pin ``stage``'s join method and partitions on ``engine`` before it
    runs (``RESET`` of the same keys for a stage without a method, so a pooled session does
    not carry one stage's form into the next).

    >>> from qoop_planner.model import *
    >>> sig = StageSignature(frozenset())
    >>> j = Stage("j", "join", (), sig, (), "SELECT 1", StageCost(1, 1, Resources(1, 1)),
    ...           method="shuffle_hash", partitions=12)
    >>> pin_settings(j, "spark")
    ('SET spark.sql.adaptive.enabled=false', 'SET spark.sql.shuffle.partitions=12')
    >>> pin_settings(Stage("s", "scan", (), sig, (), "SELECT 1", j.cost), "spark")
    ('RESET spark.sql.adaptive.enabled', 'RESET spark.sql.shuffle.partitions')
    """
    if engine not in _PIN_KEYS:
        raise ValueError(f"unknown engine {engine!r}")
    if not stage.method:
        if engine == "hive":  # Hive's RESET takes no key: back to Hive's defaults
            return (
                "SET hive.auto.convert.join=true",
                "SET hive.ignore.mapjoin.hint=true",
                "SET mapreduce.job.reduces=-1",
            )
        return tuple(f"RESET {k}" for k in _PIN_KEYS[engine])
    parts = max(1, stage.partitions)
    if engine == "spark":
        return ("SET spark.sql.adaptive.enabled=false", f"SET spark.sql.shuffle.partitions={parts}")
    broadcast = stage.method == "broadcast"
    return (
        f"SET hive.auto.convert.join={'true' if broadcast else 'false'}",
        "SET hive.ignore.mapjoin.hint=false",
        f"SET mapreduce.job.reduces={-1 if broadcast else parts}",
    )


def pin_hint(sql: str, stage: Stage, engine: str) -> str:
    """``sql`` (the stage's statement) with the join hint of its method on the build input.

    >>> from qoop_planner.model import *
    >>> sig = StageSignature(frozenset())
    >>> j = Stage("j", "join", (), sig, (), "", StageCost(1, 1, Resources(1, 1)), "broadcast", 4)
    >>> pin_hint("SELECT l.a FROM x AS l JOIN y AS r ON l.a = r.a", j, "spark")
    'SELECT /*+ BROADCAST(r) */ l.a FROM x AS l JOIN y AS r ON l.a = r.a'
    >>> pin_hint("SELECT 1", j, "hive")
    'SELECT /*+ MAPJOIN(r) */ 1'
    """
    if not stage.method:
        return sql
    if engine == "spark":
        hint = _SPARK_HINT.get(stage.method)
    elif engine == "hive":
        hint = "MAPJOIN" if stage.method == "broadcast" else None
    else:
        raise ValueError(f"unknown engine {engine!r}")
    if hint is None:
        return sql
    head, sep, rest = sql.partition("SELECT ")
    if sep == "" or head.strip():
        raise ValueError(f"stage {stage.stage_id}: its SQL does not start with SELECT")
    return f"SELECT /*+ {hint}({BUILD_ALIAS}) */ {rest}"


def stage_vcores(stage: Stage, share: Share) -> float:
    """The part of the share a running stage occupies: its estimated tasks x vcores, between 1
    and the share."""
    want = max(1.0, stage.cost.tasks * max(stage.cost.demand.vcores, 1.0))
    return min(want, max(1.0, share.vcores))


def launchable(
    remaining: Plan,
    available: frozenset[StageSignature] | set[StageSignature],
    busy: frozenset[StageSignature] | set[StageSignature],
) -> list[Stage]:
    """Non-final stages of ``remaining`` (a :func:`~qoop_planner.replan.rewrite`) that can start:
    not available, not busy, every input available; in the plan's topological order."""
    out = []
    for s in remaining.stages:
        if s.stage_id == remaining.root or s.kind == "checkpoint":
            continue
        if s.signature in available or s.signature in busy:
            continue
        if all(remaining.stage(i).signature in available for i in s.inputs):
            out.append(s)
    return out


def needed_signatures(remaining: Plan) -> frozenset[StageSignature]:
    """Signatures of the stages a rewritten plan still has to run (the final stage included)."""
    return frozenset(s.signature for s in remaining.stages if s.kind != "checkpoint")


def passthrough_plan(sql: str, query_id: str) -> Plan:
    """One final stage that is the SQL as given (the planner could not decompose it)."""
    sig = StageSignature(
        relations=frozenset(),
        predicates=frozenset(),
        top="passthrough:" + hashlib.sha256(sql.encode()).hexdigest()[:16],
    )
    stage = Stage(
        stage_id=f"final_{sig.digest}",
        kind="final",
        inputs=(),
        signature=sig,
        operators=("Passthrough",),
        sql=sql,
        cost=StageCost(1, 1.0, Resources(1.0, 1024.0)),
    )
    return Plan(f"{query_id}/p0", query_id, (stage,), stage.stage_id, stage.cost.work)
