"""The worker side of a run: one stage statement on one connection, polled to its end.

Stage-by-stage execution with checkpoints (QOOP §2.3): a non-final stage runs as a CTAS into its
checkpoint table (leftovers of crashes and cancels are dropped or renamed around; package
docstring: the registry is the source of truth), the final stage's rows are fetched or streamed,
and the checkpoints made are measured (size, rows) for the planner's history. Plan switching
(QOOP §2.4): a stage the new plan does not need is cancelled through the control connection
(``CancelOperation``), and a cancelled CTAS's table is dropped and kept dropped while the engine
settles (package docstring: cancellation and the metastore). Every worker reports to the
orchestrator (:mod:`hive_hooks.executor.execution`) through its queue, never by raising.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hive_hooks.errors import (
    DRIVER_ERRORS,
    ResultInterruptedError,
    clean_engine_text,
    engine_message,
    is_connection_lost,
)
from hive_hooks.executor.connections import (
    CONTROL_ERRORS,
    _close_quietly,
    _Connections,
)
from hive_hooks.executor.staging import parse_describe, parse_statistics
from hive_hooks.registry import show_tables
from qoop_planner.model import Stage

log = logging.getLogger("qoop_hive.executor")

# TOperationState values (TCLIService): what a poll can return
_RUNNING_STATES = (0, 1, 7)  # INITIALIZED, RUNNING, PENDING
_FINISHED = 2
_CANCELLED_STATES = (3, 4)  # CANCELED, CLOSED


class _Cancelled(Exception):
    """The stage's operation was cancelled."""


class _StatementError(Exception):
    """The engine reported an error state for a statement."""

    def __init__(self, message: str, sql: str) -> None:
        super().__init__(message)
        self.message = message
        self.sql = sql


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
    settings: tuple[str, ...] = ()  # statements pinning the stage's physical form, run first
    cancel_requested: bool = False
    handle: Any = None
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.in_use = self.in_use or (self.table or "")

    @property
    def final(self) -> bool:
        return self.table is None


class _Worker(_Connections):
    """The worker side of :class:`~hive_hooks.executor.QueryRunner` (a mixin: the runner sets
    the attributes below in its ``__init__``). The methods run on worker threads, except
    :meth:`_cancel_operation` (the orchestrator's)."""

    fetch_size: int
    poll_interval: float
    cancel_settle_s: float
    _on_rows: Callable[[tuple[str, ...], list[tuple[Any, ...]]], None] | None

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
            for statement in task.settings:
                self._statement(cur, task, statement)
            if task.final:
                self._reading(cur, task, task.sql)
                columns = tuple(str(d[0]) for d in (cur.description or ()))
                rows: list[tuple[Any, ...]] = []
                sink, delivered = self._on_rows, 0
                if cur.description:
                    while True:
                        try:
                            batch = [tuple(r) for r in cur.fetchmany(self.fetch_size)]
                        except DRIVER_ERRORS as e:
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
                        # or files at its location with no table (package docstring)
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
            # broad: a worker thread reports whatever ends its stage, never raises (nothing
            # would see it); the orchestrator re-raises it as the run's error, with this as cause
            log.debug("stage %s ended with %s: %s", task.stage.stage_id, type(e).__name__, e)
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
        finished still creates its table afterwards (package docstring). False if the
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
            except DRIVER_ERRORS as e:
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
        except Exception as e:
            # broad: this worker thread must report every table below whatever went wrong (the
            # run waits for the reports); the checkpoints stand, only their sizes stay unknown.
            # The engine's errors are expected; anything else is logged with its traceback.
            expected = isinstance(e, (*CONTROL_ERRORS, ValueError, IndexError))
            log.log(
                logging.DEBUG if expected else logging.WARNING,
                "measuring checkpoints failed: %s",
                engine_message(e),
                exc_info=not expected,
            )
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
        except CONTROL_ERRORS as e:  # finished meanwhile, or the server is gone
            log.debug("cancel of %s failed: %s", task.stage.stage_id, engine_message(e))
