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
   stage history of earlier runs of the same query (:meth:`CheckpointRegistry.history`); with
   ``physical=`` profiles, :func:`~qoop_planner.sqlplan.enumerate_plan_space` gives the diverse
   plan space instead, and every stage's physical form is pinned before it runs
   (:func:`~hive_hooks.executor.staging.pin_settings`, ``pin_hint``: join hint, partitions).
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

Modules (each imports only those above it; everything public is re-exported here):

* :mod:`~hive_hooks.executor.results`: what a run reports (events, timings, switches, result).
* :mod:`~hive_hooks.executor.staging`: the pure core (qualifying, checkpoint names, parsing
  descriptions, stage statements, what may start under a share, the replanning policy).
* :mod:`~hive_hooks.executor.connections`: the connection pool, the control connection, session
  settings and YARN tags, reconnecting.
* :mod:`~hive_hooks.executor.metadata`: describing and measuring tables, enumerating the plans.
* :mod:`~hive_hooks.executor.worker`: one stage on a worker thread (CTAS, final fetch, cancel,
  measuring checkpoints).
* :mod:`~hive_hooks.executor.execution`: the orchestrator of one run (scheduling, switching,
  recovery).
* :mod:`~hive_hooks.executor.runner`: :class:`QueryRunner`, the public entry point.

Public API::

    runner = QueryRunner(connect, registry=CheckpointRegistry(), share=ScriptedShare(...))
    result = runner.run(sql)        # QueryResult: columns, rows, switches, stages, reused, elapsed
    runner.explain(sql)             # [PlanEstimate]: cached plans, estimates, what is checkpointed
"""

import logging

from hive_hooks.executor.connections import ENGINE_SETTINGS
from hive_hooks.executor.results import (
    EVENT_KINDS,
    PlanEstimate,
    PlanSwitch,
    QueryResult,
    StageEvent,
    StageTiming,
)
from hive_hooks.executor.runner import QueryRunner
from hive_hooks.executor.staging import (
    STORAGE,
    ReplanPolicy,
    TableInfo,
    checkpoint_history,
    checkpoint_name,
    greedy_policy,
    is_base_scan,
    launchable,
    namespace_of,
    needed_signatures,
    parse_describe,
    parse_statistics,
    passthrough_plan,
    pin_hint,
    pin_settings,
    qualify_query,
    resolve_sql,
    stage_vcores,
)

# the logger every module of the package writes to
log = logging.getLogger("qoop_hive.executor")

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
