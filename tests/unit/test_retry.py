"""``arbiter.retry``: the backoff policy and the retry loop, on a fake clock and a fake sleep
(nothing here waits for real)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from arbiter.retry import STREAM_RECONNECT, Backoff, Retry


class FakeTime:
    """A clock that only moves when slept on."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


# -- Backoff -----------------------------------------------------------------------------------


def test_backoff_grows_by_factor_up_to_the_cap() -> None:
    b = Backoff(initial=0.5, factor=3, maximum=10)
    assert [b.delay(k) for k in range(5)] == [0.5, 1.5, 4.5, 10, 10]
    assert [Backoff(initial=2, factor=1, maximum=9).delay(k) for k in range(3)] == [2, 2, 2]


def test_stream_reconnect_is_the_old_doubling_loop() -> None:
    """0.1 s doubling to 5 s, float for float as ``backoff = min(5.0, backoff * 2)``."""
    old, b = [], 0.1
    for _ in range(12):
        old.append(b)
        b = min(5.0, b * 2)
    assert [STREAM_RECONNECT.delay(k) for k in range(12)] == old


def test_rm_rounds_are_the_old_formula() -> None:
    """The RM client's ``min(backoff * 2**k, max_backoff)``."""
    for backoff, cap in [(0.1, 2.0), (0.02, 0.1), (0.05, 0.2), (3.0, 2.0)]:
        policy = Backoff(initial=backoff, factor=2, maximum=cap)
        assert [policy.delay(k) for k in range(8)] == [min(backoff * 2**k, cap) for k in range(8)]


def test_backoff_survives_huge_failure_counts() -> None:
    assert Backoff(initial=0.1, factor=2.0, maximum=5.0).delay(100_000) == 5.0
    assert Backoff(initial=0.1, factor=10, maximum=5.0).delay(100_000) == 5.0


def test_jitter_uses_the_injected_rng() -> None:
    draws = iter([0.0, 0.5, 0.999])
    b = Backoff(initial=1.0, factor=2.0, maximum=8.0, jitter=0.5, rng=lambda: next(draws))
    assert [b.delay(k) for k in range(3)] == [1.0, 1.5, 4.0 * (1 - 0.5 * 0.999)]


def test_no_jitter_never_draws() -> None:
    def rng() -> float:
        raise AssertionError("drawn")

    assert Backoff(initial=1.0, rng=rng).delay(3) == 5.0


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": -1}, {"maximum": -1}, {"factor": 0.5}, {"jitter": 1.5}, {"jitter": -0.1}],
)
def test_backoff_rejects_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


# -- Retry -------------------------------------------------------------------------------------


def test_max_attempts_pauses_between_attempts_only() -> None:
    t = FakeTime()
    retry = Retry(Backoff(initial=1, factor=2, maximum=3), max_attempts=4, sleep=t.sleep)
    assert list(retry) == [1, 2, 3, 4]
    assert t.slept == [1, 2, 3] and retry.outcome == "attempts"


def test_success_leaves_without_a_pause() -> None:
    t = FakeTime()
    retry = Retry(Backoff(initial=1), max_attempts=10, sleep=t.sleep)
    for attempt in retry:
        if attempt == 2:
            break
    assert t.slept == [1] and retry.outcome is None


def test_reset_restarts_the_backoff() -> None:
    t = FakeTime()
    retry = Retry(Backoff(initial=1, factor=2, maximum=100), max_attempts=6, sleep=t.sleep)
    for attempt in retry:
        if attempt == 3:  # progress (a stream that delivered messages)
            retry.reset()
    assert t.slept == [1, 2, 1, 2, 4]


def test_deadline_clips_the_pause_and_starts_no_attempt_after_it() -> None:
    t = FakeTime(now=0.0)
    retry = Retry(Backoff(initial=1, factor=2, maximum=10), deadline=5.0, clock=t.clock,
                  sleep=t.sleep)  # fmt: skip
    starts = [t.now for _ in retry]
    assert starts == [0.0, 1.0, 3.0]  # then a 4 s pause is clipped to 2 s
    assert t.slept == [1, 2, 2.0] and t.now == 5.0 and retry.outcome == "deadline"


def test_past_deadline_makes_no_attempt() -> None:
    t = FakeTime(now=10.0)
    retry = Retry(deadline=10.0, clock=t.clock, sleep=t.sleep)
    assert list(retry) == [] and retry.outcome == "deadline"


def test_max_attempts_wins_over_a_deadline_reached_by_the_last_attempt() -> None:
    t = FakeTime(now=0.0)
    retry = Retry(Backoff(initial=1), max_attempts=2, deadline=2.5, clock=t.clock, sleep=t.sleep)
    for _ in retry:
        t.now += 1.0  # the attempt itself takes time: the second one ends past the deadline
    assert retry.outcome == "attempts" and t.slept == [1] and t.now == 3.0


def test_stop_before_the_first_attempt() -> None:
    stop = threading.Event()
    stop.set()
    retry = Retry(stop=stop, sleep=FakeTime().sleep)
    assert list(retry) == [] and retry.outcome == "stopped"


def test_stop_during_a_pause_ends_the_loop() -> None:
    stop = threading.Event()
    t = FakeTime()

    def sleep(seconds: float) -> None:
        t.sleep(seconds)
        if len(t.slept) == 3:
            stop.set()

    retry = Retry(STREAM_RECONNECT, stop=stop, sleep=sleep)
    assert list(retry) == [1, 2, 3] and retry.outcome == "stopped"
    assert t.slept == [0.1, 0.2, 0.4]


def test_with_a_stop_event_the_default_pause_is_interrupted_by_it() -> None:
    stop = threading.Event()
    retry = Retry(Backoff(initial=3600, maximum=3600), stop=stop)
    for _ in retry:
        stop.set()  # the hour-long stop.wait returns at once
    assert retry.outcome == "stopped"


def test_without_a_stop_event_the_default_pause_is_time_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("arbiter.retry.time.sleep", slept.append)
    assert list(Retry(Backoff(initial=7, maximum=7), max_attempts=3)) == [1, 2, 3]
    assert slept == [7, 7]


def test_iterating_again_starts_afresh() -> None:
    t = FakeTime()
    retry = Retry(Backoff(initial=1, factor=2, maximum=100), max_attempts=3, sleep=t.sleep)
    assert list(retry) == [1, 2, 3] and list(retry) == [1, 2, 3]
    assert t.slept == [1, 2, 1, 2]


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Retry(max_attempts=0)
