"""The durable checkpoint registry: which engine table holds which stage, for how long (QOOP §2.3).

QOOP keeps the output of every finished stage of every plan run so far, so a switch can resume
from (and backtrack to) them (spec ``qoop-themis.md`` A.3, A.4.2; T:498-505, T:612). On Hive the
engine's own persistence is a table: each finished stage is a ``CREATE TABLE ... AS SELECT`` in
the checkpoint database (``hive_hooks.executor``). This module remembers those tables across
client and server restarts, in SQLite (WAL, like the arbiter's journal; ARCHITECTURE.md
principle 6; the file is opened by :class:`arbiter.sqlite_store.SQLiteStore` with
``synchronous=NORMAL``: a commit survives a process crash, a power cut may lose the last ones).
Default file: ``~/.qoop-hive/registry.db`` (:func:`default_registry_path`: the
``qoop.hive.registry.path`` key, or the ``QOOP_HIVE_REGISTRY`` environment variable; or the
``path`` argument).

What it stores:

* **checkpoints**: table (database + name) -> the stage it holds: the query's *namespace* (a
  digest of the qualified query text and the versions of the base tables it reads, so a
  checkpoint is only ever reused by the same query over the same data), the stage signature
  digest, the query, plan and stage that produced it, rows and bytes (measured after the CTAS),
  the CTAS duration, created and last-used times;
* **measurements**: measured stage durations and output rows per (query key, signature digest),
  returned as the planner's :class:`~qoop_planner.cost.History` (spec A.4.1: "durations come
  from prior runs of each QEP");
* **table statistics** gathered from the engine, per (table, version);
* **runs** (query id, state, heartbeat) and a **stage log** of every executor event, so tests
  and operators can see what ran, what was reused and what was cancelled.

Decisions:

* **The registry is the source of truth.** A table in the checkpoint database without a record is
  never adopted: a CTAS killed mid-way (client or server crash, cancel) leaves a *partial* table
  in the metastore (measured: a cancelled Spark CTAS keeps its table), and nothing on the engine
  tells it apart from a complete one. Such orphans are reported by :meth:`reconcile` and dropped
  by :meth:`gc`. Conversely a record whose table is gone (dropped by hand, a new metastore) is
  removed on reconcile.
* **Retention** (:class:`RetentionPolicy`): ``max_age_s`` counts from the last *use* (a
  checkpoint reused recently stays), then ``max_total_bytes`` evicts least-recently-used first.
  Checkpoints of a query with a live run (heartbeat within ``active_grace_s``) are never
  selected, and orphans are dropped only when no run is live (a live CTAS is an "orphan" until it
  finishes). Selection is a pure function (:func:`select_for_gc`); :meth:`gc` applies it.
* **Only our tables.** gc drops tables whose names start with
  :data:`qoop_planner.replan.CHECKPOINT_PREFIX`; anything else in the checkpoint database is left
  alone.
* One SQLite connection per registry object, serialised by the store's lock (the executor calls
  it from its orchestrator thread and from stage workers); several processes may share the file
  (WAL, busy timeout). Writes of several statements are one transaction. A file of another schema
  version, or one that is not a database, raises :class:`arbiter.sqlite_store.StoreError` (a
  ``RuntimeError``), as does a full disk.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arbiter.sqlite_store import SQLiteStore
from hive_hooks.errors import DRIVER_ERRORS
from qoop_planner.cost import History, StageMeasurement, TableStats
from qoop_planner.replan import CHECKPOINT_PREFIX

__all__ = [
    "DEFAULT_ACTIVE_GRACE_S",
    "CheckpointRecord",
    "CheckpointRegistry",
    "GcReport",
    "ReconcileReport",
    "RetentionPolicy",
    "RunRecord",
    "StageLogEntry",
    "default_registry_path",
    "reconcile_plan",
    "select_for_gc",
]

SCHEMA_VERSION = 1
log = logging.getLogger("qoop_hive.registry")
DEFAULT_ACTIVE_GRACE_S = 300.0  # a run whose heartbeat is older than this is considered dead

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    database TEXT NOT NULL,
    tbl TEXT NOT NULL,
    namespace TEXT NOT NULL,
    signature TEXT NOT NULL,
    query_id TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    stage_id TEXT NOT NULL,
    rows INTEGER,
    bytes INTEGER,
    seconds REAL NOT NULL,
    created_at REAL NOT NULL,
    last_used_at REAL NOT NULL,
    PRIMARY KEY (database, tbl)
);
CREATE UNIQUE INDEX IF NOT EXISTS checkpoints_by_stage
    ON checkpoints (database, namespace, signature);
CREATE TABLE IF NOT EXISTS measurements (
    query_key TEXT NOT NULL,
    signature TEXT NOT NULL,
    task_s REAL NOT NULL,
    tasks INTEGER NOT NULL,
    rows_out REAL NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (query_key, signature)
);
CREATE TABLE IF NOT EXISTS table_stats (
    tbl TEXT NOT NULL,
    version TEXT NOT NULL,
    rows REAL NOT NULL,
    bytes REAL,
    ndv TEXT NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (tbl, version)
);
CREATE TABLE IF NOT EXISTS runs (
    query_id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    database TEXT NOT NULL,
    sql TEXT NOT NULL,
    state TEXT NOT NULL,
    started_at REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    finished_at REAL,
    error TEXT
);
CREATE TABLE IF NOT EXISTS stage_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    query_id TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    stage_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    tbl TEXT,
    rows INTEGER,
    seconds REAL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS stage_log_by_query ON stage_log (query_id, id);
"""


def default_registry_path() -> Path:
    """The ``qoop.hive.registry.path`` key (:mod:`hive_hooks.settings`): ``$QOOP_HIVE_REGISTRY``
    if set, else the configuration's value, else ``~/.qoop-hive/registry.db``."""
    from hive_hooks.settings import registry_path

    return registry_path()


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint table and the stage it holds."""

    database: str
    table: str
    namespace: str
    signature: str  # StageSignature.digest
    query_id: str
    plan_id: str
    stage_id: str
    seconds: float  # CTAS duration
    created_at: float
    last_used_at: float
    rows: int | None = None
    bytes: int | None = None

    @property
    def qualified(self) -> str:
        return f"{self.database}.{self.table}"


@dataclass(frozen=True)
class RetentionPolicy:
    """How long checkpoints live (module docstring). ``None`` disables a limit."""

    max_age_s: float | None = 7 * 86400.0
    max_total_bytes: int | None = None
    active_grace_s: float = DEFAULT_ACTIVE_GRACE_S

    def __post_init__(self) -> None:
        if self.max_age_s is not None and not self.max_age_s >= 0:
            raise ValueError(f"max_age_s must be >= 0 or None, got {self.max_age_s}")
        if self.max_total_bytes is not None and self.max_total_bytes < 0:
            raise ValueError(f"max_total_bytes must be >= 0 or None, got {self.max_total_bytes}")
        if not self.active_grace_s >= 0:
            raise ValueError(f"active_grace_s must be >= 0, got {self.active_grace_s}")


@dataclass(frozen=True)
class ReconcileReport:
    """Records removed because their table is gone; tables of ours without a record."""

    removed: tuple[CheckpointRecord, ...] = ()
    orphans: tuple[str, ...] = ()  # table names (in the checkpoint database)


@dataclass(frozen=True)
class GcReport:
    database: str
    dropped: tuple[CheckpointRecord, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)  # table -> "age" | "size"
    orphans_dropped: tuple[str, ...] = ()
    orphans_kept: tuple[str, ...] = ()  # not dropped: a run is live, or drop_orphans=False
    missing_removed: tuple[CheckpointRecord, ...] = ()  # records whose table was already gone
    failed: Mapping[str, str] = field(default_factory=dict)  # table -> engine message
    dry_run: bool = False

    @property
    def freed_bytes(self) -> int:
        return sum(r.bytes or 0 for r in self.dropped)


@dataclass(frozen=True)
class RunRecord:
    query_id: str
    namespace: str
    database: str
    sql: str
    state: str  # running | finished | failed
    started_at: float
    heartbeat_at: float
    finished_at: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class StageLogEntry:
    query_id: str
    plan_id: str
    stage_id: str
    kind: str
    table: str | None
    rows: int | None
    seconds: float | None
    at: float


# ---------------------------------------------------------------------------------- pure core


def reconcile_plan(
    records: Iterable[CheckpointRecord], existing: Iterable[str], prefix: str = CHECKPOINT_PREFIX
) -> ReconcileReport:
    """Compare the records of one checkpoint database with the tables it really has.

    >>> r = CheckpointRecord("ck", "qoop_ckpt_a", "ns", "s", "q", "q/p0", "join_s", 1.0, 0.0, 0.0)
    >>> rep = reconcile_plan([r], ["qoop_ckpt_b", "other"])
    >>> [x.table for x in rep.removed], rep.orphans
    (['qoop_ckpt_a'], ('qoop_ckpt_b',))
    """
    present = {t.lower() for t in existing}
    recs = list(records)
    known = {r.table.lower() for r in recs}
    removed = tuple(r for r in recs if r.table.lower() not in present)
    orphans = tuple(sorted(t for t in present if t.startswith(prefix) and t not in known))
    return ReconcileReport(removed, orphans)


def select_for_gc(
    records: Sequence[CheckpointRecord],
    policy: RetentionPolicy,
    now: float,
    protected_namespaces: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Tables to drop under ``policy`` at time ``now``: table -> reason ("age" or "size").

    Age first (``now - last_used_at > max_age_s``), then, if the survivors still exceed
    ``max_total_bytes``, least-recently-used first until they fit (unknown sizes count 0).
    Records of ``protected_namespaces`` (live runs) are never selected but do count toward the
    total.

    >>> mk = lambda t, used, b, ns="n": CheckpointRecord(
    ...     "ck", t, ns, t, "q", "q/p0", t, 1.0, 0.0, used, rows=1, bytes=b)
    >>> recs = [mk("a", 0.0, 10), mk("b", 50.0, 10), mk("c", 90.0, 10), mk("d", 10.0, 10, "live")]
    >>> select_for_gc(recs, RetentionPolicy(max_age_s=60, max_total_bytes=20), 100.0,
    ...               frozenset({"live"}))
    {'a': 'age', 'b': 'size'}
    """
    out: dict[str, str] = {}
    keep: list[CheckpointRecord] = []
    for r in records:
        if r.namespace in protected_namespaces:
            keep.append(r)
        elif policy.max_age_s is not None and now - r.last_used_at > policy.max_age_s:
            out[r.table] = "age"
        else:
            keep.append(r)
    if policy.max_total_bytes is not None:
        total = sum(r.bytes or 0 for r in keep)
        for r in sorted(keep, key=lambda x: (x.last_used_at, x.created_at, x.table)):
            if total <= policy.max_total_bytes:
                break
            if r.namespace in protected_namespaces:
                continue
            out[r.table] = "size"
            total -= r.bytes or 0
    return out


# ---------------------------------------------------------------------------------- the shell


def _record(row: sqlite3.Row) -> CheckpointRecord:
    return CheckpointRecord(
        database=row["database"],
        table=row["tbl"],
        namespace=row["namespace"],
        signature=row["signature"],
        query_id=row["query_id"],
        plan_id=row["plan_id"],
        stage_id=row["stage_id"],
        seconds=row["seconds"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        rows=row["rows"],
        bytes=row["bytes"],
    )


class CheckpointRegistry:
    """The SQLite-backed registry (module docstring). ``path=":memory:"`` for a throwaway one;
    ``~`` in ``path`` is expanded."""

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        if path is None:
            path = default_registry_path()
        self.path = str(path)
        if self.path != ":memory:":
            self.path = str(Path(self.path).expanduser())
        self.clock = clock
        self._store = SQLiteStore(
            self.path,
            schema=_SCHEMA,
            version=SCHEMA_VERSION,
            synchronous="NORMAL",
            busy_timeout_s=30.0,
            label="registry",
            hint="; move the file away to start a fresh registry",
        )
        self._store.db.row_factory = sqlite3.Row

    # -- plumbing --------------------------------------------------------------------------

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._store.execute(sql, args)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> CheckpointRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CheckpointRegistry({self.path!r})"

    # -- checkpoints -----------------------------------------------------------------------

    def record_checkpoint(self, rec: CheckpointRecord) -> None:
        """Insert or replace the record of ``rec.database.rec.table`` (and of its stage)."""
        with self._store.transaction() as db:
            db.execute(
                "DELETE FROM checkpoints WHERE database=? AND namespace=? AND signature=?",
                (rec.database, rec.namespace, rec.signature),
            )
            db.execute(
                "INSERT OR REPLACE INTO checkpoints (database, tbl, namespace, signature, "
                "query_id, plan_id, stage_id, rows, bytes, seconds, created_at, last_used_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    rec.database,
                    rec.table,
                    rec.namespace,
                    rec.signature,
                    rec.query_id,
                    rec.plan_id,
                    rec.stage_id,
                    rec.rows,
                    rec.bytes,
                    rec.seconds,
                    rec.created_at,
                    rec.last_used_at,
                ),
            )

    def update_size(self, database: str, table: str, rows: int | None, nbytes: int | None) -> None:
        self._exec(
            "UPDATE checkpoints SET rows=COALESCE(?, rows), bytes=COALESCE(?, bytes) "
            "WHERE database=? AND tbl=?",
            (rows, nbytes, database, table),
        )

    def touch(self, database: str, tables: Iterable[str], now: float | None = None) -> None:
        """Mark checkpoints as used now (retention counts from the last use)."""
        t = self.clock() if now is None else now
        with self._store.transaction() as db:
            db.executemany(
                "UPDATE checkpoints SET last_used_at=? WHERE database=? AND tbl=?",
                [(t, database, x) for x in tables],
            )

    def lookup(self, database: str, namespace: str) -> dict[str, CheckpointRecord]:
        """The checkpoints of one query namespace: signature digest -> record."""
        rows = self._exec(
            "SELECT * FROM checkpoints WHERE database=? AND namespace=?", (database, namespace)
        )
        return {r["signature"]: _record(r) for r in rows}

    def checkpoints(
        self, database: str | None = None, namespace: str | None = None
    ) -> list[CheckpointRecord]:
        clauses, args = [], []
        if database is not None:
            clauses.append("database=?")
            args.append(database)
        if namespace is not None:
            clauses.append("namespace=?")
            args.append(namespace)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._exec(f"SELECT * FROM checkpoints{where} ORDER BY created_at, tbl", args)
        return [_record(r) for r in rows]

    def remove(self, database: str, tables: Iterable[str]) -> None:
        with self._store.transaction() as db:
            db.executemany(
                "DELETE FROM checkpoints WHERE database=? AND tbl=?",
                [(database, t) for t in tables],
            )

    def reconcile(self, database: str, existing: Iterable[str]) -> ReconcileReport:
        """Drop the records whose table is not in ``existing`` (the checkpoint database's
        tables, e.g. from ``SHOW TABLES``); report our tables that have no record."""
        report = reconcile_plan(self.checkpoints(database), existing)
        self.remove(database, [r.table for r in report.removed])
        return report

    # -- measurements and statistics -------------------------------------------------------

    def record_measurement(
        self, query_key: str, signature: str, task_s: float, tasks: int, rows_out: float
    ) -> None:
        self._exec(
            "INSERT OR REPLACE INTO measurements VALUES (?,?,?,?,?,?)",
            (query_key, signature, float(task_s), int(tasks), float(rows_out), self.clock()),
        )

    def history(self, query_key: str) -> History:
        """The measured stages of one query, as the planner's History."""
        rows = self._exec(
            "SELECT signature, task_s, tasks, rows_out FROM measurements WHERE query_key=?",
            (query_key,),
        )
        return History(
            {r["signature"]: StageMeasurement(r["task_s"], r["tasks"], r["rows_out"]) for r in rows}
        )

    def table_stats(self, table: str, version: str) -> TableStats | None:
        rows = self._exec(
            "SELECT rows, bytes, ndv FROM table_stats WHERE tbl=? AND version=?", (table, version)
        )
        if not rows:
            return None
        r = rows[0]
        return TableStats(rows=r["rows"], bytes=r["bytes"], ndv=json.loads(r["ndv"]))

    def put_table_stats(self, table: str, version: str, stats: TableStats) -> None:
        with self._store.transaction() as db:
            db.execute("DELETE FROM table_stats WHERE tbl=?", (table,))  # older versions
            db.execute(
                "INSERT INTO table_stats VALUES (?,?,?,?,?,?)",
                (
                    table,
                    version,
                    float(stats.rows),
                    stats.bytes,
                    json.dumps({k: float(v) for k, v in stats.ndv.items()}, sort_keys=True),
                    self.clock(),
                ),
            )

    # -- runs and the stage log ------------------------------------------------------------

    def start_run(self, query_id: str, namespace: str, database: str, sql: str) -> None:
        now = self.clock()
        self._exec(
            "INSERT OR REPLACE INTO runs (query_id, namespace, database, sql, state, started_at, "
            "heartbeat_at, finished_at, error) VALUES (?,?,?,?,'running',?,?,NULL,NULL)",
            (query_id, namespace, database, sql, now, now),
        )

    def heartbeat(self, query_id: str) -> None:
        self._exec("UPDATE runs SET heartbeat_at=? WHERE query_id=?", (self.clock(), query_id))

    def finish_run(self, query_id: str, state: str, error: str | None = None) -> None:
        now = self.clock()
        self._exec(
            "UPDATE runs SET state=?, finished_at=?, heartbeat_at=?, error=? WHERE query_id=?",
            (state, now, now, error, query_id),
        )

    def runs(self) -> list[RunRecord]:
        rows = self._exec("SELECT * FROM runs ORDER BY started_at")
        return [RunRecord(**dict(r)) for r in rows]

    def live_namespaces(self, database: str, grace_s: float, now: float | None = None) -> set[str]:
        t = self.clock() if now is None else now
        rows = self._exec(
            "SELECT namespace FROM runs WHERE state='running' AND database=? AND heartbeat_at>=?",
            (database, t - grace_s),
        )
        return {r["namespace"] for r in rows}

    def log_stage(
        self,
        query_id: str,
        plan_id: str,
        stage_id: str,
        kind: str,
        table: str | None = None,
        rows: int | None = None,
        seconds: float | None = None,
    ) -> None:
        now = self.clock()
        with self._store.transaction() as db:
            db.execute(
                "INSERT INTO stage_log (query_id, plan_id, stage_id, kind, tbl, rows, seconds, at) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (query_id, plan_id, stage_id, kind, table, rows, seconds, now),
            )
            db.execute("UPDATE runs SET heartbeat_at=? WHERE query_id=?", (now, query_id))

    def stage_log(self, query_id: str | None = None) -> list[StageLogEntry]:
        if query_id is None:
            rows = self._exec("SELECT * FROM stage_log ORDER BY id")
        else:
            rows = self._exec("SELECT * FROM stage_log WHERE query_id=? ORDER BY id", (query_id,))
        return [
            StageLogEntry(
                r["query_id"],
                r["plan_id"],
                r["stage_id"],
                r["kind"],
                r["tbl"],
                r["rows"],
                r["seconds"],
                r["at"],
            )
            for r in rows
        ]

    # -- garbage collection ----------------------------------------------------------------

    def gc(
        self,
        connect: Callable[[], Any],
        policy: RetentionPolicy | None = None,
        *,
        database: str = "qoop_ckpt",
        now: float | None = None,
        dry_run: bool = False,
        drop_orphans: bool = True,
    ) -> GcReport:
        """Apply ``policy`` to the checkpoints of ``database`` on the engine ``connect()`` reaches.

        Reconciles first (records of missing tables go), then drops the selected checkpoint
        tables (``DROP TABLE IF EXISTS``) and their records, and the orphans (our tables with no
        record) when no run is live. ``dry_run`` only reports.
        """
        from hive_hooks.errors import connect_error, engine_message

        policy = policy or RetentionPolicy()
        t = self.clock() if now is None else now
        try:
            conn = connect()
        except Exception as e:
            # broad: ``connect`` is the caller's factory (pyhive with any transport and auth
            # layer); whatever it raises means "no session", re-raised as the
            # EngineUnavailableError or QueryError that says why
            raise connect_error(e) from e
        try:
            cur = conn.cursor()
            existing = show_tables(cur, database)
            records = self.checkpoints(database)
            rec_report = reconcile_plan(records, existing)
            if not dry_run:
                self.remove(database, [r.table for r in rec_report.removed])
            gone = {r.table for r in rec_report.removed}
            alive = [r for r in records if r.table not in gone]
            live = self.live_namespaces(database, policy.active_grace_s, t)
            chosen = select_for_gc(alive, policy, t, frozenset(live))
            dropped: list[CheckpointRecord] = []
            failed: dict[str, str] = {}
            for r in alive:
                if r.table not in chosen:
                    continue
                if not dry_run:
                    try:
                        cur.execute(f"DROP TABLE IF EXISTS {r.qualified}")
                    except DRIVER_ERRORS as e:  # keep going; report the table
                        failed[r.table] = engine_message(e)
                        continue
                    self.remove(database, [r.table])
                dropped.append(r)
            orphans_dropped: list[str] = []
            orphans_kept: list[str] = []
            any_live = bool(self.live_namespaces(database, policy.active_grace_s, t))
            for o in rec_report.orphans:
                if not drop_orphans or any_live:
                    orphans_kept.append(o)
                    continue
                if not dry_run:
                    try:
                        cur.execute(f"DROP TABLE IF EXISTS {database}.{o}")
                    except DRIVER_ERRORS as e:  # keep going; report the table
                        failed[o] = engine_message(e)
                        continue
                orphans_dropped.append(o)
        finally:
            try:
                conn.close()
            except Exception:
                # broad: best-effort cleanup of a connection that may be dead; a failing close
                # must not replace the error being raised (or the report), so it is only logged
                log.debug("closing the gc connection to %s failed", database, exc_info=True)
        return GcReport(
            database=database,
            dropped=tuple(dropped),
            reasons={r.table: chosen[r.table] for r in dropped},
            orphans_dropped=tuple(orphans_dropped),
            orphans_kept=tuple(orphans_kept),
            missing_removed=rec_report.removed,
            failed=failed,
            dry_run=dry_run,
        )


def show_tables(cursor: Any, database: str) -> list[str]:
    """Table names of ``database`` (Spark returns (namespace, tableName, isTemporary) rows,
    Hive one column); ``[]`` if the database does not exist."""
    from hive_hooks.errors import engine_message, is_connection_lost

    try:
        cursor.execute(f"SHOW TABLES IN {database}")
    except DRIVER_ERRORS as e:
        if is_connection_lost(e):
            raise
        msg = engine_message(e).lower()
        if "not found" in msg or "does not exist" in msg or "schema_not_found" in msg:
            return []
        raise
    out = []
    for row in cursor.fetchall():
        name = row[1] if len(row) >= 3 else row[0]
        out.append(str(name).lower())
    return out
