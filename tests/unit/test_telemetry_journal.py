"""The telemetry's journal wrapper (arbiter.telemetry.TimedJournal) is the journal the served
arbiter writes through: it must hand every part of a round commit to the journal (the drained
machines included, or a restart forgets them) and remember a failed write."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbiter.journal import SQLiteJournal
from arbiter.rounds import ArbiterState
from arbiter.telemetry import TimedJournal

GPUS = frozenset({"m0/g0", "m1/g0"})


def test_a_round_commit_through_the_wrapper_keeps_the_drains(tmp_path: Path) -> None:
    timings: list[float] = []
    journal = TimedJournal(SQLiteJournal(str(tmp_path / "j.db")), timings.append)
    journal.commit_round(ArbiterState(GPUS, round=3), drained={"m1"})
    journal.close()
    assert len(timings) == 1 and journal.commits == 1 and journal.ok
    recovered = SQLiteJournal(str(tmp_path / "j.db")).load(GPUS)
    assert recovered.drained == frozenset({"m1"})
    assert recovered.state.round == 3


def test_a_failed_write_is_remembered_until_one_succeeds(tmp_path: Path) -> None:
    class Failing:
        fail = True

        def commit_round(self, state, bids=(), *, drained=None) -> None:
            if self.fail:
                raise OSError("disk full")

    inner = Failing()
    journal = TimedJournal(inner, lambda s: None)  # type: ignore[arg-type]
    with pytest.raises(OSError, match="disk full"):
        journal.commit_round(ArbiterState(GPUS))
    assert not journal.ok and "disk full" in (journal.last_error or "")
    inner.fail = False
    journal.commit_round(ArbiterState(GPUS))
    assert journal.ok
