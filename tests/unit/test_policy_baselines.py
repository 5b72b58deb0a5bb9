"""``srtf`` (and SRSF), ``gandiva`` and ``optimus``: hand-derived traces with exact JCTs (the
derivations in the docstrings), the Tiresias Fig 3.7 toy for SRSF, invariants on random traces
through the simulator, and a property test per policy that a decision never breaks gang,
capacity or lease constraints.

All jobs use the 4-level locality model: rate 1 on one machine, 1/1.1 across machines, so
``work`` is seconds on one machine. (arrival, gang, work) triples name the jobs.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sim import SPANS, Invariants, random_trace

from arbiter.cluster import Cluster, shorthand_cluster
from arbiter.placement import placement_of
from arbiter.policies import make_policy
from arbiter.policies.base import Decision, JobView, Snapshot, check_decision, ideal_rate
from arbiter.policies.gandiva import Leases
from arbiter.sim.engine import SimResult, simulate
from arbiter.sim.perf import SimJob, SlowdownPerf

PERF = SlowdownPerf()


def J(job_id: str, arrival: float, gang: int, work: float) -> SimJob:
    return SimJob(job_id, arrival, gang, work, PERF)


class Log:
    """on_decision hook: checks every decision and records (now, {job: per-machine shape})."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.entries: list[tuple[float, dict[str, tuple[int, ...]]]] = []
        self.sets: list[dict[str, frozenset[str]]] = []

    def __call__(self, snap: Snapshot, decision: Decision) -> None:
        check_decision(snap, decision)
        shapes = {
            j: placement_of(self.cluster, g).per_machine for j, g in decision.allocation.items()
        }
        self.entries.append((snap.now, shapes))
        self.sets.append(dict(decision.allocation))


def sim(policy: str, jobs: list[SimJob], cluster: str, **knobs) -> tuple[SimResult, Log]:
    c = shorthand_cluster(cluster)
    log = Log(c)
    return simulate(jobs, c, make_policy(policy, **knobs), on_decision=log), log


def jcts(policy: str, jobs: list[SimJob], cluster: str, **knobs) -> dict[str, float]:
    res, _ = sim(policy, jobs, cluster, **knobs)
    return {r.job_id: round(r.jct_s, 9) for r in res.jobs}


def preemptions(res: SimResult) -> dict[str, int]:
    return {r.job_id: r.preemptions for r in res.jobs}


TOY = [J("J1", 0, 2, 2), J("J2", 0, 1, 8), J("J3", 0, 2, 6)]  # Tiresias Fig 3.7, nodes:1:2


def test_knobs_and_registry() -> None:
    assert make_policy("gandiva").lease_s == 600.0 and make_policy("optimus").lease_s == 600.0
    assert make_policy("gandiva").preemptive and not make_policy("gandiva", lease_s=None).preemptive
    assert not make_policy("optimus", lease_s=None).preemptive
    assert make_policy("srtf").round_s is None and make_policy("srtf", service=True).service
    for name in ("gandiva", "optimus"):
        for bad in (0.0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError, match="lease_s"):
                make_policy(name, lease_s=bad)


# --- srtf / srsf ----------------------------------------------------------------------------


def test_srsf_on_the_tiresias_toy() -> None:
    """Fig 3.7: one 2-GPU machine; J1 = (2 GPUs, 2), J2 = (1, 8), J3 = (2, 6) at t = 0.
    Remaining services 4, 8, 12: J1 [0,2); J2 (8) before J3 (12); J3 does not fit beside J2
    and waits: J2 [2,10), J3 [10,16). JCTs 2, 10, 16: average 28/3 (the seed's 9.3)."""
    got = jcts("srtf", TOY, "nodes:1:2", service=True)
    assert got == {"J1": 2.0, "J2": 10.0, "J3": 16.0}
    assert sum(got.values()) / 3 == 28 / 3


def test_srtf_ranks_by_time_not_service() -> None:
    """The same toy by remaining *time* (2, 8, 6): J1 [0,2), J3 [2,8), J2 [8,16): 26/3."""
    got = jcts("srtf", TOY, "nodes:1:2")
    assert got == {"J1": 2.0, "J2": 16.0, "J3": 8.0}
    assert sum(got.values()) / 3 == 26 / 3


def test_srtf_preempts_at_every_event() -> None:
    """nodes:1:2, a = (0, 2, 25), b = (5, 2, 12), c = (12, 1, 3).

    t=0: a runs. t=5: b (12) < a (20 left): b takes both GPUs, a is preempted.
    t=12: c (3) < b (5 left) < a (20): c is admitted (1 GPU); b (2) no longer fits: preempted,
    one GPU idles. c [12,15). t=15: b [15,20). t=20: a's last 20: [20,40).
    JCT a 40, b 15, c 3; a and b preempted once each. SRSF (services 40 / 10 / 3 at t = 12)
    makes the same choices.
    """
    trace = [J("a", 0, 2, 25), J("b", 5, 2, 12), J("c", 12, 1, 3)]
    for knobs in ({}, {"service": True}):
        res, log = sim("srtf", trace, "nodes:1:2", **knobs)
        assert {r.job_id: r.jct_s for r in res.jobs} == {"a": 40.0, "b": 15.0, "c": 3.0}
        assert preemptions(res) == {"a": 1, "b": 1, "c": 0}
        assert [(t, set(a)) for t, a in log.entries] == [
            (0.0, {"a"}), (5.0, {"b"}), (12.0, {"c"}), (15.0, {"b"}), (20.0, {"a"}),
        ]  # fmt: skip


def test_srtf_prices_remaining_work_at_the_ideal_rate() -> None:
    """nodes:2:2: a 4-GPU gang can only run spread (ideal rate 1/1.1). At t = 5 x (4 GPUs,
    work 10) has 10 x 1.1 = 11 s left on its best placement, y (1 GPU, 10.5 s) is shorter:
    y first, although x has less *work* left. x waits behind y for its gang: 4 GPUs are not free
    until y ends at 15.5, then x runs 11 s: ends 26.5 (JCT 21.5)."""
    got = jcts("srtf", [J("y", 5, 1, 10.5), J("x", 5, 4, 10)], "nodes:2:2")
    assert got == pytest.approx({"y": 10.5, "x": 21.5})


def _live(job_id: str, arrival: float, gang: int, **kw) -> JobView:
    return JobView(job_id, job_id, "q", arrival, gang, **kw)


def test_srtf_live_estimates_unreported_jobs_by_time_run() -> None:
    """Live arbiter: ``told`` reported 30 s left and holds both GPUs; an unreported job is
    estimated to need as long again as it has run (attained GPU-s / gang)."""
    cluster = shorthand_cluster("nodes:1:2")
    g = frozenset(cluster.gpu_ids)
    told = _live("told", 5.0, 2, held=g, attained_gpu_s=40.0, remaining_work=30.0, ideal_rate=1.0)
    new = _live("new", 8.0, 2)  # never ran: estimate 0, tried first, told is preempted
    d = make_policy("srtf").decide(Snapshot(10.0, cluster, (told, new)))
    assert dict(d.allocation) == {"new": g}
    old = _live("old", 0.0, 2, attained_gpu_s=70.0)  # ran 35 s: estimate 35 > 30
    d = make_policy("srtf").decide(Snapshot(10.0, cluster, (old, told)))
    assert dict(d.allocation) == {"told": g}
    # SRSF compares attained GPU-s 70 with 2 x 30 = 60: told still first; at 50 GPU-s old wins.
    srsf = make_policy("srtf", service=True)
    assert dict(srsf.decide(Snapshot(10.0, cluster, (old, told))).allocation) == {"told": g}
    old50 = _live("old", 0.0, 2, attained_gpu_s=50.0)
    assert set(srsf.decide(Snapshot(10.0, cluster, (old50, told))).allocation) == {"old"}


# --- gandiva ----------------------------------------------------------------------------------


def _split_free() -> list[SimJob]:
    """nodes:2:2. a, b, c, d (1 GPU each, arriving one by one) fill node-000 then node-001
    (best fit); a and c both end at 10, leaving one GPU free on each machine."""
    return [J("a", 0, 1, 10), J("b", 0.5, 1, 100), J("c", 1, 1, 9), J("d", 1.5, 1, 100)]


def test_gandiva_serves_the_best_placement_first() -> None:
    """At t = 10 y (gang 2, arrived 5) could only run spread (score 1/1.1), z (1 GPU, arrived
    6) fits perfectly (score 1): Gandiva serves z [10, 20); y gets the two free GPUs, spread, at
    20 and needs 20 x 1.1 = 22 s: ends 42 (JCT 37). FIFO does the opposite: y at 10 (ends 32,
    JCT 27), z after it [32, 42) (JCT 36). No lease ends before 600 s: same with or without."""
    jobs = [*_split_free(), J("y", 5, 2, 20), J("z", 6, 1, 10)]
    want = {"a": 10.0, "b": 100.0, "c": 9.0, "d": 100.0, "y": 37.0, "z": 14.0}
    assert jcts("gandiva", jobs, "nodes:2:2") == want
    assert jcts("gandiva", jobs, "nodes:2:2", lease_s=None) == want
    fifo = jcts("fifo", jobs, "nodes:2:2")
    assert (fifo["y"], fifo["z"]) == (27.0, 36.0)


def test_gandiva_min_score_waits_for_a_better_placement() -> None:
    """The same trace with min_score 0.95: y (score 1/1.1 < 0.95 on the split pool at 10 and
    again at 20, when z ends) declines and waits; at 100.5 b ends and frees node-000's second
    GPU: y takes node-000 whole [100.5, 120.5) (JCT 115.5)."""
    jobs = [*_split_free(), J("y", 5, 2, 20), J("z", 6, 1, 10)]
    got = jcts("gandiva", jobs, "nodes:2:2", min_score=0.95, lease_s=None)
    assert (got["z"], got["y"]) == (14.0, 115.5)


def test_gandiva_migrates_at_lease_end() -> None:
    """nodes:2:3 (two 3-GPU machines), lease 10 s; p = (0, 2, 5), q = (0, 2, 100),
    b = (1, 2, 20).

    t=0: p takes node-000 g0-g1 (best fit, tie to the first machine); q no longer fits node-000
    (1 free) and takes node-001 g0-g1. t=1: the free GPUs are node-000 g2 + node-001 g2: b runs
    spread at 1/1.1, lease [1, 11). t=5: p ends; b's lease is live, it stays. t=10: q renews on
    its own GPUs (as good as any). t=11: b's lease ends; offered node-000 g0-g1 (score 1) against
    its own (1/1.1) it migrates: 10/1.1 work done, 20 - 10/1.1 left at rate 1: ends at
    31 - 10/1.1 (JCT 30 - 100/11 = 20.909...). Without leases b stays spread: 22 s, JCT 22.
    """
    trace = [J("p", 0, 2, 5), J("q", 0, 2, 100), J("b", 1, 2, 20)]
    res, log = sim("gandiva", trace, "nodes:2:3", lease_s=10.0)
    got = {r.job_id: r.jct_s for r in res.jobs}
    assert got == pytest.approx({"p": 5.0, "q": 100.0, "b": 30 - 100 / 11}, abs=1e-9)
    shapes_b = [(t, a["b"]) for t, a in log.entries if "b" in a]
    assert shapes_b[:3] == [(1.0, (1, 1)), (5.0, (1, 1)), (10.0, (1, 1))]
    assert shapes_b[3] == (11.0, (2,))
    assert preemptions(res) == {"p": 0, "q": 0, "b": 0}
    assert len({a["q"] for a in log.sets if "q" in a}) == 1  # q renewed on its own GPUs
    nolease = jcts("gandiva", trace, "nodes:2:3", lease_s=None)
    assert nolease == {"p": 5.0, "q": 100.0, "b": 22.0}


# --- optimus ----------------------------------------------------------------------------------


def test_optimus_serves_the_shortest_offered_time_first() -> None:
    """nodes:1:2: a (10 s) and b (100 s) start at 0; u (50 s, arrived 5) and v (10 s, arrived
    6) wait. At 10 one GPU frees: Optimus serves v (10 s) before u: v [10,20) JCT 14, u
    [20,70) JCT 65. Gandiva (both score 1) goes by arrival: u [10,60) JCT 55, v [60,70) 64."""
    jobs = [J("a", 0, 1, 10), J("b", 0, 1, 100), J("u", 5, 1, 50), J("v", 6, 1, 10)]
    got = jcts("optimus", jobs, "nodes:1:2")
    assert (got["v"], got["u"]) == (14.0, 65.0)
    gan = jcts("gandiva", jobs, "nodes:1:2")
    assert (gan["u"], gan["v"]) == (55.0, 64.0)


def test_optimus_prices_the_offered_placement() -> None:
    """The split pool of :func:`_split_free` at t = 10: y (gang 2, 12 s on one machine) could
    only run spread, 13.2 s; z (1 GPU, 13 s) runs 13 s: z is served first [10, 23) (JCT 17),
    although y is shorter on its best placement; then y spread [23, 36.2) (JCT 31.2)."""
    jobs = [*_split_free(), J("y", 5, 2, 12), J("z", 6, 1, 13)]
    got = jcts("optimus", jobs, "nodes:2:2")
    assert got["z"] == 17.0
    assert got["y"] == pytest.approx(31.2, abs=1e-9)


def test_optimus_preempts_only_at_lease_ends() -> None:
    """nodes:1:2, lease 10 s, a = (0, 2, 25), b = (5, 2, 12), c = (12, 1, 3).

    t=0: a [0,10). t=5: b (12) is shorter than a (20 left) but a's lease is live: b waits.
    t=10: a's lease ends: b 12 < a 15: b takes both GPUs [10, 20), a is preempted. t=12: c
    waits (b's lease). t=20: b (2 left) < c (3) < a (15): b renews and ends at 22. t=22: c takes
    one GPU, a (2) does not fit the other: c [22, 25). t=25: a [25, 40).
    JCT a 40, b 17, c 13 (average 70/3; srtf: 58/3). Stale wake-ups (30, 32: leases of jobs
    already done) change nothing. Without leases (never preempts): a
    [0, 25); at 25 c (3) before b (12): c [25, 28), b waits for both GPUs [28, 40):
    JCT a 25, b 35, c 16.
    """
    trace = [J("a", 0, 2, 25), J("b", 5, 2, 12), J("c", 12, 1, 3)]
    res, log = sim("optimus", trace, "nodes:1:2", lease_s=10.0)
    assert {r.job_id: r.jct_s for r in res.jobs} == {"a": 40.0, "b": 17.0, "c": 13.0}
    assert preemptions(res) == {"a": 1, "b": 0, "c": 0}
    assert [(t, set(a)) for t, a in log.entries] == [
        (0.0, {"a"}), (5.0, {"a"}), (10.0, {"b"}), (12.0, {"b"}), (20.0, {"b"}),
        (22.0, {"c"}), (25.0, {"a"}), (30.0, {"a"}), (32.0, {"a"}), (35.0, {"a"}),
    ]  # fmt: skip
    assert jcts("optimus", trace, "nodes:1:2", lease_s=None) == {"a": 25.0, "b": 35.0, "c": 16.0}


def test_optimus_per_gpu_is_srsf_on_the_toy() -> None:
    """No arrivals after 0 and nothing to re-place, so Optimus is SRTF / SRSF here: 26/3 by
    offered time, 28/3 per GPU (gang x time)."""
    assert jcts("optimus", TOY, "nodes:1:2") == {"J1": 2.0, "J2": 16.0, "J3": 8.0}
    assert jcts("optimus", TOY, "nodes:1:2", per_gpu=True) == {"J1": 2.0, "J2": 10.0, "J3": 16.0}


def test_optimus_live_uses_the_locality_model() -> None:
    """Live (no perf model): on nodes:2:2 with one GPU free per machine, x (gang 2, reported
    10 s) would run spread, 10 x 1.1 = 11 s, y (1 GPU, reported 10.5 s) 10.5 s: y first; x then
    does not fit the single GPU left."""
    cluster = shorthand_cluster("nodes:2:2")
    g = sorted(cluster.gpu_ids, key=cluster.index)
    busy = _live("busy", 0.0, 2, held=frozenset({g[0], g[2]}), remaining_work=99.0, ideal_rate=1.0)
    x = _live("x", 1.0, 2, remaining_work=10.0, ideal_rate=1.0)
    y = _live("y", 2.0, 1, remaining_work=10.5, ideal_rate=1.0)
    state = Leases({"busy": 500.0})
    d = make_policy("optimus").decide(Snapshot(10.0, cluster, (busy, x, y), state))
    assert set(d.allocation) == {"busy", "y"}
    assert d.policy_state.ends == {"busy": 500.0, "y": 610.0} and d.wake_at == 500.0


# --- invariants on random traces --------------------------------------------------------------

CASES = [
    ("srtf", {}), ("srtf", {"service": True}),
    ("gandiva", {"lease_s": 40.0}), ("gandiva", {"lease_s": None}),
    ("optimus", {"lease_s": 40.0}), ("optimus", {"lease_s": None, "per_gpu": True}),
]  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("name", "knobs"), CASES)
def test_invariants_on_random_traces(name: str, knobs: dict, seed: int) -> None:
    """The engine's invariant checker on every decision and on the result; all three policies
    are work-conserving (no waiting gang fits in what is left free). Without leases Gandiva and
    Optimus never preempt; with leases they re-decide only at arrivals, completions and lease
    ends, and a live lease is never cut."""
    cluster = shorthand_cluster(("nodes:2:4", "nodes:3:2")[seed % 2])
    jobs = random_trace(700 + seed, 25, (1, 1, 2, 3, 4), SPANS[seed % 3])
    inv = Invariants(cluster, jobs, partial=False, conserving=True)
    lease_s = knobs.get("lease_s")
    leases_ok = []

    def hook(snap: Snapshot, decision: Decision) -> None:
        inv(snap, decision)
        if name != "srtf" and lease_s is not None:
            ends = snap.policy_state.ends if isinstance(snap.policy_state, Leases) else {}
            for j in snap.jobs:  # a job whose lease is live keeps exactly its GPUs
                if j.running and ends.get(j.job_id, -1.0) > snap.now + 1e-9:
                    assert decision.allocation.get(j.job_id) == j.held
            for j, end in decision.policy_state.ends.items():
                assert j in decision.allocation and snap.now < end <= snap.now + lease_s
            leases_ok.append(True)

    res = simulate(jobs, cluster, make_policy(name, **knobs), on_decision=hook)
    inv.check_result(jobs, res)
    if name != "srtf" and lease_s is None:
        assert all(r.preemptions == 0 for r in res.jobs)
    if leases_ok:
        assert len(leases_ok) == res.decisions


# --- properties: any snapshot, any state ------------------------------------------------------


@st.composite
def snapshots(draw):
    cluster = shorthand_cluster(draw(st.sampled_from(("nodes:2:4", "nodes:3:2", "nodes:1:8"))))
    gpus = sorted(cluster.gpu_ids, key=cluster.index)
    free = draw(st.permutations(gpus))
    now = draw(st.floats(0, 1e5))
    jobs, ends = [], {}
    for k in range(draw(st.integers(0, 8))):
        gang = draw(st.integers(1, cluster.num_gpus + 1))  # one size too big: must never run
        running = draw(st.booleans()) and len(free) >= gang
        held = frozenset(free[:gang]) if running else frozenset()
        free = free[gang:] if running else free
        if running and draw(st.booleans()):
            ends[f"j{k}"] = now + draw(st.sampled_from((-5.0, 0.0, 1.0, 300.0)))
        known = draw(st.booleans())
        jobs.append(
            JobView(
                f"j{k}", f"j{k}", "q", float(k), gang, held=held,
                attained_gpu_s=draw(st.floats(0, 1e4)),
                remaining_work=draw(st.floats(1, 1e4)) if draw(st.booleans()) else None,
                perf=PERF if known else None,
                ideal_rate=(
                    ideal_rate(cluster, gang, PERF) if known and gang <= cluster.num_gpus
                    else None
                ),
            )
        )  # fmt: skip
    return Snapshot(now, cluster, tuple(jobs), Leases(ends))


POLICY_KNOBS = [
    ("srtf", {}), ("srtf", {"service": True}),
    ("gandiva", {}), ("gandiva", {"lease_s": None, "min_score": 0.95}),
    ("optimus", {}), ("optimus", {"lease_s": None, "per_gpu": True}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "knobs"), POLICY_KNOBS)
@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(snap=snapshots())
def test_decisions_keep_gang_capacity_and_leases(name: str, knobs: dict, snap: Snapshot) -> None:
    policy = make_policy(name, **knobs)
    d = policy.decide(snap)
    check_decision(snap, d)  # known GPUs, each once, no gang exceeded, only active jobs
    gang = {j.job_id: j.gang for j in snap.jobs}
    assert all(len(g) == gang[j] for j, g in d.allocation.items())  # whole gangs only
    assert sum(len(g) for g in d.allocation.values()) <= snap.cluster.num_gpus
    if name == "srtf":
        return
    lease_s = knobs.get("lease_s", 600.0)
    for j in snap.jobs:
        live = snap.policy_state.ends.get(j.job_id, -math.inf) > snap.now + 1e-9
        if j.running and (lease_s is None or live):  # a live lease (or no leases): kept
            assert d.allocation.get(j.job_id) == j.held
    if lease_s is None:
        assert d.policy_state is None and d.wake_at is None
    else:
        assert set(d.policy_state.ends) == set(d.allocation)
        assert all(snap.now < e <= snap.now + lease_s for e in d.policy_state.ends.values())
        assert d.wake_at == min(d.policy_state.ends.values(), default=None)
