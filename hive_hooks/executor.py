"""Run a query's QOOP plans stage by stage on HiveServer2, following the share (QOOP §2.2-2.4).

The execution engine of QOOP (spec ``qoop-themis.md`` A.1, A.3), on Hive: :class:`QueryRunner`
plans the query with :mod:`qoop_planner` (cached alternative plans, stage signatures), runs the
chosen plan one stage at a time on HiveServer2 through pyhive, keeps every finished stage as a
checkpoint table, and on every share change asks the planner (:func:`qoop_planner.replan.decide`)
whether to switch plans; a switch cancels the running stages the new plan does not need and
resumes from the checkpoints (spec A.3 switch actions (a)-(c), A.4.4).

How a query runs (:meth:`QueryRunner.run`):

1. **Prepare.** The SQL is parsed (sqlglot, Hive dialect) and every table reference qualified with
   the session's database; each table is described (``DESCRIBE FORMATTED``: columns, and a
   *version* = created time, location, DDL time) and, unless ``stats`` are given, measured once
   per version (``SELECT COUNT(*), approx_count_distinct(c), ...``; cached in the registry).
   :func:`~qoop_planner.sqlplan.enumerate_plans` gives the ``k`` cached plans, with the measured
   stage history of earlier runs of the same query (:meth:`CheckpointRegistry.history`).
2. **Choose** the plan with the policy (default: :func:`qoop_planner.replan.decide`, hysteresis
   0.15) under the current share, with every usable checkpoint as progress.
3. **Run stages.** Each non-final stage becomes ``CREATE TABLE <checkpoint_db>.<name> STORED AS
   PARQUET AS SELECT ...`` (``USING parquet`` on Spark, detected once per connection; its
   ``{{stage_id}}`` inputs replaced by their checkpoint tables). Ready
   stages (inputs available) run concurrently, one connection each, while the share allows: a
   stage occupies ``tasks x vcores`` of its estimate (at least 1, at most the share), a new one
   starts if it fits next to the running ones or nothing runs, capped by ``max_concurrency``.
   After a CTAS the stage is a checkpoint at once (its consumers may start); its size (the
   engine's table statistics) and row count (``COUNT(*)``, Parquet footers, when the engine did
   not record it) are read afterwards on the same connection while other stages run.
4. **Share changes** (the :class:`~hive_hooks.share.ShareSource`'s epoch moves) go to the policy
   with the progress (checkpoints, running stages and their elapsed time). On a switch, running
   stages the new plan does not need are cancelled (``CancelOperation`` on the operation handle;
   a cancelled CTAS table is dropped), and the new plan resumes from every checkpoint it can use,
   including those of plans run earlier (backtracking).
5. **The final stage** (the query's top: aggregates, ORDER BY, ...) runs as a plain query over
   the root checkpoints and its rows are fetched with ``fetchmany``: into the result, or, with
   ``run(..., on_rows=...)``, handed to the caller batch by batch as they arrive (streaming; the
   result then holds none). Once it has started, share changes no longer switch plans (every
   plan ends in the same final stage; switching then would only discard the finished inputs).

Decisions where the spec is silent or Hive differs from Tez:

* **Checkpoint names** (:func:`checkpoint_name`): :func:`qoop_planner.replan.checkpoint_table` of
  the stage signature extended with the query's *namespace* = digest of (qualified query text,
  versions of every table it reads). Stage signatures are only comparable within one query (the
  model's docstring), so a checkpoint serves every plan of the query and every rerun over the
  same data, never another query, and never data that was reloaded (new version, new name).
* **Scans are not materialised** by default: a scan stage of a base table (a filtered
  projection) is inlined into the stages that read it as a subquery, because copying a base
  table into a checkpoint costs a full write and the base table is always there to re-read. Scans
  of derived tables and CTEs (real work) are materialised. ``materialize_scans=True``
  checkpoints every scan as in the paper's DAGs.
* **The registry is the source of truth** (:mod:`hive_hooks.registry`): a table in the
  checkpoint database without a record is never adopted (it may be a partial CTAS from a crash
  or a cancel): when the CTAS finds it, it is dropped and the CTAS retried. A
  ``LOCATION_ALREADY_EXISTS`` error (files left by a killed CTAS with no table) retries under the
  name with a ``_r<n>`` suffix; the registry maps the stage to the name actually used.
* **Join order is the plan's**: each connection gets :data:`ENGINE_SETTINGS` (Spark: CBO and
  join reordering off; Hive 4: the join-reordering rules excluded from CBO, spec
  ``yarn-hive-integration.md`` §3.4 option 2) and then the user's ``hiveconf``, which may
  override them. Stage queries are binary joins, so only build/probe sides are left to the
  engine.
* **The query's YARN tag** (spec ``yarn-hive-integration.md`` §3.3-3.4): while a run is
  registered with the arbiter (:class:`~hive_hooks.share.ArbiterShare`, from ``begin`` to
  ``end``), every connection the runner uses (the stage connections of the pool and the
  control connection) carries :func:`hive_hooks.share.tag_settings` (``hive.query.tag``,
  ``tez.application.tags``, ``mapreduce.job.tags`` = ``yarn-arbiter-query:<job_id>``), so the
  arbiter's YARN watcher does not count the query's own Tez/MapReduce app as a second analytics
  job. Connections are synced lazily, when they are next used: each remembers the tags it was
  given and gets ``SET`` statements only when the run's tags differ (a new job id; after the
  run, back to the user's values or empty). The planning statements (``DESCRIBE``, the statistics
  ``COUNT(*)``) run before ``begin`` (the share's clock starts after planning) and so untagged:
  the query is not registered yet, so its app is counted once either way. A rejected tag
  setting is logged, not fatal (the query's answer does not depend on it).
* **Share enforcement** (QOOP §2.3: the share is what the query runs with): with a
  ``share_enforcer`` (:class:`~hive_hooks.share.ShareEnforcer`, e.g.
  :class:`hive_hooks.yarn_engine.EngineControl`), the run's share goes to the engine when the
  run starts (after ``begin``) and on every share change, next to the planner's decision, and is
  released when the run ends (success or not). The run's key there is its arbiter job id when
  registered, else the query id; its connections carry the enforcer's session settings (the
  Spark FAIR scheduler pool) like the YARN tags above, and get the enforcer's defaults back after
  the run. An enforcer that fails is logged, not fatal (the answer does not depend on it).
* **Lost connection** (the server died or restarted): every running stage is lost (event
  ``lost``); the runner reconnects (every second, up to ``reconnect_timeout_s``), checks the
  registered checkpoints against the server's tables (a missing one is forgotten and
  recomputed), and continues from the checkpoints; finished stages are never recomputed. The
  final stage's partial rows are discarded and it reruns, unless some were already streamed to
  the caller: those cannot be taken back, and rerunning would repeat them (the result has no
  order to resume from in general), so the run ends with
  :class:`~hive_hooks.errors.ResultInterruptedError` (decision; the checkpoints stay, so a
  rerun repeats only the final stage). No server within the timeout:
  :class:`~hive_hooks.errors.EngineUnavailableError`.
* **Errors**: a stage the engine rejects raises :class:`~hive_hooks.errors.QueryError` with the
  engine's message after cancelling the other running stages; checkpoints stay registered.
  Before that the server must answer ``SELECT 1``: a server being stopped fails its running
  statements with internal errors first (measured: Spark answers ``INTERNAL_ERROR`` while its
  context shuts down), and those stages are treated as lost, not failed.
* **Checkpoint-aware enumeration**: the planner's top-``k`` search does not know checkpoints, so
  the runner passes each registered checkpoint of the query as a measured stage of zero work
  (with its real row count) in the history; plans that resume from checkpoints rank first and
  are always among the cached plans (a rerun after a crash resumes instead of choosing a plan
  that cannot use what survived).
  SQL the planner cannot parse, qualify or decompose (or whose tables cannot be described) runs
  *as is* as one final stage ("passthrough"): the engine either runs it or reports its own error.
* **Measurements** feed the planner's history: a stage's CTAS wall time as ``task_s`` with its
  estimated task count (HiveServer2 does not report Spark/Tez task counts), and its measured rows
  as ``rows_out``.
* **Cancellation and the metastore**: ``CancelOperation`` makes HiveServer2 (Hive and the Spark
  Thrift Server alike) interrupt the statement's background thread. If that thread is inside
  *embedded Derby* metastore I/O, Derby closes the connection ("Connection closed by unknown
  interrupt") and, with DataNucleus' connection pool, a few such cancels exhaust the pool and
  hang the server (reproduced with 40 random cancels). A remote metastore is not affected; the
  local engine needs ``spark.hadoop.datanucleus.connectionPoolingType=None`` (same 40 cancels:
  no failure). Cancelled ``USING parquet`` CTAS may leave a data directory without a table; a
  later CTAS of the same name overwrites it. **Decision**: the cancel is not the end of a
  CTAS. The Spark Thrift Server marks the operation CANCELED at once, but a CTAS whose write
  job had already finished goes on to create its metastore table (seen in CI: one leftover table
  in 22 switched TPC-H runs). The worker drops the table and watches the database for
  ``cancel_settle_s`` (1.5 s, on the worker thread, beside the new plan's stages), dropping it
  again if it appears; anything later still is an orphan for :meth:`CheckpointRegistry.gc`.
* **Stale file listings**: Spark sessions cache a table's files; a checkpoint dropped and made
  again under the same name by another session (gc, crash recovery) fails to read in an old
  session with ``FAILED_READ_FILE.FILE_NOT_EXIST``. The statement's checkpoint inputs are then
  refreshed (``REFRESH TABLE``) and the statement retried once.
* **What a checkpoint costs** (measured on the local engine, TPC-H sf 0.1, 2 cores; the
  benchmark's ~0.5 s per checkpoint stage): a CTAS takes 0.24 s where the same SELECT takes
  0.13 s (the Parquet write, the commit and the metastore's create: ~0.1 s), and every stage
  is a Spark SQL statement of its own (~0.1 s of parsing, planning and job launch even when
  trivial) that writes its intermediate result and whose consumer reads it back, with no
  pipelining across the stage boundary. Tried and **not** adopted, because they did not
  measurably help: ``spark.sql.statistics.size.autoUpdate.enabled=false`` (CTAS 0.256 vs
  0.243 s; it stays on, sizes come free with it), a pooled Derby metastore (0.234 s; pooling
  stays off for cancel safety), uncompressed Parquet and the v2 output committer (within
  noise over 6 queries), describing a query's tables side by side on pool connections
  (planning 0.167 vs 0.136 s median), measuring each checkpoint right after its CTAS instead
  of beside the final stage (22.8 vs 23.6 s over 8 queries). Adopted: the measurement reads
  every checkpoint's size with one ``SHOW TABLE EXTENDED ... LIKE 'a|b|...'`` on Spark
  (0.09-0.11 s for five tables instead of 0.175 s of DESCRIBEs).
* **Threads**: one worker thread per running stage (each on its own connection, polling its
  operation; HiveServer2 long-polls status for up to 5 s, so cancellation goes through a
  separate control connection: operation handles are global on the server). ``on_event`` is
  called on the thread that called :meth:`QueryRunner.run`. One run at a time per runner.

Public API::

    runner = QueryRunner(connect, registry=CheckpointRegistry(), share=ScriptedShare(...))
    result = runner.run(sql)        # QueryResult: columns, rows, switches, stages, reused, elapsed
    runner.explain(sql)             # [PlanEstimate]: cached plans, estimates, what is checkpointed
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify_tables import qualify_tables

from hive_hooks.errors import (
    EngineUnavailableError,
    QoopHiveError,
    QueryError,
    ResultInterruptedError,
    SettingError,
    clean_engine_text,
    connect_error,
    engine_message,
    is_connection_lost,
)
from hive_hooks.registry import CheckpointRecord, CheckpointRegistry, show_tables
from hive_hooks.share import ShareEnforcer, ShareSource, StaticShare, tag_settings
from qoop_planner.cost import CostConfig, History, StageMeasurement, TableStats
from qoop_planner.model import (
    Plan,
    Progress,
    Resources,
    RunningStage,
    Share,
    Stage,
    StageCost,
    StageSignature,
)
from qoop_planner.replan import checkpoint_table, decide, rewrite
from qoop_planner.sqlplan import enumerate_plans

__all__ = [
    "ENGINE_SETTINGS",
    "EVENT_KINDS",
    "STORAGE",
    "PlanEstimate",
    "PlanSwitch",
    "QueryResult",
    "QueryRunner",
    "ReplanPolicy",
    "StageEvent",
    "StageTiming",
    "TableInfo",
    "checkpoint_history",
    "checkpoint_name",
    "greedy_policy",
    "launchable",
    "namespace_of",
    "parse_describe",
    "qualify_query",
    "resolve_sql",
]

log = logging.getLogger("qoop_hive.executor")

# Session settings that keep the engine from reordering the plan's joins (module docstring).
ENGINE_SETTINGS: Mapping[str, str] = MappingProxyType(
    {
        "spark.sql.cbo.enabled": "false",
        "spark.sql.cbo.joinReorder.enabled": "false",
        "spark.sql.cbo.starSchemaDetection": "false",
        "hive.cbo.rule.exclusion.regex": "HiveJoinCommuteRule|LoptOptimizeJoinRule|"
        "JoinToMultiJoinRule",
        # checkpoint sizes for the registry: Spark records them on CTAS with this on; Hive
        # gathers rows and sizes on CTAS by default (hive.stats.autogather)
        "spark.sql.statistics.size.autoUpdate.enabled": "true",
    }
)

EVENT_KINDS = ("start", "done", "reused", "cancelled", "switch", "lost")

# The CTAS storage clause per engine: Spark's own Parquet writer is 30-50 % faster than its
# Hive-serde path for the small stages measured here (``USING`` is Spark-only syntax).
STORAGE: Mapping[str, str] = MappingProxyType(
    {"spark": "USING parquet", "hive": "STORED AS PARQUET"}
)

_EMPTY: Mapping[str, str] = MappingProxyType({})
_SETTING_KEY = re.compile(r"^[A-Za-z0-9_.\-:/]+$")

# TOperationState values (TCLIService): what a poll can return
_RUNNING_STATES = (0, 1, 7)  # INITIALIZED, RUNNING, PENDING
_FINISHED = 2
_CANCELLED_STATES = (3, 4)  # CANCELED, CLOSED


# =========================================================================== public value types


def _try_set(cur: Any, key: str, value: str) -> Exception | None:
    """``SET key=value`` on ``cur``: None if the engine took it, its refusal if not; a lost
    connection is raised (the caller reconnects)."""
    try:
        cur.execute(f"SET {key}={value}")
    except Exception as e:
        if is_connection_lost(e):
            raise
        return e
    return None


@dataclass(frozen=True)
class StageEvent:
    """Something happened to a stage (or the plan) of a running query.

    ``kind``: ``start`` (a stage's statement was submitted), ``done`` (it finished; for a
    checkpoint stage ``table`` is the checkpoint), ``reused`` (the plan reads a checkpoint made by
    an earlier run or another plan instead of computing it), ``cancelled`` (a switch cancelled
    it), ``switch`` (``plan_id`` is the new plan; ``detail`` says from which), ``lost`` (the
    connection died while it ran; it will rerun).
    """

    query_id: str
    plan_id: str
    stage_id: str
    kind: str
    rows: int | None = None
    seconds: float | None = None
    table: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class StageTiming:
    """One executed (or reused) stage of a run."""

    plan_id: str
    stage_id: str
    kind: str  # the stage's kind: scan | join | final
    outcome: str  # done | reused | cancelled | lost
    seconds: float
    rows: int | None = None
    table: str | None = None


@dataclass(frozen=True)
class PlanSwitch:
    at_s: float  # seconds since the run started
    from_plan: str
    to_plan: str
    share: Share
    cancelled: tuple[str, ...]  # stage ids cancelled by the switch
    reused: tuple[str, ...]  # checkpoints the new plan resumes from (its own included)


@dataclass(frozen=True)
class QueryResult:
    query_id: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    plan_id: str  # the plan that finished
    initial_plan_id: str
    switches: tuple[PlanSwitch, ...]
    stages: tuple[StageTiming, ...]
    reused: tuple[str, ...]  # stage ids read from checkpoints made before (earlier run/other plan)
    elapsed_s: float
    planning_s: float
    share_changes: int
    reconnects: int = 0
    passthrough: bool = False  # the planner could not decompose the SQL; it ran as one statement
    events: tuple[StageEvent, ...] = ()
    streamed: int = 0  # rows handed to ``on_rows`` as they were fetched (then ``rows`` is empty)

    @property
    def row_count(self) -> int:
        return self.streamed or len(self.rows)


@dataclass(frozen=True)
class PlanEstimate:
    """One cached plan, as :meth:`QueryRunner.explain` reports it."""

    plan: Plan
    estimate_s: float  # estimated finish under the share (from now, checkpoints counted)
    chosen: bool
    checkpointed: tuple[str, ...]  # stage ids with a usable checkpoint
    to_run: tuple[str, ...]  # stage ids still to run, in order
    statements: Mapping[str, str]  # stage id -> the statement the executor would send


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


# =========================================================================== pure core


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


# =========================================================================== shell: plumbing


class _Cancelled(Exception):
    """The stage's operation was cancelled."""


class _StatementError(Exception):
    """The engine reported an error state for a statement."""

    def __init__(self, message: str, sql: str) -> None:
        super().__init__(message)
        self.message = message
        self.sql = sql


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.close()


class _Pool:
    """Idle connections, each set up once (session settings) and refreshed on every
    acquire (per-run settings); thread-safe."""

    def __init__(
        self,
        connect: Callable[[], Any],
        setup: Callable[[Any], None],
        max_idle: int,
        refresh: Callable[[Any], None] | None = None,
    ):
        self._connect = connect
        self._setup = setup
        self._refresh = refresh
        self._max_idle = max_idle
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.generation = 0

    def acquire(self) -> tuple[Any, int]:
        with self._lock:
            gen = self.generation
            conn = self._idle.pop() if self._idle else None
        fresh = conn is None
        if conn is None:
            conn = self._connect()
        try:
            if fresh:
                self._setup(conn)
            if self._refresh is not None:
                self._refresh(conn)
        except BaseException:
            _close_quietly(conn)
            raise
        return conn, gen

    def release(self, conn: Any, gen: int) -> None:
        with self._lock:
            if gen == self.generation and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        _close_quietly(conn)

    def reset(self) -> None:
        with self._lock:
            self.generation += 1
            idle, self._idle = self._idle, []
        for c in idle:
            _close_quietly(c)


@dataclass(eq=False)
class _Task:
    """A stage statement in flight on a worker thread."""

    stage: Stage
    plan_id: str
    sql: str
    table: str | None  # checkpoint table (None: the final stage)
    started: float
    in_use: str = ""  # the name the CTAS writes (table, or table_r<n> after a leftover)
    inputs: tuple[str, ...] = ()  # checkpoint tables the statement reads
    cancel_requested: bool = False
    handle: Any = None
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.in_use = self.in_use or (self.table or "")

    @property
    def final(self) -> bool:
        return self.table is None


@dataclass(frozen=True)
class _Prepared:
    query_id: str
    sql: str
    query_key: str
    namespace: str
    plans: tuple[Plan, ...]
    inline: frozenset[StageSignature]  # base scans inlined as subqueries
    passthrough: bool
    planning_s: float


# =========================================================================== the runner


class QueryRunner:
    """Runs queries as QOOP plans on HiveServer2 (module docstring).

    ``connect`` returns a new DB-API connection (pyhive ``hive.connect(...)``) to the server,
    already in the database the queries' unqualified tables live in. ``registry`` is the durable
    checkpoint registry; ``checkpoint_db`` the database holding checkpoint tables (created if
    missing). ``share`` follows the query's resource share (default: a fixed 4-vcore share, no
    switches). ``hiveconf`` settings are applied to every connection after
    :data:`ENGINE_SETTINGS`. ``on_event`` receives every :class:`StageEvent`. ``stats`` maps table
    names to statistics and disables gathering them from the engine.

    Tuning: ``policy`` (default :func:`greedy_policy` with ``hysteresis``), ``k`` cached plans,
    ``max_concurrency`` stages at once, ``materialize_scans``, ``reconnect_timeout_s``,
    ``fetch_size`` rows per fetch, ``metadata_ttl_s`` (how long a table's description is reused
    by later runs of this runner), ``cost_config`` for the planner, ``engine_settings`` to
    replace :data:`ENGINE_SETTINGS`. ``share_enforcer`` makes the share the engine's resources
    (module docstring: share enforcement).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        registry: CheckpointRegistry,
        checkpoint_db: str = "qoop_ckpt",
        share: ShareSource | None = None,
        hiveconf: Mapping[str, str] = _EMPTY,
        on_event: Callable[[StageEvent], None] | None = None,
        stats: Mapping[str, TableStats] | None = None,
        policy: ReplanPolicy | None = None,
        hysteresis: float = 0.15,
        k: int = 8,
        max_concurrency: int = 4,
        materialize_scans: bool = False,
        reconnect_timeout_s: float = 120.0,
        fetch_size: int = 1000,
        metadata_ttl_s: float = 5.0,
        cost_config: CostConfig | None = None,
        engine_settings: Mapping[str, str] = ENGINE_SETTINGS,
        share_enforcer: ShareEnforcer | None = None,
    ) -> None:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", checkpoint_db):
            raise ValueError(f"checkpoint_db {checkpoint_db!r} is not a plain identifier")
        for key, value in {**engine_settings, **hiveconf}.items():
            if not _SETTING_KEY.match(key):
                raise ValueError(f"setting name {key!r} is not a property name")
            if "\n" in str(value):
                raise ValueError(f"setting {key}: value has a newline")
        if k < 1 or max_concurrency < 1 or fetch_size < 1:
            raise ValueError("k, max_concurrency and fetch_size must be >= 1")
        if not hysteresis >= 0:
            raise ValueError(f"hysteresis must be >= 0, got {hysteresis}")
        self.connect = connect
        self.registry = registry
        self.checkpoint_db = checkpoint_db.lower()
        self.share: ShareSource = share if share is not None else StaticShare()
        self.hiveconf = dict(hiveconf)
        self.on_event = on_event
        self.stats = dict(stats) if stats is not None else None
        self.hysteresis = hysteresis
        self.policy: ReplanPolicy = policy or greedy_policy(hysteresis)
        self.k = k
        self.max_concurrency = max_concurrency
        self.materialize_scans = materialize_scans
        self.reconnect_timeout_s = reconnect_timeout_s
        self.fetch_size = fetch_size
        self.metadata_ttl_s = metadata_ttl_s
        self.cost_config = cost_config
        self.engine_settings = dict(engine_settings)
        self.share_enforcer = share_enforcer
        self._share_key: str | None = None  # the run's key at the enforcer, while it runs
        self.poll_interval = 0.02
        self.cancel_settle_s = 1.5  # how long a cancelled CTAS is watched for a late table
        self._pool = _Pool(
            connect, self._setup_session, max_idle=max_concurrency + 1, refresh=self._sync_tags
        )
        self._control_conn: Any = None
        # the YARN tag settings of the run in progress, and what each connection has been given
        self._tags: dict[str, str] = {}
        self._conn_tags: weakref.WeakKeyDictionary[Any, dict[str, str]] = (
            weakref.WeakKeyDictionary()
        )
        self._tag_lock = threading.Lock()
        # what a run-scoped setting goes back to when the user's hiveconf does not say
        self._tag_defaults = share_enforcer.session_defaults() if share_enforcer else {}
        self._current_db: str | None = None
        self._ready = False
        self._tables: dict[str, tuple[float, TableInfo]] = {}
        self._run_lock = threading.Lock()
        self._on_rows: Callable[[tuple[str, ...], list[tuple[Any, ...]]], None] | None = None
        self.orphans: tuple[str, ...] = ()  # our tables without a record, found at startup
        self.engine = "hive"  # "spark" when the server is a Spark Thrift Server
        self.storage = STORAGE["hive"]

    # -- connections -------------------------------------------------------------------------

    def _setup_session(self, conn: Any) -> None:
        cur = conn.cursor()
        for k, v in self.engine_settings.items():
            if (e := _try_set(cur, k, v)) is not None:
                log.debug("engine setting %s=%s not accepted: %s", k, v, engine_message(e))
        for k, v in self.hiveconf.items():
            if (e := _try_set(cur, k, v)) is not None:
                raise SettingError(f"setting {k}={v} rejected: {engine_message(e)}") from e
        with contextlib.suppress(Exception):
            cur.close()

    def _sync_tags(self, conn: Any) -> None:
        """Give ``conn`` the run's YARN tag settings if it has other ones (module docstring)."""
        want = self._tags
        with self._tag_lock:
            have = self._conn_tags.get(conn, {})
        if have == want:
            return
        cur = conn.cursor()
        try:
            for key in sorted({*have, *want}):
                value = want.get(key, self.hiveconf.get(key, self._tag_defaults.get(key, "")))
                if (e := _try_set(cur, key, value)) is not None:
                    log.warning("tag setting %s=%s not accepted: %s", key, value, engine_message(e))
        finally:
            with contextlib.suppress(Exception):
                cur.close()
        with self._tag_lock:
            self._conn_tags[conn] = dict(want)

    def _control(self) -> Any:
        if self._control_conn is None:
            try:
                conn = self.connect()
            except Exception as e:
                raise connect_error(e) from e
            self._control_conn = conn
        self._sync_tags(self._control_conn)
        return self._control_conn

    def _ctl_execute(self, sql: str) -> list[tuple[Any, ...]]:
        cur = self._control().cursor()
        cur.execute(sql)
        try:
            return list(cur.fetchall()) if cur.description else []
        finally:
            with contextlib.suppress(Exception):
                cur.close()

    def _drop_connections(self) -> None:
        self._pool.reset()
        if self._control_conn is not None:
            _close_quietly(self._control_conn)
            self._control_conn = None
        self._current_db = None
        self._ready = False

    def close(self) -> None:
        """Close every connection the runner holds (it can be used again afterwards)."""
        self._drop_connections()

    def __enter__(self) -> QueryRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_ready(self) -> None:
        """Once per connection: the checkpoint database exists and the registry agrees with it."""
        if self._ready:
            return
        self._ctl_execute(f"CREATE DATABASE IF NOT EXISTS {self.checkpoint_db}")
        existing = show_tables(self._control().cursor(), self.checkpoint_db)
        report = self.registry.reconcile(self.checkpoint_db, existing)
        if report.removed:
            log.warning(
                "registry: forgot %d checkpoint(s) whose tables are gone", len(report.removed)
            )
        self.orphans = report.orphans
        (row,) = self._ctl_execute("SELECT current_database()")
        self._current_db = str(row[0]).lower()
        self.engine = self._detect_engine()
        self.storage = STORAGE[self.engine]
        self._ready = True

    def _detect_engine(self) -> str:
        """``spark`` if the server knows Spark SQL's catalog setting, else ``hive``."""
        try:
            rows = self._ctl_execute("SET spark.sql.catalogImplementation")
        except Exception as e:
            if is_connection_lost(e):
                raise
            return "hive"
        row = rows[0] if rows else ()
        undefined = not row or len(row) < 2 or "undefined" in " ".join(map(str, row)).lower()
        return "hive" if undefined else "spark"

    def _reconnect(self, why: BaseException) -> None:
        """Wait for the server to come back (module docstring: lost connection)."""
        self._drop_connections()
        deadline = time.monotonic() + self.reconnect_timeout_s
        last: BaseException = why
        while True:
            try:
                self._ensure_ready()
                return
            except Exception as e:
                if not (is_connection_lost(e) or isinstance(e, EngineUnavailableError)):
                    raise
                last = e
                self._drop_connections()
            if time.monotonic() >= deadline:
                raise EngineUnavailableError(
                    f"lost the connection to HiveServer2 and it did not come back within "
                    f"{self.reconnect_timeout_s:.0f} s: {engine_message(last)}"
                ) from last
            time.sleep(1.0)

    def _with_reconnect(self, fn: Callable[[], Any]) -> Any:
        while True:
            try:
                self._ensure_ready()
                return fn()
            except Exception as e:
                if not is_connection_lost(e):
                    raise
                self._reconnect(e)

    # -- metadata ----------------------------------------------------------------------------

    def _describe(self, table: str) -> TableInfo:
        hit = self._tables.get(table)
        now = time.monotonic()
        if hit is not None and now - hit[0] <= self.metadata_ttl_s:
            return hit[1]
        info = parse_describe(table, self._ctl_execute(f"DESCRIBE FORMATTED {table}"))
        if not info.columns:
            raise ValueError(f"{table} has no columns")
        self._tables[table] = (now, info)
        return info

    def _gather_stats(self, info: TableInfo) -> TableStats:
        cached = self.registry.table_stats(info.name, info.version)
        if cached is not None:
            return cached
        cols = [c for c, _ in info.columns]
        stats: TableStats | None = None
        try:
            exprs = ", ".join(f"approx_count_distinct(`{c}`)" for c in cols)
            (row,) = self._ctl_execute(f"SELECT COUNT(*), {exprs} FROM {info.name}")
            stats = TableStats(
                rows=float(row[0]),
                bytes=info.bytes,
                ndv={c: float(v) for c, v in zip(cols, row[1:], strict=True) if v},
            )
        except Exception as e:
            if is_connection_lost(e):
                raise
            log.debug("NDVs of %s unavailable (%s); counting rows", info.name, engine_message(e))
        if stats is None:
            (row,) = self._ctl_execute(f"SELECT COUNT(*) FROM {info.name}")
            stats = TableStats(rows=float(row[0]), bytes=info.bytes)
        self.registry.put_table_stats(info.name, info.version, stats)
        return stats

    def _prepare(self, sql: str, query_id: str) -> _Prepared:
        t0 = time.monotonic()
        assert self._current_db is not None

        def passthrough(reason: str) -> _Prepared:
            log.info("query %s runs as one statement (%s)", query_id, reason)
            key = hashlib.sha256(sql.encode()).hexdigest()[:16]
            return _Prepared(
                query_id,
                sql,
                key,
                key,
                (passthrough_plan(sql, query_id),),
                frozenset(),
                True,
                time.monotonic() - t0,
            )

        try:
            qualified, tables = qualify_query(sql, self._current_db)
        except ValueError as e:
            return passthrough(str(e))
        infos: dict[str, TableInfo] = {}
        for t in tables:
            try:
                infos[t] = self._describe(t)
            except Exception as e:
                if is_connection_lost(e):
                    raise
                return passthrough(f"cannot describe {t}: {engine_message(e)}")
        schema: dict[str, dict[str, dict[str, str]]] = {}
        for t, info in infos.items():
            db, name = t.split(".", 1)
            schema.setdefault(db, {})[name] = {c.lower(): ty for c, ty in info.columns}
        stats = self.stats if self.stats is not None else {}
        if self.stats is None:
            stats = {t: self._gather_stats(info) for t, info in infos.items()}
        query_key = hashlib.sha256(qualified.encode()).hexdigest()[:16]
        namespace = namespace_of(query_key, {t: i.version for t, i in infos.items()})
        history = self._planning_history(query_key, namespace)
        try:
            plans = enumerate_plans(
                qualified,
                schema,
                stats,
                k=self.k,
                dialect="hive",
                query_id=query_id,
                history=history,
                config=self.cost_config,
            )
        except (ValueError, SqlglotError) as e:
            return passthrough(str(e))
        inline: set[StageSignature] = set()
        if not self.materialize_scans:
            seen: set[str] = set()
            for p in plans:
                for s in p.stages:
                    if s.stage_id not in seen:
                        seen.add(s.stage_id)
                        if is_base_scan(s):
                            inline.add(s.signature)
        return _Prepared(
            query_id,
            sql,
            query_key,
            namespace,
            tuple(plans),
            frozenset(inline),
            False,
            time.monotonic() - t0,
        )

    def _planning_history(self, query_key: str, namespace: str) -> History:
        """Measured stages of earlier runs, with every registered checkpoint of this query as a
        free stage (no work, its measured rows): the enumerator then ranks the plans that
        resume from checkpoints first, so they are among the ``k`` cached plans."""
        return checkpoint_history(
            self.registry.history(query_key), self.registry.lookup(self.checkpoint_db, namespace)
        )

    def _server_healthy(self, error: BaseException | None = None) -> bool:
        """True if the server answers ``SELECT 1`` (a failed stage during a server shutdown
        looks like an engine error; this tells the two apart). After an internal error the
        probe waits a second first, so a shutdown in progress has time to show."""
        text = str(getattr(error, "message", "") or error or "").upper()
        if "INTERNAL_ERROR" in text or "SHUT" in text:
            time.sleep(1.0)
        try:
            self._ctl_execute("SELECT 1")
            return True
        except Exception as e:
            log.info("server health check failed: %s", engine_message(e))
            return False

    def _sources(self, prep: _Prepared) -> tuple[dict[StageSignature, str], set[StageSignature]]:
        """What each stage signature can be read from now: inline scans and registered
        checkpoints. Returns (sources, signatures that are checkpoint tables)."""
        sources: dict[StageSignature, str] = {}
        if prep.passthrough:
            return sources, set()
        records = self.registry.lookup(self.checkpoint_db, prep.namespace)
        ckpt: set[StageSignature] = set()
        for p in prep.plans:
            for s in p.stages:
                if s.signature in sources:
                    continue
                if s.signature in prep.inline:
                    sources[s.signature] = f"({s.sql})"
                elif s.kind != "final" and s.signature.digest in records:
                    sources[s.signature] = records[s.signature.digest].qualified
                    ckpt.add(s.signature)
        return sources, ckpt

    # -- public API --------------------------------------------------------------------------

    def explain(self, sql: str, *, share: Share | None = None) -> list[PlanEstimate]:
        """The cached plans of ``sql`` with their estimated finish under ``share`` (default:
        the share source's current share), best first by estimate; what is checkpointed and
        the statements the executor would send."""
        with self._run_lock:
            qid = "explain-" + uuid.uuid4().hex[:8]
            prep = self._with_reconnect(lambda: self._prepare(sql, qid))
            sources, ckpt = self._sources(prep)
            sh = share if share is not None else self.share.current().share
            progress = Progress(None, frozenset(sources))
            d = decide(prep.plans, progress, sh, hysteresis=self.hysteresis, current_plan_id=None)
            chosen = self.policy(prep.plans, progress, sh, None).plan_id
            out = []
            for p in prep.plans:
                rem = rewrite(p, progress)
                names = dict(sources)
                for s in p.stages:
                    if s.signature not in names and s.kind != "final":
                        names[s.signature] = (
                            f"{self.checkpoint_db}.{checkpoint_name(prep.namespace, s.signature)}"
                        )
                statements = {}
                for s in rem.stages:
                    if s.kind == "checkpoint":
                        continue
                    body = resolve_sql(p, p.stage(s.stage_id), names)
                    if s.stage_id == p.root:
                        statements[s.stage_id] = body
                    else:
                        statements[s.stage_id] = (
                            f"CREATE TABLE {names[s.signature]} {self.storage} AS {body}"
                        )
                out.append(
                    PlanEstimate(
                        plan=p,
                        estimate_s=float(d.estimates[p.plan_id]),
                        chosen=p.plan_id == chosen,
                        checkpointed=tuple(s.stage_id for s in p.stages if s.signature in ckpt),
                        to_run=tuple(statements),
                        statements=MappingProxyType(statements),
                    )
                )
            out.sort(key=lambda e: (e.estimate_s, e.plan.total_cost, e.plan.plan_id))
            return out

    def run(
        self,
        sql: str,
        *,
        query_id: str | None = None,
        on_rows: Callable[[tuple[str, ...], list[tuple[Any, ...]]], None] | None = None,
    ) -> QueryResult:
        """Run ``sql`` (module docstring) and return its rows with what the run did.

        With ``on_rows``, the final stage's rows go to ``on_rows(columns, batch)`` batch by
        batch as they are fetched (from a worker thread, in order) instead of into the result,
        whose ``streamed`` counts them. A connection lost after a batch was handed over cannot
        be resumed without sending rows twice, so it ends the run with
        :class:`~hive_hooks.errors.ResultInterruptedError` (rerunning is cheap: every
        checkpoint is kept); a loss before the first batch is recovered as usual."""
        with self._run_lock:
            self._on_rows = on_rows
            qid = query_id or "q-" + uuid.uuid4().hex[:12]
            t0 = time.monotonic()
            prep = self._with_reconnect(lambda: self._prepare(sql, qid))
            self.registry.start_run(qid, prep.namespace, self.checkpoint_db, sql)
            try:
                self.share.begin(qid)
                try:
                    self._tags = tag_settings(self.share, self.hiveconf)
                    if self.share_enforcer is not None:
                        self._share_key = getattr(self.share, "job_id", None) or qid
                        self._tags.update(self.share_enforcer.session_settings(self._share_key))
                        self.enforce_share(self.share.current().share)
                    if self._tags:
                        self._with_reconnect(self._control)  # tagged before any stage runs
                    result = _Execution(self, prep, t0).run()
                finally:
                    self._tags = {}
                    self._on_rows = None
                    self._release_share()
                    self.share.end(qid)
            except BaseException as e:
                self.registry.finish_run(qid, "failed", str(e)[:2000])
                raise
            self.registry.finish_run(qid, "finished")
            return result

    # -- share enforcement -------------------------------------------------------------------

    def enforce_share(self, share: Share) -> None:
        """Give the running query's share to the engine (module docstring: share enforcement)."""
        if self.share_enforcer is None or self._share_key is None:
            return
        try:
            self.share_enforcer.apply_share(self._share_key, share)
        except Exception as e:
            log.warning("share enforcer: applying %s to %s failed: %s", share, self._share_key, e)

    def _release_share(self) -> None:
        key, self._share_key = self._share_key, None
        if self.share_enforcer is None or key is None:
            return
        try:
            self.share_enforcer.release_share(key)
        except Exception as e:
            log.warning("share enforcer: releasing %s failed: %s", key, e)

    # -- worker side -------------------------------------------------------------------------

    def _statement(self, cur: Any, task: _Task, sql: str) -> None:
        """Run one statement asynchronously and poll it to the end (cancellable)."""
        with task.lock:
            if task.cancel_requested:
                raise _Cancelled
        cur.execute(sql, async_=True)
        with task.lock:
            task.handle = cur._operationHandle
            cancel_now = task.cancel_requested
        if cancel_now:
            cur.cancel()
        try:
            while True:
                resp = cur.poll(get_progress_update=False)
                state = resp.operationState
                if state == _FINISHED:
                    return
                if state in _CANCELLED_STATES:
                    raise _Cancelled
                if state not in _RUNNING_STATES:
                    msg = clean_engine_text(resp.errorMessage or f"operation state {state}")
                    if task.cancel_requested:
                        raise _Cancelled
                    raise _StatementError(msg, sql)
                time.sleep(self.poll_interval)
        finally:
            with task.lock:
                task.handle = None

    def _reading(self, cur: Any, task: _Task, sql: str) -> None:
        """:meth:`_statement` for a statement that reads checkpoints. A checkpoint dropped and
        made again under the same name by another session (gc, recovery) leaves this session
        with a stale file listing (``FAILED_READ_FILE.FILE_NOT_EXIST``): refresh the inputs and
        retry once."""
        try:
            self._statement(cur, task, sql)
        except _StatementError as e:
            if not task.inputs or not any(
                m in e.message for m in ("FILE_NOT_EXIST", "REFRESH TABLE", "FileNotFound")
            ):
                raise
            for table in task.inputs:
                self._statement(cur, task, f"REFRESH TABLE {table}")
            self._statement(cur, task, sql)

    def _work(self, task: _Task, out: queue.Queue[tuple[Any, ...]]) -> None:
        conn: Any = None
        gen = -1
        try:
            conn, gen = self._pool.acquire()
            cur = conn.cursor(arraysize=self.fetch_size)
            if task.final:
                self._reading(cur, task, task.sql)
                columns = tuple(str(d[0]) for d in (cur.description or ()))
                rows: list[tuple[Any, ...]] = []
                sink, delivered = self._on_rows, 0
                if cur.description:
                    while True:
                        try:
                            batch = [tuple(r) for r in cur.fetchmany(self.fetch_size)]
                        except Exception as e:
                            if delivered and is_connection_lost(e):
                                raise ResultInterruptedError(
                                    f"the connection was lost after {delivered:,} rows of the "
                                    f"result were delivered ({engine_message(e)}); they cannot "
                                    "be resumed without repeating rows: run the query again "
                                    "(its checkpoints are kept, so only the final stage reruns)",
                                    stage_id=task.stage.stage_id,
                                ) from e
                            raise
                        if not batch:
                            break
                        if sink is None:
                            rows.extend(batch)
                        else:
                            sink(columns, batch)
                            delivered += len(batch)
                seconds = time.monotonic() - task.started
                out.put(("final", task, columns, rows, seconds, delivered))
            else:
                assert task.table is not None
                db = self.checkpoint_db
                for attempt in range(1, 7):
                    try:
                        self._reading(
                            cur,
                            task,
                            f"CREATE TABLE {db}.{task.in_use} {self.storage} AS {task.sql}",
                        )
                        break
                    except _StatementError as e:
                        # leftovers of a crash or a cancel: an unregistered table of this name,
                        # or files at its location with no table (module docstring)
                        text = e.message.upper()
                        if attempt == 6 or not (
                            "ALREADY_EXISTS" in text or "ALREADY EXISTS" in text
                        ):
                            raise
                        if "LOCATION_ALREADY_EXISTS" in text:
                            task.in_use = f"{task.table}_r{attempt}"
                        self._statement(cur, task, f"DROP TABLE IF EXISTS {db}.{task.in_use}")
                out.put(("ready", task, task.in_use, time.monotonic() - task.started))
            self._pool.release(conn, gen)
            conn = None
        except _Cancelled:
            ctas = conn is not None and not task.final and task.table is not None
            if ctas and not self._drop_cancelled(conn, task):  # its (partial) table
                _close_quietly(conn)
                conn = None
            if conn is not None:
                self._pool.release(conn, gen)
                conn = None
            out.put(("cancelled", task, time.monotonic() - task.started))
        except BaseException as e:
            if conn is not None:
                if is_connection_lost(e) or isinstance(e, ResultInterruptedError):
                    _close_quietly(conn)
                else:
                    self._pool.release(conn, gen)
                conn = None
            out.put(("failed", task, e))

    def _drop_cancelled(self, conn: Any, task: _Task) -> bool:
        """Drop a cancelled CTAS's table and keep it dropped for ``cancel_settle_s``: the
        engine marks the operation CANCELED at once, but a CTAS whose write job had already
        finished still creates its table afterwards (module docstring). False if the
        connection died."""
        db, name = self.checkpoint_db, task.in_use
        cur = conn.cursor()
        deadline = time.monotonic() + self.cancel_settle_s
        present = True  # until a listing says otherwise
        while True:
            try:
                if present:
                    cur.execute(f"DROP TABLE IF EXISTS {db}.{name}")
                if time.monotonic() >= deadline:
                    return True
                time.sleep(0.2)
                present = name.lower() in {t.lower() for t in show_tables(cur, db)}
            except Exception as e:
                if is_connection_lost(e):
                    return False
                log.warning("dropping cancelled checkpoint %s.%s: %s", db, name, engine_message(e))
                if time.monotonic() >= deadline:
                    return True
                present = True

    def _measure(self, made: list[tuple[_Task, str]], out: queue.Queue[tuple[Any, ...]]) -> None:
        """Sizes (the engine's table statistics) and row counts of the checkpoints a run made:
        metastore only (on Spark one ``SHOW TABLE EXTENDED`` for all of them, elsewhere one
        ``DESCRIBE`` each) and one ``COUNT(*)`` job for all tables the engine has no row count
        for. Runs beside the final stage; reports ``measured`` per table."""
        found: dict[str, tuple[int | None, int | None]] = {}
        conn: Any = None
        gen = -1
        try:
            conn, gen = self._pool.acquire()
            found = self._sizes(conn.cursor(), [table for _, table in made])
            self._pool.release(conn, gen)
        except Exception as e:  # the checkpoints stand; only their sizes stay unknown
            log.debug("measuring checkpoints failed: %s", engine_message(e))
            if conn is not None:
                _close_quietly(conn)
        for task, table in made:
            rows, nbytes = found.get(table, (None, None))
            out.put(("measured", task, table, rows, nbytes))

    def _sizes(self, cur: Any, tables: Sequence[str]) -> dict[str, tuple[int | None, int | None]]:
        """(rows, bytes) of checkpoint tables (:meth:`_measure`); raises what the engine
        raises."""
        db = self.checkpoint_db
        found: dict[str, tuple[int | None, int | None]] = {}
        shown: dict[str, tuple[int | None, int | None]] = {}
        if self.engine == "spark":
            cur.execute(f"SHOW TABLE EXTENDED IN {db} LIKE '{'|'.join(tables)}'")
            for row in cur.fetchall():
                shown[str(row[1]).lower()] = parse_statistics(str(row[-1]))
        for table in tables:
            if table.lower() in shown:
                found[table] = shown[table.lower()]
                continue
            cur.execute(f"DESCRIBE FORMATTED {db}.{table}")
            info = parse_describe(table, cur.fetchall())
            found[table] = (
                int(info.rows) if info.rows is not None else None,
                int(info.bytes) if info.bytes is not None else None,
            )
        uncounted = [t for t, (rows, _) in found.items() if rows is None]
        if uncounted:
            cur.execute(
                " UNION ALL ".join(
                    f"SELECT {i} AS i, COUNT(*) AS n FROM {db}.{t}" for i, t in enumerate(uncounted)
                )
            )
            for i, n in cur.fetchall():
                t = uncounted[int(i)]
                found[t] = (int(n), found[t][1])
        return found

    def _cancel_operation(self, task: _Task) -> None:
        """Ask the server to cancel ``task``'s running operation (from the orchestrator)."""
        with task.lock:
            task.cancel_requested = True
            handle = task.handle
        if handle is None:
            return  # not submitted yet: the worker checks the flag
        try:
            from TCLIService import ttypes

            resp = self._control().client.CancelOperation(
                ttypes.TCancelOperationReq(operationHandle=handle)
            )
            if resp.status.statusCode not in (0, 1):  # SUCCESS, SUCCESS_WITH_INFO
                log.debug("cancel of %s: %s", task.stage.stage_id, resp.status.errorMessage)
        except Exception as e:  # finished meanwhile, or the server is gone
            log.debug("cancel of %s failed: %s", task.stage.stage_id, engine_message(e))


# =========================================================================== one run


class _Execution:
    """The orchestrator of one run: the decision cycle on the caller's thread, the stages on
    worker threads (Kubernetes-style: decide serially, bind concurrently)."""

    def __init__(self, runner: QueryRunner, prep: _Prepared, t0: float) -> None:
        self.r = runner
        self.prep = prep
        self.t0 = t0
        self.qid = prep.query_id
        self.by_id = {p.plan_id: p for p in prep.plans}
        self.out: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.sources: dict[StageSignature, str] = {}
        self.ckpt: set[StageSignature] = set()  # signatures held in checkpoint tables
        self.made_by: dict[StageSignature, str] = {}  # made in this run: signature -> plan id
        self.running: dict[StageSignature, _Task] = {}
        self.cancelling: dict[StageSignature, _Task] = {}
        self.unmeasured: list[tuple[_Task, str]] = []  # checkpoints made, not yet measured
        self.measuring: set[_Task] = set()
        self.threads: list[threading.Thread] = []
        self.final_task: _Task | None = None
        self.final_result: tuple[tuple[str, ...], list[tuple[Any, ...]], float] | None = None
        self.streamed = 0  # rows the final stage handed to the runner's on_rows
        self.events: list[StageEvent] = []
        self.timings: list[StageTiming] = []
        self.switches: list[PlanSwitch] = []
        self.reused_pairs: set[tuple[str, str]] = set()
        self.reused: list[str] = []
        self.lost: BaseException | None = None
        self.error: tuple[_Task, BaseException] | None = None
        self.reconnects = 0
        self.share_changes = 0
        self.last_beat = time.monotonic()
        self.dirty = True  # something changed since the last scheduling pass

    # -- events ------------------------------------------------------------------------------

    def emit(
        self,
        plan_id: str,
        stage_id: str,
        kind: str,
        *,
        rows: int | None = None,
        seconds: float | None = None,
        table: str | None = None,
        detail: str = "",
    ) -> None:
        ev = StageEvent(self.qid, plan_id, stage_id, kind, rows, seconds, table, detail)
        self.events.append(ev)
        self.r.registry.log_stage(self.qid, plan_id, stage_id, kind, table, rows, seconds)
        self.last_beat = time.monotonic()
        if self.r.on_event is not None:
            self.r.on_event(ev)

    # -- decisions ---------------------------------------------------------------------------

    def progress(self, current: str | None) -> Progress:
        now = time.monotonic()
        running: dict[StageSignature, RunningStage] = {}
        if current is not None:
            running = {
                sig: RunningStage(0, now - t.started)
                for sig, t in self.running.items()
                if not t.final
            }
        return Progress(current, frozenset(self.sources), running)

    def note_reuse(self, plan: Plan) -> list[str]:
        """Emit ``reused`` for the checkpoints ``plan`` resumes from that it did not make."""
        rem = rewrite(plan, Progress(plan.plan_id, frozenset(self.sources)))
        out = []
        for s in rem.stages:
            if s.kind != "checkpoint" or s.signature not in self.ckpt:
                continue
            if self.made_by.get(s.signature) == plan.plan_id:
                continue
            key = (plan.plan_id, s.stage_id)
            if key in self.reused_pairs:
                continue
            self.reused_pairs.add(key)
            if s.stage_id not in self.reused:
                self.reused.append(s.stage_id)
            table = self.sources[s.signature]
            kind = plan.stage(s.stage_id).kind
            self.timings.append(
                StageTiming(plan.plan_id, s.stage_id, kind, "reused", 0.0, None, table)
            )
            self.emit(plan.plan_id, s.stage_id, "reused", table=table)
            out.append(s.stage_id)
        return out

    # -- launching ---------------------------------------------------------------------------

    def launch(self, plan: Plan, stage: Stage) -> None:
        sql = resolve_sql(plan, stage, self.sources)
        inputs = tuple(
            self.sources[sig]
            for sig in (plan.stage(i).signature for i in stage.inputs)
            if sig in self.ckpt
        )
        if stage.stage_id == plan.root:
            task = _Task(stage, plan.plan_id, sql, None, time.monotonic(), inputs=inputs)
            self.final_task = task
            self.launch_measure()
        else:
            table = checkpoint_name(self.prep.namespace, stage.signature)
            task = _Task(stage, plan.plan_id, sql, table, time.monotonic(), inputs=inputs)
            self.running[stage.signature] = task
        th = threading.Thread(
            target=self.r._work, args=(task, self.out), name=f"stage-{stage.stage_id}", daemon=True
        )
        task.thread = th
        self.threads.append(th)
        self.emit(plan.plan_id, stage.stage_id, "start", table=task.table)
        th.start()

    def launch_measure(self) -> None:
        """Measure the checkpoints made so far, beside the final stage (one worker)."""
        batch, self.unmeasured = self.unmeasured, []
        if not batch:
            return
        self.measuring.update(t for t, _ in batch)
        th = threading.Thread(
            target=self.r._measure, args=(batch, self.out), name="measure", daemon=True
        )
        self.threads.append(th)
        th.start()

    def schedule(self, plan: Plan, share: Share) -> None:
        if self.final_task is not None:
            return
        rem = rewrite(plan, Progress(plan.plan_id, frozenset(self.sources)))
        root = rem.stage(rem.root)
        if all(rem.stage(i).signature in self.sources for i in root.inputs):
            self.launch(plan, plan.stage(root.stage_id))
            return
        busy = set(self.running) | set(self.cancelling)
        used = sum(
            stage_vcores(t.stage, share)
            for t in [*self.running.values(), *self.cancelling.values()]
        )
        n = len(self.running) + len(self.cancelling)
        for s in launchable(rem, frozenset(self.sources), busy):
            need = stage_vcores(s, share)
            if n > 0 and (n >= self.r.max_concurrency or used + need > share.vcores + 1e-9):
                break
            self.launch(plan, plan.stage(s.stage_id))
            used += need
            n += 1

    def switch(self, old: Plan, new: Plan, share: Share) -> None:
        rem = rewrite(new, Progress(new.plan_id, frozenset(self.sources)))
        needed = needed_signatures(rem)
        cancelled = []
        for sig, task in list(self.running.items()):
            if sig not in needed:
                self.r._cancel_operation(task)
                del self.running[sig]
                self.cancelling[sig] = task
                cancelled.append(task.stage.stage_id)
        self.emit(new.plan_id, "", "switch", detail=f"from {old.plan_id}")
        self.note_reuse(new)
        resumed = tuple(s.stage_id for s in rem.stages if s.signature in self.ckpt)
        self.switches.append(
            PlanSwitch(
                time.monotonic() - self.t0,
                old.plan_id,
                new.plan_id,
                share,
                tuple(cancelled),
                resumed,
            )
        )

    # -- worker messages ---------------------------------------------------------------------

    def handle(self, msg: tuple[Any, ...]) -> None:
        self.dirty = True
        kind, task = msg[0], msg[1]
        sig = task.stage.signature
        reg = self.r.registry
        if kind == "ready":
            _, _, table, seconds = msg
            self.running.pop(sig, None)
            self.cancelling.pop(sig, None)
            now = reg.clock()
            reg.record_checkpoint(
                CheckpointRecord(
                    database=self.r.checkpoint_db,
                    table=table,
                    namespace=self.prep.namespace,
                    signature=sig.digest,
                    query_id=self.qid,
                    plan_id=task.plan_id,
                    stage_id=task.stage.stage_id,
                    seconds=seconds,
                    created_at=now,
                    last_used_at=now,
                )
            )
            reg.record_measurement(
                self.prep.query_key,
                sig.digest,
                seconds,
                task.stage.cost.tasks,
                task.stage.cost.rows_out,
            )
            qualified = f"{self.r.checkpoint_db}.{table}"
            self.sources[sig] = qualified
            self.ckpt.add(sig)
            self.made_by[sig] = task.plan_id
            self.unmeasured.append((task, table))
            self.timings.append(
                StageTiming(
                    task.plan_id,
                    task.stage.stage_id,
                    task.stage.kind,
                    "done",
                    seconds,
                    None,
                    qualified,
                )
            )
            self.emit(task.plan_id, task.stage.stage_id, "done", seconds=seconds, table=qualified)
        elif kind == "measured":
            _, _, table, rows, nbytes = msg
            self.measuring.discard(task)
            if rows is not None or nbytes is not None:
                reg.update_size(self.r.checkpoint_db, table, rows, nbytes)
            if rows is not None:
                t = next(
                    (
                        x
                        for x in self.timings
                        if x.stage_id == task.stage.stage_id and x.outcome == "done"
                    ),
                    None,
                )
                seconds = t.seconds if t is not None else 0.0
                reg.record_measurement(
                    self.prep.query_key, sig.digest, seconds, task.stage.cost.tasks, rows
                )
                self.timings = [
                    StageTiming(x.plan_id, x.stage_id, x.kind, x.outcome, x.seconds, rows, x.table)
                    if x is t
                    else x
                    for x in self.timings
                ]
        elif kind == "cancelled":
            seconds = msg[2]
            self.cancelling.pop(sig, None)
            self.running.pop(sig, None)
            if task is self.final_task:
                self.final_task = None
            self.timings.append(
                StageTiming(
                    task.plan_id, task.stage.stage_id, task.stage.kind, "cancelled", seconds
                )
            )
            self.emit(task.plan_id, task.stage.stage_id, "cancelled", seconds=seconds)
        elif kind == "failed":
            exc = msg[2]
            self.running.pop(sig, None)
            was_cancelling = self.cancelling.pop(sig, None) is not None
            if task is self.final_task:
                self.final_task = None
            if isinstance(exc, ResultInterruptedError):
                self.error = self.error or (task, exc)
            elif is_connection_lost(exc):
                self.lost = self.lost or exc
                self.timings.append(
                    StageTiming(
                        task.plan_id,
                        task.stage.stage_id,
                        task.stage.kind,
                        "lost",
                        time.monotonic() - task.started,
                    )
                )
                self.emit(task.plan_id, task.stage.stage_id, "lost")
            elif was_cancelling:
                self.emit(task.plan_id, task.stage.stage_id, "cancelled")
            elif self.error is None and self.lost is None:
                if self.r._server_healthy(exc):
                    self.error = (task, exc)
                else:  # the server is going down: the stage is lost, not wrong
                    self.lost = exc
                    self.emit(task.plan_id, task.stage.stage_id, "lost")
        elif kind == "final":
            _, _, columns, rows, seconds, streamed = msg
            self.final_result = (columns, rows, seconds)
            self.streamed = streamed
            n = streamed or len(rows)
            self.timings.append(
                StageTiming(task.plan_id, task.stage.stage_id, "final", "done", seconds, n)
            )
            self.emit(task.plan_id, task.stage.stage_id, "done", rows=n, seconds=seconds)

    def drain(self, timeout: float) -> None:
        try:
            msg = self.out.get(timeout=timeout)
        except queue.Empty:
            return
        self.handle(msg)
        while True:
            try:
                msg = self.out.get_nowait()
            except queue.Empty:
                return
            self.handle(msg)

    def wait_workers(self, timeout: float) -> None:
        """Let every worker thread end, handling what they report."""
        deadline = time.monotonic() + timeout
        while any(t.is_alive() for t in self.threads) and time.monotonic() < deadline:
            self.drain(0.05)
        self.drain(0.0)
        self.threads = [t for t in self.threads if t.is_alive()]

    def abort_all(self) -> None:
        for task in [*self.running.values(), *self.cancelling.values()]:
            self.r._cancel_operation(task)
        if self.final_task is not None:
            self.r._cancel_operation(self.final_task)

    # -- recovery ----------------------------------------------------------------------------

    def recover(self) -> None:
        """The connection died: collect the workers, reconnect, re-check the checkpoints."""
        assert self.lost is not None
        why = self.lost
        self.wait_workers(30.0)
        for sig, task in list(self.running.items()) + list(self.cancelling.items()):
            self.emit(task.plan_id, task.stage.stage_id, "lost")
            self.running.pop(sig, None)
            self.cancelling.pop(sig, None)
        self.final_task = None
        self.r._reconnect(why)
        self.reconnects += 1
        self.lost = None
        known = self.r.registry.lookup(self.r.checkpoint_db, self.prep.namespace)
        for sig in list(self.ckpt):
            if sig.digest not in known:  # the table vanished with the server: recompute
                self.ckpt.discard(sig)
                self.sources.pop(sig, None)
                self.made_by.pop(sig, None)
        self.unmeasured = [(t, n) for t, n in self.unmeasured if t.stage.signature in self.ckpt]

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> QueryResult:
        r = self.r
        self.sources, self.ckpt = r._sources(self.prep)
        snap = r.share.current()
        epoch = snap.epoch
        share = snap.share
        plans = list(self.prep.plans)
        current = r.policy(plans, self.progress(None), share, None)
        initial = current.plan_id
        self.note_reuse(current)
        try:
            while self.final_result is None:
                if self.error is not None:
                    self.fail()
                if self.lost is not None:
                    self.recover()
                    current = self.by_id[current.plan_id]
                    self.dirty = True
                snap = r.share.current()
                if snap.epoch != epoch:
                    epoch, share = snap.epoch, snap.share
                    self.share_changes += 1
                    self.dirty = True
                    r.enforce_share(share)
                    if self.final_task is None and len(plans) > 1:
                        new = r.policy(
                            plans, self.progress(current.plan_id), share, current.plan_id
                        )
                        if new.plan_id != current.plan_id:
                            self.switch(current, new, share)
                            current = new
                if self.dirty and self.lost is None and self.error is None:
                    self.dirty = False
                    try:
                        self.schedule(current, share)
                    except Exception as e:  # the control connection died while cancelling
                        if not is_connection_lost(e):
                            raise
                        self.lost = e
                        continue
                self.drain(0.05)
                if time.monotonic() - self.last_beat > 10.0:
                    r.registry.heartbeat(self.qid)
                    self.last_beat = time.monotonic()
            # the result is in; let cancelled statements wind down (their partial tables are
            # dropped) and the size measurements finish (they ran beside the final stage)
            deadline = time.monotonic() + 30.0
            while (self.measuring or self.cancelling) and time.monotonic() < deadline:
                self.drain(0.05)
                if self.lost is not None:
                    break
        except BaseException:
            self.abort_all()
            self.wait_workers(10.0)
            raise
        tables = [self.sources[s].split(".", 1)[1] for s in self.ckpt if s in self.sources]
        r.registry.touch(r.checkpoint_db, tables)
        assert self.final_result is not None
        columns, rows, _ = self.final_result
        return QueryResult(
            query_id=self.qid,
            columns=columns,
            rows=rows,
            plan_id=current.plan_id,
            initial_plan_id=initial,
            switches=tuple(self.switches),
            stages=tuple(self.timings),
            reused=tuple(self.reused),
            elapsed_s=time.monotonic() - self.t0,
            planning_s=self.prep.planning_s,
            share_changes=self.share_changes,
            reconnects=self.reconnects,
            passthrough=self.prep.passthrough,
            events=tuple(self.events),
            streamed=self.streamed,
        )

    def fail(self) -> None:
        assert self.error is not None
        task, exc = self.error
        self.abort_all()
        self.wait_workers(30.0)
        msg = exc.message if isinstance(exc, _StatementError) else engine_message(exc)
        sql = exc.sql if isinstance(exc, _StatementError) else task.sql
        if isinstance(exc, QoopHiveError):
            raise exc
        where = (
            "query" if self.prep.passthrough else f"stage {task.stage.stage_id} of {task.plan_id}"
        )
        raise QueryError(
            f"{where} failed: {msg}",
            engine_message=msg,
            sql=sql,
            stage_id=task.stage.stage_id,
            query_id=self.qid,
        ) from exc
