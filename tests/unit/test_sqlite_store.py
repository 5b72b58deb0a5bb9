"""``arbiter.sqlite_store``: opening a SQLite file for durable state (directory, WAL, durability
level, busy timeout, idempotent schema, ``user_version``), its transaction, and the errors for a
file that is not a database, has another schema version, cannot be opened or fills the disk;
plus the journal's and the registry's use of those errors. Real SQLite files in a temp dir."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from arbiter.journal import SCHEMA_VERSION, JournalCorrupt, SQLiteJournal
from arbiter.sqlite_store import SQLiteStore, StoreError, _statements
from hive_hooks.registry import CheckpointRegistry

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS kv_by_v ON kv (v);
"""


class Refused(Exception):
    """A caller's own error type for a file it cannot use."""


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def test_a_new_file_is_set_up(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "s.db"  # the directories do not exist yet
    with SQLiteStore(path, schema=SCHEMA, version=3, synchronous="NORMAL", busy_timeout_s=2.5) as s:
        assert s.journal_mode == "wal" and not s.in_memory
        assert s.execute("PRAGMA synchronous") == [(1,)]  # NORMAL
        assert s.execute("PRAGMA busy_timeout") == [(2500,)]
        assert s.execute("PRAGMA foreign_keys") == [(0,)]
        names = {r[0] for r in s.execute("SELECT name FROM sqlite_master")}
        assert {"kv", "kv_by_v"} <= names
    assert user_version(path) == 3
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_keeps_data_and_full_durability(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path, schema=SCHEMA, version=1) as s, s.transaction() as db:
        db.execute("INSERT INTO kv VALUES ('a', '1')")
    with SQLiteStore(path, schema=SCHEMA, version=1, foreign_keys=True) as s:  # DDL again
        assert s.execute("SELECT * FROM kv") == [("a", "1")]
        assert s.execute("PRAGMA synchronous") == [(2,)]  # FULL, the default
        assert s.execute("PRAGMA foreign_keys") == [(1,)]


def test_in_memory_store() -> None:
    with SQLiteStore(":memory:", schema=SCHEMA, version=2) as s:
        assert s.in_memory and s.journal_mode == "memory"
        assert s.execute("PRAGMA user_version") == [(2,)]


def test_an_unversioned_file_is_stamped_and_no_version_means_no_check(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path, schema=SCHEMA):  # version=None: the file stays unversioned
        pass
    assert user_version(path) == 0
    with SQLiteStore(path, schema=SCHEMA, version=4):
        pass
    assert user_version(path) == 4
    with SQLiteStore(path):  # no schema, no version: opens anything SQLite reads
        pass


def test_another_schema_version_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=9")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"store .*s\.db has schema version 9, this code reads 2$"):
        SQLiteStore(path, schema=SCHEMA, version=2, label="store")
    with pytest.raises(Refused, match="reads 2; move it away"):
        SQLiteStore(path, schema=SCHEMA, version=2, hint="; move it away", corrupt=Refused)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [] and user_version(path) == 9
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"this is not a database\n" * 100)
    with pytest.raises(StoreError, match=r"s\.db is not a SQLite database or is damaged") as e:
        SQLiteStore(path, schema=SCHEMA, version=1)
    assert isinstance(e.value.__cause__, sqlite3.DatabaseError)
    with pytest.raises(Refused, match="not a SQLite database"):
        SQLiteStore(path, corrupt=Refused)
    assert path.read_bytes() == b"this is not a database\n" * 100


def test_a_path_that_cannot_be_opened(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="cannot be opened or written"):
        SQLiteStore(tmp_path / "dir.db", schema=SCHEMA)


def test_a_full_disk_rolls_the_transaction_back(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db", schema=SCHEMA, label="store") as s:
        s.execute("INSERT INTO kv VALUES ('kept', '1')")
        (pages,) = s.execute("PRAGMA page_count")[0]
        s.execute(f"PRAGMA max_page_count={pages + 2}")  # the file may grow by two pages only
        with pytest.raises(StoreError, match="the disk is full"), s.transaction() as db:
            db.execute("INSERT INTO kv VALUES ('small', '2')")
            db.execute("INSERT INTO kv VALUES ('big', ?)", ("x" * 100_000,))
        assert s.execute("SELECT k FROM kv") == [("kept",)]
        assert not s.db.in_transaction
        with pytest.raises(StoreError, match="the disk is full"):
            s.execute("INSERT INTO kv VALUES ('big', ?)", ("x" * 100_000,))


def test_transaction_commits_or_rolls_back(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db", schema=SCHEMA) as s:
        with s.transaction() as db:
            db.execute("INSERT INTO kv VALUES ('a', '1')")
            db.execute("INSERT INTO kv VALUES ('b', '2')")
        with pytest.raises(ZeroDivisionError), s.transaction() as db:
            db.execute("INSERT INTO kv VALUES ('c', '3')")
            _ = 1 / 0
        # other sqlite3 errors are not translated, and roll back too
        with pytest.raises(sqlite3.IntegrityError), s.transaction() as db:
            db.execute("INSERT INTO kv VALUES ('d', '4')")
            db.execute("INSERT INTO kv VALUES ('a', '5')")
        assert s.execute("SELECT k FROM kv ORDER BY k") == [("a",), ("b",)]
        assert not s.db.in_transaction


def test_the_connection_is_shared_between_threads(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db", schema=SCHEMA) as s:

        def write(i: int) -> None:
            for j in range(20):
                with s.transaction() as db:
                    db.execute("INSERT INTO kv VALUES (?, ?)", (f"{i}-{j}", str(j)))

        threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert s.execute("SELECT COUNT(*) FROM kv") == [(80,)]


def test_two_stores_on_one_file_wait_for_each_other(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path, schema=SCHEMA) as a, SQLiteStore(path, busy_timeout_s=5.0) as b:
        started = threading.Event()

        def hold() -> None:
            with a.transaction() as db:
                db.execute("INSERT INTO kv VALUES ('a', '1')")
                started.set()
                threading.Event().wait(0.3)

        t = threading.Thread(target=hold)
        t.start()
        started.wait(5)
        with b.transaction() as db:  # waits for a's write lock instead of failing
            db.execute("INSERT INTO kv VALUES ('b', '2')")
        t.join()
        assert b.execute("SELECT k FROM kv ORDER BY k") == [("a",), ("b",)]


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStore(":memory:", synchronous="SOMETIMES")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="version"):
        SQLiteStore(":memory:", version=0)
    with pytest.raises(ValueError, match="busy_timeout_s"):
        SQLiteStore(":memory:", busy_timeout_s=-1)


def test_statements_split_only_complete_statements() -> None:
    trigger = (
        "CREATE TRIGGER IF NOT EXISTS t AFTER INSERT ON kv BEGIN "
        "UPDATE kv SET v = ';' WHERE k = new.k; END;"
    )
    assert _statements(f"{SCHEMA}{trigger}\n") == [
        "CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL);",
        "CREATE INDEX IF NOT EXISTS kv_by_v ON kv (v);",
        trigger,
    ]
    assert _statements("  \n") == []
    with SQLiteStore(":memory:", schema=f"{SCHEMA}{trigger}") as s:
        s.execute("INSERT INTO kv VALUES ('a', 'x')")
        assert s.execute("SELECT v FROM kv") == [(";",)]


# -- the journal's and the registry's errors ----------------------------------------------------


def test_journal_refuses_a_bad_file_and_a_newer_schema(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 200)
    with pytest.raises(JournalCorrupt, match=r"journal .*bad\.db is not a SQLite database"):
        SQLiteJournal(bad)
    path = tmp_path / "j.db"
    SQLiteJournal(path).close()
    assert user_version(path) == SCHEMA_VERSION
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    newer = f"has schema version {SCHEMA_VERSION + 1}, this code reads {SCHEMA_VERSION}"
    with pytest.raises(JournalCorrupt, match=newer):
        SQLiteJournal(path)


def test_a_journal_from_before_user_version_is_stamped(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    SQLiteJournal(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=0")  # as the builds before the shared store left it
    db.commit()
    db.close()
    SQLiteJournal(path).close()
    assert user_version(path) == SCHEMA_VERSION
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value='7' WHERE key='schema'")  # the older marker still counts
    db.commit()
    db.close()
    with pytest.raises(JournalCorrupt, match=f"has schema 7, this build reads {SCHEMA_VERSION}"):
        SQLiteJournal(path)


def test_registry_refuses_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "registry.db"
    bad.write_bytes(b"garbage" * 200)
    with pytest.raises(RuntimeError, match=r"registry .*registry\.db is not a SQLite database"):
        CheckpointRegistry(bad)
    with CheckpointRegistry(":memory:") as reg:
        assert reg._store.journal_mode == "memory"
        assert [tuple(r) for r in reg._store.execute("PRAGMA synchronous")] == [(1,)]  # NORMAL
