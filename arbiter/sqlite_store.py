"""SQLite files for durable state: one way to open them, one transaction, clear errors.

The arbiter's journal (:mod:`arbiter.journal`) and the replanner's checkpoint registry
(``hive_hooks.registry``) each keep their state in one SQLite file. :class:`SQLiteStore` opens
such a file the way both need:

* the parent directory is created (the path is taken as given: no ``~`` expansion);
  ``":memory:"`` (or ``""``) opens a private database that lives as long as the store;
* WAL journal mode where the file system supports it (readers never block the writer, several
  processes may share the file); where it does not, and for in-memory databases, SQLite keeps
  its own mode and :attr:`SQLiteStore.journal_mode` says which (a file not in WAL is logged);
* the ``synchronous`` level the caller chooses: ``FULL`` (a committed transaction survives a
  power cut) or ``NORMAL`` (in WAL mode it survives a process crash; a power cut may lose the
  last commits, never consistency);
* ``check_same_thread=False`` with one re-entrant :attr:`SQLiteStore.lock` that serialises use of
  the connection across threads, and a busy timeout for writers in other processes;
* the schema's DDL (``CREATE ... IF NOT EXISTS``) applied on every open, with the schema version
  in ``PRAGMA user_version`` in the same transaction: 0 (a new or unversioned file) is stamped;
  an older version is upgraded by the caller's ``migrations`` (version ``k`` -> SQL taking a file
  from ``k`` to ``k + 1``), every step and the new stamp in that one transaction, so a crash
  leaves the file at the old version or the new one; any other version (newer, or older with
  no migration path) is refused *before* anything is written to the file;
* errors that say what is wrong with which file: a file that is not a database (or is damaged)
  or has another schema version raises the caller's ``corrupt`` error type (default
  :class:`StoreError`); a full disk, or a file that cannot be opened or written, raises
  :class:`StoreError`. Other :mod:`sqlite3` errors (a constraint, a lock held past the busy
  timeout, a bad statement) propagate unchanged.

The connection runs in autocommit mode: a single statement is its own transaction, and
:meth:`SQLiteStore.transaction` groups several into one (``BEGIN IMMEDIATE``: the write lock is
taken up front, so two writers wait for each other instead of failing to upgrade a read lock),
committed on success and rolled back on any exception.

>>> store = SQLiteStore(
...     ":memory:", schema="CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT);", version=1
... )
>>> with store.transaction() as db:
...     _ = db.execute("INSERT INTO kv VALUES ('a', '1')")
...     _ = db.execute("INSERT INTO kv VALUES ('b', '2')")
>>> store.execute("SELECT k, v FROM kv ORDER BY k")
[('a', '1'), ('b', '2')]
>>> store.execute("PRAGMA user_version"), store.journal_mode
([(1,)], 'memory')
>>> store.close()
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

__all__ = ["SQLiteStore", "StoreError", "Synchronous"]

log = logging.getLogger(__name__)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
_SYNCHRONOUS: frozenset[str] = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
_IN_MEMORY = (":memory:", "")

# Primary result codes (the low byte of an extended code) sorted by what they mean for the caller.
_DAMAGED = frozenset({sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT})
_UNWRITABLE = frozenset(
    {sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM}
)


class StoreError(RuntimeError):
    """A SQLite store cannot be used: its file is not a database or is damaged, has a schema
    version this code does not read, cannot be opened or written, or the disk is full."""


class SQLiteStore:
    """One SQLite file opened for durable state (module docstring).

    ``schema`` is idempotent DDL applied on every open; ``version`` (>= 1, or ``None`` for no
    check) is the schema version kept in ``PRAGMA user_version``. ``label`` names the store in
    messages (``"journal"``, ``"registry"``) and ``hint`` is appended to the schema-version
    message (what to do about it). ``corrupt`` builds the error for a file whose contents this
    code cannot use; the store closes its connection before raising it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        schema: str = "",
        version: int | None = None,
        synchronous: Synchronous = "FULL",
        busy_timeout_s: float = 5.0,
        foreign_keys: bool = False,
        label: str = "database",
        hint: str = "",
        corrupt: Callable[[str], Exception] = StoreError,
        migrations: Mapping[int, str] | None = None,
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(
                f"synchronous must be one of {sorted(_SYNCHRONOUS)}, got {synchronous!r}"
            )
        if version is not None and version < 1:
            raise ValueError(f"version must be >= 1 (0 marks an unversioned file), got {version}")
        if not busy_timeout_s >= 0:
            raise ValueError(f"busy_timeout_s must be >= 0, got {busy_timeout_s}")
        self.path = os.fspath(path)
        self.label = label
        self.hint = hint
        self.version = version
        self.migrations = dict(migrations or {})
        self.migrated_from: int | None = None  # the version an upgrade on open started from
        self._corrupt = corrupt
        self.lock = threading.RLock()
        self.in_memory = self.path in _IN_MEMORY
        if not self.in_memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with self._translating():
            self.db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
            )
        try:
            self.journal_mode = self._open(schema, synchronous, foreign_keys)
        except BaseException:
            self.db.close()
            raise

    def _open(self, schema: str, synchronous: Synchronous, foreign_keys: bool) -> str:
        """Check the version, set the connection up, apply the schema; the journal mode."""
        db = self.db
        with self._translating():
            # The first statement reads the file's header: a file that is not a database fails
            # here, and one of another version is refused before anything is written to it.
            self._check_version(db.execute("PRAGMA user_version").fetchone()[0])
            pragma = "PRAGMA journal_mode" if self.in_memory else "PRAGMA journal_mode=WAL"
            mode = str(db.execute(pragma).fetchone()[0]).lower()
            if not self.in_memory and mode != "wal":
                log.warning(
                    "%s %s: no WAL on this file system; journal mode %s",
                    self.label,
                    self.path,
                    mode,
                )
            db.execute(f"PRAGMA synchronous={synchronous}")
            db.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        statements = _statements(schema)
        if statements or self.version is not None:
            with self.transaction():
                # read again under the write lock: another process may have stamped the file
                (found,) = db.execute("PRAGMA user_version").fetchone()
                self._check_version(found)
                if self.version is not None and 0 < found < self.version:
                    for step in range(found, self.version):
                        for sql in _statements(self.migrations[step]):
                            db.execute(sql)
                    self.migrated_from = found
                    log.info("%s %s: schema upgraded from version %d to %d", self.label,
                             self.path, found, self.version)  # fmt: skip
                for sql in statements:
                    db.execute(sql)
                if self.version is not None and found != self.version:
                    db.execute(f"PRAGMA user_version={int(self.version)}")
        return mode

    def _upgradable(self, found: int) -> bool:
        assert self.version is not None
        return 0 < found < self.version and all(
            k in self.migrations for k in range(found, self.version)
        )

    def _check_version(self, found: int) -> None:
        if (
            self.version is not None
            and found not in (0, self.version)
            and not self._upgradable(found)
        ):
            raise self._corrupt(
                f"{self.label} {self.path} has schema version {found}, this code reads "
                f"{self.version}{self.hint}"
            )

    def _rollback(self) -> None:
        if self.db.in_transaction:
            # the statement's own error is the one to report; a failing rollback adds nothing
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")

    def _translated(self, e: sqlite3.Error) -> Exception | None:
        """The error to raise instead of ``e``, or ``None`` to raise ``e`` itself."""
        code = getattr(e, "sqlite_errorcode", None)
        if code is None:
            return None
        code &= 0xFF  # the primary result code of an extended one
        where = f"{self.label} {self.path}"
        if code in _DAMAGED:
            return self._corrupt(f"{where} is not a SQLite database or is damaged: {e}")
        if code == sqlite3.SQLITE_FULL:
            return StoreError(f"{where}: the disk is full: {e}")
        if code in _UNWRITABLE:
            return StoreError(f"{where} cannot be opened or written: {e}")
        return None

    @contextlib.contextmanager
    def _translating(self) -> Iterator[None]:
        """Raise :meth:`_translated`'s error for the sqlite3 errors it knows, chained."""
        try:
            yield
        except sqlite3.Error as e:
            err = self._translated(e)
            if err is None:
                raise
            raise err from e

    # -- use -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``) under :attr:`lock`: committed when the
        block ends, rolled back if it raises."""
        with self.lock, self._translating():
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def execute(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Run one statement under :attr:`lock` (its own transaction) and return its rows."""
        with self.lock, self._translating():
            return self.db.execute(sql, args).fetchall()

    def close(self) -> None:
        with self.lock:
            self.db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, journal_mode={self.journal_mode!r})"


def _statements(script: str) -> list[str]:
    """The SQL statements of ``script``, each complete (a ``;`` inside a string literal or a
    trigger body does not split); an incomplete tail is kept, for SQLite to report.

    >>> _statements("CREATE TABLE a (x TEXT DEFAULT ';'); CREATE INDEX i ON a (x); ")
    ["CREATE TABLE a (x TEXT DEFAULT ';');", 'CREATE INDEX i ON a (x);']
    """
    out: list[str] = []
    start = 0
    for i, ch in enumerate(script):
        if ch == ";" and sqlite3.complete_statement(script[start : i + 1]):
            out.append(script[start : i + 1].strip())
            start = i + 1
    if script[start:].strip():
        out.append(script[start:].strip())
    return out
