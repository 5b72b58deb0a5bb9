"""Preparing a query: describing its tables, measuring them and enumerating its plans.

Before stage-by-stage execution with checkpoints (QOOP §2.3) can start, the query's alternative
plans are enumerated with :mod:`qoop_planner` over the described tables, their statistics (measured
once per table version and cached in the registry) and the stage history of earlier runs, with
every registered checkpoint of the query passed as a stage of no work, so plans that resume from
checkpoints rank first (package docstring: checkpoint-aware enumeration). Plan switching (QOOP
§2.4) then chooses among these cached plans. SQL the planner cannot decompose becomes one
passthrough stage.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot.errors import SqlglotError

from hive_hooks.errors import DRIVER_ERRORS, engine_message, is_connection_lost
from hive_hooks.executor.connections import _Connections
from hive_hooks.executor.staging import (
    TableInfo,
    checkpoint_history,
    is_base_scan,
    namespace_of,
    parse_describe,
    passthrough_plan,
    qualify_query,
)
from qoop_planner.cost import CostConfig, History, StageMeasurement, TableStats
from qoop_planner.model import Plan, StageSignature
from qoop_planner.physical import PhysicalProfile
from qoop_planner.sqlplan import enumerate_plan_space, enumerate_plans

log = logging.getLogger("qoop_hive.executor")


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


class _Metadata(_Connections):
    """The planning side of :class:`~hive_hooks.executor.QueryRunner` (a mixin: the runner sets
    the attributes below in its ``__init__``)."""

    stats: dict[str, TableStats] | None
    k: int
    physical: tuple[PhysicalProfile, ...] | None
    materialize_scans: bool
    metadata_ttl_s: float
    cost_config: CostConfig | None
    history: Mapping[str, StageMeasurement]
    _tables: dict[str, tuple[float, TableInfo]]

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
        # the engine refused approx_count_distinct, or answered in an unexpected shape
        except (*DRIVER_ERRORS, ValueError, TypeError) as e:
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
            except (*DRIVER_ERRORS, ValueError) as e:  # unknown table, or one with no columns
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
            if self.physical is not None:
                plans = enumerate_plan_space(
                    qualified,
                    schema,
                    stats,
                    dialect="hive",
                    query_id=query_id,
                    history=history,
                    config=self.cost_config,
                    profiles=self.physical,
                    max_plans=self.k,
                )
            else:
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
        measured = {**self.registry.history(query_key), **self.history}
        return checkpoint_history(measured, self.registry.lookup(self.checkpoint_db, namespace))

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
