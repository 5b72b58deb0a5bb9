"""Durable arbiter state: the journal interface and its SQLite (WAL) backend.

Everything that must survive a crash goes through one :class:`Journal` (ARCHITECTURE.md,
principle 6): registered apps with their token *hashes*, live leases, each app's last bid table
(the arbiter recomputes ρ_current from it, spec B.7), the round counter and runtime knobs. A
round's outcome is committed in one transaction (:meth:`Journal.commit_round`), so after a
``kill -9`` at any instant a restart sees either the whole round or none of it, and the
invariant "no GPU in two live leases" (:func:`arbiter.rounds.check_invariants`) holds for what
it loads. :meth:`Journal.load` checks the invariant and refuses a journal that breaks it.

SQLite runs in WAL mode with ``synchronous=FULL``: a committed transaction survives a process
crash and a power cut. The file is opened by :class:`arbiter.sqlite_store.SQLiteStore` (the
schema version is in ``PRAGMA user_version`` and, for older builds, in the ``meta`` table). One
connection per journal object; the service shell serialises writes.
A ZooKeeper backend for highly-available deployments can implement the same interface.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from arbiter.auction import Bid
from arbiter.rounds import ArbiterState, InvariantViolation, Lease, LeaseSource, check_invariants
from arbiter.sqlite_store import SQLiteStore

__all__ = [
    "AppRecord",
    "Journal",
    "JournalCorrupt",
    "Recovered",
    "SQLiteJournal",
    "hash_token",
    "lease_id",
    "new_token",
    "recovered",
    "token_matches",
]

SCHEMA_VERSION = 2

# Upgrades of a journal written by an earlier release: version k -> the SQL taking it to k + 1
# (applied by SQLiteStore in one transaction with the new version stamp).
MIGRATIONS = {
    # 2: drained machines are journaled (they were kept in memory only, and forgotten on restart)
    1: "CREATE TABLE IF NOT EXISTS drains (machine TEXT PRIMARY KEY);",
}


class JournalCorrupt(RuntimeError):
    """The journal cannot be used as it is: it holds a state that breaks an invariant, is not a
    SQLite database (or is damaged), or has another schema version; the message says which."""


def new_token() -> str:
    """A fresh 256-bit app or admin token (URL-safe text)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """SHA-256 of a token: tokens are random 256-bit secrets, so a fast hash is enough."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), token_hash)


@dataclass(frozen=True)
class AppRecord:
    """A registered application master (what RegisterApp persisted)."""

    app_id: str
    token_hash: str
    app_name: str = ""
    user: str = ""
    queue: str = "default"
    max_gpu_demand: int = 1
    jobs: tuple[Mapping[str, object], ...] = ()
    registered_at: float = 0.0
    yarn_app_id: str = ""  # the YARN application the app is bound to ("" = not bound)
    admitted_by: str = ""  # the credential it registered with (arbiter.admission); "" = local


@dataclass(frozen=True)
class Recovered:
    """Everything :meth:`Journal.load` recovers."""

    apps: Mapping[str, AppRecord]
    state: ArbiterState
    knobs: Mapping[str, str] = field(default_factory=dict)
    drained: frozenset[str] = frozenset()  # machines drained by an admin or the RM


def recovered(
    where: str,
    apps: Mapping[str, AppRecord],
    state: ArbiterState,
    knobs: Mapping[str, str],
    drained: frozenset[str],
) -> Recovered:
    """What a journal's :meth:`Journal.load` returns, checked: the state's invariants hold and
    every lease belongs to a known app, else :class:`JournalCorrupt` naming ``where``."""
    try:
        check_invariants(state)
    except InvariantViolation as exc:
        raise JournalCorrupt(f"journal {where}: {exc}") from exc
    orphans = sorted({lease.app_id for lease in state.leases} - set(apps))
    if orphans:
        raise JournalCorrupt(f"journal {where}: leases of unknown apps {orphans}")
    return Recovered(MappingProxyType(dict(apps)), state, MappingProxyType(dict(knobs)), drained)


class Journal(Protocol):
    def load(self, gpus: frozenset[str], *, trim_unknown: bool = False) -> Recovered: ...

    def put_app(self, app: AppRecord) -> None: ...

    def remove_app(self, app_id: str) -> None: ...

    def commit_round(
        self,
        state: ArbiterState,
        bids: Iterable[Bid] = (),
        *,
        drained: Iterable[str] | None = None,
    ) -> None: ...

    def put_knob(self, key: str, value: str) -> None: ...

    def close(self) -> None: ...


def lease_id(lease: Lease) -> str:
    """Stable id of a lease: a hash of its app, GPUs, interval and round."""
    gpus = ",".join(sorted(lease.gpus))
    return hashlib.sha1(
        f"{lease.app_id}|{gpus}|{lease.start!r}|{lease.end!r}|{lease.round}".encode()
    ).hexdigest()[:16]


def _rho_json(rho: float) -> object:
    return "inf" if math.isinf(rho) else rho


def _bid_to_json(bid: Bid) -> str:
    return json.dumps([[sorted(k), _rho_json(v)] for k, v in bid.rows.items()])


def _bid_from_json(app_id: str, text: str) -> Bid:
    rows = {
        frozenset(gpus): (math.inf if rho == "inf" else float(rho))
        for gpus, rho in json.loads(text)
    }
    return Bid(app_id, rows)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS apps (
    app_id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, app_name TEXT,
    user TEXT, queue TEXT, max_gpu_demand INTEGER NOT NULL, jobs TEXT NOT NULL,
    registered_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    lease_id TEXT PRIMARY KEY, app_id TEXT NOT NULL, gpus TEXT NOT NULL,
    start REAL NOT NULL, end REAL NOT NULL, round INTEGER NOT NULL,
    source TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bids (
    app_id TEXT PRIMARY KEY, round INTEGER NOT NULL, rows TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS knobs (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS drains (machine TEXT PRIMARY KEY);
"""


class SQLiteJournal:
    """The embedded journal: one SQLite file in WAL mode (see module docstring), opened by
    :class:`~arbiter.sqlite_store.SQLiteStore`. A file that is not a database, or one of another
    schema version, raises :class:`JournalCorrupt`; a full disk raises
    :class:`~arbiter.sqlite_store.StoreError`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._store = SQLiteStore(
            self.path,
            schema=_SCHEMA,
            version=SCHEMA_VERSION,
            synchronous="FULL",
            foreign_keys=True,
            label="journal",
            corrupt=JournalCorrupt,
            migrations=MIGRATIONS,
        )
        self._db = self._store.db
        try:
            self._migrate()
        except BaseException:
            self._store.close()
            raise

    def _migrate(self) -> None:
        # Journals written before apps were bound to their YARN application gain the column
        # (empty: not bound); nothing else changes, so the schema version stays.
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(apps)")}
        if "yarn_app_id" not in columns:
            with self._tx() as db:
                db.execute("ALTER TABLE apps ADD COLUMN yarn_app_id TEXT NOT NULL DEFAULT ''")
        if "admitted_by" not in columns:  # schema 2: the credential that admitted the app
            with self._tx() as db:
                db.execute("ALTER TABLE apps ADD COLUMN admitted_by TEXT NOT NULL DEFAULT ''")
        # The meta table keeps the schema version too: builds before SQLiteStore read it there.
        with self._tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO meta VALUES ('schema', ?), ('round', '0')", (str(SCHEMA_VERSION),)
                )
            elif 1 <= int(row[0]) < SCHEMA_VERSION:  # an earlier release's: upgraded on open
                for step in range(int(row[0]), SCHEMA_VERSION):  # idempotent DDL, as the store's
                    db.execute(MIGRATIONS[step])
                db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise JournalCorrupt(
                    f"journal {self.path} has schema {row[0]}, this build reads {SCHEMA_VERSION}"
                )

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction: committed at the end of the block, rolled back if it raises."""
        return self._store.transaction()

    # -- writes ------------------------------------------------------------------------

    def put_app(self, app: AppRecord) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO apps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    app.app_id,
                    app.token_hash,
                    app.app_name,
                    app.user,
                    app.queue,
                    app.max_gpu_demand,
                    json.dumps([dict(j) for j in app.jobs]),
                    app.registered_at,
                    app.yarn_app_id,
                    app.admitted_by,
                ),
            )

    def remove_app(self, app_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM leases WHERE app_id=?", (app_id,))
            db.execute("DELETE FROM bids WHERE app_id=?", (app_id,))
            db.execute("DELETE FROM apps WHERE app_id=?", (app_id,))

    def commit_round(
        self,
        state: ArbiterState,
        bids: Iterable[Bid] = (),
        *,
        drained: Iterable[str] | None = None,
    ) -> None:
        """Make ``state``'s leases and round counter (and the round's bids, and the drained
        machines when given) durable, atomically.

        Checks the invariant first: a state with a GPU in two live leases is never written.
        """
        check_invariants(state)
        with self._tx() as db:
            if drained is not None:
                db.execute("DELETE FROM drains")
                db.executemany("INSERT INTO drains VALUES (?)", [(m,) for m in sorted(drained)])
            db.execute("DELETE FROM leases")
            db.executemany(
                "INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        lease_id(lease),
                        lease.app_id,
                        json.dumps(sorted(lease.gpus)),
                        lease.start,
                        lease.end,
                        lease.round,
                        str(lease.source),
                    )
                    for lease in state.leases
                ],
            )
            db.executemany(
                "INSERT OR REPLACE INTO bids VALUES (?, ?, ?)",
                [(b.app_id, state.round, _bid_to_json(b)) for b in bids],
            )
            db.execute("UPDATE meta SET value=? WHERE key='round'", (str(state.round),))

    def put_knob(self, key: str, value: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO knobs VALUES (?, ?)", (key, value))

    def probe(self) -> None:
        """Commit a write that needs new pages (and undo it): raises
        :class:`~arbiter.sqlite_store.StoreError` while the disk is full or read-only."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('probe', hex(randomblob(4096)))")
        with self._tx() as db:
            db.execute("DELETE FROM meta WHERE key='probe'")

    # -- reads -------------------------------------------------------------------------

    def load(self, gpus: frozenset[str], *, trim_unknown: bool = False) -> Recovered:
        """Recover apps, leases, bids, round and knobs; ``gpus`` is the cluster's GPU set.

        A lease on a GPU the cluster does not have means the journal belongs to another
        cluster (:class:`JournalCorrupt`), unless ``trim_unknown``: with the YARN bridge the
        cluster is what the ResourceManager reports now, and a node lost while the arbiter was
        down takes its GPUs out of their leases (as a live node loss does)."""
        db = self._db
        apps = {
            r[0]: AppRecord(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                tuple(json.loads(r[6])),
                r[7],
                r[8] or "",
                r[9] or "",
            )
            for r in db.execute("SELECT * FROM apps ORDER BY app_id")
        }
        leases = tuple(
            Lease(r[1], frozenset(json.loads(r[2])), r[3], r[4], r[5], LeaseSource(r[6]))
            for r in db.execute("SELECT * FROM leases ORDER BY round, lease_id")
        )
        bids = {
            r[0]: _bid_from_json(r[0], r[2]) for r in db.execute("SELECT * FROM bids ORDER BY 1")
        }
        rnd = int(db.execute("SELECT value FROM meta WHERE key='round'").fetchone()[0])
        knobs = dict(db.execute("SELECT key, value FROM knobs ORDER BY key").fetchall())
        drained = frozenset(r[0] for r in db.execute("SELECT machine FROM drains"))
        if trim_unknown:
            trimmed = tuple(
                replace(x, gpus=x.gpus & gpus) if not x.gpus <= gpus else x for x in leases
            )
            leases = tuple(x for x in trimmed if x.gpus)
        state = ArbiterState(
            gpus=frozenset(gpus), leases=leases, round=rnd, last_bids=MappingProxyType(bids)
        )
        return recovered(str(self.path), apps, state, knobs, drained)

    def close(self) -> None:
        self._store.close()
