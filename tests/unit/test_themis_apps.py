"""Themis over apps of many jobs, and Gap 2 decided with a finite ρ_old (simulated Agent).

Jobs use ``SlowdownPerf()`` (rate 1 on one machine): ``work`` is seconds on one machine.
"""

from __future__ import annotations

import math

import pytest

from arbiter.cluster import shorthand_cluster
from arbiter.policies import make_policy
from arbiter.policies.base import JobView, Snapshot, check_decision
from arbiter.policies.themis import Themis
from arbiter.rounds import LeaseSource
from arbiter.sim.agents import SimulatedAgents, app_remaining_time
from arbiter.sim.engine import simulate
from arbiter.sim.perf import SimJob, SlowdownPerf

PERF = SlowdownPerf()


def J(job_id: str, app: str, arrival: float, gang: int, work: float) -> SimJob:
    return SimJob(job_id, arrival, gang, work, PERF, app_id=app)


def view(job_id: str, app: str, gang: int, work: float, held=frozenset()) -> JobView:
    return JobView(job_id, app, "default", 0.0, gang, held=frozenset(held), remaining_work=work,
                   work=work, perf=PERF, ideal_rate=1.0)  # fmt: skip


def test_remaining_time_schedules_longest_first_and_needs_whole_gangs() -> None:
    c = shorthand_cluster("nodes:2:4")
    jobs = [view("a", "x", 1, 30.0), view("b", "x", 1, 20.0), view("c", "x", 2, 10.0)]
    # Two GPUs: a on one; c (gang 2) waits for both: 30 + 10 = 40, b fits beside a? no: LPT
    # places a (30) then b (20) on the other GPU, then c needs both: max(30, 20) + 10 = 40.
    assert app_remaining_time(jobs, c, None, 2) == 40.0
    assert app_remaining_time(jobs, c, None, 4) == 30.0  # a | b | c on two
    assert app_remaining_time(jobs, c, None, 1) == math.inf  # c's gang of 2 never fits
    one_machine = frozenset(g.id for g in c.gpus[:2])
    split = frozenset([c.gpus[0].id, c.gpus[4].id])
    # A gang spread over two machines runs slower (locality model): the placement is priced.
    assert app_remaining_time(jobs, c, split) > app_remaining_time(jobs, c, one_machine)


def test_an_app_of_many_jobs_holds_one_lease_set_and_runs_its_jobs_side_by_side() -> None:
    """nodes:1:4, one app of three 1-GPU jobs: it wins three GPUs at once, every job runs."""
    trace = [J("a1", "A", 0, 1, 30), J("a2", "A", 0, 1, 20), J("a3", "A", 0, 1, 10)]
    res = simulate(trace, shorthand_cluster("nodes:1:4"), make_policy("themis", lease_s=100.0))
    assert {r.job_id: r.jct_s for r in res.jobs} == {"a1": 30.0, "a2": 20.0, "a3": 10.0}


def test_gpus_an_app_no_longer_needs_are_given_back_before_its_lease_ends() -> None:
    """nodes:1:3, lease 1000 s. App A (three 1-GPU jobs of 10, 10, 100 s) takes all three GPUs
    at 0; app B (one 1-GPU job) arrives at 5. At 10 two of A's jobs finish and A sheds their
    GPUs, so B starts at 10, not when A's lease ends at 1000."""
    trace = [J("a1", "A", 0, 1, 10), J("a2", "A", 0, 1, 10), J("a3", "A", 0, 1, 100),
             J("b1", "B", 5, 1, 50)]  # fmt: skip
    res = simulate(trace, shorthand_cluster("nodes:1:3"), make_policy("themis", lease_s=1000.0))
    start = {r.job_id: r.start_s for r in res.jobs}
    assert start["b1"] == 10.0


def _contested_round(rule: str):
    """nodes:1:2, f = 0: two apps of one 2-GPU job each bid for the two free GPUs."""
    c = shorthand_cluster("nodes:1:2")
    jobs = (view("x", "X", 2, 100.0), view("y", "Y", 2, 50.0))
    policy = SimulatedAgents(Themis(fairness_knob=0.0, lease_s=60.0, rho_old=rule))
    snap = Snapshot(0.0, c, jobs)
    decision = policy.decide(snap)
    check_decision(snap, decision)
    return decision


def test_finite_rho_old_keeps_the_hidden_payment_under_contention() -> None:
    """With ρ_old = ∞ (the lexicographic rule) the winner pays nothing: it holds its GPUs for
    the whole lease. With the finite "one more lease" ρ_old both bidders are in the market, the
    winner's hidden payment c < 1 cuts its lease short, and the rest goes to the other app."""
    lex = _contested_round("infinite").policy_state.book.leases
    assert len(lex) == 1 and lex[0].end - lex[0].start == 60.0
    finite = _contested_round("one-lease").policy_state.book.leases
    won = [x for x in finite if x.source is not LeaseSource.LEFTOVER]
    assert len(won) == 1 and won[0].end - won[0].start < 60.0
    rest = [x for x in finite if x.source is LeaseSource.LEFTOVER]
    assert rest and rest[0].app_id != won[0].app_id and rest[0].start == won[0].end


def test_knobs_are_checked() -> None:
    with pytest.raises(ValueError, match="rho_old"):
        Themis(rho_old="zero")
    with pytest.raises(ValueError, match="filter_over"):
        Themis(filter_over="some")


@pytest.mark.parametrize("rule", ["one-lease", "infinite"])
@pytest.mark.parametrize("filter_over", ["all", "wanting"])
def test_every_rule_finishes_a_mixed_workload(rule: str, filter_over: str) -> None:
    trace = [J(f"a{i}", "A", 0, 1, 40 + 10 * i) for i in range(4)]
    trace += [J("b1", "B", 10, 2, 60), J("c1", "C", 20, 1, 30), J("c2", "C", 20, 1, 90)]
    policy = make_policy("themis", lease_s=30.0, rho_old=rule, filter_over=filter_over)
    res = simulate(trace, shorthand_cluster("nodes:2:2"), policy)
    assert all(r.finish_s is not None for r in res.jobs)


def test_docstring_examples() -> None:
    import doctest

    from arbiter import fairness
    from arbiter.sim import agents

    for module in (agents, fairness):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
