"""Fan-in on one event loop. A heartbeat never waits for the core's lock (ArbiterCore.beat):
one that finds it held by another thread (the scheduling loop calling for bids or closing a
round) is kept and applied, in order, by the next holder, before anything that reads what
heartbeats change. And serve hands the GIL back to the loop quickly."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from arbiter.cluster import shorthand_cluster
from arbiter.config import load_config
from arbiter.core import ArbiterCore
from arbiter.journal import SQLiteJournal
from arbiter.server import SWITCH_INTERVAL_S, short_gil_slices
from arbiter.sessions import Progress

CLUSTER = shorthand_cluster("nodes:2:4")


def core(tmp_path, clock: list[float], **env: str) -> ArbiterCore:
    config = load_config(environ={"ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"), **env})
    return ArbiterCore(
        CLUSTER, config, SQLiteJournal(str(tmp_path / "j.db")), admin_token="a",
        clock=lambda: clock[0],
    )  # fmt: skip


def one_app(tmp_path) -> tuple[list[float], ArbiterCore, str]:
    """A core at t = 100 with one registered app whose session is open."""
    clock = [100.0]
    c = core(tmp_path, clock)
    return clock, c, registered(c)


@contextmanager
def held_elsewhere(c: ArbiterCore) -> Iterator[None]:
    """The core's lock held by another thread (as the scheduling loop holds it) for the
    block: a call in the block that waited for it would never return (the holder lets go only
    after the block), so the test would hang, not pass."""
    got, done = threading.Event(), threading.Event()

    def hold() -> None:
        with c._lock:
            got.set()
            done.wait(60)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert got.wait(60)
    try:
        yield
    finally:
        done.set()
        t.join(60)
        assert not t.is_alive()


def registered(c: ArbiterCore, name: str = "a") -> str:
    app, _ = c.register_app(app_name=name, user="u", queue_name="", max_gpu_demand=2)
    c.open_session(app)
    return app


def test_a_heartbeat_that_finds_the_lock_held_is_answered_and_applied_by_the_next_holder(
    tmp_path,
) -> None:
    clock, c, app = one_app(tmp_path)
    clock[0] = 105.0
    with held_elsewhere(c):
        rho = c.beat(app, (Progress(1, 9, 0.5),), rho=True)
        assert math.isinf(rho)  # holds nothing: ρ read without the lock
        # kept, not applied yet: what the holder reads does not change under it
        assert app not in c.sessions.progress
        assert c.sessions.sessions[app].last_seen == 100.0
    clock[0] = 107.0
    view = c.snapshot()  # the next holder applies it, with the time it arrived
    assert app in view.connected
    assert c.sessions.progress[app] == Progress(1, 9, 0.5)
    assert c.sessions.sessions[app].last_seen == 105.0
    assert c.sessions.heard[app] == 105.0


def test_kept_heartbeats_are_applied_in_arrival_order_before_the_next_one(tmp_path) -> None:
    clock, c, app = one_app(tmp_path)
    with held_elsewhere(c):
        for k in range(1, 4):
            clock[0] = 100.0 + k
            c.beat(app, (Progress(k, 10 - k, 0.5),))
    clock[0] = 104.0
    c.beat(app, (Progress(4, 6, 0.5),))  # the lock is free: the kept ones first, then this
    assert c.sessions.progress[app] == Progress(4, 6, 0.5)
    assert c.sessions.sessions[app].last_seen == 104.0
    assert not c._beats


def test_a_heartbeat_applied_late_does_not_move_the_time_an_app_was_heard_back(
    tmp_path,
) -> None:
    clock, c, app = one_app(tmp_path)
    clock[0] = 105.0
    with held_elsewhere(c):
        c.beat(app)
    clock[0] = 108.0
    c.sessions.heartbeat(app, 108.0)  # a later message, applied before the kept heartbeat
    c.snapshot()
    assert c.sessions.sessions[app].last_seen == 108.0
    assert c.sessions.heard[app] == 108.0


def test_the_silent_agent_check_sees_a_heartbeat_kept_while_the_lock_was_held(tmp_path) -> None:
    clock = [100.0]
    c = core(tmp_path, clock, ARBITER_HEARTBEAT_TIMEOUT_SECONDS="10")
    app, quiet = registered(c, "a"), registered(c, "b")
    clock[0] = 109.0
    with held_elsewhere(c):
        c.beat(app)
    clock[0] = 115.0  # 15 s after both opened, 6 s after the kept heartbeat
    c.tick()
    assert app in c.sessions.sessions  # heard 6 s ago: kept
    assert quiet not in c.sessions.sessions  # silent 15 s: dropped


def test_a_kept_report_of_an_app_removed_meanwhile_is_dropped(tmp_path) -> None:
    _, c, app = one_app(tmp_path)
    with held_elsewhere(c):
        c.beat(app, (Progress(1, 9, 0.5),))
    c.finish_app(app, "done")
    c.snapshot()
    assert app not in c.sessions.progress
    assert app not in c.sessions.heard


def test_heartbeats_from_many_threads_while_the_lock_changes_hands_are_all_applied(
    tmp_path,
) -> None:
    """Beats racing holders (the scheduling loop's ticks): none is lost, each app ends with
    its own last report."""
    clock = [100.0]
    c = core(tmp_path, clock)
    apps = [registered(c, f"a{k}") for k in range(8)]
    stop = threading.Event()

    def ticking() -> None:
        while not stop.is_set():
            c.snapshot()

    def beating(app: str) -> Callable[[], None]:
        def run() -> None:
            for k in range(1, 301):
                c.beat(app, (Progress(k, 300 - k, 0.5),), rho=True)

        return run

    holder = threading.Thread(target=ticking, daemon=True)
    holder.start()
    beaters = [threading.Thread(target=beating(a)) for a in apps]
    for t in beaters:
        t.start()
    for t in beaters:
        t.join(60)
    stop.set()
    holder.join(60)
    c.snapshot()
    assert not c._beats
    assert {c.sessions.progress[a] for a in apps} == {Progress(300, 0, 0.5)}


def test_serve_hands_the_gil_back_to_the_event_loop_within_half_a_millisecond() -> None:
    """serve's GIL slice (arbiter.server.short_gil_slices): set, and the old one returned."""
    before = sys.getswitchinterval()
    try:
        assert short_gil_slices() == before
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
        assert before > SWITCH_INTERVAL_S  # shorter than Python's 5 ms default
        assert short_gil_slices(0.002) == pytest.approx(SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(before)
