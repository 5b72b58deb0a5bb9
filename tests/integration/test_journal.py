"""The journal: durable apps, hashed tokens, leases, bids and rounds; kill -9 safe."""

from __future__ import annotations

import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import journal_worker

from arbiter.auction import Bid
from arbiter.journal import (
    AppRecord,
    JournalCorrupt,
    SQLiteJournal,
    hash_token,
    new_token,
    token_matches,
)
from arbiter.rounds import ArbiterState, InvariantViolation, Lease

GPUS = journal_worker.CLUSTER.gpu_ids


def replay(rounds: int) -> ArbiterState:
    state = ArbiterState(GPUS)
    for _ in range(rounds):
        state, _ = journal_worker.step(state)
    return state


def test_round_trip(tmp_path: Path) -> None:
    j = SQLiteJournal(tmp_path / "j.db")
    token = new_token()
    j.put_app(
        AppRecord("app-0", hash_token(token), "search", "ann", "ml", 4, ({"job_id": "j1"},), 5.0)
    )
    for app in journal_worker.APPS[1:]:
        j.put_app(AppRecord(app, hash_token(app)))
    state = replay(5)
    bids = [Bid("app-0", {frozenset(): math.inf, frozenset({"nc12-a-00/s0/g0"}): 0.5})]
    j.commit_round(state, bids)
    j.put_knob("arbiter.themis.fairness-knob", "0.7")
    j.close()

    snap = SQLiteJournal(tmp_path / "j.db").load(GPUS)
    assert snap.state.round == 5
    assert set(snap.state.leases) == set(state.leases)
    assert snap.apps["app-0"].max_gpu_demand == 4 and snap.apps["app-0"].jobs == ({"job_id": "j1"},)
    assert snap.state.last_bids["app-0"] == bids[0]
    assert snap.knobs == {"arbiter.themis.fairness-knob": "0.7"}


def test_tokens_are_stored_hashed(tmp_path: Path) -> None:
    token = new_token()
    j = SQLiteJournal(tmp_path / "j.db")
    j.put_app(AppRecord("a", hash_token(token)))
    j.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("j.db*"))
    assert token.encode() not in raw
    stored = SQLiteJournal(tmp_path / "j.db").load(GPUS).apps["a"].token_hash
    assert token_matches(token, stored)
    assert not token_matches(token + "x", stored)


def test_invalid_state_is_never_written(tmp_path: Path) -> None:
    j = SQLiteJournal(tmp_path / "j.db")
    for app in ["a", "b", *journal_worker.APPS]:
        j.put_app(AppRecord(app, "h"))
    good = replay(2)
    j.commit_round(good)
    g = next(iter(GPUS))
    bad = ArbiterState(
        GPUS, (Lease("a", frozenset({g}), 0, 10, 3), Lease("b", frozenset({g}), 5, 15, 3)), 3
    )
    with pytest.raises(InvariantViolation):
        j.commit_round(bad)
    assert SQLiteJournal(tmp_path / "j.db").load(GPUS).state.round == 2


def test_corrupt_journal_is_refused(tmp_path: Path) -> None:
    j = SQLiteJournal(tmp_path / "j.db")
    j.put_app(AppRecord("a", "h"))
    j.close()
    db = sqlite3.connect(tmp_path / "j.db")
    g = sorted(GPUS)[0]
    for k in range(2):
        db.execute(
            "INSERT INTO leases VALUES (?, 'a', ?, 0, 10, 1, 'auction')", (f"l{k}", f'["{g}"]')
        )
    db.commit()
    db.close()
    with pytest.raises(JournalCorrupt, match="two live leases"):
        SQLiteJournal(tmp_path / "j.db").load(GPUS)


@pytest.mark.slow
def test_kill_9_at_random_points_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL the writer at random instants; every restart sees a whole committed round."""
    path = tmp_path / "j.db"
    rng = random.Random(2)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    seen_rounds = []
    expected = ArbiterState(GPUS)
    for _ in range(8):
        proc = subprocess.Popen(
            # -P: the script's directory (tests/support, which has a module named arbiter) is
            # not put first on sys.path, so ``import arbiter`` finds the package
            [sys.executable, "-P", journal_worker.__file__, str(path)],
            stdout=subprocess.PIPE,
            env=env,
        )
        # Kill only once it has committed a round (it prints each), at a random point after:
        # on a busy machine the interpreter's start alone can outlast a fixed delay.
        assert proc.stdout is not None and proc.stdout.readline(), "the worker wrote nothing"
        time.sleep(rng.uniform(0.0, 0.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        snap = SQLiteJournal(path).load(GPUS)  # checks the invariant itself
        while expected.round < snap.state.round:  # the uninterrupted deterministic run
            expected, _ = journal_worker.step(expected)
        assert set(snap.state.leases) == set(expected.leases), snap.state.round
        assert set(snap.apps) == set(journal_worker.APPS)
        seen_rounds.append(snap.state.round)
    assert seen_rounds == sorted(seen_rounds) and seen_rounds[-1] > seen_rounds[0] > 0


def test_a_journal_from_before_yarn_bindings_opens(tmp_path: Path) -> None:
    """Journals written before apps were bound to their YARN application gain the column."""
    import sqlite3

    from arbiter.journal import AppRecord, SQLiteJournal

    j = SQLiteJournal(tmp_path / "j.db")
    j.put_app(AppRecord("app-1", "h", "a", "u", "q", 2, (), 1.0, "application_1_0001"))
    j.close()
    db = sqlite3.connect(tmp_path / "j.db")
    db.execute("ALTER TABLE apps DROP COLUMN yarn_app_id")  # as an older build wrote it
    db.commit()
    db.close()
    snap = SQLiteJournal(tmp_path / "j.db").load(frozenset())
    assert snap.apps["app-1"].yarn_app_id == "" and snap.apps["app-1"].max_gpu_demand == 2
