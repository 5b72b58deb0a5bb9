"""The data plane's pure parts: installed plans, the 5 % re-plan trigger, the two-phase-commit
participant (seed 000 T:1672-1689; spec §4.3, Gaps 4.5-4.7; facts F17-F19)."""

from __future__ import annotations

import pytest

from syndicate.dataplane.protocol import (
    FIFO_VERSION,
    InstalledPlan,
    ReplanTrigger,
    TwoPhase,
    fifo_plan,
    from_schedule,
    rank_rounds,
)
from syndicate.motifs import CommOp, ExecOption, expand

OPS = (CommOp("ar", "AR", 10, 4), CommOp("aa", "AA", 3, 4))


def _plan(version: int = 1) -> InstalledPlan:
    opts = {"ar": ExecOption("ring", 2), "aa": ExecOption("aa", 1, 2, "cpu")}
    order = tuple(m.id for op in OPS for m in expand(op, opts[op.name]))
    return InstalledPlan(version, opts, order)


def test_plan_json_round_trip_and_hash() -> None:
    p = _plan()
    q = InstalledPlan.from_json(p.to_json())
    assert q == p and q.sha256() == p.sha256()
    assert _plan(2).sha256() != p.sha256()
    p.validate(OPS)
    assert fifo_plan(OPS).fifo and fifo_plan(OPS).version == FIFO_VERSION


def test_invalid_orders_are_refused() -> None:
    p = _plan()
    swapped = InstalledPlan(1, p.options, (p.order[1], p.order[0], *p.order[2:]))  # AG < RS
    with pytest.raises(ValueError, match="before its deps"):
        swapped.validate(OPS)
    with pytest.raises(ValueError, match="exactly once"):
        InstalledPlan(1, p.options, p.order[:-1]).validate(OPS)
    with pytest.raises(ValueError, match="covers"):
        InstalledPlan(1, {"ar": p.options["ar"]}, p.order).validate(OPS)


def test_f17_replan_fires_iff_waits_exceed_5_percent_for_w_iterations() -> None:
    trig = ReplanTrigger(window=3)
    assert [trig.feed(0.06, 1.0) for _ in range(3)] == [False, False, True]
    trig = ReplanTrigger(window=3)
    fired = [trig.feed(w, 1.0) for w in (0.06, 0.06, 0.05, 0.06, 0.06, 0.06)]
    assert fired == [False, False, False, False, False, True]  # 5 % exactly is not "more"
    with pytest.raises(ValueError):
        ReplanTrigger(threshold=0)
    with pytest.raises(ValueError):
        trig.feed(0.1, 0.0)


def test_f19_two_phase_activates_at_the_committed_iteration() -> None:
    tp = TwoPhase(fifo_plan(OPS))
    assert tp.boundary(0) is not None and tp.boundary(1).version == FIFO_VERSION
    plan = _plan()
    assert tp.prepare(plan, plan.sha256(), iteration=1)
    assert tp.boundary(2).version == FIFO_VERSION
    assert tp.boundary(3) is None  # voted at 1: never past 1 + 2 undecided
    tp.commit(1, activate_at=4)  # another rank was one iteration ahead
    assert tp.boundary(3).version == FIFO_VERSION
    assert tp.boundary(4).version == 1 and tp.boundary(5).version == 1
    assert [v for _, v in tp.history] == [0, 0, 0, 0, 1, 1]


def test_f19_no_votes_and_aborts_keep_the_old_plan() -> None:
    tp = TwoPhase(fifo_plan(OPS))
    plan = _plan()
    assert not tp.prepare(plan, "0" * 64, iteration=0)  # bad hash
    assert not tp.prepare(plan, plan.sha256(), iteration=0, ok=False)  # invalid plan
    assert tp.prepare(plan, plan.sha256(), iteration=0)
    assert not tp.prepare(_plan(2), _plan(2).sha256(), iteration=0)  # one at a time
    tp.abort(1)
    assert tp.boundary(5).version == FIFO_VERSION
    with pytest.raises(ValueError, match="without a matching prepare"):
        tp.commit(1, 7)
    assert tp.prepare(plan, plan.sha256(), iteration=5)
    with pytest.raises(ValueError, match="before this rank may switch"):
        tp.commit(1, 6)
    assert not TwoPhase(plan).prepare(plan, plan.sha256(), 0)  # not newer than the current


def test_rank_rounds_split_a_ring_by_round() -> None:
    rs = expand(CommOp("ar", "AR", 4, 4), ExecOption("ring"))[0]
    rounds = rank_rounds(rs, 2)
    assert len(rounds) == 3
    for sends, recvs in rounds:
        assert [t.dst for t in sends] == [1] and [t.src for t in recvs] == [3]


def test_from_schedule_takes_the_steady_state_iteration() -> None:
    p = _plan()
    order = [f"{m}#1" for m in p.order] + [f"{m}#2" for m in reversed(p.order)]
    got = from_schedule(p.options, order, version=3)
    assert got.order == tuple(reversed(p.order)) and got.version == 3
    with pytest.raises(ValueError):
        from_schedule(p.options, order, version=0)
