"""Connections to HiveServer2: the pool of stage connections, the control connection, session
settings and reconnecting after the server was lost.

Stage-by-stage execution with checkpoints (QOOP §2.3) runs each ready stage on its own
connection, so stages run side by side, and keeps a separate control connection for metadata and
for cancelling the stages a plan switch (QOOP §2.4) no longer needs. Every connection gets
:data:`ENGINE_SETTINGS` (the engine keeps the plan's join order), the user's ``hiveconf`` and,
while a run is registered, the run's YARN tags and share-enforcer settings (package docstring:
join order, YARN tag, share enforcement). A lost server is waited for and the checkpoint
database re-checked (package docstring: lost connection).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from hive_hooks.errors import (
    DRIVER_ERRORS,
    EngineUnavailableError,
    QoopHiveError,
    SettingError,
    connect_error,
    engine_message,
    is_connection_lost,
)
from hive_hooks.executor.staging import STORAGE
from hive_hooks.registry import CheckpointRegistry, show_tables

__all__ = ["CONTROL_ERRORS", "ENGINE_SETTINGS"]

log = logging.getLogger("qoop_hive.executor")

# Session settings that keep the engine from reordering the plan's joins (package docstring).
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

_EMPTY: Mapping[str, str] = MappingProxyType({})
_SETTING_KEY = re.compile(r"^[A-Za-z0-9_.\-:/]+$")


# What the runner's statements on the control connection raise: the driver's errors
# (:data:`hive_hooks.errors.DRIVER_ERRORS`) and, for a failed connect, an EngineUnavailableError
# or a QueryError (:func:`hive_hooks.errors.connect_error`).
CONTROL_ERRORS: tuple[type[Exception], ...] = (*DRIVER_ERRORS, QoopHiveError)


def _try_set(cur: Any, key: str, value: str) -> Exception | None:
    """``SET key=value`` on ``cur``: None if the engine took it, its refusal if not; a lost
    connection is raised (the caller reconnects)."""
    try:
        cur.execute(f"SET {key}={value}")
    except DRIVER_ERRORS as e:
        if is_connection_lost(e):
            raise
        return e
    return None


def _close_quietly(conn: Any) -> None:
    """Close a connection that is being discarded. Broad on purpose: it runs in cleanup paths
    (worker threads reporting another error, a pool reset), where a failing close must neither
    replace the error being handled nor keep a worker from reporting; it is logged."""
    try:
        conn.close()
    except Exception as e:
        log.debug("closing a discarded connection failed: %s", engine_message(e))


class _Pool:
    """Idle connections, each set up once (session settings) and refreshed on every
    acquire (per-run settings); thread-safe."""

    def __init__(
        self,
        connect: Callable[[], Any],
        setup: Callable[[Any], None],
        max_idle: int,
        refresh: Callable[[Any], None] | None = None,
    ) -> None:
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


class _Connections:
    """The connection side of :class:`~hive_hooks.executor.QueryRunner` (a mixin: the runner
    sets the attributes below in its ``__init__``)."""

    connect: Callable[[], Any]
    registry: CheckpointRegistry
    checkpoint_db: str
    hiveconf: dict[str, str]
    engine_settings: dict[str, str]
    engine: str
    storage: str
    orphans: tuple[str, ...]
    reconnect_timeout_s: float
    _pool: _Pool
    _control_conn: Any
    _tags: dict[str, str]
    _conn_tags: weakref.WeakKeyDictionary[Any, dict[str, str]]
    _tag_lock: threading.Lock
    _tag_defaults: dict[str, str]
    _current_db: str | None
    _ready: bool

    def _setup_session(self, conn: Any) -> None:
        cur = conn.cursor()
        for k, v in self.engine_settings.items():
            if (e := _try_set(cur, k, v)) is not None:
                log.debug("engine setting %s=%s not accepted: %s", k, v, engine_message(e))
        for k, v in self.hiveconf.items():
            if (e := _try_set(cur, k, v)) is not None:
                raise SettingError(f"setting {k}={v} rejected: {engine_message(e)}") from e
        with contextlib.suppress(*DRIVER_ERRORS):
            cur.close()

    def _sync_tags(self, conn: Any) -> None:
        """Give ``conn`` the run's YARN tag settings if it has other ones (package docstring:
        YARN tag)."""
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
            with contextlib.suppress(*DRIVER_ERRORS):
                cur.close()
        with self._tag_lock:
            self._conn_tags[conn] = dict(want)

    def _control(self) -> Any:
        if self._control_conn is None:
            try:
                conn = self.connect()
            except Exception as e:
                # broad: ``connect`` is the caller's factory (pyhive with any transport and auth
                # layer); whatever it raises means "no session", re-raised as the
                # EngineUnavailableError or QueryError that says why (and that reconnects retry)
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
            with contextlib.suppress(*DRIVER_ERRORS):
                cur.close()

    def _drop_connections(self) -> None:
        self._pool.reset()
        if self._control_conn is not None:
            _close_quietly(self._control_conn)
            self._control_conn = None
        self._current_db = None
        self._ready = False

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
        except DRIVER_ERRORS as e:
            if is_connection_lost(e):
                raise
            return "hive"
        row = rows[0] if rows else ()
        undefined = not row or len(row) < 2 or "undefined" in " ".join(map(str, row)).lower()
        return "hive" if undefined else "spark"

    def _reconnect(self, why: BaseException) -> None:
        """Wait for the server to come back (package docstring: lost connection)."""
        self._drop_connections()
        deadline = time.monotonic() + self.reconnect_timeout_s
        last: BaseException = why
        while True:
            try:
                self._ensure_ready()
                return
            except CONTROL_ERRORS as e:
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
            except CONTROL_ERRORS as e:
                if not is_connection_lost(e):
                    raise
                self._reconnect(e)

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
        except CONTROL_ERRORS as e:
            log.info("server health check failed: %s", engine_message(e))
            return False
