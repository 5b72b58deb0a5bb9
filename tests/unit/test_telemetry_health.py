"""The scheduler's part of ``/healthz`` and ``/readyz`` (arbiter.telemetry.Telemetry.health):
a loop not started is not live; a loop that started and has not finished its first tick is live
(a liveness probe must not restart an arbiter in its first tick) but not ready; a loop that
stops ticking for ``stall_seconds`` is not live."""

from __future__ import annotations

import time

from arbiter.telemetry import Telemetry


def test_a_loop_not_started_is_not_live() -> None:
    health = Telemetry().health()
    assert not health.healthy and not health.ready
    assert health.checks["scheduler"]["detail"] == "not started"


def test_a_starting_loop_is_live_but_not_ready_until_its_first_tick() -> None:
    t = Telemetry()
    t.loop_starting()
    health = t.health()
    assert health.healthy and not health.ready
    assert health.checks["scheduler"]["detail"].startswith("starting: no tick yet")
    assert health.checks["first-tick"]["ok"] is False  # why it is not ready, for ?verbose
    t.ticked()
    health = t.health()
    assert health.healthy and health.ready and "first-tick" not in health.checks
    assert health.checks["scheduler"]["detail"].startswith("last tick ")


def test_a_loop_that_never_ticks_or_stops_ticking_is_stuck() -> None:
    t = Telemetry(stall_seconds=5.0)
    t.loop_starting()
    assert t.loop_started is not None
    t.loop_started -= 6.0  # started six seconds ago and never ticked
    health = t.health()
    assert not health.healthy and not health.ready
    assert "(stuck: more than 5 s)" in health.checks["scheduler"]["detail"]
    t.ticked()
    assert t.health().healthy
    t.last_tick = time.monotonic() - 6.0  # its last tick six seconds ago
    health = t.health()
    assert not health.healthy
    assert health.checks["scheduler"]["detail"].endswith("(stuck: more than 5 s)")
