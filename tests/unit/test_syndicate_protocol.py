"""The data plane's pure parts: installed plans, the 5 % re-plan trigger, the two-phase-commit
participant (seed 000 T:1672-1689; spec §4.3, Gaps 4.5-4.7; facts F17-F19)."""

from __future__ import annotations

import pytest

from syndicate.dataplane.protocol import (
    FIFO_VERSION,
    InstalledPlan,
    ReplanTrigger,
    TwoPhase,
    carried,
    fifo_plan,
    from_schedule,
    issued_ids,
    iteration_sequence,
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


# ---- prefetch (δ = +1 ops; Gap 3.12, Gap 4.3, T:1771) ---------------------------------------


def _prefetching(version: int = 2) -> InstalledPlan:
    p = _plan(version)
    return InstalledPlan(version, p.options, p.order, frozenset({"aa"}))


def test_a_prefetching_plan_round_trips_and_hashes_apart() -> None:
    pf = _prefetching(1)
    assert InstalledPlan.from_json(pf.to_json()) == pf
    assert pf.sha256() != _plan(1).sha256()
    assert "prefetch" not in _plan(1).to_json()  # plans without it keep their old hash
    pf.validate(OPS)
    with pytest.raises(ValueError, match="not in the job"):
        InstalledPlan(1, pf.options, pf.order, frozenset({"ghost"})).validate(OPS)
    with pytest.raises(ValueError, match="FIFO"):
        InstalledPlan(FIFO_VERSION, pf.options, (), frozenset({"aa"}))


def test_the_first_iteration_runs_a_prologue_then_issues_the_next_batch_at_its_places() -> None:
    pf = _prefetching()
    aa = [m.id for m in pf.motifs(OPS[1])]
    seq = iteration_sequence(pf, OPS, carried(None))
    assert seq[: len(aa)] == [("aa", 0, m) for m in aa]  # iteration 1's own data: prologue
    assert seq[len(aa) :] == [("ar" if m.startswith("ar/") else "aa", int(m in aa), m)
                              for m in pf.order]  # fmt: skip
    assert issued_ids(seq)[len(aa) :] == [m + "@+1" if m in aa else m for m in pf.order]


def test_steady_state_and_switches_into_and_out_of_prefetch() -> None:
    pf, plain = _prefetching(), _plan(3)
    aa = {m.id for m in pf.motifs(OPS[1])}
    steady = iteration_sequence(pf, OPS, carried(pf))  # no prologue: issued last iteration
    assert [m for _, _, m in steady] == list(pf.order)
    assert {m for _, d, m in steady if d == 1} == aa
    # into: the previous plan did not prefetch, so this iteration's data runs first
    assert iteration_sequence(pf, OPS, carried(plain)) == iteration_sequence(pf, OPS)
    # out: the previous plan issued this iteration's data already; the new plan skips it
    out = iteration_sequence(plain, OPS, carried(pf))
    assert out == [("ar", 0, m) for m in plain.order if m not in aa]
    assert iteration_sequence(plain, OPS, carried(plain)) == [
        ("ar" if m.startswith("ar/") else "aa", 0, m) for m in plain.order
    ]
    with pytest.raises(ValueError, match="FIFO"):
        iteration_sequence(fifo_plan(OPS), OPS)


def test_every_iteration_issues_each_op_instance_exactly_once_across_switches() -> None:
    """Over a run switching FIFO -> prefetch -> plain -> prefetch -> FIFO, each (op, k) is
    issued whole exactly once, in iteration k or (δ = +1) k-1."""
    fifo, pf, plain = fifo_plan(OPS), _prefetching(), _plan(3)
    plans = [fifo, fifo, pf, pf, plain, pf, pf, fifo, fifo]
    issued: dict[tuple[str, int], list[str]] = {}
    prev = None
    for k, plan in enumerate(plans):
        if plan.fifo:
            for op in OPS:
                if op.name not in carried(prev):
                    issued.setdefault((op.name, k), []).extend(m.id for m in plan.motifs(op))
        else:
            for name, d, mid in iteration_sequence(plan, OPS, carried(prev)):
                issued.setdefault((name, k + d), []).append(mid)
        prev = plan
    for k in range(len(plans)):
        for op in OPS:
            by = plans[k - 1] if k > 0 and op.name in plans[k - 1].prefetch else plans[k]
            want = [m.id for m in by.motifs(op)]  # cut by the plan of the issuing iteration
            got = issued[(op.name, k)]
            assert (got if by.fifo else sorted(got)) == (want if by.fifo else sorted(want))
    assert set(issued) == {(op.name, k) for op in OPS for k in range(len(plans))}


def test_from_schedule_with_prefetch_takes_iteration_one_and_the_next_data() -> None:
    p = _plan()
    aa = [m.id for m in p.motifs(OPS[1])]
    ar = [m.id for m in p.motifs(OPS[0])]
    # the optimizer's two-iteration order: aa#1 (prologue), ar#1 with aa#2 in between, ar#2
    order = [f"{m}#1" for m in aa] + [f"{ar[0]}#1"] + [f"{m}#2" for m in aa]
    order += [f"{m}#1" for m in ar[1:]] + [f"{m}#2" for m in ar]
    got = from_schedule(p.options, order, version=2, prefetch=["aa"])
    assert got.prefetch == {"aa"} and got.order == (ar[0], *aa, *ar[1:])
    got.validate(OPS)
    assert from_schedule(p.options, order, version=2).order == (*aa, *ar)  # iteration 2's
    with pytest.raises(ValueError, match="no such comm-op"):
        from_schedule(p.options, order, version=2, prefetch=["ghost"])
