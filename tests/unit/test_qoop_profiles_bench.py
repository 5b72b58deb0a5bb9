"""The share profiles and the replay of ``benchmarks/qoop_profiles.py`` (QOOP §2.6, spec A.7).

The spot-market profile keeps the paper's bidding rules (2 to 20 i3.2xlarge, 2 added a minute,
revoked below the price); the replay of a fixed plan under a constant share is the estimate;
and a positive control: two plans whose best choice flips with the share (narrow joins with
less work, wide joins with more), a share that rises mid-query, and QOOP beating every static
plan by switching once after the first join, reusing its checkpoint.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys

import pytest
from support import REPO

from qoop_planner.model import (
    Plan,
    Progress,
    Relation,
    Resources,
    Share,
    Stage,
    StageCost,
    StageSignature,
)
from qoop_planner.packing import estimate


@pytest.fixture(scope="module")
def bench():
    path = REPO / "benchmarks" / "qoop_profiles.py"
    spec = importlib.util.spec_from_file_location("qoop_profiles_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_spot_profile_follows_the_bidding_rules(bench):
    times, shares = bench.spot_market_profile(48.0, seed=3)
    assert times[0] == 0.0 and all(t % 60 == 0 for t in times)
    assert times == sorted(times) and len(set(times)) == len(times)
    machines = [s.vcores / bench.SPOT_VCORES for s in shares]
    assert all(m == int(m) and 2 <= m <= bench.SPOT_MAX for m in machines)
    assert all(s.memory_mb == m * bench.SPOT_MB for s, m in zip(shares, machines, strict=True))
    # at most 2 machines are added a minute; revocations may take many at once
    ups = [b - a for a, b in itertools.pairwise(machines) if b > a]
    assert ups and max(ups) <= bench.SPOT_ADD
    assert min(b - a for a, b in itertools.pairwise(machines)) < -bench.SPOT_ADD
    assert max(machines) == bench.SPOT_MAX and min(machines) == 2  # the paper's 2 to 20
    ev = bench.volatility_events(times, shares, 48.0)
    assert ev["10%"] >= ev["15%"] >= ev["20%"] > 0
    windows = bench.classify_windows(times, shares, 48.0)
    assert sum(len(w) for w in windows.values()) == 48 * 6
    # deterministic per seed
    assert bench.spot_market_profile(48.0, seed=3) == (times, shares)


REL = {x: Relation(x, x.upper()) for x in "abc"}
PRED = {"ab": "a.k = b.k", "bc": "b.j = c.j"}


def _sig(rels: str, top: str = "") -> StageSignature:
    preds = frozenset(p for k, p in PRED.items() if set(k) <= set(rels))
    return StageSignature(frozenset(REL[x] for x in rels), preds, top)


def _stage(sid, rels, inputs, tasks, task_s, kind, method="", top=""):
    cost = StageCost(tasks, task_s, Resources(1, 1024))
    return Stage(sid, kind, inputs, _sig(rels, top), (), "", cost, method, tasks)


def _control_plan(pid: str, width: int, task_s: float) -> Plan:
    stages = (
        _stage("A", "a", (), 8, 5.0, "scan"),
        _stage("B", "b", (), 8, 5.0, "scan"),
        _stage("C", "c", (), 8, 5.0, "scan"),
        _stage("AB", "ab", ("A", "B"), width, task_s, "join", "shuffle_hash"),
        _stage("ABC", "abc", ("AB", "C"), width, task_s, "join", "shuffle_hash"),
        _stage("F", "abc", ("ABC",), 1, 1.0, "final", top="agg"),
    )
    return Plan(pid, "q", stages, "F", sum(s.cost.work for s in stages))


def test_replay_of_a_fixed_plan_under_a_constant_share_is_the_estimate(bench):
    p = _control_plan("narrow", 8, 50.0)
    share = Share(8, 8 * 4096)
    times, shares = [0.0, 37.0, 81.0, 400.0], [share] * 4  # changes that change nothing
    r = bench.replay([p], p.plan_id, times, shares, 0.0)
    assert r["jct_s"] == pytest.approx(estimate(p, Progress(), share).finish_s)
    assert r["switches"] == 0


def test_positive_control_qoop_beats_every_static_plan(bench):
    narrow = _control_plan("narrow", 8, 50.0)  # 8 tasks of 50 s per join: less work
    wide = _control_plan("wide", 64, 10.0)  # 64 tasks of 10 s: more work, 8x wider
    plans = [narrow, wide]
    low, high = Share(8, 8 * 4096), Share(64, 64 * 4096)
    times, shares = [0.0, 75.0], [low, high]
    r = bench.run_window(plans, times, shares, 0.0, 0.15)
    assert r["clarinet_plan"] == "narrow"  # best at the start share
    q, best = r["qoop"], r["best_static"]
    assert q["switches"] == 1 and q["depths"] == [0]  # the first join's checkpoint is reused
    assert q["jct_s"] < best["jct_s"] < r["clarinet"]["jct_s"]
    assert best["jct_s"] / q["jct_s"] > 1.1


def test_diagnosis_sees_the_change_and_the_gain_on_offer(bench):
    """The positive control through the diagnosis: one change inside the run, 8x, and on offer
    at that moment the gain that makes QOOP switch (above 1 / (1 - h))."""
    import qoop_diagnosis as diag

    narrow, wide = _control_plan("narrow", 8, 50.0), _control_plan("wide", 64, 10.0)
    low, high = Share(8, 8 * 4096), Share(64, 64 * 4096)
    r = bench.run_window([narrow, wide], [0.0, 75.0], [low, high], 0.0, 0.15)
    ((factor, gain),) = r["qoop"]["changes"]
    assert factor == pytest.approx(8.0)
    assert gain > 1 / 0.85
    d = diag.diagnose([r], 0.15)
    assert d["changes_per_run"]["mean"] == 1 and d["changes_per_run"]["runs_with_none"] == 0
    assert d["change_factor"]["share_at_least_2x"] == 1.0
    assert d["gain_on_offer"]["changes_over_hysteresis"] == 1
    # no change inside the run: nothing on offer
    r0 = bench.run_window([narrow, wide], [0.0], [low], 0.0, 0.15)
    assert diag.diagnose([r0], 0.15)["changes_per_run"]["runs_with_none"] == 1.0


def test_time_scale_multiplies_every_estimate(bench):
    import qoop_diagnosis as diag

    plans = [_control_plan("narrow", 8, 50.0), _control_plan("wide", 64, 10.0)]
    scaled = diag.scale_plans(plans, 2.5)
    share = Share(16, 16 * 4096)
    for p, s in zip(plans, scaled, strict=True):
        assert s.total_cost == pytest.approx(2.5 * p.total_cost)
        assert estimate(s, Progress(), share).finish_s == pytest.approx(
            2.5 * estimate(p, Progress(), share).finish_s
        )
    with pytest.raises(ValueError, match="time scale"):
        diag.scale_plans(plans, 0)


def test_lifetime_events_count_moves_from_the_last_event(bench):
    import qoop_diagnosis as diag

    times = [0.0, 10.0, 20.0, 30.0, 40.0]
    vcores = [100.0, 105.0, 111.0, 99.0, 130.0]  # +5 %, +11 % (event), -11 % (event), +31 %
    assert diag.volatility_events(times, vcores, 0.0, 35.0, 0.10) == 2
    assert diag.volatility_events(times, vcores, 0.0, 50.0, 0.10) == 3
    assert diag.volatility_events(times, vcores, 0.0, 50.0, 0.20) == 1
    ev = diag.lifetime_events(times, vcores, 5.0, 40 / 3600, seed=1)
    assert 0 <= ev["10%"]["at_least_4"] <= ev["10%"]["at_least_1"] <= 1
