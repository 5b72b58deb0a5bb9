"""The simulator's opt-in batch window (``batch_s``; ``arbiter.sim.engine`` module docstring):
window 0 is the exact event mode, a window decides every event in it together at its end, the
run stays deterministic and keeps every invariant, and bad windows are clear errors."""

from __future__ import annotations

import math
import random

import pytest
from support.sim import PERF, Invariants, random_trace

from arbiter.cluster import shorthand_cluster
from arbiter.policies import make_policy
from arbiter.sim.engine import simulate
from arbiter.sim.perf import SimJob


def _rows(res) -> dict:
    return {r.job_id: (r.start_s, r.finish_s, r.preemptions) for r in res.jobs}


@pytest.mark.parametrize("name", ["themis", "fifo"])
def test_window_zero_is_the_exact_mode(name: str) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(610, 14, (1, 2, 4), span=300.0)
    exact = simulate(jobs, cluster, make_policy(name))
    for kw in ({"batch_s": 0.0}, {"batch_s": None}):
        res = simulate(jobs, cluster, make_policy(name), **kw)
        assert (res.decisions, _rows(res)) == (exact.decisions, _rows(exact))
    zero = simulate(jobs, cluster, make_policy("themis", batch_s=0.0)) if name == "themis" else None
    if zero is not None:
        assert (zero.decisions, _rows(zero)) == (exact.decisions, _rows(exact))


def test_a_window_decides_its_events_together_at_its_end() -> None:
    """FIFO on an empty 4-GPU machine, window 5 s: jobs arriving at 0 and 3 start at 5 (one
    window, opened by the first), a job arriving at 7 opens the next window and starts at 12."""
    cluster = shorthand_cluster("nodes:1:4")
    jobs = [SimJob("a", 0.0, 1, 100.0, PERF), SimJob("b", 3.0, 1, 100.0, PERF),
            SimJob("c", 7.0, 1, 100.0, PERF)]  # fmt: skip
    res = simulate(jobs, cluster, make_policy("fifo"), batch_s=5.0)
    start = {r.job_id: r.start_s for r in res.jobs}
    assert start == {"a": 5.0, "b": 5.0, "c": 12.0}
    exact = simulate(jobs, cluster, make_policy("fifo"))
    assert {r.job_id: r.start_s for r in exact.jobs} == {"a": 0.0, "b": 3.0, "c": 7.0}


@pytest.mark.parametrize("seed", range(4))
def test_themis_batched_keeps_invariants_and_spaces_decisions(seed: int) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(620 + seed, 14, (1, 2, 3, 4, 8), span=(50.0, 600.0)[seed % 2])
    window = (7.0, 30.0)[seed % 2]
    inv = Invariants(cluster, jobs, partial=False, conserving=False)
    res = simulate(jobs, cluster, make_policy("themis", lease_s=40.0, batch_s=window),
                   on_decision=inv)  # fmt: skip
    inv.check_result(jobs, res)
    gaps = [b - a for a, b in zip(inv.times, inv.times[1:], strict=False)]
    assert min(gaps) >= window - 1e-9  # a window opens only after the last one was decided
    exact = simulate(jobs, cluster, make_policy("themis", lease_s=40.0))
    assert res.decisions < exact.decisions


def test_batched_themis_is_deterministic_and_the_override_equals_the_knob() -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(630, 12, (1, 2, 4, 8), span=400.0)

    def run(trace, **kw):
        res = simulate(trace, cluster, make_policy("themis", **kw.pop("knobs", {})), **kw)
        return res.decisions, _rows(res)

    first = run(jobs, knobs={"batch_s": 20.0})
    assert run(jobs, knobs={"batch_s": 20.0}) == first
    shuffled = jobs[:]
    random.Random(3).shuffle(shuffled)
    assert run(shuffled, knobs={"batch_s": 20.0}) == first
    assert run(jobs, batch_s=20.0) == first  # simulate's override, the policy's knob at 0
    assert run(jobs, knobs={"batch_s": 50.0}, batch_s=20.0) == first  # the override wins


def test_bad_windows_are_errors() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    jobs = [SimJob("a", 0.0, 1, 10.0, PERF)]
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="batch_s"):
            simulate(jobs, cluster, make_policy("fifo"), batch_s=bad)
        with pytest.raises(ValueError, match="batch_s"):
            make_policy("themis", batch_s=bad)
    with pytest.raises(ValueError, match="event mode"):
        simulate(jobs, cluster, make_policy("las"), round_s=30.0, batch_s=5.0)
